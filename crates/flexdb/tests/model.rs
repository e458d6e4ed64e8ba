//! Model-based randomized tests: FlexDB against a `BTreeMap`, with reopens, range deletes, batches that mix
//! both kinds of delete with puts, and scans; and the same with snapshots read against copies of the model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use flexdb::wal::Op;
use flexdb::{Db, Options, Pair, Snapshot, WriteOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn seeds() -> Vec<u64> {
    testkit::seeds(&[1, 2, 3, 0xfeed])
}

fn key(rng: &mut SmallRng, space: u32) -> Vec<u8> {
    format!("k{:06}", rng.random_range(0..space)).into_bytes()
}

fn value(rng: &mut SmallRng) -> Vec<u8> {
    let n = match rng.random_range(0..10) {
        0 => 0,
        1 => rng.random_range(1000..6000),
        _ => rng.random_range(1..60),
    };
    (0..n).map(|_| rng.random::<u8>()).collect()
}

/// A batch of two to five puts, deletes and range deletes (some empty), applied to `model` as the store must.
fn batch(rng: &mut SmallRng, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<Op> {
    let mut ops = Vec::new();
    for _ in 0..rng.random_range(2..6) {
        let k = key(rng, 600);
        ops.push(match rng.random_range(0..4) {
            0 | 1 => {
                let v = value(rng);
                model.insert(k.clone(), v.clone());
                Op::Put(k.into(), v.into())
            }
            2 => {
                model.remove(&k);
                Op::Delete(k.into())
            }
            _ => {
                let e = key(rng, 600);
                // A reversed range is an invalid argument (it rejects the batch); equal bounds delete nothing.
                let (k, e) = if k <= e { (k, e) } else { (e, k) };
                if k < e {
                    model.retain(|x, _| *x < k || *x >= e);
                }
                Op::DeleteRange(k.into(), e.into())
            }
        });
    }
    ops
}

fn check_all(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, seed: u64, step: usize) {
    let got = db.scan(b"", None, usize::MAX, false).unwrap();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got.len(), want.len(), "seed {seed} step {step}: scan length");
    assert!(got == want, "seed {seed} step {step}: full scan differs");
}

/// What a scan of `model` must return.
fn model_scan(
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    a: &[u8],
    b: &[u8],
    limit: usize,
    reverse: bool,
) -> Vec<Pair> {
    if a >= b {
        return Vec::new();
    }
    let it = model.range(a.to_vec()..).take_while(|(k, _)| k.as_slice() < b);
    let pairs = it.map(|(k, v)| (k.clone(), v.clone()));
    if reverse {
        pairs.collect::<Vec<_>>().into_iter().rev().take(limit).collect()
    } else {
        pairs.take(limit).collect()
    }
}

/// Live snapshots with the model as it was when each was taken.
type Snaps = Vec<(Snapshot, BTreeMap<Vec<u8>, Vec<u8>>)>;

/// One snapshot step: take one (at most six live), release one, or read through one against its copy.
fn snapshot_step(
    db: &Db,
    snaps: &mut Snaps,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut SmallRng,
    at: &str,
) {
    match rng.random_range(0..10) {
        0..3 if snaps.len() < 6 => snaps.push((db.snapshot(), model.clone())),
        0..3 => {}
        3..5 if !snaps.is_empty() => {
            let i = rng.random_range(0..snaps.len());
            snaps.remove(i);
        }
        3..5 => {}
        _ if snaps.is_empty() => {}
        r => {
            let (snap, want) = &snaps[rng.random_range(0..snaps.len())];
            let a = key(rng, 600);
            if r < 7 {
                assert_eq!(
                    db.get_at(&a, snap).unwrap(),
                    want.get(&a).cloned(),
                    "{at}: get {a:?} at {snap:?}"
                );
            } else {
                let b = key(rng, 600);
                let (limit, reverse) = (rng.random_range(1..40), rng.random_bool(0.3));
                let got = db.scan_at(&a, Some(&b), limit, reverse, snap).unwrap();
                let expect = model_scan(want, &a, &b, limit, reverse);
                assert!(got == expect, "{at}: scan {a:?}..{b:?} limit {limit} rev {reverse} at {snap:?}");
            }
        }
    }
    let st = db.stats();
    assert_eq!(st.snapshots, snaps.len() as u64, "{at}: live snapshots");
    if snaps.is_empty() {
        assert_eq!((st.snapshot_preimages, st.snapshot_preimage_bytes), (0, 0), "{at}: pre-images left");
    }
}

fn run(seed: u64, snapshots: bool) {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let dir = Path::new("db");
    let mut opts = Options::tiny();
    // Odd seeds let the table's data file grow to twice its live bytes before FlexFile GC, as the store's default
    // does; even seeds keep the tiny options' constant GC.
    if seed % 2 == 1 {
        opts.flexfile.gc_start_utilization = (1, 2);
    }
    let mut db = Db::open(fs.clone(), dir, opts.clone()).unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = SmallRng::seed_from_u64(seed);
    let w = WriteOptions::default();
    let steps = 12000 * testkit::scale();
    // Counters restart at every open: (memtables committed, interval splits) of the closed instances.
    let mut earlier = (0u64, 0u64);
    let mut snaps: Snaps = Vec::new();
    for step in 0..steps {
        if snapshots {
            snapshot_step(&db, &mut snaps, &model, &mut rng, &format!("seed {seed} step {step}"));
        }
        match rng.random_range(0..100) {
            0..42 => {
                let (k, v) = (key(&mut rng, 600), value(&mut rng));
                db.put(&k, &v, w).unwrap();
                model.insert(k, v);
            }
            42..45 => {
                let ops = batch(&mut rng, &mut model);
                db.write(ops, w).unwrap();
            }
            45..60 => {
                let k = key(&mut rng, 600);
                db.delete(&k, w).unwrap();
                model.remove(&k);
            }
            60..62 => {
                let a = key(&mut rng, 600);
                let b = key(&mut rng, 600);
                let (a, b) = if a <= b { (a, b) } else { (b, a) };
                db.delete_range(&a, &b, w).unwrap();
                let doomed: Vec<_> = model.range(a.clone()..b.clone()).map(|(k, _)| k.clone()).collect();
                for k in doomed {
                    model.remove(&k);
                }
            }
            62..85 => {
                let k = key(&mut rng, 600);
                assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned(), "seed {seed} step {step}: get {k:?}");
            }
            85..95 => {
                let a = key(&mut rng, 600);
                let limit = rng.random_range(1..40);
                let reverse = rng.random_bool(0.3);
                let b = key(&mut rng, 600);
                let got = db.scan(&a, Some(&b), limit, reverse).unwrap();
                let want = model_scan(&model, &a, &b, limit, reverse);
                assert!(
                    got == want,
                    "seed {seed} step {step}: scan {a:?}..{b:?} limit {limit} rev {reverse}"
                );
            }
            95..98 => db.flush().unwrap(),
            _ => {
                let st = db.stats();
                earlier = (earlier.0 + st.memtables_committed, earlier.1 + st.interval_splits);
                db.close().unwrap();
                db = Db::open(fs.clone(), dir, opts.clone()).unwrap();
                check_all(&db, &model, seed, step);
                // Snapshots do not survive a reopen: their handles are refused by the new instance.
                for (snap, _) in snaps.drain(..) {
                    assert!(matches!(db.get_at(b"k", &snap), Err(flexdb::Error::InvalidArgument(_))));
                }
            }
        }
    }
    db.flush().unwrap();
    db.check(true).unwrap();
    check_all(&db, &model, seed, steps);
    let st = db.stats();
    // Over the whole run (a reopen near the end leaves the last instance little to do).
    let (committed, splits) = (earlier.0 + st.memtables_committed, earlier.1 + st.interval_splits);
    assert!(committed > 0 && splits > 0, "seed {seed}: {committed} commits, {splits} splits; {st:?}");
    db.close().unwrap();
    let db = Db::open(fs, dir, opts).unwrap();
    db.check(true).unwrap();
    check_all(&db, &model, seed, steps + 1);
}

#[test]
fn randomized_against_btreemap() {
    for seed in seeds() {
        run(seed, false);
    }
}

#[test]
fn snapshots_randomized_against_model_copies() {
    for seed in seeds() {
        run(seed, true);
    }
}

#[test]
fn empty_values_are_not_deletes() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let w = WriteOptions::default();
    let db = Db::open(fs.clone(), Path::new("d"), Options::tiny()).unwrap();
    db.put(b"a", b"", w).unwrap();
    db.put(b"b", b"x", w).unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(Vec::new()));
    db.close().unwrap();
    let db = Db::open(fs, Path::new("d"), Options::tiny()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(Vec::new()));
    assert_eq!(db.scan(b"", None, 10, false).unwrap().len(), 2);
}

#[test]
fn large_values_roundtrip() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let w = WriteOptions::default();
    let db = Db::open(fs.clone(), Path::new("d"), Options::tiny()).unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7) as u8).collect();
    db.put(b"big", &big, w).unwrap();
    db.put(b"a", b"1", w).unwrap();
    db.put(b"c", b"2", w).unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(b"big").unwrap().as_deref(), Some(&big[..]));
    db.close().unwrap();
    let db = Db::open(fs, Path::new("d"), Options::tiny()).unwrap();
    assert_eq!(db.get(b"big").unwrap().as_deref(), Some(&big[..]));
    db.check(true).unwrap();
}

#[test]
fn missing_store_is_an_error_without_create() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let opts = Options { create_if_missing: false, ..Options::tiny() };
    assert!(Db::open(fs, Path::new("nope"), opts).is_err());
}

#[test]
fn readers_run_concurrently_with_writes_and_commits() {
    // Each writer thread owns a key prefix and writes increasing versions; readers must never see a version go
    // backwards or a key vanish once written (keys are never deleted here).
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let db = Arc::new(
        Db::open(fs, Path::new("c"), Options { commit_lock_bytes: 256, ..Options::tiny() }).unwrap(),
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for r in 0..2u64 {
        let (db, stop) = (db.clone(), stop.clone());
        readers.push(std::thread::spawn(move || {
            let mut seen = std::collections::HashMap::new();
            let mut rng = SmallRng::seed_from_u64(r);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let k = format!("k{:03}", rng.random_range(0..200));
                if let Some(v) = db.get(k.as_bytes()).unwrap() {
                    let ver = u32::from_le_bytes(v[..4].try_into().unwrap());
                    let prev = seen.insert(k.clone(), ver).unwrap_or(0);
                    assert!(ver >= prev, "{k}: version went back from {prev} to {ver}");
                } else {
                    assert!(!seen.contains_key(&k), "{k} vanished");
                }
            }
        }));
    }
    let w = WriteOptions::default();
    for ver in 1..=40u32 {
        for i in 0..200 {
            let mut v = ver.to_le_bytes().to_vec();
            v.extend(std::iter::repeat_n(b'x', (i * 7 + ver as usize) % 90));
            db.put(format!("k{i:03}").as_bytes(), &v, w).unwrap();
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    db.flush().unwrap();
    db.check(true).unwrap();
    assert!(db.stats().commit_lock_releases > 0);
}

/// Regression: a limited scan whose first `limit` memtable entries are all tombstones over committed keys must
/// look further (the scan reads each source only up to a cap and retries with a larger one), forward and reverse.
#[test]
fn limited_scan_skips_more_tombstones_than_its_limit() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let w = WriteOptions::default();
    let opts = Options { memtable_bytes: 1 << 20, ..Options::tiny() };
    let db = Db::open(fs, Path::new("d"), opts).unwrap();
    for i in 0..200u32 {
        db.put(format!("k{i:04}").as_bytes(), b"v", w).unwrap();
    }
    db.flush().unwrap();
    for i in 0..190u32 {
        db.delete(format!("k{i:04}").as_bytes(), w).unwrap();
    }
    db.put(b"k0500", b"new", w).unwrap();
    let got: Vec<Vec<u8>> = db.scan(b"", None, 3, false).unwrap().into_iter().map(|p| p.0).collect();
    assert_eq!(got, vec![b"k0190".to_vec(), b"k0191".to_vec(), b"k0192".to_vec()]);
    let got: Vec<Vec<u8>> = db.scan(b"", Some(b"k0195"), 3, true).unwrap().into_iter().map(|p| p.0).collect();
    assert_eq!(got, vec![b"k0194".to_vec(), b"k0193".to_vec(), b"k0192".to_vec()]);
    let all = db.scan(b"k0100", None, usize::MAX, false).unwrap();
    assert_eq!(all.len(), 11);
    assert_eq!(all.last().unwrap(), &(b"k0500".to_vec(), b"new".to_vec()));
    // Reverse from the top: 0500 first, then the committed survivors.
    let got: Vec<Vec<u8>> = db.scan(b"", None, 2, true).unwrap().into_iter().map(|p| p.0).collect();
    assert_eq!(got, vec![b"k0500".to_vec(), b"k0199".to_vec()]);
}
