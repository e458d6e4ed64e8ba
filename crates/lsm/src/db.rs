//! The database: write path (group commit into the WAL, memtable insert), read path (get level by level,
//! iterators), memtable switch and flush, background compaction, recovery. docs/lsm.md numbers these paths.
//!
//! Background work (`background.rs`): one flush thread (memtable flushes, range-delete index maintenance) and
//! `max_background_compactions` compaction threads, so a flush never waits behind a compaction.
//!
//! Locks, in the order they may be taken:
//! 1. `writers` — the queue of pending writes; the leader of the front group owns the WAL while it writes.
//! 2. `work` — shared by running automatic compactions, exclusive for work that needs the levels to itself (a
//!    manual `compact_range`, RangeReduce rewrites and level renaming). `flush_work` — held by the flush thread
//!    while it flushes. Neither is held by the other's holder, so a flush runs while a compaction runs.
//! 3. `state` — memtables, the current version, the background error, snapshots. Held briefly, never across I/O
//!    (every read takes it).
//! 4. `versions` — the MANIFEST writer and file-number counter.
//! 5. `running` — the registry of running compactions (may be taken with `state` held, never the reverse while
//!    waiting: a compaction thread reads `current` under it so that it picks from the newest installed version).
//!
//! `wal` is only touched by the write leader (and by `close`), under `writers`' leadership token.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::batch::{Op, WriteBatch};
use crate::cache::BlockCache;
use crate::compaction::{self, Compaction, OutputSink};
use crate::db_iter::DbIter;
use crate::edit::VersionEdit;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::ikey::{self, Kind};
use crate::iter::{InternalIter, MergingIter};
use crate::memtable::MemTable;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::output_cut::OutputCut;
use crate::rangedel::{self, RangeDelCounters};
use crate::stats::{Counters, LevelStats, SpaceAmp, Stats, load};
use crate::table::{GetStats, TableOptions};
use crate::table_cache::TableCache;
use crate::tombstones::Fragments;
use crate::version::{NUM_LEVELS, Obsolete, Version, VersionSet};
use crate::wal::{LogReader, LogWriter};

#[path = "background.rs"]
mod background;
#[path = "range_reduce/mod.rs"]
pub(crate) mod range_reduce;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct State {
    mem: Arc<MemTable>,
    /// Immutable memtables, oldest first.
    imm: Vec<Arc<MemTable>>,
    current: Arc<Version>,
    pending_compaction_bytes: u64,
    bg_error: Option<Error>,
    /// Live snapshots: sequence -> count.
    snapshots: BTreeMap<u64, usize>,
    shutting_down: bool,
    /// Bumped whenever background work finishes (flush, compaction) so waiters can recheck.
    bg_epoch: u64,
    /// The install order of `current` (see `Inner::install`): a version installed later never gives way to an
    /// older one whose installer was slower to take this lock.
    version_number: u64,
}

struct Wal {
    writer: LogWriter,
}

#[derive(Default)]
struct WriteQueue {
    pending: VecDeque<Pending>,
    results: std::collections::HashMap<u64, Result<()>>,
    next_id: u64,
    leader_active: bool,
    /// Writers blocked on `writers_cv`. The std condition variable makes a futex call on every notify, waiter or
    /// not; a lone writer skipping it saved that system call on every write.
    waiting: usize,
}

impl WriteQueue {
    /// Waits on `cv` with `q` counted in `waiting`.
    fn wait<'a>(cv: &Condvar, mut q: MutexGuard<'a, WriteQueue>) -> MutexGuard<'a, WriteQueue> {
        q.waiting += 1;
        let mut q = cv.wait(q).unwrap_or_else(|p| p.into_inner());
        q.waiting -= 1;
        q
    }
}

struct Pending {
    id: u64,
    batch: Option<WriteBatch>,
    sync: bool,
    /// A memtable switch (`force_switch`): it runs alone when it reaches the front, so a leader must never take
    /// it into its group (the switch would wait for its entry forever).
    switch: bool,
}

pub(crate) struct Inner {
    fs: Arc<dyn vfs::Fs>,
    dir: PathBuf,
    opts: Options,
    _lock: Box<dyn vfs::FileLock>,
    state: Mutex<State>,
    /// Wakes the background threads (flush and compaction).
    bg_cv: Condvar,
    /// Wakes writers and waiters when background work finishes.
    done_cv: Condvar,
    writers: Mutex<WriteQueue>,
    writers_cv: Condvar,
    wal: Mutex<Option<Wal>>,
    work: std::sync::RwLock<()>,
    flush_work: Mutex<()>,
    running: Mutex<Vec<crate::picker::RunningRange>>,
    /// Versions applied so far (bumped under the `versions` lock, so its order is the MANIFEST's).
    version_counter: AtomicU64,
    versions: Mutex<VersionSet>,
    table_cache: Arc<TableCache>,
    last_seq: AtomicU64,
    counters: Counters,
    rd: RangeDelCounters,
    obsolete: Obsolete,
    /// Purges under way: taken from `obsolete` but not all deleted yet (raised under its lock).
    purging: AtomicUsize,
    /// WALs numbered below this are obsolete (a flush made their data durable in tables)...
    logs_obsolete_below: AtomicU64,
    /// ...and below this they are deleted (both only grow).
    logs_purged_below: AtomicU64,
    /// The range-delete strategy serving this database (`Options::range_delete_strategy` or the per-database
    /// instance its `open` built).
    range_deletes: Arc<dyn rangedel::RangeDeleteStrategy>,
    rr: range_reduce::Shared,
}

/// An open database. Dropping it closes it (waits for the background threads; unflushed memtables stay in the
/// WAL and are recovered at the next open).
pub struct Db {
    inner: Arc<Inner>,
    bg: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish()
    }
}

/// A table of the current version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// Its level.
    pub level: usize,
    /// What the MANIFEST records.
    pub info: crate::edit::FileInfo,
}

/// A consistent read view; released when dropped.
#[derive(Debug)]
pub struct Snapshot {
    seq: u64,
    inner: std::sync::Weak<Inner>,
}

impl Snapshot {
    /// The snapshot's sequence number (pass it in [`ReadOptions::snapshot`]).
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        if let Some(h) = self.inner.upgrade() {
            h.release_snapshot(self.seq);
        }
    }
}

impl Db {
    /// Opens (or with `create_if_missing` creates) the database in `dir`.
    pub fn open(fs: Arc<dyn vfs::Fs>, dir: impl AsRef<Path>, opts: Options) -> Result<Db> {
        opts.validate()?;
        let dir = dir.as_ref().to_path_buf();
        // Create missing directories and make their entries durable: a new directory whose parent was never synced
        // may vanish, with everything in it, at a power loss.
        let mut created = Vec::new();
        let mut d = Some(dir.as_path());
        while let Some(p) = d {
            if p.as_os_str().is_empty() || fs.exists(p)? {
                break;
            }
            created.push(p.to_path_buf());
            d = p.parent();
        }
        fs.create_dir_all(&dir)?;
        for c in created.iter().rev() {
            if let Some(parent) = c.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs.sync_dir(parent)?;
            }
        }
        let lock_file = fs.lock(&dir.join("LOCK")).map_err(|e| {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                Error::InvalidArgument(format!("database {} is in use", dir.display()))
            } else {
                e.into()
            }
        })?;
        let obsolete: Obsolete = Arc::new(Mutex::new(Vec::new()));
        let blocks = Arc::new(BlockCache::new(opts.block_cache_size));
        let table_cache = Arc::new(TableCache::new(fs.clone(), dir.clone(), blocks, opts.max_open_files));
        let mut vs = VersionSet::new(fs.clone(), dir.clone(), obsolete.clone());
        vs.max_manifest_size = opts.max_manifest_file_size;
        let exists = fs.exists(&dir.join("CURRENT"))?;
        if exists {
            if opts.error_if_exists {
                return Err(Error::InvalidArgument(format!("database {} exists", dir.display())));
            }
            vs.recover()?;
        } else if !opts.create_if_missing {
            return Err(Error::InvalidArgument(format!("database {} does not exist", dir.display())));
        }
        let range_deletes = open_range_deletes(&fs, &dir, &opts, &vs)?;
        let names = fs.list_dir(&dir)?;
        let mut logs: Vec<u64> = names
            .iter()
            .filter_map(|n| match filename::parse(n) {
                Some(FileKind::Log(x)) if x >= vs.log_number => Some(x),
                _ => None,
            })
            .collect();
        logs.sort_unstable();
        if exists && vs.log_number != 0 && !logs.contains(&vs.log_number) {
            return Err(Error::corruption(
                filename::log_name(vs.log_number),
                "WAL named by the MANIFEST is missing (the MANIFEST may have lost an edit)",
            ));
        }
        // Files written after the last MANIFEST edit (a crash mid-flush) may carry numbers the MANIFEST never
        // recorded: never reuse a number that exists on disk.
        for n in &names {
            if let Some(FileKind::Log(x) | FileKind::Table(x) | FileKind::Manifest(x)) = filename::parse(n) {
                vs.next_file = vs.next_file.max(x + 1);
            }
        }
        // Replay WALs in order into memtables, flushing to L0 whenever one fills.
        let topts = table_options(&opts);
        let mut edit = VersionEdit::default();
        let mut last_seq = vs.last_seq;
        let mut mem = Arc::new(MemTable::new(0));
        let mut bytes_flushed = 0;
        for (i, &l) in logs.iter().enumerate() {
            let name = filename::log_name(l);
            let mut r = LogReader::open(&*fs, &dir.join(&name), &name)?;
            while let Some(rec) = r.next_record() {
                let b = WriteBatch::from_data(rec, &name)?;
                apply_batch(&mem, &*range_deletes, &b)?;
                last_seq = last_seq.max(b.seq() + u64::from(b.count()).saturating_sub(1));
                if mem.approx_size() >= opts.write_buffer_size {
                    bytes_flushed += flush_to_l0(&fs, &dir, &mut vs, &topts, &opts, &mem, &mut edit)?;
                    mem = Arc::new(MemTable::new(0));
                }
            }
            // Only the newest WAL can end in a torn append: older ones were synced before the next was started.
            if i + 1 < logs.len() {
                r.check_complete()?;
            }
        }
        if !mem.is_empty() {
            bytes_flushed += flush_to_l0(&fs, &dir, &mut vs, &topts, &opts, &mem, &mut edit)?;
        }
        // A fresh WAL, then the MANIFEST that names it: the named WAL always exists.
        let wal_number = vs.new_file_number();
        let wal_file = fs.open(&dir.join(filename::log_name(wal_number)), vfs::OpenMode::CreateNew)?;
        fs.sync_dir(&dir)?;
        edit.log_number = Some(wal_number);
        edit.last_seq = Some(last_seq);
        // Replayed range records go to synced index files before the edit that lets their WALs be deleted.
        edit.range_index = range_deletes.flush(&[], last_seq, &mut || {})?;
        vs.log_and_apply(edit)?;
        let current = vs.current();
        let pending = compaction::pending_compaction_bytes(&current, &opts);
        let inner = Arc::new(Inner {
            fs: fs.clone(),
            dir: dir.clone(),
            _lock: lock_file,
            state: Mutex::new(State {
                mem: Arc::new(MemTable::new(wal_number)),
                imm: Vec::new(),
                current,
                pending_compaction_bytes: pending,
                bg_error: None,
                snapshots: BTreeMap::new(),
                shutting_down: false,
                bg_epoch: 0,
                version_number: 0,
            }),
            bg_cv: Condvar::new(),
            done_cv: Condvar::new(),
            writers: Mutex::new(WriteQueue::default()),
            writers_cv: Condvar::new(),
            wal: Mutex::new(Some(Wal { writer: LogWriter::new(wal_file, 0) })),
            work: std::sync::RwLock::new(()),
            flush_work: Mutex::new(()),
            running: Mutex::new(Vec::new()),
            version_counter: AtomicU64::new(0),
            versions: Mutex::new(vs),
            table_cache,
            last_seq: AtomicU64::new(last_seq),
            counters: Counters::default(),
            rd: RangeDelCounters::default(),
            obsolete,
            purging: AtomicUsize::new(0),
            logs_obsolete_below: AtomicU64::new(0),
            logs_purged_below: AtomicU64::new(0),
            rr: range_reduce::Shared::default(),
            opts,
            range_deletes,
        });
        inner.rr.set_owner(&inner);
        inner.counters.bytes_flushed.fetch_add(bytes_flushed, Ordering::Relaxed);
        inner.delete_unreferenced_files()?;
        inner.range_deletes.state_recorded()?;
        inner.range_deletes.remove_unreferenced()?;
        let handles = background::spawn(&inner)?;
        Ok(Db { inner, bg: Mutex::new(handles) })
    }

    /// Sets `key` to `value`.
    pub fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(opts, b)
    }

    /// Deletes `key`.
    pub fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(opts, b)
    }

    /// Deletes every key in `[start, end)`. REQUIRES: `start <= end` (an empty range is accepted and does nothing
    /// but consume a sequence number; `start > end` is an invalid argument, as in RocksDB).
    pub fn delete_range(&self, opts: &WriteOptions, start: &[u8], end: &[u8]) -> Result<()> {
        if start > end {
            return Err(Error::InvalidArgument("delete_range start is after end".into()));
        }
        let mut b = WriteBatch::new();
        b.delete_range(start, end);
        self.write(opts, b)
    }

    /// Applies `batch` atomically.
    pub fn write(&self, opts: &WriteOptions, batch: WriteBatch) -> Result<()> {
        for op in batch.iter() {
            if let Ok(Op::DeleteRange(s, e)) = op {
                if s > e {
                    return Err(Error::InvalidArgument("delete_range start is after end".into()));
                }
                // Rejected before the WAL append: a record the strategy refuses must never reach the log.
                if !self.inner.range_deletes.keeps_local_tombstones()
                    && s.len().max(e.len()) > gloran::MAX_KEY_LEN
                {
                    return Err(Error::InvalidArgument(format!(
                        "range delete keys are limited to {} bytes with the global strategy",
                        gloran::MAX_KEY_LEN
                    )));
                }
            }
        }
        if batch.is_empty() {
            return Ok(());
        }
        self.inner.write(Some(batch), opts.sync)
    }

    /// Makes every acknowledged write durable (syncs the WAL).
    pub fn sync_wal(&self) -> Result<()> {
        self.inner.write(None, true)
    }

    /// The newest value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_opt(&ReadOptions::default(), key)
    }

    /// The value of `key` as `opts` (snapshot) says.
    pub fn get_opt(&self, opts: &ReadOptions, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(opts, key)
    }

    /// An iterator over live keys (bounds and snapshot from `opts`). Unpositioned: call a seek first.
    pub fn iter(&self, opts: &ReadOptions) -> Result<DbIter> {
        self.inner.iter(opts)
    }

    /// Live pairs with `start <= key < end`, in order, at most `limit` (convenience over [`Db::iter`]).
    pub fn scan(
        &self,
        opts: &ReadOptions,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut o = opts.clone();
        o.lower_bound = Some(start.to_vec());
        o.upper_bound = Some(end.to_vec());
        let mut it = self.iter(&o)?;
        it.seek_to_first();
        it.collect_forward(limit)
    }

    /// Like [`Db::scan`] in descending key order.
    pub fn rscan(
        &self,
        opts: &ReadOptions,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut o = opts.clone();
        o.lower_bound = Some(start.to_vec());
        o.upper_bound = Some(end.to_vec());
        let mut it = self.iter(&o)?;
        it.seek_to_last();
        it.collect_reverse(limit)
    }

    /// A snapshot of the current state.
    pub fn snapshot(&self) -> Snapshot {
        // Read and register under the state lock, so a compaction computing the oldest snapshot either sees this
        // one or used a sequence no larger than it.
        let mut s = lock(&self.inner.state);
        let seq = self.inner.last_seq.load(Ordering::Acquire);
        *s.snapshots.entry(seq).or_default() += 1;
        drop(s);
        Snapshot { seq, inner: Arc::downgrade(&self.inner) }
    }

    /// Flushes the memtable to an L0 table and waits until every immutable memtable is on disk.
    pub fn flush(&self) -> Result<()> {
        self.inner.force_switch()?;
        self.inner.wait_for_flush()
    }

    /// Compacts every level's files that overlap `[start, end]` (`None` = unbounded) down to the last level
    /// holding data, after flushing the memtable.
    pub fn compact_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.flush()?;
        self.inner.compact_range(start, end)
    }

    /// Waits until no automatic compaction is due (tests and benchmarks).
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.inner.wait_for_compactions()
    }

    /// All statistics.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// Counts stored entries and live keys exactly by a full scan.
    pub fn space_amplification(&self) -> Result<SpaceAmp> {
        self.inner.space_amplification()
    }

    /// The error that stopped writes, if any.
    pub fn background_error(&self) -> Option<Error> {
        lock(&self.inner.state).bg_error.clone()
    }

    /// The current version's tables (inspection).
    pub fn files(&self) -> Vec<FileEntry> {
        let v = lock(&self.inner.state).current.clone();
        let mut out = Vec::new();
        for (l, fs) in v.levels.iter().enumerate() {
            for f in fs {
                out.push(FileEntry { level: l, info: f.info.clone() });
            }
        }
        out
    }

    /// The options in force.
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// Closes the database: stops the background threads after their current jobs, syncs the WAL.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        {
            let mut s = lock(&self.inner.state);
            s.shutting_down = true;
        }
        self.inner.bg_cv.notify_all();
        self.inner.done_cv.notify_all();
        for h in std::mem::take(&mut *lock(&self.bg)) {
            let _ = h.join();
        }
        let mut w = lock(&self.inner.wal);
        if let Some(w) = w.as_mut() {
            w.writer.sync()?;
        }
        Ok(())
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

fn table_options(o: &Options) -> TableOptions {
    TableOptions {
        block_size: o.block_size,
        restart_interval: o.block_restart_interval,
        bloom_bits_per_key: o.bloom_bits_per_key,
        compression: o.compression,
    }
}

fn apply_batch(mem: &MemTable, strategy: &dyn rangedel::RangeDeleteStrategy, b: &WriteBatch) -> Result<()> {
    for (seq, op) in (b.seq()..).zip(b.iter()) {
        match op.map_err(|m| Error::corruption("write batch", m))? {
            Op::Put(k, v) => mem.add(seq, Kind::Value, k, v),
            Op::Delete(k) => mem.add(seq, Kind::Delete, k, &[]),
            Op::DeleteRange(s, e) => strategy.record(mem, seq, s, e)?,
        }
    }
    Ok(())
}

/// The strategy instance serving a database, after checking that the recovered state was written under the same
/// kind of strategy (range records of one are invisible to the other).
fn open_range_deletes(
    fs: &Arc<dyn vfs::Fs>,
    dir: &Path,
    opts: &Options,
    vs: &VersionSet,
) -> Result<Arc<dyn rangedel::RangeDeleteStrategy>> {
    let st = &opts.range_delete_strategy;
    if st.keeps_local_tombstones() {
        if vs.range_index.is_some() {
            return Err(Error::InvalidArgument(
                "the database keeps range deletes in a global index: open it with that strategy".into(),
            ));
        }
    } else if vs.range_index.is_none()
        && vs.current().levels.iter().flatten().any(|f| f.info.num_range_dels > 0)
    {
        return Err(Error::InvalidArgument(
            "the database keeps range tombstones in its tables: open it with the local strategy".into(),
        ));
    }
    Ok(st.open(fs, dir, vs.range_index.as_ref())?.unwrap_or_else(|| st.clone()))
}

/// Writes `mem` as an L0 table during recovery; returns its size.
fn flush_to_l0(
    fs: &Arc<dyn vfs::Fs>,
    dir: &Path,
    vs: &mut VersionSet,
    topts: &TableOptions,
    opts: &Options,
    mem: &Arc<MemTable>,
    edit: &mut VersionEdit,
) -> Result<u64> {
    let mut next = || vs.new_file_number();
    let mut sink =
        OutputSink { fs: &**fs, dir, new_number: &mut next, table: topts.clone(), cut: OutputCut::never() };
    let tombs = mem.tombstones();
    let keep = opts.range_delete_strategy.keeps_local_tombstones();
    let out = compaction::write_outputs(
        &mut sink,
        &mut mem.iter(),
        ikey::MAX_SEQ,
        &|_| false,
        &Fragments::default(),
        if keep { Some(&tombs) } else { None },
        None,
    )?;
    for f in &out.files {
        edit.added.push((0, f.clone()));
    }
    Ok(out.bytes)
}

impl Inner {
    fn release_snapshot(&self, seq: u64) {
        let mut s = lock(&self.state);
        if let Some(c) = s.snapshots.get_mut(&seq) {
            *c -= 1;
            if *c == 0 {
                s.snapshots.remove(&seq);
            }
        }
    }

    fn smallest_snapshot(&self) -> u64 {
        let s = lock(&self.state);
        s.snapshots.keys().next().copied().unwrap_or_else(|| self.last_seq.load(Ordering::Acquire))
    }

    /// The live snapshots and the last published sequence, read together.
    fn snapshot_list(&self) -> (Vec<u64>, u64) {
        let s = lock(&self.state);
        (s.snapshots.keys().copied().collect(), self.last_seq.load(Ordering::Acquire))
    }

    /// Runs `f` (an index flush of a strategy keeping range records outside the memtables) with the WAL synced and
    /// held: every record the index holds is then durable in the WAL too, so the index never makes a delete
    /// durable whose preceding writes a crash could still lose (recovery must give a prefix of the writes). While
    /// the WAL is held no record can be appended; one appended before is covered by the sync. The strategy
    /// releases the WAL early (the callback `f` receives) once its index takes no further record, so writers do
    /// not wait for the index's file writes and syncs; records appended after that wait for the index.
    fn with_wal_synced<T>(&self, f: impl FnOnce(&mut dyn FnMut()) -> Result<T>) -> Result<T> {
        if self.range_deletes.keeps_local_tombstones() {
            return f(&mut || {});
        }
        let mut w = Some(lock(&self.wal));
        if let Some(wal) = w.as_mut().and_then(|g| g.as_mut()) {
            wal.writer.sync()?;
            self.counters.wal_syncs.fetch_add(1, Ordering::Relaxed);
        }
        // `f` may release the WAL once it has stopped new records (writers append to the WAL before they record);
        // otherwise it is released when `f` returns.
        f(&mut || drop(w.take()))
    }

    /// Background work of the range-delete strategy (index flush, GC), recorded in its own MANIFEST edit.
    /// REQUIRES: `work` held.
    fn maintain_range_deletes(&self) -> Result<()> {
        let (snaps, published) = self.snapshot_list();
        let state = self.with_wal_synced(|frozen| self.range_deletes.maintain(&snaps, published, frozen))?;
        let Some(state) = state else { return Ok(()) };
        let edit = VersionEdit { range_index: Some(state), ..VersionEdit::default() };
        lock(&self.versions).log_and_apply(edit)?;
        self.range_deletes.state_recorded()
    }

    /// Group commit. `batch == None` with `sync` just syncs the WAL; with neither it is a barrier.
    fn write(&self, batch: Option<WriteBatch>, sync: bool) -> Result<()> {
        let mut q = lock(&self.writers);
        let id = q.next_id;
        q.next_id += 1;
        q.pending.push_back(Pending { id, batch, sync, switch: false });
        loop {
            if let Some(r) = q.results.remove(&id) {
                return r;
            }
            if !q.leader_active && q.pending.front().is_some_and(|p| p.id == id) {
                break;
            }
            q = WriteQueue::wait(&self.writers_cv, q);
        }
        // Leader: take a group of consecutive writers (a sync writer never joins a non-sync leader's group; a
        // memtable switch ends the group).
        q.leader_active = true;
        let mut group: Vec<Pending> = Vec::new();
        let mut bytes = 0;
        let lead_sync = q.pending.front().is_some_and(|p| p.sync);
        while let Some(p) = q.pending.front() {
            if !group.is_empty()
                && (p.switch || (p.sync && !lead_sync) || bytes > self.opts.max_write_group_bytes)
            {
                break;
            }
            bytes += p.batch.as_ref().map_or(0, |b| b.size());
            if let Some(p) = q.pending.pop_front() {
                group.push(p);
            }
        }
        drop(q);
        let r = self.write_group(&mut group);
        let mut q = lock(&self.writers);
        for p in &group {
            if p.id != id {
                q.results.insert(p.id, r.clone());
            }
        }
        q.leader_active = false;
        let wake = q.waiting > 0;
        drop(q);
        if wake {
            self.writers_cv.notify_all();
        }
        r
    }

    fn write_group(&self, group: &mut [Pending]) -> Result<()> {
        let has_data = group.iter().any(|p| p.batch.is_some());
        let sync = group.iter().any(|p| p.sync);
        if has_data {
            self.make_room_for_write(false)?;
        } else if let Some(e) = lock(&self.state).bg_error.clone() {
            if sync {
                return Err(Error::Background(Box::new(e)));
            }
            return Ok(());
        }
        let writes = group.iter().filter(|p| p.batch.is_some()).count() as u64;
        let mut user_bytes = 0u64;
        for p in group.iter() {
            if let Some(b) = &p.batch {
                for op in b.iter().flatten() {
                    user_bytes += match op {
                        Op::Put(k, v) => (k.len() + v.len()) as u64,
                        Op::Delete(k) => k.len() as u64,
                        Op::DeleteRange(s, e) => (s.len() + e.len()) as u64,
                    };
                }
            }
        }
        // A lone batch is written and applied as it is; a group is copied into one batch.
        let mut group_batch = WriteBatch::new();
        let merged: &mut WriteBatch = match group {
            [Pending { batch: Some(b), .. }] => b,
            _ => {
                for b in group.iter().filter_map(|p| p.batch.as_ref()) {
                    group_batch.append(b);
                }
                &mut group_batch
            }
        };
        let first = self.last_seq.load(Ordering::Acquire) + 1;
        let mem = lock(&self.state).mem.clone();
        {
            let mut w = lock(&self.wal);
            let Some(wal) = w.as_mut() else { return Err(Error::Closed) };
            let res = (|| -> Result<()> {
                if !merged.is_empty() {
                    merged.set_seq(first);
                    wal.writer.add_record(merged.data())?;
                    self.counters.wal_bytes.fetch_add(merged.size() as u64, Ordering::Relaxed);
                }
                if sync {
                    wal.writer.sync()?;
                    self.counters.wal_syncs.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })();
            if let Err(e) = res {
                // The WAL's tail is now unknown: later records could follow a torn one and be lost at recovery.
                self.set_bg_error(e.clone());
                return Err(e);
            }
        }
        if !merged.is_empty() {
            apply_batch(&mem, &*self.range_deletes, merged)?;
            if self.range_deletes.maintenance_due() {
                self.bg_cv.notify_all();
            }
            self.last_seq.store(first + u64::from(merged.count()) - 1, Ordering::Release);
            self.counters.user_bytes_written.fetch_add(user_bytes, Ordering::Relaxed);
            self.counters.write_groups.fetch_add(1, Ordering::Relaxed);
            self.counters.writes.fetch_add(writes, Ordering::Relaxed);
        }
        Ok(())
    }

    fn set_bg_error(&self, e: Error) {
        let mut s = lock(&self.state);
        if s.bg_error.is_none() {
            s.bg_error = Some(e);
        }
        drop(s);
        self.done_cv.notify_all();
    }

    /// Switches the memtable even if not full (used by `flush`). Runs as a write-queue leader so no write races.
    fn force_switch(&self) -> Result<()> {
        let mut q = lock(&self.writers);
        let id = q.next_id;
        q.next_id += 1;
        q.pending.push_back(Pending { id, batch: None, sync: false, switch: true });
        while q.leader_active || q.pending.front().is_none_or(|p| p.id != id) {
            q = WriteQueue::wait(&self.writers_cv, q);
        }
        q.pending.pop_front();
        q.leader_active = true;
        drop(q);
        let r = self.make_room_for_write(true);
        let mut q = lock(&self.writers);
        q.leader_active = false;
        let wake = q.waiting > 0;
        drop(q);
        if wake {
            self.writers_cv.notify_all();
        }
        r
    }

    /// REQUIRES: called by the write leader. Delays or stops writes as the thresholds say, and switches to a new
    /// memtable and WAL when the current memtable is full (or `force`).
    fn make_room_for_write(&self, mut force: bool) -> Result<()> {
        let mut allow_delay = !force;
        let mut s = lock(&self.state);
        loop {
            if let Some(e) = &s.bg_error {
                return Err(Error::Background(Box::new(e.clone())));
            }
            if s.shutting_down {
                return Err(Error::Closed);
            }
            let l0 = s.current.levels[0].len();
            if allow_delay
                && (l0 >= self.opts.level0_slowdown_writes_trigger
                    || s.pending_compaction_bytes >= self.opts.soft_pending_compaction_bytes_limit)
            {
                // Delay this write by 1 ms once, rather than stalling it for seconds at the stop threshold.
                drop(s);
                let t = Instant::now();
                std::thread::sleep(Duration::from_millis(1));
                self.counters.stall_micros.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                allow_delay = false;
                s = lock(&self.state);
                continue;
            }
            if !force && s.mem.approx_size() < self.opts.write_buffer_size {
                return Ok(());
            }
            if force && s.mem.is_empty() && !self.range_deletes.has_unflushed_records() {
                return Ok(());
            }
            if s.imm.len() + 1 >= self.opts.max_write_buffer_number
                || l0 >= self.opts.level0_stop_writes_trigger
                || s.pending_compaction_bytes >= self.opts.hard_pending_compaction_bytes_limit
            {
                let t = Instant::now();
                self.bg_cv.notify_all();
                s = self
                    .done_cv
                    .wait_timeout(s, Duration::from_millis(100))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                self.counters.stall_micros.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                continue;
            }
            // Switch: sync the old WAL (so only the newest WAL can have a torn tail), start a new one. Not under
            // the state lock: the syncs can take milliseconds, and every read takes that lock. Only this leader
            // switches, so the memtable is still the one found full.
            drop(s);
            let number = lock(&self.versions).new_file_number();
            let res = (|| -> Result<Wal> {
                let mut w = lock(&self.wal);
                if let Some(old) = w.as_mut() {
                    old.writer.sync()?;
                }
                let f = self.fs.open(&self.dir.join(filename::log_name(number)), vfs::OpenMode::CreateNew)?;
                self.fs.sync_dir(&self.dir)?;
                Ok(Wal { writer: LogWriter::new(f, 0) })
            })();
            let new_wal = match res {
                Ok(w) => w,
                Err(e) => {
                    self.set_bg_error(e.clone());
                    return Err(e);
                }
            };
            *lock(&self.wal) = Some(new_wal);
            s = lock(&self.state);
            let old = std::mem::replace(&mut s.mem, Arc::new(MemTable::new(number)));
            old.freeze();
            s.imm.push(old);
            force = false;
            self.bg_cv.notify_all();
        }
    }

    fn wait_for_flush(&self) -> Result<()> {
        let mut s = lock(&self.state);
        loop {
            if let Some(e) = &s.bg_error {
                return Err(Error::Background(Box::new(e.clone())));
            }
            if s.imm.is_empty() {
                return Ok(());
            }
            if s.shutting_down {
                return Err(Error::Closed);
            }
            self.bg_cv.notify_all();
            s = self.done_cv.wait_timeout(s, Duration::from_millis(100)).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    fn wait_for_compactions(&self) -> Result<()> {
        let mut s = lock(&self.state);
        loop {
            if let Some(e) = &s.bg_error {
                return Err(Error::Background(Box::new(e.clone())));
            }
            let due = !self.opts.disable_auto_compactions
                && compaction::scores(&s.current, &self.opts).iter().any(|&x| x >= 1.0);
            if s.imm.is_empty()
                && !due
                && !self.rr.has_work()
                && lock(&self.running).is_empty()
                && !self.purge_pending()
            {
                return Ok(());
            }
            if s.shutting_down {
                return Err(Error::Closed);
            }
            self.bg_cv.notify_all();
            s = self.done_cv.wait_timeout(s, Duration::from_millis(100)).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// REQUIRES: `flush_work` held; `m` is the oldest immutable memtable.
    fn flush_memtable(&self, m: &Arc<MemTable>) -> Result<()> {
        let started = Instant::now();
        let mut edit = VersionEdit::default();
        let topts = table_options(&self.opts);
        let bytes = {
            let mut next = || lock(&self.versions).new_file_number();
            let mut sink = OutputSink {
                fs: &*self.fs,
                dir: &self.dir,
                new_number: &mut next,
                table: topts,
                cut: OutputCut::never(),
            };
            let tombs = m.tombstones();
            let keep = self.range_deletes.keeps_local_tombstones();
            let smallest = self.smallest_snapshot();
            let mut global = self.range_deletes.cover(b"", None, smallest)?;
            let out = compaction::write_outputs(
                &mut sink,
                &mut m.iter(),
                smallest,
                &|_| false,
                &tombs,
                if keep { Some(&tombs) } else { None },
                global.as_deref_mut(),
            )?;
            for f in &out.files {
                edit.added.push((0, f.clone()));
            }
            self.fs.sync_dir(&self.dir)?;
            out.bytes
        };
        // The next memtable's WAL is where unflushed data now starts.
        let next_log = {
            let s = lock(&self.state);
            s.imm.get(1).map_or(s.mem.log_number, |n| n.log_number)
        };
        edit.log_number = Some(next_log);
        edit.last_seq = Some(self.last_seq.load(Ordering::Acquire));
        // Range records outside the memtable live only in the WAL until the index has written them.
        let (snaps, published) = self.snapshot_list();
        edit.range_index =
            self.with_wal_synced(|frozen| self.range_deletes.flush(&snaps, published, frozen))?;
        let recorded = edit.range_index.is_some();
        let output_files = edit.added.len() as u64;
        self.warm_tables(&edit.added);
        let mut vs = lock(&self.versions);
        vs.log_and_apply(edit)?;
        self.install(vs, |s| {
            s.imm.remove(0);
        });
        if recorded {
            self.range_deletes.state_recorded()?;
        }
        self.counters.bytes_flushed.fetch_add(bytes, Ordering::Relaxed);
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        self.counters.per_level.record(&crate::compaction_stats::Job {
            output_level: 0,
            write_bytes: bytes,
            output_files,
            micros: started.elapsed().as_micros() as u64,
            ..Default::default()
        });
        // WALs below next_log are now obsolete; the purge thread deletes them.
        self.logs_obsolete_below.fetch_max(next_log, Ordering::AcqRel);
        Ok(())
    }

    /// Runs `c`, as a trivial move when it is one and `allow_move` (manual compaction into the bottom level
    /// rewrites even a lone input, so that garbage is dropped).
    /// REQUIRES: `work` held (shared, with `c` registered as running, or exclusive).
    fn run_compaction(&self, c: &Compaction, allow_move: bool) -> Result<()> {
        let started = Instant::now();
        let read_input_bytes: u64 = c.inputs.iter().map(|f| f.info.size).sum();
        let mut job = crate::compaction_stats::Job {
            output_level: c.level + 1,
            read_input_bytes,
            read_output_bytes: c.input_bytes() - read_input_bytes,
            input_files: (c.inputs.len() + c.next.len()) as u64,
            ..Default::default()
        };
        let mut vs_edit;
        if allow_move && c.is_trivial_move() {
            vs_edit = VersionEdit::default();
            for f in &c.inputs {
                vs_edit.deleted.push((c.level as u32, f.number()));
                vs_edit.added.push(((c.level + 1) as u32, f.info.clone()));
            }
            if c.level > 0
                && let Some(last) = c.inputs.iter().map(|f| &f.info.largest).max_by(|a, b| ikey::cmp(a, b))
            {
                vs_edit.compact_pointers.push((c.level as u32, last.clone()));
            }
            self.counters.trivial_moves.fetch_add(1, Ordering::Relaxed);
            job.trivial_move = true;
        } else {
            let smallest = self.smallest_snapshot();
            let mut next = || lock(&self.versions).new_file_number();
            let mut sink = OutputSink {
                fs: &*self.fs,
                dir: &self.dir,
                new_number: &mut next,
                table: table_options(&self.opts),
                cut: OutputCut::aligned(
                    self.opts.target_file_size_base,
                    self.opts.effective_max_compaction_bytes(),
                    self.opts.level_compaction_dynamic_file_size,
                    c.grandparents.clone(),
                ),
            };
            let keep = self.range_deletes.keeps_local_tombstones();
            let lo = c.inputs.iter().chain(&c.next).map(|f| f.smallest_user()).min().unwrap_or_default();
            let mut global = self.range_deletes.cover(lo, None, smallest)?;
            let (e, out) =
                compaction::run(c, &self.table_cache, &mut sink, smallest, keep, global.as_deref_mut())?;
            self.fs.sync_dir(&self.dir)?;
            self.counters.compact_read_bytes.fetch_add(c.input_bytes(), Ordering::Relaxed);
            self.counters.compact_write_bytes.fetch_add(out.bytes, Ordering::Relaxed);
            self.counters.compaction_range_covered.fetch_add(out.range_covered, Ordering::Relaxed);
            job.write_bytes = out.bytes;
            job.output_files = out.files.len() as u64;
            vs_edit = e;
        }
        vs_edit.last_seq = Some(self.last_seq.load(Ordering::Acquire));
        // Entries dropped under a range record of the global index: that record must be durable before the edit
        // that drops them is (its WAL may not be synced yet).
        self.with_wal_synced(|_| Ok(()))?;
        if !job.trivial_move {
            self.warm_tables(&vs_edit.added);
        }
        let mut vs = lock(&self.versions);
        // On failure the outputs stay on disk: a MANIFEST write or sync that failed may still have made the edit
        // durable, and removing tables it names would leave the next open with a MANIFEST pointing at nothing.
        // Startup cleanup removes them if the recovered version does not reference them.
        vs.log_and_apply(vs_edit)?;
        let v = self.install(vs, |_| {});
        job.micros = started.elapsed().as_micros() as u64;
        self.counters.per_level.record(&job);
        if c.bottommost {
            self.range_deletes.after_bottommost_compaction(&v, self.smallest_snapshot());
        }
        self.counters.compactions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn compact_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let _w = self.work.write().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = lock(&self.state).bg_error.clone() {
            return Err(Error::Background(Box::new(e)));
        }
        let v = lock(&self.state).current.clone();
        let deepest = (0..NUM_LEVELS).rev().find(|&l| !v.levels[l].is_empty()).unwrap_or(0);
        for level in 0..deepest.max(1) {
            if level + 1 >= NUM_LEVELS {
                break;
            }
            let v = lock(&self.state).current.clone();
            let inputs = v.overlapping(level, start, end);
            if inputs.is_empty() {
                continue;
            }
            let c = Compaction::new(v, level, inputs);
            // A move that would end at the bottom is rewritten instead: manual compaction should drop garbage.
            let r = self.run_compaction(&c, level + 1 < deepest);
            if let Err(e) = r {
                self.set_bg_error(e.clone());
                return Err(e);
            }
            self.purge_obsolete();
        }
        self.done_cv.notify_all();
        Ok(())
    }

    /// Deletes tables no version references any more; returns whether there were any.
    fn purge_obsolete(&self) -> bool {
        let nums: Vec<u64> = {
            let mut o = lock(&self.obsolete);
            if o.is_empty() {
                return false;
            }
            self.purging.fetch_add(1, Ordering::AcqRel);
            std::mem::take(&mut *o)
        };
        for n in nums {
            self.table_cache.evict(n);
            let _ = self.fs.remove_file(&self.dir.join(filename::table_name(n)));
        }
        self.purging.fetch_sub(1, Ordering::AcqRel);
        true
    }

    /// Deletes the WALs a flush made obsolete; returns whether there were any. As for tables, a failure is
    /// not retried: `open` deletes every WAL below the recovered log number.
    /// REQUIRES: called by one thread at a time (the purge thread).
    fn purge_obsolete_logs(&self) -> bool {
        let below = self.logs_obsolete_below.load(Ordering::Acquire);
        if below <= self.logs_purged_below.load(Ordering::Acquire) {
            return false;
        }
        for name in self.fs.list_dir(&self.dir).unwrap_or_default() {
            if let Some(FileKind::Log(n)) = filename::parse(&name)
                && n < below
            {
                let _ = self.fs.remove_file(&self.dir.join(&name));
            }
        }
        self.logs_purged_below.store(below, Ordering::Release);
        true
    }

    /// Whether tables or WALs wait to be deleted or are being deleted.
    fn purge_pending(&self) -> bool {
        let o = lock(&self.obsolete);
        !o.is_empty()
            || self.purging.load(Ordering::Acquire) > 0
            || self.logs_obsolete_below.load(Ordering::Acquire)
                > self.logs_purged_below.load(Ordering::Acquire)
    }

    /// At open: removes every file that the recovered state does not need.
    fn delete_unreferenced_files(&self) -> Result<()> {
        let vs = lock(&self.versions);
        let live: std::collections::HashSet<u64> = vs.current().live_files().into_iter().collect();
        let (log_number, manifest) = (vs.log_number, vs.manifest_number());
        drop(vs);
        for name in self.fs.list_dir(&self.dir)? {
            let remove = match filename::parse(&name) {
                Some(FileKind::Log(n)) => n < log_number,
                Some(FileKind::Table(n)) => !live.contains(&n),
                Some(FileKind::Manifest(n)) => n != manifest,
                Some(FileKind::Temp) => true,
                _ => false,
            };
            if remove {
                self.fs.remove_file(&self.dir.join(&name))?;
            }
        }
        self.fs.sync_dir(&self.dir)?;
        Ok(())
    }

    fn get(&self, opts: &ReadOptions, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.counters.gets.fetch_add(1, Ordering::Relaxed);
        // Pinned before the sources are captured: GC of the global index waits for reads older than its decision.
        let _pin = self.range_deletes.pin();
        // The implicit snapshot is read with the sources under the state lock: every compaction installed in the
        // captured version used an oldest-snapshot no larger than it, and no memtable switch splits the pair.
        let (mem, imm, v, snapshot) = {
            let s = lock(&self.state);
            let snap = opts.snapshot.unwrap_or_else(|| self.last_seq.load(Ordering::Acquire));
            (s.mem.clone(), s.imm.clone(), s.current.clone(), snap)
        };
        let strategy = &*self.range_deletes;
        let local = strategy.keeps_local_tombstones();
        let mut examined = 0u64;
        let mut cover = strategy.global_cover(key, snapshot, &mut examined);
        let finish = |examined: u64, covered: bool| rangedel::count(&self.rd, examined, covered);
        // Memtables, newest first.
        for m in std::iter::once(&mem).chain(imm.iter().rev()) {
            if local {
                cover = cover.max(strategy.probe_source(&m.tombstones(), key, snapshot, &mut examined));
            }
            if let Some((seq, kind, val)) = m.get(key, snapshot) {
                // A global index is asked only now, for an entry that exists (§4.3).
                let covered = cover > seq
                    || (!local && kind == Kind::Value && strategy.entry_deleted(key, seq, snapshot)?);
                finish(examined, covered);
                return Ok(if covered || kind != Kind::Value { None } else { Some(val) });
            }
            if cover > 0 {
                finish(examined, true);
                return Ok(None);
            }
        }
        let target = ikey::make(key, snapshot, ikey::SEEK_KIND);
        let mut gs = GetStats::default();
        // Without local tombstones nothing above stops the search at a recent range delete. Before the first
        // block read (so an absent key still never reaches the index) the strategy is asked whether a record
        // deletes every version the tables can hold, their whole sequence band, as a memtable tombstone would
        // tell a local lookup.
        let mut ask_strategy = !local;
        let result = (|| -> Result<Option<Option<Vec<u8>>>> {
            for (level, files) in v.levels.iter().enumerate() {
                let candidates: &[Arc<crate::version::FileMeta>] = if level == 0 {
                    files
                } else {
                    let i = v.find_file(level, &target);
                    files.get(i).filter(|f| f.smallest_user() <= key).map_or(&[], std::slice::from_ref)
                };
                for f in candidates {
                    if level == 0 && !f.overlaps(Some(key), Some(key)) {
                        continue;
                    }
                    let t = self.table_cache.table(f)?;
                    if local && f.info.num_range_dels > 0 {
                        cover =
                            cover.max(strategy.probe_source(t.tombstones(), key, snapshot, &mut examined));
                    }
                    if t.may_contain(key, &mut gs) {
                        if std::mem::take(&mut ask_strategy)
                            && let Some((lo, hi)) = v.seq_bounds()
                            && strategy.covers_tables(key, lo, hi.min(snapshot), snapshot)
                        {
                            finish(examined, true);
                            return Ok(Some(None));
                        }
                        if let Some((seq, kind, val)) = t.get_unfiltered(&target)? {
                            let covered = cover > seq
                                || (!local
                                    && kind == Kind::Value
                                    && strategy.entry_deleted(key, seq, snapshot)?);
                            finish(examined, covered);
                            return Ok(Some(if covered || kind != Kind::Value { None } else { Some(val) }));
                        }
                    }
                    if cover > 0 {
                        finish(examined, true);
                        return Ok(Some(None));
                    }
                }
            }
            Ok(None)
        })();
        self.counters.bloom_checked.fetch_add(gs.bloom_checked, Ordering::Relaxed);
        self.counters.bloom_useful.fetch_add(gs.bloom_useful, Ordering::Relaxed);
        match result? {
            Some(r) => Ok(r),
            None => {
                finish(examined, false);
                Ok(None)
            }
        }
    }

    fn iter(&self, opts: &ReadOptions) -> Result<DbIter> {
        let pin = self.range_deletes.pin();
        // The implicit snapshot is read with the sources under the state lock: every compaction installed in the
        // captured version used an oldest-snapshot no larger than it, and no memtable switch splits the pair.
        let (mem, imm, v, snapshot) = {
            let s = lock(&self.state);
            let snap = opts.snapshot.unwrap_or_else(|| self.last_seq.load(Ordering::Acquire));
            (s.mem.clone(), s.imm.clone(), s.current.clone(), snap)
        };
        let lo = opts.lower_bound.as_deref();
        let hi = opts.upper_bound.as_deref();
        let mut children: Vec<Box<dyn InternalIter>> = Vec::new();
        let mut frags: Vec<Arc<Fragments>> = Vec::new();
        for m in std::iter::once(&mem).chain(imm.iter().rev()) {
            children.push(Box::new(m.iter()));
            frags.push(m.tombstones());
        }
        for f in &v.levels[0] {
            if f.overlaps(lo, hi) {
                let t = self.table_cache.table(f)?;
                if f.info.num_range_dels > 0 {
                    frags.push(t.tombstones().clone());
                }
                children.push(Box::new(t.iter()));
            }
        }
        for files in v.levels.iter().skip(1) {
            let files: Vec<_> = files.iter().filter(|f| f.overlaps(lo, hi)).cloned().collect();
            if files.is_empty() {
                continue;
            }
            for f in files.iter().filter(|f| f.info.num_range_dels > 0) {
                frags.push(self.table_cache.table(f)?.tombstones().clone());
            }
            children.push(Box::new(crate::version::LevelIter::new(files, self.table_cache.clone())));
        }
        let (children, read_sink) = self.range_reduce_children(children, 1 + imm.len(), &v, opts);
        let tombstones = self.range_deletes.iterator_tombstones(frags, snapshot);
        let global = self.range_deletes.cover(lo.unwrap_or_default(), hi, snapshot)?;
        let mut it = DbIter::new(
            MergingIter::new(children),
            snapshot,
            tombstones,
            opts.lower_bound.clone(),
            opts.upper_bound.clone(),
            v,
        );
        it.set_global(global, pin);
        if let Some(sink) = read_sink {
            it.set_read_sink(sink);
        }
        Ok(it)
    }

    fn stats(&self) -> Stats {
        let (v, pending, mem_bytes, imms) = {
            let s = lock(&self.state);
            let mb = s.mem.approx_size() + s.imm.iter().map(|m| m.approx_size()).sum::<usize>();
            (s.current.clone(), s.pending_compaction_bytes, mb, s.imm.len())
        };
        let c = &self.counters;
        let (hits, misses) = self.table_cache.blocks().hit_miss();
        Stats {
            levels: (0..NUM_LEVELS)
                .map(|l| LevelStats { files: v.levels[l].len() as u64, bytes: v.level_bytes(l) })
                .collect(),
            user_bytes_written: load(&c.user_bytes_written),
            wal_bytes: load(&c.wal_bytes),
            wal_syncs: load(&c.wal_syncs),
            write_groups: load(&c.write_groups),
            writes: load(&c.writes),
            bytes_flushed: load(&c.bytes_flushed),
            flushes: load(&c.flushes),
            compact_read_bytes: load(&c.compact_read_bytes),
            compact_write_bytes: load(&c.compact_write_bytes),
            compactions: load(&c.compactions),
            trivial_moves: load(&c.trivial_moves),
            pending_compaction_bytes: pending,
            stall_micros: load(&c.stall_micros),
            gets: load(&c.gets),
            bloom_checked: load(&c.bloom_checked),
            bloom_useful: load(&c.bloom_useful),
            range_tombstones_consulted: load(&self.rd.consulted),
            lookups_with_tombstones: load(&self.rd.lookups_with_tombstones),
            range_covered_lookups: load(&self.rd.covered_hits),
            compaction_range_covered: load(&c.compaction_range_covered),
            table_opens: self.table_cache.opens(),
            block_cache_usage: self.table_cache.blocks().usage() as u64,
            block_cache_hits: hits,
            block_cache_misses: misses,
            memtable_bytes: mem_bytes as u64,
            immutable_memtables: imms as u64,
            table_range_tombstones: v.levels.iter().flatten().map(|f| f.info.num_range_dels).sum(),
            last_sequence: self.last_seq.load(Ordering::Acquire),
            range_delete_global: self.range_deletes.global_stats(),
            range_reduce: self.range_reduce_stats(&v),
            compaction_levels: c.per_level.snapshot(),
        }
    }

    fn space_amplification(&self) -> Result<SpaceAmp> {
        let (mem, imm, v) = {
            let s = lock(&self.state);
            (s.mem.clone(), s.imm.clone(), s.current.clone())
        };
        let mut sa = SpaceAmp::default();
        for m in std::iter::once(&mem).chain(imm.iter()) {
            sa.total_entries += (m.num_entries() + m.num_tombstones()) as u64;
            sa.total_bytes += m.approx_size() as u64;
        }
        for f in v.levels.iter().flatten() {
            sa.total_entries += f.info.num_entries + f.info.num_range_dels;
            sa.total_bytes += f.info.size;
        }
        let mut it = self.iter(&ReadOptions::default())?;
        it.seek_to_first();
        while it.valid() {
            sa.live_entries += 1;
            sa.live_bytes += (it.key().len() + it.value().len()) as u64;
            it.next();
        }
        it.status()?;
        Ok(sa)
    }
}
