//! Options with RocksDB's defaults, and their validation.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::Compression;
use crate::rangedel::{LocalTombstones, RangeDeleteStrategy};
use crate::snapshot::Snapshot;

/// Database options. Defaults follow RocksDB 7.x (`Options()`), except where a note says otherwise.
#[derive(Clone)]
pub struct Options {
    /// Create the database if the directory holds none (default false).
    pub create_if_missing: bool,
    /// Fail if a database already exists (default false).
    pub error_if_exists: bool,
    /// Memtable size that triggers a switch to a new memtable (default 64 MiB).
    pub write_buffer_size: usize,
    /// Memtables in memory, the mutable one included (default 2: one can flush while the other takes writes).
    pub max_write_buffer_number: usize,
    /// L0 file count that triggers an L0 compaction (default 4).
    pub level0_file_num_compaction_trigger: usize,
    /// L0 file count at which each write is delayed (default 20).
    pub level0_slowdown_writes_trigger: usize,
    /// L0 file count at which writes wait for compaction (default 36).
    pub level0_stop_writes_trigger: usize,
    /// Pending compaction bytes at which writes are delayed (default 64 GiB).
    pub soft_pending_compaction_bytes_limit: u64,
    /// Pending compaction bytes at which writes wait (default 256 GiB).
    pub hard_pending_compaction_bytes_limit: u64,
    /// Target size of L1 (default 256 MiB).
    pub max_bytes_for_level_base: u64,
    /// Size ratio T between adjacent levels (default 10).
    pub max_bytes_for_level_multiplier: u64,
    /// Target size of compaction output files (default 64 MiB).
    pub target_file_size_base: u64,
    /// A compaction output is cut before it and the grandparent bytes it overlaps exceed this, so that
    /// compacting it later stays bounded (default 0: 25 × `target_file_size_base`, as RocksDB).
    pub max_compaction_bytes: u64,
    /// Cut compaction outputs at grandparent file boundaries once half full, and skip over grandparent files
    /// the output has no keys for, letting outputs grow to 2 × target meanwhile (RocksDB 7.8's
    /// `level_compaction_dynamic_file_size`; default true).
    pub level_compaction_dynamic_file_size: bool,
    /// Uncompressed data block size (default 4 KiB).
    pub block_size: usize,
    /// Keys between restart points (default 16).
    pub block_restart_interval: usize,
    /// Bloom filter bits per key, 0 disables (default 10).
    pub bloom_bits_per_key: usize,
    /// Data block compression (default none; RocksDB defaults to Snappy, which we do not ship: LZ4 and zstd are
    /// the options).
    pub compression: Compression,
    /// Block cache capacity in bytes (default 8 MiB, RocksDB 7.x's default cache).
    pub block_cache_size: usize,
    /// Files the engine may hold open (default 1000, as LevelDB; RocksDB's default is unlimited). As in both,
    /// the table cache keeps 10 fewer tables open; and at open it is clipped to the process's open-file limit
    /// (`RLIMIT_NOFILE`) less an eighth of that limit (RocksDB clips to the whole limit). See
    /// [`table_cache::capacity`](crate::table_cache::capacity).
    pub max_open_files: usize,
    /// Start a new MANIFEST beyond this size (default 1 GiB as RocksDB's `max_manifest_file_size`).
    pub max_manifest_file_size: u64,
    /// Largest group of concurrent writes committed with one WAL append (default 1 MiB, as LevelDB).
    pub max_write_group_bytes: usize,
    /// Which file of a level compaction picks (default `MinOverlappingRatio`, RocksDB's default since 6.x).
    pub compaction_pri: CompactionPri,
    /// Disable automatic compactions (manual `compact_range` still works; default false). The L0 file count and
    /// the pending compaction bytes then neither delay nor stop writes, as in RocksDB: nothing but the caller
    /// would compact them away.
    pub disable_auto_compactions: bool,
    /// Compaction threads (default 1). Flushes run on a thread of their own besides these, so the default
    /// matches RocksDB's effective default: `max_background_jobs = 2` splits into one flush and one compaction
    /// thread (`GetBGJobLimits`). More threads run compactions whose files and output ranges do not meet.
    pub max_background_compactions: usize,
    /// CPU priority of the background threads: flush (and RangeReduce rewrites), compactions, deletions
    /// (default `Normal`). `Low` is RocksDB's `Env::LowerThreadPoolCPUPriority`: with fewer cores than busy
    /// threads, foreground reads and writes get the CPU first.
    pub background_cpu_priority: CpuPriority,
    /// How range deletes are stored and consulted (default: RocksDB-style local tombstones).
    pub range_delete_strategy: Arc<dyn RangeDeleteStrategy>,
    /// Query-driven compaction (default: Bounded-Merge with rho = 1/T and Level-Renaming; docs/rangereduce.md).
    pub range_reduce: crate::RangeReduceOptions,
    /// What recovery does with WAL damage a crash cannot explain (default `Strict`: fail the open with
    /// `Corruption`; `PointInTime` salvages the writes before the damage, see [`crate::Db::recovery`]). The
    /// MANIFEST is always strict: dropping its edits could lose tables or revive deleted ones.
    pub wal_recovery: vfs::torn::WalRecovery,
    /// After a background error caused by a full disk or an exceeded quota (ENOSPC, EDQUOT), the flush thread
    /// (and a write or flush that meets the error) tries [`crate::Db::resume`] by itself at most this often, so
    /// writes pick up again once space is freed (default 1 s, RocksDB's `bgerror_resume_retry_interval`; `None`:
    /// only an explicit `resume` or a reopen).
    /// Other errors always wait for the caller: a device error may mean a failing disk.
    pub auto_resume_interval: Option<std::time::Duration>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("write_buffer_size", &self.write_buffer_size)
            .field("max_write_buffer_number", &self.max_write_buffer_number)
            .field("level0_file_num_compaction_trigger", &self.level0_file_num_compaction_trigger)
            .field("level0_slowdown_writes_trigger", &self.level0_slowdown_writes_trigger)
            .field("level0_stop_writes_trigger", &self.level0_stop_writes_trigger)
            .field("max_bytes_for_level_base", &self.max_bytes_for_level_base)
            .field("max_bytes_for_level_multiplier", &self.max_bytes_for_level_multiplier)
            .field("target_file_size_base", &self.target_file_size_base)
            .field("max_compaction_bytes", &self.max_compaction_bytes)
            .field("level_compaction_dynamic_file_size", &self.level_compaction_dynamic_file_size)
            .field("block_size", &self.block_size)
            .field("bloom_bits_per_key", &self.bloom_bits_per_key)
            .field("compression", &self.compression)
            .field("compaction_pri", &self.compaction_pri)
            .field("max_background_compactions", &self.max_background_compactions)
            .field("background_cpu_priority", &self.background_cpu_priority)
            .field("block_cache_size", &self.block_cache_size)
            .field("range_delete_strategy", &self.range_delete_strategy.name())
            .field("range_reduce", &self.range_reduce)
            .field("wal_recovery", &self.wal_recovery)
            .field("auto_resume_interval", &self.auto_resume_interval)
            .finish_non_exhaustive()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: false,
            error_if_exists: false,
            write_buffer_size: 64 << 20,
            max_write_buffer_number: 2,
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            soft_pending_compaction_bytes_limit: 64 << 30,
            hard_pending_compaction_bytes_limit: 256 << 30,
            max_bytes_for_level_base: 256 << 20,
            max_bytes_for_level_multiplier: 10,
            target_file_size_base: 64 << 20,
            max_compaction_bytes: 0,
            level_compaction_dynamic_file_size: true,
            block_size: 4096,
            block_restart_interval: 16,
            bloom_bits_per_key: 10,
            compression: Compression::None,
            block_cache_size: 8 << 20,
            max_open_files: 1000,
            max_manifest_file_size: 1 << 30,
            max_write_group_bytes: 1 << 20,
            compaction_pri: CompactionPri::MinOverlappingRatio,
            disable_auto_compactions: false,
            max_background_compactions: 1,
            background_cpu_priority: CpuPriority::Normal,
            range_delete_strategy: Arc::new(LocalTombstones),
            range_reduce: crate::RangeReduceOptions::default(),
            wal_recovery: vfs::torn::WalRecovery::Strict,
            auto_resume_interval: Some(std::time::Duration::from_secs(1)),
        }
    }
}

impl Options {
    /// `max_compaction_bytes`, with 0 resolved to its default.
    pub fn effective_max_compaction_bytes(&self) -> u64 {
        if self.max_compaction_bytes == 0 {
            self.target_file_size_base.saturating_mul(25)
        } else {
            self.max_compaction_bytes
        }
    }

    /// Rejects settings the engine cannot run with.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::InvalidArgument(m.to_string()));
        if self.write_buffer_size < 1024 {
            return bad("write_buffer_size must be at least 1 KiB");
        }
        if self.max_write_buffer_number < 2 {
            return bad("max_write_buffer_number must be at least 2");
        }
        if self.level0_file_num_compaction_trigger == 0 {
            return bad("level0_file_num_compaction_trigger must be positive");
        }
        if self.level0_slowdown_writes_trigger < self.level0_file_num_compaction_trigger
            || self.level0_stop_writes_trigger < self.level0_slowdown_writes_trigger
        {
            return bad("L0 triggers must satisfy compaction <= slowdown <= stop");
        }
        if self.hard_pending_compaction_bytes_limit < self.soft_pending_compaction_bytes_limit {
            return bad("hard pending compaction limit below the soft one");
        }
        if self.max_bytes_for_level_multiplier < 2 {
            return bad("max_bytes_for_level_multiplier must be at least 2");
        }
        if self.max_bytes_for_level_base == 0 || self.target_file_size_base == 0 {
            return bad("level and file size targets must be positive");
        }
        if self.block_size < 64 || self.block_size > (16 << 20) {
            return bad("block_size must be in 64 B..16 MiB");
        }
        if self.block_restart_interval == 0 {
            return bad("block_restart_interval must be positive");
        }
        if self.max_background_compactions == 0 || self.max_background_compactions > 64 {
            return bad("max_background_compactions must be in 1..=64");
        }
        if self.bloom_bits_per_key > 64 {
            return bad("bloom_bits_per_key must be at most 64");
        }
        self.range_reduce.validate()?;
        Ok(())
    }
}

/// How compaction picks the input file of a level >= 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompactionPri {
    /// The file with the smallest ratio of overlapping next-level bytes to its own size (least write
    /// amplification for the bytes moved; RocksDB's `kMinOverlappingRatio`).
    #[default]
    MinOverlappingRatio,
    /// The next file after the level's compact pointer (LevelDB; RocksDB's `kRoundRobin`).
    RoundRobin,
}

/// CPU priority of the engine's background threads ([`Options::background_cpu_priority`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CpuPriority {
    /// The priority of the thread that opened the database.
    #[default]
    Normal,
    /// The lowest scheduling priority (Linux: nice 19, as RocksDB's `CpuPriority::kLow`); elsewhere `Normal`.
    /// Background work then runs on CPU time the foreground leaves: if the foreground keeps every core busy,
    /// flushes and compactions fall behind and writes stall on the L0 and pending-bytes limits.
    Low,
}

/// Options of one write.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// Sync the WAL before acknowledging (default false: durable at the next sync or memtable switch).
    pub sync: bool,
}

/// Options of one read or iterator.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions<'a> {
    /// Read at this snapshot (default: the latest state). It must come from the store being read
    /// (`Error::InvalidArgument` otherwise); a read or iterator that started keeps its view if the handle drops.
    pub snapshot: Option<&'a Snapshot>,
    /// Iterators: smallest key returned (inclusive).
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators: first key not returned (exclusive).
    pub upper_bound: Option<Vec<u8>>,
}
