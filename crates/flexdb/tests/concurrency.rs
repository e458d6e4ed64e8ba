//! Every public operation beside every other: writers (puts, batches with and without range deletes, point and
//! range deletes, some synced), `flush`, `sync` and readers (scans both ways, iterators, gets) on one store. Each
//! writer owns its keys, so the final state is known; a hang fails the test instead of stalling the suite.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use flexdb::wal::Op;
use flexdb::{Db, Options, Pair, WriteOptions};

fn scale() -> u32 {
    testkit::scale() as u32
}

#[test]
fn all_operations_beside_each_other_complete_and_agree() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        run_all_operations();
        let _ = tx.send(());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(120)) {
        Ok(()) => {}
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("an operation hung"),
        Err(e) => panic!("the workload panicked: {e}"),
    }
}

fn run_all_operations() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let opts = Options { commit_lock_bytes: 512, ..Options::tiny() };
    let db = Arc::new(Db::open(fs.clone(), Path::new("db"), opts.clone()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let helpers: Vec<_> = (0..3)
        .map(|kind| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    match kind {
                        0 => db.flush().unwrap(),
                        1 => db.sync().unwrap(),
                        _ => {
                            let fwd = db.scan(b"", None, usize::MAX, false).unwrap();
                            assert!(fwd.windows(2).all(|w| w[0].0 < w[1].0));
                            let rev = db.scan(b"w1", Some(b"w2"), 25, true).unwrap();
                            assert!(rev.windows(2).all(|w| w[0].0 > w[1].0));
                            let mut it = db.iter(b"w0", None, n % 2 == 1);
                            for _ in 0..10 {
                                if it.next().transpose().unwrap().is_none() {
                                    break;
                                }
                            }
                            let _ = db.get(format!("w2-{:04}", n % 300).as_bytes()).unwrap();
                        }
                    }
                    n += 1;
                }
            })
        })
        .collect();
    let writers: Vec<_> = (0..3u32)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut model = BTreeMap::new();
                let key = |i: u32| format!("w{t}-{i:04}").into_bytes();
                for i in 0..1500 * scale() {
                    let w = WriteOptions { sync: i % 97 == 0 };
                    match i % 10 {
                        0..=5 => {
                            let (k, v) = (key(i % 300), format!("{i}").into_bytes());
                            db.put(&k, &v, w).unwrap();
                            model.insert(k, v);
                        }
                        6 => {
                            let k = key((i * 7) % 300);
                            db.delete(&k, w).unwrap();
                            model.remove(&k);
                        }
                        7 => {
                            let (a, b) = ((i * 13) % 300, (i * 13) % 300 + 15);
                            db.delete_range(&key(a), &key(b), w).unwrap();
                            model.retain(|k, _| *k < key(a) || *k >= key(b));
                        }
                        _ => {
                            let mut ops = Vec::new();
                            for j in 0..4 {
                                let (k, v) = (key((i + j * 31) % 300), format!("b{i}").into_bytes());
                                model.insert(k.clone(), v.clone());
                                ops.push(Op::Put(k.into(), v.into()));
                                if i % 20 == 9 && j == 1 {
                                    // A quarter of the batches with a range delete between their puts.
                                    let (a, b) = (key((i * 11) % 300), key((i * 11) % 300 + 9));
                                    model.retain(|k, _| *k < a || *k >= b);
                                    ops.push(Op::DeleteRange(a.into(), b.into()));
                                }
                            }
                            db.write(ops, w).unwrap();
                        }
                    }
                }
                model
            })
        })
        .collect();
    let mut model = BTreeMap::new();
    for h in writers {
        model.extend(h.join().unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    for h in helpers {
        h.join().unwrap();
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
    assert_eq!(db.scan(b"", None, usize::MAX, false).unwrap(), want);
    db.flush().unwrap();
    db.check(true).unwrap();
    assert!(db.stats().memtables_committed > 10);
    let db = Arc::into_inner(db).unwrap();
    db.close().unwrap();
    let db = Db::open(fs, Path::new("db"), opts).unwrap();
    assert_eq!(db.scan(b"", None, usize::MAX, false).unwrap(), want);
}

/// Scans beside rounds of writes, range deletes, and memtable freezes and commits. Round `r` sets `k0` to `k9`, in
/// order and one write each, to `r`, and every fifth round ends with a range delete of them all. So every state
/// holds a run `k0..=kj` at some `r` followed by either nothing or the rest at `r - 1`, and every scan must see
/// one of those states, whatever it raced with.
#[test]
fn scans_see_one_state_beside_range_deletes_and_commits() {
    scan_beside(
        |got| assert!(one_state(got), "a scan saw no state of the store: {got:?}"),
        |db| {
            let w = WriteOptions::default();
            for round in 1..=3000 * scale() as u64 {
                for j in 0..10 {
                    // The value's padding fills the memtable, so it is frozen and committed every round or two.
                    db.put(format!("k{j}").as_bytes(), format!("{round:08}{:40}", "").as_bytes(), w).unwrap();
                }
                if round % 5 == 0 {
                    db.delete_range(b"k", b"l", w).unwrap();
                }
            }
        },
    );
}

/// Whether `got` (ascending) is `k0..=kj` at one round followed by nothing or by the rest at the round before.
fn one_state(got: &[Pair]) -> bool {
    let round = |v: &[u8]| std::str::from_utf8(&v[..8]).unwrap().parse::<u64>().unwrap();
    let keys_in_order = got.iter().enumerate().all(|(i, (k, _))| *k == format!("k{i}").into_bytes());
    let Some(first) = got.first().map(|(_, v)| round(v)) else { return true };
    let cut = got.iter().position(|(_, v)| round(v) != first).unwrap_or(got.len());
    keys_in_order
        && got[cut..].iter().all(|(_, v)| round(v) + 1 == first)
        && (cut == got.len() || got.len() == 10)
}

/// Batches that rewrite `k0` to `k9` at once, some behind a range delete of them in the same batch, beside lone
/// range deletes and memtable commits: every scan sees the ten keys at one round, or none.
#[test]
fn batches_are_seen_whole_beside_range_deletes_and_commits() {
    scan_beside(
        |got| {
            let whole = got.is_empty() || (got.len() == 10 && got.iter().all(|(_, v)| *v == got[0].1));
            assert!(whole, "a scan saw part of a batch: {got:?}");
        },
        |db| {
            let w = WriteOptions::default();
            for round in 1..=2000 * scale() {
                if round % 7 == 0 {
                    db.delete_range(b"k", b"l", w).unwrap();
                    continue;
                }
                let mut ops = Vec::new();
                if round % 3 == 0 {
                    ops.push(Op::DeleteRange(b"k".as_slice().into(), b"l".as_slice().into()));
                }
                let v = format!("{round:08}{:40}", "").into_bytes();
                for j in [3, 7, 0, 9, 4, 1, 8, 2, 6, 5] {
                    ops.push(Op::Put(format!("k{j}").into_bytes().into(), v.clone().into()));
                }
                db.write(ops, w).unwrap();
            }
        },
    );
}

/// Runs `write` on a store with a 1 KiB memtable (frozen and committed every few writes) while two threads scan
/// `[k, l)`, one forward and one backward, and pass each result, ascending, to `check`.
fn scan_beside(check: fn(&[Pair]), write: impl FnOnce(&Db)) {
    let opts = Options { memtable_bytes: 1024, ..Options::tiny() };
    let db = Arc::new(Db::open(Arc::new(vfs::MemFs::new()), Path::new("db"), opts).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut scans = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let mut got = db.scan(b"k", Some(b"l"), 20, r == 1).unwrap();
                    if r == 1 {
                        got.reverse();
                    }
                    check(&got);
                    scans += 1;
                }
                scans
            })
        })
        .collect();
    write(&db);
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert!(db.stats().memtables_committed > 100, "{:?}", db.stats());
}

/// Snapshots taken beside the batches of the test above (range deletes, memtable commits): each sees the ten keys
/// at one round or none, and every later read through it (scans both ways, gets, the iterator) sees exactly that,
/// while the writer keeps rewriting and deleting the keys.
#[test]
fn snapshots_stay_fixed_beside_batches_range_deletes_and_commits() {
    let opts = Options { memtable_bytes: 1024, ..Options::tiny() };
    let db = Arc::new(Db::open(Arc::new(vfs::MemFs::new()), Path::new("db"), opts).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut changed = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let snap = db.snapshot();
                    let first = db.scan_at(b"k", Some(b"l"), 20, false, &snap).unwrap();
                    let whole = first.is_empty()
                        || (first.len() == 10 && first.iter().all(|(_, v)| *v == first[0].1));
                    assert!(whole, "a snapshot saw part of a batch: {first:?}");
                    for _ in 0..5 {
                        let mut back = db.scan_at(b"k", Some(b"l"), 20, true, &snap).unwrap();
                        back.reverse();
                        assert_eq!(back, first, "a snapshot's reverse scan moved");
                        let it: Vec<Pair> =
                            db.iter_at(b"k", Some(b"l"), false, &snap).map(|p| p.unwrap()).collect();
                        assert_eq!(it, first, "a snapshot's iterator moved");
                        for j in 0..10 {
                            let k = format!("k{j}").into_bytes();
                            let want = first.iter().find(|(x, _)| *x == k).map(|(_, v)| v.clone());
                            assert_eq!(db.get_at(&k, &snap).unwrap(), want, "a snapshot's get moved");
                        }
                    }
                    changed += u64::from(db.scan(b"k", Some(b"l"), 20, false).unwrap() != first);
                }
                changed
            })
        })
        .collect();
    let w = WriteOptions::default();
    for round in 1..=2000 * scale() {
        let mut ops = Vec::new();
        if round % 3 == 0 {
            ops.push(Op::DeleteRange(b"k".as_slice().into(), b"l".as_slice().into()));
        }
        if round % 7 != 0 {
            let v = format!("{round:08}{:40}", "").into_bytes();
            for j in [3, 7, 0, 9, 4, 1, 8, 2, 6, 5] {
                ops.push(Op::Put(format!("k{j}").into_bytes().into(), v.clone().into()));
            }
        }
        db.write(ops, w).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let changed: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    // The store moved under the snapshots, so they were tested against something.
    assert!(changed > 0, "no snapshot outlived a write");
    let st = db.stats();
    assert!(st.memtables_committed > 100, "{st:?}");
    assert_eq!((st.snapshots, st.snapshot_preimages, st.snapshot_preimage_bytes), (0, 0, 0), "{st:?}");
}
