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

mod commit;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, Ordering};

use flexfile::{FlexFile, ReadAhead};
use parking_lot::{Mutex, RwLock};

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
    /// The failure of a change (commit, range delete, sync), once one failed. The change may have stopped
    /// part-way, leaving the index, the cache and the file out of step, so from then on every read and change is
    /// refused with it, as [`Error::Background`], until [`Table::reload`]. Set before the failing change releases
    /// the index lock, and read under it; `is_failed` mirrors it so the read path's check is one load.
    failed: Mutex<Option<Arc<Error>>>,
    is_failed: AtomicBool,
    /// Counters.
    pub stats: TableStats,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("cache", &self.cache).finish_non_exhaustive()
    }
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

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("range", &self.range)
            .field("reverse", &self.reverse)
            .finish_non_exhaustive()
    }
}

impl Run {
    /// The run's records in scan order.
    pub fn recs(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        let (r, rev) = (self.range.clone(), self.reverse);
        let (fwd, back) = if rev { (0..0, r) } else { (r, 0..0) };
        fwd.chain(back.rev()).map(|i| self.data.rec(i))
    }
}

fn no_store(dir: &Path) -> Error {
    Error::invalid(format!("{} holds no FlexDB store", dir.display()))
}

impl Table {
    /// Fails with an `InvalidArgument` error naming `dir` unless it holds a table.
    pub(crate) fn check_exists(fs: &dyn vfs::Fs, dir: &Path) -> Result<()> {
        if fs.exists(&dir.join(TABLE_DIR).join(flexfile::flexfile::TREE_FILE))? {
            Ok(())
        } else {
            Err(no_store(dir))
        }
    }

    /// Opens (or, with `create`, creates) the table in `dir/table` and rebuilds its index.
    pub fn open(fs: Arc<dyn vfs::Fs>, dir: &Path, opts: &Options, create: bool) -> Result<Table> {
        let tdir = dir.join(TABLE_DIR);
        let file = if fs.exists(&tdir.join(flexfile::flexfile::TREE_FILE))? {
            FlexFile::open(fs, &tdir, opts.flexfile.clone())?
        } else if create {
            FlexFile::create(fs, &tdir, opts.flexfile.clone())?
        } else {
            return Err(no_store(dir));
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
            failed: Mutex::new(None),
            is_failed: AtomicBool::new(false),
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

    /// The failure that stopped the table, once a change failed (see `failed`). REQUIRES: the index lock is held
    /// (either way), so a change that failed part-way was marked before this reader could see its state.
    fn usable(&self) -> Result<()> {
        if !self.is_failed.load(Ordering::Acquire) {
            return Ok(());
        }
        match self.failed.lock().as_ref() {
            Some(e) => Err(Error::Background(e.clone())),
            None => Ok(()),
        }
    }

    /// Passes `r` on, marking the table failed with its error if it is one (the first failure stays).
    /// REQUIRES: the index write lock is held if the failed change could have touched the index or the cache.
    fn mark<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            let mut f = self.failed.lock();
            if f.is_none() {
                *f = Some(Arc::new(e.cause_copy()));
            }
            self.is_failed.store(true, Ordering::Release);
        }
        r
    }

    /// Whether a sync of the table's FlexFile ever failed: then it cannot be reloaded (`FlexFile::reload`).
    pub fn sync_failed(&self) -> bool {
        self.file.read().sync_failed()
    }

    /// Rebuilds the table from its files in place, as an open does (`FlexFile::reload`, then the index from the
    /// anchors), and makes it usable again: for a store resuming after a failed change, which then replays its
    /// logs into it. Readers wait on the index lock meanwhile; the cache is emptied, since interval ids start
    /// again. On failure the table stays failed.
    /// REQUIRES: no change (commit, range delete, sync) runs.
    pub fn reload(&self, opts: &Options) -> Result<()> {
        let mut idx = self.index.write();
        let mut file = self.file.write();
        let r = file
            .reload()
            .map_err(Error::from)
            .and_then(|()| Self::rebuild(&file, opts.rebuild_interval, opts.rebuild_threads, &self.stats));
        let fresh = self.mark(r)?;
        *idx = fresh;
        self.cache.clear();
        *self.failed.lock() = None;
        self.is_failed.store(false, Ordering::Release);
        Ok(())
    }

    /// The committed value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Box<[u8]>>> {
        let idx = self.index.read();
        self.usable()?;
        let p = idx.locate(key);
        let data = self.load(&idx, p)?;
        Ok(data.get(key).map(Box::from))
    }

    /// Committed records with `lo <= key < hi` (`hi = None`: unbounded), in order, at most `limit`, as runs of
    /// the cached intervals holding them (no record is copied). Returns how many records the runs hold.
    pub fn scan(&self, lo: &[u8], hi: Option<&[u8]>, limit: usize, out: &mut Vec<Run>) -> Result<usize> {
        let idx = self.index.read();
        self.usable()?;
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
        self.usable()?;
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
        // Without the index lock: a failed sync leaves the index and the cache as they were, and cached reads
        // must not wait for an fsync.
        let r = self.file.write().sync().map_err(Error::from);
        self.mark(r)
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
        self.usable()?;
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

    /// Deletes every committed key in `[start, end)` with one collapse of the covered bytes (§5.1 applied to a
    /// range). The two boundary intervals are read; intervals in between are dropped from the index unread.
    pub fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
        if start >= end {
            return Ok(());
        }
        let mut idx = self.index.write();
        self.usable()?;
        let r = self.delete_range_locked(&mut idx, start, end);
        self.mark(r)
    }

    /// [`Table::delete_range`] under the index write lock.
    fn delete_range_locked(&self, idx: &mut SparseIndex, start: &[u8], end: &[u8]) -> Result<()> {
        let ps = idx.locate(start);
        let pe = idx.locate(end);
        let sdata = self.load(idx, ps)?;
        let edata = self.load(idx, pe)?;
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
mod tests;
