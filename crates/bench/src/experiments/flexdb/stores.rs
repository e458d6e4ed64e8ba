//! The three stores of the experiment behind one trait, each with the configuration it runs with and a
//! description of it for the report.

use std::path::Path;
use std::sync::Arc;

use crate::Result;

/// The budgets every store gets.
#[derive(Debug, Clone, Copy)]
pub(super) struct Config {
    /// One memtable's size.
    pub(super) memtable: usize,
    /// User-space cache.
    pub(super) cache: usize,
    /// The bound of `flexdb-rewrite` (`Defrag::Extents`).
    pub(super) rewrite_extents: usize,
    /// FlexDB's table FlexFile `gc_start_utilization`.
    pub(super) gc_start: (u32, u32),
}

/// The operations the experiment needs from a store.
pub(super) trait Kv: Send + Sync {
    fn put(&self, k: &[u8], v: &[u8]);
    fn get(&self, k: &[u8]) -> bool;
    /// Seeks to the first key `>= k` and reads up to `n` records; returns how many were read.
    fn scan(&self, k: &[u8], n: usize) -> usize;
    /// Flushes the memtables and waits until no background work is pending.
    fn settle(&self);
    /// Bytes the engine has written to its files since it was opened.
    fn bytes_written(&self) -> u64;
    /// `bytes_written` by kind, as extra metrics of a write workload (empty: no breakdown).
    fn written_by_kind(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    /// Read-cache hits and misses since the store was opened (FlexDB: intervals; the LSMs: blocks).
    fn cache_counts(&self) -> (u64, u64);
    /// What the read phase's numbers depend on in the store's layout, for the report's notes (empty: nothing).
    fn layout_note(&self) -> String {
        String::new()
    }
    /// Closes the store cleanly.
    fn close(self: Box<Self>) -> Result<()>;
}

struct Flex(flexdb::Db);

impl Kv for Flex {
    fn put(&self, k: &[u8], v: &[u8]) {
        let _ = self.0.put(k, v, flexdb::WriteOptions::default());
    }
    fn get(&self, k: &[u8]) -> bool {
        matches!(self.0.get(k), Ok(Some(_)))
    }
    fn scan(&self, k: &[u8], n: usize) -> usize {
        // Borrowed pairs, as the LSM peers' iterators hand them out.
        self.0
            .scan_with(k, None, n, false, |k, v| {
                std::hint::black_box((k, v));
            })
            .unwrap_or(0)
    }
    fn settle(&self) {
        let _ = self.0.flush();
    }
    fn bytes_written(&self) -> u64 {
        let s = self.0.stats();
        s.wal_bytes + s.table_bytes_written
    }
    fn written_by_kind(&self) -> Vec<(&'static str, f64)> {
        let s = self.0.stats();
        vec![
            ("wal_bytes", s.wal_bytes as f64),
            (
                "table_record_bytes",
                (s.table_bytes_written - s.table_log_bytes_written - s.table_tree_bytes_written) as f64,
            ),
            ("table_log_bytes", s.table_log_bytes_written as f64),
            ("table_tree_bytes", s.table_tree_bytes_written as f64),
            ("table_gc_bytes", s.table_gc_bytes as f64),
            ("table_file_bytes", s.table_file_bytes as f64),
        ]
    }
    fn cache_counts(&self) -> (u64, u64) {
        let s = self.0.stats();
        (s.cache_hits, s.cache_misses)
    }
    fn layout_note(&self) -> String {
        let s = self.0.stats();
        format!(
            "{} intervals in {} table extents ({:.2} per interval; a cache miss reads each extent of its interval)",
            s.intervals,
            s.table_extents,
            s.table_extents as f64 / s.intervals.max(1) as f64
        )
    }
    fn close(self: Box<Self>) -> Result<()> {
        Ok(self.0.close()?)
    }
}

struct Lsm(lsm::Db);

impl Kv for Lsm {
    fn put(&self, k: &[u8], v: &[u8]) {
        let _ = self.0.put(&lsm::WriteOptions::default(), k, v);
    }
    fn get(&self, k: &[u8]) -> bool {
        matches!(self.0.get(k), Ok(Some(_)))
    }
    fn scan(&self, k: &[u8], n: usize) -> usize {
        let Ok(mut it) = self.0.iter(&lsm::ReadOptions::default()) else { return 0 };
        it.seek(k);
        let mut c = 0;
        while it.valid() && c < n {
            std::hint::black_box((it.key(), it.value()));
            c += 1;
            it.next();
        }
        c
    }
    fn settle(&self) {
        let _ = self.0.flush();
        let _ = self.0.wait_for_compactions();
    }
    fn bytes_written(&self) -> u64 {
        let s = self.0.stats();
        s.wal_bytes + s.bytes_flushed + s.compact_write_bytes
    }
    fn cache_counts(&self) -> (u64, u64) {
        let s = self.0.stats();
        (s.block_cache_hits, s.block_cache_misses)
    }
    fn close(self: Box<Self>) -> Result<()> {
        drop(self);
        Ok(())
    }
}

struct Rocks {
    db: rocksdb::DB,
    opts: rocksdb::Options,
}

impl Rocks {
    fn counter(&self, name: &str) -> u64 {
        crate::experiments::rocks::ticker(&self.opts.get_statistics().unwrap_or_default(), name)
    }
}

impl Kv for Rocks {
    fn put(&self, k: &[u8], v: &[u8]) {
        let _ = self.db.put(k, v);
    }
    fn get(&self, k: &[u8]) -> bool {
        matches!(self.db.get_pinned(k), Ok(Some(_)))
    }
    fn scan(&self, k: &[u8], n: usize) -> usize {
        let mut it = self.db.raw_iterator();
        it.seek(k);
        let mut c = 0;
        while it.valid() && c < n {
            std::hint::black_box((it.key(), it.value()));
            c += 1;
            it.next();
        }
        c
    }
    fn settle(&self) {
        crate::experiments::rocks::settle(&self.db);
    }
    fn bytes_written(&self) -> u64 {
        self.counter("rocksdb.wal.bytes")
            + self.counter("rocksdb.flush.write.bytes")
            + self.counter("rocksdb.compact.write.bytes")
    }
    fn cache_counts(&self) -> (u64, u64) {
        (self.counter("rocksdb.block.cache.hit"), self.counter("rocksdb.block.cache.miss"))
    }
    fn close(self: Box<Self>) -> Result<()> {
        drop(self);
        Ok(())
    }
}

fn flex_options(c: Config, rebuild_interval: u64, defrag: flexdb::Defrag) -> flexdb::Options {
    flexdb::Options {
        create_if_missing: true,
        memtable_bytes: c.memtable,
        // The paper's evaluation setting (§6.3); the store's default is 16.
        interval_max_keys: 8,
        cache_bytes: c.cache,
        rebuild_interval,
        defrag,
        flexfile: flexfile::Options {
            gc_start_utilization: c.gc_start,
            ..flexdb::Options::default().flexfile
        },
        ..flexdb::Options::default()
    }
}

pub(super) fn open_flex_with(dir: &Path, c: Config, rebuild_interval: u64) -> Result<Box<dyn Kv>> {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    let o = flex_options(c, rebuild_interval, flexdb::Options::default().defrag);
    Ok(Box::new(Flex(flexdb::Db::open(fs, dir, o)?)))
}

pub(super) fn open_flex(dir: &Path, c: Config) -> Result<Box<dyn Kv>> {
    open_flex_with(dir, c, 4 << 10)
}

/// FlexDB with a fixed bound: intervals spanning more than `rewrite_extents` extents are rewritten contiguously.
pub(super) fn open_flex_rewrite(dir: &Path, c: Config) -> Result<Box<dyn Kv>> {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    let o = flex_options(c, 4 << 10, flexdb::Defrag::Extents(c.rewrite_extents));
    Ok(Box::new(Flex(flexdb::Db::open(fs, dir, o)?)))
}

/// FlexDB with the reference implementation's defragmentation rule: an interval spanning more extents than half
/// its records is rewritten contiguously when a commit changes it.
pub(super) fn open_flex_defrag(dir: &Path, c: Config) -> Result<Box<dyn Kv>> {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    let o = flex_options(c, 4 << 10, flexdb::Defrag::HalfRecords);
    Ok(Box::new(Flex(flexdb::Db::open(fs, dir, o)?)))
}

pub(super) fn describe_flex(c: Config) -> String {
    let o = flex_options(c, 4 << 10, flexdb::Options::default().defrag);
    format!(
        "flexdb: memtable_bytes={} (x2: active + committing) interval_max_keys={} interval_max_bytes={} \
         cache_bytes={} cache_partitions={} commit_lock_bytes={} defrag={:?} (flexdb-defrag: HalfRecords, \
         flexdb-rewrite: Extents({})) \
         rebuild_interval={} flexfile segment_size={} block_size={} utilization_cap={}/{} \
         gc_start_utilization={}/{} sync=false",
        o.memtable_bytes,
        o.interval_max_keys,
        o.interval_max_bytes,
        o.cache_bytes,
        o.cache_partitions,
        o.commit_lock_bytes,
        o.defrag,
        c.rewrite_extents,
        o.rebuild_interval,
        o.flexfile.segment_size,
        o.flexfile.block_size,
        o.flexfile.utilization_cap.0,
        o.flexfile.utilization_cap.1,
        o.flexfile.gc_start_utilization.0,
        o.flexfile.gc_start_utilization.1
    )
}

/// The tuning guide's flash shape scaled to the memtable: L1 = 8 memtables, files = 1 memtable, multiplier 8,
/// L0 triggers 8/17/24.
fn lsm_options(c: Config) -> lsm::Options {
    lsm::Options {
        create_if_missing: true,
        write_buffer_size: c.memtable,
        max_write_buffer_number: 2,
        level0_file_num_compaction_trigger: 8,
        level0_slowdown_writes_trigger: 17,
        level0_stop_writes_trigger: 24,
        max_bytes_for_level_base: 8 * c.memtable as u64,
        max_bytes_for_level_multiplier: 8,
        target_file_size_base: c.memtable as u64,
        block_cache_size: c.cache,
        // The plain engine, as its RocksDB peer: no query-driven compactions or level renaming.
        range_reduce: lsm::RangeReduceOptions { mode: lsm::RangeReduceMode::Off, ..Default::default() },
        ..lsm::Options::default()
    }
}

pub(super) fn open_lsm(dir: &Path, c: Config) -> Result<Box<dyn Kv>> {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    Ok(Box::new(Lsm(lsm::Db::open(fs, dir, lsm_options(c)).map_err(|e| e.to_string())?)))
}

pub(super) fn describe_lsm(c: Config) -> String {
    format!("lsm-local: {:?}", lsm_options(c))
}

pub(super) fn open_rocks(dir: &Path, c: Config) -> Result<Box<dyn Kv>> {
    let mut o = rocksdb::Options::default();
    o.create_if_missing(true);
    o.set_compaction_style(rocksdb::DBCompactionStyle::Level);
    o.set_write_buffer_size(c.memtable);
    o.set_max_write_buffer_number(2);
    o.set_target_file_size_base(c.memtable as u64);
    o.set_max_background_jobs(4);
    o.set_level_zero_file_num_compaction_trigger(8);
    o.set_level_zero_slowdown_writes_trigger(17);
    o.set_level_zero_stop_writes_trigger(24);
    o.set_num_levels(4);
    o.set_max_bytes_for_level_base(8 * c.memtable as u64);
    o.set_max_bytes_for_level_multiplier(8.0);
    o.set_compression_type(rocksdb::DBCompressionType::None);
    o.enable_statistics();
    let mut t = rocksdb::BlockBasedOptions::default();
    t.set_block_size(4096);
    t.set_bloom_filter(10.0, false);
    t.set_block_cache(&rocksdb::Cache::new_lru_cache(c.cache));
    o.set_block_based_table_factory(&t);
    let db = rocksdb::DB::open(&o, dir)?;
    Ok(Box::new(Rocks { db, opts: o }))
}

pub(super) fn describe_rocks(c: Config) -> String {
    format!(
        "rocksdb 7.8 (tuning guide, total ordered database on flash, sizes scaled to the memtable): level \
         compaction, write_buffer_size={} max_write_buffer_number=2 (guide: 3; 2 matches FlexDB's memtables) \
         target_file_size_base={} max_background_jobs=4 l0 triggers 8/17/24 num_levels=4 \
         max_bytes_for_level_base={} multiplier=8 block_size=4096 bloom=10 full filter block_cache={} \
         compression=none sync=false",
        c.memtable,
        c.memtable,
        8 * c.memtable,
        c.cache
    )
}

pub(super) type Opener = fn(&Path, Config) -> Result<Box<dyn Kv>>;
