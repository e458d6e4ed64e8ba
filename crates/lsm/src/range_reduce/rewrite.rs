//! The background half of a query-driven compaction: validate the plan, write the merged run at the deepest
//! chosen level and the out-of-range heads and tails at their own levels, install one version edit. Also
//! Level-Renaming. A rewrite runs on the flush thread between flushes, as the paper's runs on RocksDB's flush
//! thread, with the `work` lock held shared, like a compaction, beside compactions (on a compaction thread it
//! waited behind each compaction, holding its claim, so more of the following queries found their files
//! claimed). The files it deletes were claimed when its query decided (`claim.rs`), so no compaction took them
//! meanwhile; if that claim expired (the query's iterator stayed open too long), the rewrite claims them again
//! and aborts if a compaction holds one. Level-Renaming takes `work` exclusively. What
//! the checks below guard against is what changed around the claim — levels between or below the chosen ones,
//! an expired claim, a renaming — and what compactions of unclaimed files changed before the install (checked
//! again under the `versions` lock the edit is applied under).
//!
//! Validity. The plan recorded, for every level from the shallowest chosen one down, the files whose keys meet
//! `[lower, upper)`. If any of these sets changed down to the target level, a flush or compaction moved data
//! into, out of or through the range among the chosen levels, and installing the run could put older versions
//! above newer ones: the rewrite is aborted (outputs deleted, nothing installed; the query already returned).
//! Changes above the shallowest chosen level only bring newer data, which stays above the run, and are fine; so
//! do new L0 files (flushes) when L0 is chosen, so there only the claimed files must remain; so do changes below
//! the target level, where compactions only move older data deeper. After writing, the resulting levels must
//! still be disjoint (a concurrent trivial move may have put a file where a combined head and tail would go):
//! otherwise abort too.
//!
//! Snapshots. The runs hold every version of every key in range from the chosen levels, so the merge can apply
//! the same rule as a compaction: a version is dropped only when a newer version or a covering range tombstone is
//! visible at the oldest live snapshot, and a point tombstone only when no deeper level can hold its key. Range
//! tombstones of the claimed files are clipped at the range bounds: the in-range pieces are compacted like a
//! compaction's (kept for snapshots; dropped only at the bottom) and written with the run; the out-of-range pieces
//! stay, unchanged, with the head and tail of their file at their level. Readers of older versions keep their
//! pinned files; any reader of the new version reads at a sequence at or above the oldest snapshot.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, TryLockError};

use super::tap::Run;
use super::{Inner, Job, RangeReduceMode, add, lock, meets};
use crate::compaction::{self, OutputSink, Outputs, compact_tombstones};
use crate::db::table_options;
use crate::edit::{FileInfo, VersionEdit};
use crate::error::Result;
use crate::ikey;
use crate::iter::{InternalIter, MergingIter};
use crate::output_cut::OutputCut;
use crate::table::TableIter;
use crate::tombstones::{Fragments, Tombstone};
use crate::version::{FileMeta, NUM_LEVELS, Version};

/// Which parts of a table an [`OutsideIter`] yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Head,
    Tail,
    Both,
}

/// The entries of one table outside `[lower, upper)`: the head (keys below `lower`), then the tail (keys at or
/// after `upper`), reading only the blocks that hold them. Forward-only: `write_outputs` needs nothing else;
/// backward moves leave it invalid.
struct OutsideIter {
    it: TableIter,
    lower: Vec<u8>,
    upper: Vec<u8>,
    part: Part,
    /// 0 head, 1 tail, 2 done.
    phase: u8,
    read: Arc<AtomicU64>,
}

impl OutsideIter {
    fn jump_to_tail(&mut self) {
        if self.part == Part::Head {
            self.phase = 2;
        } else {
            self.it.seek(&ikey::make(&self.upper, ikey::MAX_SEQ, ikey::SEEK_KIND));
            self.phase = 1;
        }
    }

    fn settle(&mut self) {
        if self.phase == 0 && self.it.valid() && ikey::user_key(self.it.key()) >= self.lower.as_slice() {
            self.jump_to_tail();
        }
        if self.valid() {
            self.read.fetch_add((self.it.key().len() + self.it.value().len()) as u64, Ordering::Relaxed);
        }
    }
}

impl InternalIter for OutsideIter {
    fn valid(&self) -> bool {
        self.phase < 2 && self.it.valid()
    }
    fn seek_to_first(&mut self) {
        if self.part == Part::Tail {
            self.jump_to_tail();
        } else {
            self.phase = 0;
            self.it.seek_to_first();
        }
        self.settle();
    }
    fn seek_to_last(&mut self) {
        self.phase = 2;
    }
    fn seek(&mut self, target: &[u8]) {
        self.seek_to_first();
        while self.valid() && ikey::cmp(self.it.key(), target).is_lt() {
            self.next();
        }
    }
    fn next(&mut self) {
        self.it.next();
        self.settle();
    }
    fn prev(&mut self) {
        self.phase = 2;
    }
    fn key(&self) -> &[u8] {
        self.it.key()
    }
    fn value(&self) -> &[u8] {
        self.it.value()
    }
    fn status(&self) -> Result<()> {
        self.it.status()
    }
}

/// Whether the levels of `v` minus `deleted` plus `added` stay sorted and disjoint (levels >= 1).
fn stays_disjoint(v: &Version, deleted: &[(u32, u64)], added: &[(u32, FileInfo)]) -> bool {
    for l in 1..NUM_LEVELS {
        if !added.iter().any(|(al, _)| *al as usize == l) {
            continue;
        }
        let mut ranges: Vec<(&[u8], &[u8])> = v.levels[l]
            .iter()
            .filter(|f| !deleted.contains(&(l as u32, f.number())))
            .map(|f| (f.info.smallest.as_slice(), f.info.largest.as_slice()))
            .chain(
                added
                    .iter()
                    .filter(|(al, _)| *al as usize == l)
                    .map(|(_, f)| (f.smallest.as_slice(), f.largest.as_slice())),
            )
            .collect();
        ranges.sort_by(|a, b| ikey::cmp(a.0, b.0));
        if ranges.windows(2).any(|w| ikey::cmp(w[0].1, w[1].0).is_ge()) {
            return false;
        }
    }
    true
}

/// Whether the files meeting `[lo, hi)` at every planned level shallower than `until` are still those the
/// plan recorded. New L0 files are flushes: newer than everything collected, they stay above the run; every
/// other change conflicts.
fn plan_still_holds(v: &Version, meeting: &[(usize, Vec<u64>)], lo: &[u8], hi: &[u8], until: usize) -> bool {
    meeting.iter().filter(|(l, _)| *l < until).all(|(l, want)| {
        let mut now: Vec<u64> =
            v.levels[*l].iter().filter(|f| meets(f, lo, hi)).map(|f| f.number()).collect();
        let mut want = want.clone();
        now.sort_unstable();
        want.sort_unstable();
        if *l == 0 { want.iter().all(|n| now.binary_search(n).is_ok()) } else { now == want }
    })
}

impl Inner {
    /// Hook of the flush loop (the only caller): runs one queued rewrite with `work` held shared, as a
    /// compaction. Returns `None` without waiting when an exclusive job holds `work` (or the queue is empty).
    pub(in crate::db) fn range_reduce_rewrite_step(&self) -> Option<Result<()>> {
        let _w = match self.work.try_read() {
            Ok(w) => w,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        // Set before the job leaves the queue, so `has_work` never sees neither.
        self.rr.running.store(true, Ordering::Release);
        let job = lock(&self.rr.queue).pop_front();
        let r = job.map(|job| self.rewrite(job));
        self.rr.running.store(false, Ordering::Release);
        r
    }

    fn rewrite(&self, job: Job) -> Result<()> {
        let c = &self.rr.counters;
        let Job { mut plan, runs } = job;
        let (lo, hi) = (plan.lower.as_slice(), plan.upper.as_slice());
        let Some(&target) = plan.levels.last() else { return Ok(()) };
        let v = lock(&self.state).current.clone();
        // Below the target, compactions only move older data deeper, which stays below the run (as at install).
        if !plan_still_holds(&v, &plan.meeting, lo, hi, target + 1) {
            add(&c.rewrites_aborted, 1);
            return Ok(());
        }
        // The claimed files are the ones the query read (new L0 flushes were not collected and stay).
        let claimed: Vec<(usize, Arc<FileMeta>)> = plan
            .meeting
            .iter()
            .filter(|(l, _)| plan.levels.contains(l))
            .flat_map(|(l, nums)| {
                v.levels[*l].iter().filter(|f| nums.contains(&f.number())).map(move |f| (*l, f.clone()))
            })
            .collect();
        // Held until the edit is installed or the rewrite gives up. The query's claim is normally still held;
        // if it expired, claim again: a compaction holding any of these files (or writing where the rewrite
        // will) then aborts the rewrite instead.
        let _claim = match plan.claim.take().filter(|c| c.held()) {
            Some(c) => c,
            None => match self.claim_files(&v, &plan.levels, &claimed) {
                Ok(c) => Arc::new(c),
                Err(_) => {
                    add(&c.rewrites_aborted, 1);
                    add(&c.rewrites_claim_conflicts, 1);
                    return Ok(());
                }
            },
        };
        self.rr.after_claim(self, &claimed);
        let mut created: Vec<FileInfo> = Vec::new();
        let read = Arc::new(AtomicU64::new(0));
        let written =
            self.write_rewrite_outputs(&v, target, &plan.levels, &claimed, runs, lo, hi, &read, &mut created);
        let remove_outputs = |files: &[FileInfo]| {
            for f in files {
                self.table_cache.evict(f.number);
                let _ = self.fs.remove_file(&self.dir.join(crate::filename::table_name(f.number)));
            }
        };
        let added = match written {
            Ok(a) => a,
            Err(_) => {
                // Nothing was installed: the outputs are unreferenced and the claimed files still hold the data.
                remove_outputs(&created);
                add(&c.rewrites_failed, 1);
                return Ok(());
            }
        };
        let mut edit = VersionEdit::default();
        for (l, f) in &claimed {
            edit.deleted.push((*l as u32, f.number()));
        }
        edit.added = added;
        if let Err(e) = self.fs.sync_dir(&self.dir) {
            remove_outputs(&created);
            add(&c.rewrites_failed, 1);
            let _ = e;
            return Ok(());
        }
        edit.last_seq = Some(self.last_seq.load(Ordering::Acquire));
        let bytes: u64 = edit.added.iter().map(|(_, f)| f.size).sum();
        self.warm_tables(&edit.added);
        let mut vs = lock(&self.versions);
        // Compactions of unclaimed files ran meanwhile: re-check against the version the edit applies to, under
        // the lock every edit is applied under. Down to the target level nothing that meets the range may have
        // changed (new L0 flushes aside); below it, compactions only move older data deeper, which stays below
        // the run. And a compaction's output may now sit where a head, tail or run goes.
        let now = vs.current();
        if !plan_still_holds(&now, &plan.meeting, lo, hi, target + 1)
            || !stays_disjoint(&now, &edit.deleted, &edit.added)
        {
            drop(vs);
            remove_outputs(&created);
            add(&c.rewrites_aborted, 1);
            return Ok(());
        }
        // As for compactions: after a failed MANIFEST write the outputs stay (the edit may be durable anyway).
        vs.log_and_apply(edit)?;
        self.install(vs, |_| {});
        add(&c.rewrites, 1);
        add(&c.rewrite_write_bytes, bytes);
        add(&c.rewrite_read_bytes, read.load(Ordering::Relaxed));
        add(&c.rewrite_files_removed, claimed.len() as u64);
        Ok(())
    }

    /// Writes the merged run at `target` and the heads and tails of the other chosen levels; returns the files
    /// to add. Every file created is also pushed to `created` (for cleanup on failure).
    #[allow(clippy::too_many_arguments)]
    fn write_rewrite_outputs(
        &self,
        v: &Version,
        target: usize,
        levels: &[usize],
        claimed: &[(usize, Arc<FileMeta>)],
        runs: Vec<Run>,
        lo: &[u8],
        hi: &[u8],
        read: &Arc<AtomicU64>,
        created: &mut Vec<FileInfo>,
    ) -> Result<Vec<(u32, FileInfo)>> {
        let smallest = self.smallest_snapshot();
        let keep = self.opts.range_delete_strategy.keeps_local_tombstones();
        let blind = self.opts.range_reduce.mode == RangeReduceMode::BlindMergeOnScan;
        // Range tombstones of the claimed files, whole (per file) and clipped to the range (all files).
        let mut file_ts: Vec<Vec<Tombstone>> = Vec::with_capacity(claimed.len());
        let mut in_range: Vec<Tombstone> = Vec::new();
        for (_, f) in claimed {
            let ts = if f.info.num_range_dels > 0 {
                self.table_cache.table(f)?.tombstones().to_tombstones()
            } else {
                Vec::new()
            };
            in_range.extend(Fragments::new(&ts).clipped(Some(lo), Some(hi)));
            file_ts.push(ts);
        }
        let covering = Fragments::new(&in_range);
        let bottommost =
            ((target + 1)..NUM_LEVELS).all(|l| v.levels[l].iter().all(|f| !f.overlaps(Some(lo), Some(hi))));
        let outside = |i: usize, part: Part| -> Vec<Tombstone> {
            let f = Fragments::new(&file_ts[i]);
            let mut t = Vec::new();
            if part != Part::Tail {
                t.extend(f.clipped(None, Some(lo)));
            }
            if part != Part::Head {
                t.extend(f.clipped(Some(hi), None));
            }
            t
        };
        let open = |i: usize, part: Part| -> Result<OutsideIter> {
            let f = &claimed[i].1;
            Ok(OutsideIter {
                it: self.table_cache.table(f)?.iter(),
                lower: lo.to_vec(),
                upper: hi.to_vec(),
                part,
                phase: 0,
                read: read.clone(),
            })
        };
        let mut added: Vec<(u32, FileInfo)> = Vec::new();
        let mut write = |level: usize,
                         input: &mut dyn InternalIter,
                         covering: &Fragments,
                         tombs: Vec<Tombstone>,
                         base: &dyn Fn(&[u8]) -> bool,
                         target_size: u64|
         -> Result<Outputs> {
            let mut next = || lock(&self.versions).new_file_number();
            let mut sink = OutputSink {
                fs: &*self.fs,
                dir: &self.dir,
                new_number: &mut next,
                table: table_options(&self.opts),
                cut: OutputCut::at_target(target_size),
            };
            let tombs = Fragments::new(&tombs);
            let out = compaction::write_outputs(
                &mut sink,
                input,
                smallest,
                base,
                covering,
                if keep { Some(&tombs) } else { None },
                // Entries the global range-delete index covers are kept: the index still hides them, and a
                // later compaction (which consults it under the WAL-sync rule) drops them.
                None,
            );
            // write_outputs removes its own files on error; on success record them for a later abort.
            let out = out?;
            for f in &out.files {
                created.push(f.clone());
                added.push((level as u32, f.clone()));
            }
            Ok(out)
        };
        // 1. The merged run at the target level: the collected runs plus the target level's own heads and tails.
        let mut children: Vec<Box<dyn InternalIter>> =
            runs.into_iter().map(|r| Box::new(r.into_iter()) as Box<dyn InternalIter>).collect();
        let mut tombs = compact_tombstones(&covering, smallest, bottommost).to_tombstones();
        for (i, (l, _)) in claimed.iter().enumerate() {
            if *l == target {
                children.push(Box::new(open(i, Part::Both)?));
                tombs.extend(outside(i, Part::Both));
            }
        }
        let base = |uk: &[u8]| -> bool {
            ((target + 1)..NUM_LEVELS).all(|l| v.levels[l].iter().all(|f| !f.overlaps(Some(uk), Some(uk))))
        };
        let mut merged = MergingIter::new(children);
        write(target, &mut merged, &covering, tombs, &base, self.opts.target_file_size_base)?;
        // 2. Heads and tails of the shallower chosen levels, written back at their level. L0 files are separate
        //    sorted runs: one output each. Blind Merge-on-Scan writes head and tail as two files; the file-size-
        //    aware modes combine a level's head and tail into one file (§IV-A "Writing Fewer Small Files").
        let none = Fragments::default();
        let never = |_: &[u8]| false;
        for &l in &levels[..levels.len() - 1] {
            let idx: Vec<usize> = (0..claimed.len()).filter(|&i| claimed[i].0 == l).collect();
            if l == 0 || blind {
                let parts: &[Part] = if blind { &[Part::Head, Part::Tail] } else { &[Part::Both] };
                for &i in &idx {
                    for &part in parts {
                        let mut it = open(i, part)?;
                        let size = if l == 0 { u64::MAX } else { self.opts.target_file_size_base };
                        write(l, &mut it, &none, outside(i, part), &never, size)?;
                    }
                }
            } else {
                let mut tombs = Vec::new();
                let mut kids: Vec<Box<dyn InternalIter>> = Vec::new();
                for &i in &idx {
                    kids.push(Box::new(open(i, Part::Both)?));
                    tombs.extend(outside(i, Part::Both));
                }
                let mut it = MergingIter::new(kids);
                write(l, &mut it, &none, tombs, &never, self.opts.target_file_size_base)?;
            }
        }
        Ok(added)
    }

    /// Whether Level-Renaming is enabled and due on `v` (cheap: the compaction loop asks before it takes
    /// `work` exclusively, which would wait for every running compaction).
    pub(in crate::db) fn renaming_due(&self, v: &Version) -> bool {
        let ro = &self.opts.range_reduce;
        if ro.mode == RangeReduceMode::Off || !ro.level_renaming || self.opts.disable_auto_compactions {
            return false;
        }
        let Some(last) = (1..NUM_LEVELS).rev().find(|&l| !v.levels[l].is_empty()) else { return false };
        last + 1 < NUM_LEVELS && v.level_bytes(last) >= compaction::level_target(&self.opts, last)
    }

    /// Level-Renaming (§IV-C): when the deepest non-empty level reaches its target, every level from L1 down is
    /// renamed one deeper (a metadata-only edit), so L1 is empty and each level gains a factor T of capacity.
    /// L0 keeps its name: it is where flushes land.
    /// REQUIRES: `work` held exclusively.
    pub(in crate::db) fn rename_levels_if_due(&self) -> Option<Result<()>> {
        let v = lock(&self.state).current.clone();
        if !self.renaming_due(&v) {
            return None;
        }
        let last = (1..NUM_LEVELS).rev().find(|&l| !v.levels[l].is_empty())?;
        let mut edit = VersionEdit::default();
        for l in 1..=last {
            for f in &v.levels[l] {
                edit.deleted.push((l as u32, f.number()));
                edit.added.push(((l + 1) as u32, f.info.clone()));
            }
        }
        edit.last_seq = Some(self.last_seq.load(Ordering::Acquire));
        let r = (|| -> Result<()> {
            let mut vs = lock(&self.versions);
            vs.log_and_apply(edit)?;
            self.install(vs, |_| {});
            Ok(())
        })();
        if r.is_ok() {
            add(&self.rr.counters.level_renames, 1);
        }
        Some(r)
    }
}
