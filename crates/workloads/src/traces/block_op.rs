//! The unit every trace tool speaks: one I/O on an inclusive block range of one volume.

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IoKind {
    /// A read: `get([first_block, last_block])` in a replay.
    Read,
    /// A write: `put([first_block, last_block], ...)` in a replay.
    Write,
}

/// One block I/O. Invariant: `first_block <= last_block`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockOp {
    /// Dense volume id (see [`crate::traces::Volumes`]).
    pub volume: u32,
    /// Read or write.
    pub kind: IoKind,
    /// First block, inclusive.
    pub first_block: u64,
    /// Last block, inclusive.
    pub last_block: u64,
}

impl BlockOp {
    /// Number of blocks (at least 1).
    #[inline]
    pub fn blocks(&self) -> u64 {
        self.last_block - self.first_block + 1
    }

    /// Whether this is a write.
    #[inline]
    pub fn is_write(&self) -> bool {
        self.kind == IoKind::Write
    }
}

/// Splits a stream into one stream per volume (indexed by volume id), keeping each volume's order.
pub fn split_by_volume(ops: impl IntoIterator<Item = BlockOp>) -> Vec<Vec<BlockOp>> {
    let mut out: Vec<Vec<BlockOp>> = Vec::new();
    for op in ops {
        let v = op.volume as usize;
        if out.len() <= v {
            out.resize_with(v + 1, Vec::new);
        }
        out[v].push(op);
    }
    out
}
