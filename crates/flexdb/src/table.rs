//! The table: the FlexFile holding every committed record in key order, its sparse index and interval cache.
//!
//! # Design
//!
//! The committer merges a frozen memtable into the file interval by interval, in key order (§5.1): for each
//! memtable entry it collapses the old record (if any) and inserts the new one at the same offset (changes to
//! adjacent records as one FlexFile operation), then resizes the interval in the index, which shifts every later
//! interval. Untouched bytes are never read or rewritten.
//! An interval that grows past `interval_max_keys` / `interval_max_bytes` is split; one that shrank below half of
//! both limits together with its successor is merged with it; an empty interval is removed.
//!
//! Extent tags mark interval anchors: after every change the first record of a changed interval carries
//! [`ANCHOR_TAG`], so every tagged extent start is a record start. Recovery (§5.4) walks the in-memory FlexTree for
//! tagged extents at least `rebuild_interval` apart and reads one key at each with `read_extent`.
//!
//! Concurrency (§5.2): the index sits behind a reader-writer lock; readers take it shared, the committer takes it
//! exclusive and releases it every `commit_lock_bytes` of committed data (every shift is applied at once, so the
//! index is consistent whenever the lock is free). The FlexFile sits behind its own reader-writer lock: cache
//! misses read it shared through `FlexFile::read_at`, so they run in parallel; the committer and syncs take it
//! exclusively. The lock order is index, then file.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use flexfile::{FlexFile, ReadAhead};
use parking_lot::RwLock;

use crate::cache::{IntervalCache, IntervalData};
use crate::error::{Error, Result};
use crate::index::{Pos, SparseIndex};
use crate::interval::Interval;
use crate::memtable::MemValue;
use crate::options::{Defrag, Options};
use crate::record::{self, Rec};

/// The FlexFile extent tag marking an interval anchor (a record start).
pub const ANCHOR_TAG: u16 = 1;
/// Subdirectory of the store holding the FlexFile.
pub const TABLE_DIR: &str = "table";

/// One interval of the sparse index, as [`crate::Db::layout`] lists it: index key, file offset, size in bytes.
pub type IntervalInfo = (Box<[u8]>, u64, u64);

/// Table counters.
#[derive(Debug, Default)]
pub struct TableStats {
    /// Record bytes inserted into the file.
    pub inserted_bytes: AtomicU64,
    /// Record bytes collapsed out of the file.
    pub collapsed_bytes: AtomicU64,
    /// Interval splits.
    pub splits: AtomicU64,
    /// Interval merges (including removals of empty intervals).
    pub merges: AtomicU64,
    /// Times the committer released the index lock mid-commit.
    pub lock_releases: AtomicU64,
    /// Anchors read at open.
    pub rebuild_anchors: AtomicU64,
}

/// The table. See the module comment.
pub struct Table {
    file: RwLock<FlexFile>,
    index: RwLock<SparseIndex>,
    cache: IntervalCache,
    max_keys: usize,
    max_bytes: u64,
    lock_bytes: u64,
    defrag: Defrag,
    /// Counters.
    pub stats: TableStats,
}

/// A record borrowed from a cached interval or a memtable: the committer's working form (building owned
/// records cost two allocations and two frees per record of every interval a commit touched).
type RecRef<'a> = (&'a [u8], &'a [u8]);

fn rec_len<K: AsRef<[u8]>, V: AsRef<[u8]>>(r: &(K, V)) -> u64 {
    record::encoded_len(r.0.as_ref(), r.1.as_ref()) as u64
}

/// The cached form of records the committer holds.
fn packed<K: AsRef<[u8]>, V: AsRef<[u8]>>(recs: &[(K, V)]) -> IntervalData {
    Arc::new(Interval::from_recs(recs))
}

fn borrowed(recs: &[Rec]) -> Vec<RecRef<'_>> {
    recs.iter().map(|(k, v)| (&k[..], &v[..])).collect()
}

/// Records `range` of a cached interval, as a table scan returns them: in key order, or reversed when
/// `reverse`.
pub struct Run {
    /// The interval.
    pub data: IntervalData,
    /// Record indexes within it.
    pub range: std::ops::Range<usize>,
    /// Whether the run is read largest key first.
    pub reverse: bool,
}

impl Run {
    /// The run's records in scan order.
    pub fn recs(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        let (r, rev) = (self.range.clone(), self.reverse);
        let (fwd, back) = if rev { (0..0, r) } else { (r, 0..0) };
        fwd.chain(back.rev()).map(|i| self.data.rec(i))
    }
}

/// One change to an interval's bytes: `old_len` bytes at `old_off` (relative to the interval's start, before any
/// edit) replaced by `new`.
#[derive(Debug, PartialEq, Eq)]
struct Edit {
    old_off: u64,
    old_len: u64,
    new: Vec<u8>,
}

/// New bytes past which an edit stops growing: a sequential load appends a whole memtable to one interval, and
/// its edit would otherwise be one buffer of the memtable's size; a few more log entries per memtable cost
/// nothing.
const EDIT_BYTES: usize = 64 << 10;

/// Merges sorted memtable entries into an interval's records: the new records, the edits that turn the old bytes
/// into the new ones (in offset order, adjacent changes coalesced up to [`EDIT_BYTES`], none empty), and whether
/// an old record was removed or replaced (the interval may have shrunk: a merge is worth trying). A put of the
/// value a record already holds changes nothing.
fn plan_edits<'a>(
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
    /// Opens (or, with `create`, creates) the table in `dir/table` and rebuilds its index.
    pub fn open(fs: Arc<dyn vfs::Fs>, dir: &Path, opts: &Options, create: bool) -> Result<Table> {
        let tdir = dir.join(TABLE_DIR);
        let file = if fs.exists(&tdir.join(flexfile::flexfile::TREE_FILE))? {
            FlexFile::open(fs, &tdir, opts.flexfile.clone())?
        } else if create {
            FlexFile::create(fs, &tdir, opts.flexfile.clone())?
        } else {
            return Err(Error::invalid(format!("{} holds no FlexDB store", dir.display())));
        };
        let stats = TableStats::default();
        let index = Self::rebuild(&file, opts.rebuild_interval, opts.rebuild_threads, &stats)?;
        Ok(Table {
            file: RwLock::new(file),
            index: RwLock::new(index),
            cache: IntervalCache::new(
                opts.cache_bytes,
                opts.cache_partitions,
                Interval::max_charge(opts.interval_max_keys, opts.interval_max_bytes),
            ),
            max_keys: opts.interval_max_keys,
            max_bytes: opts.interval_max_bytes,
            lock_bytes: opts.commit_lock_bytes,
            defrag: opts.defrag,
            stats,
        })
    }

    /// Rebuilds the sparse index from tagged anchors (§5.4): the anchors at least `step` bytes apart are found in
    /// the in-memory FlexTree, and their keys are read by `threads` threads at once (shared reads).
    fn rebuild(file: &FlexFile, step: u64, threads: usize, stats: &TableStats) -> Result<SparseIndex> {
        let mut offs = Vec::new();
        let mut next = step;
        file.tree().for_each_extent(|off, e| {
            if e.tag == ANCHOR_TAG && off >= next {
                offs.push(off);
                next = off + step;
            }
        })?;
        let per = offs.len().div_ceil(threads.max(1)).max(1);
        let keys: Vec<Result<Vec<Box<[u8]>>>> = std::thread::scope(|s| {
            let handles: Vec<_> = offs
                .chunks(per)
                .map(|part| s.spawn(move || part.iter().map(|&o| Self::read_key_at(file, o)).collect()))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(Error::invalid("index rebuild thread panicked"))))
                .collect()
        });
        let mut anchors: Vec<(Box<[u8]>, u64)> = vec![(Box::new([]), 0)];
        let mut it = offs.iter();
        for part in keys {
            for k in part? {
                anchors.push((k, *it.next().ok_or_else(|| Error::invalid("anchor count mismatch"))?));
            }
        }
        stats.rebuild_anchors.store(anchors.len() as u64, Ordering::Relaxed);
        let idx = SparseIndex::from_anchors(anchors, file.size())?;
        #[cfg(feature = "invariants")]
        idx.check(file.size())?;
        Ok(idx)
    }

    /// The key of the record starting at `off`. REQUIRES: `off` is the start of an extent (an anchor found in the
    /// tree), so the read is the paper's `read_extent` at that anchor.
    fn read_key_at(file: &FlexFile, off: u64) -> Result<Box<[u8]>> {
        let mut head = vec![0u8; 64.min(file.size().saturating_sub(off)) as usize];
        file.read_at(off, &mut head)?;
        let (klen, _, h) = record::decode_header(&head)?
            .ok_or_else(|| Error::corruption("table", format!("truncated anchor record at {off}")))?;
        if head.len() >= h + klen {
            return Ok(head[h..h + klen].into());
        }
        if off + (h + klen) as u64 > file.size() {
            return Err(Error::corruption("table", "anchor key runs past the end of the file"));
        }
        let mut key = vec![0u8; klen];
        file.read_at(off + h as u64, &mut key)?;
        Ok(key.into())
    }

    /// The decoded interval at `p`, from the cache or the file.
    fn load(&self, idx: &SparseIndex, p: Pos) -> Result<IntervalData> {
        self.load_with(idx, p, None)
    }

    /// [`Table::load`] for a scan: a miss reads through the scan's read-ahead windows (`ra`), so the extents of
    /// neighbouring intervals, which mostly lie near each other in the data file, cost one read per window
    /// rather than one per extent.
    fn load_with(&self, idx: &SparseIndex, p: Pos, ra: Option<&mut ReadAhead>) -> Result<IntervalData> {
        let iv = idx.get(p);
        if let Some(d) = self.cache.get(iv.id, &iv.cache_slot) {
            return Ok(d);
        }
        let size = usize::try_from(iv.size).map_err(|_| Error::corruption("index", "interval too large"))?;
        let mut buf = vec![0u8; size];
        match ra {
            Some(ra) => self.file.read().read_at_ahead(idx.offset(p), &mut buf, ra)?,
            None => self.file.read().read_at(idx.offset(p), &mut buf)?,
        }
        let data = Interval::decode(buf)?;
        if !data.is_empty() && data.rec(0).0 < &*iv.key {
            return Err(Error::corruption("table", "interval holds a key below its index key"));
        }
        let data: IntervalData = Arc::new(data);
        self.cache.put(iv.id, data.clone(), Some(&iv.cache_slot));
        Ok(data)
    }

    /// The committed value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Box<[u8]>>> {
        let idx = self.index.read();
        let p = idx.locate(key);
        let data = self.load(&idx, p)?;
        Ok(data.get(key).map(Box::from))
    }

    /// Committed records with `lo <= key < hi` (`hi = None`: unbounded), in order, at most `limit`, as runs of
    /// the cached intervals holding them (no record is copied). Returns how many records the runs hold.
    pub fn scan(&self, lo: &[u8], hi: Option<&[u8]>, limit: usize, out: &mut Vec<Run>) -> Result<usize> {
        let idx = self.index.read();
        let mut ra = ReadAhead::default();
        let mut n = 0;
        let first = idx.locate(lo);
        let mut p = Some(first);
        while let Some(q) = p {
            if n >= limit || (hi.is_some_and(|h| *idx.get(q).key >= *h) && q != idx.first()) {
                break;
            }
            let data = self.load_with(&idx, q, Some(&mut ra))?;
            // Every key of a later interval is at least its index key, which is above `lo` (`locate` found the last
            // index key `<= lo`), so only the first interval needs the search; it would touch each later one's
            // records once more, cold when the interval was just read.
            let a = if q == first { data.lower_bound(lo) } else { 0 };
            let b = hi.map_or(data.len(), |h| data.lower_bound(h)).max(a).min(a.saturating_add(limit - n));
            n += b - a;
            let done = b < data.len();
            if a < b {
                out.push(Run { data, range: a..b, reverse: false });
            }
            if done {
                break;
            }
            p = idx.next(q);
        }
        Ok(n)
    }

    /// Committed records with `lo <= key < hi`, largest first, at most `limit`, as runs (see [`Table::scan`]):
    /// walks intervals backward from the one holding `hi`.
    pub fn scan_rev(&self, lo: &[u8], hi: Option<&[u8]>, limit: usize, out: &mut Vec<Run>) -> Result<usize> {
        let idx = self.index.read();
        let mut p = Some(match hi {
            Some(h) => idx.locate(h),
            None => idx.last(),
        });
        let mut ra = ReadAhead::default();
        let mut n = 0;
        while let Some(q) = p {
            if n >= limit {
                break;
            }
            let data = self.load_with(&idx, q, Some(&mut ra))?;
            let b = hi.map_or(data.len(), |h| data.lower_bound(h));
            let a = data.lower_bound(lo).min(b).max(b - b.min(limit - n));
            n += b - a;
            if a < b {
                out.push(Run { data, range: a..b, reverse: true });
            }
            if *idx.get(q).key <= *lo {
                break;
            }
            p = idx.prev(q);
        }
        Ok(n)
    }

    /// Makes every committed change durable.
    pub fn sync(&self) -> Result<()> {
        Ok(self.file.write().sync()?)
    }

    /// Closes the FlexFile cleanly (a checkpoint).
    pub fn close(self) -> Result<()> {
        Ok(self.file.into_inner().close()?)
    }

    /// Every interval as (index key, file offset, size in bytes), in key order.
    pub fn layout(&self) -> Vec<IntervalInfo> {
        let idx = self.index.read();
        let mut out = Vec::with_capacity(idx.len());
        let mut p = Some(idx.first());
        while let Some(q) = p {
            let iv = idx.get(q);
            out.push((iv.key.clone(), idx.offset(q), iv.size));
            p = idx.next(q);
        }
        out
    }

    /// Intervals in the index.
    pub fn intervals(&self) -> usize {
        self.index.read().len()
    }

    /// Bytes in the table file.
    pub fn size(&self) -> u64 {
        self.file.read().size()
    }

    /// Cache hit and miss counts.
    pub fn cache_counts(&self) -> (u64, u64) {
        (self.cache.hits.load(Ordering::Relaxed), self.cache.misses.load(Ordering::Relaxed))
    }

    /// The FlexFile's own counters.
    pub fn file_stats(&self) -> flexfile::Stats {
        self.file.read().stats()
    }

    /// Whole-structure check of the index against the file; with `deep`, every interval is read and decoded.
    pub fn check(&self, deep: bool) -> Result<()> {
        let idx = self.index.read();
        let size = self.file.read().size();
        idx.check(size)?;
        if deep {
            let mut p = Some(idx.first());
            let mut last: Option<Box<[u8]>> = None;
            while let Some(q) = p {
                let d = self.load(&idx, q)?;
                if let (Some(l), Some((f, _))) = (&last, d.iter().next())
                    && **l >= *f
                {
                    return Err(Error::corruption("table", "keys out of order across intervals"));
                }
                if let Some((l, _)) = d.iter().next_back() {
                    last = Some(l.into());
                }
                p = idx.next(q);
            }
        }
        Ok(())
    }

    /// Merges sorted memtable entries into the file in place. REQUIRES: keys strictly increasing; one committer.
    pub fn commit<'a>(&self, entries: impl Iterator<Item = (&'a [u8], &'a MemValue)>) -> Result<()> {
        let mut it = entries.peekable();
        let mut idx = self.index.write();
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
            since += self.apply_group(&mut idx, p, &group)?;
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

    /// Deletes every committed key in `[start, end)` with one collapse of the covered bytes (§5.1 applied to a
    /// range). The two boundary intervals are read; intervals in between are dropped from the index unread.
    pub fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
        if start >= end {
            return Ok(());
        }
        let mut idx = self.index.write();
        let ps = idx.locate(start);
        let pe = idx.locate(end);
        let sdata = self.load(&idx, ps)?;
        let edata = self.load(&idx, pe)?;
        let s_keep: Vec<Rec> =
            sdata.iter().filter(|(k, _)| *k < start).map(|(k, v)| (k.into(), v.into())).collect();
        let e_cut = edata.iter().take_while(|(k, _)| *k < end).count();
        let e_bytes: u64 = edata.iter().take(e_cut).map(|(k, v)| record::encoded_len(k, v) as u64).sum();
        let rest: Vec<Rec> = edata.iter().skip(e_cut).map(|(k, v)| (k.into(), v.into())).collect();
        let a = idx.offset(ps) + s_keep.iter().map(rec_len).sum::<u64>();
        let b = idx.offset(pe) + e_bytes;
        if b <= a {
            return Ok(());
        }
        let mut file = self.file.write();
        file.collapse(a, b - a)?;
        self.stats.collapsed_bytes.fetch_add(b - a, Ordering::Relaxed);
        if ps == pe {
            let mut recs = s_keep;
            recs.extend(rest);
            idx.resize(ps, -((b - a) as i64));
            let base = idx.offset(ps);
            if !recs.is_empty() && file.get_tag(base)? != ANCHOR_TAG {
                file.set_tag(base, ANCHOR_TAG)?;
            }
            let id = idx.get(ps).id;
            if recs.is_empty() && ps != idx.first() {
                idx.remove(ps);
                self.cache.remove(id);
            } else {
                self.cache.put(id, packed(&recs), Some(&idx.get(ps).cache_slot));
            }
        } else {
            let pe_id = idx.get(pe).id;
            let s_end = idx.offset(ps) + idx.get(ps).size;
            idx.resize(ps, -((s_end - a) as i64));
            // Drop the intervals strictly between, unread.
            while let Some(n) = idx.next(ps) {
                if idx.get(n).id == pe_id {
                    break;
                }
                let sz = idx.get(n).size as i64;
                idx.resize(n, -sz);
                let gone = idx.remove(n);
                self.cache.remove(gone.id);
            }
            let Some(pe) = idx.next(ps) else {
                return Err(Error::corruption("index", "range end interval vanished"));
            };
            idx.resize(pe, -(e_bytes as i64));
            let base = idx.offset(pe);
            if rest.is_empty() {
                let gone = idx.remove(pe);
                self.cache.remove(gone.id);
            } else {
                idx.set_key(pe, end.into());
                if file.get_tag(base)? != ANCHOR_TAG {
                    file.set_tag(base, ANCHOR_TAG)?;
                }
                self.cache.put(pe_id, packed(&rest), Some(&idx.get(pe).cache_slot));
            }
            let sid = idx.get(ps).id;
            if !s_keep.is_empty() {
                let sb = idx.offset(ps);
                if file.get_tag(sb)? != ANCHOR_TAG {
                    file.set_tag(sb, ANCHOR_TAG)?;
                }
            }
            if s_keep.is_empty() && ps != idx.first() {
                idx.remove(ps);
                self.cache.remove(sid);
            } else {
                self.cache.put(sid, packed(&s_keep), Some(&idx.get(ps).cache_slot));
            }
        }
        #[cfg(feature = "invariants")]
        idx.check(file.size())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn rec(k: &str, v: &str) -> Rec {
        (k.as_bytes().into(), v.as_bytes().into())
    }

    fn encode_all<K: AsRef<[u8]>, V: AsRef<[u8]>>(recs: &[(K, V)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (k, v) in recs {
            record::encode(&mut out, k.as_ref(), v.as_ref());
        }
        out
    }

    fn owned(recs: &[RecRef<'_>]) -> Vec<Rec> {
        recs.iter().map(|&(k, v)| (k.into(), v.into())).collect()
    }

    /// Applies `edits` to `bytes` the way `apply_group` applies them to the file.
    fn apply(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
        let mut delta = 0i64;
        for e in edits {
            let at = (e.old_off as i64 + delta) as usize;
            bytes.splice(at..at + e.old_len as usize, e.new.iter().copied());
            delta += e.new.len() as i64 - e.old_len as i64;
        }
        bytes
    }

    fn put(v: &str) -> MemValue {
        MemValue::Put(v.as_bytes().into())
    }

    #[test]
    fn appended_keys_become_one_insert() {
        let old = vec![rec("a", "1"), rec("b", "2")];
        let (c, d, e) = (put("3"), put("4"), put("5"));
        let group: Vec<(&[u8], &MemValue)> = vec![(b"c", &c), (b"d", &d), (b"e", &e)];
        let before = encode_all(&old);
        let iv = Interval::from_recs(&old);
        let (recs, edits, removed) = plan_edits(&iv, &group);
        assert_eq!(edits.len(), 1);
        assert_eq!((edits[0].old_off, edits[0].old_len), (before.len() as u64, 0));
        assert!(!removed);
        assert_eq!(apply(before, &edits), encode_all(&recs));
        assert_eq!(recs.len(), 5);
    }

    #[test]
    fn a_long_run_of_new_keys_is_cut_into_bounded_edits() {
        let old = vec![rec("a", "1")];
        let value = "v".repeat(1000);
        let vals: Vec<MemValue> = (0..200).map(|_| put(&value)).collect();
        let keys: Vec<String> = (0..200).map(|i| format!("k{i:04}")).collect();
        let group: Vec<(&[u8], &MemValue)> = keys.iter().map(|k| k.as_bytes()).zip(&vals).collect();
        let before = encode_all(&old);
        let iv = Interval::from_recs(&old);
        let (recs, edits, _) = plan_edits(&iv, &group);
        assert!(edits.len() >= 3, "200 KB of new records in {} edits", edits.len());
        assert!(edits.iter().all(|e| e.new.len() < EDIT_BYTES + 1100));
        assert_eq!(apply(before, &edits), encode_all(&recs));
    }

    #[test]
    fn adjacent_updates_coalesce_and_gaps_split_edits() {
        let old = vec![rec("a", "1"), rec("b", "2"), rec("c", "3"), rec("d", "4")];
        let (x, same, del) = (put("xx"), put("3"), MemValue::Delete);
        // a and b change (one edit), c is rewritten with its own value (no edit), d is deleted (a second edit).
        let group: Vec<(&[u8], &MemValue)> = vec![(b"a", &x), (b"b", &x), (b"c", &same), (b"d", &del)];
        let before = encode_all(&old);
        let iv = Interval::from_recs(&old);
        let (recs, edits, removed) = plan_edits(&iv, &group);
        assert_eq!(edits.len(), 2);
        assert_eq!(edits[0].old_off, 0);
        assert!(edits[1].new.is_empty());
        assert!(removed);
        assert_eq!(owned(&recs), vec![rec("a", "xx"), rec("b", "xx"), rec("c", "3")]);
        assert_eq!(apply(before, &edits), encode_all(&recs));
    }

    #[test]
    fn deleting_an_absent_key_changes_nothing() {
        let old = vec![rec("a", "1")];
        let del = MemValue::Delete;
        let group: Vec<(&[u8], &MemValue)> = vec![(b"b", &del)];
        let iv = Interval::from_recs(&old);
        let (recs, edits, removed) = plan_edits(&iv, &group);
        assert!(edits.is_empty());
        assert!(!removed);
        assert_eq!(owned(&recs), vec![rec("a", "1")]);
    }

    /// Random intervals and groups against a `BTreeMap` model: the edits turn the old bytes into the new records'
    /// bytes, never overlap, and are never empty.
    #[test]
    fn edits_reproduce_the_merged_records() {
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..2000 {
            let mut model = std::collections::BTreeMap::new();
            for _ in 0..rng.random_range(0..10) {
                let k = format!("k{:02}", rng.random_range(0..30));
                model.insert(k, format!("v{}", rng.random_range(0..3)));
            }
            let old: Vec<Rec> = model.iter().map(|(k, v)| rec(k, v)).collect();
            let mut ops = std::collections::BTreeMap::new();
            for _ in 0..rng.random_range(0..10) {
                let k = format!("k{:02}", rng.random_range(0..30));
                let v = if rng.random_bool(0.3) {
                    MemValue::Delete
                } else {
                    MemValue::Put(format!("v{}", rng.random_range(0..3)).into_bytes().into())
                };
                ops.insert(k, v);
            }
            let group: Vec<(&[u8], &MemValue)> = ops.iter().map(|(k, v)| (k.as_bytes(), v)).collect();
            for (k, v) in &ops {
                match v {
                    MemValue::Put(val) => model.insert(k.clone(), String::from_utf8(val.to_vec()).unwrap()),
                    MemValue::Delete => model.remove(k),
                };
            }
            let before = encode_all(&old);
            let iv = Interval::from_recs(&old);
            let (recs, edits, _) = plan_edits(&iv, &group);
            let want: Vec<Rec> = model.iter().map(|(k, v)| rec(k, v)).collect();
            assert_eq!(owned(&recs), want);
            assert_eq!(apply(before, &edits), encode_all(&recs));
            for w in edits.windows(2) {
                let (end, next) = (w[0].old_off + w[0].old_len, w[1].old_off);
                assert!(end < next || (end == next && w[0].new.len() >= EDIT_BYTES), "edits overlap: {w:?}");
            }
            assert!(edits.iter().all(|e| e.old_len > 0 || !e.new.is_empty()));
        }
    }
}
