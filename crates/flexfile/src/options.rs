//! FlexFile options. Defaults are the paper's (§4) and the reference implementation's.

use crate::error::{Error, Result};
use crate::flextree::TreeConfig;

/// How a FlexFile lays out and manages its files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Size of a data-file segment. Default 4 MiB (§4.1).
    pub segment_size: u64,
    /// Largest extent written; 0 means `segment_size / 32` (128 KiB by default). Extents never cross a segment.
    pub max_extent: u32,
    /// Granularity of the data checksums (each block of a segment has a CRC32C in the segment's table). Default 4096.
    pub block_size: u32,
    /// FlexTree leaf capacity in extents. Default 60.
    pub leaf_cap: usize,
    /// FlexTree internal-node capacity in children. Default 30.
    pub internal_cap: usize,
    /// Size of a node slot in the tree file. Default 1024.
    pub node_size: u32,
    /// Buffered log bytes that trigger a commit at the end of an operation. Default 8 MiB, the reference
    /// implementation's `FLEXFILE_LOG_MEM_CAP` (about 350,000 operations; a commit syncs the data file, so a small
    /// buffer turns a bulk build into a series of full data-file syncs).
    pub log_buffer_bytes: usize,
    /// Log file size that triggers a checkpoint of the tree, at the least. Default 16 MiB.
    pub checkpoint_log_bytes: u64,
    /// A checkpoint also waits until the log is this many times the tree's size (live nodes × `node_size`);
    /// 0 turns the rule off. Default 2. Under scattered updates a checkpoint rewrites most of the tree, so a
    /// fixed threshold makes checkpoint bytes grow with the tree; this bounds them to half the log's bytes, and
    /// the log an open replays to twice the tree it loads anyway (the reference checkpoints at 2 GiB of log).
    pub checkpoint_tree_ratio: u32,
    /// Free segments garbage collection keeps in reserve. Default 64 (§4.1).
    pub gc_reserve_segments: u64,
    /// Space utilisation cap as a fraction `num/den`: GC only relocates segments at most this full and only once
    /// the data file holds more than `live / cap` plus the reserve. Default 30/32 (§4.1).
    pub utilization_cap: (u32, u32),
    /// Utilisation below which garbage collection starts, as a fraction `num/den` no larger than
    /// `utilization_cap`: GC waits until the data file holds more than `live / gc_start_utilization` bytes plus
    /// the reserve, and until then new bytes go to fresh segments. Default 30/32, the cap itself: the file stays
    /// as small as the cap allows and GC runs as soon as it may (the paper's *intensive-GC* case, 93 %
    /// utilisation). 1/2 is the paper's *low-GC* case (a 90 GB data file for 42 GB of records): up to twice the
    /// space, and GC, when it runs, finds segments about half empty instead of a sixteenth.
    pub gc_start_utilization: (u32, u32),
    /// Segments relocated per GC round before committing. Default 8.
    pub gc_batch: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            segment_size: 4 << 20,
            max_extent: 0,
            block_size: 4096,
            leaf_cap: 60,
            internal_cap: 30,
            node_size: 1024,
            log_buffer_bytes: 8 << 20,
            checkpoint_log_bytes: 16 << 20,
            checkpoint_tree_ratio: 2,
            gc_reserve_segments: 64,
            utilization_cap: (30, 32),
            gc_start_utilization: (30, 32),
            gc_batch: 8,
        }
    }
}

impl Options {
    /// A configuration with tiny segments and nodes, for tests that want GC, splits, merges and checkpoints to
    /// happen constantly.
    pub fn tiny() -> Self {
        Options {
            segment_size: 4096,
            max_extent: 0,
            block_size: 256,
            leaf_cap: 4,
            internal_cap: 4,
            node_size: 256,
            log_buffer_bytes: 512,
            checkpoint_log_bytes: 8 << 10,
            checkpoint_tree_ratio: 0,
            gc_reserve_segments: 2,
            utilization_cap: (30, 32),
            gc_start_utilization: (30, 32),
            gc_batch: 2,
        }
    }

    /// The effective largest extent.
    pub fn max_extent_len(&self) -> u32 {
        if self.max_extent == 0 { (self.segment_size / 32) as u32 } else { self.max_extent }
    }

    /// Bytes of the checksum table at the end of each segment (8 bytes per block, rounded up to a block).
    pub fn table_bytes(&self) -> u64 {
        let blocks = self.segment_size / self.block_size as u64;
        (blocks * 8).div_ceil(self.block_size as u64) * self.block_size as u64
    }

    /// Bytes of a segment that hold data.
    pub fn segment_capacity(&self) -> u64 {
        self.segment_size - self.table_bytes()
    }

    /// The FlexTree shape these options give.
    pub fn tree_config(&self) -> TreeConfig {
        TreeConfig {
            leaf_cap: self.leaf_cap,
            internal_cap: self.internal_cap,
            boundary: self.segment_size,
            max_merge: self.max_extent_len(),
        }
    }

    /// Checks the options against each other.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::invalid(m.to_string()));
        if !self.block_size.is_power_of_two() || !(64..=1 << 20).contains(&self.block_size) {
            return bad("block_size must be a power of two in 64..=1 MiB");
        }
        if !self.segment_size.is_multiple_of(self.block_size as u64)
            || self.segment_size < 4 * self.block_size as u64
        {
            return bad("segment_size must be a multiple of block_size and at least 4 blocks");
        }
        if self.segment_size > 1 << 32 {
            return bad("segment_size must be at most 4 GiB");
        }
        let me = self.max_extent_len() as u64;
        if me == 0 || me > self.segment_capacity() / 2 {
            return bad("max_extent must be positive and at most half a segment's capacity");
        }
        self.tree_config().validate()?;
        if (self.node_size as usize) < 16 + 16 * self.leaf_cap
            || (self.node_size as usize) < 16 + 20 * self.internal_cap
        {
            return bad("node_size too small for leaf_cap / internal_cap");
        }
        if self.node_size < 128 || self.node_size > 1 << 20 {
            return bad("node_size must be in 128..=1 MiB");
        }
        let (n, d) = self.utilization_cap;
        if d == 0 || n == 0 || n >= d {
            return bad("utilization_cap must be a fraction in (0, 1)");
        }
        let (sn, sd) = self.gc_start_utilization;
        if sd == 0 || sn == 0 || sn as u64 * d as u64 > n as u64 * sd as u64 {
            return bad("gc_start_utilization must be a fraction in (0, utilization_cap]");
        }
        if self.gc_batch == 0 {
            return bad("gc_batch must be positive");
        }
        Ok(())
    }
}
