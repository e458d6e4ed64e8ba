//! `rangedb bench flexdb`: FlexDB against RocksDB (Debian's 7.8) and our leveled LSM engine (`lsm-local`), the
//! experiments of the FlexFile paper's §6.3, scaled down.
//!
//! All three stores get the same memtable budget (two memtables: the active one and one being committed or
//! flushed) and the same user-space cache budget (FlexDB's interval cache, the LSM engines' block caches, one
//! fifth of the dataset as in the paper's 8 GB cache for 40 GB of data). RocksDB follows its tuning guide's
//! "total ordered database, flash storage" configuration with the sizes scaled to the memtable; the LSM engine
//! gets the same shape. FlexDB uses the paper's evaluation setting of at most 8 keys per interval. Every
//! configuration is printed as a note. No store syncs per write (the paper's setting).
//!
//! `flexdb` is the paper's FlexDB (`Defrag::Never`: untouched records are never rewritten). `flexdb-defrag` adds
//! the reference implementation's defragmentation (`Defrag::HalfRecords`): the committer rewrites an interval it
//! changes as one contiguous run when in-place updates have split it into more extents than half its records,
//! trading bytes written for fewer positional reads per cache miss. `flexdb-rewrite` (not run unless named in
//! `systems`) uses a fixed bound instead, `Defrag::Extents(rewrite_extents)`, default 2.
//!
//! Workloads:
//! - `write-{seq,zipf,comp}-{zippydb,udb,sys}`: an empty store receives `dataset` bytes of puts (Table 3's key and
//!   value sizes) from `writers` threads (default 4, the paper's: each inserts a quarter of the dataset), keys
//!   sequential (one contiguous range per thread: a sequential load appends at four distant places at once, which
//!   is what makes RocksDB's new tables overlap in the paper's §6.3), YCSB-Zipfian
//!   (θ = 0.99, scattered) or Zipfian-composite (the first three decimal digits Zipfian, the rest uniform);
//!   Zipfian writes overwrite. Metrics: throughput of the puts, `bytes_written` (what the engine wrote: logs,
//!   tables, FlexFile data, log and tree, after a flush and until compactions finish), `io_write_bytes` (the
//!   kernel's count of bytes this process sent to storage, `/proc/self/io`, the same span) and
//!   `write_amplification` (`bytes_written` over the user bytes), and `disk_bytes` (bytes of the store's files
//!   after the settle) with `space_amplification` (over the dataset's bytes); FlexDB's rows split
//!   `bytes_written` into `wal_bytes`, `table_record_bytes` (of which `table_gc_bytes` are records FlexFile's GC
//!   relocated), `table_log_bytes` and `table_tree_bytes` (its FlexTree's operation log and checkpoints), and
//!   give `table_file_bytes`, the data file's size.
//! - `get-{seq,zipf,comp}` and `scan50-zipf`: the UDB dataset loaded in key order, then Zipfian updates of half of
//!   it (the paper's randomised layout), settled; then point lookups and 50-record scans.
//! - `recovery`: that store closed and reopened; time of the open (WAL replay and, for FlexDB, the sparse index
//!   rebuilt from anchors every `rebuild_interval` bytes: 4 KiB, and 256 KiB as `flexdb-rebuild-256k`). The page
//!   cache is warm (clearing it needs root).
//! - `ycsb-a` .. `ycsb-f`: the UDB dataset loaded in key order, then YCSB A–F in order on the same store (E scans
//!   50 records, as in the paper).
//!
//! Settings: `--set dataset_mib=N writers=N threads=N reads=N scans=N ycsb_ops=N rewrite_extents=N
//! gc_start_utilization=N/D` (defaults scale with --quick; `threads`, the reading and YCSB threads, defaults to
//! the largest `--threads`; `rewrite_extents` is `flexdb-rewrite`'s setting, default 2;
//! `gc_start_utilization` is the FlexDB systems' FlexFile setting, default FlexDB's), and subsets for profiling:
//! `systems=a,b`, `phases=writes,reads,recovery,ycsb`, `datasets=zippydb,udb,sys`.

use std::time::Instant;

use serde_json::json;
use workloads::{
    Distribution, KeyEncoding, KeyOrder, KeySampler, KvSizes, Op, Preset, SizeDistribution, Workload,
};

use crate::measure::time_ops_parallel;

mod stores;

use crate::{Ctx, Experiment, Report, Result};
use stores::{
    Config, Kv, Opener, describe_flex, describe_lsm, describe_rocks, open_flex, open_flex_defrag,
    open_flex_rewrite, open_flex_with, open_lsm, open_rocks,
};

/// The `flexdb` experiment.
pub struct FlexDbBench;

/// Bytes this process has sent to storage so far (`write_bytes - cancelled_write_bytes` of `/proc/self/io`), or
/// 0 where the kernel does not say.
fn io_written() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/io") else { return 0 };
    let field = |name: &str| -> u64 {
        s.lines().find_map(|l| l.strip_prefix(name).and_then(|r| r.trim().parse().ok())).unwrap_or(0)
    };
    field("write_bytes:").saturating_sub(field("cancelled_write_bytes:"))
}

/// A dataset: Table 3's fixed key and value sizes, keys encoded in key-number order.
#[derive(Clone)]
struct Data {
    name: &'static str,
    enc: KeyEncoding,
    klen: usize,
    vlen: usize,
    n: u64,
}

impl Data {
    fn new(name: &'static str, sizes: KvSizes, bytes: u64) -> Data {
        let (klen, vlen) = (sizes.key.max() as usize, sizes.value.max() as usize);
        Data {
            name,
            enc: KeyEncoding::fixed_str(klen),
            klen,
            vlen,
            n: (bytes / (klen + vlen) as u64).max(1000),
        }
    }
    fn key(&self, i: u64, out: &mut Vec<u8>) {
        out.clear();
        self.enc.encode_into(KeyOrder::Ordered.key(i), out);
    }
    fn value(&self, i: u64, version: u64, out: &mut Vec<u8>) {
        out.resize(self.vlen, 0);
        workloads::fill_value(i, version, out);
    }
    fn user_bytes(&self, ops: u64) -> u64 {
        ops * (self.klen + self.vlen) as u64
    }
}

#[derive(Clone, Copy)]
enum Dist {
    Seq,
    Zipf,
    Comp,
}

impl Dist {
    fn name(self) -> &'static str {
        match self {
            Dist::Seq => "seq",
            Dist::Zipf => "zipf",
            Dist::Comp => "comp",
        }
    }
    fn distribution(self) -> Distribution {
        match self {
            Dist::Seq => Distribution::Sequential,
            Dist::Zipf => Distribution::YCSB_ZIPFIAN,
            Dist::Comp => Distribution::ZIPFIAN_COMPOSITE,
        }
    }
}

/// Per-thread key streams: `per` keys each; sequential streams cover one contiguous range per thread.
fn key_streams(d: Dist, n: u64, threads: usize, per: u64, seed: u64) -> Result<Vec<Vec<u64>>> {
    (0..threads)
        .map(|t| -> Result<Vec<u64>> {
            Ok(match d {
                Dist::Seq => {
                    let lo = n * t as u64 / threads as u64;
                    (0..per).map(|i| (lo + i) % n).collect()
                }
                _ => KeySampler::new(d.distribution(), n, seed ^ ((t as u64 + 1) * 0x9E37_79B9))
                    .map_err(|e| e.to_string())?
                    .take(per as usize)
                    .collect(),
            })
        })
        .collect()
}

/// Puts `streams[t]` from thread `t`; returns the throughput metrics of the puts.
fn put_streams(db: &dyn Kv, data: &Data, streams: &[Vec<u64>], version: u64) -> Vec<(&'static str, f64)> {
    let per = streams.iter().map(Vec::len).min().unwrap_or(0) as u64;
    let s = time_ops_parallel(streams.len(), per, |t, i| {
        thread_local! {
            static BUF: std::cell::RefCell<(Vec<u8>, Vec<u8>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
        }
        let k = streams[t][i as usize];
        BUF.with_borrow_mut(|(kb, vb)| {
            data.key(k, kb);
            data.value(k, version + i, vb);
            db.put(kb, vb);
        });
    });
    s.metrics()
}

fn ycsb_ops(data: &Data, preset: Preset, ops: u64, seed: u64) -> Result<Vec<Op>> {
    let mut w = Workload::preset(preset);
    w.record_count = data.n;
    w.operation_count = ops;
    w.value_size = SizeDistribution::Fixed(data.vlen as u32);
    w.key_order = KeyOrder::Ordered;
    w.scan_length = SizeDistribution::Fixed(50);
    w.seed = seed;
    Ok(w.run().map_err(|e| e.to_string())?.collect())
}

fn run_ycsb(db: &dyn Kv, data: &Data, ops: &[Op], threads: usize) -> Vec<(&'static str, f64)> {
    let per = ops.len() as u64 / threads as u64;
    let s = time_ops_parallel(threads, per, |t, i| {
        thread_local! {
            static BUF: std::cell::RefCell<(Vec<u8>, Vec<u8>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
        }
        let op = ops[(i as usize) * threads + t];
        BUF.with_borrow_mut(|(kb, vb)| match op {
            Op::Insert { key, .. } | Op::Update { key, .. } => {
                data.key(key, kb);
                data.value(key, i + 1, vb);
                db.put(kb, vb);
            }
            Op::Read { key } => {
                data.key(key, kb);
                std::hint::black_box(db.get(kb));
            }
            Op::Scan { start, len } | Op::MapRange { start, len } => {
                data.key(start, kb);
                std::hint::black_box(db.scan(kb, len as usize));
            }
            Op::ReadModifyWrite { key, .. } => {
                data.key(key, kb);
                std::hint::black_box(db.get(kb));
                data.value(key, i + 2, vb);
                db.put(kb, vb);
            }
            Op::Delete { .. } | Op::DeleteRange { .. } => {}
        });
    });
    s.metrics()
}

/// Loads `data` in key order from one thread (the paper's sequential load).
fn load(db: &dyn Kv, data: &Data) {
    let (mut k, mut v) = (Vec::new(), Vec::new());
    for i in 0..data.n {
        data.key(i, &mut k);
        data.value(i, 0, &mut v);
        db.put(&k, &v);
    }
}

impl Experiment for FlexDbBench {
    fn name(&self) -> &'static str {
        "flexdb"
    }

    fn settings(&self) -> &'static [&'static str] {
        &[
            "dataset_mib",
            "datasets",
            "gc_start_utilization",
            "phases",
            "reads",
            "rewrite_extents",
            "scans",
            "systems",
            "threads",
            "writers",
            "ycsb_ops",
        ]
    }

    fn about(&self) -> &'static str {
        "flexdb vs rocksdb and lsm-local (FlexFile paper §6.3): sequential/Zipfian/Zipfian-composite writes of the \
         ZippyDB/UDB/SYS datasets with bytes written, GET and SCAN(50) after Zipfian updates, recovery time, YCSB \
         A-F; --set dataset_mib=N writers=N threads=N reads=N scans=N ycsb_ops=N rewrite_extents=N \
         gc_start_utilization=N/D \
         systems=flexdb,flexdb-defrag,flexdb-rewrite,rocksdb,lsm-local phases=writes,reads,recovery,ycsb datasets=zippydb,udb,sys"
    }

    fn run(&self, ctx: &Ctx) -> Result<Report> {
        let dataset_mib: u64 = ctx.setting_min("dataset_mib", ctx.scale(32, 2048), 1)?;
        let threads: usize =
            ctx.setting_min("threads", ctx.threads.iter().copied().max().unwrap_or(1).max(1), 1)?;
        // The paper's write experiments: four threads, each inserting a quarter of the dataset.
        let writers: usize = ctx.setting::<usize>("writers", 4)?.max(1);
        let reads: u64 = ctx.setting_min("reads", ctx.scale(200_000, 4_000_000), 1)?;
        let scans: u64 = ctx.setting_min("scans", ctx.scale(50_000, 1_000_000), 1)?;
        let ycsb_n: u64 = ctx.setting_min("ycsb_ops", ctx.scale(200_000, 4_000_000), 1)?;
        let bytes = dataset_mib << 20;
        // The paper's ratios: cache = dataset / 5; a 256 MB memtable for 40 GB, but at least 4 MiB here so that
        // a quick run still commits dozens of memtables.
        let rewrite_extents: usize = ctx.setting("rewrite_extents", 2)?;
        let gc_start = {
            let (n, d) = flexdb::Options::default().flexfile.gc_start_utilization;
            let f: crate::Fraction = ctx.setting("gc_start_utilization", crate::Fraction(n, d))?;
            (f.0, f.1)
        };
        // Subsets, e.g. to profile one phase of one system; the defaults are everything but `flexdb-rewrite`.
        let only_systems = ctx.list(
            "systems",
            &["flexdb", "flexdb-defrag", "rocksdb", "lsm-local"],
            &["flexdb", "flexdb-defrag", "flexdb-rewrite", "rocksdb", "lsm-local"],
            false,
        )?;
        let all_phases = ["writes", "reads", "recovery", "ycsb"];
        let phases = ctx.list("phases", &all_phases, &all_phases, false)?;
        let phase = |p: &str| phases.iter().any(|x| x == p);
        let all_datasets = ["zippydb", "udb", "sys"];
        let only_datasets = ctx.list("datasets", &all_datasets, &all_datasets, false)?;
        let cfg = Config {
            memtable: ((bytes / 160) as usize).max(4 << 20),
            cache: (bytes / 5) as usize,
            rewrite_extents,
            gc_start,
        };
        let datasets = [
            Data::new("zippydb", KvSizes::ZIPPYDB, bytes),
            Data::new("udb", KvSizes::UDB, bytes),
            Data::new("sys", KvSizes::SYS, bytes),
        ];
        let udb = datasets[1].clone();
        let dists = [Dist::Seq, Dist::Zipf, Dist::Comp];
        let mut report = Report::new(self.name(), ctx.quick);
        report.note(describe_flex(cfg));
        report.note(describe_rocks(cfg));
        report.note(describe_lsm(cfg));
        for d in &datasets {
            for dist in dists {
                report.workload(
                    &format!("write-{}-{}", dist.name(), d.name),
                    json!({"keys": d.n, "key_bytes": d.klen, "value_bytes": d.vlen, "puts": d.n,
                           "distribution": dist.distribution().name(), "threads": writers,
                           "memtable_bytes": cfg.memtable, "cache_bytes": cfg.cache}),
                );
            }
        }
        let rparams = json!({"keys": udb.n, "key_bytes": udb.klen, "value_bytes": udb.vlen,
                             "zipfian_updates_before": udb.n / 2, "threads": threads});
        for w in ["get-seq", "get-zipf", "get-comp"] {
            report.workload(w, json!({"reads": reads, "setup": rparams}));
        }
        report.workload("scan50-zipf", json!({"scans": scans, "scan_length": 50, "setup": rparams}));
        report.workload(
            "recovery",
            json!({"setup": rparams, "page_cache": "warm", "flexdb_rebuild_interval": 4096,
                   "flexdb-rebuild-256k_rebuild_interval": 262_144}),
        );
        for p in ["a", "b", "c", "d", "e", "f"] {
            report.workload(
                &format!("ycsb-{p}"),
                json!({"records": udb.n, "operations": ycsb_n, "key_bytes": udb.klen, "value_bytes": udb.vlen,
                       "load": "key order", "scan_length": 50, "threads": threads}),
            );
        }
        let systems: [(&str, Opener); 5] = [
            ("flexdb", open_flex),
            ("flexdb-defrag", open_flex_defrag),
            ("flexdb-rewrite", open_flex_rewrite),
            ("rocksdb", open_rocks),
            ("lsm-local", open_lsm),
        ];
        for (name, open) in systems.into_iter().filter(|(n, _)| only_systems.iter().any(|x| x == n)) {
            let dir = ctx.scratch.join(format!("flexdb-bench-{name}"));
            let _ = std::fs::remove_dir_all(&dir);
            // Writes.
            let write_sets =
                datasets.iter().filter(|d| phase("writes") && only_datasets.iter().any(|x| x == d.name));
            for d in write_sets {
                for dist in dists {
                    let per = d.n / writers as u64;
                    let streams = key_streams(dist, d.n, writers, per, ctx.seed)?;
                    let db = open(&dir, cfg)?;
                    let io0 = io_written();
                    let mut m = put_streams(&*db, d, &streams, 1);
                    let t = Instant::now();
                    db.settle();
                    let settle = t.elapsed().as_secs_f64();
                    let written = db.bytes_written();
                    let io = io_written().saturating_sub(io0);
                    let disk = crate::measure::dir_bytes(&dir);
                    let user = d.user_bytes(per * writers as u64);
                    m.extend([
                        ("bytes_written", written as f64),
                        ("io_write_bytes", io as f64),
                        ("write_amplification", written as f64 / user.max(1) as f64),
                        ("settle_secs", settle),
                        ("disk_bytes", disk as f64),
                        ("space_amplification", disk as f64 / d.user_bytes(d.n).max(1) as f64),
                    ]);
                    m.extend(db.written_by_kind());
                    report.row(&format!("write-{}-{}", dist.name(), d.name), name, m);
                    db.close()?;
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
            // Reads after Zipfian updates; recovery reopens that store.
            if phase("reads") || phase("recovery") {
                let db = open(&dir, cfg)?;
                load(&*db, &udb);
                let per = udb.n / 2 / threads as u64;
                let streams = key_streams(Dist::Zipf, udb.n, threads, per, ctx.seed ^ 7)?;
                put_streams(&*db, &udb, &streams, 1 << 32);
                db.settle();
                // Cache hit ratio of a phase, from the engine's counters before and after it.
                let hit_ratio = |before: (u64, u64)| {
                    let (h, m) = db.cache_counts();
                    let (h, m) = (h - before.0, m - before.1);
                    h as f64 / (h + m).max(1) as f64
                };
                for dist in dists.into_iter().filter(|_| phase("reads")) {
                    let streams = key_streams(dist, udb.n, threads, reads / threads as u64, ctx.seed ^ 11)?;
                    let per = reads / threads as u64;
                    let before = db.cache_counts();
                    let s = time_ops_parallel(threads, per, |t, i| {
                        let mut k = Vec::with_capacity(udb.klen);
                        udb.key(streams[t][i as usize], &mut k);
                        std::hint::black_box(db.get(&k));
                    });
                    let mut m = s.metrics();
                    m.push(("cache_hit_ratio", hit_ratio(before)));
                    report.row(&format!("get-{}", dist.name()), name, m);
                }
                if phase("reads") {
                    let streams =
                        key_streams(Dist::Zipf, udb.n, threads, scans / threads as u64, ctx.seed ^ 13)?;
                    let before = db.cache_counts();
                    let s = time_ops_parallel(threads, scans / threads as u64, |t, i| {
                        let mut k = Vec::with_capacity(udb.klen);
                        udb.key(streams[t][i as usize], &mut k);
                        std::hint::black_box(db.scan(&k, 50));
                    });
                    let mut m = s.metrics();
                    m.push(("cache_hit_ratio", hit_ratio(before)));
                    report.row("scan50-zipf", name, m);
                    let shape = db.layout_note();
                    if !shape.is_empty() {
                        report.note(format!("{name} read-phase layout: {shape}"));
                    }
                }
                db.close()?;
            }
            if phase("recovery") {
                let t = Instant::now();
                let db = open(&dir, cfg)?;
                let secs = t.elapsed().as_secs_f64();
                report.row("recovery", name, [("open_secs", secs)]);
                db.close()?;
                if name == "flexdb" {
                    let t = Instant::now();
                    let db = open_flex_with(&dir, cfg, 256 << 10)?;
                    let secs = t.elapsed().as_secs_f64();
                    report.row("recovery", "flexdb-rebuild-256k", [("open_secs", secs)]);
                    db.close()?;
                }
            }
            let _ = std::fs::remove_dir_all(&dir);
            if !phase("ycsb") {
                continue;
            }
            // YCSB A-F on one store, in order.
            let db = open(&dir, cfg)?;
            load(&*db, &udb);
            db.settle();
            let mut data = udb.clone();
            for (i, p) in
                [Preset::A, Preset::B, Preset::C, Preset::D, Preset::E, Preset::F].into_iter().enumerate()
            {
                let ops = ycsb_ops(&data, p, ycsb_n, ctx.seed + i as u64)?;
                let m = run_ycsb(&*db, &data, &ops, threads);
                data.n += ops.iter().filter(|o| matches!(o, Op::Insert { .. })).count() as u64;
                report.row(&format!("ycsb-{}", p.name().to_ascii_lowercase()), name, m);
            }
            db.close()?;
            let _ = std::fs::remove_dir_all(&dir);
        }
        // Ratios against lsm-local (ours too, so the report's automatic ratios skip it).
        let mut lines = Vec::new();
        for r in report.results.iter().filter(|r| r.system.starts_with("flexdb")) {
            for m in ["ops_per_sec", "bytes_written"] {
                if let (Some(a), Some(b)) = (r.metrics.get(m), report.get(&r.workload, "lsm-local", m))
                    && b != 0.0
                {
                    lines.push(format!("{}: {}/lsm-local {m} = {:.2}", r.workload, r.system, a / b));
                }
            }
        }
        for l in lines {
            report.note(l);
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datasets_have_table_3_sizes() {
        let d = Data::new("udb", KvSizes::UDB, 1 << 20);
        let (mut k, mut v) = (Vec::new(), Vec::new());
        d.key(5, &mut k);
        d.value(5, 0, &mut v);
        assert_eq!((k.len(), v.len()), (27, 127));
        let mut k2 = Vec::new();
        d.key(6, &mut k2);
        assert!(k < k2, "keys are encoded in key-number order");
        assert_eq!(d.n, (1 << 20) / 154);
    }

    #[test]
    fn sequential_streams_partition_the_key_space() {
        let s = key_streams(Dist::Seq, 100, 4, 25, 1).unwrap();
        let mut all: Vec<u64> = s.concat();
        all.sort_unstable();
        assert_eq!(all, (0..100).collect::<Vec<_>>());
    }
}
