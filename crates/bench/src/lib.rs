//! The benchmark harness every RangeDB experiment runs on.
//!
//! An [`Experiment`] runs our system and its named peers on the same generated operations in one process and
//! returns a [`Report`]: one row per (workload, system) with metrics named after their units
//! (`ops_per_sec`, `p99_ns`, `memory_bytes`, ...). The harness prints the rows with the ratio of our system to
//! each peer, writes JSON in the shape of the bench-json spec, and renders a markdown page with PNG plots.
//!
//! Measurements: latency per operation goes into an HDR histogram ([`measure`]); memory is counted by a global
//! allocator ([`alloc`]) that the `rangedb` binary installs, so `memory_bytes` is real heap bytes, not an estimate.
//! Absolute numbers depend on a shared, noisy machine; ratios measured in the same run are what experiments claim.

pub mod alloc;
mod ctx;
pub mod experiments;
pub mod measure;
mod plot;
mod report;
mod turns;

pub use ctx::{Ctx, Fraction};
pub use plot::{Plot, Series};
pub use report::{Direction, MachineInfo, Report, Row, is_ours};

/// The error type of experiments: anything printable. The harness is an application layer; engines keep typed
/// errors of their own.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// The result type of experiments.
pub type Result<T> = std::result::Result<T, Error>;

/// One benchmark experiment, e.g. `machine` or `rask`.
pub trait Experiment: Sync {
    /// The name on the command line (`rangedb bench NAME`).
    fn name(&self) -> &'static str;
    /// One line for `rangedb bench list`: what is measured against which peers.
    fn about(&self) -> &'static str;
    /// Every `--set` key the experiment reads (a test checks the list against the source).
    fn settings(&self) -> &'static [&'static str];
    /// Runs the experiment. With `ctx.quick` it must finish within a few minutes on two cores.
    fn run(&self, ctx: &Ctx) -> Result<Report>;
}

/// Refuses `--set` keys that none of `experiments` reads, so a misspelt key is an error instead of a run with
/// the default it meant to change.
pub fn check_settings(experiments: &[&dyn Experiment], ctx: &Ctx) -> Result<()> {
    for key in ctx.set.keys() {
        if !experiments.iter().any(|e| e.settings().contains(&key.as_str())) {
            let mut known: Vec<&str> =
                experiments.iter().flat_map(|e| e.settings().iter().copied()).collect();
            known.sort_unstable();
            known.dedup();
            let what = match experiments {
                [one] => format!("{} reads no such setting", one.name()),
                _ => "no chosen experiment reads it".to_string(),
            };
            return Err(format!("--set {key}: {what} (known: {})", known.join(", ")).into());
        }
    }
    Ok(())
}
