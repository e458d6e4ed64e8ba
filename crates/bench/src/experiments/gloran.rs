//! `rangedb bench gloran`: range deletes in the engine (GLORAN paper §6), every system in one run.
//!
//! Systems, all on the real disk with equal engine settings:
//! - `lsm-gloran`: our engine with `range_delete = global` (GLORAN's LSM-DRtree and estimator, paper defaults);
//! - `lsm-local`: our engine with RocksDB-style range tombstones (the paper's "LRR");
//! - `lsm-decomp`: a range delete becomes one batch of point tombstones, one per key of the range (the paper's
//!   Decomp; keys are integers, so every key of the range, present or not);
//! - `lsm-lookup-delete`: a point lookup per key of the range, a point tombstone for each existing one (Lookup&D);
//! - `lsm-scan-delete`: an iterator over the range, a point tombstone for each key found (Scan&D);
//! - `rocksdb`: RocksDB 7.8 with its `DeleteRange` (the paper's baseline, run natively).
//!
//! Workloads (16-byte keys, 100-byte values, a store preloaded with `n` keys; `ops` operations each, one op plan
//! shared by all systems; range deletes of `len` keys at uniform starts; updates and lookups uniform over the key
//! space):
//! - `balanced-rd{0,1,2,5,10}`: 50 % lookups, 50 % writes of which a share of *all* operations (0–10 %) are range
//!   deletes instead of updates (§6 "Overall Comparison", Fig. 9);
//! - `lookup-heavy-rd10` (90 % lookups) and `update-heavy-rd10` (10 % lookups);
//! - `balanced-len{16,64,256,1024}`: range length sweep at 10 % range deletes (Exp 2, Fig. 10);
//! - `ycsb-a-zipf-rd10`: YCSB-A (50/50) with scrambled-Zipfian keys, 10 % of updates as range deletes (Table 4);
//! - `scan-100`: range lookups (seek + 100 nexts) after the workloads (Table 3);
//! - `space`: bytes on disk, engine memory of the range-delete structures, global-index statistics;
//! - `kv-k{K}-v{V}`: key and value size sweep (Fig. 11 (a)(b)): balanced with 10 % range deletes on a fresh store
//!   of `n / 4` keys of `K` bytes with `V`-byte values, `ops / 4` operations (`--set kv=false` skips it).
//!
//! Each mix reports throughput, point-lookup latency (P50/P95/P99), update and range-delete latency. Ratios of
//! `lsm-gloran` against every other system are added as `*_speedup` rows and notes, with the targets.
//! The workloads run one after another on the same store per system (the same sequence for every system).
//!
//! `--set fresh=true` runs each mix on an empty store instead (the paper's setup: "operations on an empty
//! database"), so lookups also meet keys never written; `n` is then the key space the operations draw from, and
//! `scan-100` and `space` measure the store the last mix left.
//!
//! `--set reps=N` (default 1) runs the mixes, `scan-100` and `space` N times per system, the systems taking turns
//! (`turns.rs`): rows hold each metric's median, and notes give the targets' ratios per turn. The key and value
//! size sweep runs once.
//!
//! `--set n=KEYS ops=N len=KEYS kv=BOOL fresh=BOOL reps=N systems=a,b workloads=a,b buffer_mib=N` (`systems`: a
//! subset of the systems, e.g. for profiling one; `workloads`: a subset of the mixes, each drawing the operations
//! it draws in a full run; `buffer_mib`: the memtable size, 64 MiB in a full run and 1 MiB quick, with level 1 at
//! four memtables and files of one, the paper's Fig. 12 (a) sweep).

use std::path::Path;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::measure::Latencies;
use crate::turns::{Run, median_metrics};
use crate::{Ctx, Experiment, Report, Result};
use notes::{add_speedups, turn_notes};

mod notes;

/// The `gloran` experiment.
pub struct Gloran;

const VALUE_LEN: usize = 100;
const MAX_KEY: usize = 256;

/// Key and value sizes of a store. Keys are `user` + 12 decimal digits (ordered like the integers), padded with
/// `k` bytes to `key_len`; values are pseudo-random letters.
#[derive(Debug, Clone, Copy)]
struct Shape {
    key_len: usize,
    value_len: usize,
}

/// A key on the stack (no allocation on the measured path).
struct Buf<const N: usize> {
    b: [u8; N],
    len: usize,
}

impl<const N: usize> std::ops::Deref for Buf<N> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.b[..self.len]
    }
}

impl Shape {
    const DEFAULT: Shape = Shape { key_len: 16, value_len: VALUE_LEN };

    fn key(&self, i: u64) -> Buf<MAX_KEY> {
        let mut b = [b'k'; MAX_KEY];
        b[..16].copy_from_slice(&super::records::user_key(i));
        Buf { b, len: self.key_len }
    }

    fn value(&self, i: u64) -> &'static [u8] {
        super::records::letters(i, self.value_len)
    }
}

/// How a system executes a range delete of keys `[a, b)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RangeMode {
    /// The engine's own range delete (global index, local tombstones, RocksDB DeleteRange).
    Native,
    Decomp,
    LookupDelete,
    ScanDelete,
}

enum Engine {
    Ours(lsm::Db),
    Rocks(rocksdb::DB),
}

struct System {
    engine: Engine,
    mode: RangeMode,
    shape: Shape,
}

impl System {
    fn put(&self, k: &[u8], v: &[u8]) {
        match &self.engine {
            Engine::Ours(d) => {
                let _ = d.put(&lsm::WriteOptions::default(), k, v);
            }
            Engine::Rocks(d) => {
                let _ = d.put(k, v);
            }
        }
    }

    fn get(&self, k: &[u8]) -> bool {
        match &self.engine {
            Engine::Ours(d) => matches!(d.get(k), Ok(Some(_))),
            Engine::Rocks(d) => matches!(d.get_pinned(k), Ok(Some(_))),
        }
    }

    fn delete_range(&self, a: u64, b: u64) {
        let key = |i| self.shape.key(i);
        let Engine::Ours(d) = &self.engine else {
            if let Engine::Rocks(d) = &self.engine {
                let mut wb = rocksdb::WriteBatch::default();
                wb.delete_range(&*key(a), &*key(b));
                let _ = d.write(wb);
            }
            return;
        };
        let w = lsm::WriteOptions::default();
        match self.mode {
            RangeMode::Native => {
                let _ = d.delete_range(&w, &key(a), &key(b));
            }
            RangeMode::Decomp => {
                let mut wb = lsm::WriteBatch::new();
                for i in a..b {
                    wb.delete(&key(i));
                }
                let _ = d.write(&w, wb);
            }
            RangeMode::LookupDelete => {
                let mut wb = lsm::WriteBatch::new();
                for i in a..b {
                    if matches!(d.get(&key(i)), Ok(Some(_))) {
                        wb.delete(&key(i));
                    }
                }
                let _ = d.write(&w, wb);
            }
            RangeMode::ScanDelete => {
                let ro = lsm::ReadOptions {
                    lower_bound: Some(key(a).to_vec()),
                    upper_bound: Some(key(b).to_vec()),
                    ..Default::default()
                };
                let mut wb = lsm::WriteBatch::new();
                if let Ok(mut it) = d.iter(&ro) {
                    it.seek_to_first();
                    while it.valid() {
                        wb.delete(it.key());
                        it.next();
                    }
                }
                let _ = d.write(&w, wb);
            }
        }
    }

    fn seek_next(&self, k: &[u8], n: usize) -> usize {
        let mut c = 0;
        match &self.engine {
            Engine::Ours(d) => {
                let Ok(mut it) = d.iter(&lsm::ReadOptions::default()) else { return 0 };
                it.seek(k);
                while it.valid() && c < n {
                    std::hint::black_box(it.value());
                    c += 1;
                    it.next();
                }
            }
            Engine::Rocks(d) => {
                let mut it = d.raw_iterator();
                it.seek(k);
                while it.valid() && c < n {
                    std::hint::black_box(it.value());
                    c += 1;
                    it.next();
                }
            }
        }
        c
    }

    fn settle(&self) {
        match &self.engine {
            Engine::Ours(d) => {
                let _ = d.flush();
                let _ = d.wait_for_compactions();
            }
            Engine::Rocks(d) => super::rocks::settle(d),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Config {
    write_buffer_size: usize,
    level_base: u64,
    target_file_size: u64,
    block_cache: usize,
}

fn open(name: &str, dir: &Path, c: Config, shape: Shape) -> Result<(System, String)> {
    if name == "rocksdb" {
        let mut o = rocksdb::Options::default();
        o.create_if_missing(true);
        o.set_write_buffer_size(c.write_buffer_size);
        o.set_max_write_buffer_number(2);
        o.set_level_zero_file_num_compaction_trigger(4);
        o.set_max_bytes_for_level_base(c.level_base);
        o.set_max_bytes_for_level_multiplier(10.0);
        o.set_target_file_size_base(c.target_file_size);
        o.set_compression_type(rocksdb::DBCompressionType::None);
        o.set_level_compaction_dynamic_level_bytes(false);
        let mut t = rocksdb::BlockBasedOptions::default();
        t.set_block_size(4096);
        t.set_bloom_filter(10.0, false);
        t.set_block_cache(&rocksdb::Cache::new_lru_cache(c.block_cache));
        o.set_block_based_table_factory(&t);
        let db = rocksdb::DB::open(&o, dir)?;
        let desc = format!(
            "rocksdb 7.8 DeleteRange: write_buffer_size={} max_bytes_for_level_base={} target_file_size_base={} \
             bloom=10 block_cache={} compression=none",
            c.write_buffer_size, c.level_base, c.target_file_size, c.block_cache
        );
        return Ok((System { engine: Engine::Rocks(db), mode: RangeMode::Native, shape }, desc));
    }
    let (strategy, mode) = match name {
        "lsm-gloran" => ("global", RangeMode::Native),
        "lsm-local" => ("local", RangeMode::Native),
        "lsm-decomp" => ("local", RangeMode::Decomp),
        "lsm-lookup-delete" => ("local", RangeMode::LookupDelete),
        _ => ("local", RangeMode::ScanDelete),
    };
    let o = lsm::Options {
        create_if_missing: true,
        write_buffer_size: c.write_buffer_size,
        max_bytes_for_level_base: c.level_base,
        target_file_size_base: c.target_file_size,
        block_cache_size: c.block_cache,
        range_delete_strategy: lsm::strategy_by_name(strategy).map_err(|e| e.to_string())?,
        // The plain engine, as its RocksDB peer: no query-driven compactions or level renaming.
        range_reduce: lsm::RangeReduceOptions { mode: lsm::RangeReduceMode::Off, ..Default::default() },
        ..lsm::Options::default()
    };
    let desc = format!("{o:?}");
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    let db = lsm::Db::open(fs, dir, o).map_err(|e| e.to_string())?;
    Ok((System { engine: Engine::Ours(db), mode, shape }, desc))
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Get(u64),
    Put(u64),
    RangeDelete(u64),
}

/// A mix: `lookup` share of lookups; `rd` share of all ops are range deletes (taken from the updates).
fn plan(seed: u64, ops: u64, n: u64, lookup: f64, rd: f64, zipf: bool) -> Result<Vec<Op>> {
    let mut r = SmallRng::seed_from_u64(seed);
    let mut z = match zipf {
        true => Some(
            workloads::KeySampler::new(workloads::Distribution::ScrambledZipfian { theta: 0.99 }, n, seed)
                .map_err(|e| e.to_string())?,
        ),
        false => None,
    };
    Ok((0..ops)
        .map(|_| {
            let k = match &mut z {
                Some(z) => z.next_key(),
                None => r.random_range(0..n),
            };
            let x: f64 = r.random();
            if x < lookup {
                Op::Get(k)
            } else if x < lookup + rd {
                Op::RangeDelete(k)
            } else {
                Op::Put(k)
            }
        })
        .collect())
}

struct MixResult {
    ops_per_sec: f64,
    get: Latencies,
    put: Latencies,
    rd: Latencies,
}

fn run_mix(sys: &System, ops: &[Op], len: u64, salt: u64) -> MixResult {
    let (mut get, mut put, mut rd) = (Latencies::new(), Latencies::new(), Latencies::new());
    let start = std::time::Instant::now();
    for (i, op) in ops.iter().enumerate() {
        let t = std::time::Instant::now();
        match *op {
            Op::Get(k) => {
                std::hint::black_box(sys.get(&sys.shape.key(k)));
                get.record_duration(t.elapsed());
            }
            Op::Put(k) => {
                sys.put(&sys.shape.key(k), sys.shape.value(salt + i as u64));
                put.record_duration(t.elapsed());
            }
            Op::RangeDelete(k) => {
                sys.delete_range(k, k + len);
                rd.record_duration(t.elapsed());
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    MixResult { ops_per_sec: ops.len() as f64 / secs.max(1e-9), get, put, rd }
}

fn mix_metrics(m: &MixResult) -> Vec<(&'static str, f64)> {
    let mut v = vec![("ops_per_sec", m.ops_per_sec)];
    if m.get.count() > 0 {
        v.extend([
            ("get_mean_ns", m.get.mean()),
            ("get_p50_ns", m.get.p(0.50) as f64),
            ("get_p95_ns", m.get.p(0.95) as f64),
            ("get_p99_ns", m.get.p(0.99) as f64),
        ]);
    }
    if m.put.count() > 0 {
        v.extend([
            ("update_mean_ns", m.put.mean()),
            ("update_p50_ns", m.put.p(0.50) as f64),
            ("update_p99_ns", m.put.p(0.99) as f64),
        ]);
    }
    if m.rd.count() > 0 {
        v.extend([("range_delete_mean_ns", m.rd.mean()), ("range_delete_p99_ns", m.rd.p(0.99) as f64)]);
    }
    v
}

const SYSTEMS: [&str; 6] =
    ["lsm-gloran", "lsm-local", "rocksdb", "lsm-decomp", "lsm-lookup-delete", "lsm-scan-delete"];

impl Experiment for Gloran {
    fn name(&self) -> &'static str {
        "gloran"
    }

    fn settings(&self) -> &'static [&'static str] {
        &["buffer_mib", "fresh", "kv", "len", "n", "ops", "reps", "systems", "workloads"]
    }

    fn about(&self) -> &'static str {
        "range deletes in the engine (GLORAN §6): lsm-gloran vs lsm-local, rocksdb DeleteRange, decomp, \
         lookup&delete, scan&delete; range-delete share and length sweeps, YCSB-A zipf, scans, space; \
         --set n=KEYS ops=N len=KEYS fresh=BOOL reps=N workloads=a,b buffer_mib=N (fresh: each mix on an empty \
         store, as the paper; reps: turns per system, medians reported; workloads: only these mixes; buffer_mib: \
         memtable size, 64 full / 1 quick)"
    }

    fn run(&self, ctx: &Ctx) -> Result<Report> {
        let n: u64 = ctx.setting_min("n", ctx.scale(100_000, 2_000_000), 1)?;
        let ops: u64 = ctx.setting_min("ops", ctx.scale(20_000, 400_000), 1)?;
        let len: u64 = ctx.setting_min("len", 100, 1)?;
        let fresh: bool = ctx.setting("fresh", false)?;
        // The paper's memtable is RocksDB's default 64 MiB, varied from 8 to 256 MiB in its Fig. 12 (a); level 1
        // holds four memtables and files are a memtable each, as in RocksDB's defaults.
        let buffer_mib: usize = ctx.setting_min("buffer_mib", ctx.scale(1, 64), 1)?;
        if buffer_mib > 4096 {
            return Err(format!("--set buffer_mib={buffer_mib}: at most 4096").into());
        }
        let cfg = Config {
            write_buffer_size: buffer_mib << 20,
            level_base: (4 * buffer_mib as u64) << 20,
            target_file_size: (buffer_mib as u64) << 20,
            block_cache: 8 << 20,
        };
        let mut report = Report::new(self.name(), ctx.quick);
        let base = json!({"keys": n, "ops": ops, "key_bytes": 16, "value_bytes": VALUE_LEN,
                          "start": if fresh { "empty store per workload" } else { "preloaded, workloads in sequence" },
                          "write_buffer_size": cfg.write_buffer_size, "max_bytes_for_level_base": cfg.level_base,
                          "block_cache": cfg.block_cache, "bloom_bits_per_key": 10});
        // (workload, lookup share, range-delete share, range length, zipfian, ops)
        let mut mixes: Vec<(String, f64, f64, u64, bool, u64)> = Vec::new();
        for rd in [0u32, 1, 2, 5, 10] {
            mixes.push((format!("balanced-rd{rd}"), 0.5, f64::from(rd) / 100.0, len, false, ops));
        }
        mixes.push(("lookup-heavy-rd10".into(), 0.9, 0.10, len, false, ops));
        mixes.push(("update-heavy-rd10".into(), 0.1, 0.10, len, false, ops));
        for l in [16u64, 64, 256, 1024] {
            mixes.push((format!("balanced-len{l}"), 0.5, 0.10, l, false, ops / 4));
        }
        mixes.push(("ycsb-a-zipf-rd10".into(), 0.5, 0.05, len, true, ops));
        // `--set workloads=a,b` runs only those mixes, each with the operations it has in a full run.
        let seeds: Vec<u64> = (0..mixes.len() as u64).map(|i| ctx.seed ^ (i + 1)).collect();
        let names: Vec<String> = mixes.iter().map(|m| m.0.clone()).collect();
        let known: Vec<&str> = names.iter().map(String::as_str).collect();
        let only = ctx.list("workloads", &known, &known, false)?;
        let (mut mixes, seeds): (Vec<_>, Vec<_>) =
            mixes.into_iter().zip(seeds).filter(|(m, _)| only.contains(&m.0)).unzip();
        for (w, lookup, rd, l, zipf, o) in &mixes {
            let mut p = base.clone();
            p["lookup_share"] = json!(lookup);
            p["range_delete_share"] = json!(rd);
            p["range_len_keys"] = json!(l);
            p["distribution"] = json!(if *zipf { "scrambled-zipfian-0.99" } else { "uniform" });
            p["ops"] = json!(o);
            report.workload(w, p);
        }
        report.workload("scan-100", json!({"seeks": ops / 10, "nexts": 100}));
        report.workload("space", base.clone());
        let plans: Vec<Vec<Op>> = mixes
            .iter()
            .zip(&seeds)
            .map(|((_, lookup, rd, _, zipf, o), &seed)| plan(seed, *o, n, *lookup, *rd, *zipf))
            .collect::<Result<_>>()?;
        let mut rng = SmallRng::seed_from_u64(ctx.seed);
        let mut perm: Vec<u64> = (0..n).collect();
        perm.shuffle(&mut rng);
        let seeks: Vec<u64> = (0..ops / 10).map(|_| rng.random_range(0..n)).collect();
        let only = ctx.list("systems", &SYSTEMS, &SYSTEMS, false)?;
        let systems: Vec<&str> = SYSTEMS.into_iter().filter(|s| only.iter().any(|x| x == s)).collect();
        let reps: usize = ctx.setting_min("reps", 1usize, 1)?;
        // Per system, per turn, the rows of every workload: (workload, metrics).
        let mut runs: Vec<Vec<Vec<(String, Run)>>> = vec![Vec::new(); systems.len()];
        let setup = Setup { ctx, cfg, mixes: &mixes, plans: &plans, perm: &perm, seeks: &seeks, fresh };
        for turn in 0..reps {
            for (s, &name) in systems.iter().enumerate() {
                runs[s].push(run_system(name, &setup, turn + 1 == reps, &mut report)?);
            }
        }
        for (s, &name) in systems.iter().enumerate() {
            for (w, _) in runs[s].first().map_or(&[][..], |r| &r[..]) {
                let per_turn: Vec<Run> = runs[s]
                    .iter()
                    .filter_map(|t| t.iter().find(|(x, _)| x == w).map(|(_, r)| r.clone()))
                    .collect();
                report.row(w, name, median_metrics(&per_turn).iter().map(|(k, v)| (k.as_str(), *v)));
            }
        }
        if reps > 1 {
            turn_notes(&mut report, &systems, &runs);
        }
        // Key and value size sweep (§6 Fig. 11 (a)(b)): balanced with 10 % range deletes, a fresh store of `n / 4`
        // keys per size and system, `ops / 4` operations.
        let kv: bool = ctx.setting("kv", true)?;
        let (kv_n, kv_ops) = ((n / 4).max(1_000), (ops / 4).max(1_000));
        let only = &systems;
        let shapes: &[(usize, usize)] =
            if kv { &[(64, 100), (256, 100), (16, 768), (256, 768)] } else { &[] };
        for (j, &(key_len, value_len)) in shapes.iter().enumerate() {
            let shape = Shape { key_len, value_len };
            let w = format!("kv-k{key_len}-v{value_len}");
            let mut p = base.clone();
            p["keys"] = json!(kv_n);
            p["ops"] = json!(kv_ops);
            p["key_bytes"] = json!(key_len);
            p["value_bytes"] = json!(value_len);
            p["lookup_share"] = json!(0.5);
            p["range_delete_share"] = json!(0.10);
            p["range_len_keys"] = json!(len);
            report.workload(&w, p);
            let ops_plan = plan(ctx.seed ^ (0x6b76 + j as u64), kv_ops, kv_n, 0.5, 0.10, false)?;
            let mut perm: Vec<u64> = (0..kv_n).collect();
            perm.shuffle(&mut SmallRng::seed_from_u64(ctx.seed ^ (0x6b76 + j as u64)));
            for &name in only {
                let dir = ctx.scratch.join(format!("gloran-{name}-{w}"));
                let _ = std::fs::remove_dir_all(&dir);
                let (sys, _) = open(name, &dir, cfg, shape)?;
                if !fresh {
                    for (i, &k) in perm.iter().enumerate() {
                        sys.put(&shape.key(k), shape.value(i as u64));
                    }
                    sys.settle();
                }
                let m = run_mix(&sys, &ops_plan, len, 1 << 40);
                report.row(&w, name, mix_metrics(&m));
                drop(sys);
                let _ = std::fs::remove_dir_all(&dir);
            }
            mixes.push((w, 0.5, 0.10, len, false, kv_ops));
        }
        add_speedups(&mut report, &mixes, fresh);
        Ok(report)
    }
}

/// What every turn of every system runs on.
struct Setup<'a> {
    ctx: &'a Ctx,
    cfg: Config,
    /// (workload, lookup share, range-delete share, range length, zipfian, ops)
    mixes: &'a [(String, f64, f64, u64, bool, u64)],
    plans: &'a [Vec<Op>],
    /// The preload order of the keys.
    perm: &'a [u64],
    seeks: &'a [u64],
    fresh: bool,
}

/// One turn of system `name`: preload (unless `fresh`), every mix, `scan-100` and `space`, on a fresh store.
/// Returns each workload's metrics; notes its description and, on the `last` turn, its index statistics.
fn run_system(name: &str, setup: &Setup<'_>, last: bool, report: &mut Report) -> Result<Vec<(String, Run)>> {
    let Setup { ctx, cfg, mixes, plans, perm, seeks, fresh } = *setup;
    let named =
        |m: Vec<(&'static str, f64)>| -> Run { m.into_iter().map(|(k, v)| (k.to_string(), v)).collect() };
    let mut out = Vec::new();
    let dir = ctx.scratch.join(format!("gloran-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    let (mut sys, desc) = open(name, &dir, cfg, Shape::DEFAULT)?;
    if last {
        report.note(format!("{name}: {desc}"));
    }
    if !fresh {
        for (i, &k) in perm.iter().enumerate() {
            sys.put(&sys.shape.key(k), sys.shape.value(i as u64));
        }
        sys.settle();
    }
    for (i, (w, _, _, l, _, _)) in mixes.iter().enumerate() {
        if fresh && i > 0 {
            drop(sys);
            let _ = std::fs::remove_dir_all(&dir);
            sys = open(name, &dir, cfg, Shape::DEFAULT)?.0;
        }
        let m = run_mix(&sys, &plans[i], *l, (i as u64 + 1) << 32);
        out.push((w.clone(), named(mix_metrics(&m))));
    }
    let t = std::time::Instant::now();
    let mut read = 0;
    for &k in seeks {
        read += sys.seek_next(&sys.shape.key(k), 100);
    }
    let secs = t.elapsed().as_secs_f64();
    out.push((
        "scan-100".into(),
        named(vec![("ops_per_sec", seeks.len() as f64 / secs.max(1e-9)), ("entries_read", read as f64)]),
    ));
    sys.settle();
    let mut space = vec![("disk_bytes", crate::measure::dir_bytes(&dir) as f64)];
    if let Engine::Ours(d) = &sys.engine {
        let st = d.stats();
        space.push(("table_range_tombstones", st.table_range_tombstones as f64));
        if let Some(g) = st.range_delete_global {
            space.push(("index_file_bytes", g.index_file_bytes as f64));
            space.push(("index_memory_bytes", (g.buffer_bytes + g.estimator_bytes) as f64));
            space.push((
                "estimator_fp_rate",
                g.estimator_false_positives as f64 / g.estimator_checks.max(1) as f64,
            ));
            space.push(("nodes_read_per_probe", g.nodes_read as f64 / g.index_probes.max(1) as f64));
            space.push(("index_probes_per_lookup", g.index_probes as f64 / g.lookups.max(1) as f64));
            space.push(("gc_runs", g.gc_runs as f64));
            if last {
                report.note(format!("{name}: global index statistics {g:?}"));
            }
        }
    }
    out.push(("space".into(), named(space)));
    drop(sys);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}
