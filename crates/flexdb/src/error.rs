//! The error type of FlexDB: corruption is kept apart from I/O failures and from bad arguments.

use std::io;
use std::sync::Arc;

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
    /// A commit or a log append failed earlier with the error inside (an I/O error or corruption); the store
    /// refuses writes from then on; reads that reach a table whose change failed get that failure this way
    /// too (see [`crate::Db`]).
    /// [`crate::Db::resume`] or a reopen recovers.
    #[error("background error, writes stopped: {0}")]
    Background(Arc<Error>),
    /// The table's FlexFile refuses service after an earlier failure. The table and the store report that
    /// failure instead, as [`Error::Background`].
    #[error("the table file is poisoned by an earlier failure; reopen it")]
    Poisoned,
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
            flexfile::Error::Poisoned => Error::Poisoned,
            // `flexfile::Error` is non-exhaustive; a kind added later is a failure of the storage until mapped.
            other => Error::Io(io::Error::other(other.to_string())),
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

    /// Whether this is (or, as a background error, wraps) corruption, as opposed to I/O or a bad call.
    pub fn is_corruption(&self) -> bool {
        match self {
            Error::Corruption { .. } => true,
            Error::Background(e) => e.is_corruption(),
            _ => false,
        }
    }

    /// Whether this is (or, as a background error, wraps) an I/O error.
    pub fn is_io(&self) -> bool {
        match self {
            Error::Io(_) => true,
            Error::Background(e) => e.is_io(),
            _ => false,
        }
    }

    /// A short stable name of the kind: `io`, `corruption`, `invalid`, `background`, `poisoned`.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Error::Io(_) => "io",
            Error::Corruption { .. } => "corruption",
            Error::InvalidArgument(_) => "invalid",
            Error::Background(_) => "background",
            Error::Poisoned => "poisoned",
        }
    }

    /// A copy of the failure itself, to keep and hand to later callers: a background error's cause, else this
    /// error.
    pub(crate) fn cause_copy(&self) -> Error {
        match self {
            Error::Background(cause) => cause.duplicate(),
            e => e.duplicate(),
        }
    }

    /// A copy to hand to another caller. `io::Error` is not `Clone`: a copy keeps its kind and message.
    fn duplicate(&self) -> Error {
        match self {
            Error::Io(e) => Error::Io(io::Error::new(e.kind(), e.to_string())),
            Error::Corruption { file, msg } => Error::Corruption { file, msg: msg.clone() },
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::Background(e) => Error::Background(e.clone()),
            Error::Poisoned => Error::Poisoned,
        }
    }
}
