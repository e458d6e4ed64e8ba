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

    /// [`Ctx::setting`] for a number that must be at least `min` (a count the experiment divides by or draws
    /// from, where 0 would leave nothing to measure).
    pub fn setting_min<T>(&self, key: &str, default: T, min: T) -> crate::Result<T>
    where
        T: FromStr + PartialOrd + std::fmt::Display,
        T::Err: std::fmt::Display,
    {
        let v = self.setting(key, default)?;
        if v < min {
            return Err(format!("--set {key}={v}: expected at least {min}").into());
        }
        Ok(v)
    }

    /// The `--set` value for `key` as a comma-separated list of names, or `default` when absent; an empty value
    /// is an empty list. Every name must be one of `known`, or with `prefix` (filters that name families, such
    /// as workloads) the start of one or an extension of one: a misspelt name is an error, never a run that
    /// silently leaves something out.
    pub fn list(
        &self,
        key: &str,
        default: &[&str],
        known: &[&str],
        prefix: bool,
    ) -> crate::Result<Vec<String>> {
        let Some(v) = self.set.get(key) else {
            return Ok(default.iter().map(|s| s.to_string()).collect());
        };
        let names: Vec<String> =
            v.split(',').map(str::trim).filter(|x| !x.is_empty()).map(String::from).collect();
        for x in &names {
            let ok =
                known.iter().any(|k| k == x || (prefix && (k.starts_with(x.as_str()) || x.starts_with(k))));
            if !ok {
                return Err(format!("--set {key}: unknown name {x:?} (known: {})", known.join(", ")).into());
            }
        }
        Ok(names)
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

/// A fraction `N/D` as settings and flags spell one (`--set gc_start_utilization=1/2`); range checks are the
/// consumer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fraction(pub u32, pub u32);

impl FromStr for Fraction {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("expected N/D, got {s:?}");
        let (n, d) = s.split_once('/').ok_or_else(bad)?;
        Ok(Fraction(n.trim().parse().map_err(|_| bad())?, d.trim().parse().map_err(|_| bad())?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_below_their_minimum_are_refused() {
        let mut ctx = Ctx::for_tests(PathBuf::from("scratch"));
        assert_eq!(ctx.setting_min("n", 5u64, 1).unwrap(), 5);
        ctx.set.insert("n".into(), "0".into());
        let e = ctx.setting_min("n", 5u64, 1).unwrap_err().to_string();
        assert_eq!(e, "--set n=0: expected at least 1");
        ctx.set.insert("n".into(), "1".into());
        assert_eq!(ctx.setting_min("n", 5u64, 1).unwrap(), 1);
    }

    #[test]
    fn lists_refuse_unknown_names() {
        let mut ctx = Ctx::for_tests(PathBuf::from("scratch"));
        let known = ["rask", "rangemap", "len-"];
        assert_eq!(ctx.list("systems", &["rask"], &known, false).unwrap(), ["rask"]);
        ctx.set.insert("systems".into(), " rangemap, rask ,".into());
        assert_eq!(ctx.list("systems", &[], &known, false).unwrap(), ["rangemap", "rask"]);
        ctx.set.insert("systems".into(), "rask,ranjemap".into());
        let e = ctx.list("systems", &[], &known, false).unwrap_err().to_string();
        assert!(e.contains("unknown name \"ranjemap\""), "{e}");
        // Prefixes: the start of a known name, or a known family's member.
        ctx.set.insert("systems".into(), "range,len-100".into());
        assert!(ctx.list("systems", &[], &known, false).is_err());
        assert_eq!(ctx.list("systems", &[], &known, true).unwrap(), ["range", "len-100"]);
        ctx.set.insert("systems".into(), String::new());
        assert!(ctx.list("systems", &["rask"], &known, false).unwrap().is_empty());
    }

    #[test]
    fn fractions_parse_and_junk_is_refused() {
        assert_eq!("1/2".parse::<Fraction>(), Ok(Fraction(1, 2)));
        assert_eq!(" 30 / 32 ".parse::<Fraction>(), Ok(Fraction(30, 32)));
        for bad in ["half", "1/", "/2", "1/2/3", "-1/2"] {
            let e = bad.parse::<Fraction>().unwrap_err();
            assert!(e.contains("expected N/D"), "{bad}: {e}");
        }
    }
}
