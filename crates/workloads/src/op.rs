//! The operations a key-value workload issues.

/// One operation of a workload. Keys are final u64 keys (after [`crate::KeyOrder`]); encode them with
/// [`crate::KeyEncoding`] for byte-keyed engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Insert a new key with a value of `value_len` bytes.
    Insert {
        /// The key.
        key: u64,
        /// Value length in bytes.
        value_len: u32,
    },
    /// Overwrite an existing key.
    Update {
        /// The key.
        key: u64,
        /// Value length in bytes.
        value_len: u32,
    },
    /// Point lookup.
    Read {
        /// The key.
        key: u64,
    },
    /// Ordered range iteration over `len` records starting at the first key `>= start`.
    Scan {
        /// First key.
        start: u64,
        /// Number of records.
        len: u32,
    },
    /// Range map: visit the same `len` records as a scan, in any order.
    MapRange {
        /// First key.
        start: u64,
        /// Number of records.
        len: u32,
    },
    /// Read a key, then write it back (YCSB F).
    ReadModifyWrite {
        /// The key.
        key: u64,
        /// Length of the value written back.
        value_len: u32,
    },
    /// Delete one key.
    Delete {
        /// The key.
        key: u64,
    },
    /// Delete every key in `[start, end)`.
    DeleteRange {
        /// First key deleted.
        start: u64,
        /// First key not deleted.
        end: u64,
    },
}

impl Op {
    /// The operation's kind.
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Insert { .. } => OpKind::Insert,
            Op::Update { .. } => OpKind::Update,
            Op::Read { .. } => OpKind::Read,
            Op::Scan { .. } => OpKind::Scan,
            Op::MapRange { .. } => OpKind::MapRange,
            Op::ReadModifyWrite { .. } => OpKind::ReadModifyWrite,
            Op::Delete { .. } => OpKind::Delete,
            Op::DeleteRange { .. } => OpKind::DeleteRange,
        }
    }

    /// The key the operation targets (range operations: their first key).
    pub fn key(&self) -> u64 {
        match *self {
            Op::Insert { key, .. }
            | Op::Update { key, .. }
            | Op::Read { key }
            | Op::ReadModifyWrite { key, .. }
            | Op::Delete { key } => key,
            Op::Scan { start, .. } | Op::MapRange { start, .. } | Op::DeleteRange { start, .. } => start,
        }
    }
}

/// The kind of an [`Op`], in YCSB's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// [`Op::Read`].
    Read,
    /// [`Op::Update`].
    Update,
    /// [`Op::Insert`].
    Insert,
    /// [`Op::Scan`].
    Scan,
    /// [`Op::ReadModifyWrite`].
    ReadModifyWrite,
    /// [`Op::MapRange`].
    MapRange,
    /// [`Op::Delete`].
    Delete,
    /// [`Op::DeleteRange`].
    DeleteRange,
}

impl OpKind {
    /// Every kind, in the order the mix is laid out.
    pub const ALL: [OpKind; 8] = [
        OpKind::Read,
        OpKind::Update,
        OpKind::Insert,
        OpKind::Scan,
        OpKind::ReadModifyWrite,
        OpKind::MapRange,
        OpKind::Delete,
        OpKind::DeleteRange,
    ];
}
