use std::cell::RefCell;
use std::sync::mpsc;

use super::*;

thread_local! {
    /// Run once (then cleared) by the next read of this thread between its memtable and table sources.
    static BETWEEN_SOURCES: RefCell<Option<Box<dyn FnOnce()>>> = const { RefCell::new(None) };
}

pub(super) fn pause_between_sources() {
    if let Some(f) = BETWEEN_SOURCES.with(|h| h.borrow_mut().take()) {
        f();
    }
}

fn open() -> Db {
    let opts = Options { create_if_missing: true, ..Options::tiny() };
    Db::open(Arc::new(vfs::MemFs::new()), Path::new("db"), opts).unwrap()
}

fn put(k: &[u8], v: &[u8]) -> Op {
    Op::Put(k.into(), v.into())
}

/// Runs `read` on another thread, stopped between reading the memtables and reading the table while `write`
/// runs here, and returns what it read.
fn read_across<T: Send + 'static>(db: &Arc<Db>, read: fn(&Db) -> T, write: impl FnOnce(&Db)) -> T {
    let (entered, wait_entered) = mpsc::channel();
    let (go, wait_go) = mpsc::channel::<()>();
    let reader = {
        let db = db.clone();
        std::thread::spawn(move || {
            BETWEEN_SOURCES.with(|h| {
                *h.borrow_mut() = Some(Box::new(move || {
                    entered.send(()).unwrap();
                    wait_go.recv().unwrap();
                }))
            });
            read(&db)
        })
    };
    wait_entered.recv().unwrap();
    write(db);
    go.send(()).unwrap();
    reader.join().unwrap()
}

/// A scan used to copy the memtable's part of its range, drop the memtable lock and then read the table: a range
/// delete in between removed the memtable's keys after the copy and the table's before the read, so the scan
/// returned the memtable's keys of the range without the table's, a state no order of the writes has.
#[test]
fn regression_scan_across_a_range_delete_sees_it_whole() {
    let db = Arc::new(open());
    let w = WriteOptions::default();
    db.put(b"a", b"1", w).unwrap();
    db.flush().unwrap();
    db.put(b"b", b"2", w).unwrap();
    let got = read_across(
        &db,
        |db| db.scan(b"a", Some(b"c"), 10, false).unwrap(),
        |db| db.delete_range(b"a", b"c", w).unwrap(),
    );
    assert_eq!(got, Vec::<Pair>::new());
}

/// A get that missed the memtables and then read the table after a batch deleted its key's range and wrote the
/// key again would find neither the old value (collapsed) nor the new one (in the memtable it had passed).
#[test]
fn get_across_a_batch_that_deletes_and_rewrites_its_key_sees_the_batch_whole() {
    let db = Arc::new(open());
    let w = WriteOptions::default();
    db.put(b"a", b"old", w).unwrap();
    db.flush().unwrap();
    let got = read_across(
        &db,
        |db| db.get(b"a").unwrap(),
        |db| {
            db.write(
                vec![Op::DeleteRange(b"a".as_slice().into(), b"c".as_slice().into()), put(b"a", b"new")],
                w,
            )
            .unwrap()
        },
    );
    assert_eq!(got.as_deref(), Some(&b"new"[..]));
}

/// Point writes that freeze no memtable do not make a pass repeat.
#[test]
fn point_writes_across_a_read_leave_the_epoch_alone() {
    let db = Arc::new(open());
    let w = WriteOptions::default();
    db.put(b"a", b"1", w).unwrap();
    db.flush().unwrap();
    let epoch = db.inner.table_epoch.load(Ordering::SeqCst);
    let got = read_across(
        &db,
        |db| db.scan(b"a", Some(b"c"), 10, false).unwrap(),
        |db| db.write(vec![put(b"b", b"2"), Op::Delete(b"a".as_slice().into())], w).unwrap(),
    );
    // The pass copied the memtables before the batch and read the table after it: the batch's point writes
    // are in neither, which is the state before the batch.
    assert_eq!(got, vec![(b"a".to_vec(), b"1".to_vec())]);
    assert_eq!(db.inner.table_epoch.load(Ordering::SeqCst), epoch);
}

#[test]
fn a_batch_applies_its_range_deletes_in_order() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let opts = Options { create_if_missing: true, ..Options::tiny() };
    let db = Db::open(fs.clone(), Path::new("db"), opts.clone()).unwrap();
    let w = WriteOptions::default();
    for k in [&b"a"[..], b"b", b"c", b"d"] {
        db.put(k, b"t", w).unwrap();
    }
    db.flush().unwrap();
    db.put(b"b", b"m", w).unwrap();
    let range = |a: &[u8], b: &[u8]| Op::DeleteRange(a.into(), b.into());
    // Written before the range delete and so deleted by it; written after it and so kept; an empty range.
    let ops = vec![
        put(b"bb", b"x"),
        range(b"b", b"d"),
        put(b"c", b"y"),
        range(b"z", b"z"),
        Op::Delete(b"a".as_slice().into()),
    ];
    db.write(ops, w).unwrap();
    let want = vec![(b"c".to_vec(), b"y".to_vec()), (b"d".to_vec(), b"t".to_vec())];
    assert_eq!(db.scan(b"", None, 10, false).unwrap(), want);
    assert_eq!(db.stats().range_deletes, 1);
    // Replayed from the log alike.
    drop(db);
    let db = Db::open(fs, Path::new("db"), opts).unwrap();
    assert_eq!(db.scan(b"", None, 10, false).unwrap(), want);
    db.check(true).unwrap();
}

#[test]
fn a_batch_of_empty_ranges_logs_nothing() {
    let db = open();
    let before = db.stats().wal_bytes;
    db.write(
        vec![Op::DeleteRange(b"b".as_slice().into(), b"b".as_slice().into())],
        WriteOptions { sync: true },
    )
    .unwrap();
    db.write(Vec::new(), WriteOptions::default()).unwrap();
    assert_eq!(db.stats().wal_bytes, before);
    assert_eq!(db.stats().range_deletes, 0);
}

/// A scan copied the active memtable, and before it read the table that memtable took newer writes, was frozen
/// and committed: the copy's older values then overrode the table's newer ones beside keys written later, a
/// state no order of the writes has.
#[test]
fn regression_scan_across_a_commit_of_the_memtable_it_copied_sees_one_state() {
    let db = Arc::new(open());
    let w = WriteOptions::default();
    db.put(b"k1", b"a", w).unwrap();
    let got = read_across(
        &db,
        |db| db.scan(b"k", Some(b"l"), 10, false).unwrap(),
        |db| {
            db.put(b"k1", b"b", w).unwrap();
            db.put(b"k2", b"x", w).unwrap();
            db.flush().unwrap();
        },
    );
    assert_eq!(got, vec![(b"k1".to_vec(), b"b".to_vec()), (b"k2".to_vec(), b"x".to_vec())]);
}

/// A reversed range deleted nothing and answered `Ok`, where the LSM engine (and RocksDB) answer invalid argument;
/// in a batch it now rejects the whole batch before anything is logged or applied.
#[test]
fn regression_a_reversed_range_delete_is_an_invalid_argument() {
    let db = open();
    let w = WriteOptions::default();
    db.put(b"a", b"1", w).unwrap();
    let e = db.delete_range(b"b", b"a", w).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let e =
        db.write(vec![put(b"c", b"3"), Op::DeleteRange(b"z".as_slice().into(), b"a".as_slice().into())], w);
    assert!(matches!(e, Err(Error::InvalidArgument(_))));
    assert_eq!(db.get(b"c").unwrap(), None, "a rejected batch applies nothing");
    // An empty range is no mistake: it deletes nothing.
    db.delete_range(b"a", b"a", w).unwrap();
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
}

/// A scan without a limit (`usize::MAX`, as the kv shell's `scan A B` asks) that started inside a committed
/// interval overflowed `a + (limit - n)`: a panic in debug builds; in release the count wrapped and the next
/// allocation panicked with a capacity overflow.
#[test]
fn regression_unlimited_scan_from_inside_an_interval() {
    let db = open();
    let w = WriteOptions::default();
    let keys: Vec<Vec<u8>> = (10..60u32).map(|i| format!("k{i}").into_bytes()).collect();
    for k in &keys {
        db.put(k, b"v", w).unwrap();
    }
    db.flush().unwrap();
    for (i, start) in keys.iter().enumerate() {
        let fwd: Vec<Vec<u8>> =
            db.scan(start, None, usize::MAX, false).unwrap().into_iter().map(|p| p.0).collect();
        assert_eq!(fwd, keys[i..]);
        let rev: Vec<Vec<u8>> =
            db.scan(b"k", Some(start), usize::MAX, true).unwrap().into_iter().map(|p| p.0).collect();
        assert_eq!(rev, keys[..i].iter().rev().cloned().collect::<Vec<_>>());
    }
}

// Snapshots (`db/snapshot.rs`).

fn get_at(db: &Db, k: &[u8], s: &Snapshot) -> Option<Vec<u8>> {
    db.get_at(k, s).unwrap()
}

fn keys_at(db: &Db, s: &Snapshot) -> Vec<Vec<u8>> {
    db.scan_at(b"", None, usize::MAX, false, s).unwrap().into_iter().map(|p| p.0).collect()
}

/// Every kind of write after a snapshot, on keys in the active memtable, the immutable one and the table.
#[test]
fn a_snapshot_reads_the_store_as_it_was_through_every_kind_of_write() {
    let db = open();
    let w = WriteOptions::default();
    db.put(b"t1", b"table", w).unwrap();
    db.put(b"t2", b"table", w).unwrap();
    db.flush().unwrap();
    db.put(b"m1", b"mem", w).unwrap();
    db.put(b"m2", b"", w).unwrap();
    let s = db.snapshot();
    db.put(b"t1", b"new", w).unwrap();
    db.delete(b"m1", w).unwrap();
    db.put(b"n", b"born later", w).unwrap();
    db.write(vec![Op::DeleteRange(b"m".as_slice().into(), b"t2".as_slice().into()), put(b"m2", b"x")], w)
        .unwrap();
    db.flush().unwrap();
    db.delete_range(b"t", b"u", w).unwrap();
    assert_eq!(db.scan(b"", None, 10, false).unwrap(), vec![(b"m2".to_vec(), b"x".to_vec())]);
    assert_eq!(get_at(&db, b"t1", &s).as_deref(), Some(&b"table"[..]));
    assert_eq!(get_at(&db, b"m2", &s).as_deref(), Some(&b""[..]), "an empty value is a value");
    assert_eq!(get_at(&db, b"n", &s), None, "a key written after the snapshot");
    let want: Vec<Pair> = [("m1", "mem"), ("m2", ""), ("t1", "table"), ("t2", "table")]
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    assert_eq!(db.scan_at(b"", None, 10, false, &s).unwrap(), want);
    let mut rev = db.scan_at(b"a", Some(b"t2"), 2, true, &s).unwrap();
    rev.reverse();
    assert_eq!(rev, want[1..3]);
    let it: Vec<Pair> = db.iter_at(b"", None, false, &s).map(|p| p.unwrap()).collect();
    assert_eq!(it, want);
    // A key written twice after the snapshot holds one pre-image: the value before the first write.
    let st = db.stats();
    assert_eq!((st.snapshots, st.snapshot_preimages), (1, 5), "{st:?}");
    assert_eq!(st.snapshot_preimage_bytes, [2 + 5, 2 + 3, 1, 2, 2 + 5].iter().sum::<u64>());
    drop(s);
    let st = db.stats();
    assert_eq!((st.snapshots, st.snapshot_preimages, st.snapshot_preimage_bytes), (0, 0, 0));
}

/// Three snapshots with writes between them; releasing the middle one hands its pre-images to the older one,
/// releasing the oldest drops its own, and each remaining snapshot still reads its moment.
#[test]
fn releasing_a_snapshot_keeps_the_others_whole() {
    let db = open();
    let w = WriteOptions::default();
    let v = |i: u8| vec![b'0' + i];
    db.put(b"a", &v(0), w).unwrap();
    let s1 = db.snapshot();
    db.put(b"a", &v(1), w).unwrap();
    db.put(b"b", &v(1), w).unwrap();
    let s2 = db.snapshot();
    db.put(b"b", &v(2), w).unwrap();
    db.put(b"c", &v(2), w).unwrap();
    let s3 = db.snapshot();
    db.delete_range(b"a", b"z", w).unwrap();
    let read = |s: &Snapshot| (get_at(&db, b"a", s), get_at(&db, b"b", s), get_at(&db, b"c", s));
    assert_eq!(read(&s1), (Some(v(0)), None, None));
    assert_eq!(read(&s2), (Some(v(1)), Some(v(1)), None));
    assert_eq!(read(&s3), (Some(v(1)), Some(v(2)), Some(v(2))));
    assert_eq!(db.stats().snapshot_preimages, 2 + 2 + 3);
    drop(s2);
    assert_eq!(read(&s1), (Some(v(0)), None, None));
    assert_eq!(read(&s3), (Some(v(1)), Some(v(2)), Some(v(2))));
    // s1 holds a and b, s2 held b and c: s1's b wins, s2's c joins it.
    assert_eq!(db.stats().snapshot_preimages, 3 + 3);
    drop(s1);
    assert_eq!(read(&s3), (Some(v(1)), Some(v(2)), Some(v(2))));
    assert_eq!(keys_at(&db, &s3), vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    assert_eq!(db.stats().snapshot_preimages, 3);
    drop(s3);
    assert_eq!(db.stats().snapshot_preimages, 0);
}

/// A snapshot with more pre-images than the older one it is merged into (the merge goes the other way round).
#[test]
fn releasing_a_snapshot_larger_than_its_elder_keeps_the_elders_pre_images() {
    let db = open();
    let w = WriteOptions::default();
    db.put(b"k0", b"old", w).unwrap();
    let s1 = db.snapshot();
    db.put(b"k0", b"mid", w).unwrap();
    let s2 = db.snapshot();
    for i in 0..20 {
        db.put(format!("k{i}").as_bytes(), b"new", w).unwrap();
    }
    assert_eq!(db.stats().snapshot_preimages, 1 + 20);
    drop(s2);
    let st = db.stats();
    assert_eq!(st.snapshot_preimages, 20);
    // k0 "old" (5 bytes; s2's k0 "mid" went), k1..k9 and k10..k19 absent (2 and 3 bytes of key each).
    assert_eq!(st.snapshot_preimage_bytes, 5 + 9 * 2 + 10 * 3);
    assert_eq!(get_at(&db, b"k0", &s1).as_deref(), Some(&b"old"[..]));
    assert_eq!(keys_at(&db, &s1), vec![b"k0".to_vec()]);
}

/// A snapshot read that read the current value just before a write changed it finds the write's pre-image.
#[test]
fn a_snapshot_get_across_a_write_reads_the_snapshot() {
    let db = Arc::new(open());
    let w = WriteOptions::default();
    db.put(b"a", b"old", w).unwrap();
    db.flush().unwrap();
    let got = read_across(
        &db,
        |db| {
            let s = db.snapshot();
            (db.get_at(b"a", &s).unwrap(), db.scan_at(b"", None, 10, false, &s).unwrap())
        },
        |db| {
            db.write(
                vec![Op::DeleteRange(b"a".as_slice().into(), b"c".as_slice().into()), put(b"b", b"x")],
                w,
            )
            .unwrap()
        },
    );
    assert_eq!(got.0.as_deref(), Some(&b"old"[..]));
    assert_eq!(got.1, vec![(b"a".to_vec(), b"old".to_vec())]);
}

#[test]
fn a_snapshot_of_another_store_is_an_invalid_argument() {
    let (a, b) = (open(), open());
    let s = a.snapshot();
    assert!(matches!(b.get_at(b"k", &s), Err(Error::InvalidArgument(_))));
    assert!(matches!(b.scan_at(b"", None, 1, false, &s), Err(Error::InvalidArgument(_))));
    assert!(a.get_at(b"k", &s).unwrap().is_none());
    assert_eq!(b.snapshot().id(), 1, "ids count per store");
}

/// A snapshot handle dropped on another thread while the store closed: the handle reached its store through a
/// weak reference that it upgraded to release itself, and while it held that strong reference, `close` found
/// the store still shared and failed.
#[test]
fn regression_dropping_a_snapshot_beside_close_does_not_fail_the_close() {
    for _ in 0..20 {
        let db = open();
        let snaps: Vec<Snapshot> = (0..20_000).map(|_| db.snapshot()).collect();
        let go = Arc::new(std::sync::Barrier::new(2));
        let dropper = {
            let go = go.clone();
            std::thread::spawn(move || {
                go.wait();
                drop(snaps);
            })
        };
        go.wait();
        db.close().unwrap();
        dropper.join().unwrap();
    }
}

/// Without `create_if_missing`, opening a directory that holds no store failed only after taking the lock, so
/// it left a `LOCK` file behind in a directory that was not the store's.
#[test]
fn regression_a_refused_open_leaves_the_directory_as_it_was() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let opts = Options { create_if_missing: false, ..Options::tiny() };
    let err = Db::open(fs.clone(), Path::new("missing"), opts.clone()).expect_err("opened a missing store");
    assert!(
        matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("missing does not exist"),
        "{err}"
    );
    assert!(!fs.exists(Path::new("missing")).unwrap());

    fs.create_dir_all(Path::new("empty")).unwrap();
    let err = Db::open(fs.clone(), Path::new("empty"), opts).expect_err("opened an empty directory");
    assert!(
        matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("holds no FlexDB store"),
        "{err}"
    );
    assert!(fs.list_dir(Path::new("empty")).unwrap().is_empty(), "the refused open wrote into the directory");
}

/// A second open of an open store failed with an I/O error naming its `LOCK` file; it is now an invalid argument
/// naming the store, as the LSM engine says it, and the first handle is unaffected.
#[test]
fn regression_a_second_open_names_the_store_in_use() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let db = Db::open(fs.clone(), Path::new("s"), Options::tiny()).unwrap();
    db.put(b"k", b"v", WriteOptions::default()).unwrap();
    let err = Db::open(fs.clone(), Path::new("s"), Options::tiny()).expect_err("opened twice");
    assert!(
        matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("store s is in use"),
        "{err}"
    );
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    db.close().unwrap();
    let db = Db::open(fs, Path::new("s"), Options::tiny()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// Keys up to 64 KiB (four times an interval's byte limit) are stored and read back through a commit; longer keys
/// and values over 1 GiB are refused with the length and the limit named, and nothing of the batch is applied.
#[test]
fn keys_and_values_at_their_limits() {
    let db = open();
    let wo = WriteOptions::default();
    let key = vec![b'k'; MAX_KEY_LEN];
    db.put(&key, b"v", wo).unwrap();
    db.put(b"a", &vec![b'x'; 1 << 20], wo).unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(&key).unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(db.get(b"a").unwrap().map(|v| v.len()), Some(1 << 20));

    let long: Box<[u8]> = vec![b'k'; MAX_KEY_LEN + 1].into();
    for op in [
        put(&long, b"v"),
        Op::Delete(long.clone()),
        Op::DeleteRange(b"a"[..].into(), long.clone()),
        Op::DeleteRange(long.clone(), long.clone()),
    ] {
        let err = db.write(vec![put(b"first", b"1"), op], wo).expect_err("a key over the limit was taken");
        let want = format!("a key of {} bytes is over the limit of {MAX_KEY_LEN}", MAX_KEY_LEN + 1);
        assert!(matches!(err, Error::InvalidArgument(_)) && err.to_string().contains(&want), "{err}");
    }
    // Zero-filled, so the gibibyte is address space, not memory touched.
    let huge = Op::Put(b"h"[..].into(), vec![0u8; MAX_VALUE_LEN + 1].into_boxed_slice());
    let err = db.write(vec![huge], wo).expect_err("a value over the limit was taken");
    assert!(err.to_string().contains(&format!("a value of {} bytes", MAX_VALUE_LEN + 1)), "{err}");
    assert_eq!(db.get(b"first").unwrap(), None, "a refused batch was partly applied");
}

/// A batch of four 1 GiB values passed the per-value limit, and its WAL record's 32-bit length field was written
/// truncated: the acknowledged batch would have read back as a damaged record. It is refused now, whole.
#[test]
fn regression_a_batch_over_the_record_limit_is_refused() {
    let db = open();
    let wo = WriteOptions::default();
    // Zero-filled and never written to, so the 4 GiB are address space, not memory touched.
    let mut ops = vec![put(b"first", b"1")];
    ops.extend((0..4u8).map(|i| Op::Put(vec![i].into(), vec![0u8; MAX_VALUE_LEN].into_boxed_slice())));
    let err = db.write(ops, wo).expect_err("a batch over the record limit was taken");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains(&format!("is over the limit of {}", wal::MAX_PAYLOAD)), "{err}");
    assert_eq!(db.get(b"first").unwrap(), None, "a refused batch was partly applied");
    db.put(b"after", b"ok", wo).unwrap();
    assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"ok"[..]));
}
