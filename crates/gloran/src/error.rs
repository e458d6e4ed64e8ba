//! The crate's error type: I/O failures kept apart from corruption and from bad arguments.

use std::path::PathBuf;

/// Everything the global range-record index can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The storage layer failed; the bytes on disk may be fine.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Bytes read back are not what was written: a checksum mismatch, an impossible length, a broken order.
    #[error("corruption in {}: {msg}", path.as_ref().map_or_else(|| "<buffer>".into(), |p| p.display().to_string()))]
    Corruption {
        /// The file the bad bytes came from, when known.
        path: Option<PathBuf>,
        /// What was wrong.
        msg: String,
    },
    /// The caller broke a documented contract (an empty range, bad options, a missing file in the live set).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A corruption error without a known file (the decoder attaches the path later).
    pub fn corrupt(msg: impl Into<String>) -> Self {
        Error::Corruption { path: None, msg: msg.into() }
    }

    /// Attaches `path` to a corruption error that has none.
    pub fn in_file(self, p: &std::path::Path) -> Self {
        match self {
            Error::Corruption { path: None, msg } => Error::Corruption { path: Some(p.to_path_buf()), msg },
            e => e,
        }
    }

    /// Whether this is a corruption error.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}
