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
    /// An earlier write-path failure left the volume's in-memory state ahead of its files, so it refuses writes and
    /// flushes until it recovers from them: by a reopen, by [`Volume::recover`](crate::Volume::recover), or by
    /// itself after running out of space (see `Volume::recover`).
    #[error("the volume stopped after a write-path failure{}: {message}", if *.no_space { " (out of space)" } else { "" })]
    Poisoned {
        /// The failure that stopped it.
        message: String,
        /// The failure was the file system running out of space or quota.
        no_space: bool,
    },
}

impl From<Error> for nbd::Error {
    fn from(e: Error) -> nbd::Error {
        match e {
            Error::Io(e) => nbd::Error::Io(e),
            Error::Corruption(m) => nbd::Error::Corruption(m),
            Error::InvalidArgument(m) => nbd::Error::InvalidArgument(m),
            Error::OutOfRange { offset, len, size } => nbd::Error::OutOfRange { offset, len, size },
            // Clients treat ENOSPC apart from EIO (QEMU's default `werror=enospc` pauses the guest until the
            // operator freed space, then retries): the volume recovers by itself once space is back.
            e @ Error::Poisoned { no_space: true, .. } => {
                nbd::Error::Io(io::Error::new(io::ErrorKind::StorageFull, e.to_string()))
            }
            other => nbd::Error::Io(io::Error::other(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nbd::protocol::errno;

    /// A volume stopped for lack of space answers NBD clients ENOSPC, which QEMU (`werror=enospc`) handles by
    /// pausing the guest and retrying later, not EIO, which the guest takes as a failed disk.
    #[test]
    fn a_volume_stopped_for_lack_of_space_answers_enospc_over_nbd() {
        let stopped = |no_space| Error::Poisoned { message: "full".into(), no_space };
        assert_eq!(nbd::Error::from(stopped(true)).nbd_errno(), errno::ENOSPC);
        assert_eq!(nbd::Error::from(stopped(false)).nbd_errno(), errno::EIO);
        let full = Error::Io(io::Error::new(io::ErrorKind::StorageFull, "full"));
        assert_eq!(nbd::Error::from(full).nbd_errno(), errno::ENOSPC);
    }
}
