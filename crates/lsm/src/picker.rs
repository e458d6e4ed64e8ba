//! Which compaction runs next: RocksDB 7.8's `LevelCompactionBuilder` for static level targets.
//!
//! Scores (`VersionStorageInfo::ComputeCompactionScore`), counting only files no running compaction holds:
//! L0 = max(files / `level0_file_num_compaction_trigger`, bytes / `max_bytes_for_level_base`); Li = bytes /
//! target(i). Levels are tried in descending score order while the score is >= 1; the first level that yields a
//! compaction wins.
//!
//! - **L0 trivial move** (`TryPickL0TrivialMove`): when L1 is not empty, the oldest L0 files are moved to L1
//!   without rewriting, newest-ward for as long as each next file is disjoint from those taken and the range
//!   still touches no L1 file (sequential loads never rewrite L0).
//! - **L0 compaction**: the oldest L0 file, widened to every L0 file its range overlaps (transitively), plus the
//!   L1 files overlapping that range. With random keys that is every L0 file; with disjoint L0 files only the
//!   ones that overlap, so unrelated files are not rewritten.
//! - **Li compaction**: files in `compaction_pri` order (`MinOverlappingRatio`: least overlapping Li+1 bytes per
//!   own byte first; `RoundRobin`: after the level's compact pointer); the first one whose Li+1 overlap is free.
//! - **Multi-file trivial move** (`TryExtendNonL0TrivialMove`): a chosen Li file with no Li+1 overlap is moved,
//!   together with up to 3 following files of Li, while the combined range still touches no Li+1 file, each
//!   boundary is a clean cut, and the bytes stay within `max_compaction_bytes`. This takes a level over its
//!   target well below it in one edit: a later L0 compaction then rewrites a smaller L1.
//! - **Input expansion** (`CompactionPicker::SetupOtherInputs`): once the Li+1 overlap is known, more Li files
//!   inside the combined range are added when that does not pull in further Li+1 files and the total stays
//!   below `max_compaction_bytes` (first all Li files overlapping the range, else only those within it).
//!
//! Concurrency: files of running compactions carry `being_compacted`; a level-0 compaction excludes others from
//! L0; and a new compaction's output range must not meet the output range of a running one into the same level
//! (`FilesRangeOverlapWithCompaction`). Not implemented: intra-L0 compactions (L0 -> L0 while L0 -> L1 is
//! blocked), compensated sizes for deletion-heavy files, TTL and periodic compactions.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::compaction::{Compaction, level_target};
use crate::ikey;
use crate::options::{CompactionPri, Options};
use crate::version::{FileMeta, NUM_LEVELS, Version};

/// Most files one non-L0 trivial move takes (RocksDB's `kMaxMultiTrivialMove`).
pub const MAX_MULTI_TRIVIAL_MOVE: usize = 4;

/// The output key range of a running compaction: `(output level, smallest user key, largest user key)`.
pub type RunningRange = (usize, Vec<u8>, Vec<u8>);

fn busy(f: &FileMeta) -> bool {
    f.being_compacted.load(Ordering::Acquire)
}

fn any_busy(files: &[Arc<FileMeta>]) -> bool {
    files.iter().any(|f| busy(f))
}

fn total(files: &[Arc<FileMeta>]) -> u64 {
    files.iter().map(|f| f.info.size).sum()
}

/// The user-key range spanned by `files` (REQUIRES: not empty).
fn range_of<'a>(files: impl IntoIterator<Item = &'a Arc<FileMeta>>) -> (Vec<u8>, Vec<u8>) {
    let mut lo: Option<&[u8]> = None;
    let mut hi: Option<&[u8]> = None;
    for f in files {
        if lo.is_none_or(|l| f.smallest_user() < l) {
            lo = Some(f.smallest_user());
        }
        if hi.is_none_or(|h| f.largest_user() > h) {
            hi = Some(f.largest_user());
        }
    }
    (lo.unwrap_or_default().to_vec(), hi.unwrap_or_default().to_vec())
}

/// Compaction scores of levels 0..NUM_LEVELS-1 (the last level is never an input), counting only files that no
/// running compaction holds.
pub fn scores(v: &Version, opts: &Options) -> Vec<f64> {
    let mut s = Vec::with_capacity(NUM_LEVELS - 1);
    let l0: Vec<_> = v.levels[0].iter().filter(|f| !busy(f)).collect();
    let l0_bytes: u64 = l0.iter().map(|f| f.info.size).sum();
    let by_count = l0.len() as f64 / opts.level0_file_num_compaction_trigger as f64;
    s.push(by_count.max(l0_bytes as f64 / opts.max_bytes_for_level_base as f64));
    for l in 1..NUM_LEVELS - 1 {
        let bytes: u64 = v.levels[l].iter().filter(|f| !busy(f)).map(|f| f.info.size).sum();
        s.push(bytes as f64 / level_target(opts, l) as f64);
    }
    s
}

/// Picks the most urgent compaction that does not conflict with the running ones (`running`, plus the
/// `being_compacted` marks of their files), if any level's score is >= 1.
pub fn pick(
    v: &Arc<Version>,
    opts: &Options,
    pointers: &[Vec<u8>],
    running: &[RunningRange],
) -> Option<Compaction> {
    let s = scores(v, opts);
    let mut order: Vec<usize> = (0..s.len()).filter(|&l| s[l] >= 1.0).collect();
    // Stable: on equal scores the shallower level goes first, as in RocksDB.
    order.sort_by(|a, b| s[*b].total_cmp(&s[*a]));
    order.into_iter().find_map(|level| pick_level(v, opts, pointers, running, level))
}

fn conflicts(c: &Compaction, running: &[RunningRange]) -> bool {
    let (lo, hi) = range_of(c.inputs.iter().chain(&c.next));
    running.iter().any(|(l, rlo, rhi)| *l == c.level + 1 && !(hi < *rlo || lo > *rhi))
}

fn pick_level(
    v: &Arc<Version>,
    opts: &Options,
    pointers: &[Vec<u8>],
    running: &[RunningRange],
    level: usize,
) -> Option<Compaction> {
    if level == 0 {
        // One L0 compaction at a time: L0 files overlap, a second one could reorder versions.
        if any_busy(&v.levels[0]) {
            return None;
        }
        if let Some(c) = l0_trivial_move(v) {
            return (!conflicts(&c, running)).then_some(c);
        }
        let oldest = v.levels[0].last()?;
        let inputs = v.overlapping(0, Some(oldest.smallest_user()), Some(oldest.largest_user()));
        let c = expand_inputs(Compaction::new(v.clone(), 0, inputs), opts);
        return (!any_busy(&c.next) && !conflicts(&c, running)).then_some(c);
    }
    let files = &v.levels[level];
    let candidates: Vec<usize> = if opts.compaction_pri == CompactionPri::RoundRobin {
        let ptr = &pointers[level];
        let start =
            files.iter().position(|f| ptr.is_empty() || ikey::cmp(&f.info.largest, ptr).is_gt()).unwrap_or(0);
        (start..files.len()).chain(0..start).collect()
    } else {
        // RocksDB's kMinOverlappingRatio: least next-level bytes rewritten per byte moved down first.
        let mut scored: Vec<(u64, usize)> = files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let overlap =
                    total(&v.overlapping(level + 1, Some(f.smallest_user()), Some(f.largest_user())));
                (overlap.saturating_mul(1024) / f.info.size.max(1), i)
            })
            .collect();
        scored.sort();
        scored.into_iter().map(|(_, i)| i).collect()
    };
    for i in candidates {
        let f = &files[i];
        if busy(f) {
            continue;
        }
        let next = v.overlapping(level + 1, Some(f.smallest_user()), Some(f.largest_user()));
        if any_busy(&next) {
            continue;
        }
        let c = if next.is_empty() {
            Compaction::new(v.clone(), level, extend_trivial_move(v, opts, level, i))
        } else {
            expand_inputs(Compaction::new(v.clone(), level, vec![f.clone()]), opts)
        };
        if !any_busy(&c.inputs) && !conflicts(&c, running) {
            return Some(c);
        }
    }
    None
}

/// RocksDB's `TryPickL0TrivialMove`: the oldest L0 files that can move to a non-empty L1 unchanged.
fn l0_trivial_move(v: &Arc<Version>) -> Option<Compaction> {
    if v.levels[1].is_empty() {
        return None;
    }
    let mut taken: Vec<Arc<FileMeta>> = Vec::new();
    let (mut lo, mut hi): (Vec<u8>, Vec<u8>) = (Vec::new(), Vec::new());
    for f in v.levels[0].iter().rev() {
        if taken.is_empty() {
            (lo, hi) = (f.smallest_user().to_vec(), f.largest_user().to_vec());
        } else if f.largest_user() < lo.as_slice() {
            lo = f.smallest_user().to_vec();
        } else if f.smallest_user() > hi.as_slice() {
            hi = f.largest_user().to_vec();
        } else {
            break;
        }
        if !v.overlapping(1, Some(&lo), Some(&hi)).is_empty() {
            break;
        }
        taken.push(f.clone());
    }
    if taken.is_empty() {
        return None;
    }
    taken.sort_by(|a, b| ikey::cmp(&a.info.smallest, &b.info.smallest));
    Some(Compaction::new(v.clone(), 0, taken))
}

/// RocksDB's `TryExtendNonL0TrivialMove`: file `start` of `level` (which overlaps nothing in `level + 1`) and
/// up to `MAX_MULTI_TRIVIAL_MOVE - 1` following files, while the whole range still overlaps nothing below, no
/// user key straddles the last boundary, and the bytes stay within `max_compaction_bytes`.
fn extend_trivial_move(v: &Version, opts: &Options, level: usize, start: usize) -> Vec<Arc<FileMeta>> {
    let files = &v.levels[level];
    let first = &files[start];
    let mut taken = vec![first.clone()];
    let mut bytes = first.info.size;
    for i in start + 1..files.len() {
        if taken.len() >= MAX_MULTI_TRIVIAL_MOVE {
            break;
        }
        let f = &files[i];
        if busy(f)
            || !v.overlapping(level + 1, Some(first.smallest_user()), Some(f.largest_user())).is_empty()
        {
            break;
        }
        if files.get(i + 1).is_some_and(|n| n.smallest_user() == f.largest_user()) {
            break;
        }
        bytes += f.info.size;
        if bytes > opts.effective_max_compaction_bytes() {
            break;
        }
        taken.push(f.clone());
    }
    taken
}

/// RocksDB's input expansion (`SetupOtherInputs`): more start-level files inside the compaction's range, when
/// they pull no further next-level files in and the total stays below `max_compaction_bytes`.
fn expand_inputs(c: Compaction, opts: &Options) -> Compaction {
    if c.next.is_empty() {
        return c;
    }
    let limit = opts.effective_max_compaction_bytes();
    let next_bytes = total(&c.next);
    let (lo, hi) = range_of(c.inputs.iter().chain(&c.next));
    let level = c.level;
    let v = c.version.clone();
    let overlapping = v.overlapping(level, Some(&lo), Some(&hi));
    let within: Vec<_> = v.levels[level]
        .iter()
        .filter(|f| f.smallest_user() >= lo.as_slice() && f.largest_user() <= hi.as_slice())
        .cloned()
        .collect();
    for expanded in [overlapping, within] {
        if expanded.len() <= c.inputs.len()
            || next_bytes + total(&expanded) >= limit
            || any_busy(&expanded)
            || !c.inputs.iter().all(|f| expanded.iter().any(|e| e.number() == f.number()))
            || (level > 0 && !clean_cut(&v, level, &expanded))
        {
            continue;
        }
        let (elo, ehi) = range_of(&expanded);
        let enext = v.overlapping(level + 1, Some(&elo), Some(&ehi));
        if enext.len() == c.next.len() && !any_busy(&enext) {
            return Compaction::new(v.clone(), level, expanded);
        }
    }
    c
}

/// Whether `files` (of a sorted level) end on user-key boundaries: no neighbour outside them shares a user key
/// with their first or last file (RocksDB's `ExpandInputsToCleanCut`).
fn clean_cut(v: &Version, level: usize, files: &[Arc<FileMeta>]) -> bool {
    let (lo, hi) = range_of(files);
    v.levels[level]
        .iter()
        .filter(|f| !files.iter().any(|x| x.number() == f.number()))
        .all(|f| f.largest_user() != lo.as_slice() && f.smallest_user() != hi.as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edit::FileInfo;
    use crate::ikey::Kind;

    /// A file of `level` holding keys `lo..=hi` (single letters or words), `mb` MiB, numbered `n`.
    fn file(n: u64, lo: &str, hi: &str, mb: u64, seq: u64) -> Arc<FileMeta> {
        Arc::new(FileMeta::new_for_test(FileInfo {
            number: n,
            size: mb << 20,
            smallest: ikey::make(lo.as_bytes(), seq, Kind::Value),
            largest: ikey::make(hi.as_bytes(), seq, Kind::Value),
            smallest_seq: seq,
            largest_seq: seq,
            ..FileInfo::default()
        }))
    }

    fn version(levels: Vec<Vec<Arc<FileMeta>>>) -> Arc<Version> {
        let mut l = levels;
        l.resize(NUM_LEVELS, Vec::new());
        Arc::new(Version::new(l))
    }

    fn opts() -> Options {
        Options {
            max_bytes_for_level_base: 16 << 20,
            target_file_size_base: 4 << 20,
            level0_file_num_compaction_trigger: 4,
            ..Options::default()
        }
    }

    fn numbers(files: &[Arc<FileMeta>]) -> Vec<u64> {
        files.iter().map(|f| f.number()).collect()
    }

    #[test]
    fn regression_level_over_target_moves_up_to_four_files_in_one_edit() {
        // L1 holds 24 MiB in six files over an empty L2: RocksDB moves four of them at once, leaving L1 well
        // under target, where one-file moves stopped just under it and the next L0 compaction rewrote more.
        let l1: Vec<_> = (0..6).map(|i| file(10 + i, &format!("k{i}0"), &format!("k{i}9"), 4, 1)).collect();
        let v = version(vec![vec![], l1]);
        let c = pick(&v, &opts(), &vec![Vec::new(); NUM_LEVELS], &[]).expect("L1 is over target");
        assert_eq!(c.level, 1);
        assert_eq!(numbers(&c.inputs), vec![10, 11, 12, 13]);
        assert!(c.next.is_empty() && c.is_trivial_move());
    }

    #[test]
    fn multi_file_move_stops_at_overlap_and_unclean_cuts() {
        // File 12 overlaps L2: the move takes 10 and 11 only.
        let l1 = vec![file(10, "a", "b", 8, 1), file(11, "c", "d", 8, 1), file(12, "e", "f", 8, 1)];
        let v = version(vec![vec![], l1, vec![file(20, "f", "g", 1, 0)]]);
        let c = pick(&v, &opts(), &vec![Vec::new(); NUM_LEVELS], &[]).expect("L1 over target");
        assert_eq!(numbers(&c.inputs), vec![10, 11]);
        // A user key shared by 11's end and 12's start: 11 cannot go without 12, so only 10 moves.
        let l1 = vec![file(10, "a", "b", 8, 1), file(11, "c", "d", 8, 1), file(12, "d", "f", 8, 1)];
        let v = version(vec![vec![], l1, vec![file(20, "e", "g", 1, 0)]]);
        let c = pick(&v, &opts(), &vec![Vec::new(); NUM_LEVELS], &[]).expect("L1 over target");
        assert_eq!(numbers(&c.inputs), vec![10]);
    }

    #[test]
    fn l0_moves_disjoint_old_files_to_a_nonempty_l1() {
        // Sequential load: L0 files (newest first) are disjoint and beyond L1's keys.
        let l0 = vec![
            file(4, "m", "n", 1, 40),
            file(3, "k", "l", 1, 30),
            file(2, "i", "j", 1, 20),
            file(1, "g", "h", 1, 10),
        ];
        let v = version(vec![l0, vec![file(9, "a", "b", 1, 1)]]);
        let c = pick(&v, &opts(), &vec![Vec::new(); NUM_LEVELS], &[]).expect("L0 at trigger");
        assert_eq!((c.level, numbers(&c.inputs)), (0, vec![1, 2, 3, 4]));
        assert!(c.is_trivial_move());
        // The second-oldest overlaps L1: only the oldest moves.
        let l0 = vec![
            file(4, "m", "n", 1, 40),
            file(3, "k", "l", 1, 30),
            file(2, "a", "j", 1, 20),
            file(1, "g", "h", 1, 10),
        ];
        let v = version(vec![l0, vec![file(9, "b", "c", 1, 1)]]);
        let c = pick(&v, &opts(), &vec![Vec::new(); NUM_LEVELS], &[]).expect("L0 at trigger");
        assert!(numbers(&c.inputs) == vec![1] && c.is_trivial_move());
    }

    #[test]
    fn l0_compaction_takes_the_oldest_file_and_what_overlaps_it_transitively() {
        // 1 overlaps 3, 3 overlaps 2; 4 is disjoint from all and stays. L1 is empty, so no L0 move.
        let l0 = vec![
            file(4, "x", "z", 1, 40),
            file(3, "c", "f", 1, 30),
            file(2, "e", "h", 1, 20),
            file(1, "a", "d", 1, 10),
        ];
        let v = version(vec![l0]);
        let c = pick(&v, &opts(), &vec![Vec::new(); NUM_LEVELS], &[]).expect("L0 at trigger");
        let mut n = numbers(&c.inputs);
        n.sort();
        assert_eq!(n, vec![1, 2, 3]);
        assert!(!c.is_trivial_move());
    }

    #[test]
    fn inputs_expand_within_the_next_level_overlap() {
        // L1 file 10 overlaps L2 file 20 ("a".."m"); 11 also lies inside 20's range: taking it adds no L2 file.
        let l1 = vec![file(10, "a", "c", 10, 1), file(11, "d", "f", 10, 1), file(12, "p", "q", 10, 1)];
        let v = version(vec![vec![], l1, vec![file(20, "a", "m", 2, 0), file(21, "p", "q", 50, 0)]]);
        let c = pick(&v, &opts(), &vec![Vec::new(); NUM_LEVELS], &[]).expect("L1 over target");
        assert_eq!((numbers(&c.inputs), numbers(&c.next)), (vec![10, 11], vec![20]));
    }

    #[test]
    fn running_compactions_exclude_their_files_and_output_ranges() {
        let l1: Vec<_> = (0..6).map(|i| file(10 + i, &format!("k{i}0"), &format!("k{i}9"), 4, 1)).collect();
        let l2 = vec![file(20, "k00", "k19", 1, 0), file(21, "k20", "k59", 1, 0)];
        let v = version(vec![vec![], l1, l2]);
        let o = opts();
        let ptrs = vec![Vec::new(); NUM_LEVELS];
        let first = pick(&v, &o, &ptrs, &[]).expect("L1 over target");
        for f in first.inputs.iter().chain(&first.next) {
            f.being_compacted.store(true, Ordering::Release);
        }
        let (lo, hi) = range_of(first.inputs.iter().chain(&first.next));
        let running = vec![(2, lo.clone(), hi.clone())];
        assert_eq!((numbers(&first.inputs), numbers(&first.next)), (vec![10, 11], vec![20]));
        // The rest of L1 lies over the other L2 file: a second thread can compact it at the same time.
        let second = pick(&v, &o, &ptrs, &running).expect("disjoint work remains");
        assert_eq!((numbers(&second.inputs), numbers(&second.next)), (vec![12, 13, 14, 15], vec![21]));
        // With that L2 file busy too, nothing is left that does not conflict.
        v.levels[2][1].being_compacted.store(true, Ordering::Release);
        assert!(pick(&v, &o, &ptrs, &running).is_none());
        // Busy L0 files keep L0 out of picking altogether.
        let l0 = vec![file(2, "a", "b", 1, 20), file(1, "a", "b", 1, 10)];
        l0[1].being_compacted.store(true, Ordering::Release);
        let v = version(vec![l0.clone(), vec![], vec![]]);
        assert!(pick(&v, &Options { level0_file_num_compaction_trigger: 1, ..o }, &ptrs, &[]).is_none());
    }

    #[test]
    fn l0_score_counts_bytes_against_the_l1_target() {
        let v = version(vec![vec![file(1, "a", "b", 32, 1)]]);
        assert!(scores(&v, &opts())[0] >= 2.0);
    }
}
