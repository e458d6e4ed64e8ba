//! Multi-threaded stress of the concurrent index against per-thread models.
//!
//! Writers own disjoint sets of blocks (interleaved 8-block chunks, plus one writer with a private region of long
//! ranges and deletes), so each writer's reads of its own blocks must match its model exactly, however the
//! others' writes split, merge and resplit the leaves they share. A reader scans everything and checks that every
//! piece it sees is a correct piece of some write (write ranges are generated up front) and that no block goes
//! back to an older write between its scans. Small leaves make every
//! structural change and cross-leaf put frequent.
#![cfg(not(feature = "shuttle"))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{Model, expand, scale, seeds};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rask::{BlockRange, ConcurrentRask, Options, WriteRef};

const CHUNK: u64 = 8;
const CHUNK_WRITERS: u64 = 2;
const SPACE: u64 = 4096;
const PRIVATE: u64 = 1 << 20;

#[derive(Clone, Copy, Debug)]
enum Op {
    Put(BlockRange, WriteRef),
    Delete(BlockRange),
    Get(BlockRange),
}

fn gen_ops(seed: u64, t: u64, n: usize) -> Vec<Op> {
    let mut rng = SmallRng::seed_from_u64(seed ^ (t << 32));
    let mut w = t * 1_000_000_000;
    (0..n)
        .map(|_| {
            let r = if t < CHUNK_WRITERS {
                let chunk = rng.random_range(0..SPACE / CHUNK / CHUNK_WRITERS) * CHUNK_WRITERS + t;
                let a = rng.random_range(0..CHUNK);
                let b = rng.random_range(a..CHUNK);
                BlockRange::new(chunk * CHUNK + a, chunk * CHUNK + b).unwrap()
            } else {
                let f = PRIVATE + rng.random_range(0..2000);
                BlockRange::with_len(f, rng.random_range(1..200)).unwrap()
            };
            match rng.random_range(0..10) {
                0..=1 => Op::Get(r),
                2 => Op::Delete(r),
                _ => {
                    w += 1;
                    Op::Put(r, WriteRef::new(w, 0))
                }
            }
        })
        .collect()
}

fn stress(seed: u64, opts: Options, ops_per_thread: usize) {
    let writers = CHUNK_WRITERS + 1;
    let plans: Vec<Vec<Op>> = (0..writers).map(|t| gen_ops(seed, t, ops_per_thread)).collect();
    let mut write_ranges: HashMap<u64, BlockRange> = HashMap::new();
    for plan in &plans {
        for op in plan {
            if let Op::Put(r, w) = op {
                write_ranges.insert(w.write, *r);
            }
        }
    }
    let rask: ConcurrentRask<WriteRef> = ConcurrentRask::new(opts.clone()).unwrap();
    let done = AtomicBool::new(false);
    let models: Vec<Model> = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut scans = 0;
            // Each block has one writer, whose write numbers rise: a block seen at write `w` must never be seen
            // at an older write later (deleted in between is fine).
            let mut seen: HashMap<u64, u64> = HashMap::new();
            while !done.load(Ordering::Relaxed) || scans == 0 {
                let all = rask.to_vec();
                let mut last = None;
                for (r, v) in &all {
                    assert!(last.is_none_or(|l| r.first() > l), "pieces out of order: {all:?}");
                    last = Some(r.last());
                    let w = write_ranges.get(&v.write).unwrap_or_else(|| panic!("unknown write {v:?}"));
                    let first = w.first() + v.offset;
                    assert!(
                        first == r.first() && w.covers(r),
                        "piece {r:?} = {v:?} is not part of write {w:?} (seed {seed})"
                    );
                    for b in r.first()..=r.last() {
                        let before = seen.insert(b, v.write).unwrap_or(0);
                        assert!(
                            v.write >= before,
                            "block {b}: write {} after {before} (seed {seed})",
                            v.write
                        );
                    }
                }
                scans += 1;
            }
        });
        let handles: Vec<_> = plans
            .iter()
            .map(|plan| {
                let rask = &rask;
                let opts = &opts;
                s.spawn(move || {
                    let mut model = Model::default();
                    for (i, op) in plan.iter().enumerate() {
                        match *op {
                            Op::Put(r, w) => {
                                rask.put(r, w);
                                model.put(r, w);
                            }
                            Op::Delete(r) => {
                                rask.delete(r);
                                model.delete(r);
                            }
                            Op::Get(r) => {
                                let got = expand(&rask.get(r), r).unwrap();
                                assert_eq!(got, model.get(r), "seed {seed} opts {opts:?} op #{i} {op:?}");
                            }
                        }
                    }
                    model
                })
            })
            .collect();
        let models = handles.into_iter().map(|h| h.join().unwrap()).collect();
        done.store(true, Ordering::Relaxed);
        reader.join().unwrap();
        models
    });
    rask.check_invariants().unwrap();
    let mut all = Model::default();
    for m in models {
        all.blocks.extend(m.blocks);
    }
    let got = expand(&rask.to_vec(), BlockRange::FULL).unwrap();
    let want: Vec<_> = all.blocks.into_iter().collect();
    assert_eq!(got, want, "final state, seed {seed} opts {opts:?}");
    let s = rask.stats();
    assert!(s.splits > 0 && s.gc_lightweight > 0, "{s:?}");
}

/// Under Miri (`scripts/miri`), which checks the unsafe code of the concurrent index (uninitialized body slots,
/// raw leaf pointers, epoch reclamation) for undefined behaviour and data races, the runs are cut to what it can
/// interpret in about a minute.
fn miri_or<T>(miri: T, native: T) -> T {
    if cfg!(miri) { miri } else { native }
}

#[test]
fn threads_on_disjoint_blocks_sharing_leaves_match_their_models() {
    let seeds = miri_or(seeds()[..1].to_vec(), seeds());
    let configs = [
        Options { leaf_capacity: 3, merge_threshold: 1, ..Options::default() },
        Options { leaf_capacity: 2, merge_threshold: 0, ..Options::default() },
        Options { leaf_capacity: 4, merge_threshold: 0, ..Options::default() },
        Options::default(),
    ];
    for seed in seeds {
        for opts in &configs[..miri_or(1, configs.len())] {
            stress(seed, opts.clone(), miri_or(100, 3000 * scale()));
        }
    }
}

#[test]
fn concurrent_index_matches_single_threaded_semantics() {
    // One thread: the concurrent index must behave exactly like the per-block model.
    let mut ops_gen = common::OpGen::new(seeds()[0], 500);
    let rask: ConcurrentRask<WriteRef> =
        ConcurrentRask::new(Options { leaf_capacity: 3, merge_threshold: 0, ..Options::default() }).unwrap();
    let mut model = Model::default();
    for i in 0..miri_or(600, 5000) {
        match ops_gen.next_op(20, 10) {
            common::Op::Put(r, w) => {
                rask.put(r, w);
                model.put(r, w);
            }
            common::Op::Delete(r) => {
                rask.delete(r);
                model.delete(r);
            }
            common::Op::Get(r) => assert_eq!(expand(&rask.get(r), r).unwrap(), model.get(r), "op #{i}"),
        }
    }
    rask.check_invariants().unwrap();
    let s = rask.stats();
    assert!(s.merges > 0 && s.resplits > 0, "{s:?}");
    assert_eq!(
        expand(&rask.to_vec(), BlockRange::FULL).unwrap(),
        model.blocks.into_iter().collect::<Vec<_>>()
    );
}
