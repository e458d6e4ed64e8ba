//! The systems of the experiment behind one trait (our engine in its RangeReduce modes, and RocksDB), how each
//! is configured, and the measurements taken when a run ends.

use std::path::Path;

use super::BUFFER;
use crate::Result;

/// End-of-run measurements.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct End {
    pub(super) debt_paper: f64,
    pub(super) debt_pending: f64,
    pub(super) space_amp: f64,
    pub(super) data_movement: f64,
    pub(super) rq_bytes_read: f64,
    pub(super) rq_compactions: f64,
    /// Queries that chose levels and collected for a rewrite.
    pub(super) rq_planned: f64,
    /// Queries whose chosen levels were not collected (over the memory bound, a full queue) or whose walk was
    /// incomplete.
    pub(super) rq_dropped: f64,
    /// Rewrites a flush or compaction aborted, or an I/O error stopped before their edit.
    pub(super) rq_aborted: f64,
    /// Queries that found a file they would rewrite held by a running compaction: when they decided (then they
    /// collect nothing) or, after their claim expired, when their rewrite ran (then also in `rq_aborted`).
    pub(super) rq_conflicts: f64,
    pub(super) rq_compaction_write: f64,
    pub(super) level_renames: f64,
    /// Bytes in each level (L0 to L6) after the run: what `debt_paper` is computed from.
    pub(super) levels: [f64; LEVELS],
}

/// Levels reported per system (our engine's `NUM_LEVELS`, RocksDB's default `num_levels`).
const LEVELS: usize = 7;

pub(super) trait Sys {
    fn put(&self, k: &[u8], v: &[u8]);
    /// Reads every live entry of `[lo, hi)`; returns how many.
    fn range(&self, lo: &[u8], hi: &[u8]) -> u64;
    fn settle(&self);
    fn end(&self, t: u64) -> End;
}

struct Ours(lsm::Db);

impl Sys for Ours {
    fn put(&self, k: &[u8], v: &[u8]) {
        let _ = self.0.put(&lsm::WriteOptions::default(), k, v);
    }
    fn range(&self, lo: &[u8], hi: &[u8]) -> u64 {
        let ro = lsm::ReadOptions {
            lower_bound: Some(lo.to_vec()),
            upper_bound: Some(hi.to_vec()),
            ..Default::default()
        };
        let Ok(mut it) = self.0.iter(&ro) else { return 0 };
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            std::hint::black_box(it.value());
            n += 1;
            it.next();
        }
        n
    }
    fn settle(&self) {
        let _ = self.0.flush();
        let _ = self.0.wait_for_compactions();
    }
    fn end(&self, _t: u64) -> End {
        let s = self.0.stats();
        let sa = self.0.space_amplification().map(|a| a.ratio()).unwrap_or(0.0);
        let r = &s.range_reduce;
        End {
            debt_paper: r.compaction_debt_bytes as f64,
            debt_pending: s.pending_compaction_bytes as f64,
            space_amp: sa,
            data_movement: s.data_movement_bytes() as f64,
            rq_bytes_read: r.range_query_bytes_read as f64 / r.range_queries.max(1) as f64,
            rq_compactions: r.rewrites as f64,
            rq_planned: r.rewrites_planned as f64,
            rq_dropped: (r.rewrites_incomplete + r.rewrites_skipped_busy) as f64,
            rq_aborted: (r.rewrites_aborted + r.rewrites_failed) as f64,
            rq_conflicts: (r.rewrites_skipped_conflict + r.rewrites_claim_conflicts) as f64,
            rq_compaction_write: r.rewrite_write_bytes as f64,
            level_renames: r.level_renames as f64,
            levels: std::array::from_fn(|l| s.levels.get(l).map_or(0.0, |x| x.bytes as f64)),
        }
    }
}

struct Rocks {
    db: rocksdb::DB,
    opts: rocksdb::Options,
}

impl Sys for Rocks {
    fn put(&self, k: &[u8], v: &[u8]) {
        let _ = self.db.put(k, v);
    }
    fn range(&self, lo: &[u8], hi: &[u8]) -> u64 {
        let mut ro = rocksdb::ReadOptions::default();
        ro.set_iterate_upper_bound(hi.to_vec());
        let mut it = self.db.raw_iterator_opt(ro);
        it.seek(lo);
        let mut n = 0;
        while it.valid() {
            std::hint::black_box(it.value());
            n += 1;
            it.next();
        }
        n
    }
    fn settle(&self) {
        crate::experiments::rocks::settle(&self.db);
    }
    fn end(&self, t: u64) -> End {
        let stats = self.opts.get_statistics().unwrap_or_default();
        let counter = |name: &str| crate::experiments::rocks::ticker(&stats, name) as f64;
        let files = self.db.live_files().unwrap_or_default();
        let mut level_bytes = [0u64; 8];
        let mut entries = 0u64;
        for f in &files {
            level_bytes[(f.level.max(0) as usize).min(7)] += f.size as u64;
            entries += f.num_entries;
        }
        let debt_paper = match (0..8).rev().find(|&l| level_bytes[l] > 0) {
            Some(last) => (0..last).map(|i| level_bytes[i] * t * (last - i + 1) as u64).sum::<u64>() as f64,
            None => 0.0,
        };
        let mut live = 0u64;
        let mut it = self.db.raw_iterator();
        it.seek_to_first();
        while it.valid() {
            live += 1;
            it.next();
        }
        let debt_pending = self
            .db
            .property_int_value("rocksdb.estimate-pending-compaction-bytes")
            .ok()
            .flatten()
            .unwrap_or(0);
        End {
            debt_paper,
            debt_pending: debt_pending as f64,
            space_amp: entries as f64 / live.max(1) as f64,
            // RocksDB exposes the iterator's returned bytes, not every internal entry: a lower bound on query reads.
            data_movement: counter("rocksdb.flush.write.bytes")
                + counter("rocksdb.compact.read.bytes")
                + counter("rocksdb.compact.write.bytes")
                + counter("rocksdb.db.iter.bytes.read"),
            levels: std::array::from_fn(|l| level_bytes[l] as f64),
            ..End::default()
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Cfg {
    t: u64,
    mode: Option<lsm::RangeReduceMode>,
    renaming: bool,
}

/// REQUIRES for `low_priority` with `rocksdb`: no later RocksDB run in this process wants normal priority
/// (RocksDB has no call that raises its pools again).
pub(super) fn open(name: &str, dir: &Path, t: u64, file: u64, low_priority: bool) -> Result<Box<dyn Sys>> {
    let cfg = match name {
        "lsm-rangereduce" => Cfg { t, mode: Some(lsm::RangeReduceMode::BoundedMerge), renaming: true },
        "lsm-local" => Cfg { t, mode: Some(lsm::RangeReduceMode::Off), renaming: false },
        "lsm-bounded-merge" => Cfg { t, mode: Some(lsm::RangeReduceMode::BoundedMerge), renaming: false },
        "lsm-mos-blind" => Cfg { t, mode: Some(lsm::RangeReduceMode::BlindMergeOnScan), renaming: false },
        "lsm-mos-filesize" => {
            Cfg { t, mode: Some(lsm::RangeReduceMode::FileSizeAwareMergeOnScan), renaming: false }
        }
        _ => Cfg { t, mode: None, renaming: false },
    };
    let level_base = BUFFER as u64 * 4;
    match cfg.mode {
        Some(mode) => {
            let mut o = lsm::Options {
                create_if_missing: true,
                write_buffer_size: BUFFER,
                max_bytes_for_level_base: level_base,
                max_bytes_for_level_multiplier: cfg.t,
                target_file_size_base: file,
                ..lsm::Options::default()
            };
            o.range_reduce.mode = mode;
            o.range_reduce.level_renaming = cfg.renaming;
            if low_priority {
                o.background_cpu_priority = lsm::CpuPriority::Low;
            }
            let fs: std::sync::Arc<dyn vfs::Fs> = std::sync::Arc::new(vfs::OsFs::new());
            Ok(Box::new(Ours(lsm::Db::open(fs, dir, o).map_err(|e| e.to_string())?)))
        }
        None => {
            let mut o = rocksdb::Options::default();
            o.create_if_missing(true);
            o.set_write_buffer_size(BUFFER);
            o.set_max_write_buffer_number(2);
            o.set_level_zero_file_num_compaction_trigger(4);
            o.set_max_bytes_for_level_base(level_base);
            o.set_max_bytes_for_level_multiplier(cfg.t as f64);
            o.set_target_file_size_base(file);
            o.set_compression_type(rocksdb::DBCompressionType::None);
            o.set_level_compaction_dynamic_level_bytes(false);
            o.enable_statistics();
            let mut b = rocksdb::BlockBasedOptions::default();
            b.set_block_size(4096);
            b.set_bloom_filter(10.0, false);
            b.set_block_cache(&rocksdb::Cache::new_lru_cache(8 << 20));
            o.set_block_based_table_factory(&b);
            if low_priority {
                let mut env = rocksdb::Env::new()?;
                env.lower_thread_pool_cpu_priority();
                env.lower_high_priority_thread_pool_cpu_priority();
                o.set_env(&env);
            }
            let db = rocksdb::DB::open(&o, dir)?;
            Ok(Box::new(Rocks { db, opts: o }))
        }
    }
}
