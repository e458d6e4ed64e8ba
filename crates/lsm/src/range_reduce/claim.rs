//! File claims of a query-driven rewrite: the same marks a running compaction holds, so the two never work on
//! the same files at once.
//!
//! A compaction marks its inputs `being_compacted` and registers its output range in `running` (under the
//! `running` lock; `picker::pick` skips marked files and output ranges meeting a registered one). A rewrite does
//! the same with the files it will delete — the files of the chosen levels the query read — and registers the
//! span of those files at every chosen level it writes to (the merged run at the deepest chosen level, heads and
//! tails at the others). The check and the marking happen under one hold of the `running` lock, so either the
//! compaction or the rewrite gets a file, never both:
//!
//! - a file a running compaction holds cannot be claimed: the rewrite is aborted (the query returned long ago);
//! - a running compaction writing into a chosen level within the claimed span could produce a file that overlaps
//!   a head, tail or run the rewrite writes there: aborted too;
//! - when L0 is chosen, any running L0 compaction aborts the rewrite (it may move older L0 data above newer
//!   collected data), and the rewrite's marks on L0 files keep any new L0 compaction from starting (the picker
//!   runs one L0 compaction at a time).
//!
//! The claim is released (marks cleared, ranges unregistered) when the guard drops, after the edit is installed
//! or the rewrite aborted, so a compaction picked afterwards sees the new version.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Inner, lock};
use crate::picker::RunningRange;
use crate::version::{FileMeta, Version};

/// Claimed files and registered output ranges of one rewrite; released on drop.
pub(super) struct Claim<'a> {
    inner: &'a Inner,
    files: Vec<Arc<FileMeta>>,
    ranges: Vec<RunningRange>,
}

impl Inner {
    /// Claims `files` (with their levels) for a rewrite writing to `levels` of `v`, or `None` when a running
    /// compaction holds one of them or writes where the rewrite will.
    pub(super) fn claim_for_rewrite<'a>(
        &'a self,
        v: &Version,
        levels: &[usize],
        files: &[(usize, Arc<FileMeta>)],
    ) -> Option<Claim<'a>> {
        let (Some(lo), Some(hi)) = (
            files.iter().map(|(_, f)| f.smallest_user()).min(),
            files.iter().map(|(_, f)| f.largest_user()).max(),
        ) else {
            return Some(Claim { inner: self, files: Vec::new(), ranges: Vec::new() });
        };
        let mut running = lock(&self.running);
        let busy = |f: &FileMeta| f.being_compacted.load(Ordering::Acquire);
        if files.iter().any(|(_, f)| busy(f)) {
            return None;
        }
        if levels.contains(&0) && v.levels[0].iter().any(|f| busy(f)) {
            return None;
        }
        let ranges: Vec<RunningRange> =
            levels.iter().filter(|&&l| l > 0).map(|&l| (l, lo.to_vec(), hi.to_vec())).collect();
        let meets_running = running
            .iter()
            .any(|(rl, rlo, rhi)| ranges.iter().any(|(l, a, b)| l == rl && !(b < rlo || a > rhi)));
        if meets_running {
            return None;
        }
        for (_, f) in files {
            f.being_compacted.store(true, Ordering::Release);
        }
        running.extend(ranges.iter().cloned());
        Some(Claim { inner: self, files: files.iter().map(|(_, f)| f.clone()).collect(), ranges })
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut running = lock(&self.inner.running);
        for f in &self.files {
            f.being_compacted.store(false, Ordering::Release);
        }
        for r in &self.ranges {
            if let Some(i) = running.iter().position(|x| x == r) {
                running.swap_remove(i);
            }
        }
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

    fn query(db: &Db, m: &Model) {
        let ro = ReadOptions { lower_bound: Some(k(400)), upper_bound: Some(k(1600)), ..Default::default() };
        let mut it = db.iter(&ro).unwrap();
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

    /// Waits until no rewrite is queued or running (`wait_for_compactions` would also wait for the registered
    /// fake compaction).
    fn settle(db: &Db) {
        let t = Instant::now();
        while db.inner.rr.has_work() {
            assert!(t.elapsed() < Duration::from_secs(20), "rewrite never finished");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn file_held_by_a_running_compaction_aborts_the_rewrite_not_the_query() {
        let (db, m) = setup();
        let inner = db.inner.clone();
        // A compaction is running on the deepest level's first file meeting the range.
        let v = crate::db::lock(&inner.state).current.clone();
        let (level, f) = (1..crate::version::NUM_LEVELS)
            .rev()
            .find_map(|l| {
                v.levels[l].iter().find(|f| super::super::meets(f, &k(400), &k(1600))).map(|f| (l, f.clone()))
            })
            .unwrap();
        let range = (level + 1, f.smallest_user().to_vec(), f.largest_user().to_vec());
        {
            let mut running = crate::db::lock(&inner.running);
            f.being_compacted.store(true, Ordering::Release);
            running.push(range.clone());
        }
        query(&db, &m);
        settle(&db);
        let st = db.stats().range_reduce;
        assert_eq!((st.rewrites, st.rewrites_aborted, st.rewrites_claim_conflicts), (0, 1, 1), "{st:?}");
        assert!(f.being_compacted.load(Ordering::Acquire), "the rewrite released a mark it did not set");
        check_all(&db, &m);
        // The compaction ends; the next identical query compacts.
        {
            let mut running = crate::db::lock(&inner.running);
            f.being_compacted.store(false, Ordering::Release);
            running.retain(|r| *r != range);
        }
        query(&db, &m);
        db.wait_for_compactions().unwrap();
        let st = db.stats().range_reduce;
        assert_eq!((st.rewrites, st.rewrites_aborted), (1, 1), "{st:?}");
        check_all(&db, &m);
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
