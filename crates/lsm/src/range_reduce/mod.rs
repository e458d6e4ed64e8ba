//! RangeReduce: range queries that compact what they read (Kaushik, Athanassoulis, Sarkar; docs/rangereduce.md).
//!
//! A range iterator whose both bounds are known decides *before it starts* which levels it will compact
//! (`select.rs`: Blind Merge-on-Scan, File-Size-Aware Merge-on-Scan or Bounded-Merge's Algorithm 1, plus the SLO
//! bound). The children of the merging iterator that read the chosen levels are wrapped in taps (`tap.rs`) that
//! copy every internal entry they pass in `[lower, upper)` — all versions, point tombstones included, so nothing a
//! snapshot needs is lost — while the query runs; the query's storage reads are the only reads of that data. When
//! the iterator is dropped having walked the whole range forward once, the collected runs become a job for the
//! background thread (`rewrite.rs`), which merges them (dropping only what no live snapshot can see), writes one
//! sorted run at the deepest chosen level, writes the out-of-range head and tail of partially covered files back
//! at their own levels, and installs everything with one atomic version edit — or aborts the rewrite if a flush
//! or compaction changed any level it depends on. The query itself never waits for or fails because of it.
//!
//! Level-Renaming (§IV-C) runs on the same thread: when the deepest non-empty level reaches its target size,
//! every level from L1 down is renamed one level deeper by a metadata-only edit, leaving L1 empty.
//!
//! The module is a child of `db` (declared there) so it can reach the engine's internals without widening their
//! visibility; its hooks in `db.rs` and `db/` are one line each.

mod claim;
mod rewrite;
mod select;
mod tap;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

pub use select::{
    LevelEstimate, RangeReduceMode, SelectParams, decision_matrix, estimate_partial, select_free_levels,
    select_levels,
};

use super::owner::Owner;
use super::{Inner, lock};
use crate::db_iter::ReadSink;
use crate::error::{Error, Result};
use crate::iter::InternalIter;
use crate::options::{Options, ReadOptions};
use crate::stats::load;
use crate::version::{FileMeta, NUM_LEVELS, Version};
use claim::Claim;
use tap::{Budget, Collect, Run, Tap};

/// RangeReduce's options (in [`Options::range_reduce`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RangeReduceOptions {
    /// Level-selection mode (default Bounded-Merge; `Off` is the plain engine).
    pub mode: RangeReduceMode,
    /// RangeReduceRatio `rho`: Bounded-Merge merges Level i into Level i+1 only if the query's data in Level i is
    /// at least `rho` times that in Level i+1. `None` (default) means `1 / T` (the paper's recommended value,
    /// `T = max_bytes_for_level_multiplier`); `Some(0.0)` means no ratio bound.
    pub rho: Option<f64>,
    /// Level-Renaming (§IV-C) when the deepest level fills (default true; only when `mode != Off`).
    pub level_renaming: bool,
    /// SLO bound (§IV-D): skip the rewrite when the estimated query time `2 * D_rq / max(B_r, B_w)` exceeds this
    /// many microseconds (default `None`: no bound).
    pub slo_micros: Option<u64>,
    /// Effective read bandwidth `B_r` in bytes per second for the SLO estimate (default 500 MB/s).
    pub read_bandwidth: u64,
    /// Effective write bandwidth `B_w` in bytes per second for the SLO estimate (default 500 MB/s).
    pub write_bandwidth: u64,
    /// Most bytes one query may buffer for its rewrite; larger estimated ranges are not compacted (default
    /// 64 MiB). Bounds the memory a query adds.
    pub max_collect_bytes: usize,
    /// Rewrites waiting for the background thread; a query that would queue more does not compact (default 2).
    pub max_pending_rewrites: usize,
    /// Longest a query's claim on the files it will rewrite holds them back from compactions while the query's
    /// iterator is still open (default 1 s). A claim that expires is taken again when the rewrite runs, which
    /// then aborts if a compaction took one of the files meanwhile.
    pub claim_timeout: Duration,
}

impl Default for RangeReduceOptions {
    fn default() -> Self {
        RangeReduceOptions {
            mode: RangeReduceMode::BoundedMerge,
            rho: None,
            level_renaming: true,
            slo_micros: None,
            read_bandwidth: 500_000_000,
            write_bandwidth: 500_000_000,
            max_collect_bytes: 64 << 20,
            max_pending_rewrites: 2,
            claim_timeout: Duration::from_secs(1),
        }
    }
}

impl RangeReduceOptions {
    /// Rejects settings the feature cannot run with.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::InvalidArgument(m.to_string()));
        if let Some(r) = self.rho
            && !(r.is_finite() && r >= 0.0)
        {
            return bad("range_reduce.rho must be finite and >= 0");
        }
        if self.read_bandwidth == 0 || self.write_bandwidth == 0 {
            return bad("range_reduce bandwidths must be positive");
        }
        if self.max_pending_rewrites == 0 && self.mode != RangeReduceMode::Off {
            return bad("range_reduce.max_pending_rewrites must be positive");
        }
        Ok(())
    }

    /// `rho` in force: the configured value or `1 / T`.
    pub fn resolved_rho(&self, o: &Options) -> f64 {
        self.rho.unwrap_or(1.0 / o.max_bytes_for_level_multiplier.max(1) as f64)
    }
}

/// RangeReduce's statistics (in [`crate::Stats::range_reduce`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RangeReduceStats {
    /// Range queries: iterators created with both bounds.
    pub range_queries: u64,
    /// Bytes (key + value of every internal entry, all versions) the range queries' sources delivered.
    pub range_query_bytes_read: u64,
    /// Queries that chose levels and collected for a rewrite.
    pub rewrites_planned: u64,
    /// Planned rewrites dropped because the query did not walk its whole range forward once.
    pub rewrites_incomplete: u64,
    /// Queries that did not compact because the estimate exceeded the SLO bound.
    pub rewrites_skipped_slo: u64,
    /// Queries that did not compact because of the memory bound or a full rewrite queue.
    pub rewrites_skipped_busy: u64,
    /// Queries that did not compact because a running compaction (or rewrite) held a file they would rewrite.
    pub rewrites_skipped_conflict: u64,
    /// Claims released because their query's iterator stayed open longer than `claim_timeout`.
    pub rewrites_claims_expired: u64,
    /// RQ-triggered compactions installed.
    pub rewrites: u64,
    /// Rewrites aborted because a flush or compaction changed a level they depend on.
    pub rewrites_aborted: u64,
    /// Of `rewrites_aborted`: rewrites whose claim had expired and that then found a file they would delete held
    /// by a running compaction (or a compaction writing where they would).
    pub rewrites_claim_conflicts: u64,
    /// Rewrites abandoned after an I/O error before their edit (nothing installed, nothing lost).
    pub rewrites_failed: u64,
    /// Bytes written by RQ-triggered compactions (merged runs plus rewritten heads and tails).
    pub rewrite_write_bytes: u64,
    /// Bytes RQ-triggered compactions read themselves (heads and tails of partially covered files).
    pub rewrite_read_bytes: u64,
    /// Tables RQ-triggered compactions removed.
    pub rewrite_files_removed: u64,
    /// Level renamings performed.
    pub level_renames: u64,
    /// Rewrites waiting or running.
    pub pending_rewrites: u64,
    /// The paper's compaction debt (§III-B): `sum over levels i above the deepest non-empty level L of
    /// bytes(i) * T * (L - i + 1)`.
    pub compaction_debt_bytes: u64,
}

impl RangeReduceStats {
    /// A JSON object of every field.
    pub fn to_json(&self) -> String {
        let f: [(&str, u64); 18] = [
            ("range_queries", self.range_queries),
            ("range_query_bytes_read", self.range_query_bytes_read),
            ("rewrites_planned", self.rewrites_planned),
            ("rewrites_incomplete", self.rewrites_incomplete),
            ("rewrites_skipped_slo", self.rewrites_skipped_slo),
            ("rewrites_skipped_busy", self.rewrites_skipped_busy),
            ("rewrites_skipped_conflict", self.rewrites_skipped_conflict),
            ("rewrites_claims_expired", self.rewrites_claims_expired),
            ("rewrites", self.rewrites),
            ("rewrites_aborted", self.rewrites_aborted),
            ("rewrites_claim_conflicts", self.rewrites_claim_conflicts),
            ("rewrites_failed", self.rewrites_failed),
            ("rewrite_write_bytes", self.rewrite_write_bytes),
            ("rewrite_read_bytes", self.rewrite_read_bytes),
            ("rewrite_files_removed", self.rewrite_files_removed),
            ("level_renames", self.level_renames),
            ("pending_rewrites", self.pending_rewrites),
            ("compaction_debt_bytes", self.compaction_debt_bytes),
        ];
        let body: Vec<String> = f.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        format!("{{{}}}", body.join(","))
    }
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    range_queries: AtomicU64,
    range_query_bytes_read: AtomicU64,
    rewrites_planned: AtomicU64,
    rewrites_incomplete: AtomicU64,
    rewrites_skipped_slo: AtomicU64,
    rewrites_skipped_busy: AtomicU64,
    rewrites_skipped_conflict: AtomicU64,
    rewrites_claims_expired: AtomicU64,
    rewrites: AtomicU64,
    rewrites_aborted: AtomicU64,
    rewrites_claim_conflicts: AtomicU64,
    rewrites_failed: AtomicU64,
    rewrite_write_bytes: AtomicU64,
    rewrite_read_bytes: AtomicU64,
    rewrite_files_removed: AtomicU64,
    level_renames: AtomicU64,
}

fn add(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

/// What a query decided: the chosen levels and the files it claims.
#[derive(Debug)]
pub(crate) struct Plan {
    lower: Vec<u8>,
    upper: Vec<u8>,
    /// Chosen levels, shallowest first; the last is the output level.
    levels: Vec<usize>,
    /// For every level from the first chosen one down: the files whose keys meet `[lower, upper)`. The rewrite
    /// is valid only if these sets are unchanged when it is installed (the claimed files are those of the
    /// chosen levels).
    meeting: Vec<(usize, Vec<u64>)>,
    /// The files of the chosen levels, claimed when the query decided (`claim.rs`); `None` once given up.
    claim: Option<Arc<Claim>>,
}

/// A collected query, ready to be written.
pub(crate) struct Job {
    plan: Plan,
    /// Runs of the chosen levels, newest first (L0 files newest first, then levels shallow to deep).
    runs: Vec<Run>,
}

/// RangeReduce's state inside the engine: counters, the queue of rewrites, and a handle back to the engine so
/// a finished query can wake the background thread.
#[derive(Default)]
pub(crate) struct Shared {
    counters: Counters,
    queue: Mutex<VecDeque<Job>>,
    running: AtomicBool,
    /// Claims of queries still reading, for expiry.
    open_claims: Mutex<Vec<Weak<Claim>>>,
    pub(crate) owner: Arc<Owner>,
    /// Test hook run right after a rewrite claimed its files, before it writes anything.
    #[cfg(test)]
    pub(crate) on_claim: Mutex<Option<ClaimHook>>,
}

#[cfg(test)]
pub(crate) type ClaimHook = Box<dyn FnMut(&Inner, &[(usize, Arc<FileMeta>)]) + Send>;

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeReduce").finish_non_exhaustive()
    }
}

impl Shared {
    /// Records the engine that owns this state (called once, right after it is built).
    pub(crate) fn set_owner(&self, inner: &Arc<Inner>) {
        self.owner.set(inner);
    }

    /// Whether a collected rewrite waits to run.
    pub(crate) fn has_queued(&self) -> bool {
        !lock(&self.queue).is_empty()
    }

    /// Whether a rewrite is waiting or running.
    pub(crate) fn has_work(&self) -> bool {
        self.running.load(Ordering::Acquire) || !lock(&self.queue).is_empty()
    }

    #[cfg(test)]
    fn after_claim(&self, inner: &Inner, claimed: &[(usize, Arc<FileMeta>)]) {
        if let Some(h) = lock(&self.on_claim).as_mut() {
            h(inner, claimed);
        }
    }

    #[cfg(not(test))]
    fn after_claim(&self, _: &Inner, _: &[(usize, Arc<FileMeta>)]) {}

    fn pending(&self) -> usize {
        lock(&self.queue).len() + usize::from(self.running.load(Ordering::Acquire))
    }

    /// Queues a collected rewrite and wakes the background thread. Called from a query's drop, never with the
    /// engine's state lock held.
    ///
    /// REQUIRES: `inner` owns this state.
    fn submit(&self, inner: &Inner, job: Job) {
        if let Some(c) = &job.plan.claim {
            c.submit();
        }
        lock(&self.queue).push_back(job);
        // Notify under the state lock: the background thread checks for work and waits under it, so the wakeup
        // cannot fall between its check and its wait.
        let _s = lock(&inner.state);
        inner.bg_cv.notify_all();
    }
}

/// The paper's compaction debt of `v` (§III-B), with `T` the level size ratio.
pub fn compaction_debt(v: &Version, t: u64) -> u64 {
    let Some(last) = (0..NUM_LEVELS).rev().find(|&l| !v.levels[l].is_empty()) else { return 0 };
    (0..last).map(|i| v.level_bytes(i).saturating_mul(t).saturating_mul((last - i + 1) as u64)).sum()
}

/// Whether `f`'s keys meet `[lo, hi)` (half-open, unlike `FileMeta::overlaps`).
fn meets(f: &FileMeta, lo: &[u8], hi: &[u8]) -> bool {
    f.smallest_user() < hi && f.largest_user() >= lo
}

impl Inner {
    /// Hook of `Inner::iter`: counts the range query, plans its rewrite, and wraps the `children` that read
    /// the chosen levels in taps (`children` as `iter` built them: `mem_children` memtable cursors, then one
    /// cursor per L0 file meeting the bounds, then one per deeper level with a file meeting them). Returns the
    /// children, and for a bounded query the sink its `DbIter` hands the bytes it examined to. Returns the
    /// children unchanged for an unbounded iterator.
    ///
    /// Only the children a rewrite records are wrapped: a tap puts a layer of dynamic calls under every
    /// comparison of the merge, and when every bounded query wrapped every child to count bytes, that was
    /// about a tenth of a plain query's time.
    pub(super) fn range_reduce_children(
        &self,
        children: Vec<Box<dyn InternalIter>>,
        mem_children: usize,
        v: &Arc<Version>,
        opts: &ReadOptions,
    ) -> (Vec<Box<dyn InternalIter>>, Option<ReadSink>) {
        let (Some(lo), Some(hi)) = (opts.lower_bound.as_deref(), opts.upper_bound.as_deref()) else {
            return (children, None);
        };
        if lo >= hi {
            return (children, None);
        }
        add(&self.rr.counters.range_queries, 1);
        let owner = self.rr.owner.clone();
        let counter = owner.clone();
        let sink: ReadSink = Box::new(move |bytes| {
            counter.visit(|inner| add(&inner.rr.counters.range_query_bytes_read, bytes));
        });
        let plan = if opts.snapshot.is_none() && self.opts.range_reduce.mode != RangeReduceMode::Off {
            self.range_reduce_plan(v, lo, hi)
        } else {
            None
        };
        let Some(plan) = plan else { return (children, Some(sink)) };
        // The level of each child, reconstructed the way `iter` built them.
        let mut child_level: Vec<Option<usize>> = vec![None; mem_children];
        for f in &v.levels[0] {
            if f.overlaps(Some(lo), Some(hi)) {
                child_level.push(Some(0));
            }
        }
        for l in 1..NUM_LEVELS {
            if v.levels[l].iter().any(|f| f.overlaps(Some(lo), Some(hi))) {
                child_level.push(Some(l));
            }
        }
        // A chosen level no cursor reads could not be rewritten from what the query sees (the plan's files meet
        // the range, so each chosen level has a cursor; this keeps it so).
        if child_level.len() != children.len() || !plan.levels.iter().all(|&l| child_level.contains(&Some(l)))
        {
            return (children, Some(sink));
        }
        let recording: Vec<bool> =
            child_level.iter().map(|l| l.is_some_and(|l| plan.levels.contains(&l))).collect();
        let n_rec = recording.iter().filter(|&&r| r).count();
        let budget = Arc::new(Budget::new(self.opts.range_reduce.max_collect_bytes));
        let col = Arc::new(Mutex::new(Collect::new(owner, plan, n_rec)));
        let mut slot = 0;
        let children = children
            .into_iter()
            .zip(recording)
            .map(|(c, rec)| {
                if !rec {
                    return c;
                }
                slot += 1;
                Box::new(Tap::new(c, col.clone(), slot - 1, lo, hi, budget.clone())) as Box<dyn InternalIter>
            })
            .collect();
        (children, Some(sink))
    }

    /// Decides which levels a query over `[lo, hi)` reading version `v` compacts (before it starts).
    fn range_reduce_plan(&self, v: &Arc<Version>, lo: &[u8], hi: &[u8]) -> Option<Plan> {
        let ro = &self.opts.range_reduce;
        let c = &self.rr.counters;
        let mut est = Vec::new();
        let (mut bytes, mut entries) = (0u64, 0u64);
        for (l, files) in v.levels.iter().enumerate() {
            let meeting: Vec<&Arc<FileMeta>> = files.iter().filter(|f| meets(f, lo, hi)).collect();
            if meeting.is_empty() {
                continue;
            }
            let mut n = 0u64;
            for f in meeting {
                bytes += f.info.size;
                entries += f.info.num_entries;
                n += if f.smallest_user() >= lo && f.largest_user() < hi {
                    f.info.num_entries
                } else {
                    self.estimate_partial_file(f, lo, hi)
                };
            }
            est.push(LevelEstimate { level: l, entries: n });
        }
        let entry_bytes = if entries == 0 { 0.0 } else { bytes as f64 / entries as f64 };
        let p = SelectParams {
            mode: ro.mode,
            rho: ro.resolved_rho(&self.opts),
            entry_bytes,
            file_size: self.opts.target_file_size_base,
        };
        // Nothing qualifies even with every level free: not a query that compacts, so nothing below counts it.
        let mut levels = select_levels(&est, &p);
        if levels.is_empty() {
            return None;
        }
        // §IV-D: D_rq from metadata, the rewrite bounded by the scan, so the query takes at most 2 D_rq / max(B).
        let d_rq: f64 = est.iter().map(|e| e.entries as f64 * entry_bytes).sum();
        if let Some(slo) = ro.slo_micros {
            let bw = ro.read_bandwidth.max(ro.write_bandwidth) as f64;
            if 2.0 * d_rq / bw * 1e6 > slo as f64 {
                add(&c.rewrites_skipped_slo, 1);
                return None;
            }
        }
        if self.rr.pending() >= ro.max_pending_rewrites {
            add(&c.rewrites_skipped_busy, 1);
            return None;
        }
        // Levels a running compaction holds are left out of the span: the query compacts the deepest span it can
        // claim, and claims it before it reads.
        let mut free = vec![true; est.len()];
        let claim = loop {
            let collect: f64 = est
                .iter()
                .filter(|e| levels.contains(&e.level))
                .map(|e| e.entries as f64 * entry_bytes)
                .sum();
            if collect > ro.max_collect_bytes as f64 {
                add(&c.rewrites_skipped_busy, 1);
                return None;
            }
            let files: Vec<(usize, Arc<FileMeta>)> = levels
                .iter()
                .flat_map(|&l| v.levels[l].iter().filter(|f| meets(f, lo, hi)).map(move |f| (l, f.clone())))
                .collect();
            let held = match self.claim_files(v, &levels, &files) {
                Ok(claim) => break claim,
                Err(held) => held,
            };
            let before = free.clone();
            for (e, fr) in est.iter().zip(free.iter_mut()) {
                *fr &= !held.contains(&e.level);
            }
            levels = select_free_levels(&est, &free, &p);
            if free == before || levels.is_empty() {
                add(&c.rewrites_skipped_conflict, 1);
                return None;
            }
        };
        let meeting: Vec<(usize, Vec<u64>)> = (levels[0]..NUM_LEVELS)
            .map(|l| (l, v.levels[l].iter().filter(|f| meets(f, lo, hi)).map(|f| f.number()).collect()))
            .collect();
        let claim = Arc::new(claim);
        {
            let mut open = lock(&self.rr.open_claims);
            open.retain(|w| w.strong_count() > 0);
            open.push(Arc::downgrade(&claim));
        }
        add(&c.rewrites_planned, 1);
        Some(Plan { lower: lo.to_vec(), upper: hi.to_vec(), levels, meeting, claim: Some(claim) })
    }

    /// In-range entries of a file that only partly meets `[lo, hi)`: its entries times the fraction of its data
    /// blocks that may hold keys in range (from the cached index), or a key-interpolation estimate.
    fn estimate_partial_file(&self, f: &FileMeta, lo: &[u8], hi: &[u8]) -> u64 {
        match self.table_cache.table(f) {
            Ok(t) => {
                let (meeting, total) = t.blocks_in_range(lo, hi);
                if total == 0 { 0 } else { (f.info.num_entries * meeting).div_ceil(total) }
            }
            Err(_) => estimate_partial(f.smallest_user(), f.largest_user(), f.info.num_entries, lo, hi),
        }
    }

    /// RangeReduce's statistics for `stats()`.
    pub(super) fn range_reduce_stats(&self, v: &Version) -> RangeReduceStats {
        let c = &self.rr.counters;
        RangeReduceStats {
            range_queries: load(&c.range_queries),
            range_query_bytes_read: load(&c.range_query_bytes_read),
            rewrites_planned: load(&c.rewrites_planned),
            rewrites_incomplete: load(&c.rewrites_incomplete),
            rewrites_skipped_slo: load(&c.rewrites_skipped_slo),
            rewrites_skipped_busy: load(&c.rewrites_skipped_busy),
            rewrites_skipped_conflict: load(&c.rewrites_skipped_conflict),
            rewrites_claims_expired: load(&c.rewrites_claims_expired),
            rewrites: load(&c.rewrites),
            rewrites_aborted: load(&c.rewrites_aborted),
            rewrites_claim_conflicts: load(&c.rewrites_claim_conflicts),
            rewrites_failed: load(&c.rewrites_failed),
            rewrite_write_bytes: load(&c.rewrite_write_bytes),
            rewrite_read_bytes: load(&c.rewrite_read_bytes),
            rewrite_files_removed: load(&c.rewrite_files_removed),
            level_renames: load(&c.level_renames),
            pending_rewrites: self.rr.pending() as u64,
            compaction_debt_bytes: compaction_debt(v, self.opts.max_bytes_for_level_multiplier),
        }
    }
}

impl crate::stats::Stats {
    /// Total data movement: bytes read and written by flushes, compactions, RQ-triggered compactions and range
    /// queries (RangeReduce §V's "overall data movement").
    pub fn data_movement_bytes(&self) -> u64 {
        let r = &self.range_reduce;
        self.bytes_flushed
            + self.compact_read_bytes
            + self.compact_write_bytes
            + r.rewrite_read_bytes
            + r.rewrite_write_bytes
            + r.range_query_bytes_read
    }
}
