//! Crash tests on `CrashFs`: a random workload (with syncs, flushes, compactions, reopens and MANIFEST rollovers
//! forced by tiny sizes) runs until a crash point chosen at random among its file-system operations, then power
//! is lost (unsynced data dropped, kept or torn, per seed). After reopening, the database must hold exactly the
//! state after some prefix of the acknowledged operations that includes everything made durable (a sync write,
//! `sync_wal` or `flush` returning Ok): nothing acknowledged as durable is lost, no deleted key comes back, and
//! nothing is corrupt. Seed from `RANGEDB_SEED`; count from `RANGEDB_TEST_SCALE`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use lsm::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use vfs::{CrashFs, Fs};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone)]
enum Up {
    Put(Vec<u8>, Vec<u8>),
    Del(Vec<u8>),
    Range(Vec<u8>, Vec<u8>),
}

fn apply(m: &mut Model, ups: &[Up]) {
    for u in ups {
        match u {
            Up::Put(k, v) => {
                m.insert(k.clone(), v.clone());
            }
            Up::Del(k) => {
                m.remove(k);
            }
            Up::Range(a, b) => {
                let ks: Vec<_> = m.range(a.clone()..b.clone()).map(|(k, _)| k.clone()).collect();
                for k in ks {
                    m.remove(&k);
                }
            }
        }
    }
}

/// `global`: range deletes in GLORAN's index (tiny buffer and nodes: index flushes, compactions and GC inside the
/// crash window) instead of local tombstones.
fn opts(global: bool) -> Options {
    let range_delete_strategy: Arc<dyn lsm::RangeDeleteStrategy> = if global {
        Arc::new(lsm::GlobalRangeDeletes::with_options(gloran::IndexOptions {
            buffer_bytes: 256,
            size_ratio: 2,
            node_size: 128,
            ..Default::default()
        }))
    } else {
        Arc::new(lsm::LocalTombstones)
    };
    Options {
        range_delete_strategy,
        create_if_missing: true,
        write_buffer_size: 2048,
        max_bytes_for_level_base: 8192,
        max_bytes_for_level_multiplier: 2,
        target_file_size_base: 2048,
        block_size: 256,
        level0_file_num_compaction_trigger: 2,
        max_manifest_file_size: 2048,
        ..Options::default()
    }
}

fn key(rng: &mut SmallRng) -> Vec<u8> {
    format!("k{:02}", rng.random_range(0..60)).into_bytes()
}

/// Runs the workload on `fs` until it finishes or the file system refuses (crash point). Returns the groups of
/// updates acknowledged (in order), how many of them are durable, and whether one more group may have applied.
///
/// With `failing_syncs`, now and then the next one or two syncs fail the way Linux fails them (the unsynced pages
/// are dropped as if written); after each failure the workload calls `Db::resume` until it succeeds and checks
/// that the open database holds exactly the acknowledged groups (a failed write is never applied).
fn workload(
    fs: &Arc<CrashFs>,
    seed: u64,
    steps: usize,
    global: bool,
    failing_syncs: bool,
) -> (Model, Vec<Vec<Up>>, usize, bool) {
    let mut rng = SmallRng::seed_from_u64(seed);
    // Failures an earlier run on the same file system left armed are not this run's.
    fs.fail_next_syncs(0);
    let mut acked: Vec<Vec<Up>> = Vec::new();
    let mut durable = 0;
    let open = || {
        let f: Arc<dyn vfs::Fs> = fs.clone();
        Db::open(f, "/db", opts(global))
    };
    let Ok(mut db) = open() else { return (Model::new(), acked, durable, false) };
    // What an earlier run on the same file system left (the in-workload checks start from it).
    let base: Model =
        db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap().into_iter().collect();
    for step in 0..steps {
        if failing_syncs && rng.random_ratio(1, 25) {
            fs.fail_next_syncs(rng.random_range(1..=2));
        }
        let r = rng.random_range(0..100);
        let (ups, res): (Vec<Up>, lsm::Result<()>) = match r {
            0..=49 => {
                let (k, v) = (key(&mut rng), format!("v{seed}.{step}").into_bytes());
                let sync = rng.random_bool(0.2);
                let res = db.put(&WriteOptions { sync }, &k, &v);
                (
                    vec![Up::Put(k, v)],
                    res.map(|_| {
                        if sync {
                            durable = acked.len() + 1
                        }
                    }),
                )
            }
            50..=64 => {
                let k = key(&mut rng);
                let res = db.delete(&WriteOptions::default(), &k);
                (vec![Up::Del(k)], res)
            }
            65..=74 => {
                let (a, b) = (key(&mut rng), key(&mut rng));
                let (a, b) = if a <= b { (a, b) } else { (b, a) };
                let res = db.delete_range(&WriteOptions::default(), &a, &b);
                (vec![Up::Range(a, b)], res)
            }
            75..=84 => {
                let mut b = WriteBatch::new();
                let mut ups = Vec::new();
                for _ in 0..rng.random_range(1..5) {
                    let k = key(&mut rng);
                    if rng.random_bool(0.6) {
                        let v = format!("b{seed}.{step}").into_bytes();
                        b.put(&k, &v);
                        ups.push(Up::Put(k, v));
                    } else {
                        b.delete(&k);
                        ups.push(Up::Del(k));
                    }
                }
                let sync = rng.random_bool(0.3);
                let res = db.write(&WriteOptions { sync }, b);
                (
                    ups,
                    res.map(|_| {
                        if sync {
                            durable = acked.len() + 1
                        }
                    }),
                )
            }
            85..=89 => {
                let res = db.sync_wal();
                (Vec::new(), res.map(|_| durable = acked.len()))
            }
            90..=94 => {
                let res = db.flush();
                (Vec::new(), res.map(|_| durable = acked.len()))
            }
            95..=97 => (Vec::new(), db.compact_range(None, None)),
            _ => {
                // A clean close syncs the WAL; reopening writes a new MANIFEST and switches CURRENT.
                let res = db.close();
                if res.is_ok() {
                    durable = acked.len();
                }
                match open() {
                    Ok(d) => db = d,
                    Err(_) => return (base, acked, durable, false),
                }
                (Vec::new(), res)
            }
        };
        match res {
            Ok(()) => {
                if !ups.is_empty() {
                    acked.push(ups);
                }
            }
            Err(e) => {
                if failing_syncs && !fs.reached_crash_point() && resume(&db, fs) {
                    // The failed group was never applied, and the resume cut its WAL record if one was written.
                    let mut m = base.clone();
                    for g in &acked {
                        apply(&mut m, g);
                    }
                    let got: Model = db
                        .scan(&ReadOptions::default(), b"", b"\xff", usize::MAX)
                        .unwrap()
                        .into_iter()
                        .collect();
                    assert_eq!(got, m, "seed {seed} step {step}: after a resume from {e}");
                    continue;
                }
                let maybe = !ups.is_empty();
                if maybe {
                    acked.push(ups);
                }
                return (base, acked, durable, maybe);
            }
        }
    }
    (base, acked, durable, false)
}

/// Resumes `db` after a failed sync, retrying while syncs still fail; false if the crash point came first.
fn resume(db: &Db, fs: &CrashFs) -> bool {
    let mut last = None;
    for _ in 0..8 {
        match db.resume() {
            Ok(()) => return true,
            Err(_) if fs.reached_crash_point() => return false,
            Err(e) => last = Some(e),
        }
    }
    panic!("resume kept failing with syncs working again: {last:?}");
}

fn check(
    seed: u64,
    crash_seed: u64,
    fs: &Arc<CrashFs>,
    (base, acked, durable, maybe): (&Model, &[Vec<Up>], usize, bool),
    global: bool,
) {
    let f: Arc<dyn vfs::Fs> = Arc::new(fs.crash(crash_seed));
    let db = Db::open(f, "/db", opts(global))
        .unwrap_or_else(|e| panic!("seed {seed}/{crash_seed}: reopen failed: {e}"));
    let got: Model = db
        .scan(&ReadOptions::default(), b"", b"\xff", usize::MAX)
        .unwrap_or_else(|e| panic!("seed {seed}/{crash_seed}: scan failed: {e}"))
        .into_iter()
        .collect();
    // The recovered state must be the state after some prefix p, durable <= p <= acknowledged.
    let hi = acked.len();
    let lo = durable.min(hi);
    let mut m = base.clone();
    for g in &acked[..lo] {
        apply(&mut m, g);
    }
    let mut ok = m == got;
    for g in &acked[lo..hi] {
        if ok {
            break;
        }
        apply(&mut m, g);
        ok = m == got;
    }
    assert!(
        ok,
        "seed {seed}/{crash_seed}: recovered state is no prefix state (durable {lo}, acked {hi}, maybe-last {maybe}); \
         got {} keys",
        got.len()
    );
    // Point reads agree with the scan, and the reopened database takes writes.
    for (k, v) in got.iter().take(20) {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "seed {seed}/{crash_seed}");
    }
    // Every key ever written and now absent reads as absent: a point lookup finds its older entries and must be
    // told by the range-delete state recovered at open (with the global strategy, the estimator rebuilt from the
    // index files and the WAL) that they are deleted.
    for g in acked {
        for u in g {
            if let Up::Put(k, _) | Up::Del(k) = u
                && !got.contains_key(k)
            {
                assert_eq!(db.get(k).unwrap(), None, "seed {seed}/{crash_seed}: deleted {k:?} came back");
            }
        }
    }
    // Reverse iteration hides the same entries.
    let mut rev = db.rscan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap();
    rev.reverse();
    assert!(rev.iter().map(|(k, v)| (k, v)).eq(got.iter()), "seed {seed}/{crash_seed}: reverse scan differs");
    db.put(&WriteOptions { sync: true }, b"after", b"crash").unwrap();
    db.close().unwrap();
}

fn seeds() -> Vec<u64> {
    testkit::seeds(&(0..12).collect::<Vec<u64>>())
}

#[test]
fn crash_at_random_points_loses_nothing_durable() {
    crash_at_random_points(false, &seeds(), 4 * testkit::scale());
}

#[test]
fn crash_at_random_points_loses_nothing_durable_global_range_deletes() {
    crash_at_random_points(true, &seeds(), 4 * testkit::scale());
}

/// Regression: an index flush wrote every buffered range record to a synced DR-tree, including records whose WAL
/// was not synced yet; a crash then lost the writes before such a delete but kept the delete (seed 101, trial 14:
/// "recovered state is no prefix state"). Index flushes and compactions that drop covered entries now sync the
/// WAL first.
#[test]
fn regression_index_flush_never_makes_a_delete_durable_before_its_wal() {
    crash_at_random_points(true, &[101], 16);
}

fn crash_at_random_points(global: bool, seeds: &[u64], trials: usize) {
    crash_at_random_points_with(global, false, seeds, trials);
}

/// Failed syncs and resumes mixed into the workload, then the crash: a resume loses nothing acknowledged as
/// durable, brings back no failed write, and leaves files a reopen reads (a cut WAL before a newer one).
#[test]
fn crash_after_failed_syncs_and_resumes_loses_nothing_durable() {
    crash_at_random_points_with(false, true, &seeds(), 4 * testkit::scale());
}

#[test]
fn crash_after_failed_syncs_and_resumes_loses_nothing_durable_global_range_deletes() {
    crash_at_random_points_with(true, true, &seeds(), 4 * testkit::scale());
}

fn crash_at_random_points_with(global: bool, failing_syncs: bool, seeds: &[u64], trials: usize) {
    for &seed in seeds {
        eprintln!(
            "crash test seed {seed} global {global} failing syncs {failing_syncs} (set RANGEDB_SEED to reproduce)"
        );
        let steps = 400;
        // Dry run: how many file-system operations the workload makes.
        let dry = Arc::new(CrashFs::new());
        let _ = workload(&dry, seed, steps, global, failing_syncs);
        let total = dry.ops().max(1);
        let mut rng = SmallRng::seed_from_u64(seed ^ 0xc0ffee);
        for trial in 0..trials {
            let fs = Arc::new(CrashFs::new());
            fs.set_op_budget(rng.random_range(0..total));
            let (base, acked, durable, maybe) = workload(&fs, seed, steps, global, failing_syncs);
            fs.clear_op_budget();
            check(seed, trial as u64, &fs, (&base, &acked, durable, maybe), global);
        }
        // And a crash at the end of a complete run, under several power-loss outcomes.
        let (base, acked, durable, maybe) = workload(&dry, seed + 1000, steps, global, failing_syncs);
        for c in 0..3 {
            check(seed, 100 + c, &dry, (&base, &acked, durable, maybe), global);
        }
    }
}

/// Regression: a crash between the rename of CURRENT and the directory sync could keep the new CURRENT but drop
/// the new MANIFEST's directory entry ("MANIFEST named by CURRENT is missing"). Crashes at every operation of
/// opening (and so of the MANIFEST switch it performs), under several power-loss outcomes, must all reopen.
#[test]
fn regression_crash_at_every_step_of_open_and_manifest_switch() {
    crash_at_every_step_of_open(false);
}

/// With the global strategy, opening also replays range records into the index and flushes it.
#[test]
fn crash_at_every_step_of_open_global_range_deletes() {
    crash_at_every_step_of_open(true);
}

fn crash_at_every_step_of_open(global: bool) {
    let opts = || opts(global);
    let base = Arc::new(CrashFs::new());
    {
        let f: Arc<dyn vfs::Fs> = base.clone();
        let db = Db::open(f, "/db", opts()).unwrap();
        for i in 0..240u32 {
            db.put(&WriteOptions::default(), format!("k{i:03}").as_bytes(), b"v").unwrap();
            if i % 6 == 5 {
                // Deletes the key just written: 200 keys remain.
                let k = format!("k{i:03}");
                db.delete_range(&WriteOptions::default(), k.as_bytes(), format!("{k}\0").as_bytes()).unwrap();
            }
        }
        db.close().unwrap();
    }
    let start = base.crash_keep_unsynced();
    let dry = Arc::new(start.crash_keep_unsynced());
    let before = dry.ops();
    {
        let f: Arc<dyn vfs::Fs> = dry.clone();
        Db::open(f, "/db", opts()).unwrap().close().unwrap();
    }
    let total = dry.ops() - before;
    for budget in 0..total {
        let fs = Arc::new(start.crash_keep_unsynced());
        fs.set_op_budget(budget);
        let f: Arc<dyn vfs::Fs> = fs.clone();
        if let Ok(db) = Db::open(f, "/db", opts()) {
            drop(db);
        }
        fs.clear_op_budget();
        for c in 0..6 {
            let f: Arc<dyn vfs::Fs> = Arc::new(fs.crash(c));
            let db = Db::open(f, "/db", opts()).unwrap_or_else(|e| panic!("budget {budget} crash {c}: {e}"));
            let n = db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap().len();
            assert_eq!(n, 200, "budget {budget} crash {c}");
        }
    }
}

/// Regression: a crash during the open that recovers a torn WAL. The open replays the WAL (its torn tail is
/// dropped: it is the newest), creates a new, empty WAL and then writes the MANIFEST edit that retires the old one;
/// a crash between the two left a torn WAL that was no longer the newest, and the next open refused it as
/// corruption ("zeroed fragment followed by data"). Found by the failing-syncs crash test with
/// `RANGEDB_SEED=9045 RANGEDB_TEST_SCALE=3`. Crashes at every step of that open, under several power-loss
/// outcomes, must reopen with the synced writes and a prefix of the others.
#[test]
fn regression_a_crash_while_recovering_a_torn_wal_reopens() {
    for global in [false, true] {
        let o = Options { write_buffer_size: 1 << 20, ..opts(global) };
        let base = Arc::new(CrashFs::new());
        let f: Arc<dyn vfs::Fs> = base.clone();
        let db = Db::open(f, "/db", o.clone()).unwrap();
        for i in 0..20u32 {
            db.put(&WriteOptions { sync: true }, format!("s{i:03}").as_bytes(), b"v").unwrap();
        }
        for i in 0..200u32 {
            db.put(&WriteOptions::default(), format!("n{i:03}").as_bytes(), &[b'v'; 40]).unwrap();
        }
        // The power loss tore the unsynced tail: one sector in its middle never reached the media.
        let torn = base.crash_keep_unsynced();
        drop(db);
        let wal =
            torn.list_dir("/db".as_ref()).unwrap().into_iter().filter(|n| n.ends_with(".log")).max().unwrap();
        let w = torn.open(&std::path::Path::new("/db").join(&wal), vfs::OpenMode::ReadWrite).unwrap();
        let len = w.len().unwrap();
        assert!(len > 8192, "the WAL must be long enough to tear ({len})");
        w.write_all_at(&[0u8; 512], (len / 2) & !511).unwrap();
        w.sync_data().unwrap();
        drop(w);
        let count = |fs: Arc<dyn vfs::Fs>, ctx: &str| {
            let db = Db::open(fs, "/db", o.clone()).unwrap_or_else(|e| panic!("{ctx}: reopen failed: {e}"));
            let got = db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap();
            let synced = got.iter().filter(|(k, _)| k.starts_with(b"s")).count();
            assert_eq!(synced, 20, "{ctx}: synced writes lost");
            let n: Vec<_> = got.iter().filter(|(k, _)| k.starts_with(b"n")).map(|(k, _)| k.clone()).collect();
            let want: Vec<_> = (0..n.len()).map(|i| format!("n{i:03}").into_bytes()).collect();
            assert_eq!(n, want, "{ctx}: unsynced writes are no prefix");
            n.len()
        };
        let dry = Arc::new(torn.crash_keep_unsynced());
        let before = dry.ops();
        let kept = count(dry.clone(), "first open");
        assert!(kept < 200, "the torn sector must cut the replay short ({kept} kept)");
        let total = dry.ops() - before;
        for budget in 0..total {
            let fs = Arc::new(torn.crash_keep_unsynced());
            fs.set_op_budget(budget);
            let f: Arc<dyn vfs::Fs> = fs.clone();
            if let Ok(db) = Db::open(f, "/db", o.clone()) {
                drop(db);
            }
            fs.clear_op_budget();
            for c in 0..4 {
                count(
                    Arc::new(fs.crash(c)),
                    &format!("global {global} budget {budget} of {total}, crash {c}"),
                );
            }
        }
    }
}

/// With the global strategy a range delete leaves the memtable empty (its record is in GLORAN's buffer), and
/// `flush` skipped an empty memtable: it returned Ok while the record was only in an unsynced WAL, and a power
/// cut brought the deleted keys back. Found by the crash test with `RANGEDB_SEED=1234 RANGEDB_TEST_SCALE=2`.
#[test]
fn regression_flush_makes_a_lone_global_range_delete_durable() {
    let fs = Arc::new(CrashFs::new());
    let f: Arc<dyn vfs::Fs> = fs.clone();
    let db = Db::open(f, "/db", opts(true)).unwrap();
    db.put(&WriteOptions { sync: true }, b"k10", b"v").unwrap();
    db.flush().unwrap();
    db.delete_range(&WriteOptions::default(), b"k00", b"k50").unwrap();
    db.flush().unwrap();
    let crashed: Arc<dyn vfs::Fs> = Arc::new(fs.crash_drop_unsynced());
    drop(db);
    let db = Db::open(crashed, "/db", opts(true)).unwrap();
    assert_eq!(db.get(b"k10").unwrap(), None, "the flushed range delete was lost");
}

/// A crash at every step of a resume after a failed WAL sync (the cut of the old WAL, the new WAL, the flush and
/// the new MANIFEST), under several power-loss outcomes: the database reopens (a cut WAL followed by a newer one
/// reads as complete), every synced write is there, and of the unsynced ones a prefix.
#[test]
fn crash_at_every_step_of_a_resume_after_a_failed_wal_sync() {
    let o = Options { write_buffer_size: 1 << 20, ..opts(false) };
    // Up to the failed sync; returns the database, stopped.
    let prefix = |fs: &Arc<CrashFs>| {
        let f: Arc<dyn vfs::Fs> = fs.clone();
        let db = Db::open(f, "/db", o.clone()).unwrap();
        for i in 0..30 {
            db.put(&WriteOptions { sync: true }, format!("s{i:02}").as_bytes(), b"v").unwrap();
        }
        for i in 0..15 {
            db.put(&WriteOptions::default(), format!("n{i:02}").as_bytes(), b"v").unwrap();
        }
        fs.fail_next_syncs(1);
        assert!(db.put(&WriteOptions { sync: true }, b"failed", b"v").is_err());
        db
    };
    let dry = Arc::new(CrashFs::new());
    let db = prefix(&dry);
    let before = dry.ops();
    db.resume().unwrap();
    let total = dry.ops() - before;
    drop(db);
    // The purge thread deletes the files a resume leaves unreferenced beside it, so a run may need an operation
    // or two more than the dry run counted (or fewer) before the resume gets through. Regression: the test asked
    // for exactly the dry run's count and failed now and then.
    let slack = 4;
    for budget in 0..=total + slack {
        let fs = Arc::new(CrashFs::new());
        let db = prefix(&fs);
        fs.set_op_budget(budget);
        let resumed = db.resume();
        if budget == 0 || budget == total + slack {
            assert_eq!(resumed.is_ok(), budget > 0, "budget {budget} of {total}");
        }
        let crashed: Vec<CrashFs> = (0..4).map(|c| fs.crash(c)).chain([fs.crash_drop_unsynced()]).collect();
        drop(db);
        for (c, after) in crashed.into_iter().enumerate() {
            let f: Arc<dyn vfs::Fs> = Arc::new(after);
            let db =
                Db::open(f, "/db", o.clone()).unwrap_or_else(|e| panic!("budget {budget} crash {c}: {e}"));
            let got: Model =
                db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap().into_iter().collect();
            let synced = got.keys().filter(|k| k.starts_with(b"s")).count();
            assert_eq!(synced, 30, "budget {budget} crash {c}: synced writes lost");
            let unsynced: Vec<_> = got.keys().filter(|k| k.starts_with(b"n")).cloned().collect();
            let want: Vec<_> = (0..unsynced.len()).map(|i| format!("n{i:02}").into_bytes()).collect();
            assert_eq!(unsynced, want, "budget {budget} crash {c}: unsynced writes are no prefix");
        }
    }
}
