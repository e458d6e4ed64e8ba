//! I/O compaction (RASK §3.1): the paper's examples as golden tests, window boundaries, and a randomized check that
//! compaction never changes which blocks a volume's writes cover.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use common::for_each_seed;
use workloads::Rng;
use workloads::traces::{
    AnalysisOptions, BlockOp, Compacted, DEFAULT_WINDOW_BLOCKS, IoCompactor, IoKind, analyze,
};

fn w(volume: u32, first: u64, last: u64) -> BlockOp {
    BlockOp { volume, kind: IoKind::Write, first_block: first, last_block: last }
}

fn r(volume: u32, first: u64, last: u64) -> BlockOp {
    BlockOp { volume, kind: IoKind::Read, first_block: first, last_block: last }
}

fn compact(ops: &[BlockOp], window: u64) -> Vec<BlockOp> {
    Compacted::new(ops.iter().copied(), window).collect()
}

/// §3.1: A [1,4], B [11,12], C [5,6], D [7,8] cached together flush as CWs [1,8] and [11,12].
#[test]
fn golden_section_3_1_example() {
    let ops = [w(0, 1, 4), w(0, 11, 12), w(0, 5, 6), w(0, 7, 8)];
    assert_eq!(compact(&ops, DEFAULT_WINDOW_BLOCKS), vec![w(0, 1, 8), w(0, 11, 12)]);
}

/// §1: [1,3], [9,10], [4,7]: the first and third are consecutive and merge into [1,7].
#[test]
fn golden_introduction_example() {
    let ops = [w(0, 1, 3), w(0, 9, 10), w(0, 4, 7)];
    assert_eq!(compact(&ops, DEFAULT_WINDOW_BLOCKS), vec![w(0, 1, 7), w(0, 9, 10)]);
}

/// §3.1's long-CW ratio example: the same four writes in a 4-write window give one long CW of 3 of 4 writes.
#[test]
fn golden_long_cw_ratio_example() {
    let ops = [w(0, 1, 4), w(0, 11, 12), w(0, 5, 6), w(0, 7, 8)];
    let s = analyze(ops, &AnalysisOptions { cw_window_writes: 4 });
    assert_eq!((s.cws, s.long_cws, s.writes_in_long_cws), (2, 1, 3));
    assert!((s.long_cw_ratio() - 0.75).abs() < 1e-12);
}

/// The buffer flushes when its writes reach the window; writes of the next window never merge with the previous.
#[test]
fn window_boundary() {
    // 100 + 28 = 128 blocks: the second write fills the window and triggers the flush.
    let ops = [w(0, 0, 99), w(0, 100, 127), w(0, 128, 130)];
    let out = compact(&ops, 128);
    assert_eq!(out, vec![w(0, 0, 127), w(0, 128, 130)]);
    // With a larger window all three merge.
    assert_eq!(compact(&ops, 256), vec![w(0, 0, 130)]);
}

#[test]
fn overlapping_and_touching_writes_merge_into_their_union() {
    let ops = [w(0, 10, 20), w(0, 15, 17), w(0, 21, 22), w(0, 5, 12), w(0, 30, 30)];
    assert_eq!(compact(&ops, 128), vec![w(0, 5, 22), w(0, 30, 30)]);
}

#[test]
fn a_write_larger_than_the_window_flushes_with_what_was_buffered() {
    let ops = [w(0, 1000, 1001), w(0, 0, 499), w(0, 2000, 2000)];
    assert_eq!(compact(&ops, 128), vec![w(0, 0, 499), w(0, 1000, 1001), w(0, 2000, 2000)]);
}

#[test]
fn reads_pass_through_in_place_and_volumes_are_separate() {
    let ops = [w(0, 1, 2), w(1, 3, 4), r(0, 1, 1), w(0, 3, 4), w(1, 1, 2)];
    let mut c = IoCompactor::new(128);
    for op in ops {
        c.push(op);
    }
    // Only the read is out before the end of the trace.
    assert_eq!(c.pop(), Some(r(0, 1, 1)));
    assert_eq!(c.pop(), None);
    c.finish();
    let rest: Vec<BlockOp> = std::iter::from_fn(|| c.pop()).collect();
    assert_eq!(rest, vec![w(0, 1, 4), w(1, 1, 4)]);
    let s = c.stats();
    assert_eq!(
        (s.writes_in, s.writes_out, s.reads, s.flushes, s.blocks_in, s.blocks_out),
        (4, 2, 1, 2, 8, 8)
    );
}

#[test]
fn window_zero_disables_compaction() {
    let ops = [w(0, 1, 4), w(0, 5, 6), r(0, 1, 1)];
    assert_eq!(compact(&ops, 0), ops.to_vec());
}

/// Per volume, the compacted writes cover exactly the blocks the original writes covered, no flush emits two
/// touching CWs, and there are never more writes out than in.
#[test]
fn compaction_preserves_covered_blocks() {
    for_each_seed(|seed| {
        let mut rng = Rng::new(seed);
        for _ in 0..50 {
            let window = [1u64, 8, 128, 1000][rng.below(4) as usize];
            let ops: Vec<BlockOp> = (0..500)
                .map(|_| {
                    let v = rng.below(3) as u32;
                    let first = rng.below(400);
                    let last = first + rng.geometric(0.3).min(50);
                    if rng.chance(0.2) { r(v, first, last) } else { w(v, first, last) }
                })
                .collect();
            let mut c = IoCompactor::new(window);
            let mut out = Vec::new();
            for &op in &ops {
                c.push(op);
                out.extend(std::iter::from_fn(|| c.pop()));
            }
            let before_finish = out.len();
            c.finish();
            out.extend(std::iter::from_fn(|| c.pop()));
            assert!(out.len() >= before_finish);
            for v in 0..3 {
                let blocks = |ops: &[BlockOp]| -> BTreeSet<u64> {
                    ops.iter()
                        .filter(|o| o.volume == v && o.is_write())
                        .flat_map(|o| o.first_block..=o.last_block)
                        .collect()
                };
                assert_eq!(blocks(&ops), blocks(&out), "window {window}, volume {v}");
                let reads = |ops: &[BlockOp]| -> Vec<BlockOp> {
                    ops.iter().filter(|o| o.volume == v && !o.is_write()).copied().collect()
                };
                assert_eq!(reads(&ops), reads(&out));
            }
            let s = c.stats();
            assert!(s.writes_out <= s.writes_in);
            assert_eq!(s.writes_out as usize, out.iter().filter(|o| o.is_write()).count());
        }
    });
}

/// The fallible adapter compacts like the plain one and passes an error through at once.
#[test]
fn try_compacted_matches_and_stops_at_errors() {
    use workloads::traces::TryCompacted;
    let ops = [w(0, 1, 4), w(0, 11, 12), r(0, 1, 1), w(0, 5, 6), w(0, 7, 8)];
    let ok: Vec<BlockOp> =
        TryCompacted::new(ops.iter().map(|&o| Ok::<_, String>(o)), 128).map(|o| o.unwrap()).collect();
    assert_eq!(ok, compact(&ops, 128));
    let with_error = vec![Ok(w(0, 1, 4)), Err("boom".to_string()), Ok(w(0, 5, 6))];
    let out: Vec<Result<BlockOp, String>> = TryCompacted::new(with_error.into_iter(), 128).collect();
    assert_eq!(out, vec![Err("boom".to_string())]);
}
