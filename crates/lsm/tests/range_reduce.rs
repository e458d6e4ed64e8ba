//! RangeReduce's query-driven compactions, deterministically: a rewrite keeps what snapshots older than it need
//! (range tombstones in the chosen levels included), a conflicting compaction aborts it (never the query), a
//! query that stops early or exceeds the SLO does not rewrite, Bounded-Merge does not rewrite the same range
//! twice, Level-Renaming keeps the data, crashes at every file-system operation of a rewrite lose nothing, and
//! so do I/O errors there, which `Db::resume` gets past.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use lsm::{Db, Options, RangeReduceMode, ReadOptions, WriteOptions};
use vfs::{CrashFs, Fault, FaultFs, FaultKind, Op};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn k(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn opts(mode: RangeReduceMode) -> Options {
    let mut o = Options {
        create_if_missing: true,
        write_buffer_size: 8192,
        max_bytes_for_level_base: 32 << 10,
        max_bytes_for_level_multiplier: 4,
        target_file_size_base: 4096,
        block_size: 512,
        level0_file_num_compaction_trigger: 2,
        ..Options::default()
    };
    o.range_reduce.mode = mode;
    o.range_reduce.level_renaming = false;
    o
}

fn open(fs: &Arc<dyn vfs::Fs>, o: &Options) -> Db {
    Db::open(fs.clone(), "/db", o.clone()).unwrap()
}

fn w() -> WriteOptions {
    WriteOptions::default()
}

fn model_range(m: &Model, lo: &[u8], hi: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.range(lo.to_vec()..hi.to_vec()).map(|(a, b)| (a.clone(), b.clone())).collect()
}

fn check(db: &Db, snap: Option<&lsm::Snapshot>, m: &Model, ctx: &str) {
    let ro = ReadOptions { snapshot: snap, ..Default::default() };
    // Through a plain (unbounded) iterator so the check itself never plans a rewrite.
    let mut it = db.iter(&ro).unwrap();
    it.seek_to_first();
    let got = it.collect_forward(usize::MAX).unwrap();
    let want: Vec<_> = m.iter().map(|(a, b)| (a.clone(), b.clone())).collect();
    assert_eq!(got.len(), want.len(), "{ctx}: key count");
    assert_eq!(got, want, "{ctx}");
    for (key, v) in m.iter().step_by(97) {
        assert_eq!(db.get_opt(&ro, key).unwrap().as_ref(), Some(v), "{ctx}: get");
    }
}

/// Loads keys 0..n and settles them in the deeper levels.
fn load(db: &Db, m: &mut Model, n: u32) {
    for i in 0..n {
        let v = format!("v0-{i}-{}", "x".repeat(20)).into_bytes();
        db.put(&w(), &k(i), &v).unwrap();
        m.insert(k(i), v);
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
}

/// `o` without automatic compactions. A regular compaction racing a query would consume the files the query
/// read and (correctly) abort its rewrite; the tests about what a rewrite does keep it out of the way.
/// Rewrites and flushes still run.
fn quiet(o: &Options) -> Options {
    Options { disable_auto_compactions: true, ..o.clone() }
}

/// A database loaded with keys 0..n settled in the deeper levels, reopened with `quiet` options.
fn loaded(fs: &Arc<dyn vfs::Fs>, o: &Options, m: &mut Model, n: u32) -> Db {
    let db = open(fs, o);
    load(&db, m, n);
    db.close().unwrap();
    open(fs, &quiet(o))
}

/// Overwrites every `step`-th key of `[a, b)` and flushes the result into L0.
fn overwrite(db: &Db, m: &mut Model, a: u32, b: u32, step: usize, tag: &str) {
    for i in (a..b).step_by(step) {
        let v = format!("{tag}-{i}").into_bytes();
        db.put(&w(), &k(i), &v).unwrap();
        m.insert(k(i), v);
    }
    db.flush().unwrap();
}

fn delete_range(db: &Db, m: &mut Model, a: u32, b: u32) {
    db.delete_range(&w(), &k(a), &k(b)).unwrap();
    let ks: Vec<_> = m.range(k(a)..k(b)).map(|(x, _)| x.clone()).collect();
    for x in ks {
        m.remove(&x);
    }
}

fn levels_meeting(db: &Db, lo: &[u8], hi: &[u8]) -> Vec<usize> {
    let mut l: Vec<usize> = db
        .files()
        .iter()
        .filter(|f| {
            let s = &f.info.smallest[..f.info.smallest.len() - 8];
            let e = &f.info.largest[..f.info.largest.len() - 8];
            s < hi && e >= lo
        })
        .map(|f| f.level)
        .collect();
    l.dedup();
    l
}

#[test]
fn rewrite_keeps_what_older_snapshots_and_range_tombstones_need() {
    for mode in [RangeReduceMode::BlindMergeOnScan, RangeReduceMode::FileSizeAwareMergeOnScan] {
        let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
        let o = opts(mode);
        let mut m = Model::new();
        let db = loaded(&fs, &o, &mut m, 3000);
        let s1 = db.snapshot();
        let m1 = m.clone();
        // Newer versions, point deletes and a range tombstone straddling the query's lower bound, in L0.
        overwrite(&db, &mut m, 1000, 2000, 2, "v1");
        delete_range(&db, &mut m, 950, 1100);
        for i in (1200..1300).step_by(3) {
            db.delete(&w(), &k(i)).unwrap();
            m.remove(&k(i));
        }
        db.flush().unwrap();
        let s2 = db.snapshot();
        let m2 = m.clone();
        // Unflushed writes in range: newer than anything the rewrite moves.
        overwrite(&db, &mut m, 1500, 1510, 1, "mem");
        let (lo, hi) = (k(1000), k(2000));
        let before = levels_meeting(&db, &lo, &hi);
        assert!(before.len() >= 2, "{mode:?}: setup must spread the range over levels: {before:?}");
        let got = db.scan(&ReadOptions::default(), &lo, &hi, usize::MAX).unwrap();
        assert_eq!(got, model_range(&m, &lo, &hi), "{mode:?}: the query's own answer");
        db.wait_for_compactions().unwrap();
        let st = db.stats().range_reduce;
        assert!(st.rewrites >= 1, "{mode:?}: no rewrite: {st:?}");
        assert!(st.rewrite_write_bytes > 0 && st.rewrite_files_removed > 0, "{mode:?}: {st:?}");
        check(&db, None, &m, &format!("{mode:?} latest after rewrite"));
        check(&db, Some(&s2), &m2, &format!("{mode:?} snapshot before the range tombstone's flush"));
        check(&db, Some(&s1), &m1, &format!("{mode:?} snapshot before every update"));
        drop((s1, s2));
        // Without snapshots a second query may drop the old versions; still correct.
        let got = db.scan(&ReadOptions::default(), &k(900), &k(2100), usize::MAX).unwrap();
        assert_eq!(got, model_range(&m, &k(900), &k(2100)));
        db.wait_for_compactions().unwrap();
        check(&db, None, &m, &format!("{mode:?} after the second query"));
        drop(db);
        let db = open(&fs, &o);
        check(&db, None, &m, &format!("{mode:?} after reopen"));
    }
}

#[test]
fn conflicting_compaction_aborts_the_rewrite_not_the_query() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let o = Options { disable_auto_compactions: true, ..opts(RangeReduceMode::BlindMergeOnScan) };
    let db = open(&fs, &o);
    let mut m = Model::new();
    load(&db, &mut m, 2000);
    db.compact_range(None, None).unwrap();
    overwrite(&db, &mut m, 500, 1500, 2, "v1");
    let ro = ReadOptions { lower_bound: Some(k(400)), upper_bound: Some(k(1600)), ..Default::default() };
    let mut it = db.iter(&ro).unwrap();
    it.seek_to_first();
    let got = it.collect_forward(usize::MAX).unwrap();
    assert_eq!(got, model_range(&m, &k(400), &k(1600)));
    // A compaction changes the claimed levels before the query hands over its collection.
    db.compact_range(None, None).unwrap();
    drop(it);
    db.wait_for_compactions().unwrap();
    let st = db.stats().range_reduce;
    assert_eq!((st.rewrites, st.rewrites_aborted), (0, 1), "{st:?}");
    check(&db, None, &m, "after the aborted rewrite");
}

/// Regression: a flush landing in L0 between the query and its rewrite is allowed (it is newer than everything
/// collected), but the rewrite once deleted every L0 file meeting the range at install time, including the new
/// one it never read, and lost its in-range entries. Only the files the query read may be claimed.
#[test]
fn regression_flush_between_query_and_rewrite_keeps_the_new_l0_file() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let o = Options { disable_auto_compactions: true, ..opts(RangeReduceMode::BlindMergeOnScan) };
    let db = open(&fs, &o);
    let mut m = Model::new();
    load(&db, &mut m, 2000);
    db.compact_range(None, None).unwrap();
    overwrite(&db, &mut m, 500, 1500, 2, "v1");
    let ro = ReadOptions { lower_bound: Some(k(400)), upper_bound: Some(k(1600)), ..Default::default() };
    let mut it = db.iter(&ro).unwrap();
    it.seek_to_first();
    assert_eq!(it.collect_forward(usize::MAX).unwrap(), model_range(&m, &k(400), &k(1600)));
    overwrite(&db, &mut m, 600, 700, 1, "v2");
    drop(it);
    db.wait_for_compactions().unwrap();
    let st = db.stats().range_reduce;
    assert_eq!((st.rewrites, st.rewrites_aborted), (1, 0), "{st:?}");
    check(&db, None, &m, "new L0 data after the rewrite");
}

#[test]
fn partial_scans_and_slo_bound_do_not_rewrite() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let mut o = opts(RangeReduceMode::BlindMergeOnScan);
    let db = open(&fs, &o);
    let mut m = Model::new();
    load(&db, &mut m, 2000);
    overwrite(&db, &mut m, 500, 1500, 2, "v1");
    // No compaction running: a query would otherwise find its files held and not plan at all.
    db.wait_for_compactions().unwrap();
    // A scan stopped by its limit did not read the whole range.
    let got = db.scan(&ReadOptions::default(), &k(400), &k(1600), 10).unwrap();
    assert_eq!(got.len(), 10);
    // A reverse scan reads it backwards (the taps accept one forward pass only).
    let _ = db.rscan(&ReadOptions::default(), &k(400), &k(1600), usize::MAX).unwrap();
    // A snapshot read is not the latest state: never rewritten.
    let s = db.snapshot();
    let _ = db.scan(&ReadOptions { snapshot: Some(&s), ..Default::default() }, &k(400), &k(1600), usize::MAX);
    db.wait_for_compactions().unwrap();
    let st = db.stats().range_reduce;
    assert_eq!(st.rewrites, 0, "{st:?}");
    assert_eq!(st.rewrites_incomplete, 2, "{st:?}");
    assert_eq!(st.range_queries, 3);
    assert!(st.range_query_bytes_read > 0);
    drop((s, db));
    // SLO-bounded: a zero-microsecond bound suppresses every rewrite.
    o.range_reduce.slo_micros = Some(0);
    let db = open(&fs, &o);
    let _ = db.scan(&ReadOptions::default(), &k(400), &k(1600), usize::MAX).unwrap();
    db.wait_for_compactions().unwrap();
    let st = db.stats().range_reduce;
    assert_eq!((st.rewrites, st.rewrites_skipped_slo), (0, 1), "{st:?}");
    check(&db, None, &m, "after skipped rewrites");
}

#[test]
fn bounded_merge_compacts_once_then_leaves_the_range_alone() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let o = opts(RangeReduceMode::BoundedMerge);
    let mut m = Model::new();
    let db = loaded(&fs, &o, &mut m, 3000);
    overwrite(&db, &mut m, 1000, 2000, 2, "v1");
    let (lo, hi) = (k(1000), k(2000));
    for round in 0..3 {
        let got = db.scan(&ReadOptions::default(), &lo, &hi, usize::MAX).unwrap();
        assert_eq!(got, model_range(&m, &lo, &hi), "round {round}");
        db.wait_for_compactions().unwrap();
    }
    let st = db.stats().range_reduce;
    assert_eq!(st.rewrites, 1, "the first query compacts, the repeats find one level: {st:?}");
    assert_eq!(levels_meeting(&db, &k(1001), &k(1999)).len(), 1, "{:?}", db.files());
    check(&db, None, &m, "after bounded merges");
}

/// The collection's memory bound is one budget for all chosen levels. It used to be split evenly between the
/// levels' taps, so a query the plan admitted by its total lost its rewrite when the deepest level (which holds
/// most of the range) passed its half, after everything had been copied.
#[test]
fn regression_memory_bound_is_shared_by_the_chosen_levels() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let mut o = opts(RangeReduceMode::BoundedMerge);
    // In range: 1,000 loaded entries of 14 + 28 bytes in the deeper level (58 KB with their offsets) and 500
    // overwrites of 14 + 7 bytes in L0 (18.5 KB). The whole fits; half the bound does not hold the deeper level.
    o.range_reduce.max_collect_bytes = 100_000;
    let mut m = Model::new();
    let db = loaded(&fs, &o, &mut m, 3000);
    overwrite(&db, &mut m, 1000, 2000, 2, "v1");
    let (lo, hi) = (k(1000), k(2000));
    assert_eq!(levels_meeting(&db, &lo, &hi).len(), 2, "{:?}", db.files());
    let got = db.scan(&ReadOptions::default(), &lo, &hi, usize::MAX).unwrap();
    assert_eq!(got, model_range(&m, &lo, &hi));
    db.wait_for_compactions().unwrap();
    let st = db.stats().range_reduce;
    assert_eq!((st.rewrites_planned, st.rewrites_incomplete, st.rewrites), (1, 0, 1), "{st:?}");
    check(&db, None, &m, "after the rewrite");
}

#[test]
fn level_renaming_moves_levels_down_and_keeps_the_data() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let mut o = opts(RangeReduceMode::BoundedMerge);
    o.range_reduce.level_renaming = true;
    let db = open(&fs, &o);
    let mut m = Model::new();
    load(&db, &mut m, 6000);
    let st = db.stats();
    assert!(st.range_reduce.level_renames >= 1, "{}", st.to_json());
    check(&db, None, &m, "after renaming");
    drop(db);
    let db = open(&fs, &o);
    check(&db, None, &m, "after renaming and reopen");
}

/// A closed database under Blind Merge-on-Scan, every write durable, on which a scan of `[k(400), k(1600))`
/// rewrites: keys 0..2000 settled deep, every other key of `[500, 1500)` newer in L0, a range tombstone inside.
fn rewrite_fixture() -> (Arc<CrashFs>, Options, Model) {
    let base = Arc::new(CrashFs::new());
    let o = opts(RangeReduceMode::BlindMergeOnScan);
    let mut m = Model::new();
    let f: Arc<dyn vfs::Fs> = base.clone();
    let db = open(&f, &o);
    load(&db, &mut m, 2000);
    overwrite(&db, &mut m, 500, 1500, 2, "v1");
    delete_range(&db, &mut m, 700, 760);
    db.flush().unwrap();
    db.close().unwrap();
    (base, o, m)
}

/// Crashes at every file-system operation of a query-driven rewrite (table writes, syncs, directory sync,
/// MANIFEST append and sync), under several power-loss outcomes: everything was durable before, so the
/// recovered database must hold exactly the model.
#[test]
fn crash_inside_a_query_driven_rewrite_loses_nothing() {
    let (base, o, m) = rewrite_fixture();
    let query = |db: &Db| {
        let got = db.scan(&ReadOptions::default(), &k(400), &k(1600), usize::MAX).unwrap();
        assert_eq!(got, model_range(&m, &k(400), &k(1600)));
        let _ = db.wait_for_compactions();
    };
    let dry = Arc::new(base.crash_keep_unsynced());
    let f: Arc<dyn vfs::Fs> = dry.clone();
    let db = open(&f, &quiet(&o));
    let before = dry.ops();
    query(&db);
    let total = dry.ops() - before;
    assert_eq!(db.stats().range_reduce.rewrites, 1);
    drop(db);
    assert!(total > 3, "the rewrite must perform file-system operations ({total})");
    for budget in 0..total {
        let fs = Arc::new(base.crash_keep_unsynced());
        let f: Arc<dyn vfs::Fs> = fs.clone();
        let db = open(&f, &quiet(&o));
        fs.set_op_budget(budget);
        query(&db);
        drop(db);
        fs.clear_op_budget();
        for c in 0..3 {
            let f: Arc<dyn vfs::Fs> = Arc::new(fs.crash(c));
            let db =
                Db::open(f, "/db", o.clone()).unwrap_or_else(|e| panic!("budget {budget} crash {c}: {e}"));
            check(&db, None, &m, &format!("budget {budget} crash {c}"));
        }
    }
}

/// I/O errors (EIO, ENOSPC) at each table write and sync and each MANIFEST write and sync a query-driven rewrite
/// makes. The query's answer is right whatever happens to its rewrite. A rewrite that cannot write its tables
/// is given up (it is an optimisation; nothing was installed): its outputs are removed and writes go on. One
/// whose MANIFEST edit fails stops writes with a typed I/O error, as a compaction's would, until `Db::resume`.
/// Either way reads stay right, another query rewrites once the fault is gone, and a reopen loses nothing.
#[test]
fn io_errors_in_a_query_driven_rewrite_lose_nothing() {
    let (base, o, m) = rewrite_fixture();
    let (lo, hi) = (k(400), k(1600));
    let mut fired = 0;
    for (op, path) in
        [(Op::Write, ".sst"), (Op::Sync, ".sst"), (Op::Write, "MANIFEST"), (Op::Sync, "MANIFEST")]
    {
        for nth in [0, 1, 3] {
            for kind in [FaultKind::Eio, FaultKind::NoSpace] {
                let ctx = format!("{kind:?} at {op:?} {nth} of {path}");
                let copy: Arc<dyn vfs::Fs> = Arc::new(base.crash_keep_unsynced());
                let ffs = Arc::new(FaultFs::new(copy.clone()));
                let f: Arc<dyn vfs::Fs> = ffs.clone();
                let db = open(&f, &quiet(&o));
                let mut m = m.clone();
                ffs.inject(Fault::after(op, nth, kind).on_paths(path).persistent());
                let got = db.scan(&ReadOptions::default(), &lo, &hi, usize::MAX).unwrap();
                assert_eq!(got, model_range(&m, &lo, &hi), "{ctx}: the query's answer");
                let settled = db.wait_for_compactions();
                let st = db.stats().range_reduce;
                if ffs.injected() == 0 {
                    // The rewrite made fewer such calls than `nth`.
                    settled.unwrap_or_else(|e| panic!("{ctx}: no fault fired, yet {e}"));
                    assert_eq!(st.rewrites, 1, "{ctx}");
                    continue;
                }
                fired += 1;
                if path == "MANIFEST" {
                    let e = settled.expect_err(&ctx);
                    assert!(e.is_io(), "{ctx}: {e}");
                    let e = db.put(&w(), &k(1), b"stopped").unwrap_err();
                    assert!(e.is_io(), "{ctx}: a write after the failed edit: {e}");
                    check(&db, None, &m, &format!("{ctx}: reads while stopped"));
                    ffs.clear_all();
                    db.resume().unwrap_or_else(|e| panic!("{ctx}: resume: {e}"));
                } else {
                    settled.unwrap_or_else(|e| panic!("{ctx}: a failed rewrite stopped the database: {e}"));
                    assert_eq!((st.rewrites, st.rewrites_failed), (0, 1), "{ctx}: {st:?}");
                    let live: Vec<u64> = db.files().iter().map(|f| f.info.number).collect();
                    let tables: Vec<String> = copy
                        .list_dir("/db".as_ref())
                        .unwrap()
                        .into_iter()
                        .filter(|n| n.ends_with(".sst"))
                        .collect();
                    assert_eq!(tables.len(), live.len(), "{ctx}: the failed rewrite left tables: {tables:?}");
                    db.put(&w(), &k(1), b"goes on").unwrap();
                    m.insert(k(1), b"goes on".to_vec());
                    ffs.clear_all();
                }
                check(&db, None, &m, &format!("{ctx}: before the next query"));
                overwrite(&db, &mut m, 300, 1700, 3, "v2");
                let got = db.scan(&ReadOptions::default(), &lo, &hi, usize::MAX).unwrap();
                assert_eq!(got, model_range(&m, &lo, &hi), "{ctx}: the next query");
                db.wait_for_compactions().unwrap_or_else(|e| panic!("{ctx}: the next rewrite: {e}"));
                assert!(db.stats().range_reduce.rewrites >= 1, "{ctx}: no rewrite after the fault");
                check(&db, None, &m, &format!("{ctx}: after the next rewrite"));
                db.close().unwrap();
                let db = open(&copy, &o);
                check(&db, None, &m, &format!("{ctx}: after reopening"));
            }
        }
    }
    assert!(
        fired >= 12,
        "only {fired} of the faults fired: the rewrite no longer writes what this test expects"
    );
}

/// Bytes read per range query are counted the same with or without a planned rewrite (the iterator counts them;
/// taps wrap only the levels a rewrite records): every version in range once, plus at most one entry past the
/// bound per source.
#[test]
fn bytes_read_per_query_are_counted_with_and_without_a_rewrite() {
    let (lo, hi) = (k(400), k(1600));
    for mode in [RangeReduceMode::Off, RangeReduceMode::BlindMergeOnScan] {
        let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
        let mut m = Model::new();
        let db = loaded(&fs, &opts(mode), &mut m, 2000);
        overwrite(&db, &mut m, 500, 1500, 2, "v1");
        let digits = |i: u32| i.to_string().len() as u64;
        let ikey = k(0).len() as u64 + 8;
        let versions: u64 = (400..1600u32)
            .map(|i| {
                let v0 = ikey + 3 + digits(i) + 1 + 20;
                let v1 = if (500..1500).contains(&i) && i % 2 == 0 { ikey + 3 + digits(i) } else { 0 };
                v0 + v1
            })
            .sum();
        let before = db.stats().range_reduce.range_query_bytes_read;
        let got = db.scan(&ReadOptions::default(), &lo, &hi, usize::MAX).unwrap();
        assert_eq!(got, model_range(&m, &lo, &hi));
        db.wait_for_compactions().unwrap();
        let st = db.stats().range_reduce;
        let read = st.range_query_bytes_read - before;
        assert!(read >= versions && read <= versions + 1000, "{mode:?}: read {read}, in range {versions}");
        assert_eq!(st.rewrites > 0, mode != RangeReduceMode::Off, "{mode:?}: {st:?}");
    }
}

/// A tap skips the bound checks while its cursor stays in the block it kept last, so it may learn that its
/// child left the range only when the query moves again or ends. A query that walked its whole range and then
/// seeks back is still a complete collection, as when every entry was checked.
#[test]
fn a_walk_past_the_upper_bound_then_a_seek_back_still_compacts() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let o = opts(RangeReduceMode::BlindMergeOnScan);
    let mut m = Model::new();
    let db = loaded(&fs, &o, &mut m, 2000);
    overwrite(&db, &mut m, 500, 1500, 2, "v1");
    // Bounds that fall inside data blocks (512-byte blocks hold about a dozen keys).
    let (lo, hi) = (k(403), k(1597));
    let ro =
        ReadOptions { lower_bound: Some(lo.clone()), upper_bound: Some(hi.clone()), ..Default::default() };
    let mut it = db.iter(&ro).unwrap();
    it.seek_to_first();
    assert_eq!(it.collect_forward(usize::MAX).unwrap(), model_range(&m, &lo, &hi));
    it.seek_to_first();
    assert_eq!(it.collect_forward(3).unwrap(), model_range(&m, &lo, &hi)[..3].to_vec());
    drop(it);
    db.wait_for_compactions().unwrap();
    let st = db.stats().range_reduce;
    assert_eq!((st.rewrites, st.rewrites_incomplete), (1, 0), "{st:?}");
    check(&db, None, &m, "after the rewrite");
    // The same walk stopped one key short of the end is incomplete.
    overwrite(&db, &mut m, 500, 1500, 3, "v2");
    let mut it = db.iter(&ro).unwrap();
    it.seek_to_first();
    let n = model_range(&m, &lo, &hi).len();
    assert_eq!(it.collect_forward(n - 1).unwrap().len(), n - 1);
    drop(it);
    db.wait_for_compactions().unwrap();
    let st = db.stats().range_reduce;
    assert_eq!((st.rewrites, st.rewrites_incomplete), (1, 1), "{st:?}");
    check(&db, None, &m, "after the incomplete query");
}
