//! The engine's error type. `Corruption` (bytes on storage that fail a checksum, a magic number or a structural
//! check) is kept apart from `Io` (the device or file system failed), because the remedies differ: corruption
//! needs repair or restore, an I/O error may pass.

use std::io;
use std::sync::Arc;

/// Every fallible call of the engine returns this.
pub type Result<T> = std::result::Result<T, Error>;

/// What went wrong.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file system failed. Shared so a background error can be returned to many callers.
    #[error("I/O error: {0}")]
    Io(Arc<io::Error>),
    /// Persistent bytes failed a checksum or a structural check.
    #[error("corruption in {file}: {msg}")]
    Corruption {
        /// The file (name within the database directory) or structure that is damaged.
        file: String,
        /// What check failed.
        msg: String,
    },
    /// The caller passed something the engine cannot accept (bad option, empty range...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A background flush or compaction (or a WAL write) failed earlier; the database refuses writes until
    /// [`crate::Db::resume`] succeeds or it is reopened. Reads keep working.
    #[error("background error, writes stopped: {0}")]
    Background(Box<Error>),
    /// The database is closed or closing.
    #[error("database is closed")]
    Closed,
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(Arc::new(e))
    }
}

impl Error {
    /// A corruption error for `file`.
    pub fn corruption(file: impl Into<String>, msg: impl Into<String>) -> Error {
        Error::Corruption { file: file.into(), msg: msg.into() }
    }

    /// Whether this is (or wraps) a corruption error.
    pub fn is_corruption(&self) -> bool {
        match self {
            Error::Corruption { .. } => true,
            Error::Background(e) => e.is_corruption(),
            _ => false,
        }
    }

    /// Whether this is (or wraps) an I/O error.
    pub fn is_io(&self) -> bool {
        match self {
            Error::Io(_) => true,
            Error::Background(e) => e.is_io(),
            _ => false,
        }
    }

    /// A short kind name: `io`, `corruption`, `invalid`, `background`, `closed`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Io(_) => "io",
            Error::Corruption { .. } => "corruption",
            Error::InvalidArgument(_) => "invalid",
            Error::Background(_) => "background",
            Error::Closed => "closed",
        }
    }
}
