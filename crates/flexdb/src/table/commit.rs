//! The committer's merge of a frozen memtable into the table (§5.1; see the parent module's design notes): per
//! interval, the edits that turn its old records into the new ones, applied as FlexFile inserts and collapses,
//! then the index resized, and the interval split, merged with its successor, or removed by size.

use super::*;

/// One change to an interval's bytes: `old_len` bytes at `old_off` (relative to the interval's start, before any
/// edit) replaced by `new`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Edit {
    pub(super) old_off: u64,
    pub(super) old_len: u64,
    pub(super) new: Vec<u8>,
}

/// New bytes past which an edit stops growing: a sequential load appends a whole memtable to one interval, and
/// its edit would otherwise be one buffer of the memtable's size; a few more log entries per memtable cost
/// nothing.
pub(super) const EDIT_BYTES: usize = 64 << 10;

/// Merges sorted memtable entries into an interval's records: the new records, the edits that turn the old bytes
/// into the new ones (in offset order, adjacent changes coalesced up to [`EDIT_BYTES`], none empty), and whether
/// an old record was removed or replaced (the interval may have shrunk: a merge is worth trying). A put of the
/// value a record already holds changes nothing.
pub(super) fn plan_edits<'a>(
    old: &'a Interval,
    group: &[(&'a [u8], &'a MemValue)],
) -> (Vec<RecRef<'a>>, Vec<Edit>, bool) {
    let mut recs: Vec<RecRef<'a>> = Vec::with_capacity(old.len() + group.len());
    let mut edits: Vec<Edit> = Vec::new();
    let mut removed = false;
    let mut old = old.iter().peekable();
    let mut off = 0u64;
    for &(k, v) in group {
        while let Some(r) = old.next_if(|r| r.0 < k) {
            off += rec_len(&r);
            recs.push(r);
        }
        let mut old_len = 0;
        if let Some(r) = old.next_if(|r| r.0 == k) {
            if matches!(v, MemValue::Put(val) if **val == *r.1) {
                off += rec_len(&r);
                recs.push(r);
                continue;
            }
            old_len = rec_len(&r);
            removed = true;
        }
        let put = match v {
            MemValue::Put(val) => Some(&**val),
            _ => None,
        };
        if old_len > 0 || put.is_some() {
            // The record is encoded straight into the edit it joins (no buffer per record).
            let adjacent =
                edits.last().is_some_and(|e| e.old_off + e.old_len == off && e.new.len() < EDIT_BYTES);
            if !adjacent {
                edits.push(Edit { old_off: off, old_len: 0, new: Vec::new() });
            }
            if let Some(e) = edits.last_mut() {
                e.old_len += old_len;
                if let Some(val) = put {
                    record::encode(&mut e.new, k, val);
                }
            }
        }
        if let Some(val) = put {
            recs.push((k, val));
        }
        off += old_len;
    }
    recs.extend(old);
    (recs, edits, removed)
}

impl Table {
    /// Merges sorted memtable entries into the file in place. REQUIRES: keys strictly increasing; one committer.
    pub fn commit<'a>(&self, entries: impl Iterator<Item = (&'a [u8], &'a MemValue)>) -> Result<()> {
        let mut it = entries.peekable();
        let mut idx = self.index.write();
        self.usable()?;
        let mut since = 0u64;
        let mut group: Vec<(&[u8], &MemValue)> = Vec::new();
        while let Some(&(k, _)) = it.peek() {
            let p = idx.locate(k);
            let next_key = idx.next(p).map(|n| idx.get(n).key.clone());
            group.clear();
            while let Some(&(k, v)) = it.peek() {
                if next_key.as_deref().is_some_and(|nk| k >= nk) {
                    break;
                }
                group.push((k, v));
                it.next();
            }
            // Marked while the index lock is still held, so no reader sees what a failed group left behind.
            let r = self.apply_group(&mut idx, p, &group);
            since += self.mark(r)?;
            if since >= self.lock_bytes {
                drop(idx);
                self.stats.lock_releases.fetch_add(1, Ordering::Relaxed);
                idx = self.index.write();
                since = 0;
            }
        }
        #[cfg(feature = "invariants")]
        idx.check(self.file.read().size())?;
        Ok(())
    }

    /// Applies one interval's worth of memtable entries; returns the bytes inserted.
    ///
    /// Changes to adjacent records are coalesced into one edit (one run of old bytes replaced by one run of new
    /// bytes), and each edit is one FlexFile operation: a run of new keys appended to an interval is one insert,
    /// not one per record. Every FlexFile operation costs a FlexTree update and 24-byte log entries, which were
    /// 12 % of all the bytes a sequential load wrote when each record was its own operation.
    fn apply_group(&self, idx: &mut SparseIndex, p: Pos, group: &[(&[u8], &MemValue)]) -> Result<u64> {
        let old = self.load(idx, p)?;
        let base = idx.offset(p);
        let mut file = self.file.write();
        if self.defrag != Defrag::Never {
            let size = idx.get(p).size;
            if self.defrag.due(file.tree().query(base, size)?.len(), old.len()) {
                return self.rewrite_group(idx, p, file, old.to_recs(), group);
            }
        }
        let (recs, edits, removed) = plan_edits(&old, group);
        let (mut delta, mut written) = (0i64, 0u64);
        for e in &edits {
            // Earlier edits moved this one's old offset by `delta`.
            let at = (base + e.old_off).saturating_add_signed(delta);
            match (e.old_len, e.new.is_empty()) {
                (0, false) => file.insert(at, &e.new)?,
                (_, true) => file.collapse(at, e.old_len)?,
                (_, false) => file.replace(at, e.old_len, &e.new)?,
            }
            self.stats.collapsed_bytes.fetch_add(e.old_len, Ordering::Relaxed);
            delta += e.new.len() as i64 - e.old_len as i64;
            written += e.new.len() as u64;
        }
        self.stats.inserted_bytes.fetch_add(written, Ordering::Relaxed);
        idx.resize(p, delta);
        self.finish_group(idx, p, file, &recs, removed)?;
        Ok(written)
    }

    /// The end of applying a group to the interval at `p`, which now holds `recs` in the file: anchor tag, then
    /// removal, split, merge or a plain cache update.
    fn finish_group(
        &self,
        idx: &mut SparseIndex,
        p: Pos,
        mut file: parking_lot::RwLockWriteGuard<'_, FlexFile>,
        recs: &[RecRef<'_>],
        removed: bool,
    ) -> Result<()> {
        let base = idx.offset(p);
        if !recs.is_empty() && file.get_tag(base)? != ANCHOR_TAG {
            file.set_tag(base, ANCHOR_TAG)?;
        }
        let id = idx.get(p).id;
        if recs.is_empty() && p != idx.first() {
            idx.remove(p);
            self.cache.remove(id);
            self.stats.merges.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let size = idx.get(p).size;
        if recs.len() > self.max_keys || (size > self.max_bytes && recs.len() > 1) {
            self.split(idx, &mut file, p, base, recs)?;
        } else if removed && recs.len() * 2 <= self.max_keys && size * 2 <= self.max_bytes {
            drop(file);
            self.maybe_merge(idx, p, recs)?;
        } else {
            self.cache.put(id, packed(recs), Some(&idx.get(p).cache_slot));
        }
        Ok(())
    }

    /// [`Table::apply_group`] for an interval the `defrag` rule picks: the entries are merged
    /// in memory and the interval is replaced by one contiguous run (`FlexFile::replace`), so a later cache miss
    /// reads it with one positional read instead of one per extent. Costs writing the interval's unchanged records
    /// again. Returns the bytes inserted.
    fn rewrite_group(
        &self,
        idx: &mut SparseIndex,
        p: Pos,
        mut file: parking_lot::RwLockWriteGuard<'_, FlexFile>,
        mut recs: Vec<Rec>,
        group: &[(&[u8], &MemValue)],
    ) -> Result<u64> {
        let base = idx.offset(p);
        let old = idx.get(p).size;
        let mut removed = false;
        for &(k, v) in group {
            let i = recs.partition_point(|r| *r.0 < *k);
            let present = i < recs.len() && *recs[i].0 == *k;
            match v {
                MemValue::Put(val) if present => recs[i].1 = val.clone(),
                MemValue::Put(val) => recs.insert(i, (k.into(), val.clone())),
                MemValue::Delete if present => {
                    recs.remove(i);
                    removed = true;
                }
                MemValue::Delete => {}
            }
        }
        let mut buf = Vec::with_capacity(recs.iter().map(|r| rec_len(r) as usize).sum());
        for (k, v) in &recs {
            record::encode(&mut buf, k, v);
        }
        // One FlexFile operation: a crash between a collapse and an insert would lose the interval's records
        // that the memtable (hence WAL replay) does not hold.
        file.replace(base, old, &buf)?;
        self.stats.collapsed_bytes.fetch_add(old, Ordering::Relaxed);
        self.stats.inserted_bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        idx.resize(p, buf.len() as i64 - old as i64);
        self.finish_group(idx, p, file, &borrowed(&recs), removed)?;
        Ok(buf.len() as u64)
    }

    /// Splits an oversized interval into intervals within both limits, tagging each new anchor.
    fn split(
        &self,
        idx: &mut SparseIndex,
        file: &mut FlexFile,
        p: Pos,
        base: u64,
        recs: &[RecRef<'_>],
    ) -> Result<()> {
        let mut at = p;
        let mut off = base;
        let mut rest = recs;
        while !rest.is_empty() {
            // The longest prefix within both limits (at least one record).
            let (mut n, mut size) = (0usize, 0u64);
            while n < rest.len() && n < self.max_keys {
                let l = rec_len(&rest[n]);
                if n > 0 && size + l > self.max_bytes {
                    break;
                }
                size += l;
                n += 1;
            }
            let (chunk, tail) = rest.split_at(n);
            if off != base {
                file.set_tag(off, ANCHOR_TAG)?;
            }
            let id = idx.get(at).id;
            if let Some(next) = tail.first() {
                // The next chunk's first key becomes the new interval's index key.
                let new = idx.split(at, size, next.0.into());
                // `split` may have moved `at`'s entry; its hint is refreshed by the next lookup.
                self.cache.put(id, packed(chunk), None);
                at = new;
                self.stats.splits.fetch_add(1, Ordering::Relaxed);
            } else {
                self.cache.put(id, packed(chunk), Some(&idx.get(at).cache_slot));
            }
            off += size;
            rest = tail;
        }
        Ok(())
    }

    /// Merges the interval at `p` with its successor when both together stay within half of both limits.
    fn maybe_merge(&self, idx: &mut SparseIndex, p: Pos, recs: &[RecRef<'_>]) -> Result<()> {
        let id = idx.get(p).id;
        if let Some(n) = idx.next(p) {
            let nsize = idx.get(n).size;
            let size = idx.get(p).size;
            if (size + nsize) * 2 <= self.max_bytes {
                let next = self.load(idx, n)?;
                if (recs.len() + next.len()) * 2 <= self.max_keys {
                    let all: Vec<RecRef<'_>> = recs.iter().copied().chain(next.iter()).collect();
                    let gone = idx.remove(n);
                    self.cache.remove(gone.id);
                    self.stats.merges.fetch_add(1, Ordering::Relaxed);
                    // Entries left of a removed one do not move: `p` is still this interval.
                    self.cache.put(id, packed(&all), Some(&idx.get(p).cache_slot));
                    return Ok(());
                }
            }
        }
        self.cache.put(id, packed(recs), Some(&idx.get(p).cache_slot));
        Ok(())
    }
}
