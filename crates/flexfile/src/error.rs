//! The error type of the crate: corruption is kept apart from I/O failures and from bad arguments.

use std::io;

/// The result type of every fallible FlexTree and FlexFile call.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong. Callers match on the kind: `Io` is the storage failing (retry or give up),
/// `Corruption` is the files contradicting their checksums or invariants (never retry), `InvalidArgument` is a
/// call outside the contract (offset past the end, length overflow), `NoSpace` is `ENOSPC` from the storage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The storage failed (EIO and friends). The in-memory state may be ahead of the files; reopen to recover.
    #[error("i/o error: {0}")]
    Io(io::Error),
    /// The storage is full (ENOSPC). Nothing acknowledged by an earlier `sync` is affected.
    #[error("no space left on the storage: {0}")]
    NoSpace(io::Error),
    /// A file contradicts its checksums or the structure's invariants.
    #[error("corruption in {file}: {msg}")]
    Corruption {
        /// Which file (`tree`, `log`, `data`) or structure the damage was found in.
        file: &'static str,
        /// What was found.
        msg: String,
    },
    /// A call outside the API contract.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The FlexFile is unusable after an earlier I/O failure; reopen it.
    #[error("the file is poisoned by an earlier failure; reopen it")]
    Poisoned,
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        if vfs::is_no_space(&e) { Error::NoSpace(e) } else { Error::Io(e) }
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

    /// A short stable name of the kind: `io`, `nospace`, `corruption`, `invalid`, `poisoned`.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Error::Io(_) => "io",
            Error::NoSpace(_) => "nospace",
            Error::Corruption { .. } => "corruption",
            Error::InvalidArgument(_) => "invalid",
            Error::Poisoned => "poisoned",
        }
    }
}
