//! Golden tests for the paper's worked examples of disjointization: Fig. 5 (a), (b), (c) and Fig. 6.
//!
//! Keys are single bytes so the pictures' integer coordinates read directly. Every example runs through the flush
//! sweep (R-tree buffer → DR-tree) and, where it is a two-area case, through the compaction path (two DR-tree
//! levels merged pairwise), and the resulting level must equal the expected areas exactly.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use gloran::disjoint::disjointize;
use gloran::{Area, GlobalIndex, IndexOptions};
use vfs::MemFs;

fn k(x: u8) -> Vec<u8> {
    vec![x]
}

fn rec(start: u8, end: u8, seq: u64) -> Area {
    Area::record(&k(start), &k(end), 0, seq)
}

fn area(start: u8, end: u8, min: u64, max: u64, seq: u64) -> Area {
    Area { start: k(start), end: k(end), min_seq: min, max_seq: max, seq }
}

fn level_areas(idx: &GlobalIndex, level: usize) -> Vec<Area> {
    let mut out = Vec::new();
    if let Some(mut it) = idx.level_areas(level).unwrap() {
        while let Some(a) = it.next_area().unwrap() {
            out.push(a);
        }
    }
    out
}

/// Runs `records` through a flush into one DR-tree and returns its areas.
fn via_flush(records: &[Area]) -> Vec<Area> {
    let fs = Arc::new(MemFs::new());
    let mut idx = GlobalIndex::open(fs, Path::new("/g"), IndexOptions::default(), &[]).unwrap();
    for r in records {
        idx.insert(&r.start, &r.end, r.min_seq, r.seq).unwrap();
    }
    idx.flush().unwrap();
    assert_eq!(idx.level_count(), 1);
    level_areas(&idx, 0)
}

/// Puts `older` on level 1, then flushes `newer` into level 0, which (with capacities of a few bytes) at once
/// overflows and is compacted into level 1: the streaming two-way merge.
fn via_compaction(older: &Area, newer: &Area) -> Vec<Area> {
    let fs = Arc::new(MemFs::new());
    // Level 0 holds 20 bytes (any file overflows it), level 1 holds 400 (enough for these tiny trees).
    let opts = IndexOptions { buffer_bytes: 1, size_ratio: 20, ..IndexOptions::default() };
    let mut idx = GlobalIndex::open(fs, Path::new("/g"), opts, &[]).unwrap();
    idx.insert(&older.start, &older.end, older.min_seq, older.seq).unwrap();
    assert!(level_areas(&idx, 0).is_empty());
    assert_eq!(level_areas(&idx, 1), vec![older.clone()]);
    assert_eq!(idx.stats().compactions, 1);
    idx.insert(&newer.start, &newer.end, newer.min_seq, newer.seq).unwrap();
    assert_eq!(idx.stats().compactions, 2, "level 0 holding the newer area was merged into level 1");
    assert!(level_areas(&idx, 0).is_empty());
    level_areas(&idx, 1)
}

#[test]
fn fig5a_dominated_area_vanishes() {
    // β = [2,5) below seq 4 lies inside α = [0,10) below seq 8: only α remains.
    let (beta, alpha) = (rec(2, 5, 4), rec(0, 10, 8));
    let want = vec![rec(0, 10, 8)];
    assert_eq!(disjointize(vec![alpha.clone(), beta.clone()], &[], 0).unwrap(), want);
    assert_eq!(via_flush(&[beta.clone(), alpha.clone()]), want);
    assert_eq!(via_compaction(&beta, &alpha), want);
}

#[test]
fn fig5b_newer_inner_area_splits_the_older() {
    // β = [3,6)@8 inside α = [0,10)@5 by key, newer: α is cut into its parts left and right of β.
    let (alpha, beta) = (rec(0, 10, 5), rec(3, 6, 8));
    let want = vec![rec(0, 3, 5), rec(3, 6, 8), rec(6, 10, 5)];
    assert_eq!(via_flush(&[alpha.clone(), beta.clone()]), want);
    assert_eq!(via_compaction(&alpha, &beta), want);
    // Sharing a bound introduces no new area: β = [0,6)@8 leaves one remainder of α.
    let beta0 = rec(0, 6, 8);
    assert_eq!(via_compaction(&alpha, &beta0), vec![rec(0, 6, 8), rec(6, 10, 5)]);
}

#[test]
fn fig5c_partial_overlap_trims_the_older() {
    // α = [0,6)@5 and β = [4,10)@8 overlap on [4,6): β dominates there, α is trimmed to [0,4).
    let (alpha, beta) = (rec(0, 6, 5), rec(4, 10, 8));
    let want = vec![rec(0, 4, 5), rec(4, 10, 8)];
    assert_eq!(via_flush(&[alpha.clone(), beta.clone()]), want);
    assert_eq!(via_compaction(&alpha, &beta), want);
    // Mirrored: the newer area on the left trims the older one's start.
    let (alpha, beta) = (rec(4, 10, 5), rec(0, 6, 8));
    let want = vec![rec(0, 6, 8), rec(6, 10, 5)];
    assert_eq!(via_flush(&[alpha.clone(), beta.clone()]), want);
    assert_eq!(via_compaction(&alpha, &beta), want);
}

#[test]
fn fig6_heap_sweep_of_six_areas() {
    // Six areas exercising every event the paper narrates for Fig. 6 (its coordinates are not given in the text):
    // R2 and R3 are dominated by R1; R4, R5, R6 each start above the current dominant sequence and open a new
    // interval, cutting the previous dominant area (the cut record the paper calls R7); when R6 and then R5 end,
    // R5 and then R1 become dominant again (the paper's R9).
    let input = vec![rec(1, 14, 3), rec(2, 5, 2), rec(3, 6, 1), rec(4, 9, 6), rec(7, 11, 8), rec(8, 10, 9)];
    let want = vec![rec(1, 4, 3), rec(4, 7, 6), rec(7, 8, 8), rec(8, 10, 9), rec(10, 11, 8), rec(11, 14, 3)];
    assert_eq!(disjointize(input.clone(), &[], 0).unwrap(), want);
    // Insertion order does not matter to the sweep.
    let mut rev = input.clone();
    rev.reverse();
    assert_eq!(disjointize(rev, &[], 0).unwrap(), want);
    assert_eq!(via_flush(&input), want);
    assert!(want.len() <= 2 * input.len(), "Lemma 4.2's bound");
}

#[test]
fn snapshot_between_two_deletes_keeps_both_bands() {
    // A snapshot at 5 must still see R1@3 where R4@6 dominates: the interval keeps two stacked bands.
    let input = vec![rec(1, 14, 3), rec(4, 9, 6)];
    let want = vec![rec(1, 4, 3), area(4, 9, 0, 3, 3), area(4, 9, 3, 6, 6), rec(9, 14, 3)];
    assert_eq!(disjointize(input.clone(), &[5], 0).unwrap(), want);
    // Without the snapshot, the paper's single dominant area.
    assert_eq!(disjointize(input, &[], 0).unwrap(), vec![rec(1, 4, 3), rec(4, 9, 6), rec(9, 14, 3)]);
}

#[test]
fn merged_stripe_reports_newest_delete() {
    // Two deletes no snapshot separates: entries below 3 report the newer delete 6, which every reader sees alike.
    let got = disjointize(vec![Area::record(&k(0), &k(4), 0, 6), Area::record(&k(0), &k(4), 0, 3)], &[1], 0)
        .unwrap();
    assert_eq!(got, vec![rec(0, 4, 6)]);
}

#[test]
fn gc_watermark_clips_and_drops() {
    let got = disjointize(vec![rec(0, 4, 3), rec(4, 8, 9)], &[], 5).unwrap();
    assert_eq!(got, vec![area(4, 8, 5, 9, 9)]);
}

#[test]
fn bad_records_are_invalid_arguments() {
    let fs = Arc::new(MemFs::new());
    let mut idx = GlobalIndex::open(fs, Path::new("/g"), IndexOptions::default(), &[]).unwrap();
    for (s, e, min, seq) in [(&b"b"[..], &b"a"[..], 0, 5), (b"a", b"a", 0, 5), (b"a", b"b", 5, 5)] {
        assert!(matches!(idx.insert(s, e, min, seq), Err(gloran::Error::InvalidArgument(_))));
    }
    let long = vec![b'x'; gloran::MAX_KEY_LEN + 1];
    assert!(matches!(idx.insert(b"a", &long, 0, 9), Err(gloran::Error::InvalidArgument(_))));
    assert!(!idx.has_unflushed());
    let bad = IndexOptions { size_ratio: 1, ..IndexOptions::default() };
    assert!(GlobalIndex::open(Arc::new(MemFs::new()), Path::new("/g"), bad, &[]).is_err());
}
