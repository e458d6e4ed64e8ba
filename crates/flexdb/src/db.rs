//! The store: WAL + BP-tree memtable in front of the table, a background committer, and recovery.
//!
//! # Design
//!
//! Writers serialize on the WAL writer mutex: a batch is appended to the current log (synced when asked), then
//! applied to the active memtable. When the memtable's `memory_usage()` reaches `memtable_bytes`, the writer
//! waits until the previous immutable memtable is committed, syncs and retires the current log, starts the next
//! one, and freezes the memtable into the immutable slot; the committer thread merges it into the table, syncs
//! the FlexFile, and only then deletes the retired log. At most two logs exist, each belonging to one memtable,
//! and every log but the newest is fully synced.
//!
//! Reads check the active memtable, the immutable memtable, then the table (§5.2). A batch with range deletes
//! waits for the committer to be idle, then applies its operations in order while holding the memtable lock
//! (a range delete removes the covered memtable entries and collapses the covered table bytes). Readers read the
//! table after releasing that lock, so they retry when such a batch, or the freezing of the memtable they
//! copied, happened meanwhile (`Inner::table_epoch`): every read sees one state of the store.
//!
//! Snapshots (not in the paper) keep pre-images: see `db/snapshot.rs`.
//!
//! Recovery (§5.4) replays every log, oldest first (by number, never by size or timestamp), into a memtable,
//! committing it to the table before each logged range delete and at the end, syncs the table, and only then
//! removes the logs. Replay is idempotent: logs hold blind writes, and a log is removed only after its
//! memtable's effects are durable in the table, so replaying a log whose effects are already (partly) in the
//! table yields the same state.
//!
//! Errors: a failed WAL append, a failed commit or a failed range delete makes the store refuse further writes
//! with [`Error::Background`], which holds the first failure (an I/O error or corruption). Reads that the
//! memtables answer keep working; once a change to the table failed, reads that reach it fail with an
//! `Error::Background` holding that failure, because the change may have stopped part-way (the committer
//! updates the table in place, so it has no older version to fall back on, as an LSM tree's immutable files
//! are). A batch that failed after
//! part of it reached the memtable stops every read, so no reader sees half of it. Reopening recovers: the
//! logs of the uncommitted memtables and the failed batch are replayed. So does [`Db::resume`], in place
//! (`db/resume.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

use bptree::ByteKey;
use parking_lot::{Condvar, Mutex, RwLock};

use crate::error::{Error, Result};
use crate::memtable::{FrozenMemtable, MemValue, Memtable};
use crate::options::{Options, WriteOptions};
use crate::record::{MAX_KEY_LEN, MAX_VALUE_LEN};
use crate::table::Table;
use crate::wal::{self, Op, WalWriter};

/// A key and its value.
pub type Pair = (Vec<u8>, Vec<u8>);

pub use crate::table::IntervalInfo;
pub use read::DbIter;
pub use snapshot::Snapshot;

mod read;
mod replay;
mod resume;
mod snapshot;
#[cfg(test)]
mod tests;

/// Counters of a store, readable through [`Db::stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Put operations.
    pub puts: u64,
    /// Point deletes.
    pub deletes: u64,
    /// Range deletes.
    pub range_deletes: u64,
    /// Point lookups.
    pub gets: u64,
    /// Lookups answered by a memtable.
    pub memtable_hits: u64,
    /// Bytes appended to WALs.
    pub wal_bytes: u64,
    /// Memtables committed into the table.
    pub memtables_committed: u64,
    /// Record bytes inserted into the table file.
    pub table_inserted_bytes: u64,
    /// Record bytes collapsed out of the table file.
    pub table_collapsed_bytes: u64,
    /// Bytes the FlexFile wrote (data, log, tree).
    pub table_bytes_written: u64,
    /// The part of `table_bytes_written` that is the FlexTree's operation log.
    pub table_log_bytes_written: u64,
    /// The part of `table_bytes_written` that is FlexTree checkpoints (tree nodes and headers).
    pub table_tree_bytes_written: u64,
    /// The part of `table_bytes_written` that is FlexFile garbage collection relocating live records.
    pub table_gc_bytes: u64,
    /// The table's data file: its segments times the segment size, dead bytes included (the disk space the
    /// FlexFile's `gc_start_utilization` trades against GC).
    pub table_file_bytes: u64,
    /// Interval splits.
    pub interval_splits: u64,
    /// Interval merges and removals.
    pub interval_merges: u64,
    /// Intervals in the sparse index.
    pub intervals: u64,
    /// Interval cache hits.
    pub cache_hits: u64,
    /// Interval cache misses.
    pub cache_misses: u64,
    /// Times the committer released the index lock mid-commit.
    pub commit_lock_releases: u64,
    /// WAL records replayed at open.
    pub wal_batches_replayed: u64,
    /// Bytes of WAL dropped at open: a torn tail, and what `WalRecovery::PointInTime` salvage dropped.
    pub wal_tail_dropped_bytes: u64,
    /// Anchors read to rebuild the index at open.
    pub rebuild_anchors: u64,
    /// Bytes in the table file.
    pub table_size: u64,
    /// Extents of the table FlexFile: an interval read costs one positional read per extent it spans, and
    /// in-place updates split extents, so `table_extents / intervals` is what a cache miss pays.
    pub table_extents: u64,
    /// Live snapshots.
    pub snapshots: u64,
    /// Pre-images the live snapshots hold (see [`Db::snapshot`]).
    pub snapshot_preimages: u64,
    /// Key and value bytes of those pre-images.
    pub snapshot_preimage_bytes: u64,
    /// Background errors cleared by [`Db::resume`] (called, or tried by a write after a full disk).
    pub resumes: u64,
}

#[derive(Default)]
struct Counters {
    puts: AtomicU64,
    deletes: AtomicU64,
    range_deletes: AtomicU64,
    gets: AtomicU64,
    memtable_hits: AtomicU64,
    memtables_committed: AtomicU64,
    wal_batches_replayed: AtomicU64,
    wal_tail_dropped_bytes: AtomicU64,
    resumes: AtomicU64,
}

struct Mem {
    active: Memtable,
    /// Key and value bytes written into `active` (plus 16 per operation): what `memtable_bytes` limits. The
    /// BP-tree's own `memory_usage()` counts whole 1,088-slot leaves, far above the data in a small memtable.
    bytes: usize,
    imm: Option<(Arc<FrozenMemtable>, u64)>,
}

struct Inner {
    fs: Arc<dyn vfs::Fs>,
    dir: PathBuf,
    /// The corruption `WalRecovery::PointInTime` salvaged at open (see [`Db::salvaged`]).
    salvaged: Option<String>,
    opts: Options,
    table: Table,
    mem: RwLock<Mem>,
    writer: Mutex<WalWriter>,
    state: Mutex<bool>,
    cv: Condvar,
    /// The first failure that stopped writes (see the module comment).
    bg_error: Mutex<Option<Arc<Error>>>,
    /// Set, after `bg_error`, when a batch failed after part of it was applied to the memtable: reads stop too.
    reads_stopped: AtomicBool,
    c: Counters,
    wal_bytes: AtomicU64,
    /// The last committed memtable, freed by the writer at its next rotation. Its keys and values were
    /// allocated by writer threads; freed by the committer, each of their tens of thousands of frees took the
    /// writer's allocator-arena lock while the writer was allocating from it (a profile of a sequential load
    /// showed three quarters of the writer's waits there).
    retired: Mutex<Option<Arc<FrozenMemtable>>>,
    /// A sequence lock for readers that read the table after releasing the memtable lock (gets that miss the
    /// memtables, and scans). It moves, under the memtable write lock, before every table change that can
    /// contradict a copy of the memtables taken earlier:
    /// - a batch with range deletes makes it odd before it changes the table and even again after (otherwise a
    ///   scan could return a range's memtable keys without its table keys, or a get miss a key the batch
    ///   deleted and wrote again);
    /// - freezing the active memtable adds 2, before the committer can merge it into the table (otherwise a
    ///   scan's copy of it could override newer values the table got from the same memtable, beside keys
    ///   written after them).
    ///
    /// A reader loads it under the memtable read lock, where it is even, and again after reading the table; if
    /// it moved, the reader reads again. Commits of a memtable frozen before the copy need no retry: the copy
    /// holds that memtable as it is committed.
    table_epoch: AtomicU64,
    /// Live snapshots and their pre-images (`db/snapshot.rs`), shared with their handles. Lock order: `mem`
    /// before `snaps.state`.
    snaps: Arc<snapshot::SnapshotList>,
    /// When a write last tried a resume by itself (`Options::auto_resume_interval`).
    last_auto_resume: Mutex<Option<std::time::Instant>>,
    _lock: Box<dyn vfs::FileLock>,
}

/// A FlexDB store. See the module comment.
pub struct Db {
    inner: Arc<Inner>,
    /// The committer thread; `resume` stops and restarts it, hence the lock (shared with the resumer thread).
    committer: Arc<Mutex<Option<JoinHandle<()>>>>,
    /// The thread that resumes the store after a full disk even if nobody writes (`resume::Resumer`).
    resumer: Option<resume::Resumer>,
}

const LOCK_FILE: &str = "LOCK";

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish_non_exhaustive()
    }
}

impl Db {
    /// Opens the store in `dir` (creating it if `opts.create_if_missing`), replaying its logs.
    pub fn open(fs: Arc<dyn vfs::Fs>, dir: &Path, opts: Options) -> Result<Db> {
        opts.validate()?;
        if opts.create_if_missing && !fs.exists(dir)? {
            fs.create_dir_all(dir)?;
            // The store's directory entry must be durable before anything in it is acknowledged.
            let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            fs.sync_dir(parent)?;
        } else if !fs.exists(dir)? {
            return Err(Error::invalid(format!("{} does not exist", dir.display())));
        } else if !opts.create_if_missing {
            // Refused before the lock, so a directory holding no store is left as it was; `Table::open`
            // checks again under the lock.
            Table::check_exists(fs.as_ref(), dir)?;
        }
        // Another holder is an invalid argument naming the store, as the LSM engine reports it.
        let lock = fs.lock(&dir.join(LOCK_FILE)).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock => {
                Error::invalid(format!("FlexDB store {} is in use", dir.display()))
            }
            _ => e.into(),
        })?;
        let table = Table::open(fs.clone(), dir, &opts, opts.create_if_missing)?;
        let c = Counters::default();
        let logs = replay::list_logs(fs.as_ref(), dir)?;
        let salvaged = replay::replay_logs(fs.as_ref(), dir, &table, &logs, opts.wal_recovery, &c)?;
        table.sync()?;
        for &n in &logs {
            fs.remove_file(&dir.join(wal::file_name(n)))?;
        }
        let next = logs.last().map_or(1, |n| n + 1);
        let writer = WalWriter::create(fs.as_ref(), dir, next)?;
        let inner = Arc::new(Inner {
            fs,
            dir: dir.to_path_buf(),
            salvaged,
            opts,
            table,
            mem: RwLock::new(Mem { active: Memtable::new(), bytes: 0, imm: None }),
            writer: Mutex::new(writer),
            state: Mutex::new(false),
            cv: Condvar::new(),
            bg_error: Mutex::new(None),
            reads_stopped: AtomicBool::new(false),
            retired: Mutex::new(None),
            c,
            wal_bytes: AtomicU64::new(0),
            table_epoch: AtomicU64::new(0),
            snaps: Arc::default(),
            last_auto_resume: Mutex::new(None),
            _lock: lock,
        });
        let committer = Arc::new(Mutex::new(Some(Inner::start_committer(&inner)?)));
        let resumer = match inner.opts.auto_resume_interval {
            Some(_) => Some(resume::Resumer::start(&inner, &committer)?),
            None => None,
        };
        Ok(Db { inner, committer, resumer })
    }

    /// Sets `key` to `value` (which may be empty).
    pub fn put(&self, key: &[u8], value: &[u8], wo: WriteOptions) -> Result<()> {
        self.write(vec![Op::Put(key.into(), value.into())], wo)
    }

    /// Deletes `key`.
    pub fn delete(&self, key: &[u8], wo: WriteOptions) -> Result<()> {
        self.write(vec![Op::Delete(key.into())], wo)
    }

    /// Applies puts, deletes and range deletes atomically and in order (one WAL record): readers see all of the
    /// batch or none of it, and after a crash the store holds all of it or none.
    pub fn write(&self, mut ops: Vec<Op>, wo: WriteOptions) -> Result<()> {
        for op in &ops {
            let keys: &[&[u8]] = match op {
                Op::Put(k, _) | Op::Delete(k) => &[k],
                Op::DeleteRange(a, b) => &[a, b],
            };
            if let Some(k) = keys.iter().find(|k| k.len() > MAX_KEY_LEN) {
                return Err(Error::invalid(format!(
                    "a key of {} bytes is over the limit of {MAX_KEY_LEN}",
                    k.len()
                )));
            }
            match op {
                Op::Put(_, v) if v.len() > MAX_VALUE_LEN => {
                    return Err(Error::invalid(format!(
                        "a value of {} bytes is over the limit of {MAX_VALUE_LEN}",
                        v.len()
                    )));
                }
                // As the LSM engine and RocksDB answer: a reversed range is a caller's mistake, not an empty one.
                Op::DeleteRange(a, b) if a > b => {
                    return Err(Error::invalid("delete_range start is after end"));
                }
                _ => {}
            }
        }
        // Checked before anything is applied; the WAL writer checks again before it encodes.
        wal::check_batch_size(&ops)?;
        // An empty range deletes nothing; dropping it keeps it out of the log and off the slow path below.
        ops.retain(|op| !matches!(op, Op::DeleteRange(a, b) if a >= b));
        let inner = &self.inner;
        if ops.is_empty() {
            // Nothing to apply, but a synced call still makes every earlier write durable, as any synced write
            // does (the crash test found an empty synced range delete that left an earlier put unsynced).
            if wo.sync {
                self.writable()?;
                self.sync()?;
            }
            return Ok(());
        }
        let ranged = ops.iter().any(|op| matches!(op, Op::DeleteRange(..)));
        self.writable()?;
        let mut w = inner.writer.lock();
        // The pre-images live snapshots need, read before anything is logged so a failed read changes nothing.
        let mut capture = self.capture(&ops)?;
        // A range delete changes the table directly, so its record is synced whatever `wo` says: the FlexFile
        // may commit the change at once (whenever its log buffer fills), and a record still in the page cache
        // could then be lost with the writes before it while the collapse survives, a state no prefix of the
        // writes has.
        inner.append(&mut w, &ops, if ranged { WriteOptions { sync: true } } else { wo })?;
        if ranged {
            // The table must not change under a memtable being committed.
            inner.wait_idle()?;
        }
        let mut m = loop {
            let m = inner.mem.write();
            if inner.record(capture) {
                break m;
            }
            // A snapshot was taken since the pre-images were read: it needs its own.
            drop(m);
            capture = match self.capture(&ops) {
                Ok(c) => c,
                Err(e) => {
                    // Logged but not applied: as for a failed apply below.
                    inner.set_bg(&e);
                    return Err(e);
                }
            };
        };
        if ranged {
            // Odd while the table changes; see `Inner::table_epoch`.
            inner.table_epoch.fetch_add(1, Ordering::SeqCst);
        }
        let mut r = Ok(());
        for op in ops {
            r = inner.apply(&mut m, op);
            if r.is_err() {
                break;
            }
        }
        if ranged {
            inner.table_epoch.fetch_add(1, Ordering::SeqCst);
        }
        if let Err(e) = &r {
            // Part of the batch may be applied: writes and reads stop, before the memtable lock is released so
            // that no reader sees the part. Reopening replays the logged batch whole.
            inner.record_bg(e);
            inner.reads_stopped.store(true, Ordering::SeqCst);
        }
        drop(m);
        if let Err(e) = &r {
            inner.set_bg(e);
            return r;
        }
        if inner.mem.read().bytes >= inner.opts.memtable_bytes {
            inner.rotate(&mut w)?;
        }
        Ok(())
    }

    /// Deletes every key `k` with `start <= k < end` (nothing when `start >= end`): covered memtable entries are
    /// removed and the covered table bytes collapsed in one FlexFile operation. A batch of one range delete.
    pub fn delete_range(&self, start: &[u8], end: &[u8], wo: WriteOptions) -> Result<()> {
        self.write(vec![Op::DeleteRange(start.into(), end.into())], wo)
    }

    /// Makes every write acknowledged so far durable (syncs the current WAL).
    pub fn sync(&self) -> Result<()> {
        self.inner.writer.lock().sync()
    }

    /// Freezes the memtable and waits until it is committed into the table.
    pub fn flush(&self) -> Result<()> {
        let inner = &self.inner;
        self.writable()?;
        let mut w = inner.writer.lock();
        if !inner.mem.read().active.is_empty() {
            inner.rotate(&mut w)?;
        }
        inner.wait_idle()
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        let i = &self.inner;
        let t = &i.table.stats;
        let (hits, misses) = i.table.cache_counts();
        let fs = i.table.file_stats();
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (snapshots, snapshot_preimages, snapshot_preimage_bytes) = {
            let s = i.snaps.state.read();
            (s.live() as u64, s.preimages, s.preimage_bytes)
        };
        Stats {
            puts: r(&i.c.puts),
            deletes: r(&i.c.deletes),
            range_deletes: r(&i.c.range_deletes),
            gets: r(&i.c.gets),
            memtable_hits: r(&i.c.memtable_hits),
            wal_bytes: r(&i.wal_bytes),
            memtables_committed: r(&i.c.memtables_committed),
            table_inserted_bytes: r(&t.inserted_bytes),
            table_collapsed_bytes: r(&t.collapsed_bytes),
            table_bytes_written: fs.data_bytes_written + fs.log_bytes_written + fs.tree_bytes_written,
            table_log_bytes_written: fs.log_bytes_written,
            table_tree_bytes_written: fs.tree_bytes_written,
            table_gc_bytes: fs.gc_bytes,
            table_file_bytes: fs.segments * i.opts.flexfile.segment_size,
            table_extents: fs.extents,
            interval_splits: r(&t.splits),
            interval_merges: r(&t.merges),
            intervals: i.table.intervals() as u64,
            cache_hits: hits,
            cache_misses: misses,
            commit_lock_releases: r(&t.lock_releases),
            wal_batches_replayed: r(&i.c.wal_batches_replayed),
            wal_tail_dropped_bytes: r(&i.c.wal_tail_dropped_bytes),
            rebuild_anchors: r(&t.rebuild_anchors),
            table_size: i.table.size(),
            snapshots,
            snapshot_preimages,
            snapshot_preimage_bytes,
            resumes: r(&i.c.resumes),
        }
    }

    /// The sparse index after every pending commit: (index key, file offset, size in bytes) per interval, in key
    /// order. For inspection tools.
    pub fn layout(&self) -> Result<Vec<IntervalInfo>> {
        self.inner.wait_idle()?;
        Ok(self.inner.table.layout())
    }

    /// The corruption error a strict open would have returned, when
    /// [`WalRecovery::PointInTime`](crate::WalRecovery::PointInTime) salvaged the store at open instead: the
    /// writes logged from that point on (`Stats::wal_tail_dropped_bytes` counts the bytes) were dropped. `None` after a strict open or a salvage that found nothing to drop.
    pub fn salvaged(&self) -> Option<&str> {
        self.inner.salvaged.as_deref()
    }

    /// Checks the sparse index against the table file; `deep` reads and verifies every interval.
    pub fn check(&self, deep: bool) -> Result<()> {
        self.inner.wait_idle()?;
        self.inner.table.check(deep).map_err(|e| self.inner.explain(e))
    }

    /// Stops the committer, syncs the WAL and checkpoints the table. Unsynced writes are made durable.
    pub fn close(mut self) -> Result<()> {
        self.stop();
        let inner = self.inner.clone();
        drop(self);
        let inner = Arc::try_unwrap(inner).map_err(|_| Error::invalid("store still shared"))?;
        let sealed = inner.writer.lock().seal();
        let closed = inner.table.close();
        // After a failure the log and the table refuse service too; the failure itself is the news.
        match inner.bg_error.lock().take() {
            Some(e) => Err(Error::Background(e)),
            None => sealed.and(closed),
        }
    }

    fn stop(&mut self) {
        // The resumer first: a resume it ran after this would restart the committer.
        if let Some(r) = self.resumer.take() {
            r.stop();
        }
        *self.inner.state.lock() = true;
        self.inner.cv.notify_all();
        if let Some(h) = self.committer.lock().take() {
            let _ = h.join();
        }
    }

    /// The directory of the store.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Inner {
    fn check_bg(&self) -> Result<()> {
        match self.bg_error.lock().as_ref() {
            Some(e) => Err(Error::Background(e.clone())),
            None => Ok(()),
        }
    }

    /// Refuses reads after a batch failed part-way. A load of a flag that is almost never set.
    /// REQUIRES: the memtable lock is held (read or write), under which a failed batch sets the flag.
    fn check_readable(&self) -> Result<()> {
        if self.reads_stopped.load(Ordering::Acquire) { self.check_bg() } else { Ok(()) }
    }

    /// A table read's error as the store reports it: a poisoned table means writes stopped, and says why.
    fn explain(&self, e: Error) -> Error {
        match (&e, self.bg_error.lock().as_ref()) {
            (Error::Poisoned, Some(bg)) => Error::Background(bg.clone()),
            _ => e,
        }
    }

    /// Records `e` as the failure that stopped writes, unless one is recorded already. Takes only `bg_error`'s
    /// lock, which is never held while taking another, so it may be called under any lock.
    fn record_bg(&self, e: &Error) {
        let mut g = self.bg_error.lock();
        if g.is_none() {
            *g = Some(Arc::new(e.cause_copy()));
        }
    }

    /// [`Inner::record_bg`], then wakes everyone waiting for the committer.
    fn set_bg(&self, e: &Error) {
        self.record_bg(e);
        let _s = self.state.lock();
        self.cv.notify_all();
    }

    /// Applies one operation of a logged batch: to the active memtable, and for a range delete to the table too.
    /// REQUIRES: the memtable lock is held (`m`); for a range delete, no memtable is being committed and
    /// `table_epoch` is odd.
    fn apply(&self, m: &mut Mem, op: Op) -> Result<()> {
        match op {
            Op::Put(k, v) => {
                self.c.puts.fetch_add(1, Ordering::Relaxed);
                m.bytes += k.len() + v.len() + 16;
                m.active.insert(ByteKey::from(k), MemValue::Put(v));
            }
            Op::Delete(k) => {
                self.c.deletes.fetch_add(1, Ordering::Relaxed);
                m.bytes += k.len() + 16;
                m.active.insert(ByteKey::from(k), MemValue::Delete);
            }
            Op::DeleteRange(start, end) => {
                self.c.range_deletes.fetch_add(1, Ordering::Relaxed);
                let covered = (std::ops::Bound::Included(&start[..]), std::ops::Bound::Excluded(&end[..]));
                let doomed: Vec<ByteKey> =
                    m.active.range::<[u8], _>(covered).map(|(k, _)| k.clone()).collect();
                for k in doomed {
                    m.active.remove(k.as_bytes());
                }
                self.table.delete_range(&start, &end)?;
            }
        }
        Ok(())
    }

    fn append(&self, w: &mut WalWriter, ops: &[Op], wo: WriteOptions) -> Result<()> {
        match w.append_batch(ops, wo.sync) {
            Ok(n) => {
                self.wal_bytes.fetch_add(n, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                // The log's tail is unknown now: refuse further writes rather than risk a gap.
                self.set_bg(&e);
                Err(e)
            }
        }
    }

    /// Waits until no immutable memtable is pending.
    fn wait_idle(&self) -> Result<()> {
        let mut st = self.state.lock();
        loop {
            self.check_bg()?;
            if self.mem.read().imm.is_none() {
                return Ok(());
            }
            self.cv.wait(&mut st);
        }
    }

    /// Retires the current log and memtable. REQUIRES: the writer lock is held (`w`).
    fn rotate(&self, w: &mut WalWriter) -> Result<()> {
        self.wait_idle()?;
        // On the writer's thread, as the field comment says why.
        drop(self.retired.lock().take());
        let r = w.sync().and_then(|_| WalWriter::create(self.fs.as_ref(), &self.dir, w.number + 1));
        let new = match r {
            Ok(n) => n,
            Err(e) => {
                self.set_bg(&e);
                return Err(e);
            }
        };
        let old = std::mem::replace(w, new);
        {
            let mut m = self.mem.write();
            let act = std::mem::replace(&mut m.active, Memtable::new());
            self.table_epoch.fetch_add(2, Ordering::SeqCst);
            m.bytes = 0;
            m.imm = Some((Arc::new(act.freeze()), old.number));
        }
        let _s = self.state.lock();
        self.cv.notify_all();
        Ok(())
    }

    fn start_committer(inner: &Arc<Inner>) -> Result<JoinHandle<()>> {
        let bg = inner.clone();
        std::thread::Builder::new()
            .name("flexdb-committer".into())
            .spawn(move || bg.committer_loop())
            .map_err(Error::Io)
    }

    fn committer_loop(&self) {
        loop {
            let job = {
                let mut st = self.state.lock();
                loop {
                    let imm = self.mem.read().imm.clone();
                    if let Some(j) = imm {
                        break j;
                    }
                    if *st {
                        return;
                    }
                    self.cv.wait(&mut st);
                }
            };
            let (imm, log) = job;
            let r = self
                .table
                .commit(imm.iter().map(|(k, v)| (k.as_bytes(), v)))
                .and_then(|_| self.table.sync())
                .and_then(|_| Ok(self.fs.remove_file(&self.dir.join(wal::file_name(log)))?))
                .and_then(|_| Ok(self.fs.sync_dir(&self.dir)?));
            match r {
                Ok(()) => {
                    self.mem.write().imm = None;
                    *self.retired.lock() = Some(imm);
                    self.c.memtables_committed.fetch_add(1, Ordering::Relaxed);
                    let _s = self.state.lock();
                    self.cv.notify_all();
                }
                Err(e) => {
                    self.set_bg(&e);
                    return;
                }
            }
        }
    }
}
