//! The LSM-DRtree and its estimator: GLORAN's global range-record index (§4.2–§4.4).
//!
//! # Structure
//! An in-memory R-tree buffer takes new range records; when it holds `buffer_bytes` it is flushed: its areas are
//! disjointized by the heap sweep and merged with the first disk level into a new DR-tree file. Each disk level
//! holds at most one DR-tree; level `i` may grow to `buffer_bytes · T^(i+1)` bytes, after which it is compacted
//! into level `i + 1` by a streaming two-way merge that disjointizes pairwise (see `disjoint.rs`). Levels are
//! ordered newest first, but disjointization makes age irrelevant to correctness: every area reports its delete's
//! sequence number, and a point is deleted for a reader iff any source holds an area covering it whose reported
//! sequence the reader sees.
//!
//! # Point lookups
//! [`GlobalIndex::check_entry`] is the engine's call after its LSM search found the entry: the estimator first
//! (§4.3); only on a positive the buffer and then each level, one DR-tree node per tree level. Lookups take `&self`
//! and can run concurrently; writes (`insert`, `flush`, `gc`) take `&mut self` — the engine holds the index behind
//! its own lock, as it holds its memtable. A flush can also run in three steps so that lock is held only to freeze
//! the buffer and to install the new levels (`flush.rs`, [`FlushJob`]).
//!
//! # Persistence
//! The buffer is volatile: its records are durable in the engine's WAL, which must keep them until
//! [`GlobalIndex::flush`] has written them to a DR-tree (the engine flushes the index with its memtable, see
//! `docs/gloran.md`). DR-tree files are written and synced before they appear in [`GlobalIndex::live_files`]; the
//! engine records that list in its MANIFEST and hands it back to [`GlobalIndex::open`]. Files replaced by a flush,
//! compaction or GC are reported by [`GlobalIndex::take_obsolete`]; the engine deletes them after the MANIFEST no
//! longer names them. The estimator is not persisted: `open` rebuilds it from the DR-trees' areas.
//!
//! # Snapshots and GC
//! The engine passes its live snapshots ([`GlobalIndex::set_snapshots`]) so flushes and compactions keep the deletes
//! a snapshot reader must tell apart; and a GC watermark ([`GlobalIndex::gc`]) below which no covered entry remains.

mod flush;
mod levels;

pub use flush::FlushJob;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use vfs::Fs;

use crate::area::Area;
use crate::cursor::Cursor;
use crate::disjoint::{Stripes, Sweep, disjointize};
use crate::drtree::{AreaIter, DrTree, DrTreeWriter};
use crate::error::{Error, Result};
use crate::estimator::Eve;
use crate::options::IndexOptions;
use crate::rtree::RTree;
use crate::stats::{Counters, Stats, add};

/// Longest start or end key a range record may have. Keeps every DR-tree node (a stack of bands sharing one key
/// range is never split) far below the decoder's node-size limit.
pub const MAX_KEY_LEN: usize = 64 << 10;

/// One DR-tree file the index relies on: what the engine's MANIFEST records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LiveFile {
    /// Disk level (0 = newest, right below the buffer).
    pub level: u32,
    /// File number; the file is `<dir>/<number:06>.drt`.
    pub number: u64,
}

/// Widens the key bounds `[lo, hi]` to include `[start, end)`.
fn widen(lo: &mut Option<Vec<u8>>, hi: &mut Option<Vec<u8>>, start: &[u8], end: &[u8]) {
    if lo.as_deref().is_none_or(|l| start < l) {
        *lo = Some(start.to_vec());
    }
    if hi.as_deref().is_none_or(|h| end > h) {
        *hi = Some(end.to_vec());
    }
}

/// The projection prefix for keys within `[lo, hi]`: their common prefix (empty while nothing is known).
fn projection_prefix(lo: &Option<Vec<u8>>, hi: &Option<Vec<u8>>) -> Vec<u8> {
    prefix_of(lo, hi).to_vec()
}

/// [`projection_prefix`] borrowed (no allocation: it is checked on every insert).
fn prefix_of<'a>(lo: &'a Option<Vec<u8>>, hi: &Option<Vec<u8>>) -> &'a [u8] {
    match (lo, hi) {
        (Some(l), Some(h)) => crate::area::common_prefix(l, h),
        _ => &[],
    }
}

/// The file name of DR-tree `number`.
pub fn file_name(number: u64) -> String {
    format!("{number:06}.drt")
}

fn parse_file_name(name: &str) -> Option<u64> {
    name.strip_suffix(".drt")?.parse().ok()
}

#[derive(Debug, Clone)]
struct Level {
    number: u64,
    tree: Arc<DrTree>,
}

/// Counters of structural work (mutated under `&mut self`).
#[derive(Debug, Default, Clone)]
struct Work {
    records_inserted: u64,
    flushes: u64,
    compactions: u64,
    bytes_written: u64,
    gc_runs: u64,
    gc_areas_dropped: u64,
    gc_bytes_rewritten: u64,
    gc_estimators_dropped: u64,
    estimator_rebuilds: u64,
}

/// GLORAN's global range-record index.
#[derive(Debug)]
pub struct GlobalIndex {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    opts: IndexOptions,
    buffer: RTree,
    levels: Vec<Option<Level>>,
    eve: Eve,
    snapshots: Vec<u64>,
    watermark: u64,
    next_number: u64,
    obsolete: Vec<u64>,
    last_seq: u64,
    counters: Counters,
    work: Work,
    /// Smallest start and largest end key of every record seen: their common prefix is the projection prefix of
    /// the estimator and the buffer's heuristics. It can only shrink; when it does, the estimator is rebuilt at
    /// the next flush (so at most once per byte of key length over the index's life).
    key_lo: Option<Vec<u8>>,
    key_hi: Option<Vec<u8>>,
    /// The buffer disjointized for readers that see every buffered record, shared by cursors until the buffer
    /// changes: an unbounded iterator would otherwise sort and sweep the whole buffer (up to 4 MiB) on creation.
    buffer_view: Mutex<Option<Arc<Vec<Area>>>>,
    /// The buffer a flush in progress is writing (`flush.rs`): read after `buffer`, written by nobody.
    frozen: Option<Arc<RTree>>,
}

impl GlobalIndex {
    /// Opens the index in `dir` with the DR-tree files `live` (empty for a new index). Files in `dir` that are not
    /// listed are left alone (see [`GlobalIndex::remove_unlisted`]). A listed file that is missing or damaged is
    /// `Corruption`.
    pub fn open(fs: Arc<dyn Fs>, dir: &Path, opts: IndexOptions, live: &[LiveFile]) -> Result<GlobalIndex> {
        opts.validate()?;
        if !fs.exists(dir)? {
            fs.create_dir_all(dir)?;
            // Make the new directory (and any parents just created) durable in their parents, so files synced
            // into it cannot vanish with it in a crash.
            let mut p = dir;
            while let Some(parent) = p.parent().filter(|q| !q.as_os_str().is_empty()) {
                fs.sync_dir(parent)?;
                p = parent;
            }
        }
        let mut levels: Vec<Option<Level>> = Vec::new();
        let mut next_number = 1;
        for f in live {
            let lv = f.level as usize;
            if lv > 64 {
                return Err(Error::InvalidArgument(format!(
                    "level {lv} of file {} is implausible",
                    f.number
                )));
            }
            if levels.len() <= lv {
                levels.resize(lv + 1, None);
            }
            if levels[lv].is_some() {
                return Err(Error::InvalidArgument(format!("two live files at level {lv}")));
            }
            let path = dir.join(file_name(f.number));
            let tree = match DrTree::open(fs.as_ref(), &path) {
                Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(Error::Corruption {
                        path: Some(path),
                        msg: "live DR-tree file is missing".into(),
                    });
                }
                r => r?,
            };
            levels[lv] = Some(Level { number: f.number, tree: Arc::new(tree) });
            next_number = next_number.max(f.number + 1);
        }
        for name in fs.list_dir(dir)? {
            if let Some(n) = parse_file_name(&name) {
                next_number = next_number.max(n + 1);
            }
        }
        // Two passes over the areas: the key bounds (hence the projection prefix), then the estimator.
        let (mut key_lo, mut key_hi): (Option<Vec<u8>>, Option<Vec<u8>>) = (None, None);
        for l in levels.iter().flatten() {
            let mut it = l.tree.iter()?;
            while let Some(a) = it.next_area()? {
                widen(&mut key_lo, &mut key_hi, &a.start, &a.end);
            }
        }
        let prefix = projection_prefix(&key_lo, &key_hi);
        let mut eve = Eve::with_prefix(opts.estimator.clone(), prefix.clone());
        let mut last_seq = 0;
        for l in levels.iter().flatten() {
            let mut it = l.tree.iter()?;
            while let Some(a) = it.next_area()? {
                last_seq = last_seq.max(a.seq);
                if opts.use_estimator {
                    eve.insert(&a);
                }
            }
        }
        let idx = GlobalIndex {
            fs,
            dir: dir.to_path_buf(),
            opts,
            buffer: RTree::with_skip(prefix.len()),
            levels,
            eve,
            snapshots: Vec::new(),
            watermark: 0,
            next_number,
            obsolete: Vec::new(),
            last_seq,
            counters: Counters::default(),
            work: Work::default(),
            key_lo,
            key_hi,
            buffer_view: Mutex::new(None),
            frozen: None,
        };
        idx.check_invariants()?;
        Ok(idx)
    }

    /// The options.
    pub fn options(&self) -> &IndexOptions {
        &self.opts
    }

    /// Records a range delete of `[start, end)` at sequence `seq`, for entries no older than `min_seq` (pass 0
    /// when unknown). Flushes the buffer when it is full and `auto_flush` is on; if that flush fails the record
    /// stays in the buffer (the error is the flush's).
    /// REQUIRES: `seq` greater than every earlier record's (the engine's sequence order).
    pub fn insert(&mut self, start: &[u8], end: &[u8], min_seq: u64, seq: u64) -> Result<()> {
        if start >= end {
            return Err(Error::InvalidArgument("range delete needs start < end".into()));
        }
        if start.len().max(end.len()) > MAX_KEY_LEN {
            return Err(Error::InvalidArgument(format!(
                "range delete keys are limited to {MAX_KEY_LEN} bytes"
            )));
        }
        if min_seq >= seq {
            return Err(Error::InvalidArgument("range delete needs min_seq < seq".into()));
        }
        let area = Area::record(start, end, min_seq.max(self.watermark), seq);
        self.last_seq = self.last_seq.max(seq);
        widen(&mut self.key_lo, &mut self.key_hi, start, end);
        self.work.records_inserted += 1;
        if area.is_empty() {
            return Ok(()); // Entirely below the GC watermark: it cannot delete anything.
        }
        self.follow_prefix()?;
        if self.opts.use_estimator {
            self.eve.insert(&area);
        }
        self.buffer_changed();
        self.buffer.insert(area);
        if self.opts.auto_flush && !self.flushing() && self.needs_flush() {
            self.flush()?;
        }
        Ok(())
    }

    /// Whether the buffer has reached `buffer_bytes` (with `auto_flush` off, the caller's cue to `flush`).
    pub fn needs_flush(&self) -> bool {
        self.buffer.bytes() >= self.opts.buffer_bytes
    }

    /// The live snapshots (sorted or not) flushes and compactions must keep distinguishable.
    pub fn set_snapshots(&mut self, mut snapshots: Vec<u64>) {
        snapshots.sort_unstable();
        snapshots.dedup();
        self.snapshots = snapshots;
    }

    /// Records in the buffer (and in a buffer being flushed), not yet in a DR-tree file.
    pub fn buffered_records(&self) -> usize {
        self.buffer.len() + self.frozen.as_ref().map_or(0, |f| f.len())
    }

    /// Whether the buffer (or a buffer being flushed) holds records not yet in a DR-tree file.
    pub fn has_unflushed(&self) -> bool {
        !self.buffer.is_empty() || self.frozen.is_some()
    }

    /// Drops the shared cursor view of the buffer. REQUIRES: called by every change of the buffer.
    fn buffer_changed(&mut self) {
        *self.buffer_view.get_mut().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// A delete covering `(key, seq)` that a reader at `snapshot` sees, from the buffer or any level; `None` if
    /// the entry is valid for that reader. Does not consult the estimator.
    pub fn covering(&self, key: &[u8], seq: u64, snapshot: u64) -> Result<Option<u64>> {
        add(&self.counters.index_probes, 1);
        let mut visited = 0;
        let mut hit = self.buffer.covering(key, seq, snapshot, &mut visited);
        if hit.is_none() {
            hit = self.frozen.as_ref().and_then(|f| f.covering(key, seq, snapshot, &mut visited));
        }
        add(&self.counters.buffer_nodes_visited, visited);
        if hit.is_some() {
            add(&self.counters.covered, 1);
            return Ok(hit);
        }
        let mut nodes = 0;
        let mut found = None;
        for l in self.levels.iter().flatten() {
            if let Some(s) = l.tree.covering(key, seq, snapshot, &mut nodes)? {
                found = Some(s);
                break;
            }
        }
        add(&self.counters.nodes_read, nodes);
        if found.is_some() {
            add(&self.counters.covered, 1);
        }
        Ok(found)
    }

    /// The point-lookup check (§4.3): whether the entry `(key, seq)` the LSM search found is deleted by a range
    /// record a reader at `snapshot` sees. Asks the estimator first and the index only on a positive.
    pub fn check_entry(&self, key: &[u8], seq: u64, snapshot: u64) -> Result<bool> {
        add(&self.counters.lookups, 1);
        if self.opts.use_estimator {
            add(&self.counters.estimator_checks, 1);
            if !self.eve.probe(key, seq, snapshot).positive {
                return Ok(false);
            }
            add(&self.counters.estimator_positives, 1);
            let hit = self.covering(key, seq, snapshot)?.is_some();
            if !hit {
                add(&self.counters.estimator_false_positives, 1);
            }
            return Ok(hit);
        }
        Ok(self.covering(key, seq, snapshot)?.is_some())
    }

    /// Whether a buffered record a reader at `snapshot` sees deletes `key` at every sequence number in
    /// `[lo, hi]`. The engine asks this before searching its tables, with `[lo, hi]` the sequence numbers they
    /// hold: a yes means whatever version of `key` the search would find is deleted, so the search is skipped.
    /// This is the shortcut local range tombstones give a lookup whose key a memtable tombstone covers; the
    /// paper's lookup path lacks it and pays a table search for every key deleted since the last flush. Only
    /// the in-memory buffer is asked (the estimator first), so a key no record covers costs one estimator probe
    /// and no I/O. `false` is "unknown", never "valid".
    pub fn covers_span(&self, key: &[u8], lo: u64, hi: u64, snapshot: u64) -> bool {
        if lo > hi || (self.buffer.is_empty() && self.frozen.is_none()) {
            return false;
        }
        add(&self.counters.span_checks, 1);
        if self.opts.use_estimator && !self.eve.probe(key, hi, snapshot).positive {
            return false;
        }
        let mut visited = 0;
        let hit = self.buffer.covering_span(key, lo, hi, snapshot, &mut visited).is_some()
            || self
                .frozen
                .as_ref()
                .is_some_and(|f| f.covering_span(key, lo, hi, snapshot, &mut visited).is_some());
        add(&self.counters.buffer_nodes_visited, visited);
        if hit {
            add(&self.counters.span_hits, 1);
        }
        hit
    }

    /// A cursor answering, for keys in ascending order within `[lo, hi)`, whether entries are deleted for a reader
    /// at `snapshot` (iterators and compaction). It reads each level sequentially and holds its own handles, so it
    /// stays valid across later flushes as long as the engine keeps the files it was created on.
    pub fn cursor(&self, lo: &[u8], hi: Option<&[u8]>, snapshot: u64) -> Result<Cursor> {
        let buffered = if snapshot >= self.last_seq {
            // Every buffered record is visible (their sequence numbers are at most `last_seq`), so the view does
            // not depend on `snapshot`: one stripe either way. It covers the whole key space, a superset of
            // `[lo, hi)`.
            let mut view = self.buffer_view.lock().unwrap_or_else(|p| p.into_inner());
            match &*view {
                Some(v) => Arc::clone(v),
                None => {
                    let v = Arc::new(disjointize(self.buffered_areas(), &[snapshot], 0)?);
                    *view = Some(Arc::clone(&v));
                    v
                }
            }
        } else {
            let mut buffered = self.buffer.overlapping(lo, hi);
            if let Some(f) = &self.frozen {
                buffered.extend(f.overlapping(lo, hi));
            }
            buffered.retain(|a| a.seq <= snapshot);
            Arc::new(disjointize(buffered, &[snapshot], 0)?)
        };
        let mut levels = Vec::new();
        for l in self.levels.iter().flatten() {
            levels.push(l.tree.iter_from(lo)?);
        }
        Ok(Cursor::new(buffered, levels, lo, snapshot))
    }

    /// Iterates the areas of disk level `level` in key order (`None` if the level is empty).
    pub fn level_areas(&self, level: usize) -> Result<Option<AreaIter>> {
        self.level_iter(level)
    }

    /// Number of disk levels (including empty ones below the last non-empty level).
    pub fn level_count(&self) -> usize {
        self.levels.len()
    }

    /// The DR-tree files the index relies on now: what the engine's MANIFEST must record.
    pub fn live_files(&self) -> Vec<LiveFile> {
        self.levels
            .iter()
            .enumerate()
            .filter_map(|(i, l)| l.as_ref().map(|l| LiveFile { level: i as u32, number: l.number }))
            .collect()
    }

    /// File numbers no longer live since the last call: delete them once the new live set is durable.
    pub fn take_obsolete(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.obsolete)
    }

    /// Deletes the given DR-tree files and syncs the directory.
    pub fn remove_files(&self, numbers: &[u64]) -> Result<()> {
        for &n in numbers {
            match self.fs.remove_file(&self.dir.join(file_name(n))) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        self.fs.sync_dir(&self.dir)?;
        Ok(())
    }

    /// Deletes every DR-tree file in the directory that is not live (leftovers of a crash between writing a file
    /// and recording it). Call only when the live set is durable.
    pub fn remove_unlisted(&mut self) -> Result<Vec<u64>> {
        self.not_flushing()?; // The flush's new files are not listed yet.
        let live: Vec<u64> = self.live_files().iter().map(|f| f.number).collect();
        let mut gone = Vec::new();
        for name in self.fs.list_dir(&self.dir)? {
            if let Some(n) = parse_file_name(&name).filter(|n| !live.contains(n)) {
                gone.push(n);
            }
        }
        self.remove_files(&gone)?;
        self.obsolete.retain(|n| !gone.contains(n));
        Ok(gone)
    }

    /// The largest sequence number recorded.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The GC watermark in force.
    pub fn watermark(&self) -> u64 {
        self.watermark
    }

    /// The statistics.
    pub fn stats(&self) -> Stats {
        let mut s = Stats {
            records_inserted: self.work.records_inserted,
            flushes: self.work.flushes,
            compactions: self.work.compactions,
            bytes_written: self.work.bytes_written,
            gc_runs: self.work.gc_runs,
            gc_areas_dropped: self.work.gc_areas_dropped,
            gc_bytes_rewritten: self.work.gc_bytes_rewritten,
            gc_estimators_dropped: self.work.gc_estimators_dropped,
            estimator_rebuilds: self.work.estimator_rebuilds,
            index_file_bytes: self.levels.iter().flatten().map(|l| l.tree.file_len()).sum(),
            buffer_bytes: (self.buffer.bytes() + self.frozen.as_ref().map_or(0, |f| f.bytes())) as u64,
            estimator_bytes: self.eve.bytes() as u64,
            estimator_raes: self.eve.len() as u64,
            level_areas: self
                .levels
                .iter()
                .map(|l| l.as_ref().map_or(0, |l| l.tree.footer().areas))
                .collect(),
            ..Stats::default()
        };
        self.counters.fill(&mut s);
        s
    }

    /// Whole-structure check: the buffer's R-tree and every level's order and disjointness. Reads every file.
    pub fn check(&self) -> Result<()> {
        self.buffer.check().map_err(Error::corrupt)?;
        if let Some(f) = &self.frozen {
            f.check().map_err(Error::corrupt)?;
        }
        for l in self.levels.iter().flatten() {
            l.tree.check()?;
        }
        Ok(())
    }

    fn check_invariants(&self) -> Result<()> {
        #[cfg(feature = "invariants")]
        self.check()?;
        Ok(())
    }
}
