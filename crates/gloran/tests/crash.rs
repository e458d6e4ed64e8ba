//! Crash safety of the index's files under simulated power loss (`vfs::CrashFs`).
//!
//! The test plays the engine: after any change of the live-file set it writes a small manifest (the live files and
//! how many records they hold) with `vfs::write_atomic`, then deletes the obsolete files. Records still in the
//! R-tree buffer are the engine WAL's business and are not expected to survive. The workload runs with a crash
//! point after a random number of mutating file operations (inside flushes, compactions, manifest switches or file
//! deletions); the crashed file system is then cut back to what a power loss leaves (unsynced writes dropped, kept
//! or torn), the index is reopened from the surviving manifest, and every probe must agree with the records the
//! manifest claims: nothing recorded as durable is lost, nothing deleted comes back, and no file is corrupt.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use gloran::{GlobalIndex, IndexOptions, LiveFile};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use vfs::{CrashFs, Fs};

#[derive(Debug, Clone)]
struct Rec {
    start: Vec<u8>,
    end: Vec<u8>,
    seq: u64,
}

const DIR: &str = "/db/gloran";
const MANIFEST: &str = "/db/MANIFEST";

fn seeds() -> Vec<u64> {
    testkit::seeds(&[1, 2, 3, 4])
}

fn opts() -> IndexOptions {
    IndexOptions { buffer_bytes: 600, size_ratio: 3, node_size: 160, ..IndexOptions::default() }
}

fn write_manifest(fs: &dyn Fs, live: &[LiveFile], records: usize) -> vfs::Result<()> {
    let mut s = format!("records {records}\n");
    for f in live {
        s.push_str(&format!("{} {}\n", f.level, f.number));
    }
    vfs::write_atomic(fs, Path::new(MANIFEST), s.as_bytes())
}

fn read_manifest(fs: &dyn Fs) -> (Vec<LiveFile>, usize) {
    let Ok(bytes) = vfs::read_all(fs, Path::new(MANIFEST)) else { return (Vec::new(), 0) };
    let text = String::from_utf8(bytes).unwrap();
    let mut lines = text.lines();
    let records = lines.next().unwrap().strip_prefix("records ").unwrap().parse().unwrap();
    let live = lines
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            LiveFile { level: a.parse().unwrap(), number: b.parse().unwrap() }
        })
        .collect();
    (live, records)
}

/// Runs the workload until it ends or hits the crash point. Returns the record counts of the manifests that
/// may be the durable one: the last one known written, and one being written when the crash hit.
fn workload(fs: Arc<CrashFs>, recs: &[Rec], rng: &mut SmallRng) -> (usize, Option<usize>) {
    let mut durable = 0usize;
    let r = (|| -> gloran::Result<()> {
        let mut idx = GlobalIndex::open(fs.clone(), Path::new(DIR), opts(), &[])?;
        let mut live = idx.live_files();
        for (i, r) in recs.iter().enumerate() {
            idx.insert(&r.start, &r.end, 0, r.seq)?;
            if rng.random_bool(0.05) {
                idx.flush()?;
            }
            if rng.random_bool(0.02) {
                idx.compact_all()?;
            }
            if idx.live_files() != live {
                live = idx.live_files();
                let flushed = i + 1 - idx.buffered_records();
                write_manifest(fs.as_ref(), &live, flushed)?;
                durable = flushed;
                let obsolete = idx.take_obsolete();
                idx.remove_files(&obsolete)?;
            }
        }
        Ok(())
    })();
    match r {
        Ok(()) => (durable, None),
        Err(gloran::Error::Io(e)) if vfs::is_crash_point(&e) => (durable, Some(usize::MAX)),
        Err(e) => panic!("unexpected error before the crash point: {e}"),
    }
}

fn run(seed: u64) {
    eprintln!("crash test seed {seed} (set RANGEDB_SEED to replay)");
    let mut rng = SmallRng::seed_from_u64(seed);
    let n = 300 * testkit::scale();
    let recs: Vec<Rec> = (0..n)
        .map(|i| {
            let a: u16 = rng.random_range(0..2000);
            let len: u16 = rng.random_range(1..200);
            Rec { start: a.to_be_bytes().to_vec(), end: (a + len).to_be_bytes().to_vec(), seq: i as u64 + 1 }
        })
        .collect();
    // Count the workload's mutating operations once, then crash at points spread over it.
    let probe_fs = Arc::new(CrashFs::new());
    let wseed = rng.random();
    workload(probe_fs.clone(), &recs, &mut SmallRng::seed_from_u64(wseed));
    let total = probe_fs.ops();
    for trial in 0..40 {
        let budget = rng.random_range(0..total);
        let fs = Arc::new(CrashFs::new());
        fs.set_op_budget(budget);
        let (durable, _) = workload(fs.clone(), &recs, &mut SmallRng::seed_from_u64(wseed));
        let after = Arc::new(fs.crash(seed * 1000 + trial));
        let (live, count) = read_manifest(after.as_ref());
        assert!(count >= durable, "trial {trial} (budget {budget}): manifest lost acknowledged records");
        let mut idx = GlobalIndex::open(after.clone(), Path::new(DIR), opts(), &live)
            .unwrap_or_else(|e| panic!("trial {trial} (budget {budget}): reopen failed: {e}"));
        idx.remove_unlisted().unwrap();
        idx.check().unwrap();
        let model = &recs[..count];
        for _ in 0..300 {
            let k = rng.random_range(0u16..2300).to_be_bytes();
            let e = rng.random_range(0..=n as u64 + 1);
            let want =
                model.iter().any(|r| r.start.as_slice() <= &k[..] && &k[..] < r.end.as_slice() && e < r.seq);
            assert_eq!(
                idx.covering(&k, e, u64::MAX).unwrap().is_some(),
                want,
                "trial {trial} (budget {budget}): {k:?}@{e} with {count} durable records"
            );
            // The estimator is rebuilt at open from the surviving files: it must not miss a durable record.
            assert_eq!(
                idx.check_entry(&k, e, u64::MAX).unwrap(),
                want,
                "trial {trial} (budget {budget}): check_entry {k:?}@{e} with {count} durable records"
            );
        }
    }
}

#[test]
fn crash_at_random_points_loses_nothing_durable() {
    for seed in seeds() {
        run(seed);
    }
}
