//! File claims of a query-driven rewrite: the same marks a running compaction holds, so the two never work on
//! the same files at once.
//!
//! A compaction marks its inputs `being_compacted` and registers its output range in `running` (under the
//! `running` lock; `picker::pick` skips marked files and output ranges meeting a registered one). A rewrite does
//! the same with the files it will delete — the files of the chosen levels the query reads — and registers the
//! span of those files at every chosen level it writes to (the merged run at the deepest chosen level, heads and
//! tails at the others). The check and the marking happen under one hold of the `running` lock, so either the
//! compaction or the rewrite gets a file, never both:
//!
//! - a file a running compaction holds cannot be claimed;
//! - a running compaction writing into a chosen level within the claimed span could produce a file that overlaps
//!   a head, tail or run the rewrite writes there: no claim either;
//! - when L0 is chosen, any running L0 compaction refuses the claim (it may move older L0 data above newer
//!   collected data), and the claim's marks on L0 files keep any new L0 compaction from starting (the picker
//!   runs one L0 compaction at a time).
//!
//! When. The query claims when it decides, before it reads (`Inner::range_reduce_plan`): a compaction that
//! started between the query and its rewrite would otherwise replace a file the query collected, and the whole
//! collection would be thrown away (36 of 135 planned rewrites in a full-size `uniform` run, before this). A
//! query that finds a file taken does not collect at all (`rewrites_skipped_conflict`). The claim lives in the
//! plan: it is released when the rewrite installs or gives up, when the query stops short of its range (its
//! iterator dropped early, or its memory bound passed), or — so that an iterator left open cannot hold back
//! compactions — by the compaction threads once it is older than `claim_timeout` and its query has not finished
//! (`rewrites_claims_expired`). An expired plan's rewrite claims again when it runs, as if it had never claimed,
//! and aborts if a compaction took a file meanwhile (`rewrites_claim_conflicts`).
//!
//! Whoever releases a claim clears its marks and unregisters its ranges under the `running` lock, once; a
//! compaction picked afterwards sees the version of that moment.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::{Inner, Owner, add, lock};
use crate::picker::RunningRange;
use crate::version::{FileMeta, Version};

/// Claimed files and registered output ranges of one rewrite; released on drop (or earlier, by expiry).
pub(super) struct Claim {
    owner: Arc<Owner>,
    files: Vec<Arc<FileMeta>>,
    ranges: Vec<RunningRange>,
    /// When the query claimed.
    since: Instant,
    /// Set once the query handed its collection over: a submitted claim no longer expires.
    submitted: AtomicBool,
    /// Set, under the `running` lock, once the marks are cleared.
    released: AtomicBool,
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim").field("files", &self.files.len()).field("held", &self.held()).finish()
    }
}

impl Claim {
    /// Whether the marks are still set.
    pub(super) fn held(&self) -> bool {
        !self.released.load(Ordering::Acquire)
    }

    /// Marks the claim as handed to the background thread (it then lasts until the rewrite ends).
    pub(super) fn submit(&self) {
        self.submitted.store(true, Ordering::Release);
    }

    /// Clears the marks and unregisters the ranges unless that was done already; true if this call did it.
    fn release(&self, inner: &Inner) -> bool {
        let mut running = lock(&inner.running);
        if !self.held() {
            return false;
        }
        for f in &self.files {
            f.being_compacted.store(false, Ordering::Release);
        }
        for r in &self.ranges {
            if let Some(i) = running.iter().position(|x| x == r) {
                running.swap_remove(i);
            }
        }
        self.released.store(true, Ordering::Release);
        true
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // No visit: the engine is closing or gone, and with it every mark.
        self.owner.visit(|inner| self.release(inner));
    }
}

impl Inner {
    /// Claims `files` (with their levels) of `v` for a rewrite writing to `levels`, or returns the levels in
    /// conflict: those with a file a running compaction holds (for L0, any held L0 file) or into which a running
    /// compaction writes within the claimed span.
    pub(super) fn claim_files(
        &self,
        v: &Version,
        levels: &[usize],
        files: &[(usize, Arc<FileMeta>)],
    ) -> std::result::Result<Claim, Vec<usize>> {
        let owner = self.rr.owner.clone();
        let new = |files: Vec<Arc<FileMeta>>, ranges| Claim {
            owner: owner.clone(),
            files,
            ranges,
            since: Instant::now(),
            submitted: AtomicBool::new(false),
            released: AtomicBool::new(false),
        };
        let (Some(lo), Some(hi)) = (
            files.iter().map(|(_, f)| f.smallest_user()).min(),
            files.iter().map(|(_, f)| f.largest_user()).max(),
        ) else {
            return Ok(new(Vec::new(), Vec::new()));
        };
        let mut running = lock(&self.running);
        let busy = |f: &FileMeta| f.being_compacted.load(Ordering::Acquire);
        let ranges: Vec<RunningRange> =
            levels.iter().filter(|&&l| l > 0).map(|&l| (l, lo.to_vec(), hi.to_vec())).collect();
        let mut conflicts: Vec<usize> = files.iter().filter(|(_, f)| busy(f)).map(|(l, _)| *l).collect();
        if levels.contains(&0) && v.levels[0].iter().any(|f| busy(f)) {
            conflicts.push(0);
        }
        conflicts.extend(
            ranges
                .iter()
                .filter(|(l, a, b)| running.iter().any(|(rl, rlo, rhi)| l == rl && !(b < rlo || a > rhi)))
                .map(|(l, _, _)| *l),
        );
        if !conflicts.is_empty() {
            conflicts.sort_unstable();
            conflicts.dedup();
            return Err(conflicts);
        }
        for (_, f) in files {
            f.being_compacted.store(true, Ordering::Release);
        }
        running.extend(ranges.iter().cloned());
        Ok(new(files.iter().map(|(_, f)| f.clone()).collect(), ranges))
    }

    /// Called by the compaction threads before they pick: releases the claims of queries still open after
    /// `claim_timeout`, so an iterator left open does not hold back compactions.
    pub(in crate::db) fn expire_range_reduce_claims(&self) {
        let mut open = lock(&self.rr.open_claims);
        if open.is_empty() {
            return;
        }
        let timeout = self.opts.range_reduce.claim_timeout;
        open.retain(|w| {
            let Some(c) = w.upgrade() else { return false };
            if c.submitted.load(Ordering::Acquire) || !c.held() {
                return false;
            }
            if c.since.elapsed() < timeout {
                return true;
            }
            if c.release(self) {
                add(&self.rr.counters.rewrites_claims_expired, 1);
            }
            false
        });
    }
}

#[cfg(test)]
mod tests {
    //! Races between a query-driven rewrite and background compactions, made deterministic: a "running
    //! compaction" is a file marked and a range registered exactly as the compaction thread does, and the
    //! compactions racing a rewrite run from the hook the rewrite calls right after claiming its files.

    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    use crate::{Db, Options, RangeReduceMode, ReadOptions, WriteOptions};

    fn k(i: u32) -> Vec<u8> {
        format!("k{i:05}").into_bytes()
    }

    fn opts() -> Options {
        let mut o = Options {
            create_if_missing: true,
            write_buffer_size: 8192,
            max_bytes_for_level_base: 32 << 10,
            max_bytes_for_level_multiplier: 4,
            target_file_size_base: 4096,
            block_size: 512,
            level0_file_num_compaction_trigger: 2,
            ..Options::default()
        };
        o.range_reduce.mode = RangeReduceMode::BlindMergeOnScan;
        o.range_reduce.level_renaming = false;
        o
    }

    type Model = BTreeMap<Vec<u8>, Vec<u8>>;

    /// Keys 0..2000 settled in L1.. and every second key of 500..1500 overwritten in L0, automatic compactions
    /// off from then on.
    fn setup() -> (Db, Model) {
        let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
        let db = Db::open(fs.clone(), "/db", opts()).unwrap();
        let mut m = Model::new();
        let w = WriteOptions::default();
        for i in 0..2000 {
            let v = format!("v0-{i}-{}", "x".repeat(20)).into_bytes();
            db.put(&w, &k(i), &v).unwrap();
            m.insert(k(i), v);
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        db.close().unwrap();
        let db = Db::open(fs, "/db", Options { disable_auto_compactions: true, ..opts() }).unwrap();
        for i in (500..1500).step_by(2) {
            let v = format!("v1-{i}").into_bytes();
            db.put(&w, &k(i), &v).unwrap();
            m.insert(k(i), v);
        }
        db.flush().unwrap();
        (db, m)
    }

    /// The test range query, decided (and its files claimed) but not yet walked.
    fn range_iter(db: &Db) -> crate::DbIter {
        let ro = ReadOptions { lower_bound: Some(k(400)), upper_bound: Some(k(1600)), ..Default::default() };
        db.iter(&ro).unwrap()
    }

    fn query(db: &Db, m: &Model) {
        walk(range_iter(db), m);
    }

    /// Walks the whole range forward, checks it against the model, and drops the iterator.
    fn walk(mut it: crate::DbIter, m: &Model) {
        it.seek_to_first();
        let got = it.collect_forward(usize::MAX).unwrap();
        let want: Vec<_> = m.range(k(400)..k(1600)).map(|(a, b)| (a.clone(), b.clone())).collect();
        assert_eq!(got, want, "range query");
    }

    fn check_all(db: &Db, m: &Model) {
        let mut it = db.iter(&ReadOptions::default()).unwrap();
        it.seek_to_first();
        let got = it.collect_forward(usize::MAX).unwrap();
        let want: Vec<_> = m.iter().map(|(a, b)| (a.clone(), b.clone())).collect();
        assert_eq!(got, want, "whole database");
    }

    /// The query's rewrite was installed, with no abort, and released its claim; nothing was lost.
    fn expect_installed(db: &Db, m: &Model) {
        settle(db);
        let st = db.stats().range_reduce;
        assert_eq!((st.rewrites, st.rewrites_aborted), (1, 0), "{st:?}");
        assert_eq!(marked(db), 0, "claim released after the install");
        check_all(db, m);
    }

    /// Waits until no rewrite is queued or running (`wait_for_compactions` would also wait for the registered
    /// fake compaction).
    fn settle(db: &Db) {
        let t = Instant::now();
        while db.inner.rr.has_work() {
            assert!(t.elapsed() < Duration::from_secs(20), "rewrite never finished");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The files of the current version meeting the test range, deepest level first.
    fn meeting_files(db: &Db) -> Vec<(usize, Arc<crate::version::FileMeta>)> {
        let v = crate::db::lock(&db.inner.state).current.clone();
        (0..crate::version::NUM_LEVELS)
            .rev()
            .flat_map(|l| {
                v.levels[l]
                    .iter()
                    .filter(|f| super::super::meets(f, &k(400), &k(1600)))
                    .map(|f| (l, f.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn marked(db: &Db) -> usize {
        meeting_files(db).iter().filter(|(_, f)| f.being_compacted.load(Ordering::Acquire)).count()
    }

    #[test]
    fn a_file_held_by_a_running_compaction_keeps_the_query_from_collecting() {
        let (db, m) = setup();
        let inner = db.inner.clone();
        // A compaction is running on the deepest level's first file meeting the range.
        let (level, f) = meeting_files(&db)[0].clone();
        let range = (level + 1, f.smallest_user().to_vec(), f.largest_user().to_vec());
        {
            let mut running = crate::db::lock(&inner.running);
            f.being_compacted.store(true, Ordering::Release);
            running.push(range.clone());
        }
        // Blind Merge-on-Scan merges every level or none: the query reads, collects nothing, claims nothing.
        query(&db, &m);
        settle(&db);
        let st = db.stats().range_reduce;
        assert_eq!((st.rewrites_planned, st.rewrites, st.rewrites_skipped_conflict), (0, 0, 1), "{st:?}");
        assert_eq!(marked(&db), 1, "only the compaction's mark");
        check_all(&db, &m);
        // The compaction ends; the next identical query compacts.
        {
            let mut running = crate::db::lock(&inner.running);
            f.being_compacted.store(false, Ordering::Release);
            running.retain(|r| *r != range);
        }
        query(&db, &m);
        expect_installed(&db, &m);
    }

    #[test]
    fn the_query_claims_its_files_before_it_reads() {
        let (db, m) = setup();
        let files = meeting_files(&db);
        let it = range_iter(&db);
        // Decided and claimed: every file the rewrite will replace is held, so no compaction picks it.
        assert_eq!(marked(&db), files.len(), "{} files meet the range", files.len());
        let eager = Options { max_bytes_for_level_base: 1, ..opts() };
        let v = crate::db::lock(&db.inner.state).current.clone();
        let pointers = crate::db::lock(&db.inner.versions).compact_pointers.clone();
        let running = crate::db::lock(&db.inner.running).clone();
        if let Some(c) = crate::compaction::pick(&v, &eager, &pointers, &running) {
            for f in c.inputs.iter().chain(&c.next) {
                assert!(
                    !files.iter().any(|(_, g)| g.number() == f.number()),
                    "picked claimed file {}",
                    f.number()
                );
            }
        }
        walk(it, &m);
        expect_installed(&db, &m);
        assert_eq!(db.stats().range_reduce.rewrites_planned, 1);
    }

    #[test]
    fn a_query_stopped_short_releases_its_claim() {
        let (db, m) = setup();
        let mut it = range_iter(&db);
        assert!(marked(&db) > 0);
        it.seek_to_first();
        assert!(it.valid());
        it.next();
        drop(it);
        assert_eq!(marked(&db), 0);
        let st = db.stats().range_reduce;
        assert_eq!((st.rewrites_incomplete, st.rewrites), (1, 0), "{st:?}");
        check_all(&db, &m);
    }

    #[test]
    fn a_claim_left_open_expires_and_the_rewrite_claims_again() {
        let (db, m) = setup();
        let mut o = Options { disable_auto_compactions: true, ..opts() };
        o.range_reduce.claim_timeout = Duration::ZERO;
        // Reopen with the timeout (the setup's store is flushed, so nothing is lost).
        let fs = db.inner.fs.clone();
        db.close().unwrap();
        let db = Db::open(fs, "/db", o).unwrap();
        let it = range_iter(&db);
        // The compaction threads release a claim whose query stays open past the timeout.
        let t = Instant::now();
        while marked(&db) > 0 {
            assert!(t.elapsed() < Duration::from_secs(20), "claim never expired");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(db.stats().range_reduce.rewrites_claims_expired, 1);
        walk(it, &m);
        // Nothing changed meanwhile, so the rewrite's own claim succeeds.
        expect_installed(&db, &m);
    }

    /// Rewrites run on the flush thread, which must never wait for `work`: while an exclusive job (level
    /// renaming, `compact_range`) holds it, a queued rewrite waits and flushes go on.
    #[test]
    fn a_queued_rewrite_never_holds_up_flushes_during_an_exclusive_job() {
        let (db, mut m) = setup();
        let exclusive = db.inner.work.write().unwrap();
        query(&db, &m);
        assert!(db.inner.rr.has_work(), "the rewrite is queued");
        let flushed = db.stats().flushes;
        let w = WriteOptions::default();
        for i in 400..700 {
            let v = format!("v2-{i}-{}", "y".repeat(20)).into_bytes();
            db.put(&w, &k(i), &v).unwrap();
            m.insert(k(i), v);
        }
        // The puts filled a memtable (over 8 KiB, not so much that writers stall); its flush must not wait
        // for the exclusive job.
        let t = Instant::now();
        while db.stats().flushes == flushed {
            assert!(t.elapsed() < Duration::from_secs(20), "a queued rewrite held up the flushes");
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(db.inner.rr.has_work(), "the rewrite waits for the exclusive job");
        drop(exclusive);
        // The new L0 file is newer than everything the query collected: it stays above the run.
        expect_installed(&db, &m);
    }

    #[test]
    fn compactions_racing_a_rewrite_never_pick_its_claimed_files() {
        let (db, m) = setup();
        let ran = Arc::new(AtomicUsize::new(0));
        let ran2 = ran.clone();
        // Every level is over its target for the picker, so it picks whatever is free.
        let eager = Options { max_bytes_for_level_base: 1, ..opts() };
        *crate::db::lock(&db.inner.rr.on_claim) = Some(Box::new(move |inner, claimed| {
            assert!(!claimed.is_empty());
            for (_, f) in claimed {
                assert!(f.being_compacted.load(Ordering::Acquire), "claimed file {} not marked", f.number());
            }
            for _ in 0..8 {
                let c = {
                    let s = crate::db::lock(&inner.state);
                    let mut running = crate::db::lock(&inner.running);
                    let v = s.current.clone();
                    drop(s);
                    let pointers = crate::db::lock(&inner.versions).compact_pointers.clone();
                    let Some(c) = crate::compaction::pick(&v, &eager, &pointers, &running) else { break };
                    for f in c.inputs.iter().chain(&c.next) {
                        assert!(
                            !claimed.iter().any(|(_, g)| g.number() == f.number()),
                            "compaction picked claimed file {}",
                            f.number()
                        );
                        f.being_compacted.store(true, Ordering::Release);
                    }
                    running.push((c.level + 1, Vec::new(), Vec::new()));
                    c
                };
                inner.run_compaction(&c, true).unwrap();
                let mut running = crate::db::lock(&inner.running);
                for f in c.inputs.iter().chain(&c.next) {
                    f.being_compacted.store(false, Ordering::Release);
                }
                let i = running.iter().position(|r| r.1.is_empty()).unwrap();
                running.swap_remove(i);
                ran2.fetch_add(1, Ordering::Relaxed);
            }
        }));
        query(&db, &m);
        settle(&db);
        *crate::db::lock(&db.inner.rr.on_claim) = None;
        let st = db.stats().range_reduce;
        assert!(ran.load(Ordering::Relaxed) > 0, "no compaction raced the rewrite");
        // The racing compactions touched only unclaimed files: the rewrite either installed or, if one of them
        // changed the range above its output level, aborted at install. Either way nothing is lost.
        assert_eq!(st.rewrites + st.rewrites_aborted, 1, "{st:?}");
        assert_eq!(st.rewrites_claim_conflicts, 0, "{st:?}");
        check_all(&db, &m);
    }
}
