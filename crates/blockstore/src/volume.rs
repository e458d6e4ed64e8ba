//! One volume: a fixed-size virtual disk with its journal, segment cache, data files and RASK index.
//!
//! Write path (§2.1): append a journal record; put the blocks in the segment cache (a delete instead drops cached
//! blocks and deletes the range in the index at once); FLUSH and FUA sync the journal, which is the only durability
//! point a client waits for. When the cache holds `segment_cache_bytes` (or the journal `journal_flush_bytes`
//! more than at the last batch), the cache is frozen and the flusher thread (`volume/batch.rs`) turns it into CWs (I/O
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
//! Recovery (`volume/open.rs`): the index checkpoint (if any) is loaded, the data-file batches after it are replayed in sequence
//! order, then the journal records newer than the last batch's `journal_seq` are replayed into the cache. The
//! result is the exact index and cache the volume had after its last durable record.
//!
//! Every operation holds the volume mutex, so the volume is linearizable and a FLUSH on one NBD connection covers
//! writes acknowledged on every other; a read holds it only to plan (index lookup, cache copy) and reads the data
//! files after releasing it (`read_plan.rs`); the flusher holds it only to place a batch and to index it.
//!
//! After a failed write-path I/O the volume is poisoned: memory may be ahead of the files, so it refuses writes
//! and flushes until it recovers from the files as a reopen would ([`Volume::recover`]; `volume/recover.rs`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use rask::Rask;
use vfs::Fs;

use crate::cache::SegmentCache;
use crate::datafile::{DataFileInfo, DataFiles};
use crate::format::SyncMark;
use crate::journal::Journal;
use crate::location::Location;
use crate::read_plan::ReadPlan;
use crate::stats::Stats;
use crate::{BLOCK_SIZE, Error, Options, Result};

mod batch;
mod mapping;
mod open;
mod recover;
pub use recover::Health;
#[cfg(test)]
mod tests;

pub(crate) use mapping::{apply_batch_op, block_range, check_blocks, index_delete};

/// An open volume. Shared by every connection; internally synchronised.
#[derive(Debug)]
pub struct Volume {
    /// Held while the volume is open (see `lock_volume`).
    _lock: Option<Box<dyn vfs::FileLock>>,
    name: String,
    size: u64,
    pub(crate) shared: Arc<Shared>,
    /// The flusher thread (`Options::flush_in_background`), joined on drop.
    flusher: Option<std::thread::JoinHandle<()>>,
    /// The last background collection thread started, joined on drop (and before the next one starts).
    pub(crate) gc_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub(crate) gc_in_background: bool,
}

/// What the volume and its background threads (the flusher, a collection round) share.
///
/// Background threads hold this, never the `Volume`: dropping the last `Volume` handle then stops and joins
/// them, and the volume, with its lock file, is closed when the drop returns. A collection thread that held the
/// `Volume` kept it open past its last user's drop, so a reopen right after could find it in use (it ran beside
/// a second instance before the lock file existed).
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Signalled when a cache is frozen (the flusher waits for work) and when a frozen cache reached the index or
    /// the volume was poisoned (writers and drains wait for the flusher).
    cv: Condvar,
    /// Set when the volume is dropped: the flusher exits, a collection round in its copy phase gives up.
    pub(crate) shutdown: AtomicBool,
    /// Serialises garbage-collection rounds (which drop `state` while they read) and recoveries.
    pub(crate) gc_lock: Mutex<()>,
    /// When a write last tried to recover the volume after it ran out of space (`volume/recover.rs`).
    last_recovery: Mutex<Option<std::time::Instant>>,
    /// A background collection thread was started and has not finished.
    pub(crate) gc_running: AtomicBool,
    /// Tests: how long the flusher sleeps between finding nothing to do and waiting (widens that window).
    #[cfg(test)]
    pause_before_wait_ms: std::sync::atomic::AtomicU64,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.cv.wait(g).unwrap_or_else(|p| p.into_inner())
    }

    /// Stops the volume if `r` is a write-path failure ([`State::poison_on_err`]), releases the lock and wakes
    /// every waiter: one in [`drained`](Self::drained) waits for the frozen cache to go *or* the volume to stop,
    /// and the flusher never takes a frozen cache of a stopped volume, so without a wakeup it waited until the
    /// volume was dropped, holding a collection round's lock, and `Volume::recover` or `collect_garbage` after
    /// it waited for ever (regression `regression_a_stop_wakes_a_round_waiting_for_the_frozen_cache`).
    pub(crate) fn stop_on_err<T>(&self, mut s: MutexGuard<'_, State>, r: Result<T>) -> Result<T> {
        let running = s.poisoned.is_none();
        let r = s.poison_on_err(r);
        let stopped = running && s.poisoned.is_some();
        drop(s);
        if stopped {
            self.cv.notify_all();
        }
        r
    }

    /// The state lock once the frozen cache (if any) has reached the index (or the volume is poisoned).
    pub(crate) fn drained(&self) -> MutexGuard<'_, State> {
        let mut s = self.lock();
        while s.frozen.is_some() && s.poisoned.is_none() {
            s = self.wait(s);
        }
        s
    }
}

/// Why a volume stopped taking writes.
#[derive(Clone, Debug)]
pub(crate) struct Poison {
    message: String,
    kind: PoisonKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PoisonKind {
    /// Opened for inspection: never writable.
    ReadOnly,
    /// The file system ran out of space or quota (`vfs::is_out_of_space`).
    NoSpace,
    /// Any other I/O failure.
    Io,
    /// Persistent bytes failed a check.
    Corruption,
}

impl Poison {
    pub(crate) fn read_only() -> Poison {
        Poison { message: "opened read-only for inspection".to_string(), kind: PoisonKind::ReadOnly }
    }

    pub(crate) fn error(&self) -> Error {
        Error::Poisoned { message: self.message.clone(), no_space: self.kind == PoisonKind::NoSpace }
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
    /// The flusher is between taking a frozen cache and installing its batch: recovery waits for it, since the
    /// batch belongs to this state.
    flushing: bool,
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
    pub(crate) poisoned: Option<Poison>,
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
/// The lock file held by the instance that has the volume open (no content).
pub const LOCK_FILE: &str = "LOCK";

pub(crate) fn volume_dir(store: &Path, name: &str) -> PathBuf {
    vfs::join(store, name)
}

impl Volume {
    /// Wraps a newly opened volume in the `Arc` every user shares.
    pub(crate) fn into_shared(self) -> Arc<Volume> {
        Arc::new(self)
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
        self.shared.drained()
    }

    /// The state lock for a write-path operation (once drained, as [`drained`](Self::drained), if `drained`). A
    /// stopped volume first tries to recover by itself (`volume/recover.rs`) and is an error if it stays stopped.
    fn writable(&self, drained: bool) -> Result<MutexGuard<'_, State>> {
        let get = || if drained { self.drained() } else { self.lock() };
        let mut s = get();
        // Decided here, under the lock already held: a volume that must stay stopped costs a write nothing more.
        if s.recovers_by_itself() {
            drop(s);
            self.recover_if_space_is_back();
            s = get();
        }
        s.usable()?;
        Ok(s)
    }

    /// The end of a write or delete that left `r`: make room in the cache, poison the volume on a write-path
    /// failure, and start a collection round (after the lock is released) if a flush left one due.
    fn after_update(&self, s: MutexGuard<'_, State>, r: Result<()>) -> Result<()> {
        let (s, r) = match r {
            Ok(()) => self.make_room(s),
            Err(e) => (s, Err(e)),
        };
        let gc = r.is_ok() && s.gc_due;
        let r = self.shared.stop_on_err(s, r);
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
        let mut s = self.writable(false)?;
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
        let mut s = self.writable(true)?;
        let r = s.zero(offset, len, fua);
        self.after_update(s, r)
    }

    /// Makes every write that returned before this call durable.
    pub fn flush(&self) -> Result<()> {
        let mut s = self.writable(false)?;
        s.stats.flushes += 1;
        let r = s.journal.sync();
        self.shared.stop_on_err(s, r)
    }

    /// Moves the segment cache to a data file now (I/O compaction + batch), as a full cache would.
    pub fn flush_cache(&self) -> Result<()> {
        let mut s = self.writable(true)?;
        let r = s.flush_cache();
        self.shared.stop_on_err(s, r)
    }

    /// Writes an index checkpoint now (after moving the segment cache to a data file), so a reopen replays no
    /// batch.
    pub fn checkpoint(&self) -> Result<()> {
        let mut s = self.writable(true)?;
        let r = s.flush_cache().and_then(|()| s.checkpoint(&[]));
        self.shared.stop_on_err(s, r)
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
            Some(p) => Err(p.error()),
            None => Ok(()),
        }
    }

    /// Stops the volume if `r` is a write-path failure (the first one is kept).
    pub(crate) fn poison_on_err<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r
            && self.poisoned.is_none()
        {
            let kind = match e {
                Error::Io(io) if vfs::is_out_of_space(io) => PoisonKind::NoSpace,
                Error::Io(_) => PoisonKind::Io,
                Error::Corruption(_) => PoisonKind::Corruption,
                _ => return r,
            };
            self.poisoned = Some(Poison { message: e.to_string(), kind });
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

    fn current_stats(&self) -> Stats {
        Stats {
            journal_bytes_written: self.stats.journal_bytes_written + self.journal.appended(),
            data_bytes_written: self.stats.data_bytes_written + self.data.appended(),
            ..self.stats
        }
    }

    /// Whether the segment cache (or a frozen one) holds block `b` (then it is newer than the index).
    pub(crate) fn cache_holds(&self, b: u64) -> bool {
        self.cache.get(b).is_some() || self.frozen.as_ref().is_some_and(|f| f.get(b).is_some())
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
        // Through the lock: a flusher that found no shutdown holds it until it waits, and a notification sent
        // before it waits would be lost, leaving this join waiting for it forever.
        drop(self.shared.lock());
        self.shared.cv.notify_all();
        if let Some(h) = self.flusher.take() {
            let _ = h.join();
        }
        let gc = self.gc_thread.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = gc {
            let _ = h.join();
        }
    }
}

/// The blocks covering bytes `offset..offset+len`: (first block, count). REQUIRES: `len > 0`.
fn span(offset: u64, len: u64) -> (u64, u64) {
    let bs = BLOCK_SIZE as u64;
    let first = offset / bs;
    let end = (offset + len).div_ceil(bs);
    (first, end - first)
}
