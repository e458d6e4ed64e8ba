//! The error type of the block store.

use std::io;

/// The result type of the block store.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a block-store operation failed. `Corruption` (a checksum or structural check failed on persistent bytes)
/// is kept apart from `Io` (the media or file system refused an operation).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file system below the store failed.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// Persistent state is inconsistent.
    #[error("corruption: {0}")]
    Corruption(String),
    /// A bad argument (volume name, size, option).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A byte range outside the volume.
    #[error("range {offset}+{len} is outside the volume of {size} bytes")]
    OutOfRange {
        /// First byte of the request.
        offset: u64,
        /// Length of the request.
        len: u64,
        /// Size of the volume.
        size: u64,
    },
    /// No volume of that name exists in the store.
    #[error("no volume named {0:?}")]
    NoSuchVolume(String),
    /// A volume of that name exists already.
    #[error("volume {0:?} exists already")]
    VolumeExists(String),
    /// An earlier write-path I/O failure left the volume's in-memory state ahead of its files; the volume refuses
    /// further writes until it is reopened (which recovers from the files).
    #[error("the volume failed earlier and must be reopened: {0}")]
    Poisoned(String),
}

impl From<Error> for nbd::Error {
    fn from(e: Error) -> nbd::Error {
        match e {
            Error::Io(e) => nbd::Error::Io(e),
            Error::Corruption(m) => nbd::Error::Corruption(m),
            Error::InvalidArgument(m) => nbd::Error::InvalidArgument(m),
            Error::OutOfRange { offset, len, size } => nbd::Error::OutOfRange { offset, len, size },
            other => nbd::Error::Io(io::Error::other(other.to_string())),
        }
    }
}
