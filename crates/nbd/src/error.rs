//! The error type of the NBD crate: what a device operation or the server can fail with.
//!
//! Device errors travel back to the client as an NBD error value ([`Error::nbd_errno`]); the mapping follows
//! proto.md's "Error values": out-of-space (also `EDQUOT`, `EFBIG`) is `NBD_ENOSPC`, read-only is `NBD_EPERM`,
//! bad arguments are `NBD_EINVAL`, and every I/O failure or detected corruption is `NBD_EIO`. Corruption stays a
//! distinct variant so the server's counters and logs keep it apart from media errors.

use std::io;

use crate::protocol::errno;

/// The result type of device operations and of the server.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a device operation or a server call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The storage below the device failed.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// The device found its persistent state inconsistent (a checksum or structural check failed).
    #[error("corruption: {0}")]
    Corruption(String),
    /// An argument is invalid (bad alignment, zero size, a bad option value...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The range `offset..offset + len` does not lie inside a device of `size` bytes.
    #[error("range {offset}+{len} is outside the device of {size} bytes")]
    OutOfRange {
        /// First byte of the request.
        offset: u64,
        /// Length of the request in bytes.
        len: u64,
        /// Size of the device.
        size: u64,
    },
    /// The device (or export) accepts no writes.
    #[error("the device is read-only")]
    ReadOnly,
    /// The device does not implement the operation (or, for a fast write-zeroes, cannot do it fast).
    #[error("operation not supported: {0}")]
    Unsupported(&'static str),
    /// No space is left below the device.
    #[error("no space left on the device")]
    NoSpace,
    /// The server is shutting down.
    #[error("the server is shutting down")]
    Shutdown,
}

impl Error {
    /// The NBD error value sent to a client for this error (proto.md, "Error values").
    pub fn nbd_errno(&self) -> u32 {
        match self {
            Error::Io(e) if is_no_space(e) => errno::ENOSPC,
            Error::Io(e)
                if e.raw_os_error() == Some(libc::EPERM) || e.raw_os_error() == Some(libc::EROFS) =>
            {
                errno::EPERM
            }
            Error::Io(_) | Error::Corruption(_) => errno::EIO,
            Error::InvalidArgument(_) => errno::EINVAL,
            Error::OutOfRange { .. } => errno::EINVAL,
            Error::ReadOnly => errno::EPERM,
            Error::Unsupported(_) => errno::ENOTSUP,
            Error::NoSpace => errno::ENOSPC,
            Error::Shutdown => errno::ESHUTDOWN,
        }
    }

    /// Whether this error reports corruption (as opposed to an I/O failure or bad input).
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption(_))
    }
}

/// ENOSPC, and the two errors proto.md asks servers to report as ENOSPC: EDQUOT and EFBIG.
fn is_no_space(e: &io::Error) -> bool {
    vfs::is_no_space(e) || matches!(e.raw_os_error(), Some(libc::EDQUOT) | Some(libc::EFBIG))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_mapping_follows_proto_md() {
        assert_eq!(Error::Io(io::Error::from_raw_os_error(libc::ENOSPC)).nbd_errno(), errno::ENOSPC);
        assert_eq!(Error::Io(io::Error::from_raw_os_error(libc::EDQUOT)).nbd_errno(), errno::ENOSPC);
        assert_eq!(Error::Io(io::Error::from_raw_os_error(libc::EFBIG)).nbd_errno(), errno::ENOSPC);
        assert_eq!(Error::Io(io::Error::from_raw_os_error(libc::EIO)).nbd_errno(), errno::EIO);
        assert_eq!(Error::Corruption("x".into()).nbd_errno(), errno::EIO);
        assert_eq!(Error::ReadOnly.nbd_errno(), errno::EPERM);
        assert_eq!(Error::Unsupported("x").nbd_errno(), errno::ENOTSUP);
        assert_eq!(Error::Shutdown.nbd_errno(), errno::ESHUTDOWN);
        assert!(Error::Corruption("x".into()).is_corruption());
        assert!(!Error::Io(io::Error::other("x")).is_corruption());
    }
}
