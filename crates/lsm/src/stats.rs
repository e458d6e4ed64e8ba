//! Engine statistics: plain counters readable through [`crate::Db::stats`].

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters (atomics, updated on the hot paths).
#[derive(Debug, Default)]
pub struct Counters {
    /// Sum of user key + value bytes accepted by writes.
    pub user_bytes_written: AtomicU64,
    /// Bytes appended to WALs.
    pub wal_bytes: AtomicU64,
    /// WAL syncs.
    pub wal_syncs: AtomicU64,
    /// Write groups committed (one WAL append each).
    pub write_groups: AtomicU64,
    /// Writes (batches) committed.
    pub writes: AtomicU64,
    /// Bytes of tables written by flushes.
    pub bytes_flushed: AtomicU64,
    /// Flushes completed.
    pub flushes: AtomicU64,
    /// Bytes read by compactions (input table sizes).
    pub compact_read_bytes: AtomicU64,
    /// Bytes written by compactions.
    pub compact_write_bytes: AtomicU64,
    /// Compactions completed (trivial moves included).
    pub compactions: AtomicU64,
    /// Compactions that only moved a file down.
    pub trivial_moves: AtomicU64,
    /// Microseconds writers spent delayed or stopped.
    pub stall_micros: AtomicU64,
    /// Point lookups.
    pub gets: AtomicU64,
    /// Bloom filters consulted.
    pub bloom_checked: AtomicU64,
    /// Bloom filters that ruled a key out.
    pub bloom_useful: AtomicU64,
    /// Entries dropped by compactions because a range tombstone covered them.
    pub compaction_range_covered: AtomicU64,
    /// Background errors cleared by [`crate::Db::resume`] (called, or tried by a write after a full disk).
    pub resumes: AtomicU64,
    /// Flush and compaction work per output level.
    pub per_level: crate::compaction_stats::PerLevel,
}

/// A table count and size for one level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LevelStats {
    /// Tables.
    pub files: u64,
    /// Bytes.
    pub bytes: u64,
}

/// A snapshot of every statistic.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Tables and bytes per level.
    pub levels: Vec<LevelStats>,
    /// User key + value bytes written.
    pub user_bytes_written: u64,
    /// WAL bytes.
    pub wal_bytes: u64,
    /// WAL syncs.
    pub wal_syncs: u64,
    /// Write groups (group commit: writes / write_groups is the average group size).
    pub write_groups: u64,
    /// Writes.
    pub writes: u64,
    /// Bytes written by flushes.
    pub bytes_flushed: u64,
    /// Flushes.
    pub flushes: u64,
    /// Compaction input bytes.
    pub compact_read_bytes: u64,
    /// Compaction output bytes.
    pub compact_write_bytes: u64,
    /// Compactions.
    pub compactions: u64,
    /// Trivial moves.
    pub trivial_moves: u64,
    /// RocksDB's `estimate-pending-compaction-bytes` (the RangeReduce paper's compaction debt).
    pub pending_compaction_bytes: u64,
    /// Writer stall time in microseconds.
    pub stall_micros: u64,
    /// Point lookups.
    pub gets: u64,
    /// Bloom filter checks.
    pub bloom_checked: u64,
    /// Bloom filter negatives.
    pub bloom_useful: u64,
    /// Range tombstone fragments examined by point lookups.
    pub range_tombstones_consulted: u64,
    /// Point lookups that examined any range tombstone.
    pub lookups_with_tombstones: u64,
    /// Point lookups answered by a covering range tombstone.
    pub range_covered_lookups: u64,
    /// Entries compactions dropped under range tombstones.
    pub compaction_range_covered: u64,
    /// Tables opened into the table cache (by background jobs when they write them, or by reads).
    pub table_opens: u64,
    /// Block cache bytes in use.
    pub block_cache_usage: u64,
    /// Block cache hits.
    pub block_cache_hits: u64,
    /// Block cache misses.
    pub block_cache_misses: u64,
    /// Bytes in memtables (mutable + immutable).
    pub memtable_bytes: u64,
    /// Immutable memtables waiting for flush.
    pub immutable_memtables: u64,
    /// Range tombstones in tables.
    pub table_range_tombstones: u64,
    /// The last sequence number.
    pub last_sequence: u64,
    /// Background errors cleared by [`crate::Db::resume`].
    pub resumes: u64,
    /// The global range-delete index's statistics (`range_delete = global`; `None` for local tombstones):
    /// estimator checks/positives/false positives, DR-tree nodes read, index bytes, GC work.
    pub range_delete_global: Option<gloran::Stats>,
    /// RangeReduce: query-driven compactions, range-query reads, compaction debt.
    pub range_reduce: crate::RangeReduceStats,
    /// Flushes (row 0) and compactions per output level: bytes read from each side, written, moved.
    pub compaction_levels: Vec<crate::compaction_stats::CompactionLevelStats>,
}

impl Stats {
    /// Write amplification: bytes written to tables (flush + compaction) per user byte written.
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes_written == 0 {
            return 0.0;
        }
        (self.bytes_flushed + self.compact_write_bytes) as f64 / self.user_bytes_written as f64
    }

    /// Total bytes in tables.
    pub fn table_bytes(&self) -> u64 {
        self.levels.iter().map(|l| l.bytes).sum()
    }

    /// A one-line JSON object (no external serializer: the engine keeps its dependencies lean).
    pub fn to_json(&self) -> String {
        let levels: Vec<String> =
            self.levels.iter().map(|l| format!("{{\"files\":{},\"bytes\":{}}}", l.files, l.bytes)).collect();
        let fields: [(&str, u64); 30] = [
            ("user_bytes_written", self.user_bytes_written),
            ("wal_bytes", self.wal_bytes),
            ("wal_syncs", self.wal_syncs),
            ("write_groups", self.write_groups),
            ("writes", self.writes),
            ("bytes_flushed", self.bytes_flushed),
            ("flushes", self.flushes),
            ("compact_read_bytes", self.compact_read_bytes),
            ("compact_write_bytes", self.compact_write_bytes),
            ("compactions", self.compactions),
            ("trivial_moves", self.trivial_moves),
            ("pending_compaction_bytes", self.pending_compaction_bytes),
            ("stall_micros", self.stall_micros),
            ("gets", self.gets),
            ("bloom_checked", self.bloom_checked),
            ("bloom_useful", self.bloom_useful),
            ("range_tombstones_consulted", self.range_tombstones_consulted),
            ("lookups_with_tombstones", self.lookups_with_tombstones),
            ("range_covered_lookups", self.range_covered_lookups),
            ("compaction_range_covered", self.compaction_range_covered),
            ("table_opens", self.table_opens),
            ("block_cache_usage", self.block_cache_usage),
            ("block_cache_hits", self.block_cache_hits),
            ("block_cache_misses", self.block_cache_misses),
            ("memtable_bytes", self.memtable_bytes),
            ("immutable_memtables", self.immutable_memtables),
            ("table_range_tombstones", self.table_range_tombstones),
            ("last_sequence", self.last_sequence),
            ("resumes", self.resumes),
            ("table_bytes", self.table_bytes()),
        ];
        let mut s = String::from("{");
        for (k, v) in fields {
            s.push_str(&format!("\"{k}\":{v},"));
        }
        s.push_str(&format!("\"write_amplification\":{:.4},", self.write_amplification()));
        s.push_str(&format!("\"range_reduce\":{},", self.range_reduce.to_json()));
        if let Some(g) = &self.range_delete_global {
            s.push_str(&format!("\"range_delete_global\":{},", g.to_json()));
        }
        let per_level: Vec<String> = self.compaction_levels.iter().map(|c| c.to_json()).collect();
        s.push_str(&format!("\"compaction_levels\":[{}],", per_level.join(",")));
        s.push_str(&format!("\"levels\":[{}]}}", levels.join(",")));
        s
    }
}

/// Space amplification computed exactly by a scan (RangeReduce §III-B: `SA = N / N_unq`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SpaceAmp {
    /// Every stored point entry (values, point tombstones, all versions) plus range tombstones.
    pub total_entries: u64,
    /// Keys a full scan at the latest sequence returns.
    pub live_entries: u64,
    /// Bytes in tables plus memtables.
    pub total_bytes: u64,
    /// User key + value bytes of the live entries.
    pub live_bytes: u64,
}

impl SpaceAmp {
    /// `total_entries / live_entries` (1.0 for an empty database).
    pub fn ratio(&self) -> f64 {
        if self.live_entries == 0 { 1.0 } else { self.total_entries as f64 / self.live_entries as f64 }
    }

    /// `total_bytes / live_bytes` (1.0 for an empty database).
    pub fn bytes_ratio(&self) -> f64 {
        if self.live_bytes == 0 { 1.0 } else { self.total_bytes as f64 / self.live_bytes as f64 }
    }
}

pub(crate) fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}
