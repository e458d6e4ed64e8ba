//! `rangedb bench rask`: RASK against per-block and range-map indexes on the same block I/O operations.
//!
//! Systems (ids are stable): `rask` (ART internal nodes), `rask-btree-internal` (the §7.5 ablation),
//! `rask-normal-gc` (no lightweight GC stage: the "+ Normal GC" step of the §7.5 ablation), and the peers
//! of [`peers`]: `btreemap-per-block`, `btreemap-eager`, `btreemap-lazy`, `rangemap`, `interval-tree`. Every
//! system replays the same pre-generated operations from empty; writes store `WriteRef { write, offset }`, reads
//! return the pieces covering their range.
//!
//! Workloads:
//! - `ebs-write-heavy`, `ebs-read-heavy`: the workloads crate's synthetic EBS traces (`SyntheticOptions::
//!   write_heavy` / `read_heavy`: 73 % of writes in long CWs, 3.63-block average writes, 86 % of reads starting at
//!   a CW's first block; 90 % and 4 % writes), one volume, after the paper's I/O compaction (128-block window).
//! - `trace:FILE`: every `--trace` file (Alibaba, Tencent or MSR, plain or gzip; format guessed from the first
//!   line), compacted likewise; volumes are placed side by side in one block space (volume id << 40).
//! - `len-N`: the range-length sweep (§7.4.2): the same generator with average write N ∈ {1, 10, 100, 1000}
//!   blocks, 90 % writes, not compacted (the write length is the variable).
//! - `wr-P`: the read/write-ratio sweep, P % writes, compacted.
//! - `ebs-write-heavy/Nt`, `ebs-read-heavy/Nt`: the concurrent index (`rask` = `ConcurrentRask`) at N threads
//!   against mutex-wrapped peers, operations of one stream dealt round-robin to threads (§7.3's method).
//!
//! Metrics: `ops_per_sec` (from a replay without per-operation timing), `mean_ns`, `p50_ns` … `p9999_ns` (from
//! a replay timing every operation; they include the ~20 ns of the clock), `memory_bytes` (live heap bytes the
//! index holds after the replay, from the counting allocator). Every system replays each workload `reps` times
//! from empty, both ways, and the fastest run is reported (all systems alike): on a shared machine single runs
//! lose milliseconds to other processes. The notes describe RASK's final structure (leaves, stored entries, live
//! pieces, GC/split/merge counts).
//!
//! Settings: `--set ops=N` (operations per workload), `--set space=N` (working set in blocks), `--set reps=N`
//! (replays per system, best kept; default 3),
//! `--set systems=a,b` and `--set workloads=prefix,...` to run a subset; `--set breakdown=1` adds a note per
//! workload with RASK's latency by operation class (get, append, lightweight GC, normal GC, split, merge/resplit);
//! `--set rewrite=F` makes that fraction of the synthetic traces' single writes rewrite an earlier one in place
//! (`SyntheticOptions::rewrite_fraction`, default 0; 0.8 gives the paper's lightweight-GC effectiveness) in the
//! `ebs-*` and `wr-*` workloads. The concurrent workloads note every run's RASK throughput and its median.

mod peers;

use std::sync::Mutex;

use rask::internal::BTreeIndex;
use rask::{BlockRange, ConcurrentRask, LeafHandle, Options, Rask, WriteRef};
use serde_json::json;

use self::peers::{Eager, IntervalTree, Lazy, PerBlock, RangeIndex, RangeMapPeer};
use crate::measure::{Stats, time_ops, time_ops_parallel};
use crate::{Ctx, Experiment, Plot, Report, Result, alloc};

/// The `rask` experiment.
pub struct RaskBench;

#[derive(Clone, Copy, Debug)]
enum Op {
    Put(BlockRange, WriteRef),
    Get(BlockRange),
}

/// Operations of a block trace: writes numbered in order, reads as ranges.
fn from_block_ops(ops: impl IntoIterator<Item = workloads::traces::BlockOp>) -> Vec<Op> {
    let mut write = 0u64;
    let mut out = Vec::new();
    for op in ops {
        let shift = u64::from(op.volume) << 40;
        let Ok(r) =
            BlockRange::new(op.first_block.saturating_add(shift), op.last_block.saturating_add(shift))
        else {
            continue;
        };
        if op.is_write() {
            out.push(Op::Put(r, WriteRef::new(write, 0)));
            write += 1;
        } else {
            out.push(Op::Get(r));
        }
    }
    out
}

/// The synthetic EBS trace of the workloads crate, one volume, I/O-compacted (or not, for the length sweep,
/// whose point is the write length as generated).
fn synthetic_ebs(
    seed: u64,
    n: usize,
    opts: workloads::traces::SyntheticOptions,
    compact: bool,
) -> Result<Vec<Op>> {
    use workloads::traces::{Compacted, DEFAULT_WINDOW_BLOCKS, SyntheticTrace};
    let opts = workloads::traces::SyntheticOptions { seed, ops: n as u64, volumes: 1, ..opts };
    let trace = SyntheticTrace::new(opts)?;
    Ok(if compact {
        from_block_ops(Compacted::new(trace, DEFAULT_WINDOW_BLOCKS))
    } else {
        from_block_ops(trace)
    })
}

/// A trace file, format guessed from its first parsable line, I/O-compacted; malformed lines are skipped (and
/// counted in a note).
fn trace_file(path: &std::path::Path, report: &mut Report) -> Result<Vec<Op>> {
    use workloads::traces::{DEFAULT_WINDOW_BLOCKS, TraceFormat, TraceOptions, TraceReader, TryCompacted};
    for format in TraceFormat::ALL {
        let mut probe = TraceReader::open(path, TraceOptions::new(format))?;
        if !matches!(probe.next(), Some(Ok(_))) || probe.stats().malformed > 0 {
            continue;
        }
        let reader = TraceReader::open(path, TraceOptions::new(format))?;
        let mut it = TryCompacted::new(reader, DEFAULT_WINDOW_BLOCKS);
        let mut ops = Vec::new();
        for item in it.by_ref() {
            ops.push(item?);
        }
        let malformed = it.inner().stats().malformed;
        if malformed > 0 {
            report.note(format!("{}: {malformed} malformed lines skipped", path.display()));
        }
        return Ok(from_block_ops(ops));
    }
    Err(format!("{}: no trace format parses its first line", path.display()).into())
}

/// Replays `ops` on a fresh index `reps` times and keeps the fastest run (every system alike): on a shared
/// machine a run can lose whole milliseconds to other processes, and the best of a few is the least disturbed.
///
/// Each repetition replays twice: once untimed, whose wall time gives `ops_per_sec`, and once timing every
/// operation, which gives the latencies (from the repetition with the lowest mean) and the memory (deterministic).
/// Timing an operation costs two clock reads and a histogram update, ~40 ns here: as much as a whole RASK or
/// B-tree get, so throughput measured on the timed replay was mostly the clock's and pulled every ratio towards 1.
fn run_one<I: RangeIndex>(make: impl Fn() -> I, ops: &[Op], reps: usize) -> (Stats, usize, Option<String>) {
    let mut fastest: Option<std::time::Duration> = None;
    let mut timed: Option<(Stats, usize, Option<String>)> = None;
    let mut sink = 0usize;
    for _ in 0..reps.max(1) {
        let mut index = make();
        let start = std::time::Instant::now();
        for op in ops {
            apply(&mut index, op, &mut sink);
        }
        let elapsed = start.elapsed();
        drop(index);
        fastest = Some(fastest.map_or(elapsed, |f| f.min(elapsed)));

        let before = alloc::live_bytes();
        let mut index = make();
        let stats = time_ops(ops.len() as u64, |i| apply(&mut index, &ops[i as usize], &mut sink));
        let bytes = alloc::live_bytes().saturating_sub(before);
        let summary = index.summary();
        drop(index);
        if timed.as_ref().is_none_or(|(b, _, _)| stats.latencies.mean() < b.latencies.mean()) {
            timed = Some((stats, bytes, summary));
        }
    }
    std::hint::black_box(sink);
    let (mut stats, bytes, summary) = timed.unwrap_or_else(|| (time_ops(0, |_| {}), 0, None));
    if let Some(f) = fastest {
        stats.elapsed = f;
    }
    (stats, bytes, summary)
}

/// Applies one operation; a get adds the pieces it found to `sink` (so it cannot be optimised away).
fn apply<I: RangeIndex>(index: &mut I, op: &Op, sink: &mut usize) {
    match *op {
        Op::Put(r, v) => index.put(r, v),
        Op::Get(r) => *sink += index.get(r),
    }
}

/// Replays `ops` on a fresh `Rask` timing every operation, and classifies each by the structural work it did
/// (from the counters before and after): get, plain append, lightweight GC, normal GC, split, merge/resplit.
/// Returns one line per class: count, mean, P99 and P99.9, so a tail can be traced to its cause.
fn rask_breakdown(ops: &[Op]) -> String {
    use crate::measure::Latencies;
    use std::time::Instant;
    const CLASSES: [&str; 6] = ["get", "append", "gc-light", "gc-normal", "split", "merge/resplit"];
    let mut lat: Vec<Latencies> = (0..CLASSES.len()).map(|_| Latencies::new()).collect();
    let Ok(mut index) = Rask::<WriteRef>::new(Options::default()) else { return String::new() };
    let mut sink = 0usize;
    for op in ops {
        let s0 = index.stats();
        let t = Instant::now();
        let is_get = match *op {
            Op::Put(r, v) => {
                index.put(r, v);
                false
            }
            Op::Get(r) => {
                index.get_with(r, |_, _| sink += 1);
                true
            }
        };
        let d = t.elapsed();
        let s1 = index.stats();
        let class = if is_get {
            0
        } else if s1.merges + s1.resplits > s0.merges + s0.resplits {
            5
        } else if s1.splits > s0.splits {
            4
        } else if s1.gc_normal > s0.gc_normal {
            3
        } else if s1.gc_lightweight > s0.gc_lightweight {
            2
        } else {
            1
        };
        lat[class].record_duration(d);
    }
    std::hint::black_box(sink);
    CLASSES
        .iter()
        .zip(&lat)
        .filter(|(_, l)| l.count() > 0)
        .map(|(c, l)| {
            format!(
                "{c} {} ops mean {:.0} ns p50 {} ns p99 {} ns p99.9 {} ns",
                l.count(),
                l.mean(),
                l.p(0.5),
                l.p(0.99),
                l.p(0.999)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

const PEERS: [&str; 5] =
    ["btreemap-per-block", "btreemap-eager", "btreemap-lazy", "rangemap", "interval-tree"];

/// Runs the systems named in `only` (RASK, its ablation and the peers) on `ops` and records a row each.
fn run_workload(
    report: &mut Report,
    name: &str,
    ops: &[Op],
    only: &[String],
    reps: usize,
    breakdown: bool,
) -> Result<()> {
    let opts = Options::default();
    let want = |s: &str| only.iter().any(|x| x == s);
    let mut notes: Vec<String> = Vec::new();
    let mut record_note = |n: String| notes.push(n);
    let mut record = |system: &str, (stats, bytes, summary): (Stats, usize, Option<String>)| {
        let mut m = stats.metrics();
        m.push(("memory_bytes", bytes as f64));
        report.row(name, system, m);
        if let Some(s) = summary {
            report.note(format!("{name} / {system}: {s}"));
        }
    };
    let o = opts.clone();
    if want("rask") {
        let make = move || Rask::<WriteRef>::new(o.clone()).unwrap_or_else(|_| unreachable_opts());
        let res = run_one(make, ops, reps);
        let classes = breakdown.then(|| rask_breakdown(ops));
        record("rask", res);
        if let Some(c) = classes {
            record_note(format!("{name} / rask per operation class: {c}"));
        }
    }
    let o = opts.clone();
    if want("rask-btree-internal") {
        let make = move || {
            Rask::<WriteRef, BTreeIndex<LeafHandle>>::new(o.clone()).unwrap_or_else(|_| unreachable_opts())
        };
        record("rask-btree-internal", run_one(make, ops, reps));
    }
    let o = opts.clone();
    if want("rask-normal-gc") {
        let make = move || {
            Rask::<WriteRef>::new(Options { two_stage_gc: false, ..o.clone() })
                .unwrap_or_else(|_| unreachable_opts())
        };
        record("rask-normal-gc", run_one(make, ops, reps));
    }
    for peer in PEERS {
        if !want(peer) {
            continue;
        }
        let res = match peer {
            "btreemap-per-block" => run_one(PerBlock::default, ops, reps),
            "btreemap-eager" => run_one(Eager::default, ops, reps),
            "btreemap-lazy" => run_one(Lazy::default, ops, reps),
            "rangemap" => run_one(RangeMapPeer::default, ops, reps),
            _ => run_one(IntervalTree::new, ops, reps),
        };
        record(peer, res);
    }
    for n in notes {
        report.note(n);
    }
    Ok(())
}

#[cold]
fn unreachable_opts<T>() -> T {
    // Options::default() always validates (tested in the rask crate).
    #[allow(clippy::panic)]
    {
        panic!("default RASK options rejected")
    }
}

/// The concurrent index against the peers behind a mutex, on `threads` threads; `only` as in [`run_workload`]
/// (`rask-btree-internal` and `interval-tree` have no concurrent form).
fn run_parallel(report: &mut Report, name: &str, ops: &[Op], only: &[String], threads: usize, reps: usize) {
    let want = |s: &str| only.iter().any(|x| x == s);
    let n = (ops.len() / threads) as u64;
    let at = |t: usize, i: u64| ops[i as usize * threads + t];
    let best = |runs: Vec<(Stats, usize)>| {
        runs.into_iter().max_by(|a, b| a.0.ops_per_sec().total_cmp(&b.0.ops_per_sec()))
    };
    let runs = (0..if want("rask") { reps.max(1) } else { 0 })
        .map(|_| {
            let before = alloc::live_bytes();
            let rask: ConcurrentRask<WriteRef> =
                ConcurrentRask::new(Options::default()).unwrap_or_else(|_| unreachable_opts());
            let stats = time_ops_parallel(threads, n, |t, i| match at(t, i) {
                Op::Put(r, v) => rask.put(r, v),
                Op::Get(r) => {
                    let mut k = 0;
                    rask.get_with(r, |_, _| k += 1);
                    std::hint::black_box(k);
                }
            });
            let bytes = alloc::live_bytes().saturating_sub(before);
            (stats, bytes)
        })
        .collect::<Vec<_>>();
    // Every run's throughput, so scaling can be judged by the median as well as by the best run.
    let mut tput: Vec<f64> = runs.iter().map(|(s, _)| s.ops_per_sec()).collect();
    tput.sort_by(f64::total_cmp);
    if let Some(median) = tput.get(tput.len() / 2) {
        let all = tput.iter().map(|x| format!("{x:.0}")).collect::<Vec<_>>().join(", ");
        report.note(format!("{name} / rask: ops/s of each run (sorted) {all}; median {median:.0}"));
    }
    if let Some((stats, bytes)) = best(runs) {
        let mut m = stats.metrics();
        m.push(("memory_bytes", bytes as f64));
        report.row(name, "rask", m);
    }

    fn locked<I: RangeIndex + Send>(
        make: impl Fn() -> I,
        threads: usize,
        n: u64,
        at: &(dyn Fn(usize, u64) -> Op + Sync),
    ) -> (Stats, usize) {
        let before = alloc::live_bytes();
        let m = Mutex::new(make());
        let stats = time_ops_parallel(threads, n, |t, i| {
            let mut g = m.lock().unwrap_or_else(|p| p.into_inner());
            match at(t, i) {
                Op::Put(r, v) => g.put(r, v),
                Op::Get(r) => {
                    std::hint::black_box(g.get(r));
                }
            }
        });
        (stats, alloc::live_bytes().saturating_sub(before))
    }
    for peer in
        ["btreemap-per-block", "btreemap-eager", "btreemap-lazy", "rangemap"].into_iter().filter(|p| want(p))
    {
        let runs = (0..reps.max(1))
            .map(|_| match peer {
                "btreemap-per-block" => locked(PerBlock::default, threads, n, &at),
                "btreemap-eager" => locked(Eager::default, threads, n, &at),
                "btreemap-lazy" => locked(Lazy::default, threads, n, &at),
                _ => locked(RangeMapPeer::default, threads, n, &at),
            })
            .collect();
        if let Some((stats, bytes)) = best(runs) {
            let mut m = stats.metrics();
            m.push(("memory_bytes", bytes as f64));
            report.row(name, peer, m);
        }
    }
}

impl Experiment for RaskBench {
    fn name(&self) -> &'static str {
        "rask"
    }

    fn settings(&self) -> &'static [&'static str] {
        &["breakdown", "ops", "reps", "rewrite", "space", "systems", "workloads"]
    }

    fn about(&self) -> &'static str {
        "RASK vs btreemap-per-block, btreemap-eager/lazy, rangemap, interval-tree: synthetic EBS write/read-heavy, \
         range-length and read/write sweeps, 1-2 threads; throughput, P99-P99.99, memory; --set ops=N space=N \
         reps=N rewrite=F systems=a,b workloads=prefix,..."
    }

    fn run(&self, ctx: &Ctx) -> Result<Report> {
        let mut report = Report::new(self.name(), ctx.quick);
        let n: usize = ctx.setting_min("ops", ctx.scale(200_000, 2_000_000), 1)?;
        let space: u64 = ctx.setting_min("space", 1u64 << 20, 1)?;
        let reps: usize = ctx.setting_min("reps", 3, 1)?;
        let breakdown: bool = ctx.setting::<u8>("breakdown", 0)? != 0;
        let rewrite: f64 =
            ctx.setting("rewrite", workloads::traces::SyntheticOptions::default().rewrite_fraction)?;
        workloads::traces::SyntheticOptions { rewrite_fraction: rewrite, ..Default::default() }.validate()?;
        let systems: Vec<&str> =
            ["rask", "rask-btree-internal", "rask-normal-gc"].into_iter().chain(PEERS).collect();
        let only = ctx.list("systems", &systems, &systems, false)?;
        // Workload names: the two synthetic traces (and their `/Nt` concurrent runs), the sweeps `len-N` and
        // `wr-N`, and `trace:FILE`; a filter is a prefix of names.
        let families = ["ebs-write-heavy", "ebs-read-heavy", "len-", "wr-", "trace:"];
        let workloads = ctx.list("workloads", &families, &families, true)?;
        let run_wl = |w: &str| workloads.iter().any(|x| w.starts_with(x.as_str()));
        if space < 64 {
            return Err("--set space must be at least 64 blocks".into());
        }
        if !alloc::installed() {
            report.note("the counting allocator is not installed: memory_bytes are zero");
        }
        let bar = ctx.progress(15, "rask");
        for (name, syn) in [
            ("ebs-write-heavy", workloads::traces::SyntheticOptions::write_heavy()),
            ("ebs-read-heavy", workloads::traces::SyntheticOptions::read_heavy()),
        ] {
            if !run_wl(name) {
                continue;
            }
            let syn = workloads::traces::SyntheticOptions { rewrite_fraction: rewrite, ..syn };
            report.workload(
                name,
                json!({"generator": "workloads SyntheticTrace, 1 volume, I/O compaction 128 blocks",
                       "write_ratio": syn.write_ratio, "avg_write_blocks": syn.avg_write_blocks,
                       "long_cw_ratio": syn.long_cw_ratio, "read_at_cw_start": syn.read_at_cw_start,
                       "working_set_blocks": syn.working_set_blocks, "rewrite_fraction": syn.rewrite_fraction,
                       "ops": n, "seed": ctx.seed}),
            );
            let ops = synthetic_ebs(ctx.seed, n, syn, true)?;
            run_workload(&mut report, name, &ops, &only, reps, breakdown)?;
            bar.inc(1);
        }
        for path in &ctx.traces {
            let name = format!(
                "trace:{}",
                path.file_name()
                    .map_or_else(|| path.display().to_string(), |f| f.to_string_lossy().into_owned())
            );
            let ops = trace_file(path, &mut report)?;
            report.workload(
                &name,
                json!({"path": path.display().to_string(), "ops": ops.len(), "io_compaction_blocks": 128}),
            );
            run_workload(&mut report, &name, &ops, &only, reps, breakdown)?;
        }
        let mut len_points: Vec<(String, f64, f64)> = Vec::new();
        for mean in [1u64, 10, 100, 1000] {
            let name = format!("len-{mean}");
            if !run_wl(&name) {
                continue;
            }
            // Bound the blocks written so the per-block peer finishes: at most ~4 M block updates.
            let ops_n = n.min((4_000_000 / mean as usize).max(2_000));
            let syn = workloads::traces::SyntheticOptions {
                avg_write_blocks: mean as f64,
                max_write_blocks: (mean * 4).max(256),
                working_set_blocks: space,
                ..workloads::traces::SyntheticOptions::write_heavy()
            };
            report.workload(
                &name,
                json!({"avg_write_blocks": mean, "write_ratio": syn.write_ratio, "ops": ops_n,
                       "working_set_blocks": space, "io_compaction": false}),
            );
            let ops = synthetic_ebs(ctx.seed ^ mean, ops_n, syn, false)?;
            run_workload(&mut report, &name, &ops, &only, reps, breakdown)?;
            for sys in ["rask", "btreemap-lazy", "rangemap"] {
                if let Some(v) = report.get(&name, sys, "ops_per_sec") {
                    len_points.push((sys.to_string(), mean as f64, v));
                }
            }
            bar.inc(1);
        }
        for wp in [5u32, 25, 50, 75, 95] {
            let name = format!("wr-{wp}");
            if !run_wl(&name) {
                continue;
            }
            let syn = workloads::traces::SyntheticOptions {
                write_ratio: f64::from(wp) / 100.0,
                working_set_blocks: space,
                rewrite_fraction: rewrite,
                ..workloads::traces::SyntheticOptions::write_heavy()
            };
            report.workload(
                &name,
                json!({"write_ratio": syn.write_ratio, "ops": n, "working_set_blocks": space,
                       "rewrite_fraction": syn.rewrite_fraction, "io_compaction_blocks": 128}),
            );
            let ops = synthetic_ebs(ctx.seed ^ u64::from(wp) << 8, n, syn, true)?;
            run_workload(&mut report, &name, &ops, &only, reps, breakdown)?;
            bar.inc(1);
        }
        let threads: Vec<usize> = if ctx.threads.is_empty() { vec![1, 2] } else { ctx.threads.clone() };
        for (wl, syn, pct) in [
            ("ebs-write-heavy", workloads::traces::SyntheticOptions::write_heavy(), 90),
            ("ebs-read-heavy", workloads::traces::SyntheticOptions::read_heavy(), 4),
        ] {
            let syn = workloads::traces::SyntheticOptions { rewrite_fraction: rewrite, ..syn };
            let ops = synthetic_ebs(ctx.seed, n, syn, true)?;
            for t in threads.iter().copied().filter(|&t| t >= 1) {
                let name = format!("{wl}/{t}t");
                if !run_wl(&name) {
                    continue;
                }
                report.workload(
                    &name,
                    json!({"threads": t, "write_pct": pct, "ops": n, "peers": "behind a Mutex", "reps": reps,
                           "rewrite_fraction": rewrite}),
                );
                run_parallel(&mut report, &name, &ops, &only, t, reps);
                bar.inc(1);
            }
        }
        bar.finish_and_clear();
        let mut plot = Plot::new("Throughput vs mean write length", "mean write length (blocks)", "ops/s");
        plot.log_x = true;
        plot.log_y = true;
        for sys in ["rask", "btreemap-lazy", "rangemap"] {
            let pts = len_points.iter().filter(|(s, _, _)| s == sys).map(|(_, x, y)| (*x, *y)).collect();
            plot = plot.series(sys, pts);
        }
        report.plot(plot);
        Ok(report)
    }
}
