//! What can go wrong before a simulation runs. Policy failures during a run
//! are not errors: they are counted in the results.

use std::path::PathBuf;

/// A problem in the scenario file: where it is and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    pub file: String,
    /// 1-based; 0 when unknown.
    pub line: u64,
    pub column: u64,
    /// The field, from the document's root: `clusters[1].prices.cpuCoreHour`.
    pub field: String,
    pub message: String,
}

impl Located {
    pub(crate) fn new(
        file: &str,
        location: serde_saphyr::Location,
        field: &str,
        message: String,
    ) -> Self {
        Located {
            file: file.to_owned(),
            line: location.line(),
            column: location.column(),
            field: field.to_owned(),
            message,
        }
    }
}

impl std::fmt::Display for Located {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}: {}",
            self.file, self.line, self.column, self.field, self.message
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The YAML does not fit the scenario format (syntax, types, unknown
    /// fields); the parser's message carries line and column.
    #[error("{file}: {message}")]
    Syntax {
        file: String,
        line: u64,
        column: u64,
        message: String,
    },
    /// A value is well-formed but not allowed.
    #[error("{0}")]
    Invalid(Located),
    #[error("{file}:{line}: {message}")]
    Csv {
        file: String,
        line: usize,
        message: String,
    },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The line at fault in the scenario, when known.
    pub fn line(&self) -> Option<u64> {
        match self {
            Error::Syntax { line, .. } => Some(*line),
            Error::Invalid(located) => Some(located.line),
            _ => None,
        }
    }

    /// The field at fault, when known.
    pub fn field(&self) -> Option<&str> {
        match self {
            Error::Invalid(located) => Some(&located.field),
            _ => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
