//! One volume: a fixed-size virtual disk with its journal, segment cache, data files and RASK index.
//!
//! Write path (§2.1): append a journal record; put the blocks in the segment cache (a delete instead drops cached
//! blocks and deletes the range in the index at once); FLUSH and FUA sync the journal, which is the only durability
//! point a client waits for. When the cache holds `segment_cache_bytes` (or the journal `journal_flush_bytes`
//! more than at the last batch), the cache is frozen and the flusher thread (`flusher`) turns it into CWs (I/O
//! compaction) and one batch in the data file (unsynced), then puts the CWs' locations into the index; a new
//! cache takes writes meanwhile (without `flush_in_background`, the writer does this inline). The journal keeps
//! those writes until the data file is synced: once it holds `journal_reset_bytes`, or when an index checkpoint
//! is written, the data file is synced and then the journal is rewound. So a stream of writes costs one data
//! sync per `journal_reset_bytes`, not two per segment cache.
//!
//! Read path: the index gives the unit of every mapped piece; each unit touched is read and decompressed once per
//! request; unmapped blocks read as zeros; cached blocks are overlaid last because they are newer than the index.
//!
//! Live accounting: every index update first looks up what it is about to override (an index lookup, never a
//! data-file read) and subtracts those blocks from their files' live counts; `live[file]` is always the number of
//! blocks the index maps to `file` (checked under `invariants`). Garbage collection (`gc.rs`) uses it to pick the
//! emptiest sealed files.
//!
//! Recovery: the index checkpoint (if any) is loaded, the data-file batches after it are replayed in sequence
//! order, then the journal records newer than the last batch's `journal_seq` are replayed into the cache. The
//! result is the exact index and cache the volume had after its last durable record.
//!
//! Every operation holds the volume mutex, so the volume is linearizable and a FLUSH on one NBD connection covers
//! writes acknowledged on every other; a read holds it only to plan (index lookup, cache copy) and reads the data
//! files after releasing it (`read_plan.rs`); the flusher holds it only to place a batch and to index it. After a failed write-path I/O the volume is poisoned: memory may be ahead
//! of the files, so it refuses further writes and flushes until reopened.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};

use rask::{BlockRange, RangeValue, Rask};
use vfs::{Fs, OpenMode};

use crate::cache::SegmentCache;
use crate::datafile::{DataFileInfo, DataFiles};
use crate::format::{BatchOp, Checkpoint, Piece, SyncMark, VolumeMeta};
use crate::journal::{Journal, JournalOp};
use crate::location::Location;
use crate::read_plan::ReadPlan;
use crate::stats::Stats;
use crate::{BLOCK_SIZE, Error, Options, Result};

/// An open volume. Shared by every connection; internally synchronised.
#[derive(Debug)]
pub struct Volume {
    name: String,
    size: u64,
    shared: Arc<Shared>,
    /// The flusher thread (`Options::flush_in_background`), joined on drop.
    flusher: Option<std::thread::JoinHandle<()>>,
    /// Serialises garbage-collection rounds (which drop `state` while they read).
    pub(crate) gc_lock: Mutex<()>,
    /// The volume's own `Arc` (set by the store that opened it): what a background collection round holds.
    pub(crate) me: OnceLock<Weak<Volume>>,
    /// A background collection thread was started and has not finished.
    pub(crate) gc_running: AtomicBool,
    pub(crate) gc_in_background: bool,
}

/// What the volume and its flusher thread share.
#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when a cache is frozen (the flusher waits for work) and when a frozen cache reached the index or
    /// the volume was poisoned (writers and drains wait for the flusher).
    cv: Condvar,
    shutdown: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.cv.wait(g).unwrap_or_else(|p| p.into_inner())
    }
}

pub(crate) struct State {
    pub(crate) fs: Arc<dyn Fs>,
    pub(crate) dir: PathBuf,
    pub(crate) opts: Options,
    journal: Journal,
    cache: SegmentCache,
    /// A full cache the flusher is writing to a data file: newer than the index, older than `cache`. Reads
    /// overlay it; anything that needs the index to be exactly the batches' state waits until it is gone.
    frozen: Option<Arc<SegmentCache>>,
    /// The last journal seq the frozen cache holds (its batch's `journal_seq`).
    frozen_journal_seq: u64,
    /// The flusher took the frozen cache and is encoding it.
    frozen_taken: bool,
    /// `data.appended()` when the flusher last started an early sync of the current data file.
    presynced: u64,
    pub(crate) index: Rask<Location>,
    pub(crate) data: DataFiles,
    /// Blocks the index maps to each data file (absent: none).
    pub(crate) live: BTreeMap<u32, u64>,
    next_journal_seq: u64,
    /// The journal's length right after the newest batch: what it grew by since is what the cache holds.
    journal_len_at_batch: u64,
    /// The `journal_seq` of the newest batch or checkpoint: what a batch that takes nothing from the journal
    /// (a relocation) must carry.
    pub(crate) batch_journal_seq: u64,
    /// Bytes of batches appended since the last checkpoint, and the size of that checkpoint.
    bytes_since_checkpoint: u64,
    last_checkpoint_bytes: u64,
    checkpoint_seq: u64,
    /// The newest `synced` mark written or found at open.
    synced: SyncMark,
    /// A flush left a garbage-collection candidate; the next write runs a round after releasing the lock.
    pub(crate) gc_due: bool,
    pub(crate) poisoned: Option<String>,
    pub(crate) stats: Stats,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("index_entries", &self.index.entry_count())
            .field("cache_bytes", &self.cache.bytes())
            .field("journal", &self.journal)
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

/// Summary of a volume for tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeInfo {
    /// Volume name.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// Records in the journal.
    pub journal_records: u64,
    /// Leaves of the index.
    pub index_leaves: usize,
    /// Live mapping pieces in the index.
    pub index_pieces: usize,
    /// Entries stored in the index (including superseded ones not yet collected).
    pub index_entries: usize,
    /// Bytes of memory the index holds.
    pub index_memory: usize,
    /// Bytes in the segment cache.
    pub cache_bytes: usize,
    /// Bytes in the journal.
    pub journal_bytes: u64,
    /// Data files with their sizes, written and live blocks.
    pub data_files: Vec<DataFileInfo>,
    /// Sequence number of the last batch in the index checkpoint (0: none).
    pub checkpoint_seq: u64,
    /// The newest `synced` mark: batches up to it are known durable (all zero: none written yet).
    pub synced: SyncMark,
    /// Counters.
    pub stats: Stats,
}

/// The index checkpoint's file name in a volume directory.
pub const CHECKPOINT_FILE: &str = "checkpoint";
/// The file naming the newest batch a data sync made durable (`format::SyncMark`).
pub const SYNCED_FILE: &str = "synced";

pub(crate) fn volume_dir(store: &Path, name: &str) -> PathBuf {
    vfs::join(store, name)
}

impl Volume {
    /// Creates volume `name` of `size` bytes in store directory `store`.
    pub(crate) fn create(
        fs: Arc<dyn Fs>,
        store: &Path,
        name: &str,
        size: u64,
        opts: Options,
    ) -> Result<Volume> {
        let dir = volume_dir(store, name);
        if fs.exists(&vfs::join(&dir, "meta"))? {
            return Err(Error::VolumeExists(name.to_string()));
        }
        fs.create_dir_all(&dir)?;
        fs.open(&vfs::join(&dir, "journal"), OpenMode::CreateTruncate)?.sync_data()?;
        let meta = VolumeMeta { size, block_size: BLOCK_SIZE as u32 };
        vfs::write_atomic(fs.as_ref(), &vfs::join(&dir, "meta"), &meta.encode())?;
        fs.sync_dir(store)?;
        Volume::open(fs, store, name, opts)
    }

    /// Opens and recovers volume `name`.
    pub(crate) fn open(fs: Arc<dyn Fs>, store: &Path, name: &str, opts: Options) -> Result<Volume> {
        Volume::open_mode(fs, store, name, opts, false)
    }

    /// Opens volume `name` for inspection: recovery runs in memory only (no torn tail is cut, no file removed)
    /// and every write or flush fails.
    pub(crate) fn open_read_only(fs: Arc<dyn Fs>, store: &Path, name: &str, opts: Options) -> Result<Volume> {
        Volume::open_mode(fs, store, name, opts, true)
    }

    fn open_mode(
        fs: Arc<dyn Fs>,
        store: &Path,
        name: &str,
        opts: Options,
        read_only: bool,
    ) -> Result<Volume> {
        opts.validate()?;
        let dir = volume_dir(store, name);
        let meta_path = vfs::join(&dir, "meta");
        if !fs.exists(&meta_path)? {
            return Err(Error::NoSuchVolume(name.to_string()));
        }
        let meta = VolumeMeta::decode(&vfs::read_all(fs.as_ref(), &meta_path)?)?;
        if meta.block_size as usize != BLOCK_SIZE
            || meta.size == 0
            || !meta.size.is_multiple_of(BLOCK_SIZE as u64)
        {
            return Err(Error::Corruption(format!("volume {name}: unsupported geometry {meta:?}")));
        }
        let blocks = meta.size / BLOCK_SIZE as u64;
        let mut index = Rask::new(opts.index.clone()).map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let mut stats = Stats::default();
        let ckpt_path = vfs::join(&dir, CHECKPOINT_FILE);
        let ckpt = if fs.exists(&ckpt_path)? {
            Some(Checkpoint::decode(&vfs::read_all(fs.as_ref(), &ckpt_path)?)?)
        } else {
            None
        };
        let after = ckpt.as_ref().map_or(0, |c| c.batch_seq);
        let synced_path = vfs::join(&dir, SYNCED_FILE);
        let durable = if fs.exists(&synced_path)? {
            SyncMark::decode(&vfs::read_all(fs.as_ref(), &synced_path)?)?
        } else {
            SyncMark::default()
        };
        let (mut data, batches) = DataFiles::open(fs.clone(), &dir, after, durable, read_only)?;
        let mut last_journal_seq = 0;
        let mut checkpoint_len = 0;
        if let Some(c) = &ckpt {
            // Files older than the checkpoint's current file that it does not list were being deleted by a
            // garbage collection when the volume went down: nothing references them any more.
            let mut removed = false;
            for (id, _) in data.written() {
                if id < c.current_file && c.files.binary_search_by_key(&id, |&(f, _)| f).is_err() {
                    if read_only {
                        data.forget(id);
                    } else {
                        data.remove(id)?;
                        removed = true;
                    }
                }
            }
            if removed {
                fs.sync_dir(&dir)?;
            }
            for p in &c.pieces {
                check_blocks(p.first, p.blocks, blocks)?;
                if !data.contains(p.loc.file) {
                    return Err(Error::Corruption(format!(
                        "index checkpoint references missing data file {}",
                        p.loc.file
                    )));
                }
                index.put(block_range(p.first, p.blocks), p.loc);
            }
            stats.recovered_checkpoint_pieces = c.pieces.len() as u64;
            last_journal_seq = c.journal_seq;
            checkpoint_len = c.encode_len() as u64;
        }
        for b in &batches {
            last_journal_seq = last_journal_seq.max(b.header.journal_seq);
            for op in &b.ops {
                apply_batch_op(&mut index, None, b.file, op, blocks)?;
            }
            stats.recovered_batches += 1;
        }
        let mut live: BTreeMap<u32, u64> = BTreeMap::new();
        for (r, loc) in index.iter() {
            *live.entry(loc.file).or_default() += r.len();
        }
        for (&id, &n) in &live {
            if n > data.written_blocks(id) {
                return Err(Error::Corruption(format!(
                    "the index maps {n} blocks to data file {id}, which holds {}",
                    data.written_blocks(id)
                )));
            }
        }
        let jmode = if read_only { OpenMode::ReadOnly } else { OpenMode::ReadWrite };
        let (mut journal, records) = Journal::open(fs.open(&vfs::join(&dir, "journal"), jmode)?, read_only)?;
        let mut cache = SegmentCache::default();
        let mut next_journal_seq = last_journal_seq + 1;
        if !read_only && records.last().is_some_and(|&(seq, _)| seq <= last_journal_seq) {
            // Every record is in a data file already: start the next chain at offset 0 instead of after records
            // that replay would only skip.
            journal.truncate()?;
        }
        let journal_len = journal.len();
        for (seq, op) in records {
            if seq <= last_journal_seq {
                continue;
            }
            match op {
                JournalOp::Write { first, data } => {
                    check_blocks(first, (data.len() / BLOCK_SIZE) as u64, blocks)?;
                    cache.write(first, &data);
                }
                JournalOp::Delete { first, blocks: n } => {
                    check_blocks(first, u64::from(n), blocks)?;
                    cache.delete(first, u64::from(n));
                    index_delete(&mut index, &mut live, block_range(first, u64::from(n)));
                }
            }
            stats.recovered_journal_records += 1;
            next_journal_seq = seq + 1;
        }
        let state = State {
            fs,
            dir,
            opts,
            journal,
            cache,
            frozen: None,
            frozen_journal_seq: 0,
            frozen_taken: false,
            presynced: 0,
            index,
            data,
            live,
            next_journal_seq,
            journal_len_at_batch: journal_len,
            batch_journal_seq: last_journal_seq,
            bytes_since_checkpoint: 0,
            last_checkpoint_bytes: checkpoint_len,
            checkpoint_seq: after,
            synced: durable,
            gc_due: false,
            poisoned: read_only.then(|| "opened read-only for inspection".to_string()),
            stats,
        };
        let mut state = state;
        state.gc_due = !read_only && state.gc_wanted();
        let background = !read_only && state.opts.flush_in_background;
        let gc_in_background = state.opts.gc_in_background;
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            cv: Condvar::new(),
            shutdown: AtomicBool::new(false),
        });
        let flusher = if background {
            let sh = shared.clone();
            Some(std::thread::Builder::new().name("blockstore-flush".into()).spawn(move || flusher(&sh))?)
        } else {
            None
        };
        Ok(Volume {
            name: name.to_string(),
            size: meta.size,
            shared,
            flusher,
            gc_in_background,
            gc_lock: Mutex::new(()),
            me: OnceLock::new(),
            gc_running: AtomicBool::new(false),
        })
    }

    /// Wraps a newly opened volume in the `Arc` every user shares, remembering it for background work.
    pub(crate) fn into_shared(self) -> Arc<Volume> {
        let v = Arc::new(self);
        let _ = v.me.set(Arc::downgrade(&v));
        v
    }

    /// The volume's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The volume's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }

    /// The lock once no frozen cache is in flight (or the volume is poisoned): the index then holds exactly the
    /// batches' state plus the deletes since, as checkpoints, deletes and collection installs need.
    pub(crate) fn drained(&self) -> MutexGuard<'_, State> {
        let mut s = self.lock();
        while s.frozen.is_some() && s.poisoned.is_none() {
            s = self.shared.wait(s);
        }
        s
    }

    /// The end of a write or delete that left `r`: make room in the cache, poison the volume on a write-path
    /// failure, and start a collection round (after the lock is released) if a flush left one due.
    fn after_update(&self, s: MutexGuard<'_, State>, r: Result<()>) -> Result<()> {
        let (mut s, r) = match r {
            Ok(()) => self.make_room(s),
            Err(e) => (s, Err(e)),
        };
        let r = s.poison_on_err(r);
        let gc = r.is_ok() && s.gc_due;
        drop(s);
        if gc {
            self.background_gc();
        }
        r
    }

    /// After a write or delete: moves a full cache towards a data file. With the flusher, the cache is frozen
    /// for it, and the writer waits only while a second cache is full too; without, the writer flushes it.
    fn make_room<'a>(&'a self, mut s: MutexGuard<'a, State>) -> (MutexGuard<'a, State>, Result<()>) {
        if !s.cache_full(1) {
            return (s, Ok(()));
        }
        if self.flusher.is_none() {
            let r = s.flush_cache();
            return (s, r);
        }
        loop {
            if let Err(e) = s.usable() {
                return (s, Err(e));
            }
            if s.frozen.is_none() {
                s.freeze();
                self.shared.cv.notify_all();
                return (s, Ok(()));
            }
            if !s.cache_full(2) {
                return (s, Ok(()));
            }
            s = self.shared.wait(s);
        }
    }

    fn check(&self, offset: u64, len: u64) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(Error::OutOfRange { offset, len, size: self.size }),
        }
    }

    /// Reads `buf.len()` bytes at `offset` (any alignment).
    pub fn read(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.check(offset, buf.len() as u64)?;
        if buf.is_empty() {
            return Ok(());
        }
        let (first, n) = span(offset, buf.len() as u64);
        // The data-file reads and decompression run after the lock is released, so reads proceed in parallel
        // with each other and with writes.
        let plan = self.lock().read_plan(first, n)?;
        let skip = (offset - first * BLOCK_SIZE as u64) as usize;
        if skip == 0 && buf.len().is_multiple_of(BLOCK_SIZE) {
            return plan.execute(buf);
        }
        let mut whole = vec![0u8; n as usize * BLOCK_SIZE];
        plan.execute(&mut whole)?;
        buf.copy_from_slice(&whole[skip..skip + buf.len()]);
        Ok(())
    }

    /// Writes `data` at `offset` (any alignment; partial blocks are read, patched and rewritten). With `fua` it
    /// returns once the write is durable.
    pub fn write(&self, data: &[u8], offset: u64, fua: bool) -> Result<()> {
        self.check(offset, data.len() as u64)?;
        if data.is_empty() {
            return if fua { self.flush() } else { Ok(()) };
        }
        let mut s = self.lock();
        s.usable()?;
        let (first, n) = span(offset, data.len() as u64);
        let skip = (offset - first * BLOCK_SIZE as u64) as usize;
        let r = if skip == 0 && data.len().is_multiple_of(BLOCK_SIZE) {
            s.write_blocks(first, data, fua)
        } else {
            let mut whole = vec![0u8; n as usize * BLOCK_SIZE];
            s.read_blocks(first, n, &mut whole)?;
            whole[skip..skip + data.len()].copy_from_slice(data);
            s.write_blocks(first, &whole, fua)
        };
        self.after_update(s, r)
    }

    /// Makes `offset..offset+len` read as zeros: whole blocks become a range delete in the index (no data is
    /// written); partial blocks at the edges are written with zeros.
    pub fn zero(&self, offset: u64, len: u64, fua: bool) -> Result<()> {
        self.check(offset, len)?;
        // A delete goes to the index at once, so a frozen cache must reach the index first (its older writes
        // would land on top of the delete otherwise).
        let mut s = self.drained();
        s.usable()?;
        let r = s.zero(offset, len, fua);
        self.after_update(s, r)
    }

    /// Makes every write that returned before this call durable.
    pub fn flush(&self) -> Result<()> {
        let mut s = self.lock();
        s.usable()?;
        s.stats.flushes += 1;
        let r = s.journal.sync();
        s.poison_on_err(r)
    }

    /// Moves the segment cache to a data file now (I/O compaction + batch), as a full cache would.
    pub fn flush_cache(&self) -> Result<()> {
        let mut s = self.drained();
        s.usable()?;
        let r = s.flush_cache();
        s.poison_on_err(r)
    }

    /// Writes an index checkpoint now (after moving the segment cache to a data file), so a reopen replays no
    /// batch.
    pub fn checkpoint(&self) -> Result<()> {
        let mut s = self.drained();
        s.usable()?;
        let r = s.flush_cache().and_then(|()| s.checkpoint(&[]));
        s.poison_on_err(r)
    }

    /// The allocation status of bytes `offset..offset+len` for NBD's `base:allocation`: extents `(length, flags)`
    /// where flags are `HOLE | ZERO` for blocks that are neither in the segment cache nor mapped by the index
    /// (never written, trimmed or zeroed) and 0 for data. A partial block counts as its whole block.
    pub fn allocation(&self, offset: u64, len: u64) -> Result<Vec<(u64, bool)>> {
        self.check(offset, len)?;
        if len == 0 {
            return Ok(Vec::new());
        }
        let s = self.lock();
        let (first, n) = span(offset, len);
        let end = first + n;
        // Mapped block intervals from the index and the cache, merged in block order.
        let mut mapped: Vec<(u64, u64)> = Vec::new();
        s.index.get_with(block_range(first, n), |r, _| mapped.push((r.first(), r.last() + 1)));
        mapped.extend(s.cached_blocks(first, end).map(|(b, _)| (b, b + 1)));
        mapped.sort_unstable();
        let bs = BLOCK_SIZE as u64;
        let mut out: Vec<(u64, bool)> = Vec::new();
        let mut push = |from: u64, to: u64, data: bool| {
            let a = (from * bs).max(offset);
            let b = (to * bs).min(offset + len);
            if b > a {
                match out.last_mut() {
                    Some((l, d)) if *d == data => *l += b - a,
                    _ => out.push((b - a, data)),
                }
            }
        };
        let mut at = first;
        for (a, b) in mapped {
            if b <= at {
                continue;
            }
            if a > at {
                push(at, a, false);
            }
            push(a.max(at), b, true);
            at = b;
        }
        if at < end {
            push(at, end, false);
        }
        Ok(out)
    }

    /// Reads and verifies every compression unit the index references (checksums, lengths, LZ4 streams).
    /// Returns the number of units checked; the first bad one is an error.
    pub fn verify(&self) -> Result<u64> {
        let s = self.lock();
        let mut seen = std::collections::HashSet::new();
        for (r, loc) in s.index.iter() {
            if seen.insert((loc.file, loc.unit_offset)) {
                let unit = s.data.read_unit(&loc)?;
                if (u64::from(loc.block_in_unit) + r.len()) * BLOCK_SIZE as u64 > unit.len() as u64 {
                    return Err(Error::Corruption(format!("index piece {r:?} runs past its unit")));
                }
            }
        }
        Ok(seen.len() as u64)
    }

    /// The current counters.
    pub fn stats(&self) -> Stats {
        self.lock().current_stats()
    }

    /// A summary for tools.
    pub fn info(&self) -> Result<VolumeInfo> {
        let s = self.lock();
        Ok(VolumeInfo {
            name: self.name.clone(),
            size: self.size,
            journal_records: s.journal.records(),
            index_leaves: s.index.leaf_count(),
            index_pieces: s.index.len(),
            index_entries: s.index.entry_count(),
            index_memory: s.index.memory_usage(),
            cache_bytes: s.cache.bytes() + s.frozen.as_ref().map_or(0, |f| f.bytes()),
            journal_bytes: s.journal.len(),
            data_files: s.data.infos(|id| s.live.get(&id).copied().unwrap_or(0))?,
            checkpoint_seq: s.checkpoint_seq(),
            synced: s.synced,
            stats: s.current_stats(),
        })
    }

    /// Checks the index's structural invariants and the live accounting against the index (tests).
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        let s = self.lock();
        s.index.check_invariants()?;
        let mut live: BTreeMap<u32, u64> = BTreeMap::new();
        for (r, loc) in s.index.iter() {
            if !s.data.contains(loc.file) {
                return Err(format!("index maps {r:?} to missing data file {}", loc.file));
            }
            *live.entry(loc.file).or_default() += r.len();
        }
        let mut counted = s.live.clone();
        counted.retain(|_, n| *n > 0);
        if counted != live {
            return Err(format!("live accounting {counted:?} but the index maps {live:?}"));
        }
        for (&id, &n) in &live {
            if n > s.data.written_blocks(id) {
                return Err(format!(
                    "data file {id}: {n} live blocks of {} written",
                    s.data.written_blocks(id)
                ));
            }
        }
        Ok(())
    }
}

impl State {
    pub(crate) fn usable(&self) -> Result<()> {
        match &self.poisoned {
            Some(m) => Err(Error::Poisoned(m.clone())),
            None => Ok(()),
        }
    }

    pub(crate) fn poison_on_err<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r
            && matches!(e, Error::Io(_) | Error::Corruption(_))
        {
            self.poisoned = Some(e.to_string());
        }
        r
    }

    /// What reading blocks `first..first + n` needs, taken under the lock (see `read_plan.rs`).
    /// REQUIRES: the blocks inside the volume.
    fn read_plan(&mut self, first: u64, n: u64) -> Result<ReadPlan> {
        let mut pieces = Vec::new();
        self.index.get_with(block_range(first, n), |r, loc| pieces.push((r, *loc)));
        let mut files = HashMap::new();
        for (_, loc) in &pieces {
            if let std::collections::hash_map::Entry::Vacant(e) = files.entry(loc.file) {
                e.insert(self.data.handle(loc.file)?);
            }
        }
        // Frozen blocks first: the plan copies cached blocks in order, so the newer cache's copy lands last.
        let cached = self.cached_blocks(first, first + n).map(|(b, d)| (b, Box::from(d))).collect();
        let plan = ReadPlan { first, pieces, files, cached };
        self.stats.units_read += plan.unit_count();
        self.stats.unit_bytes_read += plan.unit_bytes();
        self.stats.reads += 1;
        Ok(plan)
    }

    /// Reads blocks under the lock (for read-modify-write, which must not interleave with other writes).
    /// REQUIRES: `out.len() == n * BLOCK_SIZE`, the blocks inside the volume.
    fn read_blocks(&mut self, first: u64, n: u64, out: &mut [u8]) -> Result<()> {
        self.read_plan(first, n)?.execute(out)
    }

    fn write_blocks(&mut self, first: u64, data: &[u8], fua: bool) -> Result<()> {
        // Bound one record's size: huge NBD writes are split into several records.
        let max = self.opts.segment_cache_bytes.max(BLOCK_SIZE);
        for (i, chunk) in data.chunks(max).enumerate() {
            let at = first + (i * max / BLOCK_SIZE) as u64;
            let seq = self.next_journal_seq;
            self.journal.append_write(seq, at, chunk)?;
            self.next_journal_seq += 1;
            self.cache.write(at, chunk);
        }
        self.stats.writes += 1;
        self.stats.blocks_written += (data.len() / BLOCK_SIZE) as u64;
        if fua {
            self.journal.sync()?;
        }
        Ok(())
    }

    fn zero(&mut self, offset: u64, len: u64, fua: bool) -> Result<()> {
        let bs = BLOCK_SIZE as u64;
        let end = offset + len;
        let first_whole = offset.div_ceil(bs);
        let end_whole = end / bs;
        if first_whole >= end_whole {
            // No whole block: a read-modify-write of the one or two partial blocks.
            return self.zero_partial(offset, end, fua);
        }
        if offset < first_whole * bs {
            self.zero_partial(offset, first_whole * bs, false)?;
        }
        if end > end_whole * bs {
            self.zero_partial(end_whole * bs, end, false)?;
        }
        // One record per <= u32::MAX blocks.
        let mut b = first_whole;
        while b < end_whole {
            let n = (end_whole - b).min(u64::from(u32::MAX));
            let seq = self.next_journal_seq;
            self.journal.append_delete(seq, b, n as u32)?;
            self.next_journal_seq += 1;
            self.cache.delete(b, n);
            index_delete(&mut self.index, &mut self.live, block_range(b, n));
            b += n;
        }
        self.stats.deletes += 1;
        if fua {
            self.journal.sync()?;
        }
        Ok(())
    }

    fn zero_partial(&mut self, start: u64, end: u64, fua: bool) -> Result<()> {
        let (first, n) = span(start, end - start);
        let mut whole = vec![0u8; n as usize * BLOCK_SIZE];
        self.read_blocks(first, n, &mut whole)?;
        let skip = (start - first * BLOCK_SIZE as u64) as usize;
        whole[skip..skip + (end - start) as usize].fill(0);
        self.write_blocks(first, &whole, fua)
    }

    /// Whether the cache (with its pending deletes) or the journal grew `times` × past its flush threshold since
    /// the last batch or freeze.
    fn cache_full(&self, times: u64) -> bool {
        let pending_deletes = self.cache.deletes().len() * 64;
        (self.cache.bytes() + pending_deletes) as u64 >= times * self.opts.segment_cache_bytes as u64
            || self.journal.len().saturating_sub(self.journal_len_at_batch)
                >= times * self.opts.journal_flush_bytes
    }

    /// Hands the cache to the flusher. REQUIRES: no frozen cache.
    fn freeze(&mut self) {
        debug_assert!(self.frozen.is_none());
        if self.cache.is_empty() {
            return;
        }
        self.frozen = Some(Arc::new(std::mem::take(&mut self.cache)));
        self.frozen_journal_seq = self.next_journal_seq - 1;
        self.frozen_taken = false;
        self.journal_len_at_batch = self.journal.len();
    }

    /// Cached blocks in `first..end`: the frozen cache's, then the current cache's (newer), each in block order.
    fn cached_blocks(&self, first: u64, end: u64) -> impl Iterator<Item = (u64, &[u8])> {
        self.frozen.iter().flat_map(move |f| f.range(first, end)).chain(self.cache.range(first, end))
    }

    /// Writes the current cache to a data file now. REQUIRES: no frozen cache (see `Volume::drained`).
    pub(crate) fn flush_cache(&mut self) -> Result<()> {
        debug_assert!(self.frozen.is_none());
        if self.cache.is_empty() {
            return Ok(());
        }
        let (batch, cws_len) = encode_cache(&self.cache, u64::from(self.opts.max_unit_blocks));
        let cache = std::mem::take(&mut self.cache);
        self.journal_len_at_batch = self.journal.len();
        let r = self.install_batch(&cache, cws_len, batch, self.next_journal_seq - 1);
        if r.is_err() && self.cache.is_empty() {
            // The volume is poisoned but still serves reads: they must keep seeing these blocks, which the
            // index may lack.
            self.cache = cache;
        }
        r
    }

    /// Appends an encoded batch of `cache` (which held `cws` CWs) to the data files, applies it to the index and
    /// does what follows a batch. REQUIRES: `cache` is no longer the current cache nor the frozen one.
    fn install_batch(
        &mut self,
        cache: &SegmentCache,
        cws: u64,
        batch: crate::datafile::EncodedBatch,
        journal_seq: u64,
    ) -> Result<()> {
        let before = self.data_bytes();
        let (file, ops) = self.data.append_encoded(journal_seq, batch, self.opts.data_file_bytes)?;
        self.commit_batch(cache, cws, file, &ops, journal_seq, before)
    }

    /// Applies a batch written to `file` with `ops` to the index and does what follows a batch. `before` is the
    /// `data_bytes` reading from before it was placed.
    fn commit_batch(
        &mut self,
        cache: &SegmentCache,
        cws: u64,
        file: u32,
        ops: &[BatchOp],
        journal_seq: u64,
        before: u64,
    ) -> Result<()> {
        self.batch_journal_seq = journal_seq;
        for op in ops {
            if let BatchOp::Put { .. } = op {
                apply_batch_op(&mut self.index, Some(&mut self.live), file, op, u64::MAX)?;
            }
        }
        self.stats.cache_flushes += 1;
        self.stats.cws_written += cws;
        self.stats.writes_compacted += cache.writes();
        self.after_batch(before)
    }

    /// Makes every batch durable, then empties the journal (whose records are all in batches).
    /// REQUIRES: the segment cache is empty.
    fn sync_and_reset_journal(&mut self) -> Result<()> {
        debug_assert!(self.cache.is_empty() && self.frozen.is_none());
        self.data.sync()?;
        // Recovery must know these batches were durable before the journal stops holding their writes: it trusts
        // batches up to the mark (a damaged unit is corruption, reported when read) and verifies later ones,
        // dropping a torn one whose writes the journal still holds.
        let (file, len) = self.data.end();
        let mark = SyncMark { batch_seq: self.data.last_seq(), file, len };
        vfs::write_atomic(self.fs.as_ref(), &vfs::join(&self.dir, SYNCED_FILE), &mark.encode())?;
        self.synced = mark;
        self.journal.rewind();
        self.journal_len_at_batch = 0;
        self.stats.data_syncs += 1;
        Ok(())
    }

    /// Bookkeeping after a batch: a checkpoint when enough was appended since the last one, else a journal reset
    /// once the journal holds `journal_reset_bytes`; both first write the current cache, so the index is exactly
    /// the batches' state. Notes GC candidates. REQUIRES: no frozen cache.
    pub(crate) fn after_batch(&mut self, bytes_before: u64) -> Result<()> {
        self.bytes_since_checkpoint += self.data_bytes().saturating_sub(bytes_before);
        let checkpoint =
            self.bytes_since_checkpoint >= self.opts.checkpoint_bytes.max(4 * self.last_checkpoint_bytes);
        let reset = self.journal.len() >= self.opts.journal_reset_bytes;
        if (checkpoint || reset) && !self.cache.is_empty() {
            // Its own `after_batch` finds the cache empty and does the checkpoint or reset.
            return self.flush_cache();
        }
        if checkpoint {
            self.checkpoint(&[])?;
        } else if reset {
            self.sync_and_reset_journal()?;
        }
        self.gc_due = self.gc_wanted();
        Ok(())
    }

    fn current_stats(&self) -> Stats {
        Stats {
            journal_bytes_written: self.journal.appended(),
            data_bytes_written: self.data.appended(),
            ..self.stats
        }
    }

    /// Counts the batch bytes appended since `before` (a `DataFiles::appended` reading) towards the next
    /// checkpoint.
    pub(crate) fn add_appended(&mut self, before: u64) {
        self.bytes_since_checkpoint += self.data.appended().saturating_sub(before);
    }

    /// Whether the segment cache (or a frozen one) holds block `b` (then it is newer than the index).
    pub(crate) fn cache_holds(&self, b: u64) -> bool {
        self.cache.get(b).is_some() || self.frozen.as_ref().is_some_and(|f| f.get(b).is_some())
    }

    /// Bytes of batches appended since the volume was opened.
    fn data_bytes(&self) -> u64 {
        self.data.appended()
    }

    /// Writes the index checkpoint durably (write-temp, sync, rename, sync dir). Files in `dropping` (garbage
    /// collection victims the index no longer references) are left out of its file list.
    /// REQUIRES: the segment cache is empty, so the index holds exactly the effect of the batches so far.
    pub(crate) fn checkpoint(&mut self, dropping: &[u32]) -> Result<()> {
        debug_assert!(self.cache.is_empty() && self.frozen.is_none());
        let pieces: Vec<Piece> =
            self.index.iter().map(|(r, loc)| Piece { first: r.first(), blocks: r.len(), loc }).collect();
        let files = self.data.written().into_iter().filter(|(id, _)| !dropping.contains(id)).collect();
        let c = Checkpoint {
            batch_seq: self.data.last_seq(),
            journal_seq: self.batch_journal_seq,
            current_file: self.data.current(),
            files,
            pieces,
        };
        let bytes = c.encode();
        // The checkpoint stands for the batches: they must be durable first.
        self.data.sync()?;
        vfs::write_atomic(self.fs.as_ref(), &vfs::join(&self.dir, CHECKPOINT_FILE), &bytes)?;
        self.last_checkpoint_bytes = bytes.len() as u64;
        self.bytes_since_checkpoint = 0;
        self.checkpoint_seq = c.batch_seq;
        self.stats.checkpoints += 1;
        // Everything the journal holds is in synced batches now.
        self.sync_and_reset_journal()
    }

    fn checkpoint_seq(&self) -> u64 {
        self.checkpoint_seq
    }

    /// Whether an automatic round has work (see [`gc_candidates`](Self::gc_candidates) with `auto`).
    pub(crate) fn gc_wanted(&self) -> bool {
        let pct = self.opts.gc_live_percent;
        pct > 0 && self.gc_candidates(pct, true).next().is_some()
    }

    /// Whether the sealed files' dead blocks reached `gc_garbage_percent` % of the live blocks and one data
    /// file's worth: below that, automatic collection copies nothing (`Options::gc_garbage_percent`).
    fn garbage_over_threshold(&self) -> bool {
        let p = self.opts.gc_garbage_percent;
        if p == 0 {
            return true;
        }
        let dead: u64 = self
            .data
            .sealed()
            .map(|(id, written)| written.saturating_sub(self.live.get(&id).copied().unwrap_or(0)))
            .sum();
        let live: u64 = self.live.values().sum();
        let file_blocks = self.opts.data_file_bytes / BLOCK_SIZE as u64;
        dead >= file_blocks && u128::from(dead) * 100 >= u128::from(live) * u128::from(p)
    }

    /// Sealed data files whose live blocks are at most `pct` % of their written blocks, emptiest first. With
    /// `auto` (the automatic rounds), only files with no live block while the garbage is under the threshold.
    pub(crate) fn gc_candidates(&self, pct: u32, auto: bool) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        let only_dead = auto && !self.garbage_over_threshold();
        let mut c: Vec<(u32, u64, u64)> = self
            .data
            .sealed()
            .map(|(id, written)| (id, self.live.get(&id).copied().unwrap_or(0), written))
            .filter(|&(_, live, written)| u128::from(live) * 100 <= u128::from(written) * u128::from(pct))
            .filter(|&(_, live, _)| !only_dead || live == 0)
            .collect();
        // Emptiest first: compare live/written ratios by cross-multiplying.
        c.sort_by(|a, b| (u128::from(a.1) * u128::from(b.2)).cmp(&(u128::from(b.1) * u128::from(a.2))));
        c.into_iter()
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        self.shared.cv.notify_all();
        if let Some(h) = self.flusher.take() {
            let _ = h.join();
        }
    }
}

/// I/O compaction of `cache` into CWs of at most `max_unit` blocks and their batch: (batch, number of CWs).
fn encode_cache(cache: &SegmentCache, max_unit: u64) -> (crate::datafile::EncodedBatch, u64) {
    let cws = cache.compact(max_unit);
    (crate::datafile::encode_batch(cache.deletes(), &cws), cws.len() as u64)
}

/// The flusher thread: writes each frozen cache to a data file. Encoding (I/O compaction, the LZ4 probe and
/// pass, checksums) and the data-file write run without the lock; placing the batch in the file and the index
/// update hold it. Nothing else appends to, syncs or seals a data file meanwhile: every other appender (a sync
/// flush, a checkpoint, a collection install, a delete) first waits for the frozen cache to be gone
/// (`Volume::drained`), and it stays in place until the batch is in the index. A failure poisons the volume
/// (memory may be ahead of the files) and leaves the frozen cache readable; the journal still holds its
/// writes. Exits at shutdown once nothing is frozen.
fn flusher(sh: &Shared) {
    loop {
        let (job, journal_seq, max_unit) = {
            let mut s = sh.lock();
            loop {
                if s.poisoned.is_none()
                    && !s.frozen_taken
                    && let Some(f) = &s.frozen
                {
                    let job = (f.clone(), s.frozen_journal_seq, u64::from(s.opts.max_unit_blocks));
                    s.frozen_taken = true;
                    break job;
                }
                if sh.shutdown.load(Ordering::Acquire) {
                    return;
                }
                s = sh.wait(s);
            }
        };
        let (batch, n_cws) = encode_cache(&job, max_unit);
        let mut s = sh.lock();
        let before = s.data_bytes();
        let data_file_bytes = s.opts.data_file_bytes;
        let placed = s.data.reserve(journal_seq, batch, data_file_bytes);
        drop(s);
        let written = placed.and_then(|p| p.write().map(|()| p));
        let mut s = sh.lock();
        // Installed first: `after_batch` may flush the current cache, whose batch must come after this one.
        s.frozen = None;
        s.frozen_taken = false;
        let r = written.and_then(|p| s.commit_batch(&job, n_cws, p.file, &p.ops, journal_seq, before));
        if r.is_err() {
            // Keep the frozen blocks readable: the index may lack them.
            s.frozen = Some(job);
            s.frozen_taken = true;
        }
        if s.poison_on_err(r).is_ok() && s.data.appended() - s.presynced >= s.opts.journal_reset_bytes / 4 {
            // Every quarter of a journal reset's worth of batches, write the data file back early on another
            // thread: the reset's sync under the lock then finds little left, where writers used to stall for
            // a whole 32 MiB (sequential writes 1.06 -> 1.3 GB/s, P99 15 -> 7 ms). Done here on the flusher
            // thread itself, the sync held up the next batch and cost 12 % instead.
            s.presynced = s.data.appended();
            s.data.early_sync();
        }
        drop(s);
        sh.cv.notify_all();
    }
}

/// Unmaps `range` in the index, keeping `live` in step: the index reports the pieces the delete covers.
pub(crate) fn index_delete(index: &mut Rask<Location>, live: &mut BTreeMap<u32, u64>, range: BlockRange) {
    index.put_reporting(range, Location::tombstone(), |r, old| unaccount(live, r, old));
}

/// Maps `range` to `loc`, keeping `live` in step.
pub(crate) fn index_put(
    index: &mut Rask<Location>,
    live: &mut BTreeMap<u32, u64>,
    range: BlockRange,
    loc: Location,
) {
    index.put_reporting(range, loc, |r, old| unaccount(live, r, old));
    *live.entry(loc.file).or_default() += range.len();
}

fn unaccount(live: &mut BTreeMap<u32, u64>, r: BlockRange, loc: &Location) {
    if let Some(n) = live.get_mut(&loc.file) {
        *n = n.saturating_sub(r.len());
    }
}

/// Applies one batch op to the index; with `live`, keeps the accounting in step (recovery recomputes it instead).
pub(crate) fn apply_batch_op(
    index: &mut Rask<Location>,
    live: Option<&mut BTreeMap<u32, u64>>,
    file: u32,
    op: &BatchOp,
    volume_blocks: u64,
) -> Result<()> {
    match *op {
        BatchOp::Put { first, blocks, unit_offset, stored_len, unit_blocks, block_in_unit } => {
            check_blocks(first, blocks, volume_blocks)?;
            let loc = Location { file, unit_offset, stored_len, unit_blocks, block_in_unit };
            match live {
                Some(live) => index_put(index, live, block_range(first, blocks), loc),
                None => index.put(block_range(first, blocks), loc),
            }
        }
        BatchOp::Delete { first, blocks } => {
            check_blocks(first, blocks, volume_blocks)?;
            match live {
                Some(live) => index_delete(index, live, block_range(first, blocks)),
                None => index.delete(block_range(first, blocks)),
            }
        }
    }
    Ok(())
}

pub(crate) fn check_blocks(first: u64, n: u64, volume_blocks: u64) -> Result<()> {
    match first.checked_add(n) {
        Some(end) if n > 0 && end <= volume_blocks => Ok(()),
        _ => Err(Error::Corruption(format!(
            "record range {first}+{n} outside the volume's {volume_blocks} blocks"
        ))),
    }
}

/// REQUIRES: `n > 0` and `first + n` does not overflow (checked by callers).
pub(crate) fn block_range(first: u64, n: u64) -> BlockRange {
    BlockRange::with_len(first, n).unwrap_or(BlockRange::block(first))
}

/// The blocks covering bytes `offset..offset+len`: (first block, count). REQUIRES: `len > 0`.
fn span(offset: u64, len: u64) -> (u64, u64) {
    let bs = BLOCK_SIZE as u64;
    let first = offset / bs;
    let end = (offset + len).div_ceil(bs);
    (first, end - first)
}
