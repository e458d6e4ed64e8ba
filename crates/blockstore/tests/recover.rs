//! Recovering a stopped volume in place (`Volume::recover`, `volume/recover.rs`): by itself once space is back
//! after the file system ran out of it, by hand after other I/O failures, never after a failed sync by itself;
//! and a randomized model test with out-of-space faults anywhere on the write path.
//!
//! Each block the tests write holds a token and bytes derived from it, so a read shows which write a block came
//! from and that it is whole.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use blockstore::{BLOCK_SIZE, Error, Health, Options, Store, Volume};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use vfs::{Fault, FaultFs, FaultKind, Fs, MemFs, Op};

const BLOCKS: u64 = 64;

/// Longer than the interval at which writes retry a recovery by themselves (one second).
const RETRY_WAIT: Duration = Duration::from_millis(1100);

fn opts(background: bool) -> Options {
    Options {
        segment_cache_bytes: 8 * BLOCK_SIZE,
        journal_flush_bytes: 32 * BLOCK_SIZE as u64,
        journal_reset_bytes: 64 * BLOCK_SIZE as u64,
        data_file_bytes: 64 << 10,
        checkpoint_bytes: 48 << 10,
        gc_live_percent: 60,
        gc_in_background: background,
        flush_in_background: background,
        ..Options::default()
    }
}

/// Incompressible after the token, so data files fill, rotate and get collected; zeros for token 0.
fn block_of(token: u64) -> Vec<u8> {
    if token == 0 {
        return vec![0; BLOCK_SIZE];
    }
    let mut b = Vec::with_capacity(BLOCK_SIZE);
    b.extend_from_slice(&token.to_le_bytes());
    let mut x = token.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while b.len() < BLOCK_SIZE {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b.extend_from_slice(&x.to_le_bytes());
    }
    b
}

fn tokens(v: &Volume) -> Vec<u64> {
    let mut buf = vec![0u8; BLOCKS as usize * BLOCK_SIZE];
    v.read(&mut buf, 0).unwrap();
    buf.chunks(BLOCK_SIZE)
        .map(|b| {
            let t = u64::from_le_bytes(b[..8].try_into().unwrap());
            assert!(b == block_of(t).as_slice(), "a block holds no whole token (it starts with {t})");
            t
        })
        .collect()
}

/// A volume on a `FaultFs` over a `MemFs` (the `MemFs` is for reopening without the faults).
fn volume(background: bool) -> (Arc<dyn Fs>, Arc<FaultFs>, Store, Arc<Volume>) {
    let mem: Arc<dyn Fs> = Arc::new(MemFs::new());
    let ffs = Arc::new(FaultFs::new(mem.clone()));
    let store = Store::open(ffs.clone(), Path::new("/s"), opts(background)).unwrap();
    let v = store.create_volume("v", BLOCKS * BLOCK_SIZE as u64).unwrap();
    (mem, ffs, store, v)
}

fn reopen(mem: Arc<dyn Fs>, background: bool) -> Arc<Volume> {
    Store::open(mem, Path::new("/s"), opts(background)).unwrap().volume("v").unwrap()
}

fn out_of_space(r: &Result<(), Error>) -> bool {
    match r {
        Err(Error::Io(e)) => vfs::is_out_of_space(e),
        Err(Error::Poisoned { no_space, .. }) => *no_space,
        _ => false,
    }
}

/// Per block: the token acknowledged last and the tokens of failed operations since (each may have landed).
struct Model {
    cur: Vec<u64>,
    maybe: Vec<Vec<u64>>,
}

impl Model {
    fn new() -> Model {
        Model { cur: vec![0; BLOCKS as usize], maybe: vec![Vec::new(); BLOCKS as usize] }
    }

    /// Notes the outcome `r` of writing token `t` (0: zeroing) to block `b`.
    fn record(&mut self, b: usize, t: u64, r: &Result<(), Error>, ctx: &str) {
        match r {
            Ok(()) => {
                self.cur[b] = t;
                self.maybe[b].clear();
            }
            Err(_) => {
                assert!(out_of_space(r), "{ctx}: {r:?}");
                self.maybe[b].push(t);
            }
        }
    }

    /// Checks a read of the whole volume and settles every block on what it holds.
    fn settle(&mut self, got: &[u64], ctx: &str) {
        for (b, &t) in got.iter().enumerate() {
            assert!(
                t == self.cur[b] || self.maybe[b].contains(&t),
                "{ctx}: block {b} holds {t}, acknowledged {} or maybe {:?}",
                self.cur[b],
                self.maybe[b]
            );
            self.cur[b] = t;
            self.maybe[b].clear();
        }
    }
}

/// A full file system stops the volume (its memory may be ahead of its files); once space is back, the next
/// write recovers it in place and succeeds, and nothing acknowledged before is lost, with the flusher thread and
/// without (a failed journal append, a failed data-file write).
#[test]
fn a_volume_that_ran_out_of_space_recovers_by_itself_once_space_is_back() {
    for background in [false, true] {
        for path in ["journal", "data-"] {
            let ctx = format!("background {background}, full at {path}");
            let (mem, ffs, store, v) = volume(background);
            let mut m = Model::new();
            for t in 1..=6u64 {
                v.write(&block_of(t), t * BLOCK_SIZE as u64, t % 2 == 0).unwrap();
                m.cur[t as usize] = t;
            }
            ffs.inject(Fault::after(Op::Write, 0, FaultKind::NoSpace).on_paths(path).persistent());
            // While the disk is full, every write fails as out of space or is acknowledged (after the volume
            // recovered, a write may fit in its journal or its cache until the next data-file write).
            let mut failures = 0;
            for t in 100..164u64 {
                let b = (t % BLOCKS) as usize;
                let r = v.write(&block_of(t), b as u64 * BLOCK_SIZE as u64, false);
                m.record(b, t, &r, &ctx);
                failures += u32::from(r.is_err());
            }
            assert!(failures > 0, "{ctx}: the fault never fired");
            // Within a second of the last try the volume is still stopped, and says it will recover by itself.
            if let Health::Stopped { recovers_by_itself, .. } = v.health() {
                assert!(recovers_by_itself, "{ctx}");
            }
            let r = v.flush();
            assert!(r.is_ok() || out_of_space(&r), "{ctx}: {r:?}");
            m.settle(&tokens(&v), &ctx);
            ffs.clear_all();
            std::thread::sleep(RETRY_WAIT);
            v.write(&block_of(900), 0, true).unwrap();
            m.cur[0] = 900;
            v.flush().unwrap();
            assert_eq!(tokens(&v), m.cur, "{ctx}: after recovering");
            assert!(v.stats().recoveries >= 1, "{ctx}");
            assert_eq!(v.health(), Health::Writable, "{ctx}");
            v.check_invariants().unwrap();
            // More writes, a cache flush and a collection round on the recovered state, then a reopen.
            for t in 1000..1040u64 {
                v.write(&block_of(t), (t % BLOCKS) * BLOCK_SIZE as u64, false).unwrap();
                m.cur[(t % BLOCKS) as usize] = t;
            }
            v.flush_cache().unwrap();
            v.collect_garbage(100).unwrap();
            v.flush().unwrap();
            assert_eq!(tokens(&v), m.cur, "{ctx}: after more writes");
            drop((v, store));
            assert_eq!(tokens(&reopen(mem, background)), m.cur, "{ctx}: after reopening");
        }
    }
}

/// A failed sync may have lost data below the page cache, so the volume does not recover by itself even when it
/// was out of space; `recover` does it on request, as a restart would.
#[test]
fn a_failed_sync_keeps_the_volume_stopped_until_recover_is_called() {
    let (mem, ffs, store, v) = volume(false);
    v.write(&block_of(1), 0, true).unwrap();
    ffs.inject(Fault::after(Op::Sync, 0, FaultKind::NoSpace).once());
    assert!(out_of_space(&v.write(&block_of(2), BLOCK_SIZE as u64, true)));
    std::thread::sleep(RETRY_WAIT);
    assert!(matches!(v.write(&block_of(3), 0, false), Err(Error::Poisoned { no_space: true, .. })));
    assert!(
        matches!(v.health(), Health::Stopped { recovers_by_itself: false, .. }),
        "a failed sync is never recovered by itself: {:?}",
        v.health()
    );
    v.recover().unwrap();
    assert_eq!(v.health(), Health::Writable);
    assert_eq!(v.stats().recoveries, 1);
    v.write(&block_of(3), 2 * BLOCK_SIZE as u64, true).unwrap();
    let got = tokens(&v);
    assert_eq!((got[0], got[2]), (1, 3));
    assert!(got[1] == 0 || got[1] == 2, "the failed FUA write may have landed, nothing else: {}", got[1]);
    drop((v, store));
    assert_eq!(tokens(&reopen(mem, false)), got);
}

/// A device error stops the volume until `recover` (or a reopen): a volume that recovered from EIO by itself
/// would hide a failing disk from its operator.
#[test]
fn a_device_error_keeps_the_volume_stopped_until_recover_is_called() {
    for background in [false, true] {
        let (_mem, ffs, _store, v) = volume(background);
        ffs.inject(Fault::after(Op::Write, 0, FaultKind::Eio).on_paths("journal").once());
        assert!(matches!(v.write(&block_of(1), 0, false), Err(Error::Io(_))));
        std::thread::sleep(RETRY_WAIT);
        assert!(matches!(v.write(&block_of(2), 0, false), Err(Error::Poisoned { no_space: false, .. })));
        match v.health() {
            Health::Stopped { reason, recovers_by_itself: false } => {
                assert!(reason.contains("os error 5"), "{reason}")
            }
            h => panic!("background {background}: {h:?}"),
        }
        v.recover().unwrap();
        v.recover().unwrap(); // not stopped any more: nothing to do
        assert_eq!(v.health(), Health::Writable);
        assert_eq!(v.stats().recoveries, 1);
        v.write(&block_of(2), 0, true).unwrap();
        assert_eq!(tokens(&v)[0], 2, "background {background}");
    }
}

/// A volume opened for inspection never becomes writable by recovering.
#[test]
fn recover_refuses_a_read_only_volume() {
    let (mem, _ffs, store, v) = volume(false);
    v.write(&block_of(1), 0, true).unwrap();
    drop((v, store));
    let ro = Store::open(mem, Path::new("/s"), opts(false)).unwrap().volume_read_only("v").unwrap();
    assert_eq!(ro.health(), Health::ReadOnly);
    assert!(matches!(ro.recover(), Err(Error::Poisoned { .. })));
    assert!(matches!(ro.write(&block_of(2), 0, false), Err(Error::Poisoned { .. })));
    assert_eq!(tokens(&ro)[0], 1);
}

/// Random writes, zeroes, flushes, cache flushes and collection rounds against a per-block model, with
/// out-of-space faults armed on random operations and files and recoveries in between: every operation either
/// succeeds or fails as out of space (never corruption, never another error), every acknowledged write survives
/// each recovery and the final reopen, and each block a failed one touched holds its data or what it held before.
#[test]
fn random_out_of_space_faults_and_recoveries_keep_every_acknowledged_write() {
    let ops = [Op::Write, Op::Sync, Op::SyncDir, Op::Open, Op::Rename, Op::SetLen];
    let paths = ["journal", "data-", "checkpoint", "synced", ""];
    for seed in testkit::seeds(&[0x5BACE, 1, 2, 3]) {
        let mut rng = SmallRng::seed_from_u64(seed);
        let background = rng.random_bool(0.5);
        let (mem, ffs, store, v) = volume(background);
        let mut m = Model::new();
        let mut token = 0u64;
        let steps = 600 * testkit::scale();
        for step in 0..steps {
            let ctx = format!("seed {seed} step {step} (background {background})");
            let r = match rng.random_range(0..100) {
                0..55 => {
                    let first = rng.random_range(0..BLOCKS);
                    let n = rng.random_range(1..=4).min(BLOCKS - first);
                    let mut data = Vec::new();
                    let mut written = Vec::new();
                    for b in first..first + n {
                        token += 1;
                        data.extend(block_of(token));
                        written.push((b as usize, token));
                    }
                    let r = v.write(&data, first * BLOCK_SIZE as u64, rng.random_bool(0.2));
                    for (b, t) in written {
                        if r.is_ok() {
                            m.cur[b] = t;
                            m.maybe[b].clear();
                        } else {
                            m.maybe[b].push(t);
                        }
                    }
                    r
                }
                55..63 => {
                    let first = rng.random_range(0..BLOCKS);
                    let n = rng.random_range(1..=8).min(BLOCKS - first);
                    let r = v.zero(first * BLOCK_SIZE as u64, n * BLOCK_SIZE as u64, rng.random_bool(0.2));
                    for b in first as usize..(first + n) as usize {
                        if r.is_ok() {
                            m.cur[b] = 0;
                            m.maybe[b].clear();
                        } else {
                            m.maybe[b].push(0);
                        }
                    }
                    r
                }
                63..70 => v.flush(),
                70..74 => v.flush_cache(),
                74..77 => v.collect_garbage(60).map(|_| ()),
                77..85 => {
                    // An armed `Open` fault can fail the reopening of a data file a read needs (ENOSPC there is
                    // only this test's doing); reads are checked once the faults are cleared.
                    if !ffs.is_armed(Op::Open) {
                        m.settle(&tokens(&v), &ctx);
                    }
                    Ok(())
                }
                85..93 => {
                    let op = ops[rng.random_range(0..ops.len())];
                    let mut f = Fault::after(op, rng.random_range(0..4), FaultKind::NoSpace);
                    let on = paths[rng.random_range(0..paths.len())];
                    if !on.is_empty() {
                        f = f.on_paths(on);
                    }
                    if rng.random_bool(0.5) {
                        f = f.persistent();
                    }
                    if op == Op::Write && rng.random_bool(0.3) {
                        f = f.partial();
                    }
                    ffs.inject(f);
                    Ok(())
                }
                _ => {
                    ffs.clear_all();
                    v.recover().unwrap_or_else(|e| panic!("{ctx}: recover: {e}"));
                    m.settle(&tokens(&v), &ctx);
                    v.check_invariants().unwrap_or_else(|e| panic!("{ctx}: {e}"));
                    Ok(())
                }
            };
            match r {
                Ok(()) => {}
                Err(Error::Io(e)) => assert!(vfs::is_out_of_space(&e), "{ctx}: {e}"),
                // A stop after an early data-file sync failed carries that failure's text, not its errno.
                Err(Error::Poisoned { .. }) => {}
                Err(e) => panic!("{ctx}: unexpected {e}"),
            }
        }
        ffs.clear_all();
        v.recover().unwrap();
        m.settle(&tokens(&v), &format!("seed {seed} end"));
        v.flush().unwrap();
        drop((v, store));
        assert_eq!(tokens(&reopen(mem, background)), m.cur, "seed {seed}: after reopening");
    }
}

/// Writers on their own regions, a thread calling `recover` and one arming and clearing out-of-space faults, all
/// at once, with the flusher and background collection: nothing deadlocks, and each region ends holding what its
/// writer had acknowledged, or the data of its failed writes.
#[test]
fn recovery_beside_writers_readers_and_faults_keeps_every_region() {
    const WRITERS: u64 = 3;
    let region = BLOCKS / WRITERS;
    for seed in testkit::seeds(&[0xC0C0, 1]) {
        let (mem, ffs, store, v) = volume(true);
        let done = std::sync::atomic::AtomicBool::new(false);
        let models: Vec<Model> = std::thread::scope(|sc| {
            let writers: Vec<_> = (0..WRITERS)
                .map(|w| {
                    let v = &v;
                    sc.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(seed ^ w);
                        let mut m = Model::new();
                        for i in 0..1000 * testkit::scale() {
                            let b = w * region + rng.random_range(0..region);
                            let t = (w + 1) << 32 | i as u64;
                            let r = v.write(&block_of(t), b * BLOCK_SIZE as u64, rng.random_bool(0.1));
                            match r {
                                Ok(()) => {
                                    m.cur[b as usize] = t;
                                    m.maybe[b as usize].clear();
                                }
                                Err(Error::Io(_) | Error::Poisoned { .. }) => {
                                    m.maybe[b as usize].push(t);
                                    // As a client would, back off a little before retrying.
                                    std::thread::sleep(Duration::from_micros(100));
                                }
                                Err(e) => panic!("seed {seed}: writer {w}: {e}"),
                            }
                        }
                        m
                    })
                })
                .collect();
            sc.spawn(|| {
                let mut rng = SmallRng::seed_from_u64(seed);
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let on = ["journal", "data-", "checkpoint"][rng.random_range(0..3)];
                    ffs.inject(
                        Fault::after(Op::Write, rng.random_range(0..20), FaultKind::NoSpace).on_paths(on),
                    );
                    std::thread::sleep(Duration::from_micros(rng.random_range(0..400)));
                    ffs.clear_all();
                    let _ = v.recover();
                    let mut buf = vec![0u8; BLOCK_SIZE];
                    let _ = v.read(&mut buf, rng.random_range(0..BLOCKS) * BLOCK_SIZE as u64);
                }
            });
            let models = writers.into_iter().map(|h| h.join().unwrap()).collect();
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            models
        });
        ffs.clear_all();
        v.recover().unwrap();
        let got = tokens(&v);
        let mut all = Model::new();
        for (w, m) in models.iter().enumerate() {
            let r = w * region as usize..(w + 1) * region as usize;
            all.cur[r.clone()].copy_from_slice(&m.cur[r.clone()]);
            all.maybe[r.clone()].clone_from_slice(&m.maybe[r]);
        }
        all.settle(&got, &format!("seed {seed}"));
        assert!(v.stats().recoveries > 0, "seed {seed}: nothing recovered");
        v.flush().unwrap();
        drop((v, store));
        assert_eq!(tokens(&reopen(mem, true)), all.cur, "seed {seed}: after reopening");
    }
}
