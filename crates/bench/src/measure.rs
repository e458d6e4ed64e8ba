//! Timing: per-operation latencies in an HDR histogram and throughput over the whole run.
//!
//! Each timed operation costs two `Instant::now()` calls (about 20–40 ns here). For operations that are
//! themselves tens of nanoseconds, [`time_ops_sampled`] times every k-th operation so the throughput figure is not
//! dominated by the clock.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// Latencies in nanoseconds, 1 ns to about an hour at three significant digits.
#[derive(Debug, Clone)]
pub struct Latencies {
    hist: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        Self::new()
    }
}

impl Latencies {
    /// An empty histogram.
    #[expect(clippy::expect_used, reason = "construction fails only for more than 5 significant digits")]
    pub fn new() -> Self {
        let mut hist = Histogram::new(3).expect("3 significant digits is a valid precision");
        hist.auto(true);
        Latencies { hist }
    }

    /// Records one latency.
    pub fn record(&mut self, ns: u64) {
        // With auto-resize, recording can only fail for values beyond u64 range, which cannot occur.
        let _ = self.hist.record(ns.max(1));
    }

    /// Records a duration.
    pub fn record_duration(&mut self, d: Duration) {
        self.record(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// The latency at quantile `q` in `[0, 1]`, in nanoseconds.
    pub fn p(&self, q: f64) -> u64 {
        self.hist.value_at_quantile(q)
    }

    /// Mean latency in nanoseconds.
    pub fn mean(&self) -> f64 {
        self.hist.mean()
    }

    /// Number of recorded latencies.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Adds another histogram's samples.
    pub fn merge(&mut self, other: &Latencies) {
        let _ = self.hist.add(&other.hist);
    }
}

/// The outcome of a timed run.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Operations performed.
    pub ops: u64,
    /// Wall time of the whole run.
    pub elapsed: Duration,
    /// Latency samples.
    pub latencies: Latencies,
}

impl Stats {
    /// Operations per second over the whole run.
    pub fn ops_per_sec(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 { self.ops as f64 / s } else { 0.0 }
    }

    /// `ops_per_sec`, `mean_ns`, `p50_ns`, `p99_ns`, `p999_ns`, `p9999_ns`.
    pub fn metrics(&self) -> Vec<(&'static str, f64)> {
        let l = &self.latencies;
        vec![
            ("ops_per_sec", self.ops_per_sec()),
            ("mean_ns", l.mean()),
            ("p50_ns", l.p(0.50) as f64),
            ("p99_ns", l.p(0.99) as f64),
            ("p999_ns", l.p(0.999) as f64),
            ("p9999_ns", l.p(0.9999) as f64),
        ]
    }
}

/// Runs `op(i)` for `i` in `0..n`, timing each call.
pub fn time_ops(n: u64, op: impl FnMut(u64)) -> Stats {
    time_ops_sampled(n, 1, op)
}

/// Runs `op(i)` for `i` in `0..n`, timing every `every`-th call (at least one in each run).
pub fn time_ops_sampled(n: u64, every: u64, mut op: impl FnMut(u64)) -> Stats {
    let every = every.max(1);
    let mut latencies = Latencies::new();
    let start = Instant::now();
    for i in 0..n {
        if i % every == 0 {
            let t = Instant::now();
            op(i);
            latencies.record_duration(t.elapsed());
        } else {
            op(i);
        }
    }
    Stats { ops: n, elapsed: start.elapsed(), latencies }
}

/// Runs `op(thread, i)` for `i` in `0..n_per_thread` on each of `threads` threads at once, timing each call.
/// Throughput is total operations over the wall time from the common start to the last thread's end.
pub fn time_ops_parallel(threads: usize, n_per_thread: u64, op: impl Fn(usize, u64) + Sync) -> Stats {
    let threads = threads.max(1);
    let barrier = std::sync::Barrier::new(threads);
    let start = std::sync::OnceLock::new();
    let op = &op;
    let (barrier, start_ref) = (&barrier, &start);
    let per_thread: Vec<Latencies> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    barrier.wait();
                    start_ref.get_or_init(Instant::now);
                    time_ops(n_per_thread, |i| op(t, i)).latencies
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let elapsed = start.get().map(Instant::elapsed).unwrap_or_default();
    let mut latencies = Latencies::new();
    for l in &per_thread {
        latencies.merge(l);
    }
    Stats { ops: n_per_thread * threads as u64, elapsed, latencies }
}

/// Bytes of the files under `dir` (their lengths, subdirectories included), or 0 where it cannot be read: the
/// space a store takes, for the benchmarks' `disk_bytes`.
pub fn dir_bytes(dir: &std::path::Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else { return 0 };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_known_samples() {
        let mut l = Latencies::new();
        for ns in 1..=1000 {
            l.record(ns);
        }
        assert_eq!(l.count(), 1000);
        assert!((l.p(0.5) as i64 - 500).abs() <= 1);
        assert!((l.p(0.99) as i64 - 990).abs() <= 1);
    }

    #[test]
    fn timed_runs_count_every_op() {
        let mut seen = 0u64;
        let s = time_ops(100, |_| seen += 1);
        assert_eq!((s.ops, seen, s.latencies.count()), (100, 100, 100));
        let s = time_ops_sampled(100, 10, |_| {});
        assert_eq!(s.latencies.count(), 10);
        let s = time_ops_parallel(2, 50, |_, _| {});
        assert_eq!((s.ops, s.latencies.count()), (100, 100));
    }
}
