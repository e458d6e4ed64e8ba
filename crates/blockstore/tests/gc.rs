//! Data-file garbage collection, index checkpoints and footers: a per-block model with collection interleaved,
//! the conditional replace losing to racing newer writes, power loss at every point of a collection round, and
//! recovery from a checkpoint.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use blockstore::{BLOCK_SIZE, Options, Store, Volume};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use vfs::{CrashFs, CrashMode, Fs, MemFs};

const BLOCKS: u64 = 128;

fn seeds() -> Vec<u64> {
    testkit::seeds(&[0x6C, 11, 12])
}

/// Small files so collection happens often; `auto_gc` is `gc_live_percent`, `garbage` `gc_garbage_percent`.
fn opts_with(auto_gc: u32, garbage: u32) -> Options {
    Options { gc_garbage_percent: garbage, ..opts(auto_gc) }
}

fn opts(auto_gc: u32) -> Options {
    Options {
        segment_cache_bytes: 8 * BLOCK_SIZE,
        journal_flush_bytes: 32 * BLOCK_SIZE as u64,
        // Data syncs (and journal resets) every few batches, not only at checkpoints.
        journal_reset_bytes: 64 * BLOCK_SIZE as u64,
        data_file_bytes: 64 << 10,
        checkpoint_bytes: 64 << 10,
        gc_live_percent: auto_gc,
        gc_in_background: false,
        flush_in_background: false,
        ..Options::default()
    }
}

/// The bytes of a block holding `token` (zeros for token 0): half compressible, half not; with the [`RAW`] bit,
/// incompressible after the token (units of such blocks are stored raw).
fn block_of(token: u64) -> Vec<u8> {
    if token == 0 {
        return vec![0; BLOCK_SIZE];
    }
    let mut b = vec![(token % 251) as u8; BLOCK_SIZE];
    b[..8].copy_from_slice(&token.to_le_bytes());
    let mut x = token.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for byte in &mut b[random_from(token)..] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *byte = x as u8;
    }
    b
}

/// A token bit that makes its block incompressible.
const RAW: u64 = 1 << 40;

/// Where a block's random bytes start.
fn random_from(token: u64) -> usize {
    if token & RAW != 0 { 8 } else { BLOCK_SIZE / 2 }
}

fn tokens(v: &Volume) -> Vec<u64> {
    let mut buf = vec![0u8; BLOCKS as usize * BLOCK_SIZE];
    v.read(&mut buf, 0).unwrap();
    buf.chunks(BLOCK_SIZE)
        .enumerate()
        .map(|(i, c)| {
            let t = u64::from_le_bytes(c[..8].try_into().unwrap());
            assert_eq!(c, block_of(t).as_slice(), "block {i} is not intact");
            t
        })
        .collect()
}

fn write(v: &Volume, model: &mut [u64], first: u64, toks: &[u64]) {
    let data: Vec<u8> = toks.iter().flat_map(|&t| block_of(t)).collect();
    v.write(&data, first * BLOCK_SIZE as u64, false).unwrap();
    model[first as usize..first as usize + toks.len()].copy_from_slice(toks);
}

/// Writes `n` blocks at `first` with fresh tokens from `next`, 30 % of the writes incompressible (stored raw).
fn write_fresh(v: &Volume, model: &mut [u64], next: &mut u64, first: u64, n: u64, rng: &mut impl Rng) {
    let raw = if rng.random_bool(0.3) { RAW } else { 0 };
    let toks: Vec<u64> = (*next..*next + n).map(|t| t | raw).collect();
    *next += n;
    write(v, model, first, &toks);
}

/// Writes the whole volume `passes` times in 8-block writes of fresh tokens from `next`, calling `after` after each.
fn sequential_passes(
    v: &Volume,
    model: &mut [u64],
    next: &mut u64,
    passes: usize,
    mut after: impl FnMut(&Volume),
) {
    for _ in 0..passes {
        for first in (0..BLOCKS).step_by(8) {
            let toks: Vec<u64> = (*next..*next + 8).collect();
            *next += 8;
            write(v, model, first, &toks);
            after(v);
        }
    }
}

fn total_file_bytes(v: &Volume) -> u64 {
    v.info().unwrap().data_files.iter().map(|f| f.bytes).sum()
}

/// Random writes, trims, flushes, collection rounds and reopens against a per-block map; collection reclaims
/// space (the store stays bounded under endless overwrites) and the live accounting always matches the index.
#[test]
fn model_with_gc_interleaved_matches_a_per_block_map() {
    for seed in seeds() {
        let mut rng = SmallRng::seed_from_u64(seed);
        let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
        let auto = [0, 50][(seed % 2) as usize];
        let garbage = [0, 50][(seed / 2 % 2) as usize];
        let store = Store::open(fs.clone(), Path::new("/s"), opts_with(auto, garbage)).unwrap();
        let mut v = store.create_volume("v", BLOCKS * BLOCK_SIZE as u64).unwrap();
        drop(store);
        let mut model = vec![0u64; BLOCKS as usize];
        let mut next = 1u64;
        let (mut removed, mut relocated, mut peak) = (0, 0, 0);
        for step in 0..1500 * testkit::scale() {
            match rng.random_range(0..100) {
                0..=59 => {
                    // Skewed: most writes hit the first quarter, so files empty at different rates.
                    let hot = rng.random_bool(0.7);
                    let span = if hot { BLOCKS / 4 } else { BLOCKS };
                    let first = rng.random_range(0..span);
                    let n = rng.random_range(1..=8).min(BLOCKS - first);
                    write_fresh(&v, &mut model, &mut next, first, n, &mut rng);
                }
                60..=69 => {
                    let first = rng.random_range(0..BLOCKS);
                    let n = rng.random_range(1..=16).min(BLOCKS - first);
                    v.zero(first * BLOCK_SIZE as u64, n * BLOCK_SIZE as u64, false).unwrap();
                    model[first as usize..(first + n) as usize].fill(0);
                }
                70..=77 => v.flush_cache().unwrap(),
                78..=85 => {
                    let r = v.collect_garbage(rng.random_range(20..=100)).unwrap();
                    removed += r.files_removed;
                    relocated += r.blocks_relocated;
                }
                86..=88 => {
                    v.flush().unwrap();
                    let s = v.stats();
                    removed += s.gc_files_removed;
                    drop(v);
                    v = Store::open(fs.clone(), Path::new("/s"), opts_with(auto, garbage))
                        .unwrap()
                        .volume("v")
                        .unwrap();
                }
                _ => assert_eq!(tokens(&v), model, "seed {seed} step {step}"),
            }
            v.check_invariants().unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
            peak = peak.max(total_file_bytes(&v));
        }
        assert_eq!(tokens(&v), model, "seed {seed}: end");
        let s = v.stats();
        removed += s.gc_files_removed;
        relocated += s.gc_blocks_relocated;
        assert!(removed > 10, "seed {seed}: collection removed only {removed} files");
        assert!(relocated > 0, "seed {seed}: collection never relocated live data");
        // 1500 steps write ~6 MiB of blocks; without collection the files would hold all of it.
        assert!(peak < 3 << 20, "seed {seed}: data files peaked at {peak} bytes");
    }
}

/// The conditional replace: writes and trims that land while a round copies live data win over the copy, also
/// after a reopen.
#[test]
fn racing_newer_writes_win_over_relocation() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let store = Store::open(fs.clone(), Path::new("/r"), opts(0)).unwrap();
    let v = store.create_volume("r", BLOCKS * BLOCK_SIZE as u64).unwrap();
    let mut model = vec![0u64; BLOCKS as usize];
    // Fill several files, then overwrite most of it so the early files become mostly garbage.
    let mut next = 1;
    for round in 0..4 {
        for first in (0..BLOCKS).step_by(8) {
            let toks: Vec<u64> = (next..next + 8).collect();
            next += 8;
            if round == 0 || first % 32 != 0 {
                write(&v, &mut model, first, &toks);
            }
        }
        v.flush_cache().unwrap();
    }
    let files_before: Vec<u32> = v.info().unwrap().data_files.iter().map(|f| f.id).collect();
    let v2 = v.clone();
    let mut m2 = model.clone();
    let report = v
        .collect_garbage_with(100, || {
            // Overwrite block 0 and 1 (still in the oldest file) and flush them to the index; trim block 32; put
            // block 64 in the segment cache only.
            write(&v2, &mut m2, 0, &[900_001, 900_002]);
            v2.flush_cache().unwrap();
            v2.zero(32 * BLOCK_SIZE as u64, BLOCK_SIZE as u64, false).unwrap();
            m2[32] = 0;
            write(&v2, &mut m2, 64, &[900_003]);
        })
        .unwrap();
    model = m2;
    assert!(report.files_removed > 0, "{report:?}");
    // Blocks 0 and 1 sit in the oldest, emptiest file, which every round collects.
    assert!(report.blocks_superseded >= 2, "{report:?}");
    assert_eq!(tokens(&v), model);
    v.check_invariants().unwrap();
    let after: Vec<u32> = v.info().unwrap().data_files.iter().map(|f| f.id).collect();
    assert!(files_before.iter().any(|f| !after.contains(f)), "{files_before:?} -> {after:?}");
    v.flush().unwrap();
    drop((v, v2, store));
    let v = Store::open(fs, Path::new("/r"), opts(0)).unwrap().volume("r").unwrap();
    assert_eq!(tokens(&v), model);
    v.check_invariants().unwrap();
}

/// Power loss at every mutating operation of a collection round, in each crash mode: the reopened volume holds
/// exactly the flushed data, and a later round finishes the job.
#[test]
fn power_loss_at_every_point_of_a_gc_round() {
    let base = CrashFs::new();
    let mut model = vec![0u64; BLOCKS as usize];
    {
        let store = Store::open(Arc::new(base.clone()), Path::new("/c"), opts(0)).unwrap();
        let v = store.create_volume("c", BLOCKS * BLOCK_SIZE as u64).unwrap();
        let mut next = 1;
        for round in 0..5 {
            for first in (0..BLOCKS).step_by(4) {
                if round > 0 && first % 16 == 0 {
                    continue;
                }
                let toks: Vec<u64> = (next..next + 4).collect();
                next += 4;
                write(&v, &mut model, first, &toks);
            }
            v.zero(100 * BLOCK_SIZE as u64, 3 * BLOCK_SIZE as u64, false).unwrap();
            model[100..103].fill(0);
            v.flush_cache().unwrap();
        }
        v.flush().unwrap();
    }
    let base = base.crash_drop_unsynced();
    let mut budget = 0;
    let mut finished = false;
    while !finished {
        for mode in [CrashMode::DropUnsynced, CrashMode::KeepUnsynced, CrashMode::Seeded(budget)] {
            let fs = base.crash_with(CrashMode::KeepUnsynced);
            let v = Store::open(Arc::new(fs.clone()), Path::new("/c"), opts(0)).unwrap().volume("c").unwrap();
            fs.set_op_budget(budget);
            finished = v.collect_garbage(100).is_ok();
            drop(v);
            let after = fs.crash_with(mode);
            let v = Store::open(Arc::new(after.clone()), Path::new("/c"), opts(0))
                .unwrap_or_else(|e| panic!("budget {budget} {mode:?}: {e}"))
                .volume("c")
                .unwrap_or_else(|e| panic!("budget {budget} {mode:?}: {e}"));
            v.check_invariants().unwrap_or_else(|e| panic!("budget {budget} {mode:?}: {e}"));
            assert_eq!(tokens(&v), model, "budget {budget} {mode:?}");
            // Whatever the crash left, a new round completes and keeps the data.
            v.collect_garbage(100).unwrap();
            assert_eq!(tokens(&v), model, "budget {budget} {mode:?}: after a second round");
            v.check_invariants().unwrap();
        }
        budget += 1;
        assert!(budget < 500, "collection never finished");
    }
    assert!(budget > 5, "the round had only {budget} mutating operations");
}

/// Regression: automatic collection used to relocate a file's live half the moment it crossed `gc_live_percent`,
/// though a sequential rewrite was about to overwrite that half too (half of every file copied per pass). With the
/// garbage threshold, sequential rewrites only delete files that emptied; without it (0) they relocate.
#[test]
fn regression_sequential_rewrites_delete_dead_files_without_relocating() {
    for (garbage, relocates) in [(50, false), (0, true)] {
        let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
        let store = Store::open(fs, Path::new("/q"), opts_with(50, garbage)).unwrap();
        let v = store.create_volume("q", BLOCKS * BLOCK_SIZE as u64).unwrap();
        let mut model = vec![0u64; BLOCKS as usize];
        let mut next = 1;
        let mut peak = 0;
        sequential_passes(&v, &mut model, &mut next, 12, |v| peak = peak.max(total_file_bytes(v)));
        assert_eq!(tokens(&v), model);
        v.check_invariants().unwrap();
        let s = v.stats();
        assert!(s.gc_files_removed > 10, "garbage {garbage}: {s:?}");
        assert_eq!(s.gc_blocks_relocated > 0, relocates, "garbage {garbage}: {s:?}");
        // Twelve passes wrote 6 MiB of blocks; the files stay within a few volumes' worth.
        assert!(peak < 4 * BLOCKS * BLOCK_SIZE as u64, "garbage {garbage}: files peaked at {peak} bytes");
    }
}

/// Automatic collection on its background thread and the flusher thread while one thread writes and trims: the volume matches the
/// per-block map throughout, collection reclaims space, and the accounting stays exact.
#[test]
fn background_collection_races_writes_without_losing_any() {
    for seed in seeds() {
        let mut rng = SmallRng::seed_from_u64(seed);
        let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
        let o = Options { gc_in_background: true, flush_in_background: true, ..opts_with(50, 0) };
        let store = Store::open(fs.clone(), Path::new("/b"), o).unwrap();
        let v = store.create_volume("b", BLOCKS * BLOCK_SIZE as u64).unwrap();
        let mut model = vec![0u64; BLOCKS as usize];
        let mut next = 1u64;
        for step in 0..2000 * testkit::scale() {
            if rng.random_range(0..10) == 0 {
                let first = rng.random_range(0..BLOCKS);
                let n = rng.random_range(1..=8).min(BLOCKS - first);
                v.zero(first * BLOCK_SIZE as u64, n * BLOCK_SIZE as u64, false).unwrap();
                model[first as usize..(first + n) as usize].fill(0);
            } else {
                let first = rng.random_range(0..BLOCKS);
                let n = rng.random_range(1..=8).min(BLOCKS - first);
                write_fresh(&v, &mut model, &mut next, first, n, &mut rng);
            }
            if step % 97 == 0 {
                assert_eq!(tokens(&v), model, "seed {seed} step {step}");
            }
        }
        v.wait_for_background_gc();
        assert_eq!(tokens(&v), model, "seed {seed}: end");
        v.check_invariants().unwrap();
        let s = v.stats();
        assert!(s.gc_files_removed > 10 && s.gc_blocks_relocated > 0, "seed {seed}: {s:?}");
        v.flush().unwrap();
        drop((v, store));
        let v = Store::open(fs, Path::new("/b"), opts(0)).unwrap().volume("b").unwrap();
        assert_eq!(tokens(&v), model, "seed {seed}: after reopen");
        v.check_invariants().unwrap();
    }
}

/// A background collection round held the volume itself, so dropping the last handle while a round ran left the
/// volume open on the collection thread: it went on writing the volume's files beside whatever opened it next.
/// The round now holds only the volume's shared state, and the drop stops and joins it, so the reopen right
/// after every drop here must find the volume free (its lock file released) and every flushed write in place.
#[test]
fn regression_dropping_a_volume_while_it_collects_closes_it() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let o = Options { gc_in_background: true, flush_in_background: true, ..opts_with(50, 0) };
    let mut model = vec![0u64; BLOCKS as usize];
    let mut next = 1u64;
    let mut rng = SmallRng::seed_from_u64(7);
    Store::open(fs.clone(), Path::new("/d"), o.clone())
        .unwrap()
        .create_volume("d", BLOCKS * BLOCK_SIZE as u64)
        .unwrap();
    let mut rounds = 0;
    for _ in 0..30 {
        let v = Store::open(fs.clone(), Path::new("/d"), o.clone()).unwrap().volume("d").unwrap();
        for _ in 0..300 {
            let first = rng.random_range(0..BLOCKS);
            let n = rng.random_range(1..=8).min(BLOCKS - first);
            write_fresh(&v, &mut model, &mut next, first, n, &mut rng);
        }
        v.flush().unwrap();
        rounds += v.stats().gc_runs;
        // No wait for the collection thread: the drop must end it.
        drop(v);
    }
    assert!(rounds > 0, "no collection round ran");
    let v = Store::open(fs, Path::new("/d"), opts(0)).unwrap().volume("d").unwrap();
    assert_eq!(tokens(&v), model);
    v.check_invariants().unwrap();
}

/// Recovery starts from the checkpoint: a reopen right after one replays no batch, and sealed files older than the
/// checkpoint are not read past their footers (a damaged batch in one goes unnoticed at open; its data is not
/// referenced any more).
#[test]
fn reopen_after_a_checkpoint_replays_nothing() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let store = Store::open(fs.clone(), Path::new("/k"), opts(0)).unwrap();
    let v = store.create_volume("k", BLOCKS * BLOCK_SIZE as u64).unwrap();
    let mut model = vec![0u64; BLOCKS as usize];
    let mut next = 1;
    sequential_passes(&v, &mut model, &mut next, 6, |_| {});
    v.checkpoint().unwrap();
    write(&v, &mut model, 5, &[next]);
    v.flush_cache().unwrap();
    v.flush().unwrap();
    let info = v.info().unwrap();
    assert!(info.data_files.iter().filter(|f| f.sealed).count() >= 2, "{info:?}");
    let first_file = info.data_files[0].id;
    drop((v, store));
    // Damage the first batch of the oldest (sealed, fully superseded) file: open must not read it.
    let path = format!("/k/k/data-{first_file:08}.dat");
    let f = fs.open(Path::new(&path), vfs::OpenMode::ReadWrite).unwrap();
    f.write_all_at(&[0xEE; 8], 8).unwrap();
    let v = Store::open(fs, Path::new("/k"), opts(0)).unwrap().volume("k").unwrap();
    let s = v.stats();
    assert_eq!(s.recovered_batches, 1, "{s:?}");
    assert!(s.recovered_checkpoint_pieces > 0);
    assert_eq!(tokens(&v), model);
    v.check_invariants().unwrap();
}

/// `base:allocation` from the index: never-written and trimmed ranges are holes, written ones data, also for
/// blocks only in the segment cache and for unaligned requests.
#[test]
fn allocation_reports_holes_for_trimmed_and_unwritten_ranges() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let store = Store::open(fs, Path::new("/a"), opts(0)).unwrap();
    let v = store.create_volume("a", BLOCKS * BLOCK_SIZE as u64).unwrap();
    let mut model = vec![0u64; BLOCKS as usize];
    write(&v, &mut model, 4, &[1, 2, 3, 4]);
    v.flush_cache().unwrap();
    write(&v, &mut model, 8, &[5]);
    v.zero(5 * BLOCK_SIZE as u64, BLOCK_SIZE as u64, false).unwrap();
    let bs = BLOCK_SIZE as u64;
    assert_eq!(
        v.allocation(0, 16 * bs).unwrap(),
        vec![(4 * bs, false), (bs, true), (bs, false), (3 * bs, true), (7 * bs, false)]
    );
    assert_eq!(v.allocation(4 * bs + 100, 200).unwrap(), vec![(200, true)]);
    assert_eq!(v.allocation(3 * bs + 10, bs).unwrap(), vec![(bs - 10, false), (10, true)]);
    assert!(v.allocation(BLOCKS * bs, 1).is_err());
}

/// Reads plan under the volume lock and read data files after releasing it: racing writers, cache flushes and
/// collection rounds (which remove data files) never make a read return a torn or misplaced block, and the
/// final contents match the model.
#[test]
fn reads_outside_the_lock_stay_intact_while_writes_and_collection_race() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let store = Store::open(fs, Path::new("/p"), opts(0)).unwrap();
    let v = store.create_volume("p", BLOCKS * BLOCK_SIZE as u64).unwrap();
    // Token `round * 1000 + block`: a reader can tell a block's contents belong to that block.
    let toks = |round: u64| (0..BLOCKS).map(|b| round * 1000 + b + 1).collect::<Vec<_>>();
    let mut model = vec![0u64; BLOCKS as usize];
    write(&v, &mut model, 0, &toks(1));
    let rounds = 60 * testkit::scale() as u64;
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut reads = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) || reads < 10 {
                for (b, t) in tokens(&v).into_iter().enumerate() {
                    assert_eq!(t % 1000, b as u64 + 1, "block {b} holds another block's data");
                }
                reads += 1;
            }
        });
        let collector = s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                v.collect_garbage(100).unwrap();
            }
        });
        let mut rng = SmallRng::seed_from_u64(7);
        for round in 2..2 + rounds {
            let all = toks(round);
            for _ in 0..8 {
                let first = rng.random_range(0..BLOCKS - 8);
                let n = rng.random_range(1..8) as usize;
                write(&v, &mut model, first, &all[first as usize..first as usize + n]);
            }
            v.flush_cache().unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        reader.join().unwrap();
        collector.join().unwrap();
    });
    assert_eq!(tokens(&v), model);
    v.check_invariants().unwrap();
}
