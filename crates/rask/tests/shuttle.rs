//! Randomized schedule tests of the concurrent index under the `shuttle` scheduler, which controls every
//! synchronization point (atomics, locks, yields) and explores many interleavings of small configurations.
//!
//! Run with `cargo nextest run -p rangedb-rask --features shuttle --test shuttle`. Shuttle over loom: an index
//! operation touches dozens of atomics, so loom's exhaustive search does not finish beyond one or two operations
//! per thread, while shuttle's randomized (and PCT) schedulers cover realistic operation sequences and have found
//! the bugs such tests are for; the price is probabilistic rather than exhaustive coverage.
#![cfg(feature = "shuttle")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::{Model, expand, scale};
use rask::{BlockRange, ConcurrentRask, Options, WriteRef};

fn r(a: u64, b: u64) -> BlockRange {
    BlockRange::new(a, b).unwrap()
}

/// Two writers on interleaved blocks of the same tiny leaves (capacity 2, merge on every fragmented insert), with
/// ranges that cross leaves, plus a reader; each writer checks its own blocks, the reader checks every piece is
/// a correct piece of a known write, and the end state equals the union of the writers' models.
fn scenario(cap: usize) {
    let rask = Arc::new(
        ConcurrentRask::<WriteRef>::new(Options {
            leaf_capacity: cap,
            merge_threshold: 0,
            ..Options::default()
        })
        .unwrap(),
    );
    // Writer t owns blocks whose (b / 2) % 2 == t.
    let plans: Vec<Vec<(BlockRange, u64)>> = vec![
        vec![
            (r(0, 1), 1),
            (r(4, 5), 2),
            (r(8, 9), 3),
            (r(0, 0), 4),
            (r(4, 4), 5),
            (r(12, 13), 6),
            (r(8, 8), 7),
        ],
        vec![(r(2, 3), 11), (r(6, 7), 12), (r(10, 11), 13), (r(2, 2), 14), (r(6, 6), 15), (r(14, 15), 16)],
    ];
    let mut handles = Vec::new();
    for (t, plan) in plans.clone().into_iter().enumerate() {
        let rask = rask.clone();
        handles.push(shuttle::thread::spawn(move || {
            let mut model = Model::default();
            for (i, (range, w)) in plan.into_iter().enumerate() {
                if i % 3 == 2 && t == 0 {
                    rask.delete(range);
                    model.delete(range);
                } else {
                    rask.put(range, WriteRef::new(w, 0));
                    model.put(range, WriteRef::new(w, 0));
                }
                let got = expand(&rask.get(range), range).unwrap();
                assert_eq!(got, model.get(range));
            }
            model
        }));
    }
    let reader = {
        let rask = rask.clone();
        let plans = plans.clone();
        shuttle::thread::spawn(move || {
            for _ in 0..2 {
                for (piece, v) in rask.to_vec() {
                    let w = plans.iter().flatten().find(|(_, w)| *w == v.write).map(|(r, _)| *r).unwrap();
                    assert!(w.covers(&piece) && w.first() + v.offset == piece.first(), "{piece:?} {v:?}");
                }
            }
        })
    };
    let mut all = Model::default();
    for h in handles {
        all.blocks.extend(h.join().unwrap().blocks);
    }
    reader.join().unwrap();
    rask.check_invariants().unwrap();
    let got = expand(&rask.to_vec(), BlockRange::FULL).unwrap();
    assert_eq!(got, all.blocks.into_iter().collect::<Vec<_>>());
}

#[test]
fn shuttle_random_schedules_capacity_2() {
    shuttle::check_random(|| scenario(2), 300 * scale());
}

#[test]
fn shuttle_random_schedules_capacity_3() {
    shuttle::check_random(|| scenario(3), 300 * scale());
}

#[test]
fn shuttle_pct_schedules() {
    shuttle::check_pct(|| scenario(2), 300 * scale(), 3);
}

/// Cross-leaf puts from two threads over the same blocks: lock hand-over keeps them ordered, so every block ends
/// with the value of one of the two writes and the structure stays valid.
#[test]
fn shuttle_overlapping_cross_leaf_puts() {
    shuttle::check_random(
        || {
            let rask = Arc::new(
                ConcurrentRask::<WriteRef>::new(Options {
                    leaf_capacity: 2,
                    merge_threshold: 0,
                    ..Options::default()
                })
                .unwrap(),
            );
            for (i, a) in [0u64, 3, 6, 9].into_iter().enumerate() {
                rask.put(r(a, a + 1), WriteRef::new(100 + i as u64, 0));
            }
            let hs: Vec<_> = (0..2u64)
                .map(|t| {
                    let rask = rask.clone();
                    shuttle::thread::spawn(move || rask.put(r(1, 10), WriteRef::new(t, 0)))
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            rask.check_invariants().unwrap();
            let got = expand(&rask.to_vec(), BlockRange::FULL).unwrap();
            for (b, (w, off)) in got {
                if (1..=10).contains(&b) {
                    assert!(w < 2 && off == b - 1, "block {b} = ({w}, {off})");
                }
            }
        },
        300 * scale(),
    );
}
