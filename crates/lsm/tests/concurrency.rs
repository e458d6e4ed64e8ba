//! Concurrent writers (group commit) and readers while flushes and compactions run in the background.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use lsm::{Db, Options, ReadOptions, WriteOptions};

#[test]
fn concurrent_writers_and_readers_see_consistent_state() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let o = small_options(16 << 10);
    let db = Arc::new(Db::open(fs.clone(), "/db", o.clone()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let n_threads = 4;
    let per = 1500u32;
    let mut hs = Vec::new();
    for t in 0..n_threads {
        let db = db.clone();
        hs.push(std::thread::spawn(move || {
            for i in 0..per {
                let k = format!("t{t}-{i:05}");
                db.put(&WriteOptions { sync: i % 50 == 0 }, k.as_bytes(), k.as_bytes()).unwrap();
                if i % 100 == 99 {
                    // Each thread deletes its own range of the last 10 keys.
                    let a = format!("t{t}-{:05}", i - 9);
                    let b = format!("t{t}-{:05}", i + 1);
                    db.delete_range(&WriteOptions::default(), a.as_bytes(), b.as_bytes()).unwrap();
                }
            }
        }));
    }
    let reader = {
        let db = db.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // Within one snapshot, each thread's keys form a prefix of its write order minus deleted ranges:
                // so every visible key's value equals its key, and the scan is sorted.
                let s = db.snapshot();
                let ro = ReadOptions { snapshot: Some(&s), ..Default::default() };
                let all = db.scan(&ro, b"", b"\xff", usize::MAX).unwrap();
                assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
                assert!(all.iter().all(|(k, v)| k == v));
                if let Some((k, _)) = all.last() {
                    assert_eq!(db.get_opt(&ro, k).unwrap().as_deref(), Some(k.as_slice()));
                }
            }
        })
    };
    for h in hs {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    db.wait_for_compactions().unwrap();
    let st = db.stats();
    let all = db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap();
    assert_eq!(all.len(), (n_threads * (per - per / 100 * 10)) as usize);
    assert!(st.flushes > 0 && st.compactions > 0, "{}", st.to_json());
    assert!(st.write_groups <= st.writes);
    let db = Arc::into_inner(db).unwrap();
    db.close().unwrap();
    let db = Db::open(fs, "/db", o).unwrap();
    assert_eq!(db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap(), all);
}

/// Writers that form groups and ones that write alone, while another thread forces memtable switches
/// (`Db::flush`): every waiter must be woken (a writer skips the notify when it counts no waiter), every batch
/// applied whole. Before the fix a write leader took a waiting switch's queue entry into its group, and the
/// flush then waited for that entry to reach the front forever.
#[test]
fn regression_flush_beside_writers_never_hangs() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let o = Options { create_if_missing: true, write_buffer_size: 32 << 10, ..Options::default() };
    let db = Arc::new(Db::open(fs, "/db", o).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let flusher = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                db.flush().unwrap();
            }
        })
    };
    let writers: Vec<_> = (0..4u32)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..400u32 {
                    let mut b = lsm::WriteBatch::new();
                    for j in 0..3 {
                        let k = format!("t{t}-{i:04}-{j}");
                        b.put(k.as_bytes(), k.as_bytes());
                    }
                    db.write(&WriteOptions { sync: i % 64 == 0 }, b).unwrap();
                }
            })
        })
        .collect();
    for h in writers {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    flusher.join().unwrap();
    let all = db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap();
    assert_eq!(all.len(), 4 * 400 * 3);
    assert!(all.iter().all(|(k, v)| k == v));
    let st = db.stats();
    assert_eq!(st.writes, 4 * 400, "{}", st.to_json());
    assert!(st.flushes > 0, "{}", st.to_json());
}

/// Every public operation beside every other, under both range-delete strategies and with query-driven
/// compactions on: writers (puts, batches, point and range deletes, some synced), `flush`, `compact_range`,
/// `sync_wal` and `resume`, forward scans at the latest state (which may rewrite), and readers (snapshot scans,
/// iterators, gets). Each writer owns its keys, so the final state is known. Fails instead of hanging if any
/// operation never returns.
#[test]
fn all_operations_beside_each_other_complete_and_agree() {
    for global in [false, true] {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            run_all_operations(global);
            let _ = tx.send(());
        });
        match rx.recv_timeout(std::time::Duration::from_secs(120)) {
            Ok(()) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("an operation hung (global = {global})")
            }
            Err(e) => panic!("the workload panicked (global = {global}): {e}"),
        }
    }
}

fn run_all_operations(global: bool) {
    use std::collections::BTreeMap;
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let strategy = strategy(global);
    let o = Options { range_delete_strategy: strategy, ..small_options(8 << 10) };
    let db = Arc::new(Db::open(fs.clone(), "/db", o.clone()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let mut helpers = Vec::new();
    for kind in 0..5 {
        let (db, stop) = (db.clone(), stop.clone());
        helpers.push(std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                match kind {
                    0 => db.flush().unwrap(),
                    // Paced, so query-driven rewrites are not all aborted by manual compactions.
                    1 => {
                        db.compact_range(None, None).unwrap();
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    // A resume with no error to clear still leads the write queue for a moment.
                    2 => {
                        db.sync_wal().unwrap();
                        db.resume().unwrap();
                    }
                    // Whole forward scans at the latest state: the queries that may trigger rewrites.
                    3 => {
                        let lo = format!("w{}-{:04}", n % 3, (n * 37) % 300);
                        let got = db.scan(&ReadOptions::default(), lo.as_bytes(), b"w9", usize::MAX).unwrap();
                        assert!(got.windows(2).all(|w| w[0].0 < w[1].0));
                        assert!(got.iter().all(|(k, _)| k.as_slice() >= lo.as_bytes()));
                    }
                    _ => {
                        let s = db.snapshot();
                        let ro = ReadOptions { snapshot: Some(&s), ..Default::default() };
                        let all = db.scan(&ro, b"", b"\xff", usize::MAX).unwrap();
                        assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
                        let mut it = db.iter(&ro).unwrap();
                        it.seek(b"w1");
                        let mut seen = 0;
                        while it.valid() && seen < 20 {
                            it.next();
                            seen += 1;
                        }
                        let _ = db.get_opt(&ro, format!("w0-{:04}", n % 300).as_bytes()).unwrap();
                    }
                }
                n += 1;
            }
        }));
    }
    let writers: Vec<_> = (0..3u32)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut model = BTreeMap::new();
                let key = |i: u32| format!("w{t}-{i:04}").into_bytes();
                for i in 0..2000 * scale() {
                    let w = WriteOptions { sync: i % 97 == 0 };
                    match i % 10 {
                        0..=5 => {
                            let (k, v) = (key(i % 300), format!("{i}").into_bytes());
                            db.put(&w, &k, &v).unwrap();
                            model.insert(k, v);
                        }
                        6 => {
                            let k = key((i * 7) % 300);
                            db.delete(&w, &k).unwrap();
                            model.remove(&k);
                        }
                        7 => {
                            let (a, b) = ((i * 13) % 300, (i * 13) % 300 + 15);
                            db.delete_range(&w, &key(a), &key(b)).unwrap();
                            model.retain(|k, _| *k < key(a) || *k >= key(b));
                        }
                        _ => {
                            let mut b = lsm::WriteBatch::new();
                            for j in 0..4 {
                                let (k, v) = (key((i + j * 31) % 300), format!("b{i}").into_bytes());
                                b.put(&k, &v);
                                model.insert(k, v);
                            }
                            db.write(&w, b).unwrap();
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
    db.wait_for_compactions().unwrap();
    let st = db.stats();
    assert!(st.flushes > 10 && st.compactions > 0, "{}", st.to_json());
    if scale() > 1 {
        eprintln!("{}", st.to_json());
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
    assert_eq!(db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap(), want);
    let db = Arc::into_inner(db).unwrap();
    db.close().unwrap();
    let db = Db::open(fs, "/db", o).unwrap();
    assert_eq!(db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap(), want);
}

/// Memtables of `buffer` bytes, tables as large, L1 four times that, and L0 triggers that keep flushes and
/// compactions running all through a test.
fn small_options(buffer: usize) -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: buffer,
        max_bytes_for_level_base: 4 * buffer as u64,
        target_file_size_base: buffer as u64,
        level0_file_num_compaction_trigger: 2,
        level0_slowdown_writes_trigger: 4,
        level0_stop_writes_trigger: 8,
        ..Options::default()
    }
}

/// Repetitions from `RANGEDB_TEST_SCALE` (default 1).
fn scale() -> u32 {
    testkit::scale() as u32
}

/// Reads beside rounds of writes, range deletes, flushes, compactions and query-driven rewrites, under both
/// range-delete strategies: scans at the latest state, scans and a get at a held snapshot, and iterators stepped
/// slowly in either direction. Round `r` sets `k0` to `k9`, in order and one write each, to `r`, and every fifth
/// round ends with a range delete of them all. So every state holds a run `k0..=kj` at some `r` followed by either
/// nothing or the rest at `r - 1`, and every read must see one of those states (a snapshot, the same one each
/// time).
#[test]
fn reads_see_one_state_beside_range_deletes_and_rewrites() {
    for (global, mode) in [
        (false, lsm::RangeReduceMode::Off),
        (true, lsm::RangeReduceMode::Off),
        (false, lsm::RangeReduceMode::BlindMergeOnScan),
        (true, lsm::RangeReduceMode::BlindMergeOnScan),
    ] {
        let strategy = strategy(global);
        let mut o = Options { range_delete_strategy: strategy, ..small_options(4 << 10) };
        o.range_reduce.mode = mode;
        let db = Arc::new(Db::open(Arc::new(vfs::MemFs::new()), "/db", o).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..3)
            .map(|kind| {
                let (db, stop) = (db.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut scans = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let what = format!("global {global}, {mode:?}, reader {kind}");
                        match kind {
                            0 => {
                                let got = db.scan(&ReadOptions::default(), b"k", b"l", usize::MAX).unwrap();
                                assert!(one_state(&got), "{what}: a scan saw no state: {got:?}");
                            }
                            1 => {
                                // A snapshot reads the same before and after the writes, flushes and merges
                                // that run while it is held.
                                let s = db.snapshot();
                                let ro = ReadOptions { snapshot: Some(&s), ..Default::default() };
                                let first = db.scan(&ro, b"k", b"l", usize::MAX).unwrap();
                                assert!(one_state(&first), "{what}: a snapshot saw no state: {first:?}");
                                std::thread::sleep(std::time::Duration::from_millis(2));
                                let k3 = db.get_opt(&ro, b"k3").unwrap();
                                assert_eq!(
                                    k3,
                                    first.iter().find(|(k, _)| k == b"k3").map(|(_, v)| v.clone()),
                                    "{what}: get of k3 at snapshot {} against its scan {first:?}",
                                    s.seq()
                                );
                                assert_eq!(db.scan(&ro, b"k", b"l", usize::MAX).unwrap(), first, "{what}");
                            }
                            _ => {
                                // An iterator stepped slowly, either way, still reads the state it began with.
                                let got = read_slowly(&db, scans % 2 == 1);
                                assert!(one_state(&got), "{what}: an iterator saw no state: {got:?}");
                            }
                        }
                        scans += 1;
                    }
                    scans
                })
            })
            .collect();
        let w = WriteOptions::default();
        for round in 1..=2000 * u64::from(scale()) {
            for j in 0..10 {
                let v = format!("{round:08}{:40}", "");
                db.put(&w, format!("k{j}").as_bytes(), v.as_bytes()).unwrap();
            }
            if round % 5 == 0 {
                db.delete_range(&w, b"k", b"l").unwrap();
            }
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        let st = db.stats();
        assert!(st.flushes > 20 && st.compactions > 5, "{}", st.to_json());
        if mode != lsm::RangeReduceMode::Off {
            assert!(st.range_reduce.rewrites > 0, "{}", st.to_json());
        }
    }
}

/// Whether `got` (ascending) is `k0..=kj` at one round followed by nothing or by the rest at the round before.
fn one_state(got: &[(Vec<u8>, Vec<u8>)]) -> bool {
    let round = |v: &[u8]| std::str::from_utf8(&v[..8]).unwrap().parse::<u64>().unwrap();
    let keys_in_order = got.iter().enumerate().all(|(i, (k, _))| *k == format!("k{i}").into_bytes());
    let Some(first) = got.first().map(|(_, v)| round(v)) else { return true };
    let cut = got.iter().position(|(_, v)| round(v) != first).unwrap_or(got.len());
    keys_in_order
        && got[cut..].iter().all(|(_, v)| round(v) + 1 == first)
        && (cut == got.len() || got.len() == 10)
}

/// Batches that rewrite `k0` to `k9` at once, some behind a range delete of them in the same batch, beside
/// lone range deletes, flushes, compactions and index merges, under both strategies: every scan and every
/// slowly stepped iterator sees the ten keys at one round, or none.
#[test]
fn batches_are_seen_whole_beside_range_deletes_and_merges() {
    for global in [false, true] {
        let strategy = strategy(global);
        let o = Options { range_delete_strategy: strategy, ..small_options(4 << 10) };
        let db = Arc::new(Db::open(Arc::new(vfs::MemFs::new()), "/db", o).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let whole = |got: &[(Vec<u8>, Vec<u8>)]| {
            got.is_empty() || (got.len() == 10 && got.iter().all(|(_, v)| *v == got[0].1))
        };
        let readers: Vec<_> = (0..2)
            .map(|kind| {
                let (db, stop) = (db.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut reads = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let got = if kind == 0 {
                            db.scan(&ReadOptions::default(), b"k", b"l", usize::MAX).unwrap()
                        } else {
                            read_slowly(&db, reads % 2 == 1)
                        };
                        assert!(whole(&got), "global {global}, reader {kind}: part of a batch: {got:?}");
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        let w = WriteOptions::default();
        for round in 1..=2000 * u64::from(scale()) {
            if round % 7 == 0 {
                db.delete_range(&w, b"k", b"l").unwrap();
                continue;
            }
            let mut b = lsm::WriteBatch::new();
            if round % 3 == 0 {
                b.delete_range(b"k", b"l");
            }
            let v = format!("{round:08}{:40}", "");
            // Written in a scrambled order, so no prefix of the batch is a key-ordered prefix.
            for j in [3, 7, 0, 9, 4, 1, 8, 2, 6, 5] {
                b.put(format!("k{j}").as_bytes(), v.as_bytes());
            }
            db.write(&w, b).unwrap();
            if round % 250 == 0 {
                // Compactions beside the readers whatever the scheduler does: on a loaded machine the
                // background thread once ran a single one in the whole loop.
                db.compact_range(None, None).unwrap();
            }
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        let st = db.stats();
        assert!(st.flushes > 20 && st.compactions > 5, "{}", st.to_json());
    }
}

/// The pairs of `[k, l)`, ascending, read through an iterator that yields the thread after every step (so writes,
/// flushes and merges run while it is open), walking forward or backward.
fn read_slowly(db: &Db, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let ro = ReadOptions {
        lower_bound: Some(b"k".to_vec()),
        upper_bound: Some(b"l".to_vec()),
        ..Default::default()
    };
    let mut it = db.iter(&ro).unwrap();
    if reverse {
        it.seek_to_last()
    } else {
        it.seek_to_first()
    }
    let mut got = Vec::new();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        std::thread::yield_now();
        if reverse { it.prev() } else { it.next() }
    }
    it.status().unwrap();
    if reverse {
        got.reverse();
    }
    got
}

/// The range-delete strategy under test: GLORAN's index with a tiny buffer and nodes (flushes and merges all
/// the time), or local tombstones.
fn strategy(global: bool) -> Arc<dyn lsm::RangeDeleteStrategy> {
    if global {
        Arc::new(lsm::GlobalRangeDeletes::with_options(gloran::IndexOptions {
            buffer_bytes: 2048,
            node_size: 256,
            ..Default::default()
        }))
    } else {
        Arc::new(lsm::LocalTombstones)
    }
}
