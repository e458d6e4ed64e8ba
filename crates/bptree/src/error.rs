//! The crate's error type.

/// Errors of the BP-tree. The tree is in memory, so there is no I/O or corruption variant: every error is a caller
/// mistake reported instead of a panic.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// An [`crate::Options`] field is out of its documented range.
    #[error("invalid options: {0}")]
    InvalidOptions(String),
    /// `bulk_load` was given keys that are not strictly increasing.
    #[error("bulk_load input is not strictly increasing at position {0}")]
    UnsortedInput(usize),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;
