//! Model-based randomized tests of the single-threaded index against a per-block map.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Model, Op, OpGen, expand, scale, seeds};
use rask::internal::{Art, BTreeIndex, InternalIndex};
use rask::{BlockRange, LeafHandle, Options, Rask, WriteRef};

fn run<I: InternalIndex<LeafHandle>>(seed: u64, opts: Options, ops: usize, space: u64, read: u32, del: u32) {
    let mut rask: Rask<WriteRef, I> = Rask::new(opts.clone()).unwrap();
    let mut model = Model::default();
    let mut ops_gen = OpGen::new(seed, space);
    let ctx = |i: usize, op: &Op| {
        format!("seed {seed} opts {opts:?} op #{i} {op:?} (rerun with RANGEDB_SEED={seed})")
    };
    for i in 0..ops {
        let op = ops_gen.next_op(read, del);
        match op {
            Op::Put(r, w) => {
                rask.put(r, w);
                model.put(r, w);
            }
            Op::Delete(r) => {
                rask.delete(r);
                model.delete(r);
            }
            Op::Get(r) => {
                let got = expand(&rask.get(r), r).unwrap_or_else(|e| panic!("{e}: {}", ctx(i, &op)));
                assert_eq!(got, model.get(r), "{}", ctx(i, &op));
            }
        }
        if let Err(e) = rask.check_invariants() {
            panic!("{e}: {}", ctx(i, &op));
        }
        if i % 97 == 0 {
            let all: Vec<_> = rask.iter().collect();
            let got = expand(&all, BlockRange::FULL).unwrap_or_else(|e| panic!("{e}: {}", ctx(i, &op)));
            let want: Vec<_> = model.blocks.iter().map(|(k, v)| (*k, *v)).collect();
            assert_eq!(got, want, "iteration {}", ctx(i, &op));
        }
    }
    let all: Vec<_> = rask.iter().collect();
    assert_eq!(all.len(), rask.len());
    let want: Vec<_> = model.blocks.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(expand(&all, BlockRange::FULL).unwrap(), want, "final state, seed {seed} opts {opts:?}");
}

fn configs() -> Vec<Options> {
    let mut v = Vec::new();
    for cap in [2usize, 3, 4, 5, 8, 16, 32, 128] {
        for thr in [0usize, 1, cap / 4, usize::MAX] {
            v.push(Options { leaf_capacity: cap, merge_threshold: thr, ..Options::default() });
        }
        // The ablation without the first GC stage: every full leaf goes to normal GC.
        v.push(Options { leaf_capacity: cap, merge_threshold: cap / 4, two_stage_gc: false });
    }
    v.dedup();
    v
}

#[test]
fn random_ops_match_per_block_model_btree_internal() {
    for seed in seeds() {
        for (k, opts) in configs().into_iter().enumerate() {
            run::<BTreeIndex<LeafHandle>>(seed ^ k as u64, opts, 600 * scale(), 300, 25, 10);
        }
    }
}

#[test]
fn random_ops_match_per_block_model_art_internal() {
    for seed in seeds() {
        for (k, opts) in configs().into_iter().enumerate() {
            run::<Art<LeafHandle>>(seed.wrapping_mul(31) ^ k as u64, opts, 600 * scale(), 2000, 25, 10);
        }
    }
}

#[test]
fn write_heavy_long_run_paper_defaults() {
    for seed in seeds() {
        run::<Art<LeafHandle>>(seed, Options::default(), 8000 * scale(), 5000, 10, 3);
    }
}

#[test]
fn structural_operations_all_happen() {
    let mut rask: Rask<WriteRef> =
        Rask::new(Options { leaf_capacity: 4, merge_threshold: 0, ..Options::default() }).unwrap();
    let mut ops_gen = OpGen::new(7, 400);
    for _ in 0..3000 {
        match ops_gen.next_op(0, 10) {
            Op::Put(r, w) => rask.put(r, w),
            Op::Delete(r) => rask.delete(r),
            Op::Get(_) => {}
        }
    }
    let s = rask.stats();
    assert!(s.gc_lightweight > 0 && s.gc_normal > 0 && s.gc_reclaimed > 0, "{s:?}");
    assert!(s.splits > 0 && s.median_splits > 0, "{s:?}");
    assert!(s.merges > 0 && s.resplits > 0 && s.ranges_merged > 0, "{s:?}");
    assert!(s.fragmented_inserts > 0, "{s:?}");
}

/// Short ranges scattered 2³³ blocks apart: leaves hold entries whose offsets from the anchor do not fit the
/// narrow 32-bit range encoding, so they switch to wide ranges and back as GC and splits rebuild them.
#[test]
fn sparse_ranges_across_wide_and_narrow_leaves_match_model() {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    for seed in seeds() {
        for cap in [2usize, 4, 16] {
            let opts = Options::with_capacity(cap);
            let mut rask: Rask<WriteRef> = Rask::new(opts.clone()).unwrap();
            let mut model = Model::default();
            let mut rng = SmallRng::seed_from_u64(seed ^ cap as u64);
            for i in 0..1500 * scale() as u64 {
                let first = rng.random_range(0..48u64) * (1 << 33) + rng.random_range(0..24u64);
                let r = BlockRange::with_len(first, rng.random_range(1..=8)).unwrap();
                match rng.random_range(0..10) {
                    0..=5 => {
                        rask.put(r, WriteRef::new(i, 0));
                        model.put(r, WriteRef::new(i, 0));
                    }
                    6 => {
                        rask.delete(r);
                        model.delete(r);
                    }
                    _ => {
                        let got = expand(&rask.get(r), r).unwrap();
                        assert_eq!(got, model.get(r), "seed {seed} cap {cap} op {i} get {r:?}");
                    }
                }
                rask.check_invariants().unwrap_or_else(|e| panic!("{e}: seed {seed} cap {cap} op {i}"));
            }
            let all: Vec<_> = rask.iter().collect();
            let want: Vec<_> = model.blocks.iter().map(|(k, v)| (*k, *v)).collect();
            assert_eq!(expand(&all, BlockRange::FULL).unwrap(), want, "seed {seed} cap {cap}");
        }
    }
}
