//! The range-delete strategy interface and RocksDB's local range tombstones as its first implementation.
//!
//! The engine routes every range-delete decision through [`RangeDeleteStrategy`]:
//!
//! - write path: [`RangeDeleteStrategy::record`] stores `[start, end) @ seq` (RocksDB: in the memtable's range
//!   tombstone structure);
//! - point lookups: the engine walks memtables and levels newest to oldest and calls
//!   [`RangeDeleteStrategy::probe_source`] with each source's fragmented tombstones *before* searching the source's
//!   point entries, plus [`RangeDeleteStrategy::global_cover`] once (for strategies that keep range records outside
//!   the LSM levels, like GLORAN's global index);
//! - iterators: [`RangeDeleteStrategy::iterator_tombstones`] gives the tombstones an iterator must apply;
//! - flush and compaction: [`RangeDeleteStrategy::keeps_local_tombstones`] says whether tombstones are written into
//!   the output tables' range-deletion blocks and carried down to the bottom level.
//!
//! The local strategy ("LRR" in the GLORAN paper, §3) costs a probe of every source's tombstone block on every
//! lookup; GLORAN replaces it by one global index probe.
//!
//! Strategies that keep range records outside the LSM sources (GLORAN, `rangedel_global.rs`) also use the hooks
//! below the line in the trait: a per-database instance with files (`open`), a point check made only for an entry
//! the search found (`entry_deleted`), a key-ordered cover for iterators and for flush/compaction (`cover`), an
//! index flush whose file list goes into the memtable flush's MANIFEST edit (`flush`), and background maintenance
//! (index flushes when its buffer fills, GC after bottommost compactions). Every hook has a no-op default, which
//! is what the local strategy uses.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::edit::RangeIndexState;
use crate::error::Result;
use crate::memtable::MemTable;
use crate::tombstones::Fragments;
use crate::version::Version;

/// Answers "is `(key, seq)` deleted for this reader?" for keys asked in ascending order (iterators, compaction).
pub trait RangeCover: Send {
    /// Whether `(key, seq)` is covered. Keys may come in any order within the range the cover was made for;
    /// ascending keys are cheapest, descending ones (reverse iteration) cheap.
    fn covered(&mut self, key: &[u8], seq: u64) -> Result<bool>;
    /// Repositions at `key` (an iterator's seek): saves walking over the areas in between, never needed for
    /// correctness.
    fn seek(&mut self, key: &[u8]) -> Result<()>;
}

/// Keeps whatever a reader must keep alive while it runs (GC waits for readers older than its decision).
pub type ReadPin = Arc<dyn std::any::Any + Send + Sync>;

/// Counters a strategy updates during reads.
#[derive(Debug, Default)]
pub struct RangeDelCounters {
    /// Tombstone fragments (or index entries) examined by point lookups.
    pub consulted: AtomicU64,
    /// Point lookups that examined at least one tombstone.
    pub lookups_with_tombstones: AtomicU64,
    /// Point lookups answered "deleted" by a range tombstone.
    pub covered_hits: AtomicU64,
}

/// How range deletes are recorded and applied.
pub trait RangeDeleteStrategy: Send + Sync {
    /// A stable name (`local`, `gloran`).
    fn name(&self) -> &'static str;

    /// Records `[start, end) @ seq`. Called by the write leader in sequence order after the WAL append, and
    /// during WAL replay at open (where records already made durable elsewhere may come again).
    fn record(&self, mem: &MemTable, seq: u64, start: &[u8], end: &[u8]) -> Result<()>;

    /// During a point lookup of `key` at `snapshot`: the newest covering sequence number found in one source's
    /// tombstones (0 if none). Returns how many fragments it examined in `examined`.
    fn probe_source(&self, source: &Fragments, key: &[u8], snapshot: u64, examined: &mut u64) -> u64;

    /// A covering sequence number from range records kept outside the LSM sources (0 if none).
    fn global_cover(&self, key: &[u8], snapshot: u64, examined: &mut u64) -> u64 {
        let _ = (key, snapshot, examined);
        0
    }

    /// Point lookups of strategies without local tombstones, after the memtables missed: whether a record a
    /// reader at `snapshot` sees deletes `key` at every sequence number in `[lo, hi]` (the band the tables
    /// hold), so the lookup can answer "absent" without searching them. Must be cheap when the answer is no;
    /// `false` means "search".
    fn covers_tables(&self, key: &[u8], lo: u64, hi: u64, snapshot: u64) -> bool {
        let _ = (key, lo, hi, snapshot);
        false
    }

    /// The tombstone lists an iterator at `snapshot` must apply, given the sources' local lists (each list answers
    /// `covers(key, seq, snapshot)` itself, so nothing is refragmented per iterator).
    fn iterator_tombstones(&self, local: Vec<Arc<Fragments>>, snapshot: u64) -> Vec<Arc<Fragments>> {
        let _ = snapshot;
        local.into_iter().filter(|f| !f.is_empty()).collect()
    }

    /// Whether flush and compaction write tombstones into output tables (and carry them to the bottom level).
    fn keeps_local_tombstones(&self) -> bool {
        true
    }

    // ---- Strategies with state outside the LSM sources (GLORAN). Defaults are the local strategy's no-ops. ----

    /// At `Db::open`, after the MANIFEST is recovered and before WAL replay: the per-database instance, built
    /// from the strategy's persisted state (`None` for a new database or one written by another strategy).
    /// `None` means this (stateless) object serves the database itself.
    fn open(
        &self,
        fs: &Arc<dyn vfs::Fs>,
        dir: &Path,
        state: Option<&RangeIndexState>,
    ) -> Result<Option<Arc<dyn RangeDeleteStrategy>>> {
        let _ = (fs, dir, state);
        Ok(None)
    }

    /// Point lookups of strategies without local tombstones: whether the entry `(key, seq)` the search found is
    /// deleted for a reader at `snapshot`. Never called when the key is absent.
    fn entry_deleted(&self, key: &[u8], seq: u64, snapshot: u64) -> Result<bool> {
        let _ = (key, seq, snapshot);
        Ok(false)
    }

    /// A key-ordered cover for keys in `[lo, hi)` at `snapshot` (iterators; flush and compaction with the oldest
    /// snapshot). `None`: nothing outside the local tombstones.
    fn cover(&self, lo: &[u8], hi: Option<&[u8]>, snapshot: u64) -> Result<Option<Box<dyn RangeCover>>> {
        let _ = (lo, hi, snapshot);
        Ok(None)
    }

    /// Taken by every read before it captures its sources, held until it ends.
    fn pin(&self) -> Option<ReadPin> {
        None
    }

    /// Called once at open with what wakes the engine's maintenance (the flush thread): the strategy calls it
    /// when work it deferred may have become due without a write, such as a planned GC whose readers have all
    /// finished. `wake` takes the engine's state lock, so it must not run where that lock may be held.
    fn set_maintenance_waker(&self, wake: Arc<dyn Fn() + Send + Sync>) {
        let _ = wake;
    }

    /// The largest sequence number of the records the strategy keeps durable outside the WAL (0: none), asked
    /// at open before WAL replay: point-in-time recovery must not drop WAL records the strategy already holds,
    /// or their deletes would outlive the writes logged before them.
    fn persisted_seq(&self) -> u64 {
        0
    }

    /// A counter that moves whenever records outside the LSM sources are merged with only the registered
    /// snapshots (and the sequence numbers from `published` on) kept apart. A reader at an implicit snapshot,
    /// which no such merge keeps apart, loads it before it reads its snapshot and again after its last look at
    /// those records; if it moved, a delete the reader sees may have been merged into a newer one it does not
    /// see, so the reader reads again at a new snapshot.
    fn generation(&self) -> u64 {
        0
    }

    /// Makes every record so far durable outside the WAL (called in the memtable flush before its MANIFEST edit,
    /// so the WAL may then be dropped). `snapshots`: live snapshots; `published`: the last visible sequence
    /// (snapshots taken meanwhile are at or after it). Returns the state to record in the edit if it changed
    /// since the state last recorded ([`RangeDeleteStrategy::state_recorded`]): a state whose edit failed comes
    /// back at the next call, even if nothing changed meanwhile.
    ///
    /// The engine calls it with the WAL synced and locked, so every record present is durable in the WAL.
    /// `records_frozen` releases the WAL: call it once no further record can be added before this call returns
    /// (for GLORAN, once the index's write lock is held), so writers are not held up by the index's file writes
    /// and syncs.
    fn flush(
        &self,
        snapshots: &[u64],
        published: u64,
        records_frozen: &mut dyn FnMut(),
    ) -> Result<Option<RangeIndexState>> {
        let _ = (snapshots, published, records_frozen);
        Ok(None)
    }

    /// Whether [`RangeDeleteStrategy::maintain`] has work (the flush thread wakes for it).
    fn maintenance_due(&self) -> bool {
        false
    }

    /// Whether range records exist outside the memtables that only the WAL holds durably (a strategy that keeps
    /// them in the memtables, like local tombstones, never has any). A forced flush of an otherwise empty
    /// memtable must still run then, or it would return without making those records durable.
    fn has_unflushed_records(&self) -> bool {
        false
    }

    /// Background work under the engine's work lock: an index flush when its buffer is full, a pending GC whose
    /// older readers have finished. Returns the state to record in a MANIFEST edit if it changed.
    /// Called as [`RangeDeleteStrategy::flush`], with the same `records_frozen` contract.
    fn maintain(
        &self,
        snapshots: &[u64],
        published: u64,
        records_frozen: &mut dyn FnMut(),
    ) -> Result<Option<RangeIndexState>> {
        let _ = (snapshots, published, records_frozen);
        Ok(None)
    }

    /// After a bottommost compaction: plan GC (§4.4). `v` is the current version, `oldest_snapshot` the oldest
    /// live snapshot or the last sequence, and every entry of the memtables (and of any write not yet in them)
    /// has a sequence number `>= mem_floor`; all three were read together.
    fn after_bottommost_compaction(&self, v: &Version, oldest_snapshot: u64, mem_floor: u64) {
        let _ = (v, oldest_snapshot, mem_floor);
    }

    /// After a MANIFEST edit carrying a state from `flush`/`maintain` is durable: delete replaced files.
    fn state_recorded(&self) -> Result<()> {
        Ok(())
    }

    /// At open, once the new MANIFEST is durable: delete leftovers no recorded state names.
    fn remove_unreferenced(&self) -> Result<()> {
        Ok(())
    }

    /// The global index's statistics, if the strategy has one.
    fn global_stats(&self) -> Option<gloran::Stats> {
        None
    }

    /// Reads every persistent structure the strategy keeps outside the tables and checks it whole (checksums,
    /// order, disjointness); `Ok(false)` if it keeps none.
    fn check(&self) -> Result<bool> {
        Ok(false)
    }
}

/// RocksDB's range tombstones: kept in each memtable and in each table's range-deletion block.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalTombstones;

impl RangeDeleteStrategy for LocalTombstones {
    fn name(&self) -> &'static str {
        "local"
    }

    fn record(&self, mem: &MemTable, seq: u64, start: &[u8], end: &[u8]) -> Result<()> {
        if start < end {
            mem.add_range_delete(seq, start, end);
        }
        Ok(())
    }

    fn probe_source(&self, source: &Fragments, key: &[u8], snapshot: u64, examined: &mut u64) -> u64 {
        if source.is_empty() {
            return 0;
        }
        // A probe reads the source's tombstone block: one examination, plus the binary search's fragment.
        *examined += 1;
        source.max_covering_seq(key, snapshot)
    }
}

/// Adds `n` consulted fragments to the counters.
pub fn count(c: &RangeDelCounters, examined: u64, covered: bool) {
    if examined > 0 {
        c.consulted.fetch_add(examined, Ordering::Relaxed);
        c.lookups_with_tombstones.fetch_add(1, Ordering::Relaxed);
    }
    if covered {
        c.covered_hits.fetch_add(1, Ordering::Relaxed);
    }
}
