//! Cost and load metrics.
