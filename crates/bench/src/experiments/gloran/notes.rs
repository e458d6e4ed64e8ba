//! What `gloran` reports beside its rows: `lsm-gloran`'s speedups over every peer, the targets with the
//! measured values, and with `--set reps` the targets' ratios per turn.

use super::SYSTEMS;
use crate::Report;
use crate::turns::{Run, metric, per_turn, show};

/// With `--set reps` > 1: the targets' ratios per turn (the systems of one turn ran back to back).
pub(super) fn turn_notes(report: &mut Report, systems: &[&str], runs: &[Vec<Vec<(String, Run)>>]) {
    let turns = |name: &str, w: &str| -> Vec<Run> {
        let Some(s) = systems.iter().position(|&x| x == name) else { return Vec::new() };
        runs[s].iter().filter_map(|t| t.iter().find(|(x, _)| x == w).map(|(_, r)| r.clone())).collect()
    };
    let ratio = |m: &'static str, flip: bool| {
        move |a: &Run, b: &Run| {
            let (x, y) = (metric(a, m)?, metric(b, m)?);
            Some(if flip { y / x } else { x / y })
        }
    };
    let ours = "lsm-gloran";
    let w = "balanced-rd10";
    for peer in ["lsm-local", "rocksdb"] {
        let (a, b) = (turns(ours, w), turns(peer, w));
        if a.is_empty() || b.is_empty() {
            continue;
        }
        report.note(format!(
            "per turn, {w}: {ours} / {peer} throughput {}; lookup speedup {}",
            show(&per_turn(&a, &b, ratio("ops_per_sec", false)), 3),
            show(&per_turn(&a, &b, ratio("get_mean_ns", true)), 3)
        ));
    }
    let (one, none) = (turns(ours, "balanced-rd1"), turns(ours, "balanced-rd0"));
    if !one.is_empty() {
        let change =
            |a: &Run, b: &Run| Some(100.0 * (metric(a, "get_mean_ns")? / metric(b, "get_mean_ns")? - 1.0));
        report.note(format!(
            "per turn, {ours} lookup latency with 1% range deletes against 0% (mean, %): {}",
            show(&per_turn(&one, &none, change), 1)
        ));
    }
}

/// `lsm-gloran` against every other system: throughput and lookup-latency speedups per workload, and the issue's
/// targets as notes.
pub(super) fn add_speedups(report: &mut Report, mixes: &[(String, f64, f64, u64, bool, u64)], fresh: bool) {
    let ours = "lsm-gloran";
    for (w, ..) in mixes {
        for peer in SYSTEMS.iter().skip(1) {
            let (Some(a), Some(b)) = (report.get(w, ours, "ops_per_sec"), report.get(w, peer, "ops_per_sec"))
            else {
                continue;
            };
            let mut m = vec![("throughput_speedup", a / b.max(1e-9))];
            if let (Some(x), Some(y)) =
                (report.get(w, ours, "get_mean_ns"), report.get(w, peer, "get_mean_ns"))
            {
                m.push(("get_latency_speedup", y / x.max(1e-9)));
            }
            report.row(w, &format!("{ours}-vs-{peer}"), m);
        }
    }
    let get = |r: &Report, w: &str, s: &str, m: &str| r.get(w, s, m).unwrap_or(f64::NAN);
    let w = "balanced-rd10";
    let lines = [
        format!(
            "target: balanced 10% range deletes, lsm-gloran throughput >= 2x lsm-local: {:.2}x",
            get(report, w, ours, "ops_per_sec") / get(report, w, "lsm-local", "ops_per_sec")
        ),
        format!(
            "target: balanced 10% range deletes, lsm-gloran throughput >= 2x rocksdb: {:.2}x",
            get(report, w, ours, "ops_per_sec") / get(report, w, "rocksdb", "ops_per_sec")
        ),
        format!(
            "target: balanced 10% range deletes, lsm-gloran point lookups >= 3x faster than lsm-local (mean): {:.2}x",
            get(report, w, "lsm-local", "get_mean_ns") / get(report, w, ours, "get_mean_ns")
        ),
        format!(
            "target: lsm-gloran lookup latency with 1% range deletes within 5% of 0%: mean {:+.1}%, p50 {:+.1}%",
            100.0
                * (get(report, "balanced-rd1", ours, "get_mean_ns")
                    / get(report, "balanced-rd0", ours, "get_mean_ns")
                    - 1.0),
            100.0
                * (get(report, "balanced-rd1", ours, "get_p50_ns")
                    / get(report, "balanced-rd0", ours, "get_p50_ns")
                    - 1.0)
        ),
        format!(
            "for comparison, lsm-local lookup latency 1% vs 0% range deletes: mean {:+.1}%",
            100.0
                * (get(report, "balanced-rd1", "lsm-local", "get_mean_ns")
                    / get(report, "balanced-rd0", "lsm-local", "get_mean_ns")
                    - 1.0)
        ),
    ];
    // A target whose systems did not run (`--set systems`) is left out rather than noted as NaN.
    for l in lines.into_iter().filter(|l| !l.contains("NaN")) {
        report.note(l);
    }
    report.note(if fresh {
        "each workload ran on an empty store (the paper's setup), drawing keys from the key space `keys`; \
         range-delete shares are of all operations, taken from updates"
    } else {
        "workloads run in sequence on one store per system (the same operation sequence for all), so later \
         workloads see the deletes of earlier ones; range-delete shares are of all operations, taken from updates"
    });
}
