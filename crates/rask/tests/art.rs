//! The adaptive radix tree against `BTreeMap`: random inserts, removes, gets and predecessor searches, with node
//! growth, shrinking and path compression exercised on purpose.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::{scale, seeds};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rask::internal::{Art, BTreeIndex, InternalIndex};

fn check_same(art: &Art<u32>, model: &BTreeMap<u64, u32>, probe: u64) {
    let want = model.range(..=probe).next_back().map(|(k, v)| (*k, *v));
    assert_eq!(art.predecessor(probe), want, "predecessor({probe})");
    assert_eq!(art.get(probe), model.get(&probe).copied(), "get({probe})");
}

fn key(rng: &mut SmallRng, mode: u32) -> u64 {
    match mode {
        // Dense small keys: deep shared prefixes, Node256 at the bottom.
        0 => rng.random_range(0..4096),
        // Sparse keys: path compression at every level.
        1 => rng.random(),
        // Clustered: a few prefixes with dense low bytes.
        _ => (rng.random_range(0..8u64) << 40) | rng.random_range(0..300u64),
    }
}

#[test]
fn random_operations_match_btreemap() {
    for seed in seeds() {
        for mode in 0..3 {
            let mut rng = SmallRng::seed_from_u64(seed ^ mode as u64);
            let mut art = Art::<u32>::default();
            let mut model = BTreeMap::new();
            for i in 0..20_000 * scale() {
                let k = key(&mut rng, mode);
                match rng.random_range(0..10) {
                    0..=4 => assert_eq!(art.insert(k, i as u32), model.insert(k, i as u32), "seed {seed}"),
                    5..=7 => assert_eq!(art.remove(k), model.remove(&k), "seed {seed}"),
                    _ => check_same(&art, &model, k),
                }
                assert_eq!(art.len(), model.len());
            }
            let mut all = Vec::new();
            art.for_each(&mut |k, v| all.push((k, v)));
            assert_eq!(
                all,
                model.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>(),
                "seed {seed} mode {mode}"
            );
            for _ in 0..2000 {
                let p = key(&mut rng, mode);
                check_same(&art, &model, p);
            }
            check_same(&art, &model, u64::MAX);
            check_same(&art, &model, 0);
        }
    }
}

#[test]
fn nodes_grow_and_shrink_through_every_size() {
    let mut art = Art::<u32>::default();
    // 256 children under one node: Node4 → 16 → 48 → 256.
    for b in 0..256u64 {
        art.insert(b, b as u32);
        let counts = art.node_counts();
        let expect = match b + 1 {
            1 => [0, 0, 0, 0],
            2..=4 => [1, 0, 0, 0],
            5..=16 => [0, 1, 0, 0],
            17..=48 => [0, 0, 1, 0],
            _ => [0, 0, 0, 1],
        };
        assert_eq!(counts, expect, "after {} keys", b + 1);
    }
    let full = art.memory_usage();
    for b in (0..256u64).rev() {
        assert_eq!(art.remove(b), Some(b as u32));
        let n = b as usize;
        let counts = art.node_counts();
        let kind = counts.iter().position(|&c| c == 1);
        match n {
            0 | 1 => assert_eq!(counts, [0, 0, 0, 0], "{n} keys left"),
            2..=3 => assert_eq!(kind, Some(0), "{n} keys left: {counts:?}"),
            4..=12 => assert_eq!(kind, Some(1), "{n} keys left: {counts:?}"),
            13..=37 => assert_eq!(kind, Some(2), "{n} keys left: {counts:?}"),
            _ => assert_eq!(kind, Some(3), "{n} keys left: {counts:?}"),
        }
    }
    assert!(art.is_empty());
    assert_eq!(art.memory_usage(), 0);
    assert!(full > 0);
}

#[test]
fn path_compression_keeps_one_node_for_two_distant_keys() {
    let mut art = Art::<u32>::default();
    art.insert(0x0102_0304_0506_0700, 1);
    art.insert(0x0102_0304_0506_0799, 2);
    // Seven shared bytes compress into one Node4's prefix.
    assert_eq!(art.node_counts(), [1, 0, 0, 0]);
    art.insert(0x0102_0304_ff00_0000, 3);
    // The new key leaves the compressed path at byte 4: a new Node4 above the old one, whose prefix shrinks.
    assert_eq!(art.node_counts(), [2, 0, 0, 0]);
    assert_eq!(art.predecessor(0x0102_0304_0506_0798), Some((0x0102_0304_0506_0700, 1)));
    assert_eq!(art.predecessor(0x0102_0304_0600_0000), Some((0x0102_0304_0506_0799, 2)));
    assert_eq!(art.predecessor(0x0102_0304_0506_06ff), None);
    assert_eq!(art.predecessor(u64::MAX), Some((0x0102_0304_ff00_0000, 3)));
    // Removing the split-off key collapses the upper node back into the compressed path.
    assert_eq!(art.remove(0x0102_0304_ff00_0000), Some(3));
    assert_eq!(art.node_counts(), [1, 0, 0, 0]);
    assert_eq!(art.get(0x0102_0304_0506_0799), Some(2));
}

#[test]
fn art_and_btree_internal_indexes_agree() {
    let mut rng = SmallRng::seed_from_u64(seeds()[0]);
    let mut art = Art::<u32>::default();
    let mut bt = BTreeIndex::<u32>::default();
    for i in 0..20_000u32 {
        let k: u64 = rng.random::<u64>() >> rng.random_range(0..64);
        if rng.random_ratio(2, 3) {
            assert_eq!(art.insert(k, i), bt.insert(k, i));
        } else {
            assert_eq!(art.remove(k), bt.remove(k));
        }
        let p: u64 = rng.random::<u64>() >> rng.random_range(0..64);
        assert_eq!(art.predecessor(p), bt.predecessor(p));
    }
}
