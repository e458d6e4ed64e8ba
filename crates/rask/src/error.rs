//! The crate's error type.

/// Errors RASK reports. The index is in memory, so there is no I/O or corruption variant: every error is bad
/// input from the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A range whose first block is after its last, or whose length passes the end of the address space.
    #[error("invalid block range [{first}, {last}]")]
    InvalidRange {
        /// The requested first block.
        first: u64,
        /// The requested last block.
        last: u64,
    },
    /// An option out of its documented bounds.
    #[error("invalid option {name}: {reason}")]
    InvalidOption {
        /// The option's field name.
        name: &'static str,
        /// Why it was rejected.
        reason: String,
    },
}
