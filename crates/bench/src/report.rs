//! Results: rows of metrics, the ratio table, JSON per the bench-json spec, and the markdown report.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use serde_json::{Value, json};

use crate::plot::Plot;

/// Our systems' stable names; everything else in a report is a peer. A name counts as ours if it equals one of
/// these or extends one with `-` (e.g. `rask-btree-internal`, an ablation of ours).
pub const OUR_SYSTEMS: &[&str] = &[
    "rask",
    "bptree",
    "flexfile",
    "flextree",
    "flexdb",
    "lsm-local",
    "lsm-gloran",
    "lsm-rangereduce",
    "lsm",
    "blockstore",
    "nbd",
];

/// Whether `system` is one of ours (or an ablation of one of ours).
pub fn is_ours(system: &str) -> bool {
    OUR_SYSTEMS
        .iter()
        .any(|o| system == *o || system.strip_prefix(o).is_some_and(|rest| rest.starts_with('-')))
}

/// Which way a metric is better, judged from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Throughputs (`*_per_sec`).
    HigherIsBetter,
    /// Latencies, bytes, amplification, counts of work.
    LowerIsBetter,
}

impl Direction {
    /// The direction of a metric by its name's unit suffix.
    pub fn of(metric: &str) -> Self {
        if metric.ends_with("_per_sec") || metric.ends_with("_speedup") || metric.ends_with("_hit_ratio") {
            Direction::HigherIsBetter
        } else {
            Direction::LowerIsBetter
        }
    }
}

/// The machine a report was measured on.
#[derive(Debug, Clone, Serialize)]
pub struct MachineInfo {
    /// Logical cores available to the process.
    pub cores: usize,
    /// Physical memory.
    pub memory_bytes: u64,
    /// The compiler that built the binary.
    pub rustc: String,
}

impl MachineInfo {
    /// Reads the current machine.
    pub fn current() -> Self {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let memory_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
            .map_or(0, |kb| kb * 1024);
        MachineInfo { cores, memory_bytes, rustc: env!("RANGEDB_RUSTC_VERSION").to_string() }
    }
}

/// One (workload, system) measurement.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The workload's name; its parameters are in [`Report::workloads`].
    pub workload: String,
    /// The system's stable name.
    pub system: String,
    /// Metric name (with its unit) to value.
    pub metrics: BTreeMap<String, f64>,
}

/// What an experiment measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// The experiment's name.
    pub experiment: String,
    /// Whether it ran with `--quick`.
    pub quick: bool,
    /// Where it ran.
    pub machine: MachineInfo,
    /// The measurements, in the order taken.
    pub results: Vec<Row>,
    /// Each workload's parameters.
    pub workloads: BTreeMap<String, Value>,
    /// Plots for the markdown report.
    pub plots: Vec<Plot>,
    /// Lines of context for readers (configurations compared, caveats).
    pub notes: Vec<String>,
}

impl Report {
    /// An empty report.
    pub fn new(experiment: &str, quick: bool) -> Self {
        Report {
            experiment: experiment.to_string(),
            quick,
            machine: MachineInfo::current(),
            results: Vec::new(),
            workloads: BTreeMap::new(),
            plots: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Records a workload's parameters.
    pub fn workload(&mut self, name: &str, params: Value) -> &mut Self {
        self.workloads.insert(name.to_string(), params);
        self
    }

    /// Adds (or extends) the row of `system` on `workload` with `metrics`.
    pub fn row<'a>(
        &mut self,
        workload: &str,
        system: &str,
        metrics: impl IntoIterator<Item = (&'a str, f64)>,
    ) -> &mut Self {
        let idx = match self.results.iter().position(|r| r.workload == workload && r.system == system) {
            Some(i) => i,
            None => {
                self.results.push(Row {
                    workload: workload.to_string(),
                    system: system.to_string(),
                    metrics: BTreeMap::new(),
                });
                self.results.len() - 1
            }
        };
        let row = &mut self.results[idx];
        for (k, v) in metrics {
            row.metrics.insert(k.to_string(), v);
        }
        self
    }

    /// Adds a plot.
    pub fn plot(&mut self, plot: Plot) -> &mut Self {
        self.plots.push(plot);
        self
    }

    /// Adds a note.
    pub fn note(&mut self, line: impl Into<String>) -> &mut Self {
        self.notes.push(line.into());
        self
    }

    /// The value of `metric` for `system` on `workload`.
    pub fn get(&self, workload: &str, system: &str, metric: &str) -> Option<f64> {
        self.results
            .iter()
            .find(|r| r.workload == workload && r.system == system)
            .and_then(|r| r.metrics.get(metric).copied())
    }

    /// Ratios of each of our systems to each peer on each shared metric of each workload:
    /// (workload, ours, peer, metric, ours / peer).
    pub fn ratios(&self) -> Vec<(String, String, String, String, f64)> {
        let mut out = Vec::new();
        for ours in self.results.iter().filter(|r| is_ours(&r.system)) {
            for peer in self.results.iter().filter(|r| r.workload == ours.workload && !is_ours(&r.system)) {
                for (m, &a) in &ours.metrics {
                    if let Some(&b) = peer.metrics.get(m)
                        && b != 0.0
                        && a.is_finite()
                        && b.is_finite()
                    {
                        out.push((
                            ours.workload.clone(),
                            ours.system.clone(),
                            peer.system.clone(),
                            m.clone(),
                            a / b,
                        ));
                    }
                }
            }
        }
        out
    }

    /// The JSON object of the bench-json spec, plus `ratios` and `notes`.
    pub fn to_json(&self) -> Value {
        let ratios: Vec<Value> = self
            .ratios()
            .into_iter()
            .map(|(w, o, p, m, r)| json!({"workload": w, "system": o, "peer": p, "metric": m, "ratio": r}))
            .collect();
        json!({
            "experiment": self.experiment,
            "quick": self.quick,
            "machine": self.machine,
            "results": self.results,
            "workloads": self.workloads,
            "ratios": ratios,
            "notes": self.notes,
        })
    }

    /// The human-readable table: every row's metrics, then ours against each peer with the better direction
    /// marked. Plain text, also used inside the markdown report.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "== {} ({}) ==", self.experiment, if self.quick { "quick" } else { "full" });
        let mut workloads: Vec<&str> = Vec::new();
        for r in &self.results {
            if !workloads.contains(&r.workload.as_str()) {
                workloads.push(&r.workload);
            }
        }
        for w in workloads {
            let rows: Vec<&Row> = self.results.iter().filter(|r| r.workload == w).collect();
            let mut metrics: Vec<&String> = rows.iter().flat_map(|r| r.metrics.keys()).collect();
            metrics.sort();
            metrics.dedup();
            let _ = writeln!(s, "\n-- workload {w}");
            let _ = write!(s, "{:<24}", "system");
            for m in &metrics {
                let _ = write!(s, " {:>16}", m);
            }
            let _ = writeln!(s);
            for r in &rows {
                let _ = write!(s, "{:<24}", r.system);
                for m in &metrics {
                    match r.metrics.get(*m) {
                        Some(v) => {
                            let _ = write!(s, " {:>16}", fmt_num(*v));
                        }
                        None => {
                            let _ = write!(s, " {:>16}", "-");
                        }
                    }
                }
                let _ = writeln!(s);
            }
            for (_, ours, peer, m, ratio) in self.ratios().into_iter().filter(|r| r.0 == w) {
                let better = match Direction::of(&m) {
                    Direction::HigherIsBetter => ratio >= 1.0,
                    Direction::LowerIsBetter => ratio <= 1.0,
                };
                let _ = writeln!(
                    s,
                    "   {ours} / {peer}: {m} = {ratio:.3}x ({})",
                    if better { "ours better or equal" } else { "peer better" }
                );
            }
        }
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        s
    }

    /// Writes `DIR/<experiment>.md` with the table and `DIR/<experiment>-N.png` plots.
    pub fn write_markdown(&self, dir: &Path) -> crate::Result<()> {
        std::fs::create_dir_all(dir)?;
        let mut md = String::new();
        let _ = writeln!(
            md,
            "# `rangedb bench {}`{}\n",
            self.experiment,
            if self.quick { " --quick" } else { "" }
        );
        let _ = writeln!(
            md,
            "Machine: {} cores, {} GiB, rustc {}.\n",
            self.machine.cores,
            self.machine.memory_bytes >> 30,
            self.machine.rustc
        );
        let _ = writeln!(md, "```\n{}```\n", self.table());
        for (i, p) in self.plots.iter().enumerate() {
            let name = format!("{}-{}.png", self.experiment, i + 1);
            p.render(&dir.join(&name))?;
            let _ = writeln!(md, "## {}\n\n![{}]({})\n", p.title, p.title, name);
        }
        if !self.workloads.is_empty() {
            let _ = writeln!(
                md,
                "## Workloads\n\n```json\n{}\n```",
                serde_json::to_string_pretty(&self.workloads)?
            );
        }
        std::fs::write(dir.join(format!("{}.md", self.experiment)), md)?;
        Ok(())
    }
}

fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e9 {
        format!("{:.3}e9", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.3}e6", v / 1e6)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ours_and_peers_are_told_apart() {
        assert!(is_ours("rask") && is_ours("rask-btree-internal") && is_ours("lsm-gloran"));
        assert!(!is_ours("rangemap") && !is_ours("btreemap-per-block") && !is_ours("raskx"));
    }

    #[test]
    fn ratios_pair_ours_with_each_peer() {
        let mut r = Report::new("t", true);
        r.row("w", "rask", [("ops_per_sec", 300.0), ("memory_bytes", 10.0)]);
        r.row("w", "btreemap-per-block", [("ops_per_sec", 100.0), ("memory_bytes", 100.0)]);
        r.row("w", "rangemap", [("ops_per_sec", 150.0)]);
        let ratios = r.ratios();
        assert_eq!(ratios.len(), 3);
        assert!(ratios.iter().any(|x| x.2 == "rangemap" && x.3 == "ops_per_sec" && (x.4 - 2.0).abs() < 1e-9));
        assert!(
            r.table().contains("rask / btreemap-per-block: memory_bytes = 0.100x (ours better or equal)")
        );
    }
}
