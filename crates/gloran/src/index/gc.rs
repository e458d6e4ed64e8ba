//! Garbage collection (§4.4): raising the watermark, and rewriting the bottom level without what can no longer
//! cover an entry. Like a flush (`flush.rs`), the rewrite can run in three steps so the engine holds its lock only
//! to begin and to install it: [`GlobalIndex::begin_gc`] raises the watermark (in memory: the buffer is clipped,
//! RAEs dropped) and detaches the levels, [`GcJob::run`] rewrites the bottom level of the detached copy, and
//! [`GlobalIndex::finish_gc`] installs it. Until then readers read the old bottom level, whose extra areas cover
//! nothing a reader can see (GC's contract), so every answer is the same either way.

use super::*;

/// A GC rewrite of the bottom level, run without the index.
pub struct GcJob {
    disk: GlobalIndex,
    /// Whether the watermark rose (the bottom level is rewritten if it holds areas below it).
    clip: bool,
    /// The whole-area criterion of [`GlobalIndex::purge`].
    dead: Box<dyn Fn(&Area) -> bool + Send>,
    first_number: u64,
    id: u64,
    rewrote: bool,
    outcome: Option<Result<u64>>,
}

impl std::fmt::Debug for GcJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcJob").field("clip", &self.clip).field("id", &self.id).finish_non_exhaustive()
    }
}

impl GcJob {
    /// Rewrites the detached bottom level if the watermark rose past its oldest area or `dead` names some of its
    /// areas. Touches no shared state; [`GlobalIndex::finish_gc`] reports the outcome. REQUIRES: not run before.
    pub fn run(&mut self) {
        let (dead, clip) = (&self.dead, self.clip);
        let disk = &mut self.disk;
        let w = disk.watermark;
        // `dead` judges an area as the watermark leaves it (a narrower band meets fewer tables), as when the
        // watermark's rewrite ran before the purge's; an area the watermark empties is dropped by the rewrite.
        let doomed_at = |a: &Area| {
            if clip && a.min_seq < w {
                let mut c = a.clone();
                c.min_seq = w;
                !c.is_empty() && dead(&c)
            } else {
                dead(a)
            }
        };
        let r = (|| {
            let doomed = disk.count_bottom(doomed_at)?;
            let bottom = disk.levels.last().and_then(Option::as_ref);
            let below = clip && bottom.is_some_and(|l| l.tree.footer().min_seq < w);
            if doomed > 0 || below {
                if doomed > 0 {
                    disk.work.gc_runs += 1;
                }
                // The sweep of `write_level` clips every area to the watermark.
                disk.rewrite_bottom(|a| !doomed_at(a))?;
                self.rewrote = true;
            }
            Ok(doomed)
        })();
        self.outcome = Some(r);
    }

    /// Whether [`run`](Self::run) was called.
    pub fn ran(&self) -> bool {
        self.outcome.is_some()
    }

    /// Whether [`run`](Self::run) rewrote the bottom level (readers must then be told: see the engine's
    /// generation counter).
    pub fn rewrote(&self) -> bool {
        self.rewrote
    }
}

impl GlobalIndex {
    /// Garbage collection (§4.4). REQUIRES of the caller: no entry with sequence number `< watermark` remains in
    /// the LSM tree, covered or not (records inserted later are clipped to the watermark too, so they must not
    /// need to cover such an entry), and no live snapshot is older than `watermark` (the engine
    /// computes it after bottommost compactions, see `docs/gloran.md`). Drops estimator RAEs below the
    /// watermark, clips buffer areas, and rewrites the bottommost DR-tree without what can no longer cover an
    /// entry; upper levels are clipped as they are next compacted. A watermark below the current one is ignored.
    pub fn gc(&mut self, watermark: u64) -> Result<()> {
        self.not_busy()?;
        if watermark <= self.watermark {
            return Ok(());
        }
        let mut job = self.begin_gc(watermark, Box::new(|_| false))?;
        job.run();
        self.finish_gc(job).map(|_| ())
    }

    /// Garbage collection of whole areas (§4.4: a record is obsolete once "all entries it matches have been
    /// removed"): rewrites the bottom DR-tree without the areas `dead` names. Returns how many it dropped; a level
    /// that would lose none is not rewritten. Unlike [`gc`](Self::gc) this clips nothing, so records inserted
    /// later keep all they cover, and an area is dropped or kept whole by what lies under it alone: an old area
    /// goes as soon as its own key range holds no entry of its sequence band, whatever old data other key ranges
    /// keep (those hold the watermark of `gc` down).
    ///
    /// REQUIRES of the caller: `dead(a)` only if no entry `(key, seq)` with `a.start <= key < a.end` and
    /// `a.min_seq <= seq < a.max_seq` remains anywhere a reader can see it, now or later (entries written later
    /// take sequence numbers above every area's band). `dead` is called twice per area and must answer alike.
    pub fn purge(&mut self, dead: impl Fn(&Area) -> bool + Send + 'static) -> Result<u64> {
        let mut job = self.begin_gc(self.watermark, Box::new(dead))?;
        job.run();
        self.finish_gc(job)
    }

    /// Both of the above as a job: raises the watermark to `watermark` now (if it is higher), and returns the
    /// rewrite of the bottom level without the areas below it and those `dead` names, to run without the index.
    /// REQUIRES: the contracts of [`gc`](Self::gc) for `watermark` and of [`purge`](Self::purge) for `dead`.
    pub fn begin_gc(&mut self, watermark: u64, dead: Box<dyn Fn(&Area) -> bool + Send>) -> Result<GcJob> {
        self.not_busy()?;
        let clip = self.raise_watermark(watermark);
        self.jobs += 1;
        self.gc_job = Some(self.jobs);
        Ok(GcJob {
            disk: self.detached(),
            clip,
            dead,
            first_number: self.next_number,
            id: self.jobs,
            rewrote: false,
            outcome: None,
        })
    }

    /// Installs what `job` rewrote and returns how many areas `dead` dropped, or returns its error with the old
    /// bottom level kept (the raised watermark stays: it only ever clips what no reader needs).
    /// REQUIRES: `job` is the one `begin_gc` of this index returned last.
    pub fn finish_gc(&mut self, job: GcJob) -> Result<u64> {
        if self.gc_job != Some(job.id) {
            return Err(Error::InvalidArgument("not the GC in progress".into()));
        }
        self.gc_job = None;
        let GcJob { disk, first_number, outcome, .. } = job;
        self.next_number = disk.next_number;
        let doomed = match outcome.unwrap_or_else(|| Err(Error::InvalidArgument("GC job never ran".into()))) {
            Ok(d) => d,
            Err(e) => {
                self.obsolete.extend(first_number..disk.next_number);
                return Err(e);
            }
        };
        self.levels = disk.levels;
        self.obsolete.extend(disk.obsolete);
        self.work.gc_runs += disk.work.gc_runs;
        self.work.gc_areas_dropped += disk.work.gc_areas_dropped;
        self.work.gc_bytes_rewritten += disk.work.gc_bytes_rewritten;
        self.work.bytes_written += disk.work.bytes_written;
        self.check_invariants()?;
        Ok(doomed)
    }

    /// The in-memory part of GC: raises the watermark, clips the buffer's areas to it and drops the RAEs below it.
    /// Returns whether it rose.
    fn raise_watermark(&mut self, watermark: u64) -> bool {
        if watermark <= self.watermark {
            return false;
        }
        self.watermark = watermark;
        self.buffer_changed();
        self.work.gc_runs += 1;
        self.work.gc_estimators_dropped += self.eve.gc(watermark) as u64;
        if !self.buffer.is_empty() {
            let areas = self.buffer.take();
            for mut a in areas {
                a.min_seq = a.min_seq.max(watermark);
                if a.is_empty() {
                    self.work.gc_areas_dropped += 1;
                } else {
                    self.buffer.insert(a);
                }
            }
        }
        true
    }

    /// How many areas of the bottom DR-tree `pred` holds for (what [`purge`](Self::purge) with it would drop).
    pub fn count_bottom(&self, mut pred: impl FnMut(&Area) -> bool) -> Result<u64> {
        let Some(l) = self.levels.last().and_then(Option::as_ref) else { return Ok(0) };
        let mut n = 0u64;
        let mut it = l.tree.iter()?;
        while let Some(a) = it.next_area()? {
            n += u64::from(pred(&a));
        }
        Ok(n)
    }

    /// Rewrites the bottom DR-tree through `write_level` (which clips to the watermark and disjointizes) with only
    /// the areas `keep` holds for, counting what GC dropped and wrote.
    fn rewrite_bottom(&mut self, mut keep: impl FnMut(&Area) -> bool) -> Result<()> {
        let bottom = self.levels.len().saturating_sub(1);
        let Some(tree) = self.levels.get(bottom).and_then(Option::as_ref).map(|l| l.tree.clone()) else {
            return Ok(());
        };
        let (number, new) = self.write_level(|push| {
            let mut it = tree.iter()?;
            while let Some(a) = it.next_area()? {
                if keep(&a) {
                    push(a)?;
                }
            }
            Ok(())
        })?;
        let after = new.as_ref().map_or(0, |t| t.footer().areas);
        self.work.gc_areas_dropped += tree.footer().areas.saturating_sub(after);
        self.work.gc_bytes_rewritten += new.as_ref().map_or(0, |t| t.file_len());
        self.replace_level(bottom, number, new);
        Ok(())
    }
}
