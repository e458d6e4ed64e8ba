//! The database: its state, locks and public API. The paths docs/lsm.md numbers live beside it in `db/`:
//! `open.rs` (recovery), `write.rs` (group commit into the WAL, memtable insert, memtable switch), `read.rs`
//! (get level by level, iterators, statistics) and `jobs.rs` (flush, compaction, file purges).
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

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::batch::{Op, WriteBatch, check_lengths};
use crate::db_iter::DbIter;
use crate::error::{Error, Result};
use crate::ikey::Kind;
use crate::memtable::MemTable;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::rangedel::{self, RangeDelCounters};
use crate::snapshot::{Snapshot, SnapshotList};
use crate::stats::{Counters, SpaceAmp, Stats};
use crate::table::TableOptions;
use crate::table_cache::TableCache;
use crate::version::{Obsolete, Version, VersionSet};
use crate::wal::LogWriter;

#[path = "background.rs"]
mod background;
mod jobs;
mod open;
mod owner;
#[cfg(test)]
mod paused_reads_tests;
#[path = "range_reduce/mod.rs"]
pub(crate) mod range_reduce;
mod read;
mod resume;
#[cfg(test)]
mod tests;
mod write;

use write::WriteQueue;

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

pub(crate) struct Inner {
    fs: Arc<dyn vfs::Fs>,
    dir: PathBuf,
    opts: Options,
    /// What the open's WAL replay found.
    recovery: Recovery,
    _lock: Box<dyn vfs::FileLock>,
    state: Mutex<State>,
    /// Live snapshots. Taken under `state` (lock order: `state` before `snapshots`), so a compaction reading the
    /// oldest one under `state` either sees a new snapshot or used a sequence no larger than it.
    snapshots: SnapshotList,
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
    /// Flushed memtables, freed by the purge thread once no reader holds them (`retired.rs`).
    retired_mems: crate::retired::Retired<MemTable>,
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
    /// When a write last tried a resume by itself (`Options::auto_resume_interval`).
    last_auto_resume: Mutex<Option<std::time::Instant>>,
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

/// What an open's WAL replay found ([`Db::recovery`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// WAL records (write batches) replayed.
    pub records: u64,
    /// WAL bytes not replayed: a torn tail, and with [`crate::WalRecovery::PointInTime`] the damaged record and
    /// everything after it, later WALs included.
    pub dropped_bytes: u64,
    /// Where replay stopped before a WAL's clean end (`file: at offset N: why`), if it did.
    pub stopped_at: Option<String>,
    /// The corruption error a strict open would have returned, when [`crate::WalRecovery::PointInTime`] salvaged
    /// the store instead: acknowledged writes after that point were dropped.
    pub salvaged: Option<String>,
}

/// A table of the current version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// Its level.
    pub level: usize,
    /// What the MANIFEST records.
    pub info: crate::edit::FileInfo,
}

impl Db {
    /// Sets `key` to `value`.
    pub fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        check_lengths(&[key], Some(value))?;
        // Sized once: growing the batch through its pushes took a tenth of a small put.
        let mut b = WriteBatch::with_capacity(WriteBatch::encoded_len(key, value));
        b.put(key, value);
        self.write(opts, b)
    }

    /// Deletes `key`.
    pub fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()> {
        check_lengths(&[key], None)?;
        let mut b = WriteBatch::with_capacity(WriteBatch::encoded_len(key, &[]));
        b.delete(key);
        self.write(opts, b)
    }

    /// Deletes every key in `[start, end)`. REQUIRES: `start <= end` (an empty range is accepted and does nothing
    /// but consume a sequence number; `start > end` is an invalid argument, as in RocksDB).
    pub fn delete_range(&self, opts: &WriteOptions, start: &[u8], end: &[u8]) -> Result<()> {
        if start > end {
            return Err(Error::InvalidArgument("delete_range start is after end".into()));
        }
        check_lengths(&[start, end], None)?;
        let mut b = WriteBatch::with_capacity(WriteBatch::encoded_len(start, end));
        b.delete_range(start, end);
        self.write(opts, b)
    }

    /// Applies `batch` atomically.
    pub fn write(&self, opts: &WriteOptions, batch: WriteBatch) -> Result<()> {
        for op in batch.iter() {
            // A key the memtable cannot hold would fail its insert after the WAL append, and fail every replay.
            match op {
                Ok(Op::Put(k, v)) => check_lengths(&[k], Some(v))?,
                Ok(Op::Delete(k)) => check_lengths(&[k], None)?,
                Ok(Op::DeleteRange(s, e)) => check_lengths(&[s, e], None)?,
                Err(_) => {}
            }
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
        let _s = lock(&self.inner.state);
        Snapshot::register(&self.inner.snapshots, self.inner.last_seq.load(Ordering::Acquire))
    }

    /// Flushes the memtable to an L0 table and waits until every immutable memtable is on disk.
    pub fn flush(&self) -> Result<()> {
        self.inner.force_switch()?;
        self.inner.wait_for_flush()
    }

    /// Compacts every level's files that overlap `[start, end]` (`None` = unbounded) down to the last level
    /// holding data, after flushing the memtable. REQUIRES: `start <= end` when both are given (else an invalid
    /// argument, as a reversed `delete_range` is).
    pub fn compact_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        if let (Some(a), Some(b)) = (start, end)
            && a > b
        {
            return Err(Error::InvalidArgument("compact_range start is after end".into()));
        }
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

    /// Reads and checks the structures the range-delete strategy keeps outside the tables (GLORAN's DR-tree
    /// files and buffer): `Ok(false)` for a strategy that keeps none, an error naming the damage otherwise.
    pub fn check_range_deletes(&self) -> Result<bool> {
        self.inner.range_deletes.check()
    }

    /// Counts stored entries and live keys exactly by a full scan.
    pub fn space_amplification(&self) -> Result<SpaceAmp> {
        self.inner.space_amplification()
    }

    /// What replaying the WALs at open found: records replayed, bytes dropped, and whether
    /// [`crate::WalRecovery::PointInTime`] salvaged damage that a strict open refuses.
    pub fn recovery(&self) -> &Recovery {
        &self.inner.recovery
    }

    /// The error that stopped writes, if any.
    pub fn background_error(&self) -> Option<Error> {
        lock(&self.inner.state).bg_error.clone()
    }

    /// Clears the background error and lets writes go on, without a reopen (RocksDB's `DB::Resume`). Call it
    /// once the cause has passed (space freed, a device back): it waits for queued writes and running jobs, cuts a
    /// failed WAL back to the records it can vouch for and starts a new one, flushes every memtable, writes a new
    /// MANIFEST, and deletes what failed jobs left. Returns `Ok` at once if writes are not stopped.
    ///
    /// If a step fails again, the database stays stopped with its first error, loses nothing acknowledged, and
    /// `resume` may be called again. A stop for corruption does not resume (the damaged bytes are still there):
    /// that returns the background error. After a full disk or an exceeded quota, writes try this themselves
    /// (see [`Options::auto_resume_interval`]).
    pub fn resume(&self) -> Result<()> {
        self.inner.resume()
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

    /// Closes the database: stops the background threads after their current jobs, syncs the WAL. Returns the
    /// background error if one had stopped writes and was not resumed: a WAL whose sync failed cannot be sealed,
    /// and the writes after its last good sync may be lost at the next power loss, so `Ok` would claim too much
    /// (`regression_close_reports_a_background_error`).
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
        let sealed = w.as_mut().map_or(Ok(()), |w| w.writer.seal());
        if sealed.is_ok() {
            // Sealed: a later write (after a failed close) must not append past the final mark.
            *w = None;
        }
        drop(w);
        // Last, and also when the seal failed (the engine goes away either way): after this, no query's
        // leftover (statistics, collections, claims) holds the engine.
        self.inner.rr.owner.close();
        sealed?;
        match lock(&self.inner.state).bg_error.clone() {
            Some(e) => Err(Error::Background(Box::new(e))),
            None => Ok(()),
        }
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

/// Applies `b` to the memtable and the range-delete strategy; returns whether it held a range delete.
fn apply_batch(mem: &MemTable, strategy: &dyn rangedel::RangeDeleteStrategy, b: &WriteBatch) -> Result<bool> {
    let mut ranged = false;
    for (seq, op) in (b.seq()..).zip(b.iter()) {
        match op.map_err(|m| Error::corruption("write batch", m))? {
            Op::Put(k, v) => mem.add(seq, Kind::Value, k, v),
            Op::Delete(k) => mem.add(seq, Kind::Delete, k, &[]),
            Op::DeleteRange(s, e) => {
                strategy.record(mem, seq, s, e)?;
                ranged = true;
            }
        }
    }
    Ok(ranged)
}

/// The live snapshots as flushes, compactions and the range-delete strategy read them: under the state lock,
/// together with the last published sequence.
impl Inner {
    fn smallest_snapshot(&self) -> u64 {
        let _s = lock(&self.state);
        let l = lock(&self.snapshots);
        l.keys().next().copied().unwrap_or_else(|| self.last_seq.load(Ordering::Acquire))
    }

    /// What GC planning needs, read together under the state lock: the current version, the oldest snapshot (or
    /// the last sequence), and a floor for every memtable entry's sequence number: the first sequence of the
    /// oldest memtable holding anything, else one past the last published sequence (a write group inserting now
    /// took numbers above it). A flush that turns a memtable into a table installs its version under this lock,
    /// so no entry is in neither the version nor the memtables read here.
    fn gc_view(&self) -> (Arc<Version>, u64, u64) {
        let s = lock(&self.state);
        let published = self.last_seq.load(Ordering::Acquire);
        let floor = s.imm.iter().chain([&s.mem]).find_map(|m| m.first_seq()).unwrap_or(published + 1);
        let oldest = lock(&self.snapshots).keys().next().copied().unwrap_or(published);
        (s.current.clone(), oldest, floor.min(published + 1))
    }

    /// The live snapshots and the last published sequence, read together.
    fn snapshot_list(&self) -> (Vec<u64>, u64) {
        let _s = lock(&self.state);
        let l = lock(&self.snapshots);
        (l.keys().copied().collect(), self.last_seq.load(Ordering::Acquire))
    }
}
