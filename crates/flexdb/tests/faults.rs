//! Fault injection (EIO, ENOSPC, short writes) and corruption: failures surface as typed errors, never as
//! panics or wrong answers; after a restart every acknowledged write is present; damaged bytes are reported as
//! corruption.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use flexdb::{Db, Error, Options, WriteOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use vfs::{Fault, FaultFs, FaultKind, Op};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn opts() -> Options {
    Options { memtable_bytes: 2 << 10, ..Options::tiny() }
}

fn dump(db: &Db) -> flexdb::Result<Model> {
    Ok(db.scan(b"", None, usize::MAX, false)?.into_iter().collect())
}

/// A fresh store on a `FaultFs` whose calls of one kind (by `seed`: writes, syncs, writes on a full disk, file
/// removals; short writes for every third seed) fail at random from now on. Returns the raw file system, the
/// faulty one, the store and the kind.
fn store_with_random_faults(seed: u64) -> (Arc<dyn vfs::Fs>, Arc<FaultFs>, Db, Op) {
    let mem: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let ffs = Arc::new(FaultFs::new(mem.clone()));
    let db = Db::open(ffs.clone(), Path::new("db"), opts()).unwrap();
    let (op, kind) = match seed % 4 {
        0 => (Op::Write, FaultKind::Eio),
        1 => (Op::Sync, FaultKind::Eio),
        2 => (Op::Write, FaultKind::NoSpace),
        _ => (Op::Remove, FaultKind::Eio),
    };
    let mut fault = Fault::random(op, 0.01, seed, kind);
    if seed.is_multiple_of(3) {
        fault = fault.partial();
    }
    ffs.inject(fault);
    (mem, ffs, db, op)
}

/// Puts a random key (one of 200) with a random value, sometimes synced. Acknowledged: applied to `m`, `None`.
/// Failed (an I/O error, never another kind): `m` as it would be had the put landed, which a failed write may.
fn random_put(db: &Db, rng: &mut SmallRng, m: &mut Model, seed: u64) -> Option<Model> {
    let k = format!("k{:04}", rng.random_range(0..200)).into_bytes();
    let v = vec![rng.random::<u8>(); rng.random_range(0..50)];
    let mut next = m.clone();
    next.insert(k.clone(), v.clone());
    match db.put(&k, &v, WriteOptions { sync: rng.random_bool(0.2) }) {
        Ok(()) => {
            *m = next;
            None
        }
        Err(e) => {
            assert!(matches!(e, Error::Io(_) | Error::Background(_)), "seed {seed}: unexpected {e}");
            Some(next)
        }
    }
}

#[test]
fn injected_faults_lose_no_acknowledged_write() {
    for seed in 0..12u64 {
        let (mem, ffs, db, _) = store_with_random_faults(seed);
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut m = Model::new();
        let mut maybe: Option<Model> = None;
        for _ in 0..1500 {
            maybe = random_put(&db, &mut rng, &mut m, seed);
            if maybe.is_some() {
                break;
            }
        }
        // Reads keep working on what is in memory.
        ffs.clear_all();
        drop(db);
        let db = Db::open(mem.clone(), Path::new("db"), opts()).unwrap();
        db.check(true).unwrap();
        let got = dump(&db).unwrap();
        assert!(
            got == m || maybe.as_ref() == Some(&got),
            "seed {seed}: recovered state lost acknowledged writes"
        );
        db.close().unwrap();
    }
}

fn flip(fs: &dyn vfs::Fs, path: &Path, at: u64) {
    let f = fs.open(path, vfs::OpenMode::ReadWrite).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    b[0] ^= 0x5a;
    f.write_all_at(&b, at).unwrap();
}

#[test]
fn damaged_table_bytes_are_reported_as_corruption() {
    let mem: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let dir = Path::new("db");
    let db = Db::open(mem.clone(), dir, opts()).unwrap();
    let mut m = Model::new();
    for i in 0..300u32 {
        let (k, v) = (
            format!("key{i:05}").into_bytes(),
            format!("value-{i}-{}", "x".repeat((i % 40) as usize)).into_bytes(),
        );
        db.put(&k, &v, WriteOptions::default()).unwrap();
        m.insert(k, v);
    }
    db.flush().unwrap();
    db.close().unwrap();
    let snapshot = vfs::read_all(mem.as_ref(), &dir.join("table/flexfile.data")).unwrap();
    let mut corrupted = 0;
    for at in (0..snapshot.len() as u64).step_by(97) {
        let fs = copy_store(mem.as_ref(), dir);
        flip(fs.as_ref(), &dir.join("table/flexfile.data"), at);
        let r = Db::open(fs, dir, opts()).and_then(|db| {
            db.check(true)?;
            dump(&db)
        });
        match r {
            Ok(got) => assert!(got == m, "flip at {at}: silently wrong data"),
            Err(e) => {
                assert!(e.is_corruption(), "flip at {at}: {e} is not corruption");
                corrupted += 1;
            }
        }
    }
    assert!(corrupted > 0);
}

/// A copy of the store in `dir` on a fresh in-memory file system.
fn copy_store(from: &dyn vfs::Fs, dir: &Path) -> Arc<dyn vfs::Fs> {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    for name in fs_files(from, dir) {
        let data = vfs::read_all(from, &name).unwrap();
        fs.create_dir_all(name.parent().unwrap()).unwrap();
        fs.open(&name, vfs::OpenMode::CreateTruncate).unwrap().write_all_at(&data, 0).unwrap();
    }
    fs
}

fn fs_files(fs: &dyn vfs::Fs, dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for n in fs.list_dir(dir).unwrap() {
        let p = dir.join(&n);
        if n == "table" {
            out.extend(fs_files(fs, &p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn damaged_retired_wal_is_corruption() {
    let mem: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let dir = Path::new("db");
    let db = Db::open(mem.clone(), dir, Options { memtable_bytes: 1 << 20, ..opts() }).unwrap();
    for i in 0..10u32 {
        db.put(format!("k{i}").as_bytes(), b"v", WriteOptions::default()).unwrap();
    }
    drop(db);
    // Make the log a retired one (an empty newer log follows it), then damage its first record.
    let log = mem.list_dir(dir).unwrap().into_iter().find(|n| n.starts_with("wal-")).unwrap();
    let n = flexdb::wal::parse_name(&log).unwrap();
    mem.open(&dir.join(flexdb::wal::file_name(n + 1)), vfs::OpenMode::CreateTruncate).unwrap();
    flip(mem.as_ref(), &dir.join(&log), 10);
    let e = Db::open(mem.clone(), dir, opts()).expect_err("damage must be reported");
    assert!(e.is_corruption(), "{e}");
}

#[test]
fn small_wal_files_are_replayed() {
    // Regression for the reference implementation, which skipped logs under 64 bytes.
    let mem: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let dir = Path::new("db");
    let db = Db::open(mem.clone(), dir, opts()).unwrap();
    db.put(b"a", b"", WriteOptions { sync: true }).unwrap();
    drop(db);
    let db = Db::open(mem, dir, opts()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(Vec::new()));
}

/// A store with `k00`..`k49` = "old" committed to the table, reopened through a [`FaultFs`] with nothing to
/// replay, so no interval is cached and reads go to the table's file. Returns the file systems below and above
/// the faults, and the store.
fn fifty_old_keys_uncached() -> (Arc<dyn vfs::Fs>, Arc<FaultFs>, Db) {
    let mem: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let db = Db::open(mem.clone(), Path::new("db"), opts()).unwrap();
    for i in 0..50 {
        db.put(format!("k{i:02}").as_bytes(), b"old", WriteOptions::default()).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let ffs = Arc::new(FaultFs::new(mem.clone()));
    let db = Db::open(ffs.clone(), Path::new("db"), opts()).unwrap();
    (mem, ffs, db)
}

/// While a snapshot is live a write first reads the values it replaces; when that read fails, the write is
/// rejected before anything is logged, so it changes nothing and the store keeps taking writes.
#[test]
fn a_failed_pre_image_read_rejects_the_write_and_changes_nothing() {
    let w = WriteOptions::default();
    let (mem, ffs, db) = fifty_old_keys_uncached();
    let snap = db.snapshot();
    let wal_before = db.stats().wal_bytes;
    ffs.inject(Fault::after(Op::Read, 0, FaultKind::Eio).on_paths("table").persistent());
    let e = db.put(b"k07", b"new", w).unwrap_err();
    assert!(matches!(e, Error::Io(_)), "{e}");
    let e = db.delete_range(b"k1", b"k3", w).unwrap_err();
    assert!(matches!(e, Error::Io(_)), "{e}");
    assert_eq!(db.stats().wal_bytes, wal_before, "a rejected write logs nothing");
    ffs.clear_all();
    assert_eq!(db.get(b"k07").unwrap().as_deref(), Some(&b"old"[..]));
    assert_eq!(db.scan(b"k1", Some(b"k3"), 100, false).unwrap().len(), 20);
    // Not a background error: the next write goes through, and the snapshot still reads its moment.
    db.put(b"k07", b"new", w).unwrap();
    assert_eq!(db.get_at(b"k07", &snap).unwrap().as_deref(), Some(&b"old"[..]));
    assert_eq!(db.get(b"k07").unwrap().as_deref(), Some(&b"new"[..]));
    drop(snap);
    db.close().unwrap();
    let db = Db::open(mem, Path::new("db"), opts()).unwrap();
    assert_eq!(db.get(b"k07").unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(db.scan(b"", None, 100, false).unwrap().len(), 50);
}

/// After a commit fails, the store answers every later write with the failure (an I/O error, so its kind says
/// so); reads the memtables answer still work, and reads that reach the table fail with the same error. A
/// failed commit leaves the table changed part-way in memory, and before this every read reaching it said
/// "the file is poisoned" (kind `background`), and reads from the interval cache trusted an index the commit
/// may have left half changed.
#[test]
fn regression_a_failed_commit_reports_its_cause_and_reads_never_answer_wrongly() {
    let mem: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let w = WriteOptions::default();
    let key = |i: u32| format!("k{i:03}").into_bytes();
    let db = Db::open(mem.clone(), Path::new("db"), opts()).unwrap();
    let mut m = Model::new();
    for i in 0..300 {
        db.put(&key(i), b"old", w).unwrap();
        m.insert(key(i), b"old".to_vec());
    }
    db.flush().unwrap();
    db.close().unwrap();
    let ffs = Arc::new(FaultFs::new(mem.clone()));
    let db = Db::open(ffs.clone(), Path::new("db"), opts()).unwrap();
    // Warm the cache over the first keys: cached intervals must be refused too once the commit fails.
    for i in 0..20 {
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(&b"old"[..]));
    }
    ffs.inject(Fault::after(Op::Write, 0, FaultKind::NoSpace).on_paths("table").persistent());
    for i in (0..300).step_by(3) {
        db.put(&key(i), b"new", w).unwrap();
        m.insert(key(i), b"new".to_vec());
    }
    let e = db.flush().unwrap_err();
    assert!(matches!(e, Error::Background(_)) && e.is_io() && !e.is_corruption(), "{e}");
    let e = db.put(b"later", b"x", w).unwrap_err();
    assert!(matches!(&e, Error::Background(inner) if matches!(**inner, Error::Io(_))), "{e}");
    // The memtable being committed still answers for its keys.
    assert_eq!(db.get(&key(3)).unwrap().as_deref(), Some(&b"new"[..]));
    for probe in [key(1), key(250)] {
        match db.get(&probe) {
            Ok(v) => panic!("a read reaching the failed table answered {v:?}"),
            Err(e) => assert!(matches!(e, Error::Background(_)) && e.is_io(), "{e}"),
        }
    }
    let e = db.scan(b"", None, 10, false).unwrap_err();
    assert!(matches!(e, Error::Background(_)) && e.is_io(), "{e}");
    let e = db.close().unwrap_err();
    assert!(matches!(e, Error::Background(_)) && e.is_io(), "close names the failure: {e}");
    ffs.clear_all();
    let db = Db::open(mem, Path::new("db"), opts()).unwrap();
    db.check(true).unwrap();
    assert_eq!(dump(&db).unwrap(), m, "every acknowledged write is there after reopening");
    db.close().unwrap();
}

/// A commit that meets damaged table bytes stops writes with a corruption error, and later writes and reads
/// say corruption too, not a generic background error.
#[test]
fn regression_corruption_met_by_the_committer_is_reported_as_corruption() {
    let mem: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let dir = Path::new("db");
    let w = WriteOptions::default();
    let key = |i: u32| format!("key{i:05}").into_bytes();
    let db = Db::open(mem.clone(), dir, opts()).unwrap();
    for i in 0..300 {
        db.put(&key(i), format!("value-{i}-{}", "x".repeat((i % 40) as usize)).as_bytes(), w).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let len = vfs::read_all(mem.as_ref(), &dir.join("table/flexfile.data")).unwrap().len() as u64;
    let mut met = 0;
    for at in (0..len).step_by(211) {
        let fs = copy_store(mem.as_ref(), dir);
        flip(fs.as_ref(), &dir.join("table/flexfile.data"), at);
        let Ok(db) = Db::open(fs, dir, opts()) else { continue };
        // Commits start as memtables fill, so the failure may answer a put before the flush.
        let Err(e) = (0..300).try_for_each(|i| db.put(&key(i), b"new", w)).and_then(|()| db.flush()) else {
            continue;
        };
        assert!(e.is_corruption(), "flip at {at}: {e}");
        met += 1;
        let e = db.put(b"later", b"x", w).unwrap_err();
        assert!(e.is_corruption() && matches!(e, Error::Background(_)), "flip at {at}: {e}");
        let e = db.get(b"key99999").unwrap_err();
        assert!(e.is_corruption(), "flip at {at}: a read reaching the table: {e}");
        assert!(db.close().unwrap_err().is_corruption());
    }
    assert!(met > 0, "no flip was met by a commit");
}

/// A batch whose range delete fails on the table after its put reached the memtable stops every read until
/// reopened: a reader must never see the put without the delete. Reopening replays the logged batch whole.
#[test]
fn regression_a_batch_that_failed_part_way_is_never_read_in_part() {
    use flexdb::wal::Op as W;
    let w = WriteOptions::default();
    // Nothing cached, so the range delete must read its boundary intervals from the file.
    let (mem, ffs, db) = fifty_old_keys_uncached();
    db.put(b"other", b"in the memtable", w).unwrap();
    ffs.inject(Fault::after(Op::Read, 0, FaultKind::Eio).on_paths("table").persistent());
    let batch =
        vec![W::Put(b"a"[..].into(), b"new"[..].into()), W::DeleteRange(b"k1"[..].into(), b"k3"[..].into())];
    let e = db.write(batch, w).unwrap_err();
    assert!(e.is_io(), "{e}");
    ffs.clear_all();
    for key in [&b"a"[..], b"other", b"k05"] {
        let e = db.get(key).expect_err("no read after a batch failed part-way");
        assert!(matches!(e, Error::Background(_)) && e.is_io(), "{e}");
    }
    assert!(db.scan(b"", None, 100, false).is_err());
    assert!(db.close().unwrap_err().is_io());
    let db = Db::open(mem, Path::new("db"), opts()).unwrap();
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"new"[..]), "the batch is replayed whole");
    assert_eq!(db.get(b"other").unwrap().as_deref(), Some(&b"in the memtable"[..]));
    assert_eq!(db.scan(b"k1", Some(b"k3"), 100, false).unwrap().len(), 0);
    assert_eq!(db.scan(b"k", Some(b"l"), 100, false).unwrap().len(), 30);
}

/// As `injected_faults_lose_no_acknowledged_write`, but the open store resumes (`Db::resume`) once the fault
/// clears: it holds every acknowledged write (and the failed one at most), takes writes and range deletes again,
/// and a reopen finds the same.
#[test]
fn resume_after_injected_faults_loses_nothing_and_goes_on() {
    let (mut stopped, mut refused) = (0, 0);
    for seed in 0..16u64 {
        let (mem, ffs, db, op) = store_with_random_faults(seed);
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut m = Model::new();
        let mut maybe: Option<Model> = None;
        for i in 0..1500 {
            maybe = random_put(&db, &mut rng, &mut m, seed);
            if maybe.is_some() {
                break;
            }
            if i % 300 == 299 {
                let (a, b) = (format!("k{:04}", i % 200), format!("k{:04}", i % 200 + 7));
                let mut next = m.clone();
                next.retain(|k, _| k.as_slice() < a.as_bytes() || k.as_slice() >= b.as_bytes());
                if db.delete_range(a.as_bytes(), b.as_bytes(), WriteOptions::default()).is_err() {
                    // Like a failed put, a failed range delete may or may not have reached the log.
                    maybe = Some(next);
                    break;
                }
                m = next;
            }
        }
        if maybe.is_some() {
            stopped += 1;
            let bg = db.background_error();
            assert!(
                matches!(bg, Some(Error::Io(_))),
                "seed {seed}: writes failed, yet the store reports {bg:?}"
            );
        }
        ffs.clear_all();
        let db = match db.resume() {
            Ok(()) => {
                assert!(db.background_error().is_none(), "seed {seed}: resumed, yet still stopped");
                db
            }
            // A failed sync of the table is not resumed in place (the page cache may show what the media lost);
            // here the media is the memory, so a reopen stands for the restart the error asks for.
            Err(Error::Background(e)) if op == Op::Sync => {
                assert!(e.to_string().contains("sync of the table failed"), "seed {seed}: {e}");
                refused += 1;
                drop(db);
                Db::open(mem.clone(), Path::new("db"), opts()).unwrap()
            }
            Err(e) => panic!("seed {seed}: resume: {e}"),
        };
        let got = dump(&db).unwrap();
        assert!(
            got == m || maybe.as_ref() == Some(&got),
            "seed {seed}: resumed state lost acknowledged writes"
        );
        m = got;
        for i in 0..400u32 {
            let k = format!("k{:04}", (i * 7) % 200).into_bytes();
            db.put(&k, format!("after{i}").as_bytes(), WriteOptions::default()).unwrap();
            m.insert(k, format!("after{i}").into_bytes());
        }
        db.delete_range(b"k0050", b"k0060", WriteOptions::default()).unwrap();
        m.retain(|k, _| k.as_slice() < b"k0050".as_slice() || k.as_slice() >= b"k0060".as_slice());
        db.flush().unwrap();
        assert_eq!(dump(&db).unwrap(), m, "seed {seed}: after more writes");
        db.check(true).unwrap();
        db.close().unwrap();
        let db = Db::open(mem.clone(), Path::new("db"), opts()).unwrap();
        assert_eq!(dump(&db).unwrap(), m, "seed {seed}: after reopen");
        db.close().unwrap();
    }
    assert!(stopped >= 8, "too few runs met their fault ({stopped})");
    assert!(refused < stopped, "every run refused to resume ({refused} of {stopped})");
}

/// A store on a fault-injecting file system resuming by itself every `interval`, holding `a = 1`, whose every
/// log append from now on fails with `kind`.
fn store_whose_log_fails(interval: std::time::Duration, kind: FaultKind) -> (Arc<FaultFs>, Db) {
    let mem: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let ffs = Arc::new(FaultFs::new(mem));
    let o = Options { auto_resume_interval: Some(interval), ..opts() };
    let db = Db::open(ffs.clone(), Path::new("db"), o).unwrap();
    db.put(b"a", b"1", WriteOptions::default()).unwrap();
    ffs.inject(Fault::after(Op::Write, 0, kind).on_paths(".log").persistent());
    (ffs, db)
}

/// After ENOSPC the store tries the resume itself (a write, or the resumer thread), at most once per interval;
/// once space is back, the next write after the interval goes through. After EIO writes wait for an explicit
/// `resume`.
#[test]
fn a_full_disk_resumes_by_itself_once_space_is_back_and_a_device_error_waits() {
    let interval = std::time::Duration::from_millis(200);
    for kind in [FaultKind::NoSpace, FaultKind::Eio] {
        // Every log append fails: the next write stops the store.
        let (ffs, db) = store_whose_log_fails(interval, kind);
        // Before the stop: every try of a resume comes after it.
        let stopped = std::time::Instant::now();
        let before = ffs.injected_on(Op::Write);
        assert!(db.put(b"b", b"2", WriteOptions::default()).is_err());
        // For ENOSPC a try comes at once, the next write's or the resumer thread's, and fails again: the new log
        // cannot be written. None comes for EIO.
        assert!(db.put(b"c", b"3", WriteOptions::default()).is_err());
        let after_first = ffs.injected_on(Op::Write);
        assert_eq!(
            after_first > before + 1,
            kind == FaultKind::NoSpace,
            "{kind:?}: whether a resume was tried"
        );
        assert!(db.put(b"c", b"3", WriteOptions::default()).is_err());
        if stopped.elapsed() < interval {
            assert_eq!(ffs.injected_on(Op::Write), after_first, "{kind:?}: a second try within the interval");
        }
        ffs.clear_all();
        std::thread::sleep(interval);
        let r = db.put(b"c", b"3", WriteOptions::default());
        match kind {
            FaultKind::NoSpace => r.unwrap(),
            _ => {
                assert!(matches!(r, Err(Error::Background(_))), "{kind:?}: {r:?}");
                db.resume().unwrap();
                db.put(b"c", b"3", WriteOptions::default()).unwrap();
            }
        }
        assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]), "{kind:?}");
        assert_eq!(db.get(b"c").unwrap().as_deref(), Some(&b"3"[..]), "{kind:?}");
        db.flush().unwrap();
        db.close().unwrap();
    }
}

/// A store nobody writes to takes writes again by itself once space is back: its resumer thread tries (as the
/// LSM engine's flush thread does); a device error still waits.
#[test]
fn a_full_disk_resumes_without_any_write() {
    let interval = std::time::Duration::from_millis(100);
    for kind in [FaultKind::NoSpace, FaultKind::Eio] {
        let (ffs, db) = store_whose_log_fails(interval, kind);
        assert!(db.put(b"b", b"2", WriteOptions::default()).is_err());
        ffs.clear_all();
        // Ten intervals are enough to see that a device error waits.
        let wait = if kind == FaultKind::Eio { interval * 10 } else { std::time::Duration::from_secs(10) };
        testkit::wait_while(wait, interval / 2, || db.background_error().is_some());
        if kind == FaultKind::Eio {
            assert!(db.background_error().is_some(), "a device error resumed by itself");
            assert_eq!(db.stats().resumes, 0);
            continue;
        }
        assert!(db.background_error().is_none(), "no resume within 10 s");
        assert_eq!(db.stats().resumes, 1);
        assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
        db.put(b"c", b"3", WriteOptions::default()).unwrap();
        db.close().unwrap();
    }
}
