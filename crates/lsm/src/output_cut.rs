//! Where a compaction cuts its output into files.
//!
//! Cutting only at `target_file_size_base` leaves output files whose key ranges straddle the boundaries of the
//! files one level further down (the *grandparents*). When such an output file is later compacted, every
//! grandparent it touches is rewritten with it, including the parts of them that lie outside the output's key
//! range: write amplification that the cut position alone decides. RocksDB 7.8 (`CompactionOutputs::
//! ShouldStopBefore`, with `level_compaction_dynamic_file_size`, on by default) cuts so that future compactions
//! stay small, and so do we, with the same rules, evaluated at each new user key:
//!
//! 1. a hard cut at `max_output` bytes (2 × target when aligning to grandparents, else the target);
//! 2. only where the next key crosses a grandparent file boundary (start or end of a grandparent file):
//!    - cut when the output plus the grandparent bytes it overlaps exceeds `max_compaction_bytes` (default 25 ×
//!      target), so that compacting this output later stays bounded (LevelDB's `kMaxGrandParentOverlapBytes`);
//!    - cut when the key jumps over a whole grandparent file worth more than 1/8 of the target (the output would
//!      otherwise overlap a file it has no keys for);
//!    - cut once the output holds `(50 + 5 × boundaries seen) %` of the target, capped at 90 %: the more boundaries
//!      an output has seen, the more likely another one comes before the target size, so it waits longer.
//!
//! Flushes and bottommost compactions have no grandparents; they cut at the target alone. Keys are compared as
//! user keys: an output never splits one user key's versions, so a cut is only ever at a user-key boundary.

use std::sync::Arc;

use crate::version::FileMeta;

/// The cut policy and its running state for one compaction's outputs.
#[derive(Debug)]
pub struct OutputCut {
    target: u64,
    max_output: u64,
    max_compaction_bytes: u64,
    align: bool,
    /// Grandparent files, sorted and disjoint (a level >= 1).
    grandparents: Vec<Arc<FileMeta>>,
    /// The grandparent holding or following the last key seen.
    index: usize,
    /// Whether the last key seen lies between grandparents `index - 1` and `index` (or before the first).
    in_gap: bool,
    seen_key: bool,
    /// Grandparent bytes the current output overlaps.
    overlapped: u64,
    /// Grandparent boundaries crossed inside the current output.
    switched: u64,
}

impl OutputCut {
    /// Never cuts (flush to L0: one file per memtable).
    pub fn never() -> OutputCut {
        OutputCut::at_target(u64::MAX)
    }

    /// Cuts at `target` bytes only.
    pub fn at_target(target: u64) -> OutputCut {
        OutputCut {
            target,
            max_output: target,
            max_compaction_bytes: u64::MAX,
            align: false,
            grandparents: Vec::new(),
            index: 0,
            in_gap: true,
            seen_key: false,
            overlapped: 0,
            switched: 0,
        }
    }

    /// The policy of a compaction whose output level has `grandparents` below it.
    /// REQUIRES: `grandparents` sorted by key and disjoint (one level >= 1).
    pub fn aligned(
        target: u64,
        max_compaction_bytes: u64,
        align: bool,
        grandparents: Vec<Arc<FileMeta>>,
    ) -> OutputCut {
        let max_output = if align && !grandparents.is_empty() { target.saturating_mul(2) } else { target };
        OutputCut { max_output, max_compaction_bytes, align, grandparents, ..OutputCut::at_target(target) }
    }

    /// Advances past grandparent boundaries up to `uk`; returns how many were crossed.
    fn advance(&mut self, uk: &[u8]) -> u64 {
        let mut crossed = 0;
        while self.index < self.grandparents.len() {
            let g = &self.grandparents[self.index];
            if self.in_gap {
                if uk < g.smallest_user() {
                    break;
                }
                if self.seen_key {
                    crossed += 1;
                    self.switched += 1;
                    self.overlapped += g.info.size;
                }
                self.in_gap = false;
            } else {
                if uk <= g.largest_user() {
                    break;
                }
                if self.seen_key {
                    crossed += 1;
                    self.switched += 1;
                }
                self.in_gap = true;
                self.index += 1;
            }
        }
        if !self.seen_key && !self.in_gap {
            self.overlapped = self.current_overlap();
        }
        self.seen_key = true;
        crossed
    }

    fn current_overlap(&self) -> u64 {
        if self.in_gap { 0 } else { self.grandparents.get(self.index).map_or(0, |g| g.info.size) }
    }

    /// Called for each new user key in output order, with the size of the open output (`None` if none is open).
    /// Returns whether the open output must be finished before `uk`.
    pub fn should_cut_before(&mut self, uk: &[u8], open_size: Option<u64>) -> bool {
        let before = self.overlapped;
        let crossed = self.advance(uk);
        let Some(size) = open_size else { return false };
        let cut = if size >= self.max_output {
            true
        } else if crossed == 0 {
            false
        } else if self.overlapped.saturating_add(size) > self.max_compaction_bytes {
            true
        } else if !self.align {
            false
        } else {
            let skippable = if self.in_gap { 2 } else { 3 };
            (crossed >= skippable && self.overlapped - before > self.target / 8)
                || size >= self.target.div_ceil(100).saturating_mul(50 + (self.switched * 5).min(40))
        };
        if cut {
            self.switched = 0;
            self.overlapped = self.current_overlap();
        }
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edit::FileInfo;
    use crate::ikey::{self, Kind};

    fn gp(number: u64, lo: &str, hi: &str, size: u64) -> Arc<FileMeta> {
        let info = FileInfo {
            number,
            size,
            smallest: ikey::make(lo.as_bytes(), 1, Kind::Value),
            largest: ikey::make(hi.as_bytes(), 1, Kind::Value),
            ..FileInfo::default()
        };
        Arc::new(FileMeta::new_for_test(info))
    }

    /// Feeds keys of `size` bytes each; returns the first key of every output after the first.
    fn cuts(c: &mut OutputCut, keys: &[&str], size: u64) -> Vec<String> {
        let mut open: Option<u64> = None;
        let mut out = Vec::new();
        for k in keys {
            if c.should_cut_before(k.as_bytes(), open) {
                out.push((*k).to_string());
                open = None;
            }
            open = Some(open.unwrap_or(0) + size);
        }
        out
    }

    #[test]
    fn target_only_cuts_at_size() {
        let mut c = OutputCut::at_target(100);
        assert_eq!(cuts(&mut c, &["a", "b", "c", "d", "e"], 40), vec!["d"]);
        let mut n = OutputCut::never();
        assert!(cuts(&mut n, &["a", "b", "c"], u64::MAX / 4).is_empty());
    }

    /// RocksDB PR 1963's example: L0 [1, 21] + L1 [3, 23] over L2 [2, 4] [11, 15] [22, 24]; without the cut the
    /// output [1, 3, 21, 23] overlaps [11, 15], which it has no keys for.
    #[test]
    fn skips_a_whole_grandparent_file() {
        let g = vec![gp(1, "02", "04", 1000), gp(2, "11", "15", 1000), gp(3, "22", "24", 1000)];
        let mut c = OutputCut::aligned(4000, 100_000, true, g);
        assert_eq!(cuts(&mut c, &["01", "03", "21", "23"], 10), vec!["21"]);
    }

    #[test]
    fn small_skipped_files_do_not_cut() {
        let g = vec![gp(1, "02", "04", 1000), gp(2, "11", "15", 10), gp(3, "22", "24", 1000)];
        let mut c = OutputCut::aligned(4000, 100_000, true, g);
        assert!(cuts(&mut c, &["01", "03", "21", "23"], 10).is_empty());
    }

    #[test]
    fn precuts_at_grandparent_boundary_once_half_full() {
        let g = vec![gp(1, "a", "c", 10), gp(2, "d", "f", 10), gp(3, "g", "i", 10)];
        let mut c = OutputCut::aligned(100, u64::MAX, true, g);
        // 30 bytes per key: at "d" the output holds 60 >= 50 % of the target + 5 % per boundary crossed before.
        assert_eq!(cuts(&mut c, &["a", "b", "d", "e", "g"], 30), vec!["d", "g"]);
    }

    #[test]
    fn max_compaction_bytes_bounds_future_compactions() {
        let g = vec![gp(1, "a", "b", 500), gp(2, "c", "d", 500), gp(3, "e", "f", 500)];
        let mut c = OutputCut::aligned(1 << 20, 1200, false, g);
        assert_eq!(cuts(&mut c, &["a", "c", "e", "f"], 1), vec!["e"]);
    }

    #[test]
    fn hard_cap_is_twice_the_target_when_aligning() {
        let g = vec![gp(1, "a", "z", 10)];
        let mut c = OutputCut::aligned(100, u64::MAX, true, g);
        assert_eq!(cuts(&mut c, &["b", "c", "d", "e", "f"], 70), vec!["e"]);
        let mut plain = OutputCut::aligned(100, u64::MAX, false, vec![gp(1, "a", "z", 10)]);
        assert_eq!(cuts(&mut plain, &["b", "c", "d", "e", "f"], 70), vec!["d", "f"]);
    }
}
