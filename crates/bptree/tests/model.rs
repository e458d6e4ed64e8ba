//! Model-based randomized tests: every operation of the tree against `BTreeMap`, with tiny leaves and nodes so
//! flushes, redistributes, splits and merges happen constantly.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use bptree::{BpTree, Bpa, ByteKey, Leaf, Options, SortedLeaf, SortedLeafTree};
use rand::Rng;
use rand::rngs::SmallRng;

fn configs() -> Vec<Options> {
    vec![
        Options::tiny(),
        Options { log_size: 3, num_blocks: 3, block_size: 4, internal_bytes: 0, ..Options::default() },
        Options { log_size: 4, num_blocks: 4, block_size: 8, internal_bytes: 100, ..Options::default() },
        Options { log_size: 8, num_blocks: 2, block_size: 50, internal_bytes: 64, ..Options::default() },
        Options::default(),
    ]
}

fn rand_bound(rng: &mut SmallRng, keyspace: u64) -> Bound<u64> {
    match rng.random_range(0..5) {
        0 => Bound::Unbounded,
        1 | 2 => Bound::Included(rng.random_range(0..keyspace)),
        _ => Bound::Excluded(rng.random_range(0..keyspace)),
    }
}

fn as_ref(b: &Bound<u64>) -> Bound<&u64> {
    b.as_ref()
}

fn valid(lo: &Bound<u64>, hi: &Bound<u64>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a <= b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a < b,
        _ => true,
    }
}

fn run<L: Leaf<u64, u64>>(seed: u64, opts: Options, ops: usize, keyspace: u64) {
    let mut rng = common::rng(seed);
    let mut t: BpTree<u64, u64, L> = BpTree::with_options(opts).unwrap();
    let mut m: BTreeMap<u64, u64> = BTreeMap::new();
    // Phases: grow, churn, shrink, so merges and root collapses are exercised too.
    for i in 0..ops {
        let phase = i * 3 / ops;
        let p_insert = [75, 50, 20][phase];
        let op = rng.random_range(0..100);
        let k = if rng.random_bool(0.2) { i as u64 % keyspace } else { rng.random_range(0..keyspace) };
        if op < p_insert {
            let v = rng.random();
            assert_eq!(t.insert(k, v), m.insert(k, v), "insert {k}");
        } else if op < p_insert + 20 {
            assert_eq!(t.remove(&k), m.remove(&k), "remove {k}");
        } else if op < p_insert + 25 {
            assert_eq!(t.get(&k), m.get(&k), "get {k}");
        } else {
            let lo = rand_bound(&mut rng, keyspace);
            let hi = rand_bound(&mut rng, keyspace);
            match rng.random_range(0..4) {
                0 => {
                    // Sometimes no limit at all (`usize::MAX`): a sorted leaf once computed `start + length`.
                    let len = if rng.random_ratio(1, 8) { usize::MAX } else { rng.random_range(0..50) };
                    let mut got = Vec::new();
                    let n = t.iterate_range(as_ref(&lo), len, |k, v| got.push((*k, *v)));
                    let want: Vec<_> =
                        m.range((lo, Bound::Unbounded)).take(len).map(|(k, v)| (*k, *v)).collect();
                    assert_eq!(n, want.len());
                    assert_eq!(got, want, "iterate_range {lo:?} {len}");
                }
                1 => {
                    let mut got = Vec::new();
                    t.map_range((lo, hi), |k, v| got.push((*k, *v)));
                    got.sort();
                    let want: Vec<_> = if valid(&lo, &hi) {
                        m.range((lo, hi)).map(|(k, v)| (*k, *v)).collect()
                    } else {
                        vec![]
                    };
                    assert_eq!(got, want, "map_range {lo:?} {hi:?}");
                }
                _ => {
                    // Double-ended iteration: random interleaving of both ends.
                    let want: Vec<_> = if valid(&lo, &hi) {
                        m.range((lo, hi)).map(|(k, v)| (*k, *v)).collect()
                    } else {
                        vec![]
                    };
                    let mut it = t.range((lo, hi));
                    let (mut front, mut back) = (Vec::new(), Vec::new());
                    loop {
                        let x = if rng.random_bool(0.5) {
                            it.next().map(|x| front.push(x))
                        } else {
                            it.next_back().map(|x| back.push(x))
                        };
                        if x.is_none() {
                            break;
                        }
                    }
                    assert!(it.next().is_none() && it.next_back().is_none());
                    back.reverse();
                    front.extend(back);
                    let got: Vec<_> = front.into_iter().map(|(k, v)| (*k, *v)).collect();
                    assert_eq!(got, want, "range {lo:?} {hi:?}");
                }
            }
        }
        assert_eq!(t.len(), m.len());
        if i % 97 == 0 {
            t.check_invariants().unwrap();
        }
    }
    t.check_invariants().unwrap();
    let all: Vec<_> = t.iter().map(|(k, v)| (*k, *v)).collect();
    let want: Vec<_> = m.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(all, want);
    // Drain everything: the tree must shrink back to one leaf.
    let keys: Vec<u64> = m.keys().copied().collect();
    for k in keys {
        assert_eq!(t.remove(&k), m.remove(&k));
    }
    t.check_invariants().unwrap();
    assert_eq!(t.len(), 0);
    assert_eq!(t.height(), 1);
}

#[test]
fn bpa_tree_matches_btreemap() {
    common::for_each_seed(|seed| {
        for (i, opts) in configs().into_iter().enumerate() {
            let ops = if i == 4 { 20_000 } else { 6_000 } * common::scale();
            run::<Bpa<u64, u64>>(seed + i as u64, opts, ops, if i == 4 { 50_000 } else { 2_000 });
        }
    });
}

#[test]
fn sorted_leaf_tree_matches_btreemap() {
    common::for_each_seed(|seed| {
        for (i, opts) in configs().into_iter().take(3).enumerate() {
            run::<SortedLeaf<u64, u64>>(seed + i as u64, opts, 4_000 * common::scale(), 2_000);
        }
    });
}

#[test]
fn sequential_and_reverse_inserts() {
    for opts in configs() {
        let mut t: BpTree<u64, u64> = BpTree::with_options(opts).unwrap();
        for k in 0..3000u64 {
            assert_eq!(t.insert(k, k), None);
        }
        for k in (10_000..13_000u64).rev() {
            assert_eq!(t.insert(k, k), None);
        }
        t.check_invariants().unwrap();
        assert_eq!(t.len(), 6000);
        let keys: Vec<u64> = t.iter().map(|(k, _)| *k).collect();
        let want: Vec<u64> = (0..3000).chain(10_000..13_000).collect();
        assert_eq!(keys, want);
        let rev: Vec<u64> = t.iter().rev().map(|(k, _)| *k).collect();
        assert_eq!(rev, want.iter().rev().copied().collect::<Vec<_>>());
    }
}

#[test]
fn extreme_keys_are_ordinary() {
    // No reserved key value: 0 and u64::MAX are stored like any other key.
    let mut t: BpTree<u64, u64> = BpTree::with_options(Options::tiny()).unwrap();
    for k in [0, u64::MAX, 1, u64::MAX - 1, 0] {
        t.insert(k, k);
    }
    assert_eq!(t.len(), 4);
    assert_eq!(t.get(&0), Some(&0));
    assert_eq!(t.get(&u64::MAX), Some(&u64::MAX));
    let keys: Vec<u64> = t.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, vec![0, 1, u64::MAX - 1, u64::MAX]);
}

#[test]
fn bulk_load_and_freeze_match_model() {
    common::for_each_seed(|seed| {
        let mut rng = common::rng(seed);
        for opts in configs() {
            let n = rng.random_range(0..5000);
            let mut m = BTreeMap::new();
            for _ in 0..n {
                m.insert(rng.random_range(0..100_000u64), rng.random::<u64>());
            }
            let mut t: BpTree<u64, u64> = BpTree::bulk_load(opts, m.iter().map(|(k, v)| (*k, *v))).unwrap();
            t.check_invariants().unwrap();
            assert_eq!(t.len(), m.len());
            // Keep updating after a bulk load.
            for _ in 0..2000 {
                let k = rng.random_range(0..100_000u64);
                if rng.random_bool(0.6) {
                    assert_eq!(t.insert(k, 7), m.insert(k, 7));
                } else {
                    assert_eq!(t.remove(&k), m.remove(&k));
                }
            }
            t.check_invariants().unwrap();
            let f = t.freeze();
            f.check_invariants().unwrap();
            let got: Vec<_> = f.iter().map(|(k, v)| (*k, *v)).collect();
            let want: Vec<_> = m.iter().map(|(k, v)| (*k, *v)).collect();
            assert_eq!(got, want);
            for _ in 0..200 {
                let k = rng.random_range(0..100_000u64);
                assert_eq!(f.get(&k), m.get(&k));
                let mut got = Vec::new();
                let c = f.iterate_range(Bound::Included(&k), 20, |k, v| got.push((*k, *v)));
                let want: Vec<_> = m.range(k..).take(20).map(|(k, v)| (*k, *v)).collect();
                assert_eq!(c, want.len());
                assert_eq!(got, want);
            }
        }
    });
}

#[test]
fn bulk_load_rejects_unsorted_input() {
    let r = BpTree::<u64, u64>::bulk_load(Options::default(), vec![(1, 1), (3, 3), (2, 2)]);
    assert!(matches!(r, Err(bptree::Error::UnsortedInput(2))));
    let r = BpTree::<u64, u64>::bulk_load(Options::default(), vec![(1, 1), (1, 2)]);
    assert!(matches!(r, Err(bptree::Error::UnsortedInput(1))));
}

#[test]
fn invalid_options_are_rejected() {
    let bad = [
        Options { log_size: 1, ..Options::default() },
        Options { num_blocks: 0, ..Options::default() },
        Options { block_size: 1, ..Options::default() },
        Options { split_fill: 0.0, ..Options::default() },
        Options { merge_fill: 0.5, ..Options::default() },
        Options { split_fill: f64::NAN, ..Options::default() },
    ];
    for o in bad {
        assert!(BpTree::<u64, u64>::with_options(o).is_err(), "{o:?}");
    }
    Options::default().validate().unwrap();
    Options::tiny().validate().unwrap();
}

/// Regression (found by the fuzz interpreter): with one block of two slots the merge threshold rounded down to
/// zero, so removals could leave empty non-root leaves behind.
#[test]
fn tiny_leaves_never_stay_empty() {
    let opts = Options { log_size: 2, num_blocks: 1, block_size: 2, internal_bytes: 0, ..Options::default() };
    let mut t: BpTree<u64, u64> = BpTree::with_options(opts).unwrap();
    for k in 0..200u64 {
        t.insert(k, k);
    }
    for k in (0..200u64).filter(|k| k % 7 != 0) {
        assert_eq!(t.remove(&k), Some(k));
        t.check_invariants().unwrap();
    }
    assert_eq!(t.len(), 29);
}

/// A random byte string from a 3-letter alphabet, 0-28 bytes: half of the keys start with 14 `a`s, so many
/// share their first 16 bytes (comparisons fall through the integer head to the bytes), and both the inline
/// (<= 16 bytes) and the heap form of `ByteKey` occur, including keys that differ only by trailing zeros.
fn rand_bytes(rng: &mut SmallRng) -> Vec<u8> {
    let mut k = if rng.random_bool(0.5) { vec![b'a'; 14] } else { Vec::new() };
    let len = if rng.random_bool(0.3) { rng.random_range(0..=8) } else { rng.random_range(9..=14) };
    k.extend((0..len).map(|_| [0u8, b'a', 0xff][rng.random_range(0..3)]));
    k
}

/// The memtable case: `ByteKey` keys and byte-string values, every operation against `BTreeMap<Vec<u8>, _>`,
/// with exact `memory_usage` accounting of the keys' and values' heap bytes.
#[test]
fn byte_keys_match_btreemap() {
    common::for_each_seed(|seed| {
        for (ci, opts) in configs().into_iter().take(3).enumerate() {
            let mut rng = common::rng(seed ^ (ci as u64) << 8);
            let mut t: BpTree<ByteKey, Vec<u8>> = BpTree::with_options(opts).unwrap();
            let mut m: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            let ops = 2_000 * common::scale();
            let empty_bytes = t.memory_usage();
            for i in 0..ops {
                let p_insert = [70, 45, 20][i * 3 / ops];
                let op = rng.random_range(0..100);
                let k = rand_bytes(&mut rng);
                if op < p_insert {
                    let v = rand_bytes(&mut rng);
                    assert_eq!(t.insert(ByteKey::new(&k), v.clone()), m.insert(k.clone(), v), "insert {k:?}");
                } else if op < p_insert + 20 {
                    // Point operations take the plain slice or a prepared probe; both must agree.
                    let got = if i % 2 == 0 { t.remove(&k[..]) } else { t.remove(&ByteKey::probe(&k)) };
                    assert_eq!(got, m.remove(&k), "remove {k:?}");
                } else if op < p_insert + 25 {
                    assert_eq!(t.get(&k[..]), m.get(&k), "get {k:?}");
                    assert_eq!(t.get(&ByteKey::probe(&k)), m.get(&k), "get by probe {k:?}");
                } else {
                    let len = rng.random_range(0..30);
                    let mut got = Vec::new();
                    t.iterate_range(Bound::Included(&k[..]), len, |k, v| {
                        got.push((k.as_bytes().to_vec(), v.clone()))
                    });
                    let want: Vec<_> =
                        m.range(k.clone()..).take(len).map(|(a, b)| (a.clone(), b.clone())).collect();
                    assert_eq!(got, want, "iterate_range from {k:?}");
                    let hi = rand_bytes(&mut rng);
                    if k <= hi {
                        let got: Vec<_> = t
                            .range::<[u8], _>((Bound::Included(&k[..]), Bound::Excluded(&hi[..])))
                            .rev()
                            .map(|(k, v)| (k.as_bytes().to_vec(), v.clone()))
                            .collect();
                        let want: Vec<_> = m
                            .range(k.clone()..hi.clone())
                            .rev()
                            .map(|(a, b)| (a.clone(), b.clone()))
                            .collect();
                        assert_eq!(got, want, "range {k:?}..{hi:?}");
                        let mut got = Vec::new();
                        t.map_range::<[u8], _, _>(
                            (Bound::Included(&k[..]), Bound::Excluded(&hi[..])),
                            |k, _| got.push(k.as_bytes().to_vec()),
                        );
                        got.sort();
                        assert_eq!(got, want.iter().rev().map(|e| e.0.clone()).collect::<Vec<_>>());
                    }
                }
                assert_eq!(t.len(), m.len());
            }
            t.check_invariants().unwrap();
            // memory_usage counts each key's heap form exactly: 0 for <= 8 bytes, else a length word + bytes.
            let heap: usize =
                m.iter().map(|(k, v)| if k.len() <= 8 { 0 } else { 4 + k.len() } + v.capacity()).sum();
            assert!(t.memory_usage() >= heap + empty_bytes / 2, "memory_usage too small");
            let frozen = t.freeze();
            let got: Vec<Vec<u8>> = frozen.iter().map(|(k, _)| k.as_bytes().to_vec()).collect();
            assert_eq!(got, m.keys().cloned().collect::<Vec<_>>());
        }
    });
}

/// `iterate_range` without a limit (`usize::MAX`) starting inside a sorted leaf computed `start + length` and
/// overflowed (a panic in debug builds, a wrong end in release).
#[test]
fn regression_unlimited_iterate_range_on_sorted_leaves() {
    let mut t: SortedLeafTree<u64, u64> = BpTree::with_options(Options::tiny()).unwrap();
    for k in 0..200u64 {
        t.insert(k, k);
    }
    for start in [1u64, 57, 199] {
        let mut got = Vec::new();
        let n = t.iterate_range(Bound::Included(&start), usize::MAX, |k, _| got.push(*k));
        assert_eq!((n, got), ((200 - start) as usize, (start..200).collect::<Vec<_>>()));
    }
}

#[test]
fn debug_prints_a_summary_not_the_entries() {
    let mut t = BpTree::<u64, u64>::new();
    for k in 0..10_000u64 {
        t.insert(k, k);
    }
    let s = format!("{t:?}");
    assert!(s.starts_with("BpTree { len: 10000,"), "{s}");
    assert!(s.len() < 200, "{s}");
    let frozen = format!("{:?}", t.freeze());
    assert!(frozen.starts_with("FrozenBpTree(BpTree { len: 10000,"), "{frozen}");
}
