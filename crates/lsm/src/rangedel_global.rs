//! The `global` range-delete strategy: GLORAN's global range-record index (`crates/gloran`) behind
//! [`RangeDeleteStrategy`]. docs/gloran.md ("Engine integration") is the design; this file is the glue.
//!
//! [`GlobalRangeDeletes`] is what [`crate::Options::range_delete_strategy`] holds: a stateless template with the
//! index options. `Db::open` calls its `open`, which builds the per-database `Instance` owning the
//! [`GlobalIndex`] (files under `<db>/gloran/`). So one `Options` value can open many databases, one after the
//! other or at once, each with its own index.
//!
//! What the engine gets from the instance:
//! - `record`: the delete goes into the index's R-tree buffer (never into the memtable: no local tombstones).
//!   During WAL replay a record whose sequence is at or below the index's last recorded one is already in a
//!   synced DR-tree (every buffer flush writes all earlier records) and is skipped.
//! - `entry_deleted`: the point-lookup check, made only for an entry the LSM search found (§4.3): estimator
//!   first, LSM-DRtree only on a positive. A lookup of an absent key never reaches the index.
//! - `cover`: a [`gloran::Cursor`] over the key range, for iterators and for flush/compaction (which drop what is
//!   covered for the oldest reader).
//! - `flush`: writes the buffer into DR-trees so the memtable flush's MANIFEST edit can name the files and the WAL
//!   holding the records can go. `maintain`: the same when the buffer fills between memtable flushes, and GC.
//!
//! # Concurrency
//! The index sits behind a `RwLock`: lookups and cursor creation share it; `record` and GC take it exclusively,
//! and a flush only to freeze the buffer and to install the new levels (`flush_unlocked`): while it writes the
//! DR-tree files, records go to a new buffer and readers see the frozen one and the old levels. The frozen
//! records are exactly those with sequence numbers up to the index's `last_seq` when it froze them, and a
//! snapshot taken after the flush read the snapshot list has a sequence number of at least `published` (records
//! are inserted before their batch is published). The flush therefore treats every sequence number in
//! `[published, last_seq]` as a snapshot, so no later snapshot can fall inside a merged band: one above
//! `last_seq` sees every merged record alike.
//!
//! # GC (§4.4)
//! `GlobalIndex::gc(w)` clips areas to entry sequence numbers `>= w` and also clips every later record, so its
//! contract is: no entry with a sequence number below `w` remains anywhere a reader can see, and no snapshot is
//! older than `w`. After a bottommost compaction the instance computes `w` = min(oldest snapshot, smallest
//! sequence number of every table, one past the largest sequence number of every table — memtable entries are
//! newer than every table's). Readers that started before that decision may still hold older versions and
//! memtables; every read takes a [`ReadPin`] on the current epoch before it captures its sources, the decision
//! closes the epoch, and GC runs only when no read of that epoch, nor of any earlier one, is left
//! (`read_epochs.rs`). The watermark is persisted with the file list in
//! the MANIFEST ([`RangeIndexState`]) and re-applied at open.
//!
//! The watermark is global: one table of never-updated old data holds it down for every key range. So each
//! plan also keeps the key and sequence bounds of the version's tables (`table_spans.rs`), and the same GC run
//! drops, through `GlobalIndex::purge`, every bottom-level area whose keys and sequence band no table (and no
//! memtable) can hold an entry in any more: the paper's "all entries it matches have been removed", per record.
//! It needs no watermark and clips nothing, so it is planned after every bottommost compaction.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use gloran::{Cursor, GlobalIndex, IndexOptions, LiveFile};

use crate::edit::RangeIndexState;
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::rangedel::{RangeCover, RangeDeleteStrategy, ReadPin};
use crate::read_epochs::{Closed, Epochs};
use crate::table_spans::TableSpans;
use crate::tombstones::Fragments;
use crate::version::Version;

/// Subdirectory of the database directory holding the DR-tree files.
pub const INDEX_DIR: &str = "gloran";

/// Converts the index's errors, keeping corruption apart from I/O.
fn conv(e: gloran::Error) -> Error {
    match e {
        gloran::Error::Io(e) => Error::from(e),
        gloran::Error::Corruption { path, msg } => {
            Error::corruption(path.map_or_else(|| INDEX_DIR.to_string(), |p| p.display().to_string()), msg)
        }
        gloran::Error::InvalidArgument(m) => Error::InvalidArgument(m),
        other => Error::corruption(INDEX_DIR, other.to_string()),
    }
}

/// GLORAN as the engine's range-delete strategy (`range_delete = global`). Holds only options; see the module
/// documentation.
#[derive(Debug, Clone, Default)]
pub struct GlobalRangeDeletes {
    opts: IndexOptions,
}

impl GlobalRangeDeletes {
    /// The strategy with the paper's defaults (4 MiB buffer, size ratio 10, 10 bits per range in the estimator).
    pub fn new() -> Self {
        Self::default()
    }

    /// The strategy with explicit index options (`auto_flush` is ignored: the engine decides when to flush, since
    /// every change of the file set must reach its MANIFEST).
    pub fn with_options(opts: IndexOptions) -> Self {
        GlobalRangeDeletes { opts }
    }

    /// The index options.
    pub fn options(&self) -> &IndexOptions {
        &self.opts
    }
}

/// The strategy named `name` (`local` or `global`), for command lines and benchmarks.
pub fn strategy_by_name(name: &str) -> Result<Arc<dyn RangeDeleteStrategy>> {
    match name {
        "local" => Ok(Arc::new(crate::rangedel::LocalTombstones)),
        "global" | "gloran" => Ok(Arc::new(GlobalRangeDeletes::new())),
        _ => Err(Error::InvalidArgument(format!("unknown range-delete strategy {name:?} (local | global)"))),
    }
}

fn not_open() -> Error {
    Error::InvalidArgument(
        "the global range-delete strategy is used through the database it was opened for".into(),
    )
}

impl RangeDeleteStrategy for GlobalRangeDeletes {
    fn name(&self) -> &'static str {
        "global"
    }

    fn record(&self, _mem: &MemTable, _seq: u64, _start: &[u8], _end: &[u8]) -> Result<()> {
        Err(not_open())
    }

    fn probe_source(&self, _source: &Fragments, _key: &[u8], _snapshot: u64, _examined: &mut u64) -> u64 {
        0
    }

    fn keeps_local_tombstones(&self) -> bool {
        false
    }

    fn open(
        &self,
        fs: &Arc<dyn vfs::Fs>,
        dir: &Path,
        state: Option<&RangeIndexState>,
    ) -> Result<Option<Arc<dyn RangeDeleteStrategy>>> {
        let mut o = self.opts.clone();
        o.auto_flush = false;
        let files: Vec<LiveFile> = state
            .map(|s| s.files.iter().map(|&(level, number)| LiveFile { level, number }).collect())
            .unwrap_or_default();
        let mut index = GlobalIndex::open(fs.clone(), &dir.join(INDEX_DIR), o, &files).map_err(conv)?;
        if let Some(w) = state.map(|s| s.watermark).filter(|&w| w > 0) {
            index.gc(w).map_err(conv)?;
        }
        Ok(Some(Arc::new(Instance {
            index: RwLock::new(index),
            // The first flush always reports the state, so the open edit records that this database is global.
            changes: AtomicU64::new(1),
            reported: AtomicU64::new(0),
            recorded: AtomicU64::new(0),
            epochs: Epochs::default(),
            pending_gc: Mutex::new(Vec::new()),
            generation: AtomicU64::new(0),
        })))
    }
}

/// The per-database strategy: the index and its GC bookkeeping.
#[derive(Debug)]
struct Instance {
    index: RwLock<GlobalIndex>,
    /// Moves before anything that may change the file set or the watermark (even if it then fails half-way)...
    changes: AtomicU64,
    /// ...`changes` when the state was last returned for an edit...
    reported: AtomicU64,
    /// ...and when an edit carrying it was last made durable (`state_recorded`). While the two differ the state
    /// is returned again: an edit that failed (the engine resumes after it) must not leave index files that only
    /// memory knows of.
    recorded: AtomicU64,
    /// Readers pin the current epoch (see the module documentation).
    epochs: Epochs,
    /// Planned GCs, oldest first. A plan waits for the readers of its epoch and of every older one.
    pending_gc: Mutex<Vec<GcPlan>>,
    /// Moves before every flush and GC that disjointizes (see `RangeDeleteStrategy::generation`).
    generation: AtomicU64,
}

/// Planned GCs kept at most; a newer plan absorbs the newest waiting one beyond that.
const MAX_PENDING_GC: usize = 8;

/// One GC decision, taken after a bottommost compaction (§4.4).
#[derive(Debug)]
struct GcPlan {
    /// No entry below it remains: `GlobalIndex::gc` may clip every area to it.
    watermark: u64,
    /// The tables of the version the decision saw: `GlobalIndex::purge` drops the bottom level's areas they say
    /// no entry lies in any more (`TableSpans::dead`), however old the data elsewhere that holds the watermark.
    spans: Arc<TableSpans>,
    /// The epoch the decision closed.
    epoch: Closed,
}

impl Instance {
    fn read(&self) -> RwLockReadGuard<'_, GlobalIndex> {
        self.index.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, GlobalIndex> {
        self.index.write().unwrap_or_else(|p| p.into_inner())
    }

    fn state(idx: &GlobalIndex) -> RangeIndexState {
        RangeIndexState {
            files: idx.live_files().iter().map(|f| (f.level, f.number)).collect(),
            watermark: idx.watermark(),
        }
    }

    /// Flushes the buffer with every sequence number a snapshot may take meanwhile kept apart, holding the write
    /// lock only to freeze the buffer and to install the new levels (`gloran`'s `flush.rs`): records, lookups and
    /// cursors go on while the DR-tree files are written. Calls `records_frozen` once the buffer is frozen (the
    /// frozen records are exactly those the synced WAL holds) and returns the index locked again.
    /// REQUIRES: `idx` is the write-locked index; the caller serializes flushes and GC (`flush_work`).
    fn flush_unlocked<'a>(
        &'a self,
        mut idx: RwLockWriteGuard<'a, GlobalIndex>,
        snapshots: &[u64],
        published: u64,
        records_frozen: &mut dyn FnMut(),
    ) -> Result<RwLockWriteGuard<'a, GlobalIndex>> {
        let mut s = snapshots.to_vec();
        s.extend(published..=idx.last_seq().max(published));
        idx.set_snapshots(s);
        let job = idx.begin_flush().map_err(conv);
        records_frozen();
        let Some(mut job) = job? else { return Ok(idx) };
        drop(idx);
        job.run();
        let mut idx = self.write();
        // Before the merged levels can be read (the write lock is held): see `RangeDeleteStrategy::generation`.
        // Until now readers saw the frozen buffer and the old levels, which no merge had touched.
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.changes.fetch_add(1, Ordering::AcqRel);
        idx.finish_flush(job).map_err(conv)?;
        Ok(idx)
    }

    fn take_state(&self, idx: &GlobalIndex) -> Option<RangeIndexState> {
        let c = self.changes.load(Ordering::Acquire);
        (c != self.recorded.load(Ordering::Acquire)).then(|| {
            self.reported.store(c, Ordering::Release);
            Self::state(idx)
        })
    }

    /// How many planned GCs, oldest first, may run: a plan's readers are those of its epoch and of every older
    /// one (they all started before its decision), so it is ready when its epoch has drained. (An older plan's
    /// epoch drains first; the order is kept anyway, so ready plans are always a prefix.)
    fn gc_ready_count(p: &[GcPlan]) -> usize {
        p.iter().take_while(|plan| plan.epoch.drained()).count()
    }

    /// Whether a planned GC may run.
    fn gc_ready(&self) -> bool {
        let p = self.pending_gc.lock().unwrap_or_else(|p| p.into_inner());
        Self::gc_ready_count(&p) > 0
    }

    /// Removes the ready plans and returns what they allow together: the highest watermark, and the newest
    /// plan's table spans (what the older ones saw was compacted into it or is still there).
    fn take_ready_gc(&self) -> Option<(u64, Arc<TableSpans>)> {
        let mut p = self.pending_gc.lock().unwrap_or_else(|p| p.into_inner());
        let n = Self::gc_ready_count(&p);
        let ready: Vec<GcPlan> = p.drain(..n).collect();
        let w = ready.iter().map(|plan| plan.watermark).max()?;
        ready.last().map(|plan| (w, plan.spans.clone()))
    }
}

impl RangeDeleteStrategy for Instance {
    fn name(&self) -> &'static str {
        "global"
    }

    fn record(&self, _mem: &MemTable, seq: u64, start: &[u8], end: &[u8]) -> Result<()> {
        if start >= end {
            return Ok(());
        }
        let mut idx = self.write();
        if seq <= idx.last_seq() {
            return Ok(()); // WAL replay of a record a synced DR-tree already holds.
        }
        idx.insert(start, end, 0, seq).map_err(conv)
    }

    fn probe_source(&self, _source: &Fragments, _key: &[u8], _snapshot: u64, _examined: &mut u64) -> u64 {
        0
    }

    fn keeps_local_tombstones(&self) -> bool {
        false
    }

    fn entry_deleted(&self, key: &[u8], seq: u64, snapshot: u64) -> Result<bool> {
        self.read().check_entry(key, seq, snapshot).map_err(conv)
    }

    fn covers_tables(&self, key: &[u8], lo: u64, hi: u64, snapshot: u64) -> bool {
        self.read().covers_span(key, lo, hi, snapshot)
    }

    fn cover(&self, lo: &[u8], hi: Option<&[u8]>, snapshot: u64) -> Result<Option<Box<dyn RangeCover>>> {
        let c = self.read().cursor(lo, hi, snapshot).map_err(conv)?;
        // Without records an iterator or compaction skips the per-entry check altogether (a scan of an index
        // that never saw a range delete cost 5 % more than under local tombstones). Same answers: a cursor only
        // sees the records present when it is made.
        if c.is_empty() {
            return Ok(None);
        }
        Ok(Some(Box::new(CursorCover(c))))
    }

    fn pin(&self) -> Option<ReadPin> {
        Some(self.epochs.pin())
    }

    fn set_maintenance_waker(&self, wake: Arc<dyn Fn() + Send + Sync>) {
        // A plan becomes ready when its epoch drains, on whichever thread drops the last pin.
        self.epochs.set_waker(wake);
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn persisted_seq(&self) -> u64 {
        self.read().last_seq()
    }

    fn flush(
        &self,
        snapshots: &[u64],
        published: u64,
        records_frozen: &mut dyn FnMut(),
    ) -> Result<Option<RangeIndexState>> {
        let idx = self.flush_unlocked(self.write(), snapshots, published, records_frozen)?;
        Ok(self.take_state(&idx))
    }

    fn maintenance_due(&self) -> bool {
        self.read().needs_flush() || self.gc_ready()
    }

    fn has_unflushed_records(&self) -> bool {
        self.read().has_unflushed()
    }

    fn maintain(
        &self,
        snapshots: &[u64],
        published: u64,
        records_frozen: &mut dyn FnMut(),
    ) -> Result<Option<RangeIndexState>> {
        let mut idx = self.write();
        if idx.needs_flush() {
            idx = self.flush_unlocked(idx, snapshots, published, records_frozen)?;
        } else {
            records_frozen();
        }
        if let Some((w, spans)) = self.take_ready_gc() {
            let raise = w > idx.watermark();
            // Most plans find nothing to drop: only a rewrite moves the generation (readers at an implicit
            // snapshot read again when it moves).
            if raise || idx.count_bottom(|a| spans.dead(a)).map_err(conv)? > 0 {
                // Keep the live snapshots apart while the bottom level is rewritten. (For `gc`, no snapshot
                // older than `w` exists: it was at most the oldest when planned, and later ones are newer.)
                let mut s = snapshots.to_vec();
                s.extend(published..=idx.last_seq().max(published));
                idx.set_snapshots(s);
                self.generation.fetch_add(1, Ordering::AcqRel);
                self.changes.fetch_add(1, Ordering::AcqRel);
                if raise {
                    idx.gc(w).map_err(conv)?;
                }
                idx.purge(|a| spans.dead(a)).map_err(conv)?;
            }
        }
        Ok(self.take_state(&idx))
    }

    fn after_bottommost_compaction(&self, v: &Version, oldest_snapshot: u64, mem_floor: u64) {
        let mut w = oldest_snapshot;
        let mut newest = 0;
        let mut any = false;
        for f in v.levels.iter().flatten() {
            any = true;
            w = w.min(f.info.smallest_seq);
            newest = newest.max(f.info.largest_seq);
        }
        if !any {
            return;
        }
        w = w.min(newest + 1);
        // Planned even when `w` does not rise: whole areas may be dead in key ranges the compaction emptied.
        let spans = Arc::new(TableSpans::of(v, mem_floor));
        // Queued, not merged into the waiting plans: an older plan can run while later epochs' reads go on.
        // With no read open the epoch drains inside `close`, and its waker runs before the plan is queued; the
        // engine wakes the flush thread again when the compaction's job ends (`job_done`, `compact_range`).
        let mut plan = GcPlan { watermark: w, spans, epoch: self.epochs.close() };
        let mut pending = self.pending_gc.lock().unwrap_or_else(|p| p.into_inner());
        if pending.len() >= MAX_PENDING_GC {
            // A reader that stays open through many bottommost compactions must not make plans pile up: the
            // newest waiting plan folds into this one, whose epoch drains only after the absorbed plan's does.
            if let Some(prev) = pending.pop() {
                plan.watermark = plan.watermark.max(prev.watermark);
            }
        }
        pending.push(plan);
    }

    fn state_recorded(&self) -> Result<()> {
        let gone = {
            let mut idx = self.write();
            self.recorded.store(self.reported.load(Ordering::Acquire), Ordering::Release);
            idx.take_obsolete()
        };
        // Deleting files and syncing the directory takes milliseconds: under the read lock, records go on.
        self.read().remove_files(&gone).map_err(conv)
    }

    fn remove_unreferenced(&self) -> Result<()> {
        self.write().remove_unlisted().map_err(conv)?;
        Ok(())
    }

    fn global_stats(&self) -> Option<gloran::Stats> {
        Some(self.read().stats())
    }

    fn check(&self) -> Result<bool> {
        self.read().check().map_err(conv)?;
        Ok(true)
    }
}

/// A [`gloran::Cursor`] as the engine's [`RangeCover`].
struct CursorCover(Cursor);

impl RangeCover for CursorCover {
    fn covered(&mut self, key: &[u8], seq: u64) -> Result<bool> {
        self.0.covered(key, seq).map_err(conv)
    }

    fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.0.seek(key).map_err(conv)
    }
}
