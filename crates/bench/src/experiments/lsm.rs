//! `rangedb bench lsm`: the leveled LSM engine (`lsm-local`) against RocksDB (Debian's 7.8) in one run, with equal
//! memtable size and count, L0 triggers, level targets, file size, block size, block cache, Bloom bits,
//! compression (none) and sync (off). Both configurations are printed as notes.
//!
//! Workloads (db_bench names, 16-byte keys, 100-byte values): fillseq, fillrandom, overwrite, readrandom, readseq,
//! seekrandom with 10 and 100 nexts, readwhilewriting (reader throughput while one writer overwrites), deleterandom;
//! then the GLORAN paper's lookup workload: a loaded store under a stream of point lookups mixed with 1 % and 5 %
//! range deletes of width 100 keys. Each system also reports write amplification (flushed plus compacted bytes
//! over the bytes the benchmark wrote; `amplification-load` after fillrandom + overwrite, where both systems got
//! the same bytes, `amplification` at the end, after readwhilewriting wrote as much as each system managed),
//! space amplification (stored entries over live keys, exact by a scan) and compaction debt (RocksDB's
//! estimate-pending-compaction-bytes).
//!
//! Settings: `--set n=KEYS reads=N seeks=N ops=N` (defaults scale with --quick).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::measure::{Stats, time_ops};
use crate::{Ctx, Experiment, Report, Result};

/// The `lsm` experiment.
pub struct Lsm;

const VALUE_LEN: usize = 100;

/// The configuration both systems get.
#[derive(Debug, Clone, Copy)]
struct Config {
    write_buffer_size: usize,
    level_base: u64,
    target_file_size: u64,
    block_cache: usize,
}

trait Kv: Send + Sync {
    fn put(&self, k: &[u8], v: &[u8]);
    fn get(&self, k: &[u8]) -> bool;
    fn delete(&self, k: &[u8]);
    fn delete_range(&self, a: &[u8], b: &[u8]);
    /// Seeks to `k` and reads `n` entries; returns how many were read.
    fn seek_next(&self, k: &[u8], n: usize) -> usize;
    /// Reads every live entry; returns the count.
    fn scan_all(&self) -> u64;
    /// Waits until no compaction is pending.
    fn settle(&self);
    /// Bytes written by flushes and by compactions, stored entries, compaction debt bytes.
    fn amplification(&self) -> Amplification;
    /// Compactions per output level so far (count, bytes read and written, trivial moves) and files per level.
    fn per_level(&self) -> String;
}

fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

struct Ours(lsm::Db);

impl Kv for Ours {
    fn put(&self, k: &[u8], v: &[u8]) {
        let _ = self.0.put(&lsm::WriteOptions::default(), k, v);
    }
    fn get(&self, k: &[u8]) -> bool {
        matches!(self.0.get(k), Ok(Some(_)))
    }
    fn delete(&self, k: &[u8]) {
        let _ = self.0.delete(&lsm::WriteOptions::default(), k);
    }
    fn delete_range(&self, a: &[u8], b: &[u8]) {
        let _ = self.0.delete_range(&lsm::WriteOptions::default(), a, b);
    }
    fn seek_next(&self, k: &[u8], n: usize) -> usize {
        let Ok(mut it) = self.0.iter(&lsm::ReadOptions::default()) else { return 0 };
        it.seek(k);
        let mut c = 0;
        while it.valid() && c < n {
            std::hint::black_box(it.value());
            c += 1;
            it.next();
        }
        c
    }
    fn scan_all(&self) -> u64 {
        let Ok(mut it) = self.0.iter(&lsm::ReadOptions::default()) else { return 0 };
        it.seek_to_first();
        let mut c = 0;
        while it.valid() {
            std::hint::black_box(it.value());
            c += 1;
            it.next();
        }
        c
    }
    fn settle(&self) {
        let _ = self.0.flush();
        let _ = self.0.wait_for_compactions();
    }
    fn amplification(&self) -> Amplification {
        let s = self.0.stats();
        Amplification {
            flushed: s.bytes_flushed,
            compacted: s.compact_write_bytes,
            stored: self.0.space_amplification().map(|a| a.total_entries).unwrap_or(0),
            debt: s.pending_compaction_bytes,
        }
    }
    fn per_level(&self) -> String {
        let s = self.0.stats();
        let rows: Vec<String> = s
            .compaction_levels
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, c)| c.compactions + c.trivial_moves > 0)
            .map(|(l, c)| {
                format!(
                    "L{l}: {} compactions read {:.1}+{:.1} MB wrote {:.1} MB, {} moves of {} files {:.1} MB",
                    c.compactions,
                    mb(c.read_input_bytes),
                    mb(c.read_output_bytes),
                    mb(c.write_bytes),
                    c.trivial_moves,
                    c.moved_files,
                    mb(c.moved_bytes)
                )
            })
            .collect();
        let shape: Vec<String> = s
            .levels
            .iter()
            .enumerate()
            .filter(|(_, l)| l.files > 0)
            .map(|(l, st)| format!("L{l} {} files {:.1} MB", st.files, mb(st.bytes)))
            .collect();
        format!(
            "{} flushes wrote {:.1} MB; {}; shape: {}",
            s.flushes,
            mb(s.bytes_flushed),
            rows.join("; "),
            shape.join(", ")
        )
    }
}

struct Rocks {
    db: rocksdb::DB,
    opts: rocksdb::Options,
    dir: std::path::PathBuf,
}

impl Kv for Rocks {
    fn put(&self, k: &[u8], v: &[u8]) {
        let _ = self.db.put(k, v);
    }
    fn get(&self, k: &[u8]) -> bool {
        matches!(self.db.get_pinned(k), Ok(Some(_)))
    }
    fn delete(&self, k: &[u8]) {
        let _ = self.db.delete(k);
    }
    fn delete_range(&self, a: &[u8], b: &[u8]) {
        let mut wb = rocksdb::WriteBatch::default();
        wb.delete_range(a, b);
        let _ = self.db.write(wb);
    }
    fn seek_next(&self, k: &[u8], n: usize) -> usize {
        let mut it = self.db.raw_iterator();
        it.seek(k);
        let mut c = 0;
        while it.valid() && c < n {
            std::hint::black_box(it.value());
            c += 1;
            it.next();
        }
        c
    }
    fn scan_all(&self) -> u64 {
        let mut it = self.db.raw_iterator();
        it.seek_to_first();
        let mut c = 0;
        while it.valid() {
            std::hint::black_box(it.value());
            c += 1;
            it.next();
        }
        c
    }
    fn settle(&self) {
        super::rocks::settle(&self.db);
    }
    fn amplification(&self) -> Amplification {
        let stats = self.opts.get_statistics().unwrap_or_default();
        let counter = |name: &str| super::rocks::ticker(&stats, name);
        let props =
            self.db.property_value("rocksdb.aggregated-table-properties").ok().flatten().unwrap_or_default();
        let field = |name: &str| -> u64 {
            props
                .split(';')
                .find_map(|p| {
                    p.trim()
                        .strip_prefix(name)
                        .and_then(|v| v.trim().trim_start_matches('=').trim().parse().ok())
                })
                .unwrap_or(0)
        };
        let mem = self
            .db
            .property_int_value("rocksdb.num-entries-active-mem-table")
            .ok()
            .flatten()
            .unwrap_or(0)
            + self.db.property_int_value("rocksdb.num-entries-imm-mem-tables").ok().flatten().unwrap_or(0);
        let stored = field("# entries") + field("# range deletions") + mem;
        let debt = self
            .db
            .property_int_value("rocksdb.estimate-pending-compaction-bytes")
            .ok()
            .flatten()
            .unwrap_or(0);
        Amplification {
            flushed: counter("rocksdb.flush.write.bytes"),
            compacted: counter("rocksdb.compact.write.bytes"),
            stored,
            debt,
        }
    }
    fn per_level(&self) -> String {
        // RocksDB's per-level compaction table prints GB with one decimal; its event log has exact bytes.
        let log = std::fs::read_to_string(self.dir.join("LOG")).unwrap_or_default();
        let shape: Vec<String> = (0..7)
            .filter_map(|l| {
                let files = self.db.property_int_value(&format!("rocksdb.num-files-at-level{l}")).ok()??;
                (files > 0).then(|| format!("L{l} {files} files"))
            })
            .collect();
        format!("{}; shape: {}", super::rocks::per_level_from_log(&log), shape.join(", "))
    }
}

/// What a system wrote and holds, for the amplification rows.
struct Amplification {
    flushed: u64,
    compacted: u64,
    stored: u64,
    debt: u64,
}

impl Amplification {
    /// Write amplification over `user_bytes` (the bytes the benchmark wrote, the same denominator for both
    /// systems), split into its flush and compaction parts.
    fn write_metrics(&self, user_bytes: u64) -> [(&'static str, f64); 3] {
        let per_user = |b: u64| b as f64 / user_bytes.max(1) as f64;
        [
            ("write_amplification", per_user(self.flushed + self.compacted)),
            ("flush_write_amplification", per_user(self.flushed)),
            ("compaction_write_amplification", per_user(self.compacted)),
        ]
    }
}

fn open_ours(dir: &std::path::Path, c: Config) -> Result<(Arc<dyn Kv>, String)> {
    let o = lsm::Options {
        create_if_missing: true,
        write_buffer_size: c.write_buffer_size,
        max_bytes_for_level_base: c.level_base,
        target_file_size_base: c.target_file_size,
        block_cache_size: c.block_cache,
        // The plain engine, as its RocksDB peer: no query-driven compactions or level renaming.
        range_reduce: lsm::RangeReduceOptions { mode: lsm::RangeReduceMode::Off, ..Default::default() },
        ..lsm::Options::default()
    };
    let desc = format!("{o:?}");
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    Ok((Arc::new(Ours(lsm::Db::open(fs, dir, o).map_err(|e| e.to_string())?)), desc))
}

fn open_rocks(dir: &std::path::Path, c: Config) -> Result<(Arc<dyn Kv>, String)> {
    let mut o = rocksdb::Options::default();
    o.create_if_missing(true);
    o.set_write_buffer_size(c.write_buffer_size);
    o.set_max_write_buffer_number(2);
    o.set_level_zero_file_num_compaction_trigger(4);
    o.set_level_zero_slowdown_writes_trigger(20);
    o.set_level_zero_stop_writes_trigger(36);
    o.set_max_bytes_for_level_base(c.level_base);
    o.set_max_bytes_for_level_multiplier(10.0);
    o.set_target_file_size_base(c.target_file_size);
    o.set_compression_type(rocksdb::DBCompressionType::None);
    o.set_level_compaction_dynamic_level_bytes(false);
    o.enable_statistics();
    let mut t = rocksdb::BlockBasedOptions::default();
    t.set_block_size(4096);
    t.set_bloom_filter(10.0, false);
    t.set_block_cache(&rocksdb::Cache::new_lru_cache(c.block_cache));
    o.set_block_based_table_factory(&t);
    let desc = format!(
        "rocksdb 7.8: write_buffer_size={} max_write_buffer_number=2 l0 triggers 4/20/36 max_bytes_for_level_base={} \
         multiplier=10 target_file_size_base={} block_size=4096 bloom=10 full filter block_cache={} compression=none \
         dynamic_level_bytes=false max_background_jobs=2 (default) sync=false",
        c.write_buffer_size, c.level_base, c.target_file_size, c.block_cache
    );
    let db = rocksdb::DB::open(&o, dir)?;
    Ok((Arc::new(Rocks { db, opts: o, dir: dir.to_path_buf() }), desc))
}

fn key(i: u64) -> [u8; 16] {
    super::records::user_key(i)
}

fn value(i: u64) -> &'static [u8] {
    super::records::letters(i, VALUE_LEN)
}

type Opener = fn(&std::path::Path, Config) -> Result<(Arc<dyn Kv>, String)>;

impl Experiment for Lsm {
    fn name(&self) -> &'static str {
        "lsm"
    }

    fn settings(&self) -> &'static [&'static str] {
        &["n", "ops", "reads", "seeks"]
    }

    fn about(&self) -> &'static str {
        "lsm-local vs rocksdb: db_bench workloads, GLORAN lookup workload with 1%/5% range deletes, write/space \
         amplification, compaction debt; --set n=KEYS reads=N seeks=N ops=N"
    }

    fn run(&self, ctx: &Ctx) -> Result<Report> {
        let n: u64 = ctx.setting_min("n", ctx.scale(200_000, 2_000_000), 1)?;
        let reads: u64 = ctx.setting_min("reads", ctx.scale(100_000, 1_000_000), 1)?;
        let seeks: u64 = ctx.setting_min("seeks", ctx.scale(10_000, 100_000), 1)?;
        let ops: u64 = ctx.setting_min("ops", ctx.scale(50_000, 500_000), 1)?;
        let cfg = if ctx.quick {
            Config {
                write_buffer_size: 4 << 20,
                level_base: 16 << 20,
                target_file_size: 4 << 20,
                block_cache: 8 << 20,
            }
        } else {
            Config {
                write_buffer_size: 64 << 20,
                level_base: 256 << 20,
                target_file_size: 64 << 20,
                block_cache: 8 << 20,
            }
        };
        let mut report = Report::new(self.name(), ctx.quick);
        let params = json!({"keys": n, "key_bytes": 16, "value_bytes": VALUE_LEN, "reads": reads, "seeks": seeks,
                            "write_buffer_size": cfg.write_buffer_size, "max_bytes_for_level_base": cfg.level_base,
                            "target_file_size_base": cfg.target_file_size, "block_cache": cfg.block_cache,
                            "bloom_bits_per_key": 10, "compression": "none", "sync": false});
        for w in [
            "fillseq",
            "fillrandom",
            "overwrite",
            "readrandom",
            "readseq",
            "seekrandom-10",
            "seekrandom-100",
            "readwhilewriting",
            "deleterandom",
            "amplification-load",
            "amplification",
        ] {
            report.workload(w, params.clone());
        }
        for pct in [1, 5] {
            report.workload(
                &format!("lookup-rangedel-{pct}pct"),
                json!({"keys": n, "ops": ops, "range_delete_fraction": pct as f64 / 100.0, "range_width_keys": 100}),
            );
        }
        let systems: [(&str, Opener); 2] = [("lsm-local", open_ours), ("rocksdb", open_rocks)];
        for (name, open) in systems {
            let dir = ctx.scratch.join(format!("lsm-{name}"));
            let _ = std::fs::remove_dir_all(&dir);
            let mut rng = SmallRng::seed_from_u64(ctx.seed);
            let mut user_bytes = 0u64;
            // fillseq on a fresh store.
            {
                let (db, desc) = open(&dir, cfg)?;
                report.note(format!("{name}: {desc}"));
                let s = time_ops(n, |i| db.put(&key(i), value(i)));
                report.row("fillseq", name, s.metrics());
            }
            let _ = std::fs::remove_dir_all(&dir);
            let (db, _) = open(&dir, cfg)?;
            let mut perm: Vec<u64> = (0..n).collect();
            perm.shuffle(&mut rng);
            let s = time_ops(n, |i| db.put(&key(perm[i as usize]), value(i)));
            user_bytes += n * (16 + VALUE_LEN as u64);
            report.row("fillrandom", name, s.metrics());
            let s = time_ops(n, |i| {
                let k = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 7) % n;
                db.put(&key(k), value(i + n))
            });
            user_bytes += n * (16 + VALUE_LEN as u64);
            report.row("overwrite", name, s.metrics());
            db.settle();
            // The same bytes for both systems (later phases write as much as each system manages in a time).
            let a = db.amplification();
            report.row("amplification-load", name, a.write_metrics(user_bytes));
            report.note(format!("{name} after the load: {}", db.per_level()));
            let keys: Vec<u64> = (0..reads).map(|_| rng.random_range(0..n)).collect();
            let s = time_ops(reads, |i| {
                std::hint::black_box(db.get(&key(keys[i as usize])));
            });
            report.row("readrandom", name, s.metrics());
            let t = std::time::Instant::now();
            let c = db.scan_all();
            let secs = t.elapsed().as_secs_f64();
            report.row("readseq", name, [("ops_per_sec", c as f64 / secs.max(1e-9))]);
            for nexts in [10usize, 100] {
                let s = time_ops(seeks, |i| {
                    std::hint::black_box(db.seek_next(&key(keys[i as usize % keys.len()]), nexts));
                });
                report.row(&format!("seekrandom-{nexts}"), name, s.metrics());
            }
            // readwhilewriting: reader throughput while one thread overwrites.
            let stop = Arc::new(AtomicBool::new(false));
            let writer = {
                let db = db.clone();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let k = (i.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 5) % n;
                        db.put(&key(k), value(i));
                        i += 1;
                    }
                    i
                })
            };
            let t = std::time::Instant::now();
            let s: Stats = time_ops(reads, |i| {
                std::hint::black_box(db.get(&key(keys[i as usize])));
            });
            stop.store(true, Ordering::Relaxed);
            let written = writer.join().map_err(|_| "writer panicked")?;
            let secs = t.elapsed().as_secs_f64().max(1e-9);
            user_bytes += written * (16 + VALUE_LEN as u64);
            // The writer's rate is context: on few cores, a faster writer (and the flushes and compactions it
            // causes) leaves the readers less CPU.
            let mut m = s.metrics();
            m.push(("writer_ops_per_sec", written as f64 / secs));
            report.row("readwhilewriting", name, m);
            let dels = n / 10;
            let s = time_ops(dels, |i| db.delete(&key(keys[i as usize % keys.len()])));
            user_bytes += dels * 16;
            report.row("deleterandom", name, s.metrics());
            db.settle();
            let live = db.scan_all();
            let a = db.amplification();
            let [wa, _, _] = a.write_metrics(user_bytes);
            report.row(
                "amplification",
                name,
                [
                    wa,
                    ("space_amplification", a.stored as f64 / live.max(1) as f64),
                    ("compaction_debt_bytes", a.debt as f64),
                ],
            );
            report.note(format!("{name} at the end: {}", db.per_level()));
            drop(db);
            // GLORAN's lookup workload: point lookups mixed with range deletes of 100 keys.
            for pct in [1u64, 5] {
                let _ = std::fs::remove_dir_all(&dir);
                let (db, _) = open(&dir, cfg)?;
                for i in 0..n {
                    db.put(&key(perm[i as usize]), value(i));
                }
                db.settle();
                let mut r = SmallRng::seed_from_u64(ctx.seed ^ pct);
                let plan: Vec<(bool, u64)> =
                    (0..ops).map(|_| (r.random_range(0..100) < pct, r.random_range(0..n))).collect();
                let s = time_ops(ops, |i| {
                    let (is_del, k) = plan[i as usize];
                    if is_del {
                        db.delete_range(&key(k), &key(k + 100));
                    } else {
                        std::hint::black_box(db.get(&key(k)));
                    }
                });
                let w = format!("lookup-rangedel-{pct}pct");
                report.row(&w, name, s.metrics());
                drop(db);
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
        report.note(
            "Background threads: lsm-local runs one flush thread and max_background_compactions=1 compaction \
             thread; RocksDB's default max_background_jobs=2 splits into the same (one flush, one compaction). \
             Equal settings otherwise (see the two configuration lines). Per-level compaction work and level shapes \
             are in the 'after the load' and 'at the end' notes.",
        );
        Ok(report)
    }
}
