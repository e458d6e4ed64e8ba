//! `rangedb bench rask`: RASK against per-block and range-map indexes on the same block I/O operations.
//!
//! Systems (ids are stable): `rask` (ART internal nodes), `rask-btree-internal` (the §7.5 ablation), and the peers
//! of [`peers`]: `btreemap-per-block`, `btreemap-eager`, `btreemap-lazy`, `rangemap`, `interval-tree`. Every
//! system replays the same pre-generated operations from empty; writes store `WriteRef { write, offset }`, reads
//! return the pieces covering their range.
//!
//! Workloads:
//! - `ebs-write-heavy`, `ebs-read-heavy`: synthetic EBS streams shaped by the paper's published statistics
//!   (consecutive-write streams with 65–81.5 % of writes in long CWs, 3.63-block average writes before I/O
//!   compaction, > 85 % of reads starting at a CW's first block), 90 % and 10 % writes.
//! - `len-N`: the range-length sweep (§7.4.2), average write N ∈ {1, 10, 100, 1000} blocks, 90 % writes.
//! - `wr-P`: the read/write-ratio sweep, P % writes.
//! - `ebs-write-heavy/Nt`: the concurrent index (`rask` = `ConcurrentRask`) at N threads against mutex-wrapped
//!   peers, operations of one stream dealt round-robin to threads (§7.3's method).
//!
//! Metrics: `ops_per_sec`, `mean_ns`, `p50_ns` … `p9999_ns` (every operation timed), `memory_bytes` (live heap
//! bytes the index holds after the replay, from the counting allocator).
//!
//! Settings: `--set ops=N` (operations per workload), `--set space=N` (working set in blocks),
//! `--set systems=a,b` and `--set workloads=prefix,...` to run a subset.

mod peers;

use std::sync::Mutex;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
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

/// Parameters of the synthetic EBS stream.
#[derive(Clone, Copy, Debug)]
struct EbsShape {
    write_pct: u32,
    /// Mean write length in blocks (geometric); `None` = the EBS shape (3.63 before compaction, CW streams).
    mean_len: Option<f64>,
    space: u64,
}

/// Generates `n` operations. EBS shape: 8 sequential streams (CWs) and random writes; 73 % of writes continue a
/// stream (the paper's long-CW ratio is 65–81.5 %), a stream jumps elsewhere every ~16 writes (and sometimes back
/// to an old start, rewriting it: the overlap RASK must handle); write lengths are geometric with mean 3.63.
/// Reads start at a recent CW's first block 86 % of the time, else anywhere, and cover a few blocks.
fn generate(seed: u64, n: usize, shape: EbsShape) -> Vec<Op> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mean = shape.mean_len.unwrap_or(3.63);
    let geo = |rng: &mut SmallRng| -> u64 {
        // Geometric with the given mean, at least 1; capped to keep one write inside the working set.
        let p = 1.0 / mean.max(1.0);
        let u: f64 = rng.random::<f64>().max(1e-12);
        ((u.ln() / (1.0 - p).max(1e-12).ln()).floor() as u64 + 1).min(shape.space / 4)
    };
    let mut streams: Vec<u64> = (0..8).map(|_| rng.random_range(0..shape.space)).collect();
    let mut cw_starts: Vec<u64> = vec![0; 1024];
    let mut cw_at = 0usize;
    let mut write = 0u64;
    let mut ops = Vec::with_capacity(n);
    for _ in 0..n {
        if rng.random_range(0..100) < shape.write_pct {
            let len = geo(&mut rng);
            let first = if shape.mean_len.is_none() && rng.random_range(0..100) < 73 {
                let s = rng.random_range(0..streams.len());
                if rng.random_range(0..16) == 0 {
                    streams[s] = if rng.random_bool(0.3) {
                        cw_starts[rng.random_range(0..cw_starts.len())]
                    } else {
                        rng.random_range(0..shape.space)
                    };
                    cw_starts[cw_at % 1024] = streams[s];
                    cw_at += 1;
                }
                let f = streams[s];
                streams[s] = (f + len) % shape.space;
                f
            } else {
                let f = rng.random_range(0..shape.space);
                cw_starts[cw_at % 1024] = f;
                cw_at += 1;
                f
            };
            let r = BlockRange::with_len(first, len).unwrap_or(BlockRange::block(first));
            ops.push(Op::Put(r, WriteRef::new(write, 0)));
            write += 1;
        } else {
            let first = if rng.random_range(0..100) < 86 {
                cw_starts[rng.random_range(0..cw_starts.len().min(cw_at.max(1)))]
            } else {
                rng.random_range(0..shape.space)
            };
            let len = geo(&mut rng).max(rng.random_range(1..=8));
            ops.push(Op::Get(BlockRange::with_len(first, len).unwrap_or(BlockRange::block(first))));
        }
    }
    ops
}

fn run_one<I: RangeIndex>(make: impl FnOnce() -> I, ops: &[Op]) -> (Stats, usize) {
    let before = alloc::live_bytes();
    let mut index = make();
    let mut sink = 0usize;
    let stats = time_ops(ops.len() as u64, |i| match ops[i as usize] {
        Op::Put(r, v) => index.put(r, v),
        Op::Get(r) => sink += index.get(r),
    });
    let bytes = alloc::live_bytes().saturating_sub(before);
    std::hint::black_box(sink);
    drop(index);
    (stats, bytes)
}

const PEERS: [&str; 5] =
    ["btreemap-per-block", "btreemap-eager", "btreemap-lazy", "rangemap", "interval-tree"];

fn run_workload(report: &mut Report, name: &str, ops: &[Op], only: &Option<Vec<String>>) -> Result<()> {
    let opts = Options::default();
    let want = |s: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == s));
    let mut record = |system: &str, (stats, bytes): (Stats, usize)| {
        let mut m = stats.metrics();
        m.push(("memory_bytes", bytes as f64));
        report.row(name, system, m);
    };
    let o = opts.clone();
    if want("rask") {
        record("rask", run_one(move || Rask::<WriteRef>::new(o).unwrap_or_else(|_| unreachable_opts()), ops));
    }
    let o = opts.clone();
    if want("rask-btree-internal") {
        let make =
            move || Rask::<WriteRef, BTreeIndex<LeafHandle>>::new(o).unwrap_or_else(|_| unreachable_opts());
        record("rask-btree-internal", run_one(make, ops));
    }
    for peer in PEERS {
        if !want(peer) {
            continue;
        }
        let res = match peer {
            "btreemap-per-block" => run_one(PerBlock::default, ops),
            "btreemap-eager" => run_one(Eager::default, ops),
            "btreemap-lazy" => run_one(Lazy::default, ops),
            "rangemap" => run_one(RangeMapPeer::default, ops),
            _ => run_one(IntervalTree::new, ops),
        };
        record(peer, res);
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

fn run_parallel(report: &mut Report, name: &str, ops: &[Op], threads: usize) {
    let n = (ops.len() / threads) as u64;
    let at = |t: usize, i: u64| ops[i as usize * threads + t];
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
    drop(rask);
    let mut m = stats.metrics();
    m.push(("memory_bytes", bytes as f64));
    report.row(name, "rask", m);

    fn locked<I: RangeIndex + Send>(
        index: I,
        threads: usize,
        n: u64,
        at: &(dyn Fn(usize, u64) -> Op + Sync),
    ) -> (Stats, usize) {
        let before = alloc::live_bytes();
        let m = Mutex::new(index);
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
    for peer in ["btreemap-per-block", "btreemap-eager", "btreemap-lazy", "rangemap"] {
        let (stats, bytes) = match peer {
            "btreemap-per-block" => locked(PerBlock::default(), threads, n, &at),
            "btreemap-eager" => locked(Eager::default(), threads, n, &at),
            "btreemap-lazy" => locked(Lazy::default(), threads, n, &at),
            _ => locked(RangeMapPeer::default(), threads, n, &at),
        };
        let mut m = stats.metrics();
        m.push(("memory_bytes", bytes as f64));
        report.row(name, peer, m);
    }
}

impl Experiment for RaskBench {
    fn name(&self) -> &'static str {
        "rask"
    }

    fn about(&self) -> &'static str {
        "RASK vs btreemap-per-block, btreemap-eager/lazy, rangemap, interval-tree: synthetic EBS write/read-heavy, \
         range-length and read/write sweeps, 1-2 threads; throughput, P99-P99.99, memory; --set ops=N space=N \
         systems=a,b workloads=prefix,..."
    }

    fn run(&self, ctx: &Ctx) -> Result<Report> {
        let mut report = Report::new(self.name(), ctx.quick);
        let n: usize = ctx.setting("ops", ctx.scale(200_000, 2_000_000))?;
        let space: u64 = ctx.setting("space", 1u64 << 22)?;
        let only: Option<Vec<String>> =
            ctx.set.get("systems").map(|s| s.split(',').map(|x| x.trim().to_string()).collect());
        let workloads: Option<Vec<String>> =
            ctx.set.get("workloads").map(|s| s.split(',').map(|x| x.trim().to_string()).collect());
        let run_wl = |w: &str| workloads.as_ref().is_none_or(|o| o.iter().any(|x| w.starts_with(x.as_str())));
        if space < 64 {
            return Err("--set space must be at least 64 blocks".into());
        }
        if !alloc::installed() {
            report.note("the counting allocator is not installed: memory_bytes are zero");
        }
        let bar = ctx.progress(13, "rask");
        for (name, write_pct) in [("ebs-write-heavy", 90), ("ebs-read-heavy", 10)] {
            if !run_wl(name) {
                continue;
            }
            let shape = EbsShape { write_pct, mean_len: None, space };
            report.workload(
                name,
                json!({"generator": "synthetic EBS (8 CW streams, 73% stream writes, mean write 3.63 blocks, 86% of reads at a CW start)",
                       "write_pct": write_pct, "ops": n, "space_blocks": space, "seed": ctx.seed}),
            );
            let ops = generate(ctx.seed, n, shape);
            run_workload(&mut report, name, &ops, &only)?;
            bar.inc(1);
        }
        let mut len_points: Vec<(String, f64, f64)> = Vec::new();
        for mean in [1u64, 10, 100, 1000] {
            let name = format!("len-{mean}");
            if !run_wl(&name) {
                continue;
            }
            // Bound the blocks written so the per-block peer finishes: at most ~4 M block updates.
            let ops_n = n.min((4_000_000 / mean as usize).max(2_000));
            let shape = EbsShape { write_pct: 90, mean_len: Some(mean as f64), space };
            report.workload(
                &name,
                json!({"mean_write_blocks": mean, "write_pct": 90, "ops": ops_n, "space_blocks": space}),
            );
            let ops = generate(ctx.seed ^ mean, ops_n, shape);
            run_workload(&mut report, &name, &ops, &only)?;
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
            let shape = EbsShape { write_pct: wp, mean_len: None, space };
            report.workload(&name, json!({"write_pct": wp, "ops": n, "space_blocks": space}));
            let ops = generate(ctx.seed ^ u64::from(wp) << 8, n, shape);
            run_workload(&mut report, &name, &ops, &only)?;
            bar.inc(1);
        }
        let threads: Vec<usize> = if ctx.threads.is_empty() { vec![1, 2] } else { ctx.threads.clone() };
        let shape = EbsShape { write_pct: 90, mean_len: None, space };
        let ops = generate(ctx.seed, n, shape);
        for t in threads.iter().copied().filter(|&t| t >= 1) {
            let name = format!("ebs-write-heavy/{t}t");
            if !run_wl(&name) {
                continue;
            }
            report
                .workload(&name, json!({"threads": t, "write_pct": 90, "ops": n, "peers": "behind a Mutex"}));
            run_parallel(&mut report, &name, &ops, t);
            bar.inc(1);
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
