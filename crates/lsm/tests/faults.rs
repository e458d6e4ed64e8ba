//! EIO and ENOSPC during flush and compaction (`FaultFs`): writes stop with a typed background error, reads keep
//! working and see every acknowledged write, and after the fault clears a reopen recovers everything. (Resuming
//! without a reopen: resume.rs.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use lsm::{Db, Error, Options, ReadOptions, WriteOptions};
use vfs::{Fault, FaultFs, FaultKind, Op};

/// `global`: range deletes in GLORAN's index (small buffer, so index files are written inside the fault window).
fn opts(global: bool) -> Options {
    let range_delete_strategy: Arc<dyn lsm::RangeDeleteStrategy> = if global {
        Arc::new(lsm::GlobalRangeDeletes::with_options(gloran::IndexOptions {
            buffer_bytes: 512,
            size_ratio: 2,
            node_size: 256,
            ..Default::default()
        }))
    } else {
        Arc::new(lsm::LocalTombstones)
    };
    Options {
        range_delete_strategy,
        create_if_missing: true,
        write_buffer_size: 4096,
        max_bytes_for_level_base: 16384,
        target_file_size_base: 4096,
        block_size: 256,
        level0_file_num_compaction_trigger: 2,
        // These tests check the stop itself; a write resuming after ENOSPC is tested in resume.rs.
        auto_resume_interval: None,
        ..Options::default()
    }
}

/// Deletes `[key(i), key(i + 5))` every 40th step (both strategies see range deletes in the fault window).
fn maybe_range_delete(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, i: u32) -> lsm::Result<()> {
    if i % 40 != 39 {
        return Ok(());
    }
    let (a, b) = (
        format!("key{:04}", (i * 11) % 500).into_bytes(),
        format!("key{:04}", (i * 11) % 500 + 5).into_bytes(),
    );
    db.delete_range(&WriteOptions::default(), &a, &b)?;
    let ks: Vec<_> = model.range(a..b).map(|(k, _)| k.clone()).collect();
    for k in ks {
        model.remove(&k);
    }
    Ok(())
}

/// What follows the stop once the fault clears.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Then {
    /// A reopen on the raw file system.
    Reopen,
    /// `Db::resume` on the open database (tried first while the fault is still armed), more writes, then a
    /// reopen.
    Resume,
}

/// Puts `key((i * 13) % 500) = v{i}` for `i` in `from..to`, with a range delete every 40th and a flush every 500th.
fn write_more(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, from: u32, to: u32) -> lsm::Result<()> {
    for i in from..to {
        let k = format!("key{:04}", (i * 13) % 500).into_bytes();
        let v = format!("v{i}").into_bytes();
        db.put(&WriteOptions::default(), &k, &v)?;
        model.insert(k, v);
        maybe_range_delete(db, model, i)?;
        if i % 500 == 499 {
            db.flush()?;
        }
    }
    Ok(())
}

fn scan_all(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap().into_iter().collect()
}

fn run(fault: Fault, label: &str, preload: u32, global: bool, then: Then) {
    let label = &format!("{label} (global {global}, {then:?})");
    let mem: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let ffs = Arc::new(FaultFs::new(mem.clone()));
    let f: Arc<dyn vfs::Fs> = ffs.clone();
    let db = Db::open(f, "/db", opts(global)).unwrap();
    let w = WriteOptions::default();
    let mut model = BTreeMap::new();
    // Some data on disk first (flushes and compactions succeed), then the fault.
    for i in 0..preload {
        let k = format!("key{:04}", (i * 37) % 500).into_bytes();
        db.put(&w, &k, format!("pre{i}").as_bytes()).unwrap();
        model.insert(k, format!("pre{i}").into_bytes());
        maybe_range_delete(&db, &mut model, i).unwrap();
    }
    db.flush().unwrap();
    ffs.inject(fault);
    // Up to 20,000 writes with a flush every 500, so enough tables are written to reach the fault however the
    // background threads are scheduled. Regression: with 5,000 writes and no flushes a quarter of the runs with
    // the global strategy wrote fewer than the 40 tables the compaction fault waits for, and failed.
    let stopped = write_more(&db, &mut model, 0, 20_000).err();
    let e = stopped.unwrap_or_else(|| panic!("{label}: writes never stopped"));
    // The write that met a failed WAL append gets the I/O error itself; writes after a failed flush or compaction
    // get the background error. Either way the error is typed as I/O, and every later write fails.
    assert!(e.is_io(), "{label}: {e} is not an I/O error");
    assert!(db.background_error().is_some());
    let later = db.put(&w, b"x", b"y").unwrap_err();
    assert!(matches!(later, Error::Background(_)) && later.is_io(), "{label}: {later}");
    let got: BTreeMap<_, _> =
        db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap().into_iter().collect();
    assert_eq!(got, model, "{label}: reads after the fault");
    for (k, v) in model.iter().take(50) {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{label}");
    }
    if then == Then::Resume {
        // Still armed: the resume fails with a typed error and writes stay stopped, or it gets through (the
        // fault is on a file it does not need) and a later write may meet the fault again.
        if let Err(e) = db.resume() {
            assert!(e.is_io(), "{label}: resume under the fault: {e}");
            assert!(db.put(&w, b"x", b"y").is_err(), "{label}: a failed resume let writes through");
        }
        ffs.clear_all();
        // A job the first resume let run may have met the fault and report it only now, after a resume that
        // found nothing to do: that is a new stop, and the next resume clears it. Regression: the test took the
        // first clean resume as the end of every failure and failed once in a few hundred runs.
        for attempt in 0.. {
            db.resume().unwrap_or_else(|e| panic!("{label}: resume after the fault cleared: {e}"));
            match db.wait_for_compactions() {
                Ok(()) => break,
                Err(e) if attempt < 3 && e.is_io() => continue,
                Err(e) => panic!("{label}: background work after the resume: {e}"),
            }
        }
        assert!(db.background_error().is_none(), "{label}");
        assert!(db.stats().resumes >= 1, "{label}");
        assert_eq!(scan_all(&db), model, "{label}: reads after the resume");
        write_more(&db, &mut model, 20_000, 21_500)
            .unwrap_or_else(|e| panic!("{label}: writes after resume: {e}"));
        db.compact_range(None, None).unwrap();
        assert_eq!(scan_all(&db), model, "{label}: after more writes and a full compaction");
        db.close().unwrap();
    } else {
        ffs.clear_all();
        drop(db);
    }
    // A reopen (on the raw file system) finds every acknowledged write.
    let db = Db::open(mem, "/db", opts(global)).unwrap();
    assert_eq!(scan_all(&db), model, "{label}: after reopen");
    db.put(&WriteOptions { sync: true }, b"again", b"ok").unwrap();
    db.flush().unwrap();
}

fn flush_faults(then: Then) {
    for (kind, global) in
        [FaultKind::Eio, FaultKind::NoSpace].into_iter().flat_map(|k| [(k, false), (k, true)])
    {
        let flush = |f: Fault, what: &str| run(f, &format!("flush {what} {kind:?}"), 300, global, then);
        flush(Fault::after(Op::Write, 3, kind).on_paths(".sst").persistent(), "write");
        flush(Fault::after(Op::Sync, 0, kind).on_paths(".sst").persistent(), "sync");
        flush(Fault::after(Op::Write, 0, kind).on_paths(".sst").partial(), "partial write");
    }
}

fn compaction_manifest_and_wal_faults(then: Then) {
    for (kind, global) in
        [FaultKind::Eio, FaultKind::NoSpace].into_iter().flat_map(|k| [(k, false), (k, true)])
    {
        // Enough preloaded tables that the next flushes trigger compactions, whose output writes then fail.
        let f = Fault::after(Op::Write, 40, kind).on_paths(".sst").persistent();
        run(f, &format!("compaction {kind:?}"), 2000, global, then);
        let f = Fault::after(Op::Sync, 0, kind).on_paths("MANIFEST").persistent();
        run(f, &format!("manifest {kind:?}"), 300, global, then);
        run(
            Fault::after(Op::Write, 0, kind).on_paths(".log").persistent(),
            &format!("wal {kind:?}"),
            300,
            global,
            then,
        );
        // Half a record reaches the WAL: after a resume a newer WAL follows it, so the half must be cut.
        let f = Fault::after(Op::Write, 5, kind).on_paths(".log").partial();
        run(f, &format!("wal partial write {kind:?}"), 300, global, then);
        let f = Fault::after(Op::Sync, 0, kind).on_paths(".log").persistent();
        run(f, &format!("wal sync {kind:?}"), 300, global, then);
    }
}

/// The global index's own files: a failed DR-tree write or sync (index flush with the memtable flush, or in the
/// background when its buffer fills).
fn index_faults(then: Then) {
    for kind in [FaultKind::Eio, FaultKind::NoSpace] {
        let f = Fault::after(Op::Write, 2, kind).on_paths(".drt").persistent();
        run(f, &format!("drt write {kind:?}"), 300, true, then);
        run(
            Fault::after(Op::Sync, 0, kind).on_paths(".drt").persistent(),
            &format!("drt sync {kind:?}"),
            300,
            true,
            then,
        );
    }
}

#[test]
fn eio_and_enospc_in_flush_stop_writes_and_lose_nothing() {
    flush_faults(Then::Reopen);
}

#[test]
fn eio_and_enospc_in_compaction_manifest_and_wal_stop_writes_and_lose_nothing() {
    compaction_manifest_and_wal_faults(Then::Reopen);
}

/// A failed DR-tree write or sync stops writes with an I/O error and loses nothing.
#[test]
fn eio_and_enospc_in_global_index_files_stop_writes_and_lose_nothing() {
    index_faults(Then::Reopen);
}

/// After each fault above, `resume` brings the open database back: every acknowledged write is there, writes and
/// compactions go on, and a reopen finds it all (a cut WAL followed by a newer one reads as complete).
#[test]
fn after_a_fault_in_flush_resume_goes_on_without_a_reopen() {
    flush_faults(Then::Resume);
}

#[test]
fn after_a_fault_in_compaction_manifest_or_wal_resume_goes_on_without_a_reopen() {
    compaction_manifest_and_wal_faults(Then::Resume);
}

#[test]
fn after_a_fault_in_global_index_files_resume_goes_on_without_a_reopen() {
    index_faults(Then::Resume);
}

#[test]
fn a_failed_manual_compaction_stops_writes_and_keeps_the_inputs() {
    for (kind, global) in
        [FaultKind::Eio, FaultKind::NoSpace].into_iter().flat_map(|k| [(k, false), (k, true)])
    {
        let mem: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
        let ffs = Arc::new(FaultFs::new(mem.clone()));
        let f: Arc<dyn vfs::Fs> = ffs.clone();
        let o = Options { disable_auto_compactions: true, ..opts(global) };
        let db = Db::open(f, "/db", o.clone()).unwrap();
        let w = WriteOptions::default();
        let mut model = BTreeMap::new();
        for i in 0..1500u32 {
            let k = format!("key{:04}", (i * 37) % 700).into_bytes();
            db.put(&w, &k, format!("v{i}").as_bytes()).unwrap();
            model.insert(k, format!("v{i}").into_bytes());
            if i % 500 == 499 {
                db.delete_range(
                    &w,
                    format!("key{:04}", i % 700).as_bytes(),
                    format!("key{:04}", i % 700 + 20).as_bytes(),
                )
                .unwrap();
                let (a, b) = (
                    format!("key{:04}", i % 700).into_bytes(),
                    format!("key{:04}", i % 700 + 20).into_bytes(),
                );
                let ks: Vec<_> = model.range(a..b).map(|(k, _)| k.clone()).collect();
                for k in ks {
                    model.remove(&k);
                }
            }
        }
        db.flush().unwrap();
        assert!(db.stats().levels[0].files >= 2);
        ffs.inject(Fault::after(Op::Write, 1, kind).on_paths(".sst").persistent());
        let e = db.compact_range(None, None).unwrap_err();
        assert!(e.is_io(), "{kind:?}: {e}");
        let later = db.put(&w, b"x", b"y").unwrap_err();
        assert!(matches!(later, Error::Background(_)) && later.is_io());
        let got: BTreeMap<_, _> =
            db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap().into_iter().collect();
        assert_eq!(got, model, "{kind:?}: reads after the failed compaction");
        ffs.clear_all();
        drop(db);
        let db = Db::open(mem, "/db", o).unwrap();
        let got: BTreeMap<_, _> =
            db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap().into_iter().collect();
        assert_eq!(got, model, "{kind:?}: after reopen");
        db.compact_range(None, None).unwrap();
        let got: BTreeMap<_, _> =
            db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap().into_iter().collect();
        assert_eq!(got, model, "{kind:?}: after a successful compaction");
    }
}

/// Regression: a compaction whose MANIFEST sync failed removed its output tables, although the edit naming them
/// had already been written to the MANIFEST; the next open then failed with "table referenced by the MANIFEST is
/// missing". The outputs must stay until startup cleanup knows whether the edit survived.
#[test]
fn regression_failed_manifest_sync_keeps_compaction_outputs() {
    for (kind, global) in
        [FaultKind::Eio, FaultKind::NoSpace].into_iter().flat_map(|k| [(k, false), (k, true)])
    {
        let mem: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
        let ffs = Arc::new(FaultFs::new(mem.clone()));
        let f: Arc<dyn vfs::Fs> = ffs.clone();
        let o = Options { level0_file_num_compaction_trigger: 8, ..opts(global) };
        let db = Db::open(f, "/db", o.clone()).unwrap();
        let w = WriteOptions::default();
        let mut model = BTreeMap::new();
        // Several overlapping L0 tables, so the manual compaction below is a real merge, not a trivial move.
        for round in 0..4u32 {
            for i in 0..60u32 {
                let k = format!("key{:04}", (i * 7 + round) % 100).into_bytes();
                let v = format!("r{round}v{i}").into_bytes();
                db.put(&w, &k, &v).unwrap();
                model.insert(k, v);
            }
            db.flush().unwrap();
        }
        ffs.inject(Fault::after(Op::Sync, 0, kind).on_paths("MANIFEST").persistent());
        let err = db.compact_range(None, None).unwrap_err();
        assert!(err.is_io(), "{kind:?}: {err}");
        ffs.clear_all();
        drop(db);
        let db = Db::open(mem, "/db", o).unwrap();
        let got: BTreeMap<_, _> =
            db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap().into_iter().collect();
        assert_eq!(got, model, "{kind:?}: after reopen");
    }
}

/// A resume that fails after it started a new WAL (the disk is still full when it flushes) leaves the old WAL
/// cut back to whole records: a reopen reads it as complete although a newer WAL follows it. Left with the half
/// record a failed append wrote, the old WAL would read as corrupt.
#[test]
fn a_resume_failing_after_it_started_a_new_wal_leaves_the_old_one_readable() {
    for kind in [FaultKind::Eio, FaultKind::NoSpace] {
        let mem: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
        let ffs = Arc::new(FaultFs::new(mem.clone()));
        let f: Arc<dyn vfs::Fs> = ffs.clone();
        let db = Db::open(f, "/db", opts(false)).unwrap();
        let mut model = BTreeMap::new();
        write_more(&db, &mut model, 0, 200).unwrap();
        ffs.inject(Fault::after(Op::Write, 0, kind).on_paths(".log").partial());
        assert!(db.put(&WriteOptions::default(), b"lost", b"half").is_err());
        ffs.inject(Fault::after(Op::Write, 0, kind).on_paths(".sst").persistent());
        assert!(db.resume().is_err(), "{kind:?}: the flush must fail");
        assert!(db.background_error().is_some());
        ffs.clear_all();
        drop(db);
        let db = Db::open(mem, "/db", opts(false)).unwrap_or_else(|e| panic!("{kind:?}: reopen: {e}"));
        assert_eq!(scan_all(&db), model, "{kind:?}");
    }
}

/// Regression: `close` returned `Ok` after a failed WAL sync had stopped writes, because the failed writer's seal
/// does nothing and reports nothing; the writes after the last good sync could then be lost at the next power
/// loss although `close` had said all was well (found by the crash test with failing syncs, seed 103). `close`
/// now returns the background error.
#[test]
fn regression_close_reports_a_background_error() {
    let mem: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let ffs = Arc::new(FaultFs::new(mem.clone()));
    let f: Arc<dyn vfs::Fs> = ffs.clone();
    let db = Db::open(f, "/db", opts(false)).unwrap();
    db.put(&WriteOptions::default(), b"a", b"1").unwrap();
    ffs.inject(Fault::after(Op::Sync, 0, FaultKind::Eio).on_paths(".log"));
    assert!(db.put(&WriteOptions { sync: true }, b"b", b"2").is_err());
    ffs.clear_all();
    let e = db.close().unwrap_err();
    assert!(matches!(e, Error::Background(_)) && e.is_io(), "{e}");
}
