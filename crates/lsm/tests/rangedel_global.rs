//! The `global` range-delete strategy (GLORAN) in the engine: the lookup path never touches the index for an
//! absent key, snapshots that straddle range deletes, reverse iteration, GC, and refusing to open a database
//! with the other strategy. The randomized model, crash and fault tests run under both strategies in their own
//! files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lsm::{Db, GlobalRangeDeletes, Options, ReadOptions, WriteOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn global_opts() -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 4096,
        max_bytes_for_level_base: 16384,
        target_file_size_base: 4096,
        block_size: 256,
        level0_file_num_compaction_trigger: 2,
        range_delete_strategy: Arc::new(GlobalRangeDeletes::with_options(gloran::IndexOptions {
            buffer_bytes: 1024,
            size_ratio: 3,
            node_size: 256,
            ..Default::default()
        })),
        ..Options::default()
    }
}

fn local_opts() -> Options {
    Options { range_delete_strategy: Arc::new(lsm::LocalTombstones), ..global_opts() }
}

fn k(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn open(fs: &Arc<vfs::MemFs>, o: &Options) -> Db {
    let f: Arc<dyn vfs::Fs> = fs.clone();
    Db::open(f, "/db", o.clone()).unwrap()
}

fn delete_range(db: &Db, m: &mut Model, a: u32, b: u32) {
    db.delete_range(&WriteOptions::default(), &k(a), &k(b)).unwrap();
    let ks: Vec<_> = m.range(k(a)..k(b)).map(|(k, _)| k.clone()).collect();
    for key in ks {
        m.remove(&key);
    }
}

fn all(db: &Db, ro: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.scan(ro, b"", b"\xff", usize::MAX).unwrap()
}

fn rall(db: &Db, ro: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut r = db.rscan(ro, b"", b"\xff", usize::MAX).unwrap();
    r.reverse();
    r
}

fn pairs(m: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[test]
fn lookup_of_an_absent_key_never_touches_the_global_index() {
    let fs = Arc::new(vfs::MemFs::new());
    let db = open(&fs, &global_opts());
    let w = WriteOptions::default();
    for i in (0..2000).step_by(2) {
        db.put(&w, &k(i), b"v").unwrap();
    }
    let mut m = Model::new();
    for i in (0..2000).step_by(20) {
        delete_range(&db, &mut m, i, i + 7);
    }
    db.flush().unwrap();
    let before = db.stats().range_delete_global.expect("global stats");
    assert!(before.records_inserted >= 100 && before.flushes > 0, "{before:?}");
    // Odd keys were never written, inside deleted ranges or not.
    for i in (1..2000).step_by(2) {
        assert_eq!(db.get(&k(i)).unwrap(), None);
    }
    let after = db.stats().range_delete_global.unwrap();
    assert_eq!(after.lookups, before.lookups, "an absent key reached the index");
    assert_eq!(after.estimator_checks, before.estimator_checks);
    assert_eq!(after.index_probes, before.index_probes);
    assert_eq!(after.nodes_read, before.nodes_read);
    // A key that exists is checked once per lookup; a deleted one is found covered.
    assert_eq!(db.get(&k(10)).unwrap(), Some(b"v".to_vec()));
    assert_eq!(db.get(&k(4)).unwrap(), None);
    let last = db.stats().range_delete_global.unwrap();
    assert_eq!(last.lookups, before.lookups + 2);
    assert!(last.covered > after.covered, "{last:?}");
    // Point tombstones and local tombstones are not involved at all.
    let st = db.stats();
    assert_eq!(st.table_range_tombstones, 0);
    assert_eq!(st.range_tombstones_consulted, 0);
}

/// A key deleted since the last flush is answered from the index's in-memory buffer without searching the
/// tables, as a memtable tombstone answers a local lookup; older snapshots, newer writes and absent keys are
/// not affected, and once the records are flushed the lookup takes the paper's path again.
#[test]
fn lookup_of_a_key_deleted_since_the_last_flush_skips_the_tables() {
    let o = Options {
        write_buffer_size: 1 << 20,
        range_delete_strategy: Arc::new(GlobalRangeDeletes::with_options(gloran::IndexOptions {
            buffer_bytes: 1 << 20,
            ..Default::default()
        })),
        ..global_opts()
    };
    let fs = Arc::new(vfs::MemFs::new());
    let db = open(&fs, &o);
    let w = WriteOptions::default();
    for i in (0..1000).step_by(2) {
        db.put(&w, &k(i), b"old").unwrap();
    }
    db.flush().unwrap();
    let before_delete = db.snapshot();
    db.delete_range(&w, &k(100), &k(200)).unwrap();
    let g = || db.stats().range_delete_global.unwrap();
    let s0 = g();
    assert_eq!(db.get(&k(150)).unwrap(), None);
    let s1 = g();
    assert_eq!(s1.span_hits, s0.span_hits + 1, "{s1:?}");
    assert_eq!((s1.lookups, s1.index_probes), (s0.lookups, s0.index_probes), "the tables were searched");
    // A reader from before the delete still sees the table's version.
    let ro = ReadOptions { snapshot: Some(&before_delete), ..Default::default() };
    assert_eq!(db.get_opt(&ro, &k(150)).unwrap(), Some(b"old".to_vec()));
    // A write after the delete, and a key outside it, are found.
    db.put(&w, &k(160), b"new").unwrap();
    assert_eq!(db.get(&k(160)).unwrap(), Some(b"new".to_vec()));
    assert_eq!(db.get(&k(300)).unwrap(), Some(b"old".to_vec()));
    // Absent keys mostly stop at the tables' filters, before the strategy is asked.
    let s2 = g();
    for i in (1..1000).step_by(2) {
        assert_eq!(db.get(&k(i)).unwrap(), None);
    }
    let s3 = g();
    assert!(s3.span_checks - s2.span_checks <= 25, "{s2:?} {s3:?}");
    assert_eq!((s3.lookups, s3.index_probes), (s2.lookups, s2.index_probes));
    // Flushed, the records leave the buffer: the lookup finds the table's entry and the index says covered.
    db.flush().unwrap();
    let s4 = g();
    assert_eq!(db.get(&k(150)).unwrap(), None);
    assert_eq!(db.get(&k(160)).unwrap(), Some(b"new".to_vec()));
    let s5 = g();
    assert_eq!(s5.span_hits, s4.span_hits);
    // At least once: the index GC that may follow the flush in the background moves the index's generation, and a
    // lookup at an implicit snapshot that sees it move starts over (counted again).
    assert!(s5.covered > s4.covered, "{s5:?}");
    drop(before_delete);
}

/// Snapshots taken between overlapping range deletes, held across flushes, index flushes and compactions, each
/// see exactly their own state, forward and backward and by point lookups — under both strategies.
#[test]
fn snapshots_straddling_range_deletes_see_their_own_state() {
    for o in [global_opts(), local_opts()] {
        let name = o.range_delete_strategy.name();
        let fs = Arc::new(vfs::MemFs::new());
        let db = open(&fs, &o);
        let w = WriteOptions::default();
        let mut m = Model::new();
        let mut snaps = Vec::new();
        for round in 0..6u32 {
            for i in 0..300 {
                let key = k((i * 7 + round * 13) % 400);
                let v = format!("r{round}i{i}").into_bytes();
                db.put(&w, &key, &v).unwrap();
                m.insert(key, v);
            }
            snaps.push((db.snapshot(), m.clone()));
            // Overlapping deletes of every shape: nested, overlapping the previous round's, adjacent.
            let a = (round * 37) % 300;
            delete_range(&db, &mut m, a, a + 60);
            delete_range(&db, &mut m, a + 20, a + 30);
            delete_range(&db, &mut m, a + 50, a + 90);
            delete_range(&db, &mut m, a + 90, a + 95);
            snaps.push((db.snapshot(), m.clone()));
            for i in a + 10..a + 40 {
                db.put(&w, &k(i), b"back").unwrap();
                m.insert(k(i), b"back".to_vec());
            }
            snaps.push((db.snapshot(), m.clone()));
            match round % 3 {
                0 => db.flush().unwrap(),
                1 => db.compact_range(None, None).unwrap(),
                _ => {}
            }
        }
        db.compact_range(None, None).unwrap();
        for (j, (s, sm)) in snaps.iter().enumerate() {
            let ro = ReadOptions { snapshot: Some(s), ..Default::default() };
            assert_eq!(all(&db, &ro), pairs(sm), "{name} snapshot {j} forward");
            assert_eq!(rall(&db, &ro), pairs(sm), "{name} snapshot {j} reverse");
            for i in (0..420).step_by(3) {
                assert_eq!(
                    db.get_opt(&ro, &k(i)).unwrap(),
                    sm.get(&k(i)).cloned(),
                    "{name} snapshot {j} get {i}"
                );
            }
        }
        assert_eq!(all(&db, &ReadOptions::default()), pairs(&m), "{name} latest");
        drop(snaps);
        db.compact_range(None, None).unwrap();
        assert_eq!(rall(&db, &ReadOptions::default()), pairs(&m), "{name} latest after compaction");
    }
}

#[test]
fn reverse_iteration_and_direction_changes_skip_covered_entries() {
    let fs = Arc::new(vfs::MemFs::new());
    let db = open(&fs, &global_opts());
    let w = WriteOptions::default();
    let mut m = Model::new();
    for i in 0..1000 {
        db.put(&w, &k(i), format!("v{i}").as_bytes()).unwrap();
        m.insert(k(i), format!("v{i}").into_bytes());
    }
    db.flush().unwrap();
    for i in (0..1000).step_by(50) {
        delete_range(&db, &mut m, i + 5, i + 30);
    }
    // Some covered keys come back, newer than the deletes.
    for i in (0..1000).step_by(50) {
        db.put(&w, &k(i + 10), b"new").unwrap();
        m.insert(k(i + 10), b"new".to_vec());
    }
    for step in 0..3 {
        assert_eq!(rall(&db, &ReadOptions::default()), pairs(&m), "step {step} reverse");
        // Bounded reverse scans that start inside a deleted range.
        let (lo, hi) = (k(107), k(333));
        let mut got = db.rscan(&ReadOptions::default(), &lo, &hi, usize::MAX).unwrap();
        got.reverse();
        let want: Vec<_> = m.range(lo.clone()..hi.clone()).map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(got, want, "step {step} bounded reverse");
        // A walk that turns around, repositioning the cover both ways.
        let keys: Vec<_> = m.keys().cloned().collect();
        let mut it = db.iter(&ReadOptions::default()).unwrap();
        it.seek(&k(500));
        let mut pos = keys.partition_point(|x| x < &k(500));
        for t in 0..200 {
            assert!(it.valid());
            assert_eq!(it.key(), keys[pos].as_slice(), "step {step} walk {t}");
            if (t / 7) % 2 == 0 && pos + 1 < keys.len() {
                it.next();
                pos += 1;
            } else if pos > 0 {
                it.prev();
                pos -= 1;
            }
        }
        it.status().unwrap();
        match step {
            0 => db.flush().unwrap(),
            _ => db.compact_range(None, None).unwrap(),
        }
    }
}

/// GC (§4.4): once every entry a range record could cover is gone, a bottommost compaction lets the index drop
/// the record; the watermark survives a reopen.
#[test]
fn gc_after_bottommost_compaction_drops_dead_records_and_survives_reopen() {
    let fs = Arc::new(vfs::MemFs::new());
    let o = global_opts();
    let db = open(&fs, &o);
    let w = WriteOptions::default();
    let mut m = Model::new();
    for i in 0..500 {
        db.put(&w, &k(i), b"old").unwrap();
        m.insert(k(i), b"old".to_vec());
    }
    for i in (0..500).step_by(25) {
        delete_range(&db, &mut m, i, i + 10);
    }
    // Every surviving key is rewritten after the deletes, so no entry older than them remains once compacted.
    for (key, v) in m.iter_mut() {
        db.put(&w, key, b"new").unwrap();
        *v = b"new".to_vec();
    }
    db.compact_range(None, None).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let g = db.stats().range_delete_global.unwrap();
        if g.gc_runs > 0 && g.index_file_bytes == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "GC did not run: {g:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(all(&db, &ReadOptions::default()), pairs(&m));
    // New deletes still delete old entries after GC.
    delete_range(&db, &mut m, 100, 200);
    assert_eq!(db.get(&k(150)).unwrap(), None);
    db.close().unwrap();
    let db = open(&fs, &o);
    assert_eq!(all(&db, &ReadOptions::default()), pairs(&m));
    assert_eq!(rall(&db, &ReadOptions::default()), pairs(&m));
    assert!(db.stats().range_delete_global.unwrap().level_areas.iter().sum::<u64>() > 0);
}

/// A GC planned while a reader is open waits for it, and runs once it has finished, with no write to wake the
/// flush thread: the last pin's release does (the thread's idle poll is 500 ms). The printed delay is context,
/// not a check.
#[test]
fn gc_waits_for_an_open_reader_and_runs_when_it_finishes() {
    let fs = Arc::new(vfs::MemFs::new());
    let db = open(&fs, &global_opts());
    let w = WriteOptions::default();
    for i in 0..100 {
        db.put(&w, &k(i), b"old").unwrap();
    }
    db.delete_range(&w, &k(0), &k(100)).unwrap();
    // A key outside the range, so the compaction leaves a table and plans a GC.
    db.put(&w, &k(200), b"new").unwrap();
    let reader = db.iter(&ReadOptions::default()).unwrap();
    db.compact_range(None, None).unwrap();
    db.flush().unwrap();
    let gc_runs = || db.stats().range_delete_global.unwrap().gc_runs;
    assert_eq!(gc_runs(), 0, "GC ran while a reader older than its decision was open");
    let released = Instant::now();
    drop(reader);
    assert!(
        !testkit::wait_while(Duration::from_secs(20), Duration::from_millis(1), || gc_runs() == 0),
        "GC never ran after the reader finished"
    );
    eprintln!("GC ran {:?} after the reader finished", released.elapsed());
    assert_eq!(db.stats().range_delete_global.unwrap().index_file_bytes, 0);
    assert_eq!(db.get(&k(5)).unwrap(), None);
}

/// GC's watermark is global, so one range of old, never-updated keys held it below every record and no record
/// was ever dropped, however empty its own keys became. GC now also drops whole bottom-level areas whose keys
/// and sequence band no table holds (§4.4: "all entries it matches have been removed").
#[test]
fn regression_old_data_elsewhere_no_longer_keeps_dead_records() {
    let fs = Arc::new(vfs::MemFs::new());
    // A memtable that holds the hot keys and their deletes together, so its flush drops what they cover.
    let o = Options { write_buffer_size: 1 << 20, ..global_opts() };
    let db = open(&fs, &o);
    let w = WriteOptions::default();
    let mut m = Model::new();
    for i in 5000..5400 {
        db.put(&w, &k(i), b"cold").unwrap();
        m.insert(k(i), b"cold".to_vec());
    }
    db.compact_range(None, None).unwrap();
    for i in 0..600 {
        db.put(&w, &k(i), b"hot").unwrap();
        m.insert(k(i), b"hot".to_vec());
    }
    // Dropped prefixes, the range delete's typical use: the flush drops the entries they cover, so no table
    // holds a key of them (a table moved down whole keeps covered entries until it is next compacted).
    for i in (0..300).step_by(100) {
        delete_range(&db, &mut m, i, i + 100);
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let g = db.stats().range_delete_global.unwrap();
        if g.gc_areas_dropped > 0 {
            // The watermark stayed at or below the cold data's sequence numbers: this was the purge.
            assert!(db.stats().range_delete_global.unwrap().level_areas.iter().sum::<u64>() < 3, "{g:?}");
            break;
        }
        assert!(Instant::now() < deadline, "no dead record was dropped: {g:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(all(&db, &ReadOptions::default()), pairs(&m));
    // A new delete over the purged keys and the cold ones still deletes, and the state survives a reopen.
    for i in 100..200 {
        db.put(&w, &k(i), b"back").unwrap();
        m.insert(k(i), b"back".to_vec());
    }
    delete_range(&db, &mut m, 150, 5200);
    assert_eq!(db.get(&k(5100)).unwrap(), None);
    db.close().unwrap();
    let db = open(&fs, &o);
    assert_eq!(all(&db, &ReadOptions::default()), pairs(&m));
    assert_eq!(rall(&db, &ReadOptions::default()), pairs(&m));
}

#[test]
fn a_database_refuses_the_other_strategy() {
    let fs = Arc::new(vfs::MemFs::new());
    {
        let db = open(&fs, &global_opts());
        db.delete_range(&WriteOptions::default(), b"a", b"b").unwrap();
    }
    let f: Arc<dyn vfs::Fs> = fs.clone();
    let e = Db::open(f, "/db", local_opts()).unwrap_err();
    assert_eq!(e.kind(), "invalid", "{e}");

    let fs = Arc::new(vfs::MemFs::new());
    {
        let db = open(&fs, &local_opts());
        db.put(&WriteOptions::default(), b"a0", b"v").unwrap();
        db.delete_range(&WriteOptions::default(), b"a", b"b").unwrap();
        db.flush().unwrap();
    }
    let f: Arc<dyn vfs::Fs> = fs.clone();
    let e = Db::open(f, "/db", global_opts()).unwrap_err();
    assert_eq!(e.kind(), "invalid", "{e}");
}

#[test]
fn one_options_value_opens_independent_databases() {
    let o = global_opts();
    let (fa, fb) = (Arc::new(vfs::MemFs::new()), Arc::new(vfs::MemFs::new()));
    let a = open(&fa, &o);
    let b = open(&fb, &o);
    a.put(&WriteOptions::default(), b"x", b"1").unwrap();
    b.put(&WriteOptions::default(), b"x", b"1").unwrap();
    a.delete_range(&WriteOptions::default(), b"a", b"z").unwrap();
    assert_eq!(a.get(b"x").unwrap(), None);
    assert_eq!(b.get(b"x").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn oversized_range_delete_keys_are_rejected_before_the_wal() {
    let fs = Arc::new(vfs::MemFs::new());
    let db = open(&fs, &global_opts());
    let big = vec![b'a'; gloran::MAX_KEY_LEN + 1];
    let e = db.delete_range(&WriteOptions::default(), b"a", &big).unwrap_err();
    assert_eq!(e.kind(), "invalid");
    db.put(&WriteOptions { sync: true }, b"k", b"v").unwrap();
    drop(db);
    let db = open(&fs, &global_opts());
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// Bit flips in the index's DR-tree files, and a missing one, are reported as corruption (at open, which rebuilds
/// the estimator from every leaf, or at the read that meets them), never as a wrong answer.
#[test]
fn damaged_or_missing_index_files_are_corruption() {
    use vfs::{Fs, OpenMode};
    let fs = Arc::new(vfs::MemFs::new());
    // No automatic compaction and no manual one: no GC, so reopening rewrites no index file.
    let o = Options { disable_auto_compactions: true, ..global_opts() };
    let mut m = Model::new();
    {
        let db = open(&fs, &o);
        for i in 0..600 {
            db.put(&WriteOptions::default(), &k(i), b"v").unwrap();
            m.insert(k(i), b"v".to_vec());
        }
        for i in (0..600).step_by(9) {
            delete_range(&db, &mut m, i, i + 4);
        }
        db.flush().unwrap();
    }
    let dir = std::path::Path::new("/db/gloran");
    let files: Vec<String> = fs.list_dir(dir).unwrap().into_iter().filter(|n| n.ends_with(".drt")).collect();
    assert!(!files.is_empty());
    let read = |fs: &Arc<vfs::MemFs>| -> lsm::Result<Model> {
        let f: Arc<dyn vfs::Fs> = fs.clone();
        let db = Db::open(f, "/db", o.clone())?;
        let got: Model = db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX)?.into_iter().collect();
        for i in 0..610 {
            db.get(&k(i))?;
        }
        Ok(got)
    };
    assert_eq!(read(&fs).unwrap(), m);
    let flip = |name: &str, pos: u64| {
        let f = fs.open(&dir.join(name), OpenMode::ReadWrite).unwrap();
        let mut b = [0u8];
        f.read_exact_at(&mut b, pos).unwrap();
        b[0] ^= 1 << (pos % 8);
        f.write_all_at(&b, pos).unwrap();
    };
    let mut detected = 0;
    for name in &files {
        let len = fs.open(&dir.join(name), OpenMode::ReadOnly).unwrap().len().unwrap();
        for pos in (0..len).step_by((len as usize / 60).max(1)) {
            flip(name, pos);
            match read(&fs) {
                Ok(got) => assert_eq!(got, m, "flip in {name} at {pos} gave a wrong answer"),
                Err(e) => {
                    assert!(e.is_corruption(), "flip in {name} at {pos}: {e} is not corruption");
                    detected += 1;
                }
            }
            flip(name, pos);
        }
    }
    assert!(detected > 0);
    fs.remove_file(&dir.join(&files[0])).unwrap();
    let e = read(&fs).unwrap_err();
    assert!(e.is_corruption(), "{e}");
}

/// Point-in-time recovery drops the WAL records from the damage on. Under GLORAN an index flush may already have
/// written range records from that part of the WAL to a DR-tree file; dropping their WAL records would keep those
/// deletes but not the writes logged before them, a state no prefix of the writes has. Such a salvage is refused.
#[test]
fn point_in_time_recovery_refuses_to_drop_range_records_the_index_holds() {
    let o = Options { write_buffer_size: 1 << 20, ..global_opts() };
    let cfs = Arc::new(vfs::CrashFs::new());
    let f: Arc<dyn vfs::Fs> = cfs.clone();
    let db = Db::open(f, "/db", o.clone()).unwrap();
    let w = WriteOptions::default();
    for i in 0..200 {
        db.put(&w, &k(i), b"value").unwrap();
    }
    // Enough range records to fill the index buffer (1 KiB): the index flushes them to a file while their WAL,
    // whose memtable is not full, stays.
    for i in 0..100 {
        db.delete_range(&w, &k(1000 + 2 * i), &k(1001 + 2 * i)).unwrap();
    }
    db.put(&WriteOptions { sync: true }, b"last", b"value").unwrap();
    // Wait until the index flush is durable: the MANIFEST edit naming its file comes after the file itself.
    let dir = std::path::Path::new("/db");
    let deadline = Instant::now() + Duration::from_secs(20);
    let crashed = loop {
        let c = cfs.crash_drop_unsynced();
        if manifest_names_index_files(&c, dir) {
            break c;
        }
        assert!(Instant::now() < deadline, "the index flush never reached the MANIFEST");
        std::thread::sleep(Duration::from_millis(5));
    };
    drop(db);
    let wal = vfs::Fs::list_dir(&crashed, dir)
        .unwrap()
        .into_iter()
        .filter(|n| matches!(lsm::filename::parse(n), Some(lsm::filename::FileKind::Log(_))))
        .max()
        .unwrap();
    // Damage among the puts, before every range record.
    let file = vfs::Fs::open(&crashed, &dir.join(&wal), vfs::OpenMode::ReadWrite).unwrap();
    let mut b = [0u8; 1];
    file.read_exact_at(&mut b, 300).unwrap();
    file.write_all_at(&[b[0] ^ 0x10], 300).unwrap();
    file.sync_data().unwrap();
    let fs: Arc<dyn vfs::Fs> = Arc::new(crashed);
    let salvage = Options { create_if_missing: false, wal_recovery: lsm::WalRecovery::PointInTime, ..o };
    let Err(e) = Db::open(fs, "/db", salvage) else { panic!("the salvage was not refused") };
    assert!(e.is_corruption() && e.to_string().contains("range-delete index already holds"), "{e}");
}

/// Whether the durable MANIFEST of the database in `dir` names a range-index file.
fn manifest_names_index_files(fs: &dyn vfs::Fs, dir: &std::path::Path) -> bool {
    let Ok(current) = vfs::read_all(fs, &dir.join("CURRENT")) else { return false };
    let name = String::from_utf8_lossy(&current).trim().to_string();
    let Ok(mut r) = lsm::wal::LogReader::open(fs, &dir.join(&name), &name) else { return false };
    let mut named = false;
    while let Some(rec) = r.next_record() {
        if let Ok(e) = lsm::edit::VersionEdit::decode(rec)
            && let Some(state) = e.range_index
        {
            named = !state.files.is_empty();
        }
    }
    named
}
