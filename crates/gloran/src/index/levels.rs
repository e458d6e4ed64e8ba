//! The index's disk levels: flushing the buffer into the first level, compacting a level that overflows into the
//! next by a streaming two-way merge with pairwise disjointization, and GC below a watermark (§4.2, §4.4).

use super::*;

/// Merges two area streams (each in DR-tree order) into one in start-key order.
pub(super) struct Merge2 {
    a: Option<AreaIter>,
    b: Option<AreaIter>,
    ha: Option<Area>,
    hb: Option<Area>,
}

impl Merge2 {
    pub(super) fn new(mut a: Option<AreaIter>, mut b: Option<AreaIter>) -> Result<Self> {
        let ha = match &mut a {
            Some(i) => i.next_area()?,
            None => None,
        };
        let hb = match &mut b {
            Some(i) => i.next_area()?,
            None => None,
        };
        Ok(Merge2 { a, b, ha, hb })
    }

    pub(super) fn next(&mut self) -> Result<Option<Area>> {
        let take_a = match (&self.ha, &self.hb) {
            (None, None) => return Ok(None),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(x), Some(y)) => Area::order(x, y) != std::cmp::Ordering::Greater,
        };
        if take_a {
            let out = self.ha.take();
            if let Some(i) = &mut self.a {
                self.ha = i.next_area()?;
            }
            Ok(out)
        } else {
            let out = self.hb.take();
            if let Some(i) = &mut self.b {
                self.hb = i.next_area()?;
            }
            Ok(out)
        }
    }
}

impl GlobalIndex {
    /// Keeps the buffer's and, while no level exists, the estimator's projection prefix equal to the common prefix
    /// of the keys seen. Called before a record goes in.
    ///
    /// Without it a new index projected every key with an empty prefix until its first flush: keys sharing their
    /// first 8 bytes (most real key sets) all looked alike, so the estimator said "maybe" for every key and the
    /// buffer's R-tree could not cluster. The prefix only shrinks (and starts empty), so this rebuilds at most
    /// once per byte of key length plus once, and each rebuild is of the in-memory buffer only. Once levels exist
    /// the estimator's rebuild reads their files and waits for the next flush, which reads them anyway; until then
    /// the old prefix stays correct (any prefix is), only less precise for the new keys.
    pub(super) fn follow_prefix(&mut self) -> Result<()> {
        let (len, same) = {
            let p = prefix_of(&self.key_lo, &self.key_hi);
            (p.len(), p == self.eve.prefix())
        };
        if len != self.buffer.skip() {
            self.buffer_changed();
            self.buffer.reskip(len);
        }
        if !same && self.levels.iter().all(Option::is_none) {
            self.rebuild_estimator(projection_prefix(&self.key_lo, &self.key_hi))?;
        }
        Ok(())
    }

    /// Rebuilds the estimator from the buffer's and every level's areas with a new projection prefix.
    pub(super) fn rebuild_estimator(&mut self, prefix: Vec<u8>) -> Result<()> {
        let mut eve = Eve::with_prefix(self.opts.estimator.clone(), prefix);
        if self.opts.use_estimator {
            for l in self.levels.iter().flatten() {
                let mut it = l.tree.iter()?;
                while let Some(a) = it.next_area()? {
                    if a.max_seq > self.watermark {
                        eve.insert(&a);
                    }
                }
            }
            // The buffers' records are newer than every level's; in sequence order the chain stays ordered.
            let mut buffered = self.buffered_areas();
            buffered.sort_unstable_by_key(|a| a.seq);
            for a in &buffered {
                eve.insert(a);
            }
        }
        self.eve = eve;
        self.work.estimator_rebuilds += 1;
        Ok(())
    }

    /// Streams the areas `feed` pushes through a sweep into a new DR-tree file.
    pub(super) fn write_level(
        &mut self,
        feed: impl FnOnce(&mut dyn FnMut(Area) -> Result<()>) -> Result<()>,
    ) -> Result<(u64, Option<Arc<DrTree>>)> {
        let number = self.next_number;
        self.next_number += 1;
        let path = self.dir.join(file_name(number));
        let mut writer = DrTreeWriter::create(self.fs.as_ref(), &path, self.opts.node_size)?;
        let mut werr: Option<Error> = None;
        {
            let mut sweep =
                Sweep::new(Stripes::new(&self.snapshots), self.watermark, |a: Area| writer.push(&a));
            let mut push = |a: Area| sweep.push(a);
            feed(&mut push)?;
            if let Err(e) = sweep.finish() {
                werr = Some(e);
            }
        }
        if let Some(e) = werr {
            return Err(e);
        }
        let len = writer.finish()?;
        self.fs.sync_dir(&self.dir)?;
        self.work.bytes_written += len;
        let tree = DrTree::open(self.fs.as_ref(), &path)?;
        if tree.footer().areas == 0 {
            // An empty level is not kept: the file is obsolete at once.
            self.obsolete.push(number);
            return Ok((number, None));
        }
        Ok((number, Some(Arc::new(tree))))
    }

    pub(super) fn replace_level(&mut self, level: usize, number: u64, tree: Option<Arc<DrTree>>) {
        if self.levels.len() <= level {
            self.levels.resize(level + 1, None);
        }
        if let Some(old) = self.levels[level].take() {
            self.obsolete.push(old.number);
        }
        self.levels[level] = tree.map(|tree| Level { number, tree });
        while self.levels.last().is_some_and(Option::is_none) {
            self.levels.pop();
        }
    }

    pub(super) fn level_iter(&self, level: usize) -> Result<Option<AreaIter>> {
        match self.levels.get(level).and_then(Option::as_ref) {
            Some(l) => Ok(Some(l.tree.iter()?)),
            None => Ok(None),
        }
    }

    /// Compacts every level whose DR-tree outgrew its capacity into the next one.
    pub(super) fn compact_overflowing(&mut self) -> Result<()> {
        let mut level = 0;
        while level < self.levels.len() {
            let size = self.levels[level].as_ref().map_or(0, |l| l.tree.file_len());
            if size > self.opts.level_capacity(level) {
                if level + 1 == self.levels.len() {
                    self.levels.push(None); // The bottom level overflowed: the tree grows one level deeper.
                }
                self.compact_level(level)?;
            }
            level += 1;
        }
        Ok(())
    }

    /// Merges level `level` into level `level + 1` (§4.2 compaction). The last level is rewritten in place
    /// (applying the current snapshots and GC watermark) rather than pushed one level deeper.
    pub fn compact_level(&mut self, level: usize) -> Result<()> {
        self.not_flushing()?;
        let upper = self.level_iter(level)?;
        if upper.is_none() {
            return Ok(());
        }
        if level + 1 >= self.levels.len() {
            let (number, tree) = self.write_level(|push| {
                let mut m = Merge2::new(upper, None)?;
                while let Some(a) = m.next()? {
                    push(a)?;
                }
                Ok(())
            })?;
            self.replace_level(level, number, tree);
            self.work.compactions += 1;
            return self.check_invariants();
        }
        let lower = self.level_iter(level + 1)?;
        let (number, tree) = self.write_level(|push| {
            let mut m = Merge2::new(upper, lower)?;
            while let Some(a) = m.next()? {
                push(a)?;
            }
            Ok(())
        })?;
        self.replace_level(level + 1, number, tree);
        if let Some(old) = self.levels.get_mut(level).and_then(Option::take) {
            self.obsolete.push(old.number);
        }
        while self.levels.last().is_some_and(Option::is_none) {
            self.levels.pop();
        }
        self.work.compactions += 1;
        Ok(())
    }

    /// Merges everything (buffer and all levels) into one bottom DR-tree.
    pub fn compact_all(&mut self) -> Result<()> {
        self.flush()?;
        let mut level = 0;
        while level + 1 < self.levels.len() {
            self.compact_level(level)?;
            level += 1;
        }
        self.check_invariants()
    }

    /// Garbage collection (§4.4). REQUIRES of the caller: no entry with sequence number `< watermark` remains in
    /// the LSM tree, covered or not (records inserted later are clipped to the watermark too, so they must not
    /// need to cover such an entry), and no live snapshot is older than `watermark` (the engine
    /// computes it after bottommost compactions, see `docs/gloran.md`). Drops estimator RAEs below the
    /// watermark, clips buffer areas, and rewrites the bottommost DR-tree without what can no longer cover an
    /// entry; upper levels are clipped as they are next compacted. A watermark below the current one is ignored.
    pub fn gc(&mut self, watermark: u64) -> Result<()> {
        self.not_flushing()?;
        if watermark <= self.watermark {
            return Ok(());
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
        if self.levels.last().and_then(Option::as_ref).is_some_and(|l| l.tree.footer().min_seq < watermark) {
            // The sweep of `write_level` clips every area to the new watermark.
            self.rewrite_bottom(|_| true)?;
        }
        self.check_invariants()
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
    pub fn purge(&mut self, mut dead: impl FnMut(&Area) -> bool) -> Result<u64> {
        self.not_flushing()?;
        let doomed = self.count_bottom(&mut dead)?;
        if doomed > 0 {
            self.work.gc_runs += 1;
            self.rewrite_bottom(|a| !dead(a))?;
            self.check_invariants()?;
        }
        Ok(doomed)
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
