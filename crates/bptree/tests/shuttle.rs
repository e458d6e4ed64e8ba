//! Randomized schedule tests of the concurrent tree under the `shuttle` scheduler, which controls every lock,
//! unlock, downgrade and atomic of `ConcurrentBpTree` and explores many interleavings of small trees: tiny leaves
//! (2-slot log, 2 blocks of 3 slots: a split at 6 entries, a merge below 2) and fanout-4 internal nodes, so a few
//! dozen operations split and merge leaves and internal nodes, grow and collapse the root, and leave unsorted logs
//! and blocks that range scans must upgrade their read lock to sort.
//!
//! Run with `cargo nextest run -p rangedb-bptree --features shuttle --test shuttle`. Shuttle rather than loom: one
//! tree operation takes several locks per level, each a mutex and condition variable here, so loom's exhaustive
//! search does not finish beyond one or two operations per thread; shuttle's random and PCT schedulers cover
//! operation sequences long enough to restructure the tree, at the price of probabilistic coverage.
//!
//! What is checked, in every explored schedule:
//! - linearizability of each writer's own keys: writers own disjoint keys, so each `insert`, `remove` and `get`
//!   must return exactly what that writer's sequential model says, whatever the other threads do;
//! - readers see consistent scans: `iterate_range`, `map_range` and the owned `range` iterator (both ends) yield
//!   strictly increasing keys (any order for `map_range`), each with a value some writer wrote for that key, and
//!   every key that is never removed;
//! - the end state: whole-structure invariants, and exactly the union of the writers' models plus the stable keys;
//! - no deadlock (shuttle fails a schedule in which every thread is blocked).
//!
//! A test also asserts, over all its schedules, that the structural paths it is meant to explore ran: splits,
//! merges, pessimistic retries and read-to-write lock upgrades.
#![cfg(feature = "shuttle")]
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::Mutex as StdMutex;

use bptree::{ConcurrentBpTree, Options, Stats};

type Tree = ConcurrentBpTree<u64, u64>;

/// Keys `10 * i` for `i in 0..STABLE` are loaded first and never removed; writer `t` owns keys `10 * i + 1 + t`.
const STABLE: u64 = 6;

/// Values encode their key: `key * 1000 + generation`, so a reader can tell a value belongs to its key.
fn val(k: u64, generation: u64) -> u64 {
    k * 1000 + generation
}

fn tree() -> Arc<Tree> {
    tree_with(Options::tiny())
}

fn tree_with(opts: Options) -> Arc<Tree> {
    let t = Tree::with_options(opts).unwrap();
    // Out of order, so the log and blocks start unsorted and the first scans must upgrade to sort.
    for i in [3, 1, 5, 0, 4, 2] {
        t.insert(10 * i, val(10 * i, 0));
    }
    Arc::new(t)
}

#[derive(Clone, Copy)]
enum Op {
    Insert(u64, u64),
    /// `upsert` setting the value: an update in place, or an insert that may split a leaf.
    Upsert(u64, u64),
    Remove(u64),
    Get(u64),
}

/// Writer `t`'s operations: insert its keys (forcing splits), overwrite some, then remove most of them (forcing
/// merges and borrows), with point reads in between.
fn plan(t: u64, keys: u64) -> Vec<Op> {
    let k = |i: u64| 10 * i + 1 + t;
    let mut ops = Vec::new();
    for i in 0..keys {
        ops.push(Op::Insert(k(i), val(k(i), 1)));
    }
    ops.push(Op::Insert(k(1), val(k(1), 2)));
    ops.push(Op::Upsert(k(2), val(k(2), 3)));
    ops.push(Op::Upsert(k(keys), val(k(keys), 1)));
    ops.push(Op::Get(k(0)));
    for i in (0..keys).rev().filter(|i| i % 3 != 1) {
        ops.push(Op::Remove(k(i)));
    }
    ops.push(Op::Get(k(1)));
    ops.push(Op::Remove(k(4)));
    ops
}

/// Runs a writer's plan against the tree and its own model, checking every return value.
fn write(t: &Tree, ops: &[Op]) -> BTreeMap<u64, u64> {
    let mut model = BTreeMap::new();
    for &op in ops {
        match op {
            Op::Insert(k, v) => assert_eq!(t.insert(k, v), model.insert(k, v), "insert {k}"),
            Op::Upsert(k, v) => {
                assert_eq!(t.upsert(&k, |x| *x = v, || (k, v)), model.insert(k, v).is_none(), "upsert {k}")
            }
            Op::Remove(k) => assert_eq!(t.remove(&k), model.remove(&k), "remove {k}"),
            Op::Get(k) => assert_eq!(t.get(&k), model.get(&k).copied(), "get {k}"),
        }
    }
    model
}

/// Checks one scan's entries: every value belongs to its key and every stable key in `[lo, hi)` is present.
fn check_entries(got: &[(u64, u64)], lo: u64, hi: u64) {
    for &(k, v) in got {
        assert_eq!(v / 1000, k, "value {v} under key {k}");
    }
    for s in (0..STABLE).map(|i| 10 * i).filter(|s| (lo..hi).contains(s)) {
        assert!(got.iter().any(|e| e.0 == s), "stable key {s} missing from {got:?}");
    }
}

fn strictly_increasing(got: &[(u64, u64)]) {
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "scan out of order: {got:?}");
}

/// One reader pass of every kind of range read.
fn read_all(t: &Tree, pass: u64) {
    // The paper's ordered scan: sorts (upgrading to the write lock) what it reaches unsorted.
    let lo = 10 * (pass % 3);
    let mut got = Vec::new();
    t.iterate_range(Bound::Included(&lo), usize::MAX, |k, v| got.push((*k, *v)));
    strictly_increasing(&got);
    check_entries(&got, lo, u64::MAX);
    // The unordered map.
    let mut got = Vec::new();
    t.map_range(5..45, |k, v| got.push((*k, *v)));
    got.sort_unstable();
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "map_range visited a key twice: {got:?}");
    assert!(got.iter().all(|e| (5..45).contains(&e.0)));
    check_entries(&got, 5, 45);
    // The owned iterator, from both ends.
    let mut r = t.range(..);
    let mut front = Vec::new();
    let mut back = Vec::new();
    loop {
        let x = if (front.len() + back.len()) % 3 == 2 { r.next_back() } else { r.next() };
        match x {
            Some(e) if (front.len() + back.len()) % 3 == 2 => back.push(e),
            Some(e) => front.push(e),
            None => break,
        }
    }
    back.reverse();
    front.extend(back);
    strictly_increasing(&front);
    check_entries(&front, 0, u64::MAX);
}

/// Two writers on interleaved keys and one reader.
fn scenario(keys: u64, totals: &StdMutex<Stats>) {
    let t = tree();
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let t = t.clone();
            shuttle::thread::spawn(move || write(&t, &plan(w, keys)))
        })
        .collect();
    let reader = {
        let t = t.clone();
        shuttle::thread::spawn(move || {
            for pass in 0..2 {
                read_all(&t, pass);
            }
        })
    };
    let mut want: BTreeMap<u64, u64> = (0..STABLE).map(|i| (10 * i, val(10 * i, 0))).collect();
    for w in writers {
        want.extend(w.join().unwrap());
    }
    reader.join().unwrap();
    t.check_invariants().unwrap();
    let got: Vec<_> = t.iter().collect();
    assert_eq!(got, want.into_iter().collect::<Vec<_>>());
    assert_eq!(t.len(), got.len());
    totals.lock().unwrap().add(&t.stats());
}

fn assert_explored(totals: &StdMutex<Stats>) {
    let s = *totals.lock().unwrap();
    assert!(s.leaf_splits > 0 && s.internal_splits > 0, "no splits explored: {s:?}");
    assert!(s.leaf_merges > 0 && s.internal_merges > 0, "no merges explored: {s:?}");
    assert!(s.pessimistic_retries > 0, "no pessimistic retry explored: {s:?}");
    assert!(s.lock_upgrades > 0, "no read-to-write upgrade explored: {s:?}");
}

#[test]
fn shuttle_random_schedules() {
    let totals = Arc::new(StdMutex::new(Stats::default()));
    let t2 = totals.clone();
    shuttle::check_random(move || scenario(10, &t2), 1000 * common::scale());
    assert_explored(&totals);
}

#[test]
fn shuttle_pct_schedules() {
    let totals = Arc::new(StdMutex::new(Stats::default()));
    let t2 = totals.clone();
    shuttle::check_pct(move || scenario(10, &t2), 1000 * common::scale(), 3);
    assert_explored(&totals);
}

/// Two scanners race to sort the same unsorted leaves (read lock, let go, write lock, epoch check, sort,
/// downgrade) while a writer splits them; each scan must still be complete and in order.
#[test]
fn shuttle_racing_upgrades() {
    let totals = Arc::new(StdMutex::new(Stats::default()));
    let t2 = totals.clone();
    shuttle::check_random(
        move || {
            let t = tree();
            let readers: Vec<_> = (0..2u64)
                .map(|r| {
                    let t = t.clone();
                    shuttle::thread::spawn(move || {
                        let mut got = Vec::new();
                        t.iterate_range(Bound::Included(&(r * 10)), usize::MAX, |k, v| got.push((*k, *v)));
                        strictly_increasing(&got);
                        check_entries(&got, r * 10, u64::MAX);
                    })
                })
                .collect();
            let writer = {
                let t = t.clone();
                shuttle::thread::spawn(move || {
                    for i in 0..6 {
                        t.insert(10 * i + 5, val(10 * i + 5, 1));
                    }
                })
            };
            writer.join().unwrap();
            for r in readers {
                r.join().unwrap();
            }
            t.check_invariants().unwrap();
            assert_eq!(t.len(), STABLE as usize + 6);
            t2.lock().unwrap().add(&t.stats());
        },
        1000 * common::scale(),
    );
    let s = *totals.lock().unwrap();
    assert!(s.lock_upgrades > 0 && s.leaf_splits > 0, "{s:?}");
}

/// Scanners race to sort leaves that one writer empties (so leaves merge and borrow while a scanner holds no lock
/// between its read and its write lock; the epoch check sends it back to the root) and another writer keeps
/// unsorted; no stable key may be skipped.
#[test]
fn shuttle_upgrades_race_merges() {
    let totals = Arc::new(StdMutex::new(Stats::default()));
    let t2 = totals.clone();
    shuttle::check_pct(
        move || {
            // A 4-slot log (3 entries), so descending inserts leave unsorted logs for the scans to sort; leaves
            // split at 8 entries and merge below 3.
            let t = tree_with(Options { log_size: 4, block_size: 4, ..Options::tiny() });
            let doomed: Vec<u64> = (0..STABLE).rev().flat_map(|i| [7, 5, 3].map(|d| 10 * i + d)).collect();
            for &k in &doomed {
                t.insert(k, val(k, 1));
            }
            let readers: Vec<_> = (0..2u64)
                .map(|r| {
                    let t = t.clone();
                    shuttle::thread::spawn(move || {
                        let mut got = Vec::new();
                        t.iterate_range(Bound::Included(&(r * 20)), usize::MAX, |k, v| got.push((*k, *v)));
                        strictly_increasing(&got);
                        check_entries(&got, r * 20, u64::MAX);
                    })
                })
                .collect();
            let remover = {
                let t = t.clone();
                shuttle::thread::spawn(move || {
                    for k in doomed {
                        assert!(t.remove(&k).is_some());
                    }
                })
            };
            // Descending inserts into the logs keep leaves unsorted while the scans run.
            let inserter = {
                let t = t.clone();
                shuttle::thread::spawn(move || {
                    for k in (0..STABLE).rev().map(|i| 10 * i + 9) {
                        assert_eq!(t.insert(k, val(k, 1)), None);
                    }
                })
            };
            remover.join().unwrap();
            inserter.join().unwrap();
            for r in readers {
                r.join().unwrap();
            }
            t.check_invariants().unwrap();
            assert_eq!(t.len(), 2 * STABLE as usize);
            t2.lock().unwrap().add(&t.stats());
        },
        1000 * common::scale(),
        3,
    );
    let s = *totals.lock().unwrap();
    assert!(s.lock_upgrades > 0 && s.leaf_merges + s.leaf_borrows > 0, "{s:?}");
}
