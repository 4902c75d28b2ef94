//! The sandbox API server: built in its own commit.
