//! Model-based randomized tests: a volume against a per-block model, with segment-cache flushes, trims, data-file
//! rotation, crashes on `CrashFs` (power loss at random points, also in the middle of an operation) and faults.
//!
//! Every block written by the test holds a unique token (its first 8 bytes) and bytes derived from it, so after a
//! crash each block identifies which write it came from and whether it is intact. Per block the model keeps the
//! current token, the token made durable by the last FLUSH or FUA, and the tokens written since: after a crash a
//! block must hold the durable token or one written after it, never anything else.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use blockstore::{BLOCK_SIZE, Error, Options, Store, Volume};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use vfs::{CrashFs, CrashMode, Fault, FaultFs, FaultKind, Fs, MemFs, Op};

const BLOCKS: u64 = 96;

fn seeds() -> Vec<u64> {
    testkit::seeds(&[0xB10C, 1, 2, 3])
}

fn small_opts() -> Options {
    Options {
        segment_cache_bytes: 8 * BLOCK_SIZE,
        journal_flush_bytes: 32 * BLOCK_SIZE as u64,
        // Data syncs (and journal resets) every few batches, not only at checkpoints.
        journal_reset_bytes: 64 * BLOCK_SIZE as u64,
        // Small files and frequent checkpoints, so sealing, footers, checkpoints and collection all happen.
        data_file_bytes: 64 << 10,
        checkpoint_bytes: 48 << 10,
        gc_live_percent: 60,
        // Flushes and collection rounds inside the write that triggers them, so a seed replays the same crash
        // points (the background versions have their own tests).
        gc_in_background: false,
        flush_in_background: false,
        ..Options::default()
    }
}

/// The bytes of a block holding `token` (zeros for token 0): half compressible, half not, except in every third
/// run of 32 tokens, which is incompressible after the token (units of it are stored raw).
fn block_of(token: u64) -> Vec<u8> {
    if token == 0 {
        return vec![0; BLOCK_SIZE];
    }
    let mut b = vec![(token % 251) as u8; BLOCK_SIZE];
    b[..8].copy_from_slice(&token.to_le_bytes());
    let mut x = token.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for byte in &mut b[random_from(token)..] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *byte = x as u8;
    }
    b
}

/// Where a block's random bytes start.
fn random_from(token: u64) -> usize {
    if (token / 32).is_multiple_of(3) { 8 } else { BLOCK_SIZE / 2 }
}

fn token_of(block: &[u8]) -> Option<u64> {
    let t = u64::from_le_bytes(block[..8].try_into().ok()?);
    (block == block_of(t).as_slice()).then_some(t)
}

#[derive(Clone, Default)]
struct Model {
    cur: Vec<u64>,
    durable: Vec<u64>,
    since: Vec<Vec<u64>>,
}

impl Model {
    fn new() -> Model {
        let n = BLOCKS as usize;
        Model { cur: vec![0; n], durable: vec![0; n], since: vec![Vec::new(); n] }
    }
    fn set(&mut self, b: usize, t: u64, fua: bool) {
        self.cur[b] = t;
        if fua {
            self.durable[b] = t;
            self.since[b].clear();
        } else {
            self.since[b].push(t);
        }
    }
    fn flush(&mut self) {
        self.durable.clone_from(&self.cur);
        self.since.iter_mut().for_each(Vec::clear);
    }
    fn maybe(&mut self, b: usize, t: u64) {
        self.since[b].push(t);
    }
}

fn open(fs: Arc<dyn Fs>) -> Result<Arc<Volume>, Error> {
    Store::open(fs, Path::new("/store"), small_opts())?.volume("vol")
}

fn read_all(v: &Volume) -> Vec<u8> {
    let mut buf = vec![0u8; BLOCKS as usize * BLOCK_SIZE];
    v.read(&mut buf, 0).expect("read");
    buf
}

fn check_exact(v: &Volume, m: &Model, seed: u64, step: usize) {
    let all = read_all(v);
    for (b, blk) in all.chunks(BLOCK_SIZE).enumerate() {
        assert_eq!(token_of(blk), Some(m.cur[b]), "seed {seed} step {step}: block {b}");
    }
}

/// After a crash: every block holds its durable token or a later one, intact. Returns the observed tokens.
fn check_after_crash(v: &Volume, m: &Model, seed: u64, step: usize) -> Vec<u64> {
    let all = read_all(v);
    let mut seen = Vec::new();
    for (b, blk) in all.chunks(BLOCK_SIZE).enumerate() {
        let t = token_of(blk).unwrap_or_else(|| panic!("seed {seed} step {step}: block {b} is corrupt"));
        assert!(
            t == m.durable[b] || m.since[b].contains(&t),
            "seed {seed} step {step}: block {b} holds token {t}, durable {} since {:?}",
            m.durable[b],
            m.since[b]
        );
        seen.push(t);
    }
    seen
}

fn run_crash_model(seed: u64, steps: usize, opts: Options) {
    let open = |fs: Arc<dyn Fs>| Store::open(fs, Path::new("/store"), opts.clone())?.volume("vol");
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut fs = CrashFs::new();
    {
        let store = Store::open(Arc::new(fs.clone()), Path::new("/store"), opts.clone()).unwrap();
        store.create_volume("vol", BLOCKS * BLOCK_SIZE as u64).unwrap();
    }
    fs = fs.crash_drop_unsynced();
    let mut v = open(Arc::new(fs.clone())).unwrap();
    let mut m = Model::new();
    let mut next_token = 1u64;
    let mut armed = false;
    let mut crashes = 0;
    for step in 0..steps {
        let roll = rng.random_range(0..100);
        let mut failed = false;
        if roll < 45 {
            let first = rng.random_range(0..BLOCKS) as usize;
            let n = rng.random_range(1..=6).min(BLOCKS as usize - first);
            let fua = rng.random_bool(0.2);
            let toks: Vec<u64> = (0..n as u64).map(|i| next_token + i).collect();
            next_token += n as u64;
            let data: Vec<u8> = toks.iter().flat_map(|&t| block_of(t)).collect();
            match v.write(&data, (first * BLOCK_SIZE) as u64, fua) {
                Ok(()) => toks.iter().enumerate().for_each(|(i, &t)| m.set(first + i, t, fua)),
                Err(_) => {
                    assert!(armed, "seed {seed} step {step}: write failed without a crash point");
                    toks.iter().enumerate().for_each(|(i, &t)| m.maybe(first + i, t));
                    failed = true;
                }
            }
        } else if roll < 55 {
            let first = rng.random_range(0..BLOCKS) as usize;
            let n = rng.random_range(1..=12).min(BLOCKS as usize - first);
            let fua = rng.random_bool(0.2);
            match v.zero((first * BLOCK_SIZE) as u64, (n * BLOCK_SIZE) as u64, fua) {
                Ok(()) => (first..first + n).for_each(|b| m.set(b, 0, fua)),
                Err(_) => {
                    assert!(armed);
                    (first..first + n).for_each(|b| m.maybe(b, 0));
                    failed = true;
                }
            }
        } else if roll < 65 {
            match v.flush() {
                Ok(()) => m.flush(),
                Err(_) => {
                    assert!(armed);
                    failed = true;
                }
            }
        } else if roll < 68 {
            if v.flush_cache().is_err() {
                assert!(armed);
                failed = true;
            }
        } else if roll < 71 {
            let pct = [30, 80, 100][rng.random_range(0..3)];
            if let Err(e) = v.collect_garbage(pct) {
                assert!(armed, "seed {seed} step {step}: gc failed without a crash point: {e}");
                failed = true;
            }
        } else if roll < 72 {
            if v.checkpoint().is_err() {
                assert!(armed);
                failed = true;
            }
        } else if roll < 85 {
            if !armed {
                check_exact(&v, &m, seed, step);
            }
        } else if roll < 88 && !armed {
            fs.set_op_budget(rng.random_range(0..40));
            v.check_invariants().unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
            armed = true;
        } else if roll < 92 {
            failed = true; // a power cut between operations
        }
        if failed {
            let mode = match rng.random_range(0..3) {
                0 => CrashMode::DropUnsynced,
                1 => CrashMode::KeepUnsynced,
                _ => CrashMode::Seeded(rng.random()),
            };
            drop(v);
            fs = fs.crash_with(mode);
            armed = false;
            crashes += 1;
            v = open(Arc::new(fs.clone())).unwrap_or_else(|e| panic!("seed {seed} step {step}: reopen: {e}"));
            v.check_invariants().unwrap();
            let seen = check_after_crash(&v, &m, seed, step);
            m.cur.clone_from(&seen);
            m.durable = seen;
            m.since.iter_mut().for_each(Vec::clear);
        }
    }
    assert!(crashes > 0, "seed {seed}: the run never crashed");
    if !armed {
        check_exact(&v, &m, seed, steps);
    }
}

#[test]
fn model_with_crashes_keeps_every_acknowledged_write() {
    for seed in seeds() {
        run_crash_model(seed, 600 * testkit::scale(), small_opts());
    }
}

/// The same with the flusher thread and background collection: crash points now fall wherever the threads
/// happen to be, so a seed does not replay exactly, but every interleaving must keep the same promises.
#[test]
fn model_with_crashes_and_background_flushes_keeps_every_acknowledged_write() {
    for seed in seeds() {
        let opts = Options { flush_in_background: true, gc_in_background: true, ..small_opts() };
        run_crash_model(seed, 600 * testkit::scale(), opts);
    }
}

/// Sub-block writes and zeroing (read-modify-write) against a byte model on a plain file system, with reopen.
#[test]
fn unaligned_writes_and_zeroes_match_a_byte_model() {
    for seed in seeds() {
        let mut rng = SmallRng::seed_from_u64(seed);
        let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
        let store = Store::open(fs.clone(), Path::new("/s"), small_opts()).unwrap();
        let size = 32 * BLOCK_SIZE;
        let v = store.create_volume("u", size as u64).unwrap();
        let mut model = vec![0u8; size];
        for step in 0..300 * testkit::scale() {
            let off = rng.random_range(0..size - 1);
            let len = rng.random_range(1..=3 * BLOCK_SIZE).min(size - off);
            match rng.random_range(0..10) {
                0..=5 => {
                    let data: Vec<u8> = (0..len).map(|_| rng.random_range(0..4u8)).collect();
                    v.write(&data, off as u64, rng.random_bool(0.1)).unwrap();
                    model[off..off + len].copy_from_slice(&data);
                }
                6 | 7 => {
                    v.zero(off as u64, len as u64, false).unwrap();
                    model[off..off + len].fill(0);
                }
                8 => v.flush_cache().unwrap(),
                _ => {
                    let mut buf = vec![0u8; len];
                    v.read(&mut buf, off as u64).unwrap();
                    assert_eq!(buf, &model[off..off + len], "seed {seed} step {step}");
                }
            }
        }
        v.flush().unwrap();
        drop((v, store));
        let v = open_named(fs, "/s", "u");
        let mut buf = vec![0u8; size];
        v.read(&mut buf, 0).unwrap();
        assert_eq!(buf, model, "seed {seed}: after reopen");
    }
}

fn open_named(fs: Arc<dyn Fs>, dir: &str, name: &str) -> Arc<Volume> {
    Store::open(fs, Path::new(dir), small_opts()).unwrap().volume(name).unwrap()
}

/// Regression: the store directory's own entry was never synced, so a power cut right after creating a volume lost
/// the whole store.
#[test]
fn created_volume_survives_power_loss() {
    let fs = CrashFs::new();
    let store = Store::open(Arc::new(fs.clone()), Path::new("/store"), small_opts()).unwrap();
    store.create_volume("vol", 8 * BLOCK_SIZE as u64).unwrap();
    let after = fs.crash_drop_unsynced();
    assert_eq!(open(Arc::new(after)).unwrap().size(), 8 * BLOCK_SIZE as u64);
}

/// A failed journal sync poisons the volume (no later write is acknowledged on top of lost data); reopening
/// recovers a state in which every earlier acknowledged write survives.
#[test]
fn failed_sync_poisons_the_volume_and_reopen_recovers() {
    let mem: Arc<dyn Fs> = Arc::new(MemFs::new());
    let ffs = Arc::new(FaultFs::new(mem.clone()));
    let store = Store::open(ffs.clone(), Path::new("/f"), small_opts()).unwrap();
    let v = store.create_volume("f", 16 * BLOCK_SIZE as u64).unwrap();
    v.write(&block_of(1), 0, true).unwrap();
    ffs.inject(Fault::after(Op::Sync, 0, FaultKind::Eio).once());
    assert!(matches!(v.write(&block_of(2), BLOCK_SIZE as u64, true), Err(Error::Io(_))));
    assert!(matches!(v.write(&block_of(3), 0, false), Err(Error::Poisoned { no_space: false, .. })));
    assert!(matches!(v.flush(), Err(Error::Poisoned { no_space: false, .. })));
    drop((v, store));
    let v = open_named(mem, "/f", "f");
    let mut b = vec![0u8; BLOCK_SIZE];
    v.read(&mut b, 0).unwrap();
    assert_eq!(token_of(&b), Some(1));
}

/// Regression: a cache flush whose data-file write fails poisons the volume, which still serves reads; the
/// flushed blocks must stay readable from memory (the index may lack them), with the writer flushing inline and
/// with the flusher thread. Taking the cache apart before the write lost them until a reopen.
#[test]
fn a_failed_flush_keeps_the_cached_blocks_readable() {
    for background in [false, true] {
        let mem: Arc<dyn Fs> = Arc::new(MemFs::new());
        let ffs = Arc::new(FaultFs::new(mem.clone()));
        let opts = Options { flush_in_background: background, ..small_opts() };
        let store = Store::open(ffs.clone(), Path::new("/w"), opts.clone()).unwrap();
        let v = store.create_volume("w", 16 * BLOCK_SIZE as u64).unwrap();
        ffs.inject(Fault::after(Op::Write, 0, FaultKind::Eio).on_paths("data-").persistent());
        let data: Vec<u8> = (1..=8).flat_map(block_of).collect();
        // Eight blocks fill the cache: inline, this write fails; with the flusher, it hands them over.
        let r = v.write(&data, 0, true);
        assert_eq!(r.is_err(), !background, "background {background}: {r:?}");
        if background {
            v.flush_cache().unwrap_err();
        }
        assert!(matches!(v.flush(), Err(Error::Poisoned { no_space: false, .. })), "background {background}");
        let want: Vec<Option<u64>> = (1..=8).map(Some).collect();
        let tokens = |v: &Volume| {
            let mut b = vec![0u8; 8 * BLOCK_SIZE];
            v.read(&mut b, 0).unwrap();
            b.chunks(BLOCK_SIZE).map(token_of).collect::<Vec<_>>()
        };
        assert_eq!(tokens(&v), want, "background {background}: poisoned reads lost the blocks");
        drop((v, store));
        // FUA made them durable in the journal.
        let v = Store::open(mem, Path::new("/w"), opts).unwrap().volume("w").unwrap();
        assert_eq!(tokens(&v), want, "background {background}: after reopen");
    }
}

/// The journal is rewound, not truncated, so recovery ends its record chain where seqs stop increasing and
/// empties the journal when every record it found is in a data file already. Here a batch holding three writes is
/// intact but the journal's second record is torn: the chain found at open is one record long and already in the
/// batch. The next record (seq 4) must survive a second reopen: the journal is emptied at open, so it starts a
/// new chain (replay would also accept it after seq 1, but must not depend on torn bytes in between).
#[test]
fn a_write_after_recovery_continues_the_journal_chain() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let store = Store::open(fs.clone(), Path::new("/j"), small_opts()).unwrap();
    let v = store.create_volume("j", 16 * BLOCK_SIZE as u64).unwrap();
    for t in 1..=3u64 {
        v.write(&block_of(t), (t - 1) * BLOCK_SIZE as u64, true).unwrap();
    }
    v.flush_cache().unwrap();
    drop((v, store));
    // Records are 32 bytes of header and body plus one block each.
    flip_bit(fs.as_ref(), Path::new("/j/j/journal"), (32 + BLOCK_SIZE + 40) as u64);
    let v = open_named(fs.clone(), "/j", "j");
    v.write(&block_of(4), 3 * BLOCK_SIZE as u64, true).unwrap();
    drop(v);
    let v = open_named(fs.clone(), "/j", "j");
    assert_eq!(v.stats().recovered_journal_records, 1, "the FUA write is replayed from the journal");
    let mut b = vec![0u8; 4 * BLOCK_SIZE];
    v.read(&mut b, 0).unwrap();
    let toks: Vec<Option<u64>> = b.chunks(BLOCK_SIZE).map(token_of).collect();
    assert_eq!(toks, vec![Some(1), Some(2), Some(3), Some(4)]);
}

/// Flips one bit (0x10) of the byte at `at` of `path`.
fn flip_bit(fs: &dyn Fs, path: &Path, at: u64) {
    let f = fs.open(path, vfs::OpenMode::ReadWrite).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x10], at).unwrap();
}

/// Two instances never have one volume open: the second open (a second server on the same directory, or an
/// inspection beside a server) was accepted, and both appended to the same journal and data files.
#[test]
fn regression_a_volume_open_in_one_instance_is_refused_to_another() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let first = Store::open(fs.clone(), Path::new("/l"), small_opts()).unwrap();
    let v = first.create_volume("l", 16 * BLOCK_SIZE as u64).unwrap();
    v.write(&block_of(1), 0, true).unwrap();
    let second = Store::open(fs.clone(), Path::new("/l"), small_opts()).unwrap();
    for e in [second.volume("l").unwrap_err(), second.volume_read_only("l").unwrap_err()] {
        assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("in use")), "{e}");
    }
    // The same store shares its open volume instead; a missing volume is still named as missing.
    assert!(Arc::ptr_eq(&first.volume("l").unwrap(), &v));
    assert!(matches!(second.volume("none"), Err(Error::NoSuchVolume(_))));
    assert!(matches!(second.volume_read_only("none"), Err(Error::NoSuchVolume(_))));
    drop((v, first));
    let v = second.volume("l").unwrap();
    let mut b = vec![0u8; BLOCK_SIZE];
    v.read(&mut b, 0).unwrap();
    assert_eq!(b, block_of(1));
}

/// A flipped bit in a compression unit is reported as corruption, not as data and not as an I/O error.
#[test]
fn corrupt_unit_is_reported_as_corruption() {
    let fs = Arc::new(MemFs::new());
    let store = Store::open(fs.clone(), Path::new("/c"), small_opts()).unwrap();
    let v = store.create_volume("c", 16 * BLOCK_SIZE as u64).unwrap();
    let data: Vec<u8> = (1..=6).flat_map(block_of).collect();
    v.write(&data, 0, false).unwrap();
    // A checkpoint syncs the batch: from then on a damaged unit is corruption (an unsynced one is dropped and
    // replayed from the journal, see the next test).
    v.checkpoint().unwrap();
    drop((v, store));
    let path = Path::new("/c/c/data-00000001.dat");
    flip_bit(fs.as_ref(), path, fs.open(path, vfs::OpenMode::ReadOnly).unwrap().len().unwrap() - 10);
    let v = open_named(fs.clone(), "/c", "c");
    let mut b = vec![0u8; 6 * BLOCK_SIZE];
    assert!(matches!(v.read(&mut b, 0), Err(Error::Corruption(_))));
    drop(v);
    // A corrupt volume meta is corruption too.
    let meta = Path::new("/c/c/meta");
    let f = fs.open(meta, vfs::OpenMode::ReadWrite).unwrap();
    f.write_all_at(&[0xFF], 14).unwrap();
    let e = Store::open(fs, Path::new("/c"), small_opts()).unwrap().volume("c").unwrap_err();
    assert!(matches!(e, Error::Corruption(_)), "{e}");
}

/// Batches are written without a sync and the journal keeps their writes until a data sync: a batch whose units
/// are damaged and that no sync covered (a torn write after a crash looks the same) is dropped at recovery, and
/// the journal brings its writes back.
#[test]
fn unsynced_batch_with_damaged_units_is_replayed_from_the_journal() {
    let fs = Arc::new(MemFs::new());
    let store = Store::open(fs.clone(), Path::new("/c"), small_opts()).unwrap();
    let v = store.create_volume("c", 16 * BLOCK_SIZE as u64).unwrap();
    let data: Vec<u8> = (1..=6).flat_map(block_of).collect();
    v.write(&data, 0, false).unwrap();
    v.flush().unwrap();
    v.flush_cache().unwrap();
    assert_eq!(v.stats().data_syncs, 0);
    drop((v, store));
    let path = Path::new("/c/c/data-00000001.dat");
    flip_bit(fs.as_ref(), path, fs.open(path, vfs::OpenMode::ReadOnly).unwrap().len().unwrap() - 10);
    let v = open_named(fs.clone(), "/c", "c");
    let mut b = vec![0u8; 6 * BLOCK_SIZE];
    v.read(&mut b, 0).unwrap();
    assert_eq!(b, data);
}

/// After a data sync empties the journal, nothing but the data file holds a batch's writes: damage in it must be
/// reported, never dropped as if it were a torn unsynced batch (the `synced` mark tells recovery where durable
/// batches end).
#[test]
fn damage_to_a_synced_batch_is_corruption_not_a_torn_tail() {
    let opts = Options {
        journal_reset_bytes: 32 * BLOCK_SIZE as u64,
        checkpoint_bytes: 64 << 20,
        // One data file, never sealed: only the current file's batches can be unsynced.
        data_file_bytes: 64 << 20,
        gc_live_percent: 0,
        ..small_opts()
    };
    let setup = |flip_header: bool| {
        let fs = Arc::new(MemFs::new());
        let store = Store::open(fs.clone(), Path::new("/s"), opts.clone()).unwrap();
        let v = store.create_volume("s", 64 * BLOCK_SIZE as u64).unwrap();
        for i in 0..48u64 {
            v.write(&block_of(i + 1), i * BLOCK_SIZE as u64, false).unwrap();
        }
        let st = v.stats();
        assert!(st.data_syncs >= 1 && st.checkpoints == 0, "{st:?}");
        drop((v, store));
        // The first batch: its header at 0, its first unit's payload well after the header.
        flip_bit(fs.as_ref(), Path::new("/s/s/data-00000001.dat"), if flip_header { 8 } else { 2000 });
        fs
    };
    // A damaged unit: the volume opens (the batch is below the mark, trusted) and the read reports it.
    let fs = setup(false);
    let v = open_named(fs, "/s", "s");
    let mut b = vec![0u8; 8 * BLOCK_SIZE];
    assert!(matches!(v.read(&mut b, 0), Err(Error::Corruption(_))));
    // A damaged header below the synced length: opening reports corruption instead of cutting the file.
    let fs = setup(true);
    let e = Store::open(fs, Path::new("/s"), opts.clone()).unwrap().volume("s").unwrap_err();
    assert!(matches!(e, Error::Corruption(_)), "{e}");
}

/// A flipped bit in a flushed journal record ended the journal there: the volume opened without an error and
/// every acknowledged write after the bit read back as older data or zeros (in an end-to-end run over NBD, 25 of
/// 25 random flips lost between 3 and 40 of 41 flushed writes). A later sync mark now shows the record had been
/// synced, so opening reports corruption.
#[test]
fn regression_damage_to_a_flushed_journal_record_is_corruption() {
    let fs = Arc::new(MemFs::new());
    let store = Store::open(fs.clone(), Path::new("/j"), small_opts()).unwrap();
    let v = store.create_volume("j", 16 * BLOCK_SIZE as u64).unwrap();
    for i in 0..4u64 {
        v.write(&block_of(i + 1), i * BLOCK_SIZE as u64, false).unwrap();
        v.flush().unwrap();
    }
    let journal = Path::new("/j/j/journal");
    let len = fs.open(journal, vfs::OpenMode::ReadOnly).unwrap().len().unwrap();
    assert!(len > 3 * BLOCK_SIZE as u64, "the writes are still in the journal");
    drop((v, store));
    // Inside the first record's block data.
    flip_bit(fs.as_ref(), journal, 100);
    let e = Store::open(fs, Path::new("/j"), small_opts()).unwrap().volume("j").unwrap_err();
    assert!(matches!(e, Error::Corruption(_)), "{e}");
}

/// A volume whose journal may hold sync marks says so in its meta (version 2), so a binary that knows only
/// version 1 refuses it rather than cutting its journal at the first mark. Version-1 volumes are upgraded at the
/// first writable open, and inspection (read-only) leaves them as they are.
#[test]
fn volumes_with_sync_marks_carry_meta_version_2() {
    use blockstore::format::{META_VERSION, VolumeMeta};
    let fs = Arc::new(MemFs::new());
    let meta_path = Path::new("/m/m/meta");
    let version = |fs: &MemFs| VolumeMeta::decode(&vfs::read_all(fs, meta_path).unwrap()).unwrap().version;
    let store = Store::open(fs.clone(), Path::new("/m"), small_opts()).unwrap();
    let v = store.create_volume("m", 16 * BLOCK_SIZE as u64).unwrap();
    v.write(&block_of(1), 0, false).unwrap();
    v.flush().unwrap();
    drop((v, store));
    assert_eq!(version(&fs), META_VERSION);
    // An older volume: its meta as version 1 wrote it.
    let mut old = VolumeMeta::decode(&vfs::read_all(fs.as_ref(), meta_path).unwrap()).unwrap();
    old.version = 1;
    vfs::write_atomic(fs.as_ref(), meta_path, &old.encode()).unwrap();
    let store = Store::open(fs.clone(), Path::new("/m"), small_opts()).unwrap();
    drop(store.volume_read_only("m").unwrap());
    assert_eq!(version(&fs), 1, "inspection changes nothing");
    let v = store.volume("m").unwrap();
    assert_eq!(version(&fs), META_VERSION);
    let mut b = vec![0u8; BLOCK_SIZE];
    v.read(&mut b, 0).unwrap();
    assert_eq!(b, block_of(1));
}

/// I/O compaction shows in the index: the §3.1 example's three consecutive writes become one entry, stored in one
/// unit (a CW over four blocks is compressed whole), and a 2-block write gets a 4-block-class unit of its own.
#[test]
fn compaction_turns_consecutive_writes_into_one_index_entry() {
    let fs = Arc::new(MemFs::new());
    let store = Store::open(fs, Path::new("/g"), Options::default()).unwrap();
    let v = store.create_volume("g", 64 * BLOCK_SIZE as u64).unwrap();
    let w = |first: u64, toks: &[u64]| {
        let d: Vec<u8> = toks.iter().flat_map(|&t| block_of(t)).collect();
        v.write(&d, first * BLOCK_SIZE as u64, false).unwrap();
    };
    w(1, &[1, 2, 3, 4]);
    w(11, &[5, 6]);
    w(5, &[7, 8]);
    w(7, &[9, 10]);
    v.flush_cache().unwrap();
    let info = v.info().unwrap();
    assert_eq!(info.index_pieces, 2, "{info:?}");
    assert_eq!((info.stats.cws_written, info.stats.writes_compacted), (2, 4));
    let before = v.stats().units_read;
    let mut b = vec![0u8; 8 * BLOCK_SIZE];
    v.read(&mut b, BLOCK_SIZE as u64).unwrap();
    assert_eq!(v.stats().units_read - before, 1, "one unit holds the whole CW");
    let toks: Vec<u64> = b.chunks(BLOCK_SIZE).map(|c| token_of(c).unwrap()).collect();
    assert_eq!(toks, vec![1, 2, 3, 4, 7, 8, 9, 10]);
}

/// Regression: the sequence qemu-io runs in `real_clients` (large writes, zeroes, discard, sub-block write) must
/// read back the same after reopening with the default options.
#[test]
fn qemu_io_sequence_survives_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let fs: Arc<dyn Fs> = Arc::new(vfs::OsFs::new());
    let dir = tmp.path().join("q");
    let store = Store::open(fs.clone(), &dir, Options::default()).unwrap();
    let v = store.create_volume("q", 64 << 20).unwrap();
    v.write(&vec![0xab; 1 << 20], 0, false).unwrap();
    v.write(&vec![0xcd; 64 << 10], 1 << 20, true).unwrap();
    v.write(&[0x11; 4096], 3 << 20, false).unwrap();
    v.write(&[0x22; 8192], 3000 << 10, false).unwrap();
    v.zero(512 << 10, 256 << 10, false).unwrap();
    v.zero(3 << 20, 4096, false).unwrap();
    v.write(&[0x33; 1000], 5000, false).unwrap();
    v.flush().unwrap();
    let expect = |v: &Volume, what: &str| {
        let mut b = vec![0u8; 1 << 20];
        v.read(&mut b, 0).unwrap();
        for (i, &x) in b.iter().enumerate() {
            let want = if (5000..6000).contains(&i) {
                0x33
            } else if (512 << 10..768 << 10).contains(&i) {
                0
            } else {
                0xab
            };
            assert_eq!(x, want, "{what}: byte {i}");
        }
    };
    expect(&v, "live");
    drop((v, store));
    let v = Store::open(fs, &dir, Options::default()).unwrap().volume("q").unwrap();
    expect(&v, "reopened");
}
