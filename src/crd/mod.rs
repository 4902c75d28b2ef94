//! Ferry's custom resources.
