//! (rows to come)
