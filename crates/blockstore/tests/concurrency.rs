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
