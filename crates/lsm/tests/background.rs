//! Background work: a flush runs while a compaction is in progress (its own thread), several compaction threads
//! keep the data intact, and the per-level statistics add up.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use lsm::{Db, Options, WriteOptions};
use vfs::{File, FileLock, Fs, MemFs, OpenMode};

/// A file system that, while armed, holds every compaction thread at its first table creation until released;
/// while `hold_removes` is set, it holds every file deletion the same way, and while `hold_drt` is set, every
/// opening of a DR-tree file (the global range-delete index's).
#[derive(Debug)]
struct GateFs {
    inner: Arc<dyn Fs>,
    armed: AtomicBool,
    hold_removes: AtomicBool,
    hold_drt: AtomicBool,
    held: AtomicU64,
    open: Mutex<bool>,
    cv: Condvar,
}

impl GateFs {
    fn new(inner: Arc<dyn Fs>) -> Arc<GateFs> {
        Arc::new(GateFs {
            inner,
            armed: AtomicBool::new(false),
            hold_removes: AtomicBool::new(false),
            hold_drt: AtomicBool::new(false),
            held: AtomicU64::new(0),
            open: Mutex::new(false),
            cv: Condvar::new(),
        })
    }

    fn release(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }

    /// Waits (up to 20 s, else panics with `what`) until some thread waits at the gate.
    fn wait_until_held(&self, what: &str) {
        let t = std::time::Instant::now();
        while self.held.load(Ordering::Acquire) == 0 {
            assert!(t.elapsed() < Duration::from_secs(20), "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn wait_at_gate(&self) {
        self.held.fetch_add(1, Ordering::AcqRel);
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
    }
}

impl Fs for GateFs {
    fn open(&self, path: &Path, mode: OpenMode) -> std::io::Result<Arc<dyn File>> {
        let compaction = std::thread::current().name().is_some_and(|n| n.starts_with("lsm-compact"));
        if compaction && self.armed.load(Ordering::Acquire) && path.extension().is_some_and(|e| e == "sst") {
            self.wait_at_gate();
        }
        if self.hold_drt.load(Ordering::Acquire) && path.extension().is_some_and(|e| e == "drt") {
            self.wait_at_gate();
        }
        self.inner.open(path, mode)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        if self.hold_removes.load(Ordering::Acquire) {
            self.wait_at_gate();
        }
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
    fn lock(&self, path: &Path) -> std::io::Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

/// Small buffers, files and levels: flushes and compactions after a few thousand writes.
fn small_options() -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 16 << 10,
        max_bytes_for_level_base: 64 << 10,
        target_file_size_base: 8 << 10,
        level0_file_num_compaction_trigger: 2,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

#[test]
fn regression_flush_completes_while_a_compaction_is_stuck() {
    // With one background thread for both, a flush queued behind a compaction waited for it to finish, and
    // writers stalled on max_write_buffer_number for the whole compaction.
    let gate = GateFs::new(Arc::new(MemFs::new()));
    let fs: Arc<dyn Fs> = gate.clone();
    let o = Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        level0_file_num_compaction_trigger: 2,
        ..Options::default()
    };
    let db = Arc::new(Db::open(fs, "/db", o).unwrap());
    let w = WriteOptions::default();
    gate.armed.store(true, Ordering::Release);
    for round in 0..2u32 {
        for i in 0..500 {
            db.put(&w, &key(i), format!("v{round}").as_bytes()).unwrap();
        }
        db.flush().unwrap();
    }
    // Two L0 files: the compaction thread picks them and is held at its first output.
    gate.wait_until_held("no compaction started");
    let (tx, rx) = std::sync::mpsc::channel();
    let d = db.clone();
    std::thread::spawn(move || {
        for i in 0..500 {
            d.put(&WriteOptions::default(), &key(i), b"v2").unwrap();
        }
        tx.send(d.flush()).unwrap();
    });
    let flushed = rx.recv_timeout(Duration::from_secs(20));
    gate.release();
    flushed.expect("the flush waited for the compaction").unwrap();
    assert_eq!(db.stats().flushes, 3);
    db.wait_for_compactions().unwrap();
    for i in 0..500 {
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(&b"v2"[..]));
    }
}

#[test]
fn regression_a_slow_file_deletion_holds_up_no_flush() {
    // Obsolete WALs and tables were deleted by the job that freed them: the flush thread deleted the flushed
    // WAL, then the tables readers had released, before it took the next memtable. On a file system where a
    // deletion takes milliseconds, that delayed every flush and rewrite.
    let gate = GateFs::new(Arc::new(MemFs::new()));
    let fs: Arc<dyn Fs> = gate.clone();
    let o = Options { disable_auto_compactions: true, ..small_options() };
    let db = Arc::new(Db::open(fs.clone(), "/db", o).unwrap());
    gate.hold_removes.store(true, Ordering::Release);
    let round = |d: &Db, r: u32| -> lsm::Result<()> {
        for i in 0..200 {
            d.put(&WriteOptions::default(), &key(i), format!("v{r}").as_bytes())?;
        }
        d.flush()
    };
    round(&db, 0).unwrap();
    // The flushed WAL is obsolete: whoever deletes it is now held.
    gate.wait_until_held("no deletion was attempted");
    let (tx, rx) = std::sync::mpsc::channel();
    let d = db.clone();
    std::thread::spawn(move || tx.send(round(&d, 1).and_then(|()| round(&d, 2))).unwrap());
    let flushed = rx.recv_timeout(Duration::from_secs(20));
    gate.release();
    flushed.expect("a flush waited for a file deletion").unwrap();
    // Deletion lags but completes: afterwards only the live tables and the current WAL remain.
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    let live: u64 = db.stats().levels.iter().map(|l| l.files).sum();
    let names = fs.list_dir(Path::new("/db")).unwrap();
    let count = |ext: &str| names.iter().filter(|n| n.ends_with(ext)).count() as u64;
    assert_eq!(count(".sst"), live, "unreferenced tables remain: {names:?}");
    assert_eq!(count(".log"), 1, "obsolete WALs remain: {names:?}");
    for i in 0..200 {
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(&b"v2"[..]));
    }
}

#[test]
fn range_deletes_and_lookups_go_on_while_the_range_index_flushes() {
    // The global range-delete index held its lock while a flush wrote its DR-tree files (tens of milliseconds
    // for a full 4 MiB buffer): range deletes, every writer queued behind one, and lookups the estimator sent
    // to the index waited for it. Now the buffer is frozen and written without the lock.
    let gate = GateFs::new(Arc::new(MemFs::new()));
    let fs: Arc<dyn Fs> = gate.clone();
    let o = Options {
        disable_auto_compactions: true,
        write_buffer_size: 1 << 20,
        range_delete_strategy: Arc::new(lsm::GlobalRangeDeletes::with_options(gloran::IndexOptions {
            buffer_bytes: 2048,
            ..Default::default()
        })),
        ..small_options()
    };
    let db = Arc::new(Db::open(fs.clone(), "/db", o.clone()).unwrap());
    let w = WriteOptions::default();
    for i in 0..400 {
        db.put(&w, &key(i), b"v").unwrap();
    }
    let one = |i: u32| (key(i), [key(i), vec![0]].concat());
    gate.hold_drt.store(true, Ordering::Release);
    let (tx, rx) = std::sync::mpsc::channel();
    let d = db.clone();
    let g = gate.clone();
    let worker = std::thread::spawn(move || {
        let r = (|| -> lsm::Result<u32> {
            // Delete even keys until the buffer is full, then wait until the flush thread is held writing it.
            let mut i = 0;
            while d.stats().range_delete_global.is_none_or(|s| s.buffer_bytes < 2048) {
                let (s, e) = one(i);
                d.delete_range(&w, &s, &e)?;
                i += 2;
            }
            g.wait_until_held("the index never flushed");
            // The flush is held: these records go to a new buffer, lookups read both.
            let frozen = i;
            for _ in 0..20 {
                let (s, e) = one(i);
                d.delete_range(&w, &s, &e)?;
                i += 2;
            }
            for j in 0..i {
                let want = if j % 2 == 0 { None } else { Some(b"v".to_vec()) };
                assert_eq!(d.get(&key(j))?, want, "key {j} (frozen up to {frozen})");
            }
            Ok(i)
        })();
        tx.send(r).unwrap();
    });
    let deleted = rx.recv_timeout(Duration::from_secs(20));
    gate.hold_drt.store(false, Ordering::Release);
    gate.release();
    let deleted = deleted.expect("range deletes or lookups waited for the index flush").unwrap();
    worker.join().unwrap(); // It holds a handle of the store until it ends.
    let check = |d: &Db| {
        for j in 0..400 {
            let want = if j % 2 == 0 && j < deleted { None } else { Some(b"v".to_vec()) };
            assert_eq!(d.get(&key(j)).unwrap(), want, "key {j}");
        }
    };
    db.flush().unwrap();
    check(&db);
    let db = Arc::into_inner(db).unwrap();
    db.close().unwrap();
    let db = Db::open(fs, "/db", o).unwrap();
    check(&db);
    assert!(db.stats().range_delete_global.is_some_and(|s| s.level_areas.iter().sum::<u64>() > 0));
}

#[test]
fn several_compaction_threads_keep_every_write_and_statistics_add_up() {
    for threads in [1, 3] {
        let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
        let o = Options { max_background_compactions: threads, ..small_options() };
        let db = Arc::new(Db::open(fs.clone(), "/db", o.clone()).unwrap());
        let writers: Vec<_> = (0..2u32)
            .map(|t| {
                let db = db.clone();
                std::thread::spawn(move || {
                    for i in 0..6000u32 {
                        let k = (i.wrapping_mul(2_654_435_761) ^ t) % 3000;
                        db.put(&WriteOptions::default(), &key(k), format!("{t}-{i}").as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        let s = db.stats();
        let rows = &s.compaction_levels;
        assert_eq!(rows[0].write_bytes, s.bytes_flushed);
        assert_eq!(rows[0].compactions, s.flushes);
        assert_eq!(rows.iter().skip(1).map(|r| r.write_bytes).sum::<u64>(), s.compact_write_bytes);
        assert_eq!(rows.iter().map(|r| r.trivial_moves).sum::<u64>(), s.trivial_moves);
        assert!(s.compact_write_bytes > 0 && s.levels[1..].iter().any(|l| l.files > 0), "{s:?}");
        // Every key's last write from either thread is there, and nothing else.
        let expect: Vec<Option<Vec<u8>>> = (0..3000).map(|k| db.get(&key(k)).unwrap()).collect();
        drop(db);
        let db = Db::open(fs, "/db", o).unwrap();
        for (k, e) in expect.iter().enumerate() {
            assert!(e.is_some(), "key {k} lost with {threads} compaction threads");
            assert_eq!(&db.get(&key(k as u32)).unwrap(), e);
        }
    }
}

#[test]
fn compaction_thread_count_is_validated() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let o = Options { create_if_missing: true, max_background_compactions: 0, ..Options::default() };
    assert!(matches!(Db::open(fs, "/db", o), Err(lsm::Error::InvalidArgument(_))));
}

/// Flushes and compactions open the tables they write into the table cache (before installing them, so no
/// reader ever pays for the open of a new table's index, filter and tombstones), and reads after them open none.
#[test]
fn reads_after_flushes_and_compactions_open_no_table() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Db::open(fs, "/db", small_options()).unwrap();
    for i in 0..6000u32 {
        let k = i.wrapping_mul(2_654_435_761) % 3000;
        db.put(&WriteOptions::default(), &key(k), format!("{i}").as_bytes()).unwrap();
        if i % 1000 == 999 {
            db.delete_range(&WriteOptions::default(), &key(k), &key(k + 5)).unwrap();
        }
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert!(s.flushes > 5 && s.compactions > 0, "{}", s.to_json());
    let opens = s.table_opens;
    for k in 0..3000 {
        db.get(&key(k)).unwrap();
    }
    assert_eq!(db.stats().table_opens, opens, "reads opened tables the background jobs had written");
}
