//! Trace errors: what went wrong on which line, kept apart from I/O failures and corrupt compression.

use std::fmt;

/// Why one trace line could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LineError {
    /// The line does not have the format's number of comma-separated fields.
    FieldCount {
        /// Fields the format has.
        expected: usize,
        /// Fields found.
        found: usize,
    },
    /// A numeric field is not a number (or overflows 64 bits).
    BadNumber {
        /// The field's name in the format description.
        field: &'static str,
    },
    /// A field that must not be empty is.
    EmptyField {
        /// The field's name.
        field: &'static str,
    },
    /// The read/write field is not one the format allows.
    BadOpcode,
    /// The request has length zero: it touches no block.
    ZeroLength,
    /// Offset plus length (or a sector-to-byte conversion) overflows 64 bits.
    Overflow,
    /// The line is not valid UTF-8 or contains control characters.
    BadEncoding,
    /// The line is longer than any valid line of the format could be.
    TooLong {
        /// Bytes on the line.
        len: usize,
    },
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LineError::FieldCount { expected, found } => {
                write!(f, "expected {expected} fields, found {found}")
            }
            LineError::BadNumber { field } => write!(f, "field `{field}` is not a valid number"),
            LineError::EmptyField { field } => write!(f, "field `{field}` is empty"),
            LineError::BadOpcode => write!(f, "unknown read/write code"),
            LineError::ZeroLength => write!(f, "zero-length request"),
            LineError::Overflow => write!(f, "offset or length overflows 64 bits"),
            LineError::BadEncoding => write!(f, "line is not printable UTF-8"),
            LineError::TooLong { len } => write!(f, "line of {len} bytes is too long"),
        }
    }
}

/// A trace could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// Reading the underlying file failed.
    #[error("I/O error reading the trace: {0}")]
    Io(#[from] std::io::Error),
    /// The gzip stream is corrupt or truncated (the trace's bytes are wrong, not the device).
    #[error("corrupt gzip stream near line {line}: {detail}")]
    Corrupt {
        /// The line being read when the stream broke (1-based).
        line: u64,
        /// The decoder's message.
        detail: String,
    },
    /// A line is malformed (strict mode).
    #[error("line {line}: {error}")]
    Malformed {
        /// 1-based line number.
        line: u64,
        /// What is wrong with it.
        error: LineError,
    },
    /// The options are invalid (e.g. a block size of zero).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}
