//! End-to-end behaviour of the public API on an in-memory file system.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use lsm::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

fn tiny() -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 4 << 10,
        max_bytes_for_level_base: 16 << 10,
        target_file_size_base: 8 << 10,
        block_size: 256,
        level0_file_num_compaction_trigger: 2,
        ..Options::default()
    }
}

fn open(fs: &Arc<vfs::MemFs>, o: Options) -> Db {
    let f: Arc<dyn vfs::Fs> = fs.clone();
    Db::open(f, "/db", o).unwrap()
}

#[test]
fn put_get_delete_range_and_reopen() {
    let fs = Arc::new(vfs::MemFs::new());
    let w = WriteOptions::default();
    {
        let db = open(&fs, tiny());
        for i in 0..2000u32 {
            db.put(&w, format!("k{i:05}").as_bytes(), format!("v{i}").as_bytes()).unwrap();
        }
        db.delete(&w, b"k00005").unwrap();
        db.delete_range(&w, b"k00100", b"k00200").unwrap();
        assert_eq!(db.get(b"k00004").unwrap(), Some(b"v4".to_vec()));
        assert_eq!(db.get(b"k00005").unwrap(), None);
        assert_eq!(db.get(b"k00150").unwrap(), None);
        assert_eq!(db.get(b"k00200").unwrap(), Some(b"v200".to_vec()));
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        assert_eq!(db.get(b"k00150").unwrap(), None);
        assert_eq!(db.get(b"k01999").unwrap(), Some(b"v1999".to_vec()));
        let s = db.stats();
        assert!(s.flushes > 0 && s.compactions > 0, "{s:?}");
        db.close().unwrap();
    }
    let db = open(&fs, tiny());
    assert_eq!(db.get(b"k00005").unwrap(), None);
    assert_eq!(db.get(b"k00150").unwrap(), None);
    assert_eq!(db.get(b"k01999").unwrap(), Some(b"v1999".to_vec()));
    let all = db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap();
    assert_eq!(all.len(), 2000 - 1 - 100);
    let r = db.rscan(&ReadOptions::default(), b"k00090", b"k00210", usize::MAX).unwrap();
    let keys: Vec<_> = r.iter().map(|(k, _)| String::from_utf8(k.clone()).unwrap()).collect();
    assert_eq!(keys.first().map(String::as_str), Some("k00209"));
    assert_eq!(keys.last().map(String::as_str), Some("k00090"));
    assert_eq!(keys.len(), 10 + 10);
}

#[test]
fn snapshots_see_the_past_and_batches_are_atomic() {
    let fs = Arc::new(vfs::MemFs::new());
    let db = open(&fs, tiny());
    let w = WriteOptions { sync: true };
    db.put(&w, b"a", b"1").unwrap();
    let snap = db.snapshot();
    let mut b = WriteBatch::new();
    b.put(b"a", b"2");
    b.put(b"b", b"2");
    b.delete_range(b"c", b"d");
    db.write(&w, b).unwrap();
    let at = ReadOptions { snapshot: Some(&snap), ..Default::default() };
    assert_eq!(db.get_opt(&at, b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get_opt(&at, b"b").unwrap(), None);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get_opt(&at, b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"a").unwrap(), Some(b"2".to_vec()));
    drop(snap);
    assert!(db.delete_range(&w, b"z", b"a").is_err());
}

#[test]
fn iterator_bounds_seek_and_direction_changes() {
    let fs = Arc::new(vfs::MemFs::new());
    let db = open(&fs, tiny());
    let w = WriteOptions::default();
    for i in 0..300u32 {
        db.put(&w, format!("{i:04}").as_bytes(), b"x").unwrap();
        if i == 150 {
            db.flush().unwrap();
        }
    }
    db.delete_range(&w, b"0100", b"0110").unwrap();
    let mut it = db
        .iter(&ReadOptions {
            lower_bound: Some(b"0050".to_vec()),
            upper_bound: Some(b"0250".to_vec()),
            ..Default::default()
        })
        .unwrap();
    it.seek(b"0099");
    assert_eq!(it.key(), b"0099");
    it.next();
    assert_eq!(it.key(), b"0110");
    it.prev();
    assert_eq!(it.key(), b"0099");
    it.seek_for_prev(b"0105");
    assert_eq!(it.key(), b"0099");
    it.seek_to_last();
    assert_eq!(it.key(), b"0249");
    it.seek_to_first();
    assert_eq!(it.key(), b"0050");
    it.prev();
    assert!(!it.valid());
    it.seek(b"0000");
    assert_eq!(it.key(), b"0050");
}

/// Compactions read their inputs without adding blocks to the block cache (as RocksDB's do): the inputs are
/// deleted when the compaction ends, so their blocks would only push out blocks readers use.
#[test]
fn compactions_leave_the_block_cache_to_readers() {
    let fs = Arc::new(vfs::MemFs::new());
    let w = WriteOptions::default();
    let db = open(&fs, Options { block_cache_size: 1 << 20, ..tiny() });
    for i in 0..3000u32 {
        db.put(&w, format!("k{:05}", i * 7 % 3000).as_bytes(), &[b'v'; 40]).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    assert!(
        db.stats().compaction_levels.iter().skip(1).any(|l| l.read_input_bytes > 0),
        "the writes compacted"
    );
    assert_eq!(db.stats().block_cache_usage, 0, "writes, flushes and compactions cache nothing");
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    let after = db.stats();
    assert_eq!(after.block_cache_usage, 0, "the compaction read every table and cached none of it");
    assert_eq!(db.get(b"k00010").unwrap(), Some(vec![b'v'; 40]));
    assert!(db.stats().block_cache_usage > 0, "a read caches its block");
}

/// A snapshot handle reached its store through a weak reference that it upgraded to release itself: one dropped
/// on another thread while the store closed kept the store, and its directory lock, alive after `close`
/// returned, so a reopen right after it found the store locked.
#[test]
fn regression_a_snapshot_dropped_beside_close_does_not_keep_the_store_locked() {
    let fs = Arc::new(vfs::MemFs::new());
    for _ in 0..100 {
        let db = open(&fs, tiny());
        let snaps: Vec<lsm::Snapshot> = (0..20_000).map(|_| db.snapshot()).collect();
        close_while_dropping_then_reopen(&fs, db, snaps);
    }
}

/// Drops `handles` on another thread while `db` closes, then reopens the store at once: the reopen must not find
/// it locked.
fn close_while_dropping_then_reopen<T: Send + 'static>(fs: &Arc<vfs::MemFs>, db: Db, handles: T) {
    let go = Arc::new(std::sync::Barrier::new(2));
    let dropper = {
        let go = go.clone();
        std::thread::spawn(move || {
            go.wait();
            drop(handles);
        })
    };
    go.wait();
    db.close().unwrap();
    let f: Arc<dyn vfs::Fs> = fs.clone();
    let reopened = Db::open(f, "/db", tiny());
    dropper.join().unwrap();
    reopened.unwrap().close().unwrap();
}

/// Recovery flushes the logs it replays into L0; `Stats::flushes` counted none of them while `bytes_flushed`
/// counted their bytes, so a reopened store reported bytes flushed by zero flushes.
#[test]
fn regression_flushes_made_by_recovery_are_counted() {
    let fs = Arc::new(vfs::MemFs::new());
    {
        let db = open(&fs, Options { create_if_missing: true, ..Options::default() });
        db.put(&WriteOptions::default(), b"k", b"v").unwrap();
        db.close().unwrap();
    }
    let db = open(&fs, Options::default());
    let s = db.stats();
    assert_eq!(db.recovery().records, 1, "the write must come back from the log");
    assert!(s.bytes_flushed > 0 && s.flushes == 1, "{s:?}");
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// A read named its snapshot by a bare sequence number, which nothing checked: a number from another store, or
/// one no live snapshot protected, read versions a compaction may already have dropped and answered wrongly
/// without a word. A read now names a snapshot handle, and one from another instance is an invalid argument.
#[test]
fn regression_a_snapshot_of_another_instance_is_refused() {
    let fs = Arc::new(vfs::MemFs::new());
    let w = WriteOptions::default();
    let db = open(&fs, tiny());
    db.put(&w, b"k", b"v1").unwrap();
    let old = db.snapshot();
    db.close().unwrap();
    let db = open(&fs, tiny());
    db.put(&w, b"k", b"v2").unwrap();
    let other_fs = Arc::new(vfs::MemFs::new());
    let other = open(&other_fs, tiny());
    let foreign = other.snapshot();
    for snap in [&old, &foreign] {
        let ro = ReadOptions { snapshot: Some(snap), ..Default::default() };
        assert!(matches!(db.get_opt(&ro, b"k"), Err(lsm::Error::InvalidArgument(_))));
        assert!(matches!(db.iter(&ro), Err(lsm::Error::InvalidArgument(_))));
        assert!(matches!(db.scan(&ro, b"a", b"z", 10), Err(lsm::Error::InvalidArgument(_))));
    }
    let own = db.snapshot();
    db.put(&w, b"k", b"v3").unwrap();
    let ro = ReadOptions { snapshot: Some(&own), ..Default::default() };
    assert_eq!(db.get_opt(&ro, b"k").unwrap(), Some(b"v2".to_vec()));
    assert_eq!(db.scan(&ro, b"a", b"z", 10).unwrap(), vec![(b"k".to_vec(), b"v2".to_vec())]);
}

/// The same race as above through iterators: a range query's statistics sink (and RangeReduce's collection)
/// reached the store through a weak reference it upgraded when the iterator dropped, so iterators dropped on
/// another thread as the store closed kept it, and its directory lock, alive after `close` returned.
#[test]
fn regression_iterators_dropped_beside_close_do_not_keep_the_store_locked() {
    let fs = Arc::new(vfs::MemFs::new());
    {
        let db = open(&fs, tiny());
        for i in 0..200u32 {
            db.put(&WriteOptions::default(), format!("k{i:04}").as_bytes(), b"v").unwrap();
        }
        db.close().unwrap();
    }
    for _ in 0..50 {
        let db = open(&fs, tiny());
        let ro = ReadOptions {
            lower_bound: Some(b"k0010".to_vec()),
            upper_bound: Some(b"k0100".to_vec()),
            ..Default::default()
        };
        let iters: Vec<lsm::DbIter> = (0..5_000).map(|_| db.iter(&ro).unwrap()).collect();
        close_while_dropping_then_reopen(&fs, db, iters);
    }
}

#[test]
fn regression_opening_a_missing_database_leaves_nothing_behind() {
    // Without `create_if_missing` the open failed, but only after creating the directory (and its parents)
    // and a LOCK file in it, so a mistyped path left debris that a later open took for a database directory.
    let fs = Arc::new(vfs::MemFs::new());
    let f: Arc<dyn vfs::Fs> = fs.clone();
    let o = Options { create_if_missing: false, ..Options::default() };
    let err = Db::open(f.clone(), "/a/b/db", o.clone()).expect_err("opened a database that does not exist");
    assert_eq!(err.kind(), "invalid", "{err}");
    assert!(err.to_string().contains("/a/b/db does not exist"), "{err}");
    assert!(!f.exists(std::path::Path::new("/a")).unwrap(), "the failed open created directories");

    // An existing directory without a database is refused the same way, and stays usable for creating one.
    f.create_dir_all(std::path::Path::new("/empty")).unwrap();
    let err = Db::open(f.clone(), "/empty", o).expect_err("opened an empty directory");
    assert_eq!(err.kind(), "invalid", "{err}");
    let db = Db::open(f, "/empty", tiny()).unwrap();
    db.put(&WriteOptions::default(), b"k", b"v").unwrap();
}

#[test]
fn regression_keys_and_values_over_four_gib_are_refused() {
    // The memtable keeps 32-bit lengths: a longer value was stored with its length truncated (a silently wrong
    // answer), and a longer key failed its memtable insert after the WAL append, so every later open failed too.
    let fs = Arc::new(vfs::MemFs::new());
    let db = open(&fs, tiny());
    let w = WriteOptions::default();
    // Zero-filled and never written to: address space, not memory touched (the check comes before any copy).
    let huge = vec![0u8; lsm::MAX_VALUE_LEN + 1];
    let over = format!("of {} bytes is over the limit of {}", lsm::MAX_KEY_LEN + 1, lsm::MAX_KEY_LEN);
    for err in [
        db.put(&w, b"k", &huge).expect_err("a value over the limit was taken"),
        db.put(&w, &huge, b"v").expect_err("a key over the limit was taken"),
        db.delete(&w, &huge).expect_err("a key over the limit was taken"),
        db.delete_range(&w, b"", &huge).expect_err("a key over the limit was taken"),
    ] {
        assert_eq!(err.kind(), "invalid", "{err}");
        assert!(err.to_string().contains(&over), "{err}");
    }
    db.put(&w, b"k", b"v").unwrap();
    drop(db);
    let db = open(&fs, tiny());
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn regression_a_reversed_compaction_range_is_refused() {
    // `compact_range(z, a)` returned Ok having compacted nothing, where a reversed `delete_range` is refused.
    let fs = Arc::new(vfs::MemFs::new());
    let db = open(&fs, tiny());
    db.put(&WriteOptions::default(), b"k", b"v").unwrap();
    let err = db.compact_range(Some(b"z"), Some(b"a")).expect_err("a reversed range was taken");
    assert_eq!(err.kind(), "invalid", "{err}");
    db.compact_range(Some(b"a"), Some(b"a")).unwrap();
    db.compact_range(Some(b"a"), Some(b"z")).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn regression_a_value_over_64_mib_survives_a_flush() {
    // A table holds an entry in one block, and readers refused any block over 64 MiB (a guard against a damaged
    // length): a 70 MiB value was acknowledged, then reported as corruption once flushed, and its WAL was gone.
    // A key that long made the index and properties blocks too large as well. Plain blocks are now bounded by the
    // table's size; blocks over 64 MiB are never compressed (`format::tests`), as a compressed block's claimed
    // length keeps the cap.
    let big = |seed: u8| -> Vec<u8> { (0..(65 << 20) + 7).map(|i: usize| (i / 4096) as u8 ^ seed).collect() };
    let key: Vec<u8> = b"z".iter().copied().chain(big(1)).collect();
    let value = big(2);
    let fs = Arc::new(vfs::MemFs::new());
    let w = WriteOptions::default();
    let db = open(&fs, tiny());
    db.put(&w, b"a", b"small").unwrap();
    db.put(&w, b"b", &value).unwrap();
    db.put(&w, &key, b"long key").unwrap();
    db.flush().unwrap();
    let check = |db: &Db, when: &str| {
        assert!(db.get(b"b").unwrap() == Some(value.clone()), "{when}: the value");
        assert_eq!(db.get(&key).unwrap(), Some(b"long key".to_vec()), "{when}: the key");
        let mut it = db.iter(&ReadOptions::default()).unwrap();
        it.seek_to_first();
        let mut lens = Vec::new();
        while it.valid() {
            lens.push((it.key().len(), it.value().len()));
            it.next();
        }
        it.status().unwrap();
        assert_eq!(lens, vec![(1, 5), (1, value.len()), (key.len(), 8)], "{when}: a scan");
    };
    check(&db, "after the flush");
    db.compact_range(None, None).unwrap();
    check(&db, "after a compaction");
    drop(db);
    check(&open(&fs, tiny()), "after a reopen");
}

#[test]
fn regression_writes_never_stop_without_automatic_compactions() {
    // With automatic compactions off, writes stopped at `level0_stop_writes_trigger` L0 files and waited for a
    // compaction that never came: a bulk load that meant to compact at the end hung for ever. As in RocksDB,
    // the L0 count and the pending bytes no longer delay or stop writes then; `compact_range` cleans up.
    let fs = Arc::new(vfs::MemFs::new());
    let o = Options {
        disable_auto_compactions: true,
        level0_slowdown_writes_trigger: 3,
        level0_stop_writes_trigger: 4,
        ..tiny()
    };
    let db = Arc::new(open(&fs, o));
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            for flush in 0..12u32 {
                for i in 0..20u32 {
                    db.put(&WriteOptions::default(), format!("k{flush:02}{i:02}").as_bytes(), &[b'v'; 100])
                        .unwrap();
                }
                db.flush().unwrap();
            }
            tx.send(()).unwrap();
        })
    };
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("writes stopped for a compaction that never runs");
    writer.join().unwrap();
    let l0 = |db: &Db| db.files().iter().filter(|f| f.level == 0).count();
    assert!(l0(&db) >= 12, "every flush stays in L0: {}", l0(&db));
    db.compact_range(None, None).unwrap();
    assert_eq!(l0(&db), 0);
    for flush in 0..12u32 {
        assert_eq!(db.get(format!("k{flush:02}19").as_bytes()).unwrap(), Some(vec![b'v'; 100]));
    }
}
