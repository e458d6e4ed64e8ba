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

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::memtable::MemTable;
use crate::tombstones::Fragments;

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

    /// Records `[start, end) @ seq`. Called under the write lock, in sequence order, after the WAL append.
    fn record(&self, mem: &MemTable, seq: u64, start: &[u8], end: &[u8]);

    /// During a point lookup of `key` at `snapshot`: the newest covering sequence number found in one source's
    /// tombstones (0 if none). Returns how many fragments it examined in `examined`.
    fn probe_source(&self, source: &Fragments, key: &[u8], snapshot: u64, examined: &mut u64) -> u64;

    /// A covering sequence number from range records kept outside the LSM sources (0 if none).
    fn global_cover(&self, key: &[u8], snapshot: u64, examined: &mut u64) -> u64 {
        let _ = (key, snapshot, examined);
        0
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
}

/// RocksDB's range tombstones: kept in each memtable and in each table's range-deletion block.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalTombstones;

impl RangeDeleteStrategy for LocalTombstones {
    fn name(&self) -> &'static str {
        "local"
    }

    fn record(&self, mem: &MemTable, seq: u64, start: &[u8], end: &[u8]) {
        if start < end {
            mem.add_range_delete(seq, start, end);
        }
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
