//! The crate's error type for generator configuration. Trace parsing has its own, richer error
//! ([`crate::traces::TraceError`]).

/// A generator was configured with parameters it cannot honour.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A parameter is out of range or inconsistent with another; the message names it.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl Error {
    /// The message without the kind's prefix, for wrapping in another error that names the kind itself.
    pub fn message(&self) -> &str {
        match self {
            Error::InvalidArgument(m) => m,
        }
    }
}
