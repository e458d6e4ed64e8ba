//! What an experiment is told by the command line.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;

use indicatif::{ProgressBar, ProgressStyle};

/// The run's settings, shared by every experiment.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Keep the experiment to a few minutes (smaller data, fewer repetitions).
    pub quick: bool,
    /// Thread counts to run concurrent systems at (default `[1, 2]`).
    pub threads: Vec<usize>,
    /// Trace files given with `--trace`, for experiments that replay them.
    pub traces: Vec<PathBuf>,
    /// A directory on the real disk for systems that write files; experiments make subdirectories and remove them.
    pub scratch: PathBuf,
    /// The seed of every generator in the run.
    pub seed: u64,
    /// Free-form `--set key=value` settings an experiment documents in its `about`.
    pub set: BTreeMap<String, String>,
    /// Show progress bars (off in tests and when output is not a terminal).
    pub progress: bool,
}

impl Ctx {
    /// Settings for tests: quick, one thread, a given scratch directory, no progress bars.
    pub fn for_tests(scratch: PathBuf) -> Self {
        Ctx {
            quick: true,
            threads: vec![1],
            traces: Vec::new(),
            scratch,
            seed: 42,
            set: BTreeMap::new(),
            progress: false,
        }
    }

    /// The `--set` value for `key` parsed as `T`, or `default` when absent.
    pub fn setting<T: FromStr>(&self, key: &str, default: T) -> crate::Result<T>
    where
        T::Err: std::fmt::Display,
    {
        match self.set.get(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|e| format!("--set {key}={v}: {e}").into()),
        }
    }

    /// `quick` when the run is quick, else `full`.
    pub fn scale<T>(&self, quick: T, full: T) -> T {
        if self.quick { quick } else { full }
    }

    /// A progress bar of `len` steps labelled `msg` (hidden when progress is off). No background ticker thread
    /// runs, so memory measurements are not disturbed.
    pub fn progress(&self, len: u64, msg: impl Into<String>) -> ProgressBar {
        if !self.progress {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::new(len);
        if let Ok(style) =
            ProgressStyle::with_template("{msg:>28} [{bar:30}] {pos}/{len} {elapsed_precise} eta {eta}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(msg.into());
        bar
    }
}
