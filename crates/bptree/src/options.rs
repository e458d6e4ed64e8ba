//! Tree and leaf parameters, with the paper's defaults.

use crate::error::{Error, Result};

/// Parameters of a BP-tree and its leaves.
///
/// The defaults are the configuration the paper evaluates (§6): a BPA leaf with a 32-slot log, a 32-slot header
/// and 32 blocks of 32 slots (1,088 slots, 17,408 bytes with 8-byte keys and values), internal nodes of 1,024 bytes,
/// a leaf split at ~90 % of its slots and a merge below ~40 %.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Slots in the BPA log (the insert buffer). Default 32. Range 2..=4096.
    pub log_size: usize,
    /// Blocks per BPA leaf, which is also the number of header slots. Default 32. Range 1..=4096.
    pub num_blocks: usize,
    /// Slots per block. Default 32. Range 2..=4096.
    pub block_size: usize,
    /// Target size of an internal node in bytes; the fanout is `internal_bytes / (size_of::<K>() + 8)`, at least
    /// 4. Default 1,024.
    pub internal_bytes: usize,
    /// A leaf splits before an insert once it holds this fraction of its slots (capped so that a flush always
    /// fits). Default 0.9.
    pub split_fill: f64,
    /// A leaf is merged with (or borrows from) a neighbour once it holds fewer than this fraction of its slots.
    /// Default 0.4. Must be below half of `split_fill` so a merge never produces a leaf that must split again.
    pub merge_fill: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            log_size: 32,
            num_blocks: 32,
            block_size: 32,
            internal_bytes: 1024,
            split_fill: 0.9,
            merge_fill: 0.4,
        }
    }
}

impl Options {
    /// Tiny leaves and nodes that make flushes, redistributes, splits and merges frequent: for tests.
    pub fn tiny() -> Self {
        Options {
            log_size: 2,
            num_blocks: 2,
            block_size: 3,
            internal_bytes: 0,
            split_fill: 0.9,
            merge_fill: 0.4,
        }
    }

    /// Checks every parameter against its documented range.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(Error::InvalidOptions(what.to_string()));
        if !(2..=4096).contains(&self.log_size) {
            return bad("log_size must be in 2..=4096");
        }
        if !(1..=4096).contains(&self.num_blocks) {
            return bad("num_blocks must be in 1..=4096");
        }
        if !(2..=4096).contains(&self.block_size) {
            return bad("block_size must be in 2..=4096");
        }
        if !(self.split_fill > 0.0 && self.split_fill <= 1.0) {
            return bad("split_fill must be in (0, 1]");
        }
        if !(self.merge_fill >= 0.0 && self.merge_fill * 2.0 < self.split_fill) {
            return bad("merge_fill must be in [0, split_fill / 2)");
        }
        if self.internal_bytes > 1 << 24 {
            return bad("internal_bytes must be at most 16 MiB");
        }
        Ok(())
    }

    /// Slots in one BPA leaf: log + header + blocks.
    pub fn leaf_slots(&self) -> usize {
        self.log_size + self.num_blocks + self.num_blocks * self.block_size
    }

    /// Entries below which a leaf is merged with a neighbour, for leaves that split at `split_at` entries:
    /// `merge_fill` of the leaf's slots, at most half of `split_at - 1` (so neither half of a leaf just split is
    /// merged at once), and at least 1 (an empty leaf is always merged away; tiny leaves could otherwise round
    /// the threshold to 0). Both tree forms use it, so they merge alike.
    pub fn merge_at(&self, split_at: usize) -> usize {
        ((self.merge_fill * self.leaf_slots() as f64) as usize).min(split_at.saturating_sub(1) / 2).max(1)
    }

    /// Fanout of internal nodes for keys of `key_bytes` bytes.
    pub fn fanout(&self, key_bytes: usize) -> usize {
        (self.internal_bytes / (key_bytes + 8)).max(4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_threshold_stays_below_half_a_split_and_above_zero() {
        let d = Options::default();
        assert_eq!(d.merge_at(1000), ((d.merge_fill * d.leaf_slots() as f64) as usize).min(499));
        for split_at in [1, 2, 3, 4, 7, 100] {
            let m = Options { merge_fill: 0.45, split_fill: 1.0, ..d }.merge_at(split_at);
            assert!(m >= 1, "split_at {split_at}: merge_at {m}");
            assert!(m == 1 || m <= (split_at - 1) / 2, "split_at {split_at}: merge_at {m}");
        }
        assert_eq!(Options { merge_fill: 0.0, ..d }.merge_at(1000), 1);
    }
}
