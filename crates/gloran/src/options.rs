//! Options of the global range-record index, with the paper's defaults.

use crate::error::{Error, Result};
use crate::estimator::EstimatorOptions;

/// How the LSM-DRtree is shaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexOptions {
    /// Bytes of range records the in-memory R-tree buffer holds before it is flushed (default 4 MiB, §6).
    pub buffer_bytes: usize,
    /// Capacity ratio between adjacent DR-tree levels (default 10, §6). Level `i` (0 = first on disk) holds up to
    /// `buffer_bytes * size_ratio^(i+1)` bytes of DR-tree file.
    pub size_ratio: u32,
    /// Target encoded size of a DR-tree node (default 4 KiB: one I/O per node).
    pub node_size: usize,
    /// Consult the entry validity estimator before the index on point lookups (default true, §4.3).
    pub use_estimator: bool,
    /// `insert` flushes the buffer itself when it is full (default true). An engine that must record every
    /// change of the live-file set in its MANIFEST turns this off and calls `flush` when `needs_flush` says so
    /// (and at every memtable flush, before the WAL holding the buffered records is deleted).
    pub auto_flush: bool,
    /// The estimator's shape.
    pub estimator: EstimatorOptions,
}

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            buffer_bytes: 4 << 20,
            size_ratio: 10,
            node_size: 4096,
            use_estimator: true,
            auto_flush: true,
            estimator: EstimatorOptions::default(),
        }
    }
}

impl IndexOptions {
    /// Checks the options.
    pub fn validate(&self) -> Result<()> {
        if self.buffer_bytes == 0 {
            return Err(Error::InvalidArgument("buffer_bytes must be positive".into()));
        }
        if self.size_ratio < 2 {
            return Err(Error::InvalidArgument("size_ratio must be at least 2".into()));
        }
        if !(64..=(16 << 20)).contains(&self.node_size) {
            return Err(Error::InvalidArgument("node_size must be 64 B ..= 16 MiB".into()));
        }
        self.estimator.validate().map_err(Error::InvalidArgument)
    }

    /// Byte capacity of disk level `level` (0-based).
    pub fn level_capacity(&self, level: usize) -> u64 {
        let mut c = self.buffer_bytes as u64;
        for _ in 0..=level {
            c = c.saturating_mul(u64::from(self.size_ratio));
        }
        c
    }
}
