//! Golden tests of the paper's worked examples (Figure 2) on a small BPA, checking the exact layout.

use super::*;

type B = Bpa<u64, u64>;

fn opts() -> Options {
    Options { log_size: 4, num_blocks: 4, block_size: 4, ..Options::default() }
}

/// (log, headers, blocks) in slot order.
fn layout(b: &B) -> (Vec<u64>, Vec<u64>, Vec<Vec<u64>>) {
    let log = b.keys[..b.log_len as usize].to_vec();
    let hdr = b.headers().to_vec();
    let blocks = (0..b.header_len as usize)
        .map(|i| {
            let s = b.blk(i);
            b.keys[s..s + b.count(i)].to_vec()
        })
        .collect();
    (log, hdr, blocks)
}

fn bpa_with(keys: &[u64]) -> B {
    let mut b = B::new(&opts());
    b.load_sorted(keys.iter().map(|&k| (k, k * 10)));
    b
}

/// Ascending inserts take the fast path past the duplicate lookup; updates of keys already there (in the log,
/// a header or a block, sorted or not) must still find them, and the leaf stays exact.
#[test]
fn ascending_inserts_skip_the_lookup_but_updates_still_find_their_key() {
    let mut b = B::new(&opts());
    let mut st = Stats::default();
    for k in (0..14u64).map(|k| k * 10) {
        assert!(b.above_all(&k));
        assert_eq!(b.insert(k, k, &mut st), None);
        b.check().unwrap_or_else(|e| panic!("after {k}: {e}"));
    }
    for k in (0..14u64).rev().map(|k| k * 10) {
        assert!(!b.above_all(&k));
        assert_eq!(b.insert(k, k + 1, &mut st), Some(k), "update of {k}");
    }
    // An out-of-order key unsorts the log: the fast path must not trust it any more.
    assert_eq!(b.insert(5, 5, &mut st), None);
    assert_eq!(b.insert(131, 131, &mut st), None);
    assert_eq!(b.insert(131, 7, &mut st), Some(131));
    assert_eq!(b.len(), 16);
    b.check().unwrap_or_else(|e| panic!("{e}"));
    for k in (0..14u64).map(|k| k * 10) {
        assert_eq!(b.get(&k).map(|(_, v)| *v), Some(k + 1));
    }
}

/// Figure 2a, first insert: the log has room, the entry is appended to the log (Case 1).
#[test]
fn figure_2a_insert_into_log() {
    let mut b = bpa_with(&[10, 20, 30, 40, 50, 60, 70, 80]);
    assert_eq!(layout(&b), (vec![], vec![10, 30, 50, 70], vec![vec![20], vec![40], vec![60], vec![80]]));
    let mut st = Stats::default();
    assert_eq!(b.insert(35, 350, &mut st), None);
    assert_eq!(layout(&b).0, vec![35]);
    assert_eq!(st.flushes, 0);
    b.check().unwrap();
    // An update of a buffered key happens in place in the log.
    assert_eq!(b.insert(35, 351, &mut st), Some(350));
    assert_eq!(layout(&b).0, vec![35]);
    // An update of a stored key happens in place in its block.
    assert_eq!(b.insert(40, 401, &mut st), Some(400));
    assert_eq!(b.get(&40), Some((&40, &401)));
    assert_eq!(b.len(), 9);
}

/// Figure 2a, Case 2a: the log fills and every block has room: entries are appended at the ends of their
/// blocks (unsorted), a key below every header becomes the new first header.
#[test]
fn figure_2a_flush_appends_to_blocks() {
    let mut b = bpa_with(&[10, 20, 30, 40, 50, 60, 70, 80]);
    let mut st = Stats::default();
    for k in [75, 5, 45] {
        b.insert(k, k * 10, &mut st);
    }
    assert_eq!(layout(&b).0, vec![75, 5, 45]);
    b.insert(55, 550, &mut st); // fills the log (4 slots): flush
    assert_eq!(st.flushes, 1);
    assert_eq!(st.flush_appends, 1);
    assert_eq!(st.redistributes, 0);
    let (log, hdr, blocks) = layout(&b);
    assert!(log.is_empty());
    assert_eq!(hdr, vec![5, 30, 50, 70]);
    assert_eq!(blocks, vec![vec![20, 10], vec![40, 45], vec![60, 55], vec![80, 75]]);
    // Appending 10 after 20, 55 after 60 and 75 after 80 unsorted blocks 0, 2 and 3; 45 after 40 kept
    // block 1 sorted.
    assert!(!b.block_sorted(0) && b.block_sorted(1) && !b.block_sorted(2) && !b.block_sorted(3));
    b.check().unwrap();
}

/// Figure 2a, second insert: the flush would fill a block (no free slot left), so everything is merged in
/// sorted order and redistributed evenly over the blocks (Case 2b).
#[test]
fn figure_2a_flush_redistributes() {
    let mut b = bpa_with(&[10, 20, 30, 40, 50, 60, 70, 80]);
    let mut st = Stats::default();
    for k in [21, 22, 23, 24] {
        b.insert(k, k * 10, &mut st);
    }
    // Block 0 would hold 20, 21, 22, 23, 24: more than block_size - 1 = 3 slots.
    assert_eq!(st.flushes, 1);
    assert_eq!(st.redistributes, 1);
    let (log, hdr, blocks) = layout(&b);
    assert!(log.is_empty());
    assert_eq!(hdr, vec![10, 22, 30, 60]);
    assert_eq!(blocks, vec![vec![20, 21], vec![23, 24], vec![40, 50], vec![70, 80]]);
    assert!((0..4).all(|i| b.block_sorted(i)));
    b.check().unwrap();
    let all: Vec<u64> = b.range::<u64>(Bound::Unbounded, Bound::Unbounded).map(|(k, _)| *k).collect();
    assert_eq!(all, vec![10, 20, 21, 22, 23, 24, 30, 40, 50, 60, 70, 80]);
}

/// Figure 2b: a range iteration sorts the log and only the blocks it reaches, then merges log and blocks
/// with two fingers.
#[test]
fn figure_2b_iterate_range_sorts_lazily() {
    let mut b = bpa_with(&[10, 20, 30, 40, 50, 60, 70, 80]);
    let mut st = Stats::default();
    for k in [75, 5, 45, 55] {
        b.insert(k, k * 10, &mut st); // Case 2a: blocks 0, 2, 3 unsorted
    }
    for k in [65, 33, 12] {
        b.insert(k, k * 10, &mut st); // stay in the (unsorted) log
    }
    assert_eq!(layout(&b).0, vec![65, 33, 12]);
    assert!(!b.log_sorted);
    let before = st;
    let mut got = Vec::new();
    let n = b.iterate_from(Bound::Included(&32), 5, &mut |k: &u64, _: &u64| got.push(*k), &mut st);
    assert_eq!(n, 5);
    assert_eq!(got, vec![33, 40, 45, 50, 55]);
    // The log got sorted; blocks 1 (start) and 2 (reached) were visited; block 3 was not and stays unsorted.
    assert_eq!(layout(&b).0, vec![12, 33, 65]);
    assert!(b.log_sorted);
    assert!(b.block_sorted(1) && b.block_sorted(2) && !b.block_sorted(3) && !b.block_sorted(0));
    assert_eq!(layout(&b).2[2], vec![55, 60]);
    assert_eq!(st.log_sorts - before.log_sorts, 1);
    assert_eq!(st.block_sorts - before.block_sorts, 1);
    b.check().unwrap();
    // Iteration through `&self` sees the same order without sorting anything.
    let all: Vec<u64> = b.range::<u64>(Bound::Unbounded, Bound::Unbounded).map(|(k, _)| *k).collect();
    assert_eq!(all, vec![5, 10, 12, 20, 30, 33, 40, 45, 50, 55, 60, 65, 70, 75, 80]);
    let rev: Vec<u64> =
        b.range::<u64>(Bound::Excluded(&12), Bound::Included(&65)).rev().map(|(k, _)| *k).collect();
    assert_eq!(rev, vec![65, 60, 55, 50, 45, 40, 33, 30, 20]);
}

/// Removing a header entry promotes the block's smallest entry; emptying a block closes the gap.
#[test]
fn remove_promotes_and_closes_blocks() {
    let mut b = bpa_with(&[10, 20, 30, 40, 50, 60, 70, 80]);
    let mut st = Stats::default();
    assert_eq!(b.remove(&30, &mut st), Some((30, 300)));
    assert_eq!(layout(&b).1, vec![10, 40, 50, 70]);
    b.check().unwrap();
    assert_eq!(b.remove(&40, &mut st), Some((40, 400)));
    assert_eq!(layout(&b), (vec![], vec![10, 50, 70], vec![vec![20], vec![60], vec![80]]));
    b.check().unwrap();
    assert_eq!(b.remove(&40, &mut st), None);
    assert_eq!(b.len(), 6);
}

/// Map visits every entry in range once (log and blocks are disjoint) and reports passing the end.
#[test]
fn map_range_is_unordered_but_complete() {
    let mut b = bpa_with(&[10, 20, 30, 40, 50, 60, 70, 80]);
    let mut st = Stats::default();
    for k in [75, 5, 45] {
        b.insert(k, k * 10, &mut st);
    }
    let mut got = Vec::new();
    let beyond =
        b.map_range(Bound::Included(&20), Bound::Excluded(&60), &mut |k: &u64, _: &u64| got.push(*k));
    got.sort();
    assert_eq!(got, vec![20, 30, 40, 45, 50]);
    assert!(beyond);
}

/// Regression: `sorted_for` once counted the start block's entries below `start` towards `length`, so a
/// read-only scan could run its sorted fast path into a block that was never sorted.
#[test]
fn scan_after_partial_sorts_matches_model() {
    let mut x: u64 = 0x9e37_79b9;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..300 {
        let mut b = B::new(&opts());
        let mut m = std::collections::BTreeMap::new();
        let mut st = Stats::default();
        for _ in 0..(rnd() % 15) {
            let k = rnd() % 200;
            if b.len() < B::split_at(&opts()) {
                assert_eq!(b.insert(k, k, &mut st), m.insert(k, k));
            }
            let start = rnd() % 220;
            let len = (rnd() % 8) as usize;
            let want: Vec<u64> = m.range(start..).take(len).map(|(k, _)| *k).collect();
            let mut got = Vec::new();
            if rnd() % 2 == 0 {
                b.iterate_from(Bound::Included(&start), len, &mut |k: &u64, _: &u64| got.push(*k), &mut st);
            } else {
                b.scan(Bound::Included(&start), len, &mut |k: &u64, _: &u64| got.push(*k));
            }
            assert_eq!(got, want, "round {round} start {start} len {len}");
            b.check().unwrap();
        }
    }
}

/// A key whose fingerprint is chosen by the test: `Colliding(k, fp)` compares by `k` alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Colliding(u64, u8);

impl Fingerprint for Colliding {
    fn fingerprint(&self) -> u8 {
        self.1
    }
}

/// Digests only filter: when every key shares one fingerprint (each scan then compares every key) or when
/// fingerprints take few values, finds, updates and removes still reach exactly the keys a model holds, through
/// flushes into blocks, redistributions and removals of headers.
#[test]
fn colliding_fingerprints_still_find_every_key() {
    for spread in [1u64, 3, 256] {
        let mut b: Bpa<Colliding, u64> = Bpa::new(&opts());
        let mut model = std::collections::BTreeMap::new();
        let mut st = Stats::default();
        let key = |k: u64| Colliding(k, (k % spread) as u8);
        let mut x = 7u64;
        for step in 0..400u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let k = (x >> 33) % 12;
            if step % 5 == 4 {
                assert_eq!(b.remove(&key(k), &mut st).map(|(_, v)| v), model.remove(&k), "remove {k}");
            } else if b.len() + 1 < Bpa::<Colliding, u64>::split_at(&opts()) || model.contains_key(&k) {
                assert_eq!(b.insert(key(k), step, &mut st), model.insert(k, step), "insert {k}");
            }
            b.check().unwrap_or_else(|e| panic!("spread {spread}, step {step}: {e}"));
            for q in 0..12 {
                assert_eq!(b.get(&key(q)).map(|(_, v)| *v), model.get(&q).copied(), "get {q}");
            }
        }
    }
}
