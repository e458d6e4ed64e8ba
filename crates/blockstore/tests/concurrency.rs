//! Concurrency of one volume: what runs in parallel with what.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use blockstore::{BLOCK_SIZE, Options, Store};
use vfs::{File, Fs, MemFs, OpenMode};

/// A gate that data-file reads stop at while it is closed.
#[derive(Debug, Default)]
struct Gate {
    closed: AtomicBool,
    waiting: AtomicU64,
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    fn pass(&self) {
        if !self.closed.load(Ordering::SeqCst) {
            return;
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
    }

    fn release(&self) {
        *self.open.lock().unwrap() = true;
        self.closed.store(false, Ordering::SeqCst);
        self.cv.notify_all();
    }
}

#[derive(Debug)]
struct GatedFs {
    inner: MemFs,
    gate: Arc<Gate>,
}

#[derive(Debug)]
struct GatedFile {
    inner: Arc<dyn File>,
    gate: Option<Arc<Gate>>,
}

impl File for GatedFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        if let Some(g) = &self.gate {
            g.pass();
        }
        self.inner.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.inner.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.inner.sync_data()
    }
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.inner.set_len(len)
    }
}

impl Fs for GatedFs {
    fn open(&self, path: &Path, mode: OpenMode) -> std::io::Result<Arc<dyn File>> {
        let inner = self.inner.open(path, mode)?;
        let data = path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("data-"));
        Ok(Arc::new(GatedFile { inner, gate: data.then(|| self.gate.clone()) }))
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }
    fn list_dir(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        self.inner.list_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> std::io::Result<bool> {
        self.inner.exists(path)
    }
    fn lock(&self, path: &Path) -> std::io::Result<Box<dyn vfs::FileLock>> {
        self.inner.lock(path)
    }
}

/// Regression: every read held the volume mutex while it read and decompressed data-file units, so one slow
/// read stalled every write, flush and other read of the volume (and of every NBD connection to it).
#[test]
fn a_read_waiting_on_a_data_file_blocks_no_write_flush_or_cached_read() {
    let gate = Arc::new(Gate::default());
    let fs: Arc<dyn Fs> = Arc::new(GatedFs { inner: MemFs::new(), gate: gate.clone() });
    let store = Store::open(fs, Path::new("/s"), Options::default()).unwrap();
    let v = store.create_volume("v", 1 << 20).unwrap();
    let old = vec![7u8; 4 * BLOCK_SIZE];
    v.write(&old, 0, false).unwrap();
    v.flush_cache().unwrap();

    gate.closed.store(true, Ordering::SeqCst);
    let reader = {
        let v = v.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 4 * BLOCK_SIZE];
            v.read(&mut buf, 0).unwrap();
            buf
        })
    };
    while gate.waiting.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    // The read is inside a data-file read now. Everything below must complete without it.
    let (tx, rx) = mpsc::channel();
    let writer = {
        let v = v.clone();
        std::thread::spawn(move || {
            v.write(&[9u8; BLOCK_SIZE], 8 * BLOCK_SIZE as u64, true).unwrap();
            v.flush().unwrap();
            let mut b = vec![0u8; BLOCK_SIZE];
            v.read(&mut b, 8 * BLOCK_SIZE as u64).unwrap();
            tx.send(b).unwrap();
        })
    };
    let got = rx.recv_timeout(Duration::from_secs(20));
    gate.release();
    let got = got.expect("a write, flush and cached read waited for a read of a data file");
    assert_eq!(got, vec![9u8; BLOCK_SIZE]);
    writer.join().unwrap();
    assert_eq!(reader.join().unwrap(), old);
    v.check_invariants().unwrap();
}

/// Every volume operation beside every other, with small caches, files and checkpoints so flushes, seals,
/// journal resets, checkpoints and background collection happen constantly: writers (writes, zeroes, some FUA)
/// on their own block regions, and beside them `flush`, `flush_cache`, `checkpoint`, `collect_garbage`,
/// `allocation`, `verify` and reads. Each region ends equal to a per-block model, also after a reopen; a hang
/// fails the test instead of stalling the suite.
#[test]
fn all_volume_operations_beside_each_other_complete_and_agree() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        run_all_volume_operations();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("a volume operation hung"),
        Err(e) => panic!("the workload panicked: {e}"),
    }
}

fn run_all_volume_operations() {
    const REGION: u64 = 64; // blocks per writer
    const WRITERS: u64 = 3;
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let opts = tiny_options();
    let store = Store::open(fs.clone(), Path::new("/s"), opts.clone()).unwrap();
    let v = store.create_volume("v", REGION * WRITERS * BLOCK_SIZE as u64).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let helpers: Vec<_> = (0..4)
        .map(|kind| {
            let (v, stop) = (v.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    match kind {
                        0 => v.flush().unwrap(),
                        1 => {
                            v.flush_cache().unwrap();
                            v.checkpoint().unwrap();
                        }
                        2 => {
                            v.collect_garbage(60).unwrap();
                            let blocks = REGION * WRITERS;
                            let runs = v.allocation(0, blocks * BLOCK_SIZE as u64).unwrap();
                            assert!(!runs.is_empty());
                        }
                        _ => {
                            let mut buf = vec![0u8; 8 * BLOCK_SIZE];
                            v.read(&mut buf, (n % (REGION * WRITERS - 8)) * BLOCK_SIZE as u64).unwrap();
                            if n.is_multiple_of(50) {
                                v.verify().unwrap();
                            }
                        }
                    }
                    n += 1;
                }
            })
        })
        .collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let v = v.clone();
            std::thread::spawn(move || {
                // The region's blocks: the byte every block holds (0: never written or zeroed).
                let mut model = vec![0u8; REGION as usize];
                let mut x = t * 7919 + 1;
                for i in 0..400u64 {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let start = (x >> 33) % REGION;
                    let len = 1 + (x >> 20) % 6.min(REGION - start);
                    let off = (t * REGION + start) * BLOCK_SIZE as u64;
                    let fua = i % 37 == 0;
                    if i % 9 == 0 {
                        v.zero(off, len * BLOCK_SIZE as u64, fua).unwrap();
                        model[start as usize..(start + len) as usize].fill(0);
                    } else {
                        let byte = (i % 250 + 1) as u8;
                        v.write(&vec![byte; (len as usize) * BLOCK_SIZE], off, fua).unwrap();
                        model[start as usize..(start + len) as usize].fill(byte);
                    }
                }
                model
            })
        })
        .collect();
    let models: Vec<Vec<u8>> = writers.into_iter().map(|h| h.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    for h in helpers {
        h.join().unwrap();
    }
    let check = |v: &blockstore::Volume| {
        for (t, model) in models.iter().enumerate() {
            for (b, &byte) in model.iter().enumerate() {
                let mut buf = vec![1u8; BLOCK_SIZE];
                v.read(&mut buf, (t as u64 * REGION + b as u64) * BLOCK_SIZE as u64).unwrap();
                assert!(buf.iter().all(|&x| x == byte), "writer {t} block {b}: want {byte}, got {}", buf[0]);
            }
        }
    };
    check(&v);
    v.flush().unwrap();
    v.check_invariants().unwrap();
    let st = v.stats();
    assert!(st.cache_flushes > 10 && st.checkpoints > 10 && st.gc_runs > 0, "{st:?}");
    drop(v);
    drop(store);
    let store = Store::open(fs, Path::new("/s"), opts).unwrap();
    let v = store.volume("v").unwrap();
    check(&v);
    v.check_invariants().unwrap();
}

/// Reads beside one writer, cache flushes, checkpoints and garbage collection that relocates live blocks. Every
/// block the writer writes holds its write's number and its own address, so a reader can tell what it got: each
/// block must be whole (one write's, at its own address, or never written), and a later read of a block must
/// never return an older write than an earlier read did (a relocated copy installed over newer data, or a read
/// plan gone stale, would).
#[test]
fn reads_see_whole_blocks_that_never_go_back_in_time() {
    const BLOCKS: u64 = 96;
    let opts = Options { journal_flush_bytes: 16 * BLOCK_SIZE as u64, ..tiny_options() };
    let store = Store::open(Arc::new(MemFs::new()), Path::new("/s"), opts).unwrap();
    let v = store.create_volume("v", BLOCKS * BLOCK_SIZE as u64).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let helpers: Vec<_> = (0..2)
        .map(|kind| {
            let (v, stop) = (v.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if kind == 0 {
                        v.flush_cache().unwrap();
                        v.checkpoint().unwrap();
                    } else {
                        v.collect_garbage(80).unwrap();
                    }
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (v, stop) = (v.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut seen = vec![0u64; BLOCKS as usize];
                let mut n = r;
                while !stop.load(Ordering::Relaxed) {
                    let start = (n * 13) % (BLOCKS - 12);
                    let mut buf = vec![0u8; 12 * BLOCK_SIZE];
                    v.read(&mut buf, start * BLOCK_SIZE as u64).unwrap();
                    for (i, block) in buf.chunks(BLOCK_SIZE).enumerate() {
                        let b = start + i as u64;
                        let write = stamp_of(block, b);
                        assert!(
                            write >= seen[b as usize],
                            "block {b}: write {write} after {}",
                            seen[b as usize]
                        );
                        seen[b as usize] = write;
                    }
                    n += 2;
                }
            })
        })
        .collect();
    let mut x = 12345u64;
    let writes = 1500 * testkit::scale() as u64;
    for write in 1..=writes {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let start = (x >> 33) % BLOCKS;
        let len = 1 + (x >> 20) % 8.min(BLOCKS - start);
        let mut buf = Vec::with_capacity((len as usize) * BLOCK_SIZE);
        for b in start..start + len {
            buf.extend(stamp(write, b));
        }
        v.write(&buf, start * BLOCK_SIZE as u64, write % 97 == 0).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for h in helpers.into_iter().chain(readers) {
        h.join().unwrap();
    }
    let st = v.stats();
    assert!(st.gc_blocks_relocated > 0 && st.cache_flushes > 10, "{st:?}");
}

/// A block of write `write` at address `block`: the pair repeated (compressible, so units get compressed too).
fn stamp(write: u64, block: u64) -> Vec<u8> {
    let mut pair = write.to_le_bytes().to_vec();
    pair.extend(block.to_le_bytes());
    pair.repeat(BLOCK_SIZE / 16)
}

/// The write number a block read back holds (0: never written). Panics unless it is one whole block of `stamp`.
fn stamp_of(block: &[u8], at: u64) -> u64 {
    if block.iter().all(|&x| x == 0) {
        return 0;
    }
    let write = u64::from_le_bytes(block[..8].try_into().unwrap());
    assert_eq!(block, stamp(write, at), "block {at} is not whole");
    write
}

/// A tiny cache, journal, data files and checkpoint interval, and collection without a garbage threshold, so every
/// background mechanism runs all through a short test.
fn tiny_options() -> Options {
    Options {
        segment_cache_bytes: 8 * BLOCK_SIZE,
        journal_flush_bytes: 32 * BLOCK_SIZE as u64,
        journal_reset_bytes: 64 * BLOCK_SIZE as u64,
        data_file_bytes: 64 << 10,
        checkpoint_bytes: 4 << 10,
        gc_garbage_percent: 0,
        ..Options::default()
    }
}
