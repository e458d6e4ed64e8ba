//! `Db::resume` beyond the fault matrix of faults.rs: writes that resume by themselves after a full disk (and
//! only then), corruption that never resumes, what a resume cleans up, and the range-delete index state a failed
//! edit carried.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lsm::{Db, Error, Options, ReadOptions, WriteOptions};
use vfs::{Fault, FaultFs, FaultKind, Op};

fn opts(auto_resume_interval: Option<Duration>) -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 4096,
        target_file_size_base: 4096,
        block_size: 256,
        disable_auto_compactions: true,
        auto_resume_interval,
        ..Options::default()
    }
}

fn open(auto: Option<Duration>) -> (Arc<dyn vfs::Fs>, Arc<FaultFs>, Db) {
    let mem: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let ffs = Arc::new(FaultFs::new(mem.clone()));
    let f: Arc<dyn vfs::Fs> = ffs.clone();
    let db = Db::open(f, "/db", opts(auto)).unwrap();
    (mem, ffs, db)
}

fn put_keys(db: &Db, range: std::ops::Range<u32>, tag: &str) {
    for i in range {
        db.put(&WriteOptions::default(), format!("k{i:03}").as_bytes(), tag.as_bytes()).unwrap();
    }
}

/// After ENOSPC a write tries the resume itself, at most once per interval; once space is back, the next write
/// after the interval goes through. After EIO writes wait for an explicit `resume` (a failing device should
/// not be written to again unasked).
#[test]
fn a_full_disk_resumes_by_itself_once_space_is_back_and_a_device_error_waits() {
    let interval = Duration::from_millis(200);
    for kind in [FaultKind::NoSpace, FaultKind::Eio] {
        let (_mem, ffs, db) = open(Some(interval));
        put_keys(&db, 0..100, "a");
        ffs.inject(Fault::after(Op::Write, 0, kind).on_paths(".sst").persistent());
        // Before the stop: every try of a resume comes after it.
        let stopped = Instant::now();
        let before = ffs.injected_on(Op::Write);
        let e = db.flush().unwrap_err();
        assert!(matches!(e, Error::Background(_)) && e.is_io(), "{kind:?}: {e}");
        // For ENOSPC a try comes at once, the flush thread's or this write's, and fails again: the flush still
        // cannot write its table. None comes for EIO.
        assert!(db.put(&WriteOptions::default(), b"x", b"1").is_err());
        std::thread::sleep(interval / 4);
        let after_first = ffs.injected_on(Op::Write);
        assert_eq!(
            after_first > before + 1,
            kind == FaultKind::NoSpace,
            "{kind:?}: whether a resume was tried"
        );
        assert!(db.put(&WriteOptions::default(), b"x", b"2").is_err());
        if stopped.elapsed() < interval {
            assert_eq!(ffs.injected_on(Op::Write), after_first, "{kind:?}: a second try within the interval");
        }
        ffs.clear_all();
        std::thread::sleep(interval);
        let r = db.put(&WriteOptions::default(), b"x", b"3");
        match kind {
            FaultKind::NoSpace => r.unwrap(),
            _ => {
                assert!(matches!(r, Err(Error::Background(_))), "{kind:?}: {r:?}");
                db.resume().unwrap();
                db.put(&WriteOptions::default(), b"x", b"3").unwrap();
            }
        }
        assert_eq!(db.stats().resumes, 1, "{kind:?}");
        assert!(db.background_error().is_none());
        assert_eq!(db.get(b"k050").unwrap().as_deref(), Some(&b"a"[..]));
        assert_eq!(db.get(b"x").unwrap().as_deref(), Some(&b"3"[..]));
        db.flush().unwrap();
    }
}

/// A database nobody writes to takes writes again by itself once space is back: the flush thread tries the
/// resume (as RocksDB recovers from a full disk in the background); a device error still waits.
#[test]
fn a_full_disk_resumes_without_any_write() {
    let interval = Duration::from_millis(100);
    for kind in [FaultKind::NoSpace, FaultKind::Eio] {
        let (_mem, ffs, db) = open(Some(interval));
        put_keys(&db, 0..100, "a");
        ffs.inject(Fault::after(Op::Write, 0, kind).on_paths(".sst").persistent());
        assert!(db.flush().is_err());
        ffs.clear_all();
        // Ten intervals are enough to see that a device error waits.
        let wait = if kind == FaultKind::Eio { interval * 10 } else { Duration::from_secs(10) };
        testkit::wait_while(wait, interval / 2, || db.background_error().is_some());
        if kind == FaultKind::Eio {
            assert!(db.background_error().is_some(), "a device error resumed by itself");
            assert_eq!(db.stats().resumes, 0);
            continue;
        }
        assert!(db.background_error().is_none(), "no resume within 10 s");
        assert_eq!(db.stats().resumes, 1);
        assert_eq!(db.get(b"k050").unwrap().as_deref(), Some(&b"a"[..]));
        db.put(&WriteOptions::default(), b"x", b"1").unwrap();
        db.flush().unwrap();
        db.close().unwrap();
    }
}

/// A stop for corruption does not resume: the damaged table is still there, so `resume` returns the background
/// error and writes stay stopped.
#[test]
fn corruption_is_never_resumed() {
    let (mem, _ffs, db) = open(None);
    put_keys(&db, 0..100, "a");
    db.flush().unwrap();
    put_keys(&db, 0..100, "b");
    db.flush().unwrap();
    let victim = db.files()[0].info.number;
    let path = std::path::Path::new("/db").join(format!("{victim:06}.sst"));
    let f = mem.open(&path, vfs::OpenMode::ReadWrite).unwrap();
    let mut byte = [0u8; 1];
    f.read_exact_at(&mut byte, 10).unwrap();
    f.write_all_at(&[byte[0] ^ 0x40], 10).unwrap();
    let e = db.compact_range(None, None).unwrap_err();
    assert!(e.is_corruption(), "{e}");
    let r = db.resume().unwrap_err();
    assert!(matches!(r, Error::Background(_)) && r.is_corruption(), "{r}");
    assert!(db.put(&WriteOptions::default(), b"x", b"y").is_err());
    assert_eq!(db.stats().resumes, 0);
}

/// A flush whose MANIFEST sync failed leaves its table on disk (the old MANIFEST may name it). The resume's new
/// MANIFEST makes that moot, so the resume deletes it: afterwards the directory holds the live tables only.
#[test]
fn a_resume_deletes_the_tables_of_failed_edits() {
    let (mem, ffs, db) = open(None);
    put_keys(&db, 0..100, "a");
    ffs.inject(Fault::after(Op::Sync, 0, FaultKind::Eio).on_paths("MANIFEST"));
    assert!(db.flush().is_err());
    ffs.clear_all();
    db.resume().unwrap();
    let on_disk: BTreeSet<u64> = mem
        .list_dir(std::path::Path::new("/db"))
        .unwrap()
        .iter()
        .filter_map(|n| n.strip_suffix(".sst").and_then(|n| n.parse().ok()))
        .collect();
    let live: BTreeSet<u64> = db.files().iter().map(|f| f.info.number).collect();
    assert_eq!(on_disk, live);
    assert!(!live.is_empty());
    assert_eq!(db.get(b"k010").unwrap().as_deref(), Some(&b"a"[..]));
}

/// Regression: a flush wrote the global index's buffer to a new DR-tree file and took its state for the edit,
/// whose MANIFEST sync then failed. The index then believed its state recorded, so the resume's edits carried
/// none: the next open loaded the older state, deleted the new file as unreferenced, and the range delete, whose
/// WAL the resume had retired, was gone (the deleted keys came back).
#[test]
fn regression_a_resume_records_the_index_state_a_failed_edit_carried() {
    let global: Arc<dyn lsm::RangeDeleteStrategy> = Arc::new(lsm::GlobalRangeDeletes::new());
    let o = Options { range_delete_strategy: global, ..opts(None) };
    let mem: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let ffs = Arc::new(FaultFs::new(mem.clone()));
    let f: Arc<dyn vfs::Fs> = ffs.clone();
    let db = Db::open(f, "/db", o.clone()).unwrap();
    put_keys(&db, 0..100, "a");
    db.flush().unwrap();
    db.delete_range(&WriteOptions::default(), b"k010", b"k050").unwrap();
    put_keys(&db, 100..110, "b");
    ffs.inject(Fault::after(Op::Sync, 0, FaultKind::Eio).on_paths("MANIFEST"));
    assert!(db.flush().is_err());
    ffs.clear_all();
    db.resume().unwrap();
    assert_eq!(db.get(b"k020").unwrap(), None);
    db.close().unwrap();
    let db = Db::open(mem, "/db", o).unwrap();
    assert_eq!(db.get(b"k020").unwrap(), None, "the range delete came back after the reopen");
    let n = db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap().len();
    assert_eq!(n, 100 - 40 + 10);
}

/// Writers on their own keys, a reader, and a disk that runs out of space at random (flushes, compactions, WAL
/// appends): a write that fails is retried, the writes themselves resume the database, and nothing hangs. The
/// final state is exactly the acknowledged writes, also after a reopen. A failed write is never applied, so the
/// retried value is the only one.
#[test]
fn writers_beside_each_other_resume_a_database_whose_disk_fills_at_random() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for global in [false, true] {
            writers_on_a_disk_that_fills_at_random(global);
        }
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(300)).expect("hung: writers never finished");
}

fn writers_on_a_disk_that_fills_at_random(global: bool) {
    let mem: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let ffs = Arc::new(FaultFs::new(mem.clone()));
    let f: Arc<dyn vfs::Fs> = ffs.clone();
    let strategy: Arc<dyn lsm::RangeDeleteStrategy> =
        if global { Arc::new(lsm::GlobalRangeDeletes::new()) } else { Arc::new(lsm::LocalTombstones) };
    let o = Options {
        range_delete_strategy: strategy,
        disable_auto_compactions: false,
        level0_file_num_compaction_trigger: 2,
        max_bytes_for_level_base: 16 << 10,
        ..opts(Some(Duration::from_millis(1)))
    };
    let db = Arc::new(Db::open(f, "/db", o.clone()).unwrap());
    ffs.inject(Fault::random(Op::Write, 0.003, 7, FaultKind::NoSpace));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let got = db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap();
                assert!(got.windows(2).all(|w| w[0].0 < w[1].0));
            }
        })
    };
    let writers: Vec<_> = (0..3)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut failures = 0u32;
                for i in 0..400u32 {
                    let (k, v) = (format!("w{t}-{:03}", i % 150), format!("v{i}"));
                    while db.put(&WriteOptions { sync: i % 50 == 0 }, k.as_bytes(), v.as_bytes()).is_err() {
                        failures += 1;
                        assert!(failures < 100_000, "writer {t} never got through");
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                failures
            })
        })
        .collect();
    let failures: u32 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.join().unwrap();
    ffs.clear_all();
    db.resume().unwrap();
    let want: BTreeSet<(Vec<u8>, Vec<u8>)> = (0..3)
        .flat_map(|t| {
            (250..400u32)
                .map(move |i| (format!("w{t}-{:03}", i % 150).into_bytes(), format!("v{i}").into_bytes()))
        })
        .collect();
    let got: BTreeSet<(Vec<u8>, Vec<u8>)> =
        db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap().into_iter().collect();
    assert_eq!(got, want, "global {global}");
    assert!(
        failures > 0 && db.stats().resumes > 0,
        "global {global}: the disk never filled ({failures} failures)"
    );
    let db = Arc::try_unwrap(db).unwrap();
    db.close().unwrap();
    let db = Db::open(mem, "/db", o).unwrap();
    let got: BTreeSet<(Vec<u8>, Vec<u8>)> =
        db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap().into_iter().collect();
    assert_eq!(got, want, "global {global}: after reopen");
}
