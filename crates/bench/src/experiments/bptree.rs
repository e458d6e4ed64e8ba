//! `rangedb bench bptree`: the BP-tree (paper §6) against `BTreeMap`, a crossbeam skip list and the same tree
//! with sorted-array leaves.
//!
//! Systems (stable ids):
//! - `bptree`: our BP-tree with BPA leaves, paper defaults (log 32, header 32, 32 blocks of 32 slots; 1 KiB
//!   internal nodes). One thread: the single-writer `BpTree`; more: `ConcurrentBpTree`.
//! - `btree-sorted-leaves`: the same tree with sorted-array leaves of 1 KiB (64 slots of 16 bytes): the paper's
//!   tuned B-tree baseline and the ablation of the BPA (`bptree` ⁄ `btree-sorted-leaves` isolates the leaf).
//! - `btreemap`: `std::collections::BTreeMap` (behind a `RwLock` when threads > 1).
//! - `crossbeam-skipmap`: `crossbeam_skiplist::SkipMap` (lock-free).
//!
//! Workloads:
//! - §6.1 microbenchmarks with 8-byte keys and values: `insert` (n uniform random keys into a tree already holding
//!   n), `find` (existing keys), `iterate-maxL` and `map-maxL` (range iteration / unordered map of a uniformly
//!   random length in [0, L] from a random existing key; maps use the same [start, end) as the iterations),
//!   `seq-insert` (n increasing keys into an empty tree), and `memory` (heap bytes per entry after the insert
//!   workload, counted by the allocator); plus the same microbenchmarks for every leaf size of the paper's sweep,
//!   both leaf kinds (`sweep-*`, see `leaf_sweep`).
//! - YCSB A (50 % read, 50 % update), B (95/5), C (reads), E (95 % scans max 100, 5 % inserts), X (long range
//!   iterations max 10,000), Y (long range maps max 10,000), uniform and scrambled-zipfian (θ = 0.99) keys, at every
//!   `--threads` count.
//! - `str-*`: the memtable case, keys of 16–64 random bytes (`ByteKey` in the BP-tree, `Vec<u8>` in the peers),
//!   8-byte values: insert, find, iterate max 100 and 10,000, memory.
//!
//! Operation keys are drawn with `workloads::KeySampler` (uniform, or YCSB's scrambled zipfian with θ = 0.99)
//! over the loaded keys; loaded and inserted keys are uniform random 64-bit integers.
//!
//! `--set n=N` (entries loaded; default quick 1,000,000, full 10,000,000), `ops=N` (point operations per
//! workload), `scans=N` (short scans), `long_scans=N`, `sweep=0|1` (leaf-size sweep; default on), `sweep_n=N`
//! (entries loaded in each sweep configuration; default quick 250,000, full n), `only=a,b` (run only these parts
//! of micro, sweep, ycsb, strings; default all).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::ops::Bound;
use std::sync::RwLock;

use bptree::{BpTree, ByteKey, ConcurrentBpTree, Options, SortedLeaf};
use crossbeam_skiplist::SkipMap;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use workloads::{Distribution, KeySampler};

use crate::measure::{Stats, time_ops_parallel, time_ops_sampled};
use crate::{Ctx, Experiment, Report, Result, alloc};

/// The `bptree` experiment.
pub struct BpTreeBench;

impl Experiment for BpTreeBench {
    fn name(&self) -> &'static str {
        "bptree"
    }

    fn settings(&self) -> &'static [&'static str] {
        &["long_scans", "n", "only", "ops", "scans", "sweep", "sweep_n"]
    }

    fn about(&self) -> &'static str {
        "BP-tree vs btreemap, crossbeam-skipmap, btree-sorted-leaves: paper 6.1 microbenchmarks, leaf sweep, YCSB \
         A/B/C/E/X/Y uniform+zipfian, 16-64 byte string keys; --set n=N ops=N scans=N long_scans=N sweep=0|1"
    }

    fn run(&self, ctx: &Ctx) -> Result<Report> {
        let mut report = Report::new(self.name(), ctx.quick);
        let p = Params {
            n: ctx.setting_min("n", ctx.scale(1_000_000, 10_000_000), 1)?,
            ops: ctx.setting_min("ops", ctx.scale(1_000_000, 10_000_000), 1)?,
            scans: ctx.setting_min("scans", ctx.scale(100_000, 1_000_000), 1)?,
            long_scans: ctx.setting_min("long_scans", ctx.scale(1_000, 10_000), 1)?,
            seed: ctx.seed,
        };
        let sweep: u32 = ctx.setting("sweep", 1)?;
        let sweep_n: usize = ctx.setting_min("sweep_n", ctx.scale(250_000, p.n), 1)?;
        let parts = ["micro", "sweep", "ycsb", "strings"];
        let only = ctx.list("only", &parts, &parts, false)?;
        let part = |name: &str| only.iter().any(|x| x == name);
        report.note(
            "YCSB keys: workloads::KeySampler (uniform; scrambled zipfian theta 0.99) over the loaded keys.",
        );
        if p.n == 0 {
            return Err("--set n must be at least 1".into());
        }
        if part("micro") {
            micro(ctx, &p, &mut report);
        }
        if sweep != 0 && part("sweep") {
            let sp = Params {
                n: sweep_n.max(1),
                ops: p.ops.min(sweep_n.max(1)),
                scans: p.scans.min(sweep_n.max(1) / 10).max(1),
                long_scans: p.long_scans,
                ..p
            };
            leaf_sweep(ctx, &sp, &mut report);
        }
        if part("ycsb") {
            for &threads in &ctx.threads {
                ycsb(ctx, &p, threads, &mut report);
            }
        }
        if part("strings") {
            strings(ctx, &p, &mut report);
        }
        Ok(report)
    }
}

#[derive(Clone, Copy)]
struct Params {
    n: usize,
    ops: usize,
    scans: usize,
    long_scans: usize,
    seed: u64,
}

/// Sorted-array leaves of 1 KiB (64 slots of 8-byte keys and values): the paper's B-tree node size.
fn sorted_1k() -> Options {
    Options { log_size: 2, num_blocks: 2, block_size: 30, ..Options::default() }
}

/// The single-threaded interface every system offers the benchmark.
trait Single {
    fn insert(&mut self, k: u64, v: u64);
    fn get(&self, k: u64) -> u64;
    /// Sum of the values of `len` entries in key order from `start`.
    fn scan(&mut self, start: u64, len: usize) -> u64;
    /// Sum of the values with keys in `[start, end)`, in any order.
    fn map(&self, start: u64, end: u64) -> u64;
}

impl<L: bptree::Leaf<u64, u64>> Single for BpTree<u64, u64, L> {
    fn insert(&mut self, k: u64, v: u64) {
        BpTree::insert(self, k, v);
    }
    fn get(&self, k: u64) -> u64 {
        BpTree::get(self, &k).copied().unwrap_or(0)
    }
    fn scan(&mut self, start: u64, len: usize) -> u64 {
        let mut s = 0u64;
        self.iterate_range(Bound::Included(&start), len, |_, v| s = s.wrapping_add(*v));
        s
    }
    fn map(&self, start: u64, end: u64) -> u64 {
        let mut s = 0u64;
        self.map_range(start..end, |_, v| s = s.wrapping_add(*v));
        s
    }
}

impl Single for BTreeMap<u64, u64> {
    fn insert(&mut self, k: u64, v: u64) {
        BTreeMap::insert(self, k, v);
    }
    fn get(&self, k: u64) -> u64 {
        BTreeMap::get(self, &k).copied().unwrap_or(0)
    }
    fn scan(&mut self, start: u64, len: usize) -> u64 {
        self.range(start..).take(len).fold(0u64, |s, (_, v)| s.wrapping_add(*v))
    }
    fn map(&self, start: u64, end: u64) -> u64 {
        self.range(start..end).fold(0u64, |s, (_, v)| s.wrapping_add(*v))
    }
}

impl Single for SkipMap<u64, u64> {
    fn insert(&mut self, k: u64, v: u64) {
        SkipMap::insert(self, k, v);
    }
    fn get(&self, k: u64) -> u64 {
        SkipMap::get(self, &k).map_or(0, |e| *e.value())
    }
    fn scan(&mut self, start: u64, len: usize) -> u64 {
        self.range(start..).take(len).fold(0u64, |s, e| s.wrapping_add(*e.value()))
    }
    fn map(&self, start: u64, end: u64) -> u64 {
        self.range(start..end).fold(0u64, |s, e| s.wrapping_add(*e.value()))
    }
}

/// The multi-threaded interface.
trait Shared: Sync {
    fn insert(&self, k: u64, v: u64);
    fn get(&self, k: u64) -> u64;
    fn scan(&self, start: u64, len: usize) -> u64;
    fn map(&self, start: u64, end: u64) -> u64;
}

impl<L: bptree::Leaf<u64, u64> + Send + Sync> Shared for ConcurrentBpTree<u64, u64, L> {
    fn insert(&self, k: u64, v: u64) {
        ConcurrentBpTree::insert(self, k, v);
    }
    fn get(&self, k: u64) -> u64 {
        self.get_with(&k, |v| *v).unwrap_or(0)
    }
    fn scan(&self, start: u64, len: usize) -> u64 {
        let mut s = 0u64;
        self.iterate_range(Bound::Included(&start), len, |_, v| s = s.wrapping_add(*v));
        s
    }
    fn map(&self, start: u64, end: u64) -> u64 {
        let mut s = 0u64;
        self.map_range(start..end, |_, v| s = s.wrapping_add(*v));
        s
    }
}

impl Shared for RwLock<BTreeMap<u64, u64>> {
    fn insert(&self, k: u64, v: u64) {
        if let Ok(mut m) = self.write() {
            m.insert(k, v);
        }
    }
    fn get(&self, k: u64) -> u64 {
        self.read().map_or(0, |m| m.get(&k).copied().unwrap_or(0))
    }
    fn scan(&self, start: u64, len: usize) -> u64 {
        self.read().map_or(0, |m| m.range(start..).take(len).fold(0u64, |s, (_, v)| s.wrapping_add(*v)))
    }
    fn map(&self, start: u64, end: u64) -> u64 {
        self.read().map_or(0, |m| m.range(start..end).fold(0u64, |s, (_, v)| s.wrapping_add(*v)))
    }
}

impl Shared for SkipMap<u64, u64> {
    fn insert(&self, k: u64, v: u64) {
        SkipMap::insert(self, k, v);
    }
    fn get(&self, k: u64) -> u64 {
        SkipMap::get(self, &k).map_or(0, |e| *e.value())
    }
    fn scan(&self, start: u64, len: usize) -> u64 {
        self.range(start..).take(len).fold(0u64, |s, e| s.wrapping_add(*e.value()))
    }
    fn map(&self, start: u64, end: u64) -> u64 {
        self.range(start..end).fold(0u64, |s, e| s.wrapping_add(*e.value()))
    }
}

fn random_keys(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random::<u64>()).collect()
}

fn row(report: &mut Report, workload: &str, system: &str, st: &Stats, elements: Option<u64>) {
    let mut m = st.metrics();
    if let Some(e) = elements {
        m.push(("elements_per_sec", e as f64 / st.elapsed.as_secs_f64().max(1e-9)));
    }
    report.row(workload, system, m);
}

/// Runs the §6.1 microbenchmarks on one single-threaded system.
fn micro_one<S: Single>(name: &str, make: impl FnMut() -> S, p: &Params, report: &mut Report, ctx: &Ctx) {
    micro_rows("", name, make, p, report, ctx);
}

/// The §6.1 microbenchmarks of one system, reported under workload names `{prefix}insert`, `{prefix}find`, ...
fn micro_rows<S: Single>(
    prefix: &str,
    name: &str,
    mut make: impl FnMut() -> S,
    p: &Params,
    report: &mut Report,
    ctx: &Ctx,
) {
    let wl = |w: &str| format!("{prefix}{w}");
    let bar = ctx.progress(9, format!("micro {name}"));
    let load = random_keys(p.n, p.seed);
    let more = random_keys(p.n, p.seed ^ 0xabcd);
    let mut t = make();
    for &k in &load {
        t.insert(k, k);
    }
    let st = time_ops_sampled(more.len() as u64, 16, |i| {
        let k = more[i as usize];
        t.insert(k, k);
    });
    row(report, &wl("insert"), name, &st, None);
    bar.inc(1);
    let mut sorted: Vec<u64> = load.iter().chain(more.iter()).copied().collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut rng = SmallRng::seed_from_u64(p.seed ^ 7);
    let finds: Vec<u64> = (0..p.ops).map(|_| sorted[rng.random_range(0..sorted.len())]).collect();
    let st = time_ops_sampled(finds.len() as u64, 16, |i| {
        black_box(t.get(finds[i as usize]));
    });
    row(report, &wl("find"), name, &st, None);
    bar.inc(1);
    for (max_len, count) in
        [(100usize, p.scans), (10_000, p.long_scans), (100_000, (p.long_scans / 10).max(20))]
    {
        let qs: Vec<(u64, usize, u64)> = (0..count)
            .map(|_| {
                let i = rng.random_range(0..sorted.len());
                let len = rng.random_range(0..=max_len);
                let end = sorted.get(i + len).copied().unwrap_or(u64::MAX);
                (sorted[i], len, end)
            })
            .collect();
        let elements: u64 = qs.iter().map(|q| q.1 as u64).sum();
        let st = time_ops_sampled(qs.len() as u64, 1, |i| {
            let (s, len, _) = qs[i as usize];
            black_box(t.scan(s, len));
        });
        row(report, &wl(&format!("iterate-max{max_len}")), name, &st, Some(elements));
        let st = time_ops_sampled(qs.len() as u64, 1, |i| {
            let (s, _, e) = qs[i as usize];
            black_box(t.map(s, e));
        });
        row(report, &wl(&format!("map-max{max_len}")), name, &st, Some(elements));
        bar.inc(2);
    }
    drop(t);
    // Memory: a fresh tree of 2n random entries, counted by the allocator.
    let (t, bytes) = alloc::measure(|| {
        let mut t = make();
        for &k in load.iter().chain(more.iter()) {
            t.insert(k, k);
        }
        t
    });
    if alloc::installed() {
        report.row(&wl("memory"), name, [("memory_bytes_per_entry", bytes as f64 / sorted.len() as f64)]);
    }
    drop(t);
    let mut t = make();
    let st = time_ops_sampled(p.n as u64, 16, |i| t.insert(i, i));
    row(report, &wl("seq-insert"), name, &st, None);
    bar.finish_and_clear();
}

fn micro(ctx: &Ctx, p: &Params, report: &mut Report) {
    report.workload(
        "micro",
        json!({"n_loaded": p.n, "n_inserted": p.n, "finds": p.ops, "short_scans": p.scans,
               "long_scans": p.long_scans, "key_bytes": 8, "value_bytes": 8, "threads": 1}),
    );
    micro_one("bptree", BpTree::<u64, u64>::new, p, report, ctx);
    micro_one(
        "btree-sorted-leaves",
        || BpTree::<u64, u64, SortedLeaf<u64, u64>>::with_options(sorted_1k()).unwrap_or_default(),
        p,
        report,
        ctx,
    );
    micro_one("btreemap", BTreeMap::<u64, u64>::new, p, report, ctx);
    micro_one("crossbeam-skipmap", SkipMap::<u64, u64>::new, p, report, ctx);
}

/// The §6.1 microbenchmarks as the leaf grows, for both leaf kinds (paper Tables 1 and 2, Figures 5-7): the
/// paper's nine BP-tree configurations (log = header = `h` slots, `h` blocks of `b` slots: 384 to 67,584 bytes
/// with 16-byte entries) and sorted-array leaves of 256 B to 64 KiB, all with 1 KiB internal nodes (the paper found
/// the internal size does not matter). Rows `sweep-<workload>` with systems `bptree-h<h>b<b>` and
/// `btree-sorted-leaves-<bytes>B`; the default configurations are `bptree-h32b32` and `btree-sorted-leaves-1024B`.
fn leaf_sweep(ctx: &Ctx, p: &Params, report: &mut Report) {
    report.workload(
        "sweep",
        json!({"n_loaded": p.n, "n_inserted": p.n, "finds": p.ops, "short_scans": p.scans,
               "long_scans": p.long_scans, "key_bytes": 8, "value_bytes": 8, "threads": 1,
               "bptree_configs": "h,b in (4,4) (4,8) (8,8) (8,16) (16,16) (16,32) (32,32) (32,64) (64,64)",
               "sorted_leaf_bytes": "256..=65536, powers of 2"}),
    );
    for (h, b) in [(4, 4), (4, 8), (8, 8), (8, 16), (16, 16), (16, 32), (32, 32), (32, 64), (64, 64)] {
        let opts = Options { log_size: h, num_blocks: h, block_size: b, ..Options::default() };
        let name = format!("bptree-h{h}b{b}");
        micro_rows(
            "sweep-",
            &name,
            || BpTree::<u64, u64>::with_options(opts).unwrap_or_default(),
            p,
            report,
            ctx,
        );
    }
    for shift in 8..=16 {
        let bytes = 1usize << shift;
        // One block holding every slot but the 2-slot log and the 1-slot header: a plain sorted array.
        let opts = Options { log_size: 2, num_blocks: 1, block_size: bytes / 16 - 3, ..Options::default() };
        let name = format!("btree-sorted-leaves-{bytes}B");
        micro_rows(
            "sweep-",
            &name,
            || BpTree::<u64, u64, SortedLeaf<u64, u64>>::with_options(opts).unwrap_or_default(),
            p,
            report,
            ctx,
        );
    }
}

#[derive(Clone, Copy)]
enum Op {
    Get(u64),
    Update(u64),
    Insert(u64),
    Scan(u64, usize),
    Map(u64, usize),
}

/// The run-phase operations of one YCSB workload.
fn ycsb_ops(w: char, zipf: bool, keys: &[u64], count: usize, seed: u64) -> Vec<Op> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let dist = if zipf { Distribution::ScrambledZipfian { theta: 0.99 } } else { Distribution::Uniform };
    // `keys` is never empty here (n >= 1 is validated), so the sampler always builds.
    let mut sampler = KeySampler::new(dist, keys.len().max(1) as u64, seed ^ 0x9c5b).ok();
    let mut pick = |rng: &mut SmallRng| match sampler.as_mut() {
        Some(s) => keys[s.next_key() as usize % keys.len()],
        None => keys[rng.random_range(0..keys.len())],
    };
    (0..count)
        .map(|_| {
            let r: f64 = rng.random();
            match w {
                'a' if r < 0.5 => Op::Get(pick(&mut rng)),
                'a' => Op::Update(pick(&mut rng)),
                'b' if r < 0.95 => Op::Get(pick(&mut rng)),
                'b' => Op::Update(pick(&mut rng)),
                'c' => Op::Get(pick(&mut rng)),
                'e' if r < 0.95 => Op::Scan(pick(&mut rng), rng.random_range(0..=100)),
                'e' => Op::Insert(rng.random()),
                'x' => Op::Scan(pick(&mut rng), rng.random_range(0..=10_000)),
                _ => Op::Map(pick(&mut rng), rng.random_range(0..=10_000)),
            }
        })
        .collect()
}

fn ycsb(ctx: &Ctx, p: &Params, threads: usize, report: &mut Report) {
    let keys = random_keys(p.n, p.seed ^ 0x5c5b);
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    let end_of = |s: u64, len: usize| {
        let i = sorted.partition_point(|k| *k < s);
        sorted.get(i + len).copied().unwrap_or(u64::MAX)
    };
    let workloads = ['a', 'b', 'c', 'e', 'x', 'y'];
    let bar = ctx.progress((workloads.len() * 2 * 4) as u64, format!("ycsb t={threads}"));
    for zipf in [false, true] {
        let dist = if zipf { "zipfian" } else { "uniform" };
        for w in workloads {
            let count = match w {
                'x' | 'y' => p.long_scans,
                'e' => p.scans,
                _ => p.ops,
            };
            let ops = ycsb_ops(w, zipf, &keys, count, p.seed ^ u64::from(w as u8));
            // Maps get the end key of the same-length iteration, precomputed so no system pays for it.
            let ends: Vec<u64> =
                ops.iter().map(|o| if let Op::Map(s, l) = o { end_of(*s, *l) } else { 0 }).collect();
            let name = format!("ycsb-{w}-{dist}-t{threads}");
            report.workload(
                &name,
                json!({"workload": w.to_string(), "distribution": dist, "threads": threads, "loaded": p.n,
                       "ops": count, "theta": if zipf { 0.99 } else { 0.0 }}),
            );
            if threads == 1 {
                ycsb_single("bptree", BpTree::<u64, u64>::new(), &keys, &ops, &ends, &name, report);
                ycsb_single(
                    "btree-sorted-leaves",
                    BpTree::<u64, u64, SortedLeaf<u64, u64>>::with_options(sorted_1k()).unwrap_or_default(),
                    &keys,
                    &ops,
                    &ends,
                    &name,
                    report,
                );
                ycsb_single("btreemap", BTreeMap::new(), &keys, &ops, &ends, &name, report);
                ycsb_single("crossbeam-skipmap", SkipMap::new(), &keys, &ops, &ends, &name, report);
            } else {
                let run = |sys: &dyn Shared, sysname: &str, report: &mut Report| {
                    load_shared(sys, &keys, threads);
                    let per = ops.len() / threads;
                    let st = time_ops_parallel(threads, per as u64, |t, i| {
                        let j = t * per + i as usize;
                        apply_shared(sys, ops[j], ends[j]);
                    });
                    let elements = elements_of(&ops[..per * threads]);
                    row(report, &name, sysname, &st, elements);
                };
                run(&ConcurrentBpTree::<u64, u64>::new(), "bptree", report);
                bar.inc(1);
                run(
                    &ConcurrentBpTree::<u64, u64, SortedLeaf<u64, u64>>::with_options(sorted_1k())
                        .unwrap_or_default(),
                    "btree-sorted-leaves",
                    report,
                );
                run(&RwLock::new(BTreeMap::new()), "btreemap", report);
                run(&SkipMap::new(), "crossbeam-skipmap", report);
            }
            bar.inc(4);
        }
    }
    bar.finish_and_clear();
}

fn elements_of(ops: &[Op]) -> Option<u64> {
    let e: u64 = ops.iter().map(|o| if let Op::Scan(_, l) | Op::Map(_, l) = o { *l as u64 } else { 0 }).sum();
    (e > 0).then_some(e)
}

fn load_shared(sys: &dyn Shared, keys: &[u64], threads: usize) {
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for k in keys.iter().skip(t).step_by(threads) {
                    sys.insert(*k, *k);
                }
            });
        }
    });
}

fn apply_shared(sys: &dyn Shared, op: Op, end: u64) {
    match op {
        Op::Get(k) => {
            black_box(sys.get(k));
        }
        Op::Update(k) | Op::Insert(k) => sys.insert(k, k ^ 1),
        Op::Scan(s, l) => {
            black_box(sys.scan(s, l));
        }
        Op::Map(s, _) => {
            black_box(sys.map(s, end));
        }
    }
}

fn ycsb_single<S: Single>(
    sysname: &str,
    mut sys: S,
    keys: &[u64],
    ops: &[Op],
    ends: &[u64],
    name: &str,
    report: &mut Report,
) {
    for &k in keys {
        sys.insert(k, k);
    }
    let every = if matches!(ops.first(), Some(Op::Scan(..) | Op::Map(..))) { 1 } else { 16 };
    let st = time_ops_sampled(ops.len() as u64, every, |i| match ops[i as usize] {
        Op::Get(k) => {
            black_box(sys.get(k));
        }
        Op::Update(k) | Op::Insert(k) => sys.insert(k, k ^ 1),
        Op::Scan(s, l) => {
            black_box(sys.scan(s, l));
        }
        Op::Map(s, _) => {
            black_box(sys.map(s, ends[i as usize]));
        }
    });
    row(report, name, sysname, &st, elements_of(ops));
}

/// The memtable case: 16-64-byte random keys, 8-byte values, one thread.
fn strings(ctx: &Ctx, p: &Params, report: &mut Report) {
    let n = p.n / 2;
    let mut rng = SmallRng::seed_from_u64(p.seed ^ 0x5747);
    let keys: Vec<Vec<u8>> = (0..n)
        .map(|_| {
            let len = rng.random_range(16..=64);
            (0..len).map(|_| rng.random::<u8>()).collect()
        })
        .collect();
    let finds: Vec<usize> = (0..p.ops / 2).map(|_| rng.random_range(0..n)).collect();
    let scans: Vec<(usize, usize)> =
        (0..p.scans).map(|_| (rng.random_range(0..n), rng.random_range(0..=100))).collect();
    let long: Vec<(usize, usize)> =
        (0..p.long_scans).map(|_| (rng.random_range(0..n), rng.random_range(0..=10_000))).collect();
    report.workload(
        "strings",
        json!({"n": n, "key_bytes": "16..=64 uniform", "value_bytes": 8, "finds": finds.len(),
               "short_scans": scans.len(), "long_scans": long.len(), "threads": 1}),
    );
    let bar = ctx.progress(3, "string keys");
    let elems = |q: &[(usize, usize)]| Some(q.iter().map(|x| x.1 as u64).sum());

    // bptree with ByteKey.
    let mut t: BpTree<ByteKey, u64> = BpTree::new();
    let (bytes, st) = measured(|| {
        time_ops_sampled(n as u64, 16, |i| {
            t.insert(ByteKey::new(&keys[i as usize]), i);
        })
    });
    row(report, "str-insert", "bptree", &st, None);
    mem_row(report, "str-memory", "bptree", bytes, n);
    let st = time_ops_sampled(finds.len() as u64, 16, |i| {
        // A probe compares by its integer prefix first, like the stored keys, and allocates nothing.
        black_box(t.get(&ByteKey::probe(&keys[finds[i as usize]])));
    });
    row(report, "str-find", "bptree", &st, None);
    for (wl, qs) in [("str-iterate-max100", &scans), ("str-iterate-max10000", &long)] {
        let st = time_ops_sampled(qs.len() as u64, 1, |i| {
            let (k, len) = qs[i as usize];
            let mut s = 0u64;
            let probe = ByteKey::new(&keys[k]);
            t.iterate_range(Bound::Included(&probe), len, |_, v| s = s.wrapping_add(*v));
            black_box(s);
        });
        row(report, wl, "bptree", &st, elems(qs));
    }
    drop(t);
    bar.inc(1);

    let mut m: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    let (bytes, st) = measured(|| {
        time_ops_sampled(n as u64, 16, |i| {
            m.insert(keys[i as usize].clone(), i);
        })
    });
    row(report, "str-insert", "btreemap", &st, None);
    mem_row(report, "str-memory", "btreemap", bytes, n);
    let st = time_ops_sampled(finds.len() as u64, 16, |i| {
        black_box(m.get(&keys[finds[i as usize]][..]));
    });
    row(report, "str-find", "btreemap", &st, None);
    for (wl, qs) in [("str-iterate-max100", &scans), ("str-iterate-max10000", &long)] {
        let st = time_ops_sampled(qs.len() as u64, 1, |i| {
            let (k, len) = qs[i as usize];
            let s = m
                .range::<[u8], _>((Bound::Included(&keys[k][..]), Bound::Unbounded))
                .take(len)
                .fold(0u64, |s, (_, v)| s.wrapping_add(*v));
            black_box(s);
        });
        row(report, wl, "btreemap", &st, elems(qs));
    }
    drop(m);
    bar.inc(1);

    let sm: SkipMap<Vec<u8>, u64> = SkipMap::new();
    let (bytes, st) = measured(|| {
        time_ops_sampled(n as u64, 16, |i| {
            sm.insert(keys[i as usize].clone(), i);
        })
    });
    row(report, "str-insert", "crossbeam-skipmap", &st, None);
    mem_row(report, "str-memory", "crossbeam-skipmap", bytes, n);
    let st = time_ops_sampled(finds.len() as u64, 16, |i| {
        black_box(sm.get(&keys[finds[i as usize]][..]).map(|e| *e.value()));
    });
    row(report, "str-find", "crossbeam-skipmap", &st, None);
    for (wl, qs) in [("str-iterate-max100", &scans), ("str-iterate-max10000", &long)] {
        let st = time_ops_sampled(qs.len() as u64, 1, |i| {
            let (k, len) = qs[i as usize];
            let s = sm
                .range::<[u8], _>((Bound::Included(&keys[k][..]), Bound::Unbounded))
                .take(len)
                .fold(0u64, |s, e| s.wrapping_add(*e.value()));
            black_box(s);
        });
        row(report, wl, "crossbeam-skipmap", &st, elems(qs));
    }
    bar.finish_and_clear();
}

fn measured<T>(f: impl FnOnce() -> T) -> (usize, T) {
    let (t, bytes) = alloc::measure(f);
    (bytes, t)
}

fn mem_row(report: &mut Report, workload: &str, system: &str, bytes: usize, n: usize) {
    if alloc::installed() {
        report.row(workload, system, [("memory_bytes_per_entry", bytes as f64 / n as f64)]);
    }
}
