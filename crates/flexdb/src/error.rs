//! The error type of FlexDB: corruption is kept apart from I/O failures and from bad arguments.

use std::io;

/// The result type of every fallible FlexDB call.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The storage failed.
    #[error("i/o error: {0}")]
    Io(io::Error),
    /// A file (WAL, table) contradicts its checksums or the store's invariants.
    #[error("corruption in {file}: {msg}")]
    Corruption {
        /// Which file or structure (`wal`, `table`, `index`).
        file: &'static str,
        /// What was found.
        msg: String,
    },
    /// A call outside the API contract (bad options, missing database, oversized key).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The background committer failed earlier; the store refuses writes (reads still work). Reopen to recover.
    #[error("background error: {0}")]
    Background(String),
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

impl From<flexfile::Error> for Error {
    fn from(e: flexfile::Error) -> Self {
        match e {
            flexfile::Error::Io(e) | flexfile::Error::NoSpace(e) => Error::Io(e),
            flexfile::Error::Corruption { file, msg } => {
                Error::Corruption { file, msg: format!("flexfile {file}: {msg}") }
            }
            flexfile::Error::InvalidArgument(m) => Error::InvalidArgument(m),
            other => Error::Background(other.to_string()),
        }
    }
}

impl Error {
    /// A corruption error found in `file`.
    pub fn corruption(file: &'static str, msg: impl Into<String>) -> Self {
        Error::Corruption { file, msg: msg.into() }
    }

    /// An invalid-argument error.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }

    /// Whether this is corruption (as opposed to I/O or a bad call).
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// A short stable name of the kind: `io`, `corruption`, `invalid`, `background`.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Error::Io(_) => "io",
            Error::Corruption { .. } => "corruption",
            Error::InvalidArgument(_) => "invalid",
            Error::Background(_) => "background",
        }
    }
}
