//! Background jobs (docs/lsm.md §4-5) as the flush, compaction and purge threads (`background.rs`) run them: memtable flush,
//! compaction, manual `compact_range`, deletion of obsolete tables and WALs, and the waits that let callers
//! block until such work is done.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::compaction::{self, Compaction, OutputSink};
use crate::edit::VersionEdit;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::ikey;
use crate::memtable::MemTable;
use crate::output_cut::OutputCut;
use crate::version::NUM_LEVELS;

use super::{Inner, lock, table_options};

impl Inner {
    pub(super) fn wait_for_flush(&self) -> Result<()> {
        let mut s = lock(&self.state);
        loop {
            if let Some(e) = &s.bg_error {
                return Err(Error::Background(Box::new(e.clone())));
            }
            if s.imm.is_empty() {
                return Ok(());
            }
            if s.shutting_down {
                return Err(Error::Closed);
            }
            self.bg_cv.notify_all();
            s = self.done_cv.wait_timeout(s, Duration::from_millis(100)).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    pub(super) fn wait_for_compactions(&self) -> Result<()> {
        let mut s = lock(&self.state);
        loop {
            if let Some(e) = &s.bg_error {
                return Err(Error::Background(Box::new(e.clone())));
            }
            let due = !self.opts.disable_auto_compactions
                && compaction::scores(&s.current, &self.opts).iter().any(|&x| x >= 1.0);
            if s.imm.is_empty()
                && !due
                && !self.rr.has_work()
                && lock(&self.running).is_empty()
                && !self.purge_pending()
            {
                return Ok(());
            }
            if s.shutting_down {
                return Err(Error::Closed);
            }
            self.bg_cv.notify_all();
            s = self.done_cv.wait_timeout(s, Duration::from_millis(100)).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// REQUIRES: `flush_work` held; `m` is the oldest immutable memtable.
    pub(super) fn flush_memtable(&self, m: &Arc<MemTable>) -> Result<()> {
        let started = Instant::now();
        let mut edit = VersionEdit::default();
        let topts = table_options(&self.opts);
        let bytes = {
            let mut next = || lock(&self.versions).new_file_number();
            let mut sink = OutputSink {
                fs: &*self.fs,
                dir: &self.dir,
                new_number: &mut next,
                table: topts,
                cut: OutputCut::never(),
            };
            let tombs = m.tombstones();
            let keep = self.range_deletes.keeps_local_tombstones();
            let smallest = self.smallest_snapshot();
            let mut global = self.range_deletes.cover(b"", None, smallest)?;
            let out = compaction::write_outputs(
                &mut sink,
                &mut m.iter(),
                smallest,
                &|_| false,
                &tombs,
                if keep { Some(&tombs) } else { None },
                global.as_deref_mut(),
            )?;
            for f in &out.files {
                edit.added.push((0, f.clone()));
            }
            self.fs.sync_dir(&self.dir)?;
            out.bytes
        };
        // The next memtable's WAL is where unflushed data now starts.
        let next_log = {
            let s = lock(&self.state);
            s.imm.get(1).map_or(s.mem.log_number, |n| n.log_number)
        };
        edit.log_number = Some(next_log);
        edit.last_seq = Some(self.last_seq.load(Ordering::Acquire));
        // Range records outside the memtable live only in the WAL until the index has written them.
        let (snaps, published) = self.snapshot_list();
        edit.range_index =
            self.with_wal_synced(|frozen| self.range_deletes.flush(&snaps, published, frozen))?;
        let recorded = edit.range_index.is_some();
        let output_files = edit.added.len() as u64;
        self.warm_tables(&edit.added);
        let mut vs = lock(&self.versions);
        vs.log_and_apply(edit)?;
        let mut flushed = None;
        self.install(vs, |s| flushed = Some(s.imm.remove(0)));
        if let Some(m) = flushed {
            self.retired_mems.retire(m);
        }
        if recorded {
            self.range_deletes.state_recorded()?;
        }
        self.counters.bytes_flushed.fetch_add(bytes, Ordering::Relaxed);
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        self.counters.per_level.record(&crate::compaction_stats::Job {
            output_level: 0,
            write_bytes: bytes,
            output_files,
            micros: started.elapsed().as_micros() as u64,
            ..Default::default()
        });
        // WALs below next_log are now obsolete; the purge thread deletes them.
        self.logs_obsolete_below.fetch_max(next_log, Ordering::AcqRel);
        Ok(())
    }

    /// Runs `c`, as a trivial move when it is one and `allow_move` (manual compaction into the bottom level
    /// rewrites even a lone input, so that garbage is dropped).
    /// REQUIRES: `work` held (shared, with `c` registered as running, or exclusive).
    pub(super) fn run_compaction(&self, c: &Compaction, allow_move: bool) -> Result<()> {
        let started = Instant::now();
        let read_input_bytes: u64 = c.inputs.iter().map(|f| f.info.size).sum();
        let mut job = crate::compaction_stats::Job {
            output_level: c.level + 1,
            read_input_bytes,
            read_output_bytes: c.input_bytes() - read_input_bytes,
            input_files: (c.inputs.len() + c.next.len()) as u64,
            ..Default::default()
        };
        let mut vs_edit;
        if allow_move && c.is_trivial_move() {
            vs_edit = VersionEdit::default();
            for f in &c.inputs {
                vs_edit.deleted.push((c.level as u32, f.number()));
                vs_edit.added.push(((c.level + 1) as u32, f.info.clone()));
            }
            if c.level > 0
                && let Some(last) = c.inputs.iter().map(|f| &f.info.largest).max_by(|a, b| ikey::cmp(a, b))
            {
                vs_edit.compact_pointers.push((c.level as u32, last.clone()));
            }
            self.counters.trivial_moves.fetch_add(1, Ordering::Relaxed);
            job.trivial_move = true;
        } else {
            let smallest = self.smallest_snapshot();
            let mut next = || lock(&self.versions).new_file_number();
            let mut sink = OutputSink {
                fs: &*self.fs,
                dir: &self.dir,
                new_number: &mut next,
                table: table_options(&self.opts),
                cut: OutputCut::aligned(
                    self.opts.target_file_size_base,
                    self.opts.effective_max_compaction_bytes(),
                    self.opts.level_compaction_dynamic_file_size,
                    c.grandparents.clone(),
                ),
            };
            let keep = self.range_deletes.keeps_local_tombstones();
            let lo = c.inputs.iter().chain(&c.next).map(|f| f.smallest_user()).min().unwrap_or_default();
            let mut global = self.range_deletes.cover(lo, None, smallest)?;
            let (e, out) =
                compaction::run(c, &self.table_cache, &mut sink, smallest, keep, global.as_deref_mut())?;
            self.fs.sync_dir(&self.dir)?;
            self.counters.compact_read_bytes.fetch_add(c.input_bytes(), Ordering::Relaxed);
            self.counters.compact_write_bytes.fetch_add(out.bytes, Ordering::Relaxed);
            self.counters.compaction_range_covered.fetch_add(out.range_covered, Ordering::Relaxed);
            job.write_bytes = out.bytes;
            job.output_files = out.files.len() as u64;
            vs_edit = e;
        }
        vs_edit.last_seq = Some(self.last_seq.load(Ordering::Acquire));
        // Entries dropped under a range record of the global index: that record must be durable before the edit
        // that drops them is (its WAL may not be synced yet).
        self.with_wal_synced(|_| Ok(()))?;
        if !job.trivial_move {
            self.warm_tables(&vs_edit.added);
        }
        let mut vs = lock(&self.versions);
        // On failure the outputs stay on disk: a MANIFEST write or sync that failed may still have made the edit
        // durable, and removing tables it names would leave the next open with a MANIFEST pointing at nothing.
        // Startup cleanup removes them if the recovered version does not reference them.
        vs.log_and_apply(vs_edit)?;
        let v = self.install(vs, |_| {});
        job.micros = started.elapsed().as_micros() as u64;
        self.counters.per_level.record(&job);
        if c.bottommost {
            drop(v);
            let (current, oldest, mem_floor) = self.gc_view();
            self.range_deletes.after_bottommost_compaction(&current, oldest, mem_floor);
        }
        self.counters.compactions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    pub(super) fn compact_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let _w = self.work.write().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = lock(&self.state).bg_error.clone() {
            return Err(Error::Background(Box::new(e)));
        }
        let v = lock(&self.state).current.clone();
        let deepest = (0..NUM_LEVELS).rev().find(|&l| !v.levels[l].is_empty()).unwrap_or(0);
        for level in 0..deepest.max(1) {
            if level + 1 >= NUM_LEVELS {
                break;
            }
            let v = lock(&self.state).current.clone();
            let inputs = v.overlapping(level, start, end);
            if inputs.is_empty() {
                continue;
            }
            let c = Compaction::new(v, level, inputs);
            // A move that would end at the bottom is rewritten instead: manual compaction should drop garbage.
            let r = self.run_compaction(&c, level + 1 < deepest);
            if let Err(e) = r {
                self.set_bg_error(e.clone());
                return Err(e);
            }
            self.purge_obsolete();
        }
        self.done_cv.notify_all();
        {
            // The flush thread runs the range-delete GC a bottommost compaction planned; wake it, under the lock
            // it waits with, rather than leave it to its next timeout.
            let _s = lock(&self.state);
            self.bg_cv.notify_all();
        }
        Ok(())
    }

    /// Deletes tables no version references any more; returns whether there were any.
    pub(super) fn purge_obsolete(&self) -> bool {
        let nums: Vec<u64> = {
            let mut o = lock(&self.obsolete);
            if o.is_empty() {
                return false;
            }
            self.purging.fetch_add(1, Ordering::AcqRel);
            std::mem::take(&mut *o)
        };
        for n in nums {
            self.table_cache.evict(n);
            let _ = self.fs.remove_file(&self.dir.join(filename::table_name(n)));
        }
        self.purging.fetch_sub(1, Ordering::AcqRel);
        true
    }

    /// Deletes the WALs a flush made obsolete; returns whether there were any. As for tables, a failure is
    /// not retried: `open` deletes every WAL below the recovered log number.
    /// REQUIRES: called by one thread at a time (the purge thread).
    pub(super) fn purge_obsolete_logs(&self) -> bool {
        let below = self.logs_obsolete_below.load(Ordering::Acquire);
        if below <= self.logs_purged_below.load(Ordering::Acquire) {
            return false;
        }
        for name in self.fs.list_dir(&self.dir).unwrap_or_default() {
            if let Some(FileKind::Log(n)) = filename::parse(&name)
                && n < below
            {
                let _ = self.fs.remove_file(&self.dir.join(&name));
            }
        }
        self.logs_purged_below.store(below, Ordering::Release);
        true
    }

    /// Whether tables or WALs wait to be deleted or are being deleted.
    fn purge_pending(&self) -> bool {
        let o = lock(&self.obsolete);
        !o.is_empty()
            || self.purging.load(Ordering::Acquire) > 0
            || self.logs_obsolete_below.load(Ordering::Acquire)
                > self.logs_purged_below.load(Ordering::Acquire)
    }
}
