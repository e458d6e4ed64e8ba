//! `rangedb bench flextree`: Table 1 of the FlexFile paper: append, lookup and insert-at-head of N extents in
//! FlexTree (system `flexfile`, the crate's in-memory extent index) against a B+-tree that stores absolute offsets
//! (`btreemap`: std's B-tree keyed by offset, where a shift must rewrite every later key) and a sorted `Vec`
//! (`sorted-vec`: binary search; a shift moves and rewrites every later entry).
//!
//! - append-N: N extents appended one by one to an empty index.
//! - lookup-N: a full search for every extent's offset, in order, on the index built by append.
//! - insert-head-N: inserting extents at offset 0 of an index holding N extents. FlexTree builds the whole index by
//!   head inserts; the peers, whose head insert costs O(N), are measured over `head_sample` inserts at size N
//!   (built by bulk load), as running N of them is quadratic (907 s for the paper's sorted array at 10^6).

use std::collections::BTreeMap;
use std::hint::black_box;

use flexfile::flextree::{FlexTree, TreeConfig};
use serde_json::json;

use crate::measure::{Stats, time_ops, time_ops_sampled};
use crate::{Ctx, Experiment, Plot, Report, Result};

/// The `flextree` experiment.
pub struct FlexTreeBench;

const LEN: u64 = 4096;

impl Experiment for FlexTreeBench {
    fn name(&self) -> &'static str {
        "flextree"
    }

    fn settings(&self) -> &'static [&'static str] {
        &["head_sample", "sizes"]
    }

    fn about(&self) -> &'static str {
        "FlexFile Table 1: append, lookup, insert-at-head of N extents; FlexTree vs absolute-offset B-tree and sorted \
         Vec; --set sizes=100000,1000000 head_sample=N"
    }

    fn run(&self, ctx: &Ctx) -> Result<Report> {
        let mut report = Report::new(self.name(), ctx.quick);
        let default_sizes = if ctx.quick { "100000,1000000" } else { "100000,1000000,10000000" };
        let sizes: String = ctx.setting("sizes", default_sizes.to_string())?;
        let sizes: Vec<u64> = sizes
            .split(',')
            .map(|s| s.trim().parse::<u64>().map_err(|e| format!("--set sizes={s}: {e}")))
            .collect::<std::result::Result<_, _>>()?;
        let sample: u64 = ctx.setting_min("head_sample", ctx.scale(500, 2000), 1)?;
        let mut head_points: Vec<(String, Vec<(f64, f64)>)> =
            ["flexfile", "btreemap", "sorted-vec"].iter().map(|s| (s.to_string(), Vec::new())).collect();
        for &n in &sizes {
            append_and_lookup(&mut report, n)?;
            let rates = insert_head(&mut report, n, sample.min(n))?;
            for ((_, pts), r) in head_points.iter_mut().zip(rates) {
                pts.push((n as f64, r));
            }
        }
        let mut plot = Plot::new("Insert at head (Table 1)", "extents in the index", "inserts per second");
        plot.log_x = true;
        plot.log_y = true;
        for (name, pts) in head_points {
            plot = plot.series(&name, pts);
        }
        report.plot(plot);
        report.note("flexfile = FlexTree (leaves of 60 extents, internal nodes of 30); btreemap = std BTreeMap keyed by absolute offset; sorted-vec = Vec of (offset, len, addr).");
        report.note(format!("Peers' insert-head rates are measured over {sample} head inserts at size N; FlexTree's over all N."));
        Ok(report)
    }
}

fn row(report: &mut Report, workload: &str, system: &str, st: &Stats) {
    report.row(workload, system, st.metrics());
}

fn tree() -> Result<FlexTree> {
    Ok(FlexTree::new(TreeConfig::default())?)
}

fn append_and_lookup(report: &mut Report, n: u64) -> Result<()> {
    let wa = format!("append-{n}");
    let wl = format!("lookup-{n}");
    report.workload(&wa, json!({ "extents": n, "extent_len": LEN }));
    report.workload(&wl, json!({ "extents": n, "extent_len": LEN }));
    let every = (n / 100_000).max(1);

    let mut t = tree()?;
    let mut err = None;
    let st = time_ops_sampled(n, every, |i| {
        if let Err(e) = t.insert(i * LEN, LEN, i * LEN, 0) {
            err = Some(e);
        }
    });
    if let Some(e) = err {
        return Err(e.into());
    }
    row(report, &wa, "flexfile", &st);
    let st = time_ops_sampled(n, every, |i| {
        black_box(t.extent_at(i * LEN).ok());
    });
    row(report, &wl, "flexfile", &st);
    drop(t);

    let mut m: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let st = time_ops_sampled(n, every, |i| {
        m.insert(i * LEN, (LEN, i * LEN));
    });
    row(report, &wa, "btreemap", &st);
    let st = time_ops_sampled(n, every, |i| {
        black_box(m.range(..=i * LEN).next_back());
    });
    row(report, &wl, "btreemap", &st);
    drop(m);

    let mut v: Vec<(u64, u64, u64)> = Vec::new();
    let st = time_ops_sampled(n, every, |i| v.push((i * LEN, LEN, i * LEN)));
    row(report, &wa, "sorted-vec", &st);
    let st = time_ops_sampled(n, every, |i| {
        let x = i * LEN;
        black_box(v.partition_point(|e| e.0 <= x));
    });
    row(report, &wl, "sorted-vec", &st);
    Ok(())
}

/// Returns inserts per second of flexfile, btreemap, sorted-vec.
fn insert_head(report: &mut Report, n: u64, sample: u64) -> Result<[f64; 3]> {
    let w = format!("insert-head-{n}");
    report.workload(&w, json!({ "extents": n, "extent_len": LEN, "peer_sample": sample }));
    let every = (n / 100_000).max(1);
    let mut t = tree()?;
    let mut err = None;
    let st = time_ops_sampled(n, every, |i| {
        if let Err(e) = t.insert(0, LEN, i * LEN, 0) {
            err = Some(e);
        }
    });
    if let Some(e) = err {
        return Err(e.into());
    }
    row(report, &w, "flexfile", &st);
    let flex = st.ops_per_sec();
    drop(t);

    // Absolute offsets: a head insert rewrites the key of every extent after it.
    let mut m: BTreeMap<u64, (u64, u64)> = (0..n - sample).map(|i| (i * LEN, (LEN, i * LEN))).collect();
    let st = time_ops(sample, |i| {
        let old = std::mem::take(&mut m);
        m = old.into_iter().map(|(k, v)| (k + LEN, v)).collect();
        m.insert(0, (LEN, i * LEN));
    });
    row(report, &w, "btreemap", &st);
    let bt = st.ops_per_sec();
    drop(m);

    let mut v: Vec<(u64, u64, u64)> = (0..n - sample).map(|i| (i * LEN, LEN, i * LEN)).collect();
    let st = time_ops(sample, |i| {
        for e in v.iter_mut() {
            e.0 += LEN;
        }
        v.insert(0, (0, LEN, i * LEN));
    });
    row(report, &w, "sorted-vec", &st);
    Ok([flex, bt, st.ops_per_sec()])
}
