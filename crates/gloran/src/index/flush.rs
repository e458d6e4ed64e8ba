//! Flushing the buffer in three steps, so the index is locked only to freeze the buffer and to install the result.
//!
//! A flush writes the buffer into level 0 and compacts every level that overflows: tens of milliseconds for a
//! 4 MiB buffer, longer as the levels grow. The engine holds the index behind a lock; held for the whole flush,
//! it stopped every range delete (which records under the write lock) and every lookup the estimator sent to
//! the index, and with them every writer queued behind a range delete. So, as an LSM engine flushes an immutable
//! memtable while a new one takes writes:
//!
//! 1. [`GlobalIndex::begin_flush`] (write lock): the buffer becomes the *frozen* buffer, a new one takes records.
//!    Readers ask the frozen buffer after the new one; nothing they can see has changed.
//! 2. [`FlushJob::run`] (no lock): a detached copy of the disk levels takes the frozen areas and writes new
//!    DR-tree files, exactly as the one-step flush did.
//! 3. [`GlobalIndex::finish_flush`] (write lock): the new levels replace the old ones and the frozen buffer goes.
//!    If the job failed, its records go back into the buffer and its files are obsolete.
//!
//! REQUIRES of the caller: between `begin_flush` and `finish_flush` nothing else changes the levels. The index
//! enforces it: `begin_flush`, `flush`, `gc`, `purge`, `compact_level`, `compact_all` and `remove_unlisted`
//! return `InvalidArgument` while a flush is in progress.

use super::levels::Merge2;
use super::*;

/// A flush of the frozen buffer, run without the index (see the module comment).
#[derive(Debug)]
pub struct FlushJob {
    frozen: Arc<RTree>,
    /// The disk levels, detached from the index: the job writes into them.
    disk: GlobalIndex,
    /// The first file number the job may use.
    first_number: u64,
    outcome: Option<Result<()>>,
}

impl FlushJob {
    /// Writes the frozen areas into level 0 and compacts the levels that overflow. Touches no shared state; its
    /// outcome is reported by [`GlobalIndex::finish_flush`]. REQUIRES: not run before.
    pub fn run(&mut self) {
        let areas = self.frozen.areas();
        self.outcome = Some(self.disk.write_flush(areas));
    }

    /// Whether [`run`](Self::run) was called.
    pub fn ran(&self) -> bool {
        self.outcome.is_some()
    }
}

impl GlobalIndex {
    /// Writes the buffer's records into the first disk level and compacts levels that overflow. After it returns,
    /// every record inserted so far is in a synced file listed by [`GlobalIndex::live_files`].
    pub fn flush(&mut self) -> Result<()> {
        match self.begin_flush()? {
            Some(mut job) => {
                job.run();
                self.finish_flush(job)
            }
            None => Ok(()),
        }
    }

    /// Freezes the buffer for a flush (`None` if it is empty). Readers go on seeing every record.
    pub fn begin_flush(&mut self) -> Result<Option<FlushJob>> {
        self.not_flushing()?;
        if self.buffer.is_empty() {
            return Ok(None);
        }
        self.buffer_changed();
        let skip = self.buffer.skip();
        let frozen = Arc::new(std::mem::replace(&mut self.buffer, RTree::with_skip(skip)));
        self.frozen = Some(Arc::clone(&frozen));
        let disk = GlobalIndex {
            fs: Arc::clone(&self.fs),
            dir: self.dir.clone(),
            opts: self.opts.clone(),
            buffer: RTree::new(),
            levels: self.levels.clone(),
            eve: Eve::new(self.opts.estimator.clone()),
            snapshots: self.snapshots.clone(),
            watermark: self.watermark,
            next_number: self.next_number,
            obsolete: Vec::new(),
            last_seq: self.last_seq,
            counters: Counters::default(),
            work: Work::default(),
            key_lo: None,
            key_hi: None,
            buffer_view: Mutex::new(None),
            frozen: None,
        };
        Ok(Some(FlushJob { frozen, disk, first_number: self.next_number, outcome: None }))
    }

    /// Installs what `job` wrote, or, if it failed (or never ran), returns its error with its records back in the
    /// buffer and the files it wrote obsolete.
    /// REQUIRES: `job` is the one `begin_flush` of this index returned last.
    pub fn finish_flush(&mut self, job: FlushJob) -> Result<()> {
        if self.frozen.as_ref().is_none_or(|f| !Arc::ptr_eq(f, &job.frozen)) {
            return Err(Error::InvalidArgument("not the flush in progress".into()));
        }
        self.frozen = None;
        self.buffer_changed();
        let FlushJob { frozen, disk, first_number, outcome } = job;
        self.next_number = disk.next_number;
        if let Err(e) = outcome.unwrap_or_else(|| Err(Error::InvalidArgument("flush job never ran".into()))) {
            for a in frozen.areas() {
                self.buffer.insert(a);
            }
            // Whatever the job wrote is in no live list: delete it with the next obsolete files.
            self.obsolete.extend(first_number..disk.next_number);
            return Err(e);
        }
        self.levels = disk.levels;
        self.obsolete.extend(disk.obsolete);
        self.work.flushes += disk.work.flushes;
        self.work.compactions += disk.work.compactions;
        self.work.bytes_written += disk.work.bytes_written;
        let prefix = projection_prefix(&self.key_lo, &self.key_hi);
        if prefix != self.eve.prefix() {
            self.rebuild_estimator(prefix)?;
        }
        self.check_invariants()
    }

    /// Whether a flush is between `begin_flush` and `finish_flush`.
    pub fn flushing(&self) -> bool {
        self.frozen.is_some()
    }

    pub(super) fn not_flushing(&self) -> Result<()> {
        if self.flushing() {
            return Err(Error::InvalidArgument("a flush of the index is in progress".into()));
        }
        Ok(())
    }

    /// The areas of the buffer and of the frozen buffer.
    pub(super) fn buffered_areas(&self) -> Vec<Area> {
        let mut v = self.buffer.areas();
        if let Some(f) = &self.frozen {
            v.extend(f.areas());
        }
        v
    }

    /// The disk part of a flush: `areas` merged with level 0 into a new level 0, then overflowing levels
    /// compacted. Run by a detached index (`FlushJob`).
    fn write_flush(&mut self, areas: Vec<Area>) -> Result<()> {
        let areas = disjointize(areas, &self.snapshots, self.watermark)?;
        let base = self.level_iter(0)?;
        let mut mem = areas.into_iter();
        let (number, tree) = self.write_level(|push| {
            let mut m = Merge2::new(base, None)?;
            let mut hm = mem.next();
            let mut hd = m.next()?;
            loop {
                let take_mem = match (&hm, &hd) {
                    (None, None) => break,
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (Some(x), Some(y)) => Area::order(x, y) != std::cmp::Ordering::Greater,
                };
                if take_mem {
                    if let Some(a) = hm.take() {
                        push(a)?;
                    }
                    hm = mem.next();
                } else {
                    if let Some(a) = hd.take() {
                        push(a)?;
                    }
                    hd = m.next()?;
                }
            }
            Ok(())
        })?;
        self.replace_level(0, number, tree);
        self.work.flushes += 1;
        self.compact_overflowing()
    }
}
