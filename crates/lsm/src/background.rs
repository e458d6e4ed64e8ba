//! Background threads: one flush thread and `max_background_compactions` compaction threads, RocksDB's
//! split of `max_background_jobs` into a high-priority flush pool and a low-priority compaction pool, and a
//! purge thread that deletes the tables no version references any more and the WALs flushes made obsolete.
//!
//! Why separate: with one thread doing both, a memtable that fills while a compaction runs cannot be flushed
//! until the compaction ends, so writers stall on `max_write_buffer_number` for the length of the compaction,
//! and L0 grows in lockstep with compactions instead of independently of them. With a flush thread, flushes
//! proceed during compactions and writers stall only when compactions truly fall behind (L0 or pending-bytes
//! limits).
//!
//! The flush thread flushes the oldest immutable memtable and runs the range-delete strategy's index
//! maintenance, holding `flush_work`; everything that produces a MANIFEST edit naming range-index state happens
//! on it, so those edits stay in order. Its flush edits only add L0 files and advance the log number. When no
//! memtable waits, it runs queued RangeReduce rewrites, as the paper's RocksDB prototype does on its flush thread:
//! a rewrite then never waits behind a compaction, and a flush waits for at most one rewrite. While a full disk
//! or quota has stopped writes, it also tries `Db::resume` at most once per `Options::auto_resume_interval`, so
//! the database takes writes again once space is freed even if nobody writes meanwhile.
//!
//! A compaction thread picks under the `running` lock, from the newest installed version, a compaction whose
//! files no running compaction holds (`picker::pick`), marks its files `being_compacted` and registers its
//! output range, runs it holding `work` shared, installs its edit, and only then unregisters: a compaction
//! picked after that sees the installed version. A RangeReduce rewrite holds `work` shared too and claims its
//! files the same way (`range_reduce/claim.rs`). Work that needs the levels to itself (level renaming, manual
//! `compact_range`) takes `work` exclusively, so no automatic compaction runs during it; flushes still do (they
//! only add L0 files, which those jobs tolerate).
//!
//! Why a purge thread: deleting a file is a metadata operation whose cost the file system decides (4 ms a file
//! was measured on one machine with online discard, 19 ms for the tables one rewrite replaced, 10 ms for a
//! flushed WAL). Done by the job that freed them, it delayed the next flush or rewrite and lengthened the time
//! queued rewrites hold their claims. Deletion may lag: a file not yet deleted is unreferenced, and `open`
//! deletes any it finds.
//!
//! Edits from different threads interleave in the MANIFEST; each names only its own files, so applying them in
//! any order gives the same levels. `Inner::install` makes the in-memory `current` follow MANIFEST order.

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Inner, State, lock};
use crate::compaction::{self, Compaction};
use crate::edit::FileInfo;
use crate::error::{Error, Result};
use crate::options::CpuPriority;
use crate::picker::RunningRange;
use crate::version::{Version, VersionSet};

/// Starts the flush thread, the purge thread and the compaction threads.
pub(super) fn spawn(inner: &Arc<Inner>) -> Result<Vec<JoinHandle<()>>> {
    let start = |name: String, body: fn(Arc<Inner>)| -> Result<JoinHandle<()>> {
        let i = inner.clone();
        std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                set_cpu_priority(i.opts.background_cpu_priority);
                body(i)
            })
            .map_err(Error::from)
    };
    let mut handles =
        vec![start("lsm-flush".into(), Inner::flush_loop)?, start("lsm-purge".into(), Inner::purge_loop)?];
    for n in 0..inner.opts.max_background_compactions {
        handles.push(start(format!("lsm-compact-{n}"), Inner::compaction_loop)?);
    }
    Ok(handles)
}

/// Sets the calling thread's CPU priority. A hint: where the system refuses or lacks it, the thread keeps its
/// priority.
fn set_cpu_priority(p: CpuPriority) {
    match p {
        CpuPriority::Normal => {}
        #[cfg(target_os = "linux")]
        CpuPriority::Low => {
            // SAFETY: both calls take and return plain integers and touch no memory of ours. On Linux,
            // PRIO_PROCESS with a thread id sets that one thread's nice value; raising one's own nice value needs
            // no privilege.
            let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19) };
        }
        #[cfg(not(target_os = "linux"))]
        CpuPriority::Low => {}
    }
}

/// What the flush thread does next.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Flush the oldest immutable memtable (and maintain the range-delete index).
    Flush,
    /// Run a queued RangeReduce rewrite.
    Rewrite,
    /// Try a resume after a full disk (`Options::auto_resume_interval`).
    Resume,
}

impl Inner {
    /// Makes the version just applied under `vs` current (unless a later one already is), and runs `f` on the
    /// state in the same critical section (a flush drops its memtable there, so no reader sees neither).
    /// REQUIRES: `vs` is the guard under which the edit was applied.
    pub(super) fn install(&self, vs: MutexGuard<'_, VersionSet>, f: impl FnOnce(&mut State)) -> Arc<Version> {
        let v = vs.current();
        let n = self.version_counter.fetch_add(1, Ordering::AcqRel) + 1;
        drop(vs);
        let mut s = lock(&self.state);
        if n > s.version_number {
            s.version_number = n;
            s.pending_compaction_bytes = compaction::pending_compaction_bytes(&v, &self.opts);
            s.current = v.clone();
        }
        f(&mut s);
        v
    }

    /// Opens freshly written tables into the table cache (index, filter, tombstones), as RocksDB does when it
    /// checks a new table after writing it, so the first reads after a flush, compaction or rewrite do not pay
    /// for it. Called before the edit that installs them is applied: warmed after it, readers that came first
    /// opened the tables themselves (18 % of the lookups' time in a profile of a write-heavy mix). A failure here
    /// is left to the reader that needs the table.
    pub(super) fn warm_tables(&self, added: &[(u32, FileInfo)]) {
        for (_, f) in added {
            let _ = self.table_cache.get(f.number, f.size);
        }
    }

    /// After any background job: wake waiters and the other workers (the purge thread among them: the job may
    /// have left tables unreferenced).
    fn job_done(&self, r: Result<()>) {
        if let Err(e) = r {
            self.set_bg_error(e);
        }
        {
            let mut s = lock(&self.state);
            s.bg_epoch += 1;
        }
        self.done_cv.notify_all();
        self.bg_cv.notify_all();
    }

    fn flush_loop(self: Arc<Self>) {
        loop {
            let next = {
                let mut s = lock(&self.state);
                loop {
                    if s.shutting_down {
                        return;
                    }
                    match &s.bg_error {
                        // Out of space: resume once space is back, whether or not anyone writes (RocksDB's
                        // recovery from a full disk runs in the background too). Writes try as well; the
                        // interval is shared.
                        Some(e) if self.auto_resume_due(e) => break Next::Resume,
                        Some(_) => {}
                        None if !s.imm.is_empty() || self.range_deletes.maintenance_due() => {
                            break Next::Flush;
                        }
                        None if self.rr.has_queued() => break Next::Rewrite,
                        None => {}
                    }
                    s = self
                        .bg_cv
                        .wait_timeout(s, Duration::from_millis(500))
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            };
            if next == Next::Resume {
                // Leads the write queue like a caller's `resume`; this thread holds nothing meanwhile. A failure
                // leaves the first error in place for the next try.
                let _ = self.resume();
                self.done_cv.notify_all();
                continue;
            }
            if next == Next::Rewrite {
                // Never wait for `work` here: an exclusive job (level renaming, `compact_range`) may run for long,
                // and flushes must go on meanwhile. Retry shortly, or when a job finishes.
                match self.range_reduce_rewrite_step() {
                    Some(r) => self.job_done(r),
                    None => {
                        let s = lock(&self.state);
                        let _ = self.bg_cv.wait_timeout(s, Duration::from_millis(20));
                    }
                }
                continue;
            }
            let r = (|| -> Result<()> {
                let _f = lock(&self.flush_work);
                if self.range_deletes.maintenance_due() {
                    self.maintain_range_deletes()?;
                }
                let imm = lock(&self.state).imm.first().cloned();
                match imm {
                    Some(m) => self.flush_memtable(&m),
                    None => Ok(()),
                }
            })();
            self.job_done(r);
        }
    }

    /// Deletes unreferenced tables and obsolete WALs, and frees flushed memtables no reader holds any more,
    /// whenever a job finishes (or every 500 ms: a reader may drop the last reference to a table or memtable),
    /// and once more at shutdown.
    fn purge_loop(self: Arc<Self>) {
        loop {
            let epoch = lock(&self.state).bg_epoch;
            self.retired_mems.release();
            let tables = self.purge_obsolete();
            let logs = self.purge_obsolete_logs();
            if tables || logs {
                self.done_cv.notify_all();
            }
            let s = lock(&self.state);
            if s.shutting_down {
                drop(s);
                self.purge_obsolete();
                self.purge_obsolete_logs();
                return;
            }
            // The epoch check closes the window between the purge and the wait.
            if s.bg_epoch == epoch {
                let _ = self.bg_cv.wait_timeout(s, Duration::from_millis(500));
            }
        }
    }

    fn compaction_loop(self: Arc<Self>) {
        loop {
            let epoch = {
                let s = lock(&self.state);
                if s.shutting_down {
                    return;
                }
                if s.bg_error.is_some() {
                    let _ = self.bg_cv.wait_timeout(s, Duration::from_millis(500));
                    continue;
                }
                s.bg_epoch
            };
            self.expire_range_reduce_claims();
            if let Some(r) = self.renaming_step() {
                self.job_done(r);
                continue;
            }
            if let Some(r) = self.compaction_step() {
                self.job_done(r);
                continue;
            }
            // Nothing to do: sleep until some job finishes (a flush adds an L0 file, a compaction or rewrite frees
            // files). The epoch check closes the window between the pick and the wait.
            let s = lock(&self.state);
            if s.shutting_down || s.bg_epoch != epoch {
                continue;
            }
            let _ = self.bg_cv.wait_timeout(s, Duration::from_millis(500));
        }
    }

    /// A level renaming when due (with `work` held exclusively).
    fn renaming_step(&self) -> Option<Result<()>> {
        let v = lock(&self.state).current.clone();
        if !self.renaming_due(&v) {
            return None;
        }
        let _w = self.work.write().unwrap_or_else(|p| p.into_inner());
        self.rename_levels_if_due()
    }

    /// One automatic compaction, if one is due and free of conflicts.
    fn compaction_step(&self) -> Option<Result<()>> {
        if self.opts.disable_auto_compactions {
            return None;
        }
        let _w = self.work.read().unwrap_or_else(|p| p.into_inner());
        let (c, range) = self.pick_and_register()?;
        let r = self.run_compaction(&c, true);
        let mut running = lock(&self.running);
        for f in c.inputs.iter().chain(&c.next) {
            f.being_compacted.store(false, Ordering::Release);
        }
        if let Some(i) = running.iter().position(|x| *x == range) {
            running.swap_remove(i);
        }
        Some(r)
    }

    fn pick_and_register(&self) -> Option<(Compaction, RunningRange)> {
        let s = lock(&self.state);
        let mut running = lock(&self.running);
        let v = s.current.clone();
        drop(s);
        let pointers = lock(&self.versions).compact_pointers.clone();
        let c = compaction::pick(&v, &self.opts, &pointers, &running)?;
        for f in c.inputs.iter().chain(&c.next) {
            f.being_compacted.store(true, Ordering::Release);
        }
        let lo = c.inputs.iter().chain(&c.next).map(|f| f.smallest_user()).min().unwrap_or_default().to_vec();
        let hi = c.inputs.iter().chain(&c.next).map(|f| f.largest_user()).max().unwrap_or_default().to_vec();
        let range = (c.level + 1, lo, hi);
        running.push(range.clone());
        Some((c, range))
    }
}
