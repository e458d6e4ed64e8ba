//! Model-based randomized test: the global index against a plain list of range records.
//!
//! Operations: range deletes of every overlap shape over short byte keys (including empty and 0x00/0xff-heavy keys),
//! snapshots taken and released, flushes and compactions forced by tiny buffer, node and level sizes, GC watermarks,
//! whole-area purges of regions declared empty (never probed after), flushes in three steps with records, probes and
//! cursors while the frozen buffer is being written (as the engine runs them without the index lock), and reopen
//! from the live-file list with the unflushed records replayed (as the engine replays its WAL). After each step
//! random probes compare point checks (with and without the estimator) and range cursors against the model: an
//! entry `(key, seq)` is deleted for a reader at snapshot `s` iff some record covers it with a sequence number
//! `<= s`. Readers are the latest sequence or a live snapshot; probes stay at or above the GC watermark, which is
//! the contract GC is given.
//!
//! Seeds: `RANGEDB_SEED` if set, else fixed ones; `RANGEDB_TEST_SCALE` multiplies the steps.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use gloran::{Error, EstimatorOptions, FlushJob, GlobalIndex, IndexOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use vfs::{Fs, MemFs};

#[derive(Debug, Clone)]
struct Rec {
    start: Vec<u8>,
    end: Vec<u8>,
    min: u64,
    seq: u64,
}

fn seeds() -> Vec<u64> {
    testkit::seeds(&[1, 2, 3, 0xC0FFEE, 77])
}

const ALPHABET: &[u8] = &[0x00, 0x01, b'a', b'b', 0x7f, 0xff];

fn key(rng: &mut SmallRng) -> Vec<u8> {
    let n = rng.random_range(0..4);
    (0..n).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())]).collect()
}

fn model_covered(recs: &[Rec], k: &[u8], e: u64, snap: u64) -> bool {
    recs.iter()
        .any(|r| r.start.as_slice() <= k && k < r.end.as_slice() && r.min <= e && e < r.seq && r.seq <= snap)
}

/// A region of keys `[start, end)` × sequence numbers below `below` that the test declared empty of entries (the
/// engine's compactions removed what lay there): `purge` may drop the areas inside it, and no probe asks there.
#[derive(Debug, Clone)]
struct Empty {
    start: Vec<u8>,
    end: Vec<u8>,
    below: u64,
}

fn in_empty(empty: &[Empty], k: &[u8], e: u64) -> bool {
    empty.iter().any(|z| z.start.as_slice() <= k && k < z.end.as_slice() && e < z.below)
}

fn options(rng: &mut SmallRng) -> IndexOptions {
    IndexOptions {
        buffer_bytes: rng.random_range(100..1500),
        size_ratio: rng.random_range(2..4),
        node_size: rng.random_range(64..400),
        use_estimator: rng.random_bool(0.8),
        auto_flush: rng.random_bool(0.7),
        estimator: EstimatorOptions {
            bits_per_range: rng.random_range(1..12),
            first_capacity: rng.random_range(1..8),
            virtual_bits: 1 << rng.random_range(1..40),
            max_positions_per_range: rng.random_range(1..40),
            calibration_records: [0, 1, 5, 256][rng.random_range(0..4)],
            stamp_bits: [1, 2, 4, 8][rng.random_range(0..4)],
            ..EstimatorOptions::default()
        },
    }
}

/// A flush begun and not finished, with the sequence number of the last record it holds.
struct Pending {
    job: FlushJob,
    seq: u64,
}

/// Runs and installs the pending flush, if any; the records it held are no longer the WAL's to replay.
fn settle(idx: &mut GlobalIndex, pending: &mut Option<Pending>, unflushed: &mut Vec<Rec>) {
    if let Some(Pending { mut job, seq }) = pending.take() {
        if !job.ran() {
            job.run();
        }
        idx.finish_flush(job).unwrap();
        unflushed.retain(|r| r.seq > seq);
    }
}

/// While a flush is in progress every change of the levels is refused.
fn refused<T: std::fmt::Debug>(r: gloran::Result<T>) {
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "not refused during a flush: {r:?}");
}

/// Runs one seed; returns the areas `purge` dropped.
fn run(seed: u64) -> u64 {
    eprintln!("model test seed {seed} (set RANGEDB_SEED to replay)");
    let mut rng = SmallRng::seed_from_u64(seed);
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let dir = Path::new("/db/gloran");
    let opts = options(&mut rng);
    let mut idx = GlobalIndex::open(fs.clone(), dir, opts.clone(), &[]).unwrap();
    let mut recs: Vec<Rec> = Vec::new();
    let mut unflushed: Vec<Rec> = Vec::new();
    let mut seq = 1u64;
    let mut snapshots: Vec<u64> = Vec::new();
    let mut watermark = 0u64;
    let mut empty: Vec<Empty> = Vec::new();
    let mut purged = 0u64;
    let mut pending: Option<Pending> = None;
    let steps = 400 * testkit::scale();
    for step in 0..steps {
        match rng.random_range(0..100) {
            0..=59 => {
                let (mut a, mut b) = (key(&mut rng), key(&mut rng));
                if a == b {
                    b.push(rng.random());
                }
                if a > b {
                    std::mem::swap(&mut a, &mut b);
                }
                seq += rng.random_range(1..4);
                let min = if rng.random_bool(0.7) { 0 } else { rng.random_range(0..seq) };
                idx.insert(&a, &b, min, seq).unwrap();
                // Without auto-flush the engine flushes on the index's cue (after the one in progress).
                if idx.needs_flush() && pending.is_none() {
                    assert!(!opts.auto_flush, "auto-flush leaves no full buffer behind");
                    idx.flush().unwrap();
                }
                let r = Rec { start: a, end: b, min: min.max(watermark), seq };
                recs.push(r.clone());
                unflushed.push(r);
                if !idx.has_unflushed() {
                    unflushed.clear();
                }
            }
            60..=67 => {
                snapshots.push(seq);
                idx.set_snapshots(snapshots.clone());
            }
            68..=73 => {
                if !snapshots.is_empty() {
                    let i = rng.random_range(0..snapshots.len());
                    snapshots.remove(i);
                    idx.set_snapshots(snapshots.clone());
                }
            }
            74..=76 => {
                if pending.is_some() {
                    refused(idx.flush());
                    settle(&mut idx, &mut pending, &mut unflushed);
                }
                idx.flush().unwrap();
                unflushed.clear();
            }
            77..=80 => {
                // A flush in three steps: begun here, run and installed by a later step.
                if pending.is_some() {
                    refused(idx.begin_flush());
                    settle(&mut idx, &mut pending, &mut unflushed);
                } else if let Some(mut job) = idx.begin_flush().unwrap() {
                    assert!(idx.flushing() && idx.has_unflushed());
                    if rng.random_bool(0.5) {
                        job.run(); // Written, not yet installed: readers still use the frozen buffer.
                    }
                    pending = Some(Pending { job, seq });
                }
            }
            81..=84 => {
                if pending.is_some() {
                    refused(idx.compact_level(0));
                    settle(&mut idx, &mut pending, &mut unflushed);
                }
                let n = idx.level_count();
                if n > 0 {
                    idx.compact_level(rng.random_range(0..n)).unwrap();
                }
            }
            85..=87 => {
                if pending.is_some() {
                    refused(idx.compact_all());
                    settle(&mut idx, &mut pending, &mut unflushed);
                }
                idx.compact_all().unwrap();
                unflushed.clear();
            }
            88..=90 => {
                // GC below the oldest reader: the engine's contract.
                let oldest = snapshots.iter().copied().min().unwrap_or(seq);
                let w = rng.random_range(watermark..=oldest);
                if pending.is_some() {
                    refused(idx.gc(w));
                    settle(&mut idx, &mut pending, &mut unflushed);
                }
                idx.gc(w).unwrap();
                watermark = watermark.max(w);
            }
            91..=93 => {
                // Whole-area GC: declare a region empty (entries below the latest sequence only: later ones may
                // still come) and purge the bottom level's areas that lie inside one.
                let (mut a, mut b) = (key(&mut rng), key(&mut rng));
                if a > b {
                    std::mem::swap(&mut a, &mut b);
                }
                if pending.is_some() {
                    refused(idx.purge(|_| true));
                    settle(&mut idx, &mut pending, &mut unflushed);
                }
                empty.push(Empty { start: a, end: b, below: rng.random_range(0..=seq) });
                let inside = |x: &gloran::Area| {
                    empty.iter().any(|z| z.start <= x.start && x.end <= z.end && x.max_seq <= z.below)
                };
                purged += idx.purge(inside).unwrap();
            }
            _ => {
                // Reopen: the engine's MANIFEST gives the live files; the WAL replays unflushed records. (A crash
                // during a flush is the crash test's; here the flush in progress completes first.)
                if pending.is_some() {
                    refused(idx.remove_unlisted());
                    settle(&mut idx, &mut pending, &mut unflushed);
                }
                let live = idx.live_files();
                let obsolete = idx.take_obsolete();
                idx.remove_files(&obsolete).unwrap();
                drop(idx);
                idx = GlobalIndex::open(fs.clone(), dir, opts.clone(), &live).unwrap();
                assert!(idx.remove_unlisted().unwrap().is_empty(), "no stray files after a clean run");
                idx.set_snapshots(snapshots.clone());
                // GC state is the engine's to restore (it persists its watermark); replay it.
                idx.gc(watermark).unwrap();
                for r in &unflushed {
                    idx.insert(&r.start, &r.end, r.min, r.seq).unwrap();
                }
                if !idx.has_unflushed() {
                    unflushed.clear();
                }
            }
        }
        // Point probes.
        let readers: Vec<u64> = snapshots.iter().copied().chain([seq, u64::MAX]).collect();
        for _ in 0..20 {
            let k = key(&mut rng);
            let e = rng.random_range(watermark..=seq + 1);
            let s = readers[rng.random_range(0..readers.len())];
            if in_empty(&empty, &k, e) {
                continue;
            }
            let want = model_covered(&recs, &k, e, s);
            let got = idx.covering(&k, e, s).unwrap();
            assert_eq!(got.is_some(), want, "step {step}: covering({k:?}, {e}, snapshot {s})");
            if let Some(d) = got {
                assert!(d > e && d <= s, "reported delete {d} must be newer than {e} and visible at {s}");
            }
            assert_eq!(idx.check_entry(&k, e, s).unwrap(), want, "step {step}: check_entry({k:?}, {e}, {s})");
        }
        // A cursor over an ascending key stream.
        if step % 10 == 0 {
            let s = readers[rng.random_range(0..readers.len())];
            let mut keys: Vec<Vec<u8>> = (0..30).map(|_| key(&mut rng)).collect();
            keys.sort();
            let lo = keys[0].clone();
            let mut cur = idx.cursor(&lo, None, s).unwrap();
            for (i, k) in keys.iter().enumerate() {
                // Now and then jump back (an iterator's seek): the cursor must answer from there on.
                if i > 0 && rng.random_bool(0.1) {
                    let j = rng.random_range(0..=i);
                    cur.seek(&keys[j]).unwrap();
                    for back in &keys[j..i] {
                        let e = rng.random_range(watermark..=seq + 1);
                        if in_empty(&empty, back, e) {
                            continue;
                        }
                        assert_eq!(
                            cur.covered(back, e).unwrap(),
                            model_covered(&recs, back, e, s),
                            "after seek"
                        );
                    }
                }
                let e = rng.random_range(watermark..=seq + 1);
                if in_empty(&empty, k, e) {
                    continue;
                }
                assert_eq!(
                    cur.covered(k, e).unwrap(),
                    model_covered(&recs, k, e, s),
                    "step {step}: cursor({k:?}, {e}, snapshot {s})"
                );
            }
            // The same cursor walked back (reverse iteration), then asked in random order (seeks anywhere),
            // without being told where it goes.
            let mut order: Vec<&Vec<u8>> = keys.iter().rev().collect();
            let n = order.len();
            for i in 0..n {
                order.push(&keys[rng.random_range(i..n)]);
            }
            for k in order {
                let e = rng.random_range(watermark..=seq + 1);
                if in_empty(&empty, k, e) {
                    continue;
                }
                assert_eq!(
                    cur.covered(k, e).unwrap(),
                    model_covered(&recs, k, e, s),
                    "step {step}: reverse/random cursor({k:?}, {e}, snapshot {s})"
                );
            }
        }
    }
    settle(&mut idx, &mut pending, &mut unflushed);
    idx.check().unwrap();
    let st = idx.stats();
    // Counters are per process: at least the probes since the last reopen are counted.
    assert!(st.lookups > 0 && st.index_probes > 0);
    if opts.use_estimator {
        assert!(st.estimator_checks > 0);
    }
    purged
}

#[test]
fn index_matches_model() {
    let purged: u64 = seeds().into_iter().map(run).sum();
    assert!(purged > 0, "no purge dropped an area: the purge path went untested");
}
