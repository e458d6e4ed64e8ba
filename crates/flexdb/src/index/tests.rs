use super::*;

fn k(s: &str) -> Box<[u8]> {
    s.as_bytes().into()
}

#[test]
fn paper_figure_10_shift() {
    // Four intervals at 0, 42, 64, 90 ("", bit, foo, pin); inserting 9 bytes into "bit" shifts foo and pin.
    let mut idx =
        SparseIndex::from_anchors(vec![(k(""), 0), (k("bit"), 42), (k("foo"), 64), (k("pin"), 90)], 120)
            .unwrap();
    let p = idx.locate(b"kit");
    assert_eq!(&*idx.get(p).key, b"foo");
    assert_eq!(idx.offset(p), 64);
    let bit = idx.locate(b"cat");
    idx.resize(bit, 9);
    assert_eq!(idx.offset(idx.locate(b"foo")), 73);
    assert_eq!(idx.offset(idx.locate(b"pin")), 99);
    idx.check(129).unwrap();
}

#[test]
fn many_splits_and_shifts() {
    let mut idx = SparseIndex::new();
    let mut size = 0u64;
    // Grow a single interval and split it into 1000 intervals of 10 bytes, in key order.
    idx.resize(idx.first(), 10_000);
    size += 10_000;
    let mut p = idx.first();
    for i in 1..1000u32 {
        p = idx.split(p, 10, format!("k{i:05}").as_bytes().into());
    }
    idx.check(size).unwrap();
    assert!(idx.leaf_count() > 10);
    // Resize in key order with deferred shifts, then out of order.
    for i in (1..1000u32).step_by(7) {
        let p = idx.locate(format!("k{i:05}").as_bytes());
        idx.resize(p, 3);
        size += 3;
        idx.check(size).unwrap();
    }
    for i in (1..1000u32).rev().step_by(13) {
        let p = idx.locate(format!("k{i:05}").as_bytes());
        idx.resize(p, -2);
        size -= 2;
        idx.check(size).unwrap();
    }
    for i in (1..1000u32).step_by(3) {
        let p = idx.locate(format!("k{i:05}").as_bytes());
        idx.remove(p);
        idx.check(size).unwrap();
    }
}

/// Randomized model test: the index against a vector of (key, size), through growth to a three-level tree and
/// back down (splits, shifts, removals with merges, key changes), checking every invariant as it goes.
#[test]
fn model_random_ops() {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    let seeds = testkit::seeds(&[1, 2, 3]);
    let key = |k: u32| -> Box<[u8]> { if k == 0 { Box::new([]) } else { k.to_be_bytes().into() } };
    for seed in seeds {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut idx = SparseIndex::new();
        // (key as a number, 0 = the empty key; size); keys strictly increase.
        let mut model: Vec<(u32, u64)> = vec![(0, 0)];
        let mut max_height = 0;
        let steps = 30_000;
        for step in 0..steps {
            let growing = step < steps / 2;
            let n = model.len();
            let i = rng.random_range(0..n);
            let p = idx.locate(&key(model[i].0));
            assert_eq!(idx.get(p).key, key(model[i].0), "seed {seed} step {step}: locate");
            // Keys that are no interval's key land in the interval below them.
            let mut longer = key(model[i].0).into_vec();
            longer.push(0);
            assert_eq!(idx.locate(&longer), p, "seed {seed} step {step}: locate a longer key");
            let next = if i + 1 < n { model[i + 1].0 } else { u32::MAX };
            if next - model[i].0 >= 2 {
                let between = key(rng.random_range(model[i].0 + 1..next));
                assert_eq!(idx.locate(&between), p, "seed {seed} step {step}: locate between keys");
            }
            // Growing: mostly splits; shrinking: mostly removals (which merge nodes).
            let r = rng.random_range(0..10);
            let op = match (growing, r) {
                (true, 0..=5) | (false, 9) => 0,
                (_, 6..=7) => 1,
                (_, 8) => 2,
                _ => 3,
            };
            match op {
                0 => {
                    // Split interval i with a key strictly between it and the next.
                    let lo = model[i].0;
                    let hi = if i + 1 < n { model[i + 1].0 } else { u32::MAX };
                    if hi - lo >= 2 {
                        let k = rng.random_range(lo + 1..hi);
                        let keep = rng.random_range(0..=model[i].1);
                        let q = idx.split(p, keep, key(k));
                        assert_eq!(idx.get(q).key, key(k), "seed {seed} step {step}: split position");
                        let rest = model[i].1 - keep;
                        model[i].1 = keep;
                        model.insert(i + 1, (k, rest));
                    }
                }
                1 => {
                    let d: i64 = rng.random_range(-(model[i].1 as i64)..=64);
                    idx.resize(p, d);
                    model[i].1 = (model[i].1 as i64 + d) as u64;
                }
                2 if i > 0 => {
                    // A new key between the neighbours.
                    let lo = model[i - 1].0;
                    let hi = if i + 1 < n { model[i + 1].0 } else { u32::MAX };
                    if hi - lo >= 2 {
                        let k = rng.random_range(lo + 1..hi);
                        idx.set_key(p, key(k));
                        model[i].0 = k;
                    }
                }
                3 if i > 0 => {
                    let gone = idx.remove(p);
                    assert_eq!(gone.key, key(model[i].0));
                    model[i - 1].1 += model[i].1;
                    model.remove(i);
                }
                _ => {}
            }
            max_height = max_height.max(idx.height());
            let size: u64 = model.iter().map(|m| m.1).sum();
            if model.len() < 200 || step % 101 == 0 {
                idx.check(size).unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
                let mut off = 0;
                let mut q = Some(idx.first());
                for m in &model {
                    let at = q.unwrap_or_else(|| panic!("seed {seed} step {step}: index too short"));
                    assert_eq!(
                        (idx.get(at).key.clone(), idx.offset(at)),
                        (key(m.0), off),
                        "seed {seed} step {step}"
                    );
                    off += m.1;
                    q = idx.next(at);
                }
                assert!(q.is_none(), "seed {seed} step {step}: index too long");
                // A key between two index keys locates the earlier interval.
                let probe: u32 = rng.random();
                let want = model.partition_point(|m| m.0 <= probe).max(1) - 1;
                assert_eq!(
                    idx.get(idx.locate(&key(probe))).key,
                    key(model[want].0),
                    "seed {seed} step {step}"
                );
            }
            assert_eq!(idx.len(), model.len());
        }
        assert!(max_height >= 3, "seed {seed}: the tree never grew to three levels ({max_height})");
        assert!(idx.height() <= 2, "seed {seed}: the tree did not shrink ({})", idx.height());
    }
}

/// The leftmost leaf of a non-root internal node empties without absorbing its (too full) right sibling: its
/// parent drops its first pivot and must rebuild its search hints.
#[test]
fn emptying_a_leftmost_leaf_keeps_the_parent_searchable() {
    let key = |k: u32| -> Box<[u8]> { if k == 0 { Box::new([]) } else { k.to_be_bytes().into() } };
    // 2048 intervals: 64 half-full leaves under two internal nodes under the root.
    let anchors: Vec<(Box<[u8]>, u64)> = (0..2048u32).map(|i| (key(i * 1000), i as u64 * 10)).collect();
    let size = 2048 * 10;
    let mut idx = SparseIndex::from_anchors(anchors, size).unwrap();
    assert_eq!(idx.height(), 3);
    // Fill leaf 33 (the second child of the second internal node) to 64 intervals, so that leaf 32 never fits
    // in one node with it.
    for j in 1..=32 {
        let p = idx.locate(&key(1056 * 1000 + j - 1));
        idx.split(p, 0, key(1056 * 1000 + j));
    }
    idx.check(size).unwrap();
    // Empty leaf 32, the second internal node's leftmost child.
    for i in (1024..1056u32).rev() {
        let p = idx.locate(&key(i * 1000));
        assert_eq!(idx.get(p).key, key(i * 1000));
        idx.remove(p);
        idx.check(size).unwrap_or_else(|e| panic!("after removing {i}: {e}"));
    }
    for i in (0..1024u32).chain(1057..2048) {
        assert_eq!(idx.get(idx.locate(&key(i * 1000 + 500))).key, key(i * 1000), "locate {i}");
    }
    assert_eq!(idx.get(idx.locate(&key(1056 * 1000 + 500))).key, key(1056 * 1000 + 32));
    assert_eq!(idx.get(idx.locate(&key(1040 * 1000))).key, key(1023 * 1000));
}

#[test]
fn from_anchors_builds_a_deep_tree() {
    let anchors: Vec<(Box<[u8]>, u64)> = (0..5000u32)
        .map(|i| (if i == 0 { Box::from(&[][..]) } else { i.to_be_bytes().into() }, i as u64 * 10))
        .collect();
    let mut idx = SparseIndex::from_anchors(anchors, 50_000).unwrap();
    assert!(idx.height() >= 3);
    idx.check(50_000).unwrap();
    // Growing the first interval shifts all 4,999 later ones through O(log N) pointers.
    idx.resize(idx.first(), 7);
    idx.check(50_007).unwrap();
    assert_eq!(idx.offset(idx.locate(&4999u32.to_be_bytes())), 49_997);
}
