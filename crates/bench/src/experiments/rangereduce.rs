//! `rangedb bench rangereduce`: RangeReduce's evaluation (§V) scaled to this machine. Systems: `lsm-rangereduce`
//! (Bounded-Merge, rho = 1/T, Level-Renaming), `lsm-local` (the same engine with RangeReduce off), the ablations
//! `lsm-bounded-merge` (Bounded-Merge without Level-Renaming, the paper's "BM"), `lsm-mos-blind` (Blind
//! Merge-on-Scan) and `lsm-mos-filesize` (File-Size-Aware Merge-on-Scan), and `rocksdb`
//! (Debian's 7.8) with the same buffer, size ratio, file size, block size, Bloom bits, cache and no compression.
//!
//! Entries are 128 bytes (16-byte keys, 112-byte values), the buffer is 4 MiB and T = 6, as in the paper; the
//! data size is scaled down (quick: 200K keys = 25.6 MB). Workloads:
//! - `uniform`: the paper's default setup (§V): ingest unique keys in random order, then as many updates
//!   interleaved with range queries of selectivity 0.1 at uniformly random positions, 9K queries per GiB of
//!   updates (the paper's 9K queries over 1 GB; 1,073 at full size);
//! - `overlapping`: as `uniform`, every 100 consecutive queries identical;
//! - `long-short`: after ingest and updates, one long query (s = 0.25) then many short ones (s = 0.0001) inside it;
//! - `ycsb-e`: preload (unique keys plus as many updates), then 95 % short scans (s = 0.00005) and 5 % updates;
//! - `selectivity-S` (S = 0.01, 0.001, 0.0001, 0.00005; Fig. 13's sweep, with `uniform` as S = 0.1): `uniform`
//!   at selectivity S, for `lsm-rangereduce` and `lsm-local`;
//! - `size-ratio-T` (T = 2, 4, 6, 8, 10; Fig. 9): `uniform` with half the keys and half the queries, for
//!   `lsm-rangereduce` and `lsm-local`.
//!
//! Metrics per run, measured after the workload once automatic compactions and queued rewrites are done: mean and
//! P99 range-query latency, bytes read per query (our engines: key + value bytes of every internal entry the
//! query's sources delivered), compaction debt (the paper's §III-B formula from the level sizes, for every system,
//! with the sizes as `levelN_bytes`; RocksDB's estimate-pending-compaction-bytes as `pending_compaction_bytes`),
//! space amplification (stored entries over live keys), total data movement (flush writes, compaction reads and
//! writes, query-driven compaction reads and writes, query reads), throughput of the interleaved phase in five
//! windows, and for our engines what became of the queries' rewrites (planned, held back by a running
//! compaction, dropped, aborted, installed).
//!
//! Settings: `--set n=KEYS updates=N queries=N shorts=N ycsb_ops=N file_kib=N` (target file size, default 1024);
//! `--set reps=N` (default 1) runs `uniform` and `overlapping` N times per system, the systems taking turns, and
//! reports each metric's median (a note gives the per-turn ratios of `lsm-rangereduce` to `lsm-local` and their
//! median); `--set systems=a,b` and `--set workloads=prefix,...` (`uniform`, `overlapping`, `long-short`,
//! `ycsb-e`, `selectivity`, `size-ratio`) run a subset.
//!
//! `--set background=low` runs every system's background threads at low CPU priority (our `CpuPriority::Low`,
//! RocksDB's `LowerThreadPoolCPUPriority`; default normal). The paper's server had 24 cores, so flushes,
//! compactions and query-driven rewrites never took the querying thread's core; on two cores they do. In three
//! alternating runs each, the mean-query ratio of `lsm-rangereduce` to `lsm-local` on `uniform` did not improve
//! beyond the machine's noise (docs/rangereduce.md §9, session 19). RocksDB's pools stay lowered for the rest of
//! the process (it has no call to raise them), so `bench all` runs this experiment after every other one that
//! uses RocksDB.

use std::time::Instant;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::measure::Latencies;
use crate::turns::{Run, median_metrics, metric, per_turn, show};

mod systems;

use crate::{Ctx, Experiment, Report, Result};
use systems::{End, Sys, open};

/// The `rangereduce` experiment.
pub struct RangeReduceBench;

const VALUE_LEN: usize = 112;
const BUFFER: usize = 4 << 20;
/// Default target file size (`--set file_kib`). The paper's files are buffer-sized (4 MiB) in a 1 GB store; with
/// the store scaled down to tens of MB, 1 MiB files keep the half-file threshold in the paper's proportion to the
/// queries' sizes. A larger store (`--set n`) keeps that proportion with larger files.
const FILE: u64 = 1 << 20;

fn key(i: u64) -> [u8; 16] {
    super::records::user_key(i)
}

fn value(i: u64) -> &'static [u8] {
    super::records::letters(i, VALUE_LEN)
}

/// One interleaved run's parameters.
#[derive(Debug, Clone)]
struct Plan {
    n: u64,
    updates: u64,
    /// Query ranges `(start key index, length)` in order, issued evenly among the updates.
    queries: Vec<(u64, u64)>,
}

/// Ingests, interleaves updates with queries, settles; returns the run's metrics.
fn run_interleaved(db: &dyn Sys, p: &Plan, t: u64, seed: u64) -> Vec<(String, f64)> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut perm: Vec<u64> = (0..p.n).collect();
    perm.shuffle(&mut rng);
    for (i, &kk) in perm.iter().enumerate() {
        db.put(&key(kk), value(i as u64));
    }
    db.settle();
    let q = p.queries.len() as u64;
    let every = (p.updates / q.max(1)).max(1);
    let mut lat = Latencies::new();
    let windows = 5u64;
    let total_ops = p.updates + q;
    let mut window_start = Instant::now();
    let mut window_ops = 0u64;
    let mut tput = Vec::new();
    let mut qi = 0usize;
    let start = Instant::now();
    for u in 0..p.updates.max(q) {
        if u < p.updates {
            let kk = rng.random_range(0..p.n);
            db.put(&key(kk), value(p.n + u));
            window_ops += 1;
        }
        if (u + 1) % every == 0 && qi < p.queries.len() {
            let (s, len) = p.queries[qi];
            qi += 1;
            let t0 = Instant::now();
            std::hint::black_box(db.range(&key(s), &key(s + len)));
            lat.record_duration(t0.elapsed());
            window_ops += 1;
        }
        if window_ops >= total_ops / windows && tput.len() < windows as usize - 1 {
            tput.push(window_ops as f64 / window_start.elapsed().as_secs_f64().max(1e-9));
            window_start = Instant::now();
            window_ops = 0;
        }
    }
    while qi < p.queries.len() {
        let (s, len) = p.queries[qi];
        qi += 1;
        let t0 = Instant::now();
        std::hint::black_box(db.range(&key(s), &key(s + len)));
        lat.record_duration(t0.elapsed());
        window_ops += 1;
    }
    tput.push(window_ops as f64 / window_start.elapsed().as_secs_f64().max(1e-9));
    let secs = start.elapsed().as_secs_f64();
    db.settle();
    let e = db.end(t);
    let mut m: Vec<(String, f64)> = vec![
        ("rq_mean_ns".into(), lat.mean()),
        ("rq_p99_ns".into(), lat.p(0.99) as f64),
        ("ops_per_sec".into(), total_ops as f64 / secs.max(1e-9)),
    ];
    for (i, x) in tput.iter().enumerate() {
        m.push((format!("window{}_ops_per_sec", i + 1), *x));
    }
    push_end(&mut m, &e);
    m
}

fn push_end(m: &mut Vec<(String, f64)>, e: &End) {
    m.push(("compaction_debt_bytes".into(), e.debt_paper));
    m.push(("pending_compaction_bytes".into(), e.debt_pending));
    m.push(("space_amp_ratio".into(), e.space_amp));
    m.push(("data_movement_bytes".into(), e.data_movement));
    for (l, b) in e.levels.iter().enumerate() {
        m.push((format!("level{l}_bytes"), *b));
    }
    if e.rq_bytes_read > 0.0 {
        m.push(("rq_read_bytes".into(), e.rq_bytes_read));
        m.push(("rq_compactions_count".into(), e.rq_compactions));
        m.push(("rq_planned_count".into(), e.rq_planned));
        m.push(("rq_dropped_count".into(), e.rq_dropped));
        m.push(("rq_aborted_count".into(), e.rq_aborted));
        m.push(("rq_conflicts_count".into(), e.rq_conflicts));
        m.push(("rq_compaction_write_bytes".into(), e.rq_compaction_write));
        m.push(("level_renames_count".into(), e.level_renames));
    }
}

const SYSTEMS: [&str; 6] =
    ["lsm-rangereduce", "lsm-local", "lsm-bounded-merge", "lsm-mos-blind", "lsm-mos-filesize", "rocksdb"];
/// Workload families (`selectivity` stands for `selectivity-S`, `size-ratio` for `size-ratio-T`).
const WORKLOADS: [&str; 6] = ["uniform", "overlapping", "long-short", "ycsb-e", "selectivity", "size-ratio"];
/// The paper's default selectivity (§V).
const SELECTIVITY: f64 = 0.1;
/// The selectivity sweep besides `uniform`'s 0.1 (Fig. 13 goes down to YCSB-E's 0.00005).
const SWEEP_SELECTIVITIES: [f64; 4] = [0.01, 0.001, 0.0001, 0.00005];

/// The paper's default number of queries for `updates` updates of 128 bytes: 9K queries per GiB.
fn paper_queries(updates: u64) -> u64 {
    ((updates as f64 * 128.0 / (1u64 << 30) as f64 * 9000.0).round() as u64).max(1)
}

impl Experiment for RangeReduceBench {
    fn name(&self) -> &'static str {
        "rangereduce"
    }

    fn settings(&self) -> &'static [&'static str] {
        &[
            "background",
            "file_kib",
            "n",
            "queries",
            "reps",
            "shorts",
            "systems",
            "updates",
            "workloads",
            "ycsb_ops",
        ]
    }

    fn about(&self) -> &'static str {
        "RangeReduce (Bounded-Merge, Level-Renaming) vs lsm-local, Merge-on-Scan ablations and rocksdb: range-query \
         latency, bytes read per query, compaction debt, space amplification, data movement; --set n=KEYS \
         updates=N queries=N shorts=N ycsb_ops=N file_kib=N reps=N systems=a,b workloads=prefix,... \
         background=low|normal"
    }

    fn run(&self, ctx: &Ctx) -> Result<Report> {
        let n: u64 = ctx.setting_min("n", ctx.scale(200_000, 1_000_000), 1)?;
        let updates: u64 = ctx.setting_min("updates", n, 1)?;
        let queries: u64 = ctx.setting("queries", paper_queries(updates))?;
        let shorts: u64 = ctx.setting_min("shorts", ctx.scale(1000, 5000), 1)?;
        let ycsb_ops: u64 = ctx.setting_min("ycsb_ops", ctx.scale(10_000, 100_000), 1)?;
        let reps: usize = ctx.setting_min("reps", 1usize, 1)?;
        let file_kib: u64 = ctx.setting_min("file_kib", FILE >> 10, 1)?;
        if !(64..=1 << 20).contains(&file_kib) {
            return Err(format!("--set file_kib={file_kib}: expected 64 to 1048576").into());
        }
        let file = file_kib << 10;
        let low = match ctx.setting("background", "normal".to_string())?.as_str() {
            "low" => true,
            "normal" => false,
            x => return Err(format!("--set background={x}: expected low or normal").into()),
        };
        if reps == 0 {
            return Err("--set reps must be at least 1".into());
        }
        // The long query spans a quarter of the keys and the short ones a ten-thousandth: both need room.
        if n < 10_000 {
            return Err(format!("--set n={n}: expected at least 10000 keys").into());
        }
        let systems_set: String = ctx.setting("systems", SYSTEMS.join(","))?;
        let systems: Vec<&str> =
            SYSTEMS.iter().copied().filter(|s| systems_set.split(',').any(|x| x.trim() == *s)).collect();
        let workloads_set: String = ctx.setting("workloads", WORKLOADS.join(","))?;
        let want =
            |w: &str| workloads_set.split(',').any(|x| !x.trim().is_empty() && w.starts_with(x.trim()));
        for x in systems_set.split(',').map(str::trim) {
            if !SYSTEMS.contains(&x) {
                return Err(
                    format!("unknown system {x:?} in --set systems (known: {})", SYSTEMS.join(", ")).into()
                );
            }
        }
        for x in workloads_set.split(',').map(str::trim) {
            if !WORKLOADS.iter().any(|w| w.starts_with(x) || x.starts_with(w)) {
                return Err(format!(
                    "no workload matches {x:?} in --set workloads (known: {})",
                    WORKLOADS.join(", ")
                )
                .into());
            }
        }
        let mut report = Report::new(self.name(), ctx.quick);
        let t = 6u64;
        let mut rng = SmallRng::seed_from_u64(ctx.seed ^ 0x5e1);
        let len = |s: f64| ((n as f64 * s) as u64).max(1);
        let pick = |s: f64, rng: &mut SmallRng| (rng.random_range(0..n - len(s)), len(s));
        let uniform: Vec<(u64, u64)> = (0..queries).map(|_| pick(SELECTIVITY, &mut rng)).collect();
        let mut overlapping = Vec::new();
        let mut cur = (0, 0);
        for i in 0..queries {
            if i % 100 == 0 {
                cur = pick(SELECTIVITY, &mut rng);
            }
            overlapping.push(cur);
        }
        let base = json!({"keys": n, "key_bytes": 16, "value_bytes": VALUE_LEN, "buffer": BUFFER, "T": t,
                          "updates": updates, "queries": queries, "file_size": file});
        report.workload("uniform", json!({"base": base, "selectivity": SELECTIVITY}));
        report
            .workload("overlapping", json!({"base": base, "selectivity": SELECTIVITY, "identical_run": 100}));
        report.workload("long-short", json!({"base": base, "long": 0.25, "short": 0.0001, "shorts": shorts}));
        report.workload(
            "ycsb-e",
            json!({"base": base, "ops": ycsb_ops, "scan_fraction": 0.95, "selectivity": 0.00005}),
        );
        for (w, qs) in [("uniform", uniform), ("overlapping", overlapping)] {
            if !want(w) {
                continue;
            }
            let p = Plan { n, updates, queries: qs };
            // With `reps` > 1 the systems take turns, so a slow spell of the machine falls on all of them.
            let mut runs: Vec<Vec<Run>> = vec![Vec::new(); systems.len()];
            for _ in 0..reps {
                for (i, &name) in systems.iter().enumerate() {
                    let dir = ctx.scratch.join(format!("rr-{w}-{name}"));
                    let _ = std::fs::remove_dir_all(&dir);
                    let db = open(name, &dir, t, file, low)?;
                    runs[i].push(run_interleaved(&*db, &p, t, ctx.seed));
                    drop(db);
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
            for (i, &name) in systems.iter().enumerate() {
                report.row(w, name, median_metrics(&runs[i]).iter().map(|(k, v)| (k.as_str(), *v)));
            }
            if reps > 1
                && let (Some(a), Some(b)) = (
                    systems.iter().position(|&s| s == "lsm-rangereduce"),
                    systems.iter().position(|&s| s == "lsm-local"),
                )
            {
                let mut line = format!("{w}: {reps} alternating runs per system, medians reported; per run,");
                // Runs of one turn ran back to back, so their ratio cancels more of the machine's drift than
                // the ratio of the two medians does.
                for m in ["rq_mean_ns", "compaction_debt_bytes", "space_amp_ratio"] {
                    let ratios = per_turn(&runs[a], &runs[b], |x, y| Some(metric(x, m)? / metric(y, m)?));
                    line.push_str(&format!(" lsm-rangereduce / lsm-local {m} {};", show(&ratios, 3)));
                }
                report.note(line);
            }
        }
        // One long query, then short ones inside its range.
        let (long_start, long_len) = pick(0.25, &mut rng);
        let short_len = len(0.0001);
        let short_starts: Vec<u64> =
            (0..shorts).map(|_| long_start + rng.random_range(0..long_len - short_len)).collect();
        for &name in systems.iter().filter(|_| want("long-short")) {
            let dir = ctx.scratch.join(format!("rr-ls-{name}"));
            let _ = std::fs::remove_dir_all(&dir);
            let db = open(name, &dir, t, file, low)?;
            let p = Plan { n, updates, queries: Vec::new() };
            run_load_and_update(&*db, &p, ctx.seed);
            let t0 = Instant::now();
            std::hint::black_box(db.range(&key(long_start), &key(long_start + long_len)));
            let long_ns = t0.elapsed().as_nanos() as f64;
            db.settle();
            let mut lat = Latencies::new();
            for &s in &short_starts {
                let t0 = Instant::now();
                std::hint::black_box(db.range(&key(s), &key(s + short_len)));
                lat.record_duration(t0.elapsed());
            }
            db.settle();
            let mut m: Vec<(String, f64)> = vec![
                ("long_rq_ns".into(), long_ns),
                ("rq_mean_ns".into(), lat.mean()),
                ("rq_p99_ns".into(), lat.p(0.99) as f64),
            ];
            push_end(&mut m, &db.end(t));
            report.row("long-short", name, m.iter().map(|(k, v)| (k.as_str(), *v)));
            drop(db);
            let _ = std::fs::remove_dir_all(&dir);
        }
        // YCSB-E-like: short scans with a few updates.
        for &name in systems.iter().filter(|_| want("ycsb-e")) {
            let dir = ctx.scratch.join(format!("rr-ycsb-{name}"));
            let _ = std::fs::remove_dir_all(&dir);
            let db = open(name, &dir, t, file, low)?;
            let p = Plan { n, updates, queries: Vec::new() };
            run_load_and_update(&*db, &p, ctx.seed);
            let mut r = SmallRng::seed_from_u64(ctx.seed ^ 0xe);
            let slen = len(0.00005).max(10);
            let mut lat = Latencies::new();
            let start = Instant::now();
            for i in 0..ycsb_ops {
                if r.random_range(0..100) < 5 {
                    db.put(&key(r.random_range(0..n)), value(i));
                } else {
                    let s = r.random_range(0..n - slen);
                    let t0 = Instant::now();
                    std::hint::black_box(db.range(&key(s), &key(s + slen)));
                    lat.record_duration(t0.elapsed());
                }
            }
            let secs = start.elapsed().as_secs_f64();
            db.settle();
            let mut m: Vec<(String, f64)> = vec![
                ("rq_mean_ns".into(), lat.mean()),
                ("rq_p99_ns".into(), lat.p(0.99) as f64),
                ("ops_per_sec".into(), ycsb_ops as f64 / secs.max(1e-9)),
            ];
            push_end(&mut m, &db.end(t));
            report.row("ycsb-e", name, m.iter().map(|(k, v)| (k.as_str(), *v)));
            drop(db);
            let _ = std::fs::remove_dir_all(&dir);
        }
        // Selectivity and size-ratio sweeps, our two configurations.
        let sweep_n = n / 2;
        let sweeps = SWEEP_SELECTIVITIES
            .iter()
            .map(|&sel| (format!("selectivity-{sel}"), sel, t, n, queries, ctx.seed ^ sel.to_bits()))
            .chain([2u64, 4, 6, 8, 10].into_iter().map(|tt| {
                (format!("size-ratio-{tt}"), SELECTIVITY, tt, sweep_n, queries / 2, ctx.seed ^ tt)
            }));
        for (w, sel, tt, n, queries, seed) in sweeps {
            if !want(&w) {
                continue;
            }
            report.workload(
                &w,
                json!({"keys": n, "updates": n, "queries": queries, "selectivity": sel, "T": tt}),
            );
            let mut r = SmallRng::seed_from_u64(seed);
            let l = ((n as f64 * sel) as u64).max(1);
            let qs: Vec<(u64, u64)> = (0..queries).map(|_| (r.random_range(0..n - l), l)).collect();
            let p = Plan { n, updates: n, queries: qs };
            for name in ["lsm-rangereduce", "lsm-local"].into_iter().filter(|s| systems.contains(s)) {
                let dir = ctx.scratch.join(format!("rr-{w}-{name}"));
                let _ = std::fs::remove_dir_all(&dir);
                let db = open(name, &dir, tt, file, low)?;
                let m = run_interleaved(&*db, &p, tt, ctx.seed);
                report.row(&w, name, m.iter().map(|(k, v)| (k.as_str(), *v)));
                drop(db);
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
        // The targets, against lsm-local in the same run; the same ratios for the Bounded-Merge ablation.
        for (sys, what) in
            [("lsm-rangereduce", "targets"), ("lsm-bounded-merge", "ablation lsm-bounded-merge")]
        {
            for w in ["uniform", "overlapping", "long-short", "ycsb-e"] {
                let ratio = |metric: &str| -> Option<f64> {
                    let a = report.get(w, sys, metric)?;
                    let b = report.get(w, "lsm-local", metric)?;
                    Some(if b == 0.0 { if a == 0.0 { 1.0 } else { f64::INFINITY } } else { a / b })
                };
                let header = format!("{what} vs lsm-local on {w}:");
                let mut line = header.clone();
                for (metric, target) in [
                    ("compaction_debt_bytes", 0.2),
                    ("space_amp_ratio", 0.85),
                    ("rq_mean_ns", 0.9),
                    ("data_movement_bytes", 1.0),
                ] {
                    if let Some(r) = ratio(metric) {
                        let verdict = if r <= target { "met" } else { "missed" };
                        line.push_str(&format!(" {metric} {r:.3} (target <= {target}, {verdict});"));
                    }
                }
                // A subset run without both systems on this workload has nothing to compare.
                if line != header {
                    report.note(line);
                }
            }
        }
        report.note(format!(
            "config: 16 B keys, {VALUE_LEN} B values, buffer {BUFFER} B, file size {file} B, L1 {} B, T = {t}, \
             L0 trigger 4, block 4 KiB, Bloom 10 bits, 8 MiB cache, no compression, no sync, background threads at \
             {} CPU priority; RocksDB 7.8 the same (dynamic level bytes off)",
            BUFFER * 4,
            if low { "low (nice 19)" } else { "normal" }
        ));
        Ok(report)
    }
}

/// Ingests `p.n` unique keys in random order and `p.updates` uniform updates, then settles.
fn run_load_and_update(db: &dyn Sys, p: &Plan, seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut perm: Vec<u64> = (0..p.n).collect();
    perm.shuffle(&mut rng);
    for (i, &kk) in perm.iter().enumerate() {
        db.put(&key(kk), value(i as u64));
    }
    for u in 0..p.updates {
        db.put(&key(rng.random_range(0..p.n)), value(p.n + u));
    }
    db.settle();
}
