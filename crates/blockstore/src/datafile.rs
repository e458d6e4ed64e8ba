//! Append-only data files: batches of CW-aligned compression units (§2.1 step 5, §3.2).
//!
//! A segment-cache flush (or a garbage-collection relocation) appends one *batch* to the volume's current data
//! file: a header with the batch's index operations (deletes, then one put per CW) followed by the units. The units
//! and the header are written without a sync: the volume's journal still holds every write of an unsynced batch,
//! and the volume syncs the data file ([`DataFiles::sync`]) before it empties the journal, writes an index
//! checkpoint or seals the file. So after a crash only the current (unsealed) file can hold batches that are not
//! durable, possibly with a valid header over torn units: recovery verifies every unit's checksum in that file
//! and cuts it at the first batch that fails, and the journal replays what the cut batches held. (Before, every
//! batch paid two syncs, units then header, so that a valid header proved its units durable; those syncs
//! dominated sequential writes over NBD.) A data file is sealed once it passes `Options::data_file_bytes`: its
//! batches are synced, then a footer (first and last batch sequence numbers, blocks written) is appended and
//! synced before the next file is created, so recovery can skip a sealed file whose batches are all older than
//! the index checkpoint without reading any of them.
//!
//! Units (§3.2, "CU alignment"): a CW longer than four blocks is compressed whole as one unit (cut at
//! `max_unit_blocks`); shorter CWs are packed, in address order, into units of at most four blocks, the paper's
//! 4-block compression unit that keeps small writes' compression ratio. Each unit is LZ4-compressed on its own
//! and checksummed, so a read decompresses only the units it touches.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use vfs::{File, Fs, OpenMode};

use crate::cache::Cw;
use crate::format::{
    BATCH_HEADER_LEN, BatchHeader, BatchOp, FOOTER_LEN, Footer, OP_LEN, SyncMark, UNIT_HEADER_LEN,
    decode_unit_owned, encode_unit, intact_unit_len,
};
use crate::location::Location;
use crate::{BLOCK_SIZE, Error, Result};

/// Blocks of the paper's fixed compression unit, used for CWs no longer than it.
pub const SMALL_UNIT_BLOCKS: u64 = 4;

/// A recovered batch: the data file it is in and its ops.
#[derive(Debug)]
pub struct RecoveredBatch {
    /// Data file number.
    pub file: u32,
    /// The header.
    pub header: BatchHeader,
    /// Its ops, in order.
    pub ops: Vec<BatchOp>,
}

/// What the volume knows about one data file.
#[derive(Debug)]
struct FileState {
    /// Bytes of batches (the footer, if any, follows).
    len: u64,
    /// Blocks put into the file by its batches.
    written_blocks: u64,
    first_seq: u64,
    last_seq: u64,
    batches: u32,
    /// The footer is written: no more batches go here.
    sealed: bool,
    /// Batches were written since the file's last sync.
    unsynced: bool,
}

/// A data file as reported to tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataFileInfo {
    /// File number.
    pub id: u32,
    /// Bytes on disk (batches and footer).
    pub bytes: u64,
    /// Blocks put into the file by its batches.
    pub written_blocks: u64,
    /// Blocks the index still maps to the file.
    pub live_blocks: u64,
    /// Whether the file is sealed (has its footer; only sealed files are collected).
    pub sealed: bool,
}

/// Handles of data files other than the current one, least recently used closed first.
#[derive(Debug, Default)]
struct Handles {
    open: HashMap<u32, (Arc<dyn File>, u64)>,
    tick: u64,
}

/// The data files of one volume.
///
/// The current file's handle stays open; other files are only read, through a cache of at most `max_open`
/// handles that reopens a closed one on demand (a read of a cold file pays one `open`). Keeping every file open
/// ran the process out of descriptors once a volume held about `RLIMIT_NOFILE` × `data_file_bytes` of data
/// (60 GiB at Linux's usual 1024 and the default 64 MiB). A reader that took a handle keeps it until done.
#[derive(Debug)]
pub struct DataFiles {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    files: BTreeMap<u32, FileState>,
    current: u32,
    /// The current file's handle (`None` before the first file exists).
    current_f: Option<Arc<dyn File>>,
    handles: Mutex<Handles>,
    max_open: usize,
    next_seq: u64,
    /// Bytes of batches appended since open.
    appended: u64,
    early: Arc<EarlySync>,
    /// A sync of a data file failed (one by [`early_sync`](Self::early_sync) is in `early`); see
    /// [`sync_failed`](Self::sync_failed).
    sync_failed: bool,
}

/// A sync of the current data file started ahead of need on a short-lived thread ([`DataFiles::early_sync`]).
/// The kernel reports a writeback error to one sync call only, so a failure must not be lost with that thread:
/// it is kept here, and every later sync of a data file first waits for the running one and fails if any failed.
#[derive(Debug, Default)]
struct EarlySync {
    state: Mutex<EarlyState>,
    done: Condvar,
}

#[derive(Debug, Default)]
struct EarlyState {
    running: bool,
    /// The failure's kind (so running out of space stays recognisable) and text.
    failed: Option<(std::io::ErrorKind, String)>,
}

/// The file name of data file `n`.
pub fn data_file_name(n: u32) -> String {
    format!("data-{n:08}.dat")
}

/// The number of a data file's name.
pub fn parse_data_file_name(name: &str) -> Option<u32> {
    name.strip_prefix("data-")?.strip_suffix(".dat")?.parse().ok().filter(|&n| n != 0 && n != u32::MAX)
}

impl DataFiles {
    /// Opens every data file in `dir`, returning the batches with a sequence number above `after` (the index
    /// checkpoint's) in order. A sealed file whose batches are all at or below `after` is not read beyond its
    /// footer. A torn batch at the end of the newest file is cut off, and so is, with every batch after it, a
    /// batch of the newest file above `durable` (the newest batch known synced) whose units fail their
    /// checksums: it was never synced, and the journal holds its writes. An invalid batch anywhere else, or
    /// below the synced length `durable` records for its file, is corruption.
    ///
    /// With `read_only` nothing is changed: files are opened read-only and a torn tail is left in place.
    /// `max_open`: how many handles of files other than the current one stay open (at least one).
    pub fn open(
        fs: Arc<dyn Fs>,
        dir: &Path,
        after: u64,
        durable: SyncMark,
        read_only: bool,
        max_open: usize,
    ) -> Result<(DataFiles, Vec<RecoveredBatch>)> {
        let max_open = max_open.max(1);
        let mode = if read_only { OpenMode::ReadOnly } else { OpenMode::ReadWrite };
        let mut ids: Vec<u32> = fs.list_dir(dir)?.iter().filter_map(|n| parse_data_file_name(n)).collect();
        ids.sort_unstable();
        let mut files = BTreeMap::new();
        let mut batches = Vec::new();
        let mut last_seq = 0;
        let mut current_f = None;
        for (i, &id) in ids.iter().enumerate() {
            let f = fs.open(&vfs::join(dir, &data_file_name(id)), mode)?;
            if i + 1 == ids.len() {
                current_f = Some(f.clone());
            }
            let len = f.len()?;
            let footer = if len >= FOOTER_LEN as u64 {
                let mut b = [0u8; FOOTER_LEN];
                f.read_exact_at(&mut b, len - FOOTER_LEN as u64)?;
                Footer::decode(&b, len)
            } else {
                None
            };
            let mut st = FileState {
                len: 0,
                written_blocks: 0,
                first_seq: 0,
                last_seq: 0,
                batches: 0,
                sealed: footer.is_some(),
                unsynced: false,
            };
            // Only the current file can hold batches that were never synced (see the module comment).
            let verify_units = i + 1 == ids.len() && footer.is_none();
            if let Some(ft) = footer
                && ft.last_seq <= after
            {
                // Everything in it is in the checkpoint: trust the footer, read nothing else.
                if ft.batches > 0 && ft.first_seq <= last_seq {
                    return Err(Error::Corruption(format!(
                        "data file {id}: batch sequence {} after {last_seq}",
                        ft.first_seq
                    )));
                }
                last_seq = last_seq.max(ft.last_seq);
                st.len = ft.data_len;
                st.written_blocks = ft.written_blocks;
                st.first_seq = ft.first_seq;
                st.last_seq = ft.last_seq;
                st.batches = ft.batches;
                files.insert(id, st);
                continue;
            }
            let data_len = footer.map_or(len, |ft| ft.data_len);
            let mut pos = 0u64;
            while pos < data_len {
                let batch = match read_batch(f.as_ref(), pos, data_len)? {
                    Some((h, ops, next)) if verify_units && h.seq > after.max(durable.batch_seq) => {
                        if units_intact(f.as_ref(), next - h.units_len, next)? {
                            Some((h, ops, next))
                        } else {
                            None
                        }
                    }
                    b => b,
                };
                match batch {
                    Some((header, ops, next)) => {
                        if header.seq <= last_seq {
                            return Err(Error::Corruption(format!(
                                "data file {id}: batch sequence {} after {last_seq}",
                                header.seq
                            )));
                        }
                        last_seq = header.seq;
                        if st.batches == 0 {
                            st.first_seq = header.seq;
                        }
                        st.last_seq = header.seq;
                        st.batches += 1;
                        st.written_blocks += put_blocks(&ops);
                        if header.seq > after {
                            batches.push(RecoveredBatch { file: id, header, ops });
                        }
                        pos = next;
                    }
                    None if i + 1 == ids.len()
                        && footer.is_none()
                        && (id != durable.file || pos >= durable.len) =>
                    {
                        if !read_only {
                            f.set_len(pos)?;
                            f.sync_data()?;
                        }
                        break;
                    }
                    None => {
                        return Err(Error::Corruption(format!(
                            "data file {id}: invalid batch at offset {pos}"
                        )));
                    }
                }
            }
            if let Some(ft) = footer
                && (ft.batches != st.batches || ft.written_blocks != st.written_blocks)
            {
                return Err(Error::Corruption(format!("data file {id}: footer disagrees with its batches")));
            }
            st.len = pos;
            files.insert(id, st);
        }
        let current = ids.last().copied().unwrap_or(0);
        let next_seq = last_seq.max(after) + 1;
        Ok((
            DataFiles {
                fs,
                dir: dir.to_path_buf(),
                files,
                current,
                current_f,
                handles: Mutex::default(),
                max_open,
                next_seq,
                appended: 0,
                early: Arc::default(),
                sync_failed: false,
            },
            batches,
        ))
    }

    /// Appends one batch holding `deletes` and the units of `cws` (address order). Returns the data file and the
    /// ops written (the puts carry the units' locations).
    pub fn append_batch(
        &mut self,
        journal_seq: u64,
        deletes: &[(u64, u64)],
        cws: &[Cw],
        data_file_bytes: u64,
    ) -> Result<(u32, Vec<BatchOp>)> {
        self.append_encoded(journal_seq, encode_batch(deletes, cws), data_file_bytes)
    }

    /// Appends a batch encoded by [`encode_batch`] (not synced: see the module comment). Returns the data file and
    /// the ops with the units' locations in it.
    pub fn append_encoded(
        &mut self,
        journal_seq: u64,
        batch: EncodedBatch,
        data_file_bytes: u64,
    ) -> Result<(u32, Vec<BatchOp>)> {
        let p = self.reserve(journal_seq, batch, data_file_bytes)?;
        p.write()?;
        Ok((p.file, p.ops))
    }

    /// Places a batch at the end of the current data file (starting a new file when it is full) and accounts for
    /// it as appended, without writing its bytes: [`PendingBatch::write`] does that, and may run without the
    /// volume lock. REQUIRES: until the write returned, nothing else is appended, synced or sealed here (the
    /// volume keeps its frozen cache in place until then, which holds off every other appender), and on a failed
    /// write the volume is poisoned (the accounting is ahead of the file).
    pub fn reserve(
        &mut self,
        journal_seq: u64,
        batch: EncodedBatch,
        data_file_bytes: u64,
    ) -> Result<PendingBatch> {
        let rotate = match self.files.get(&self.current) {
            None => true,
            Some(st) => st.sealed || st.len >= data_file_bytes,
        };
        if rotate {
            self.seal_current()?;
            let id = self.current + 1;
            let f = self.fs.open(&vfs::join(&self.dir, &data_file_name(id)), OpenMode::CreateNew)?;
            self.fs.sync_dir(&self.dir)?;
            // The sealed file is read through the handle cache from now on.
            self.current_f = Some(f);
            let st = FileState {
                len: 0,
                written_blocks: 0,
                first_seq: 0,
                last_seq: 0,
                batches: 0,
                sealed: false,
                unsynced: false,
            };
            self.files.insert(id, st);
            self.current = id;
        }
        let st =
            self.files.get_mut(&self.current).ok_or_else(|| Error::Corruption("no current file".into()))?;
        let EncodedBatch { mut ops, units } = batch;
        let base = st.len;
        let units_start = base + (BATCH_HEADER_LEN + ops.len() * OP_LEN) as u64;
        for op in &mut ops {
            if let BatchOp::Put { unit_offset, .. } = op {
                *unit_offset += units_start;
            }
        }
        let header = BatchHeader {
            seq: self.next_seq,
            journal_seq,
            ops: ops.len() as u32,
            units_len: units.len() as u64,
        };
        let head = header.encode(&ops);
        st.unsynced = true;
        if st.batches == 0 {
            st.first_seq = header.seq;
        }
        st.last_seq = header.seq;
        st.batches += 1;
        st.written_blocks += put_blocks(&ops);
        let end = units_start + units.len() as u64;
        self.appended += end - st.len;
        st.len = end;
        self.next_seq += 1;
        let f = self.current_f.clone().ok_or_else(|| Error::Corruption("no current file handle".into()))?;
        Ok(PendingBatch { file: self.current, f, base, head, units_start, units, ops })
    }

    /// Where the batches end: the current file and its length (a `SyncMark` after [`DataFiles::sync`]).
    pub fn end(&self) -> (u32, u64) {
        (self.current, self.files.get(&self.current).map_or(0, |st| st.len))
    }

    /// Starts syncing the current file on a short-lived thread, unless an early sync is running or one failed.
    /// It writes back data ahead of the sync a journal reset makes under the volume lock (which then finds little
    /// left to write) and claims nothing: only [`sync`](Self::sync) makes batches count as durable.
    pub fn early_sync(&self) {
        let Some(f) = self.current_f.clone() else { return };
        {
            let mut g = self.early.state.lock().unwrap_or_else(|p| p.into_inner());
            if g.running || g.failed.is_some() {
                return;
            }
            g.running = true;
        }
        let early = self.early.clone();
        let spawned = std::thread::Builder::new().name("blockstore-sync".into()).spawn(move || {
            let r = f.sync_data();
            let mut g = early.state.lock().unwrap_or_else(|p| p.into_inner());
            g.running = false;
            if let Err(e) = r {
                g.failed = Some((e.kind(), e.to_string()));
            }
            early.done.notify_all();
        });
        if spawned.is_err() {
            self.early.state.lock().unwrap_or_else(|p| p.into_inner()).running = false;
        }
    }

    /// Waits for a running early sync; an error if any early sync failed.
    fn settle_early_sync(&self) -> Result<()> {
        let mut g = self.early.state.lock().unwrap_or_else(|p| p.into_inner());
        while g.running {
            g = self.early.done.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        match &g.failed {
            Some((kind, m)) => {
                Err(Error::Io(std::io::Error::new(*kind, format!("an early data-file sync failed: {m}"))))
            }
            None => Ok(()),
        }
    }

    /// Makes every batch appended so far durable. Only the current file can hold unsynced batches.
    pub fn sync(&mut self) -> Result<()> {
        self.settle_early_sync()?;
        if let Some(st) = self.files.get_mut(&self.current)
            && st.unsynced
            && let Some(f) = &self.current_f
        {
            let r = f.sync_data();
            self.sync_failed |= r.is_err();
            r?;
            st.unsynced = false;
        }
        Ok(())
    }

    /// Whether a sync of a data file failed since open: the kernel may have dropped pages it could not write
    /// while reads still see them, so the files' apparent contents can no longer be trusted without a reopen
    /// after a power cycle.
    pub fn sync_failed(&self) -> bool {
        self.sync_failed || self.early.state.lock().unwrap_or_else(|p| p.into_inner()).failed.is_some()
    }

    /// Syncs the current file's batches, then writes its footer (once) and syncs that: a footer never becomes
    /// durable before the batches it counts.
    fn seal_current(&mut self) -> Result<()> {
        self.sync()?;
        let Some(st) = self.files.get_mut(&self.current) else { return Ok(()) };
        if st.sealed {
            return Ok(());
        }
        let ft = Footer {
            data_len: st.len,
            first_seq: st.first_seq,
            last_seq: st.last_seq,
            written_blocks: st.written_blocks,
            batches: st.batches,
        };
        let f = self.current_f.as_ref().ok_or_else(|| Error::Corruption("no current file handle".into()))?;
        f.write_all_at(&ft.encode(), st.len)?;
        let r = f.sync_data();
        self.sync_failed |= r.is_err();
        r?;
        st.sealed = true;
        Ok(())
    }

    /// Reads, verifies and decompresses the unit at `loc`.
    pub fn read_unit(&self, loc: &Location) -> Result<Vec<u8>> {
        read_unit_from(self.file(loc.file)?.as_ref(), loc)
    }

    /// The handle of data file `id`, for reads outside the volume lock (data files are append-only, and a file
    /// is removed only once nothing references it).
    pub fn handle(&self, id: u32) -> Result<Arc<dyn File>> {
        self.file(id)
    }

    /// Whether data file `id` exists.
    pub fn contains(&self, id: u32) -> bool {
        self.files.contains_key(&id)
    }

    /// The file new batches go to (0 before the first batch).
    pub fn current(&self) -> u32 {
        self.current
    }

    /// Bytes of batches appended since open.
    pub fn appended(&self) -> u64 {
        self.appended
    }

    /// Sequence number of the last batch appended or recovered (0 if none).
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// Blocks put into file `id`.
    pub fn written_blocks(&self, id: u32) -> u64 {
        self.files.get(&id).map_or(0, |st| st.written_blocks)
    }

    /// Sealed files (those garbage collection may choose) with their written blocks.
    pub fn sealed(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.files
            .iter()
            .filter(|(id, st)| st.sealed && **id != self.current)
            .map(|(id, st)| (*id, st.written_blocks))
    }

    /// Every file with its written blocks.
    pub fn written(&self) -> Vec<(u32, u64)> {
        self.files.iter().map(|(id, st)| (*id, st.written_blocks)).collect()
    }

    /// Every file as reported to tools; `live` gives the live blocks of a file.
    pub fn infos(&self, live: impl Fn(u32) -> u64) -> Result<Vec<DataFileInfo>> {
        self.files
            .iter()
            .map(|(&id, st)| {
                Ok(DataFileInfo {
                    id,
                    bytes: self.file_bytes(id)?,
                    written_blocks: st.written_blocks,
                    live_blocks: live(id),
                    sealed: st.sealed,
                })
            })
            .collect()
    }

    /// Forgets data file `id` without deleting it (read-only inspection of a file an interrupted collection left).
    pub fn forget(&mut self, id: u32) {
        self.files.remove(&id);
        self.lock_handles().open.remove(&id);
    }

    /// Deletes data file `id`. The caller syncs the directory. REQUIRES: nothing durable references it.
    pub fn remove(&mut self, id: u32) -> Result<()> {
        if id == self.current {
            return Err(Error::InvalidArgument(format!("data file {id} is the current file")));
        }
        if self.files.remove(&id).is_some() {
            self.lock_handles().open.remove(&id);
            self.fs.remove_file(&vfs::join(&self.dir, &data_file_name(id)))?;
        }
        Ok(())
    }

    fn lock_handles(&self) -> std::sync::MutexGuard<'_, Handles> {
        self.handles.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The handle of data file `id`: the current file's, or one from the handle cache, which opens the file again
    /// (read-only) if it was closed, after closing the least recently used handle when `max_open` are open.
    fn file(&self, id: u32) -> Result<Arc<dyn File>> {
        if id == self.current
            && let Some(f) = &self.current_f
        {
            return Ok(f.clone());
        }
        if !self.files.contains_key(&id) {
            return Err(Error::Corruption(format!("index names missing data file {id}")));
        }
        let mut h = self.lock_handles();
        h.tick += 1;
        let tick = h.tick;
        if let Some((f, used)) = h.open.get_mut(&id) {
            *used = tick;
            return Ok(f.clone());
        }
        if h.open.len() >= self.max_open
            && let Some((&lru, _)) = h.open.iter().min_by_key(|(_, (_, used))| *used)
        {
            h.open.remove(&lru);
        }
        let f = self.fs.open(&vfs::join(&self.dir, &data_file_name(id)), OpenMode::ReadOnly)?;
        h.open.insert(id, (f.clone(), tick));
        Ok(f)
    }

    /// Bytes of data file `id` on disk. A sealed file is its batches and the footer after them, so it need not
    /// be opened.
    pub fn file_bytes(&self, id: u32) -> Result<u64> {
        match self.files.get(&id) {
            Some(st) if st.sealed => Ok(st.len + FOOTER_LEN as u64),
            _ => Ok(self.file(id)?.len()?),
        }
    }

    /// How many handles of files other than the current one the cache keeps open.
    pub fn max_open(&self) -> usize {
        self.max_open
    }

    /// Handles of files other than the current one open in the cache now.
    pub fn open_handles(&self) -> usize {
        self.lock_handles().open.len()
    }
}

fn put_blocks(ops: &[BatchOp]) -> u64 {
    ops.iter().map(|op| if let BatchOp::Put { blocks, .. } = op { *blocks } else { 0 }).sum()
}

/// A batch placed by [`DataFiles::reserve`] whose bytes are not written yet.
pub struct PendingBatch {
    /// The data file it goes to.
    pub file: u32,
    f: Arc<dyn File>,
    base: u64,
    head: Vec<u8>,
    units_start: u64,
    units: Vec<u8>,
    /// Its ops, the puts carrying the units' locations.
    pub ops: Vec<BatchOp>,
}

impl std::fmt::Debug for PendingBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingBatch")
            .field("file", &self.file)
            .field("base", &self.base)
            .field("ops", &self.ops.len())
            .finish_non_exhaustive()
    }
}

impl PendingBatch {
    /// Writes the units, then the header and ops (no sync: the journal keeps these writes until a data sync).
    pub fn write(&self) -> Result<()> {
        self.f.write_all_at(&self.units, self.units_start)?;
        self.f.write_all_at(&self.head, self.base)?;
        Ok(())
    }
}

/// A batch's ops and units, encoded without touching any file (the background flush does this without the volume
/// lock). Put ops' unit offsets are relative to the start of the units until [`DataFiles::append_encoded`] places
/// the batch.
#[derive(Debug)]
pub struct EncodedBatch {
    ops: Vec<BatchOp>,
    units: Vec<u8>,
}

/// Encodes `deletes` and the units of `cws` (address order): a CW over [`SMALL_UNIT_BLOCKS`] is its own unit; a
/// run of shorter ones shares units of at most that many blocks (§3.2).
pub fn encode_batch(deletes: &[(u64, u64)], cws: &[Cw]) -> EncodedBatch {
    let mut ops: Vec<BatchOp> =
        deletes.iter().map(|&(first, blocks)| BatchOp::Delete { first, blocks }).collect();
    let mut units = Vec::new();
    let mut i = 0;
    while i < cws.len() {
        let mut j = i + 1;
        if cws[i].blocks() <= SMALL_UNIT_BLOCKS {
            let mut total = cws[i].blocks();
            while j < cws.len()
                && cws[j].blocks() <= SMALL_UNIT_BLOCKS
                && total + cws[j].blocks() <= SMALL_UNIT_BLOCKS
            {
                total += cws[j].blocks();
                j += 1;
            }
        }
        // The unit's bytes go from the CWs' parts straight into the batch buffer.
        let parts: Vec<&[u8]> = cws[i..j].iter().flat_map(|c| c.parts.iter().copied()).collect();
        let unit_offset = units.len() as u64;
        let compress = !cws[i..j].iter().all(|c| c.incompressible);
        encode_unit(&parts, compress, &mut units);
        let stored_len = (units.len() as u64 - unit_offset) as u32 - UNIT_HEADER_LEN as u32;
        let unit_blocks = cws[i..j].iter().map(|c| c.blocks()).sum::<u64>() as u32;
        let mut in_unit = 0u32;
        for cw in &cws[i..j] {
            ops.push(BatchOp::Put {
                first: cw.first,
                blocks: cw.blocks(),
                unit_offset,
                stored_len,
                unit_blocks,
                block_in_unit: in_unit,
            });
            in_unit += cw.blocks() as u32;
        }
        i = j;
    }
    EncodedBatch { ops, units }
}

/// Reads, verifies and decompresses the unit at `loc` from its data file `f`.
pub fn read_unit_from(f: &dyn File, loc: &Location) -> Result<Vec<u8>> {
    let mut b = vec![0u8; loc.unit_bytes() as usize];
    f.read_exact_at(&mut b, loc.unit_offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::Corruption(format!("unit at {}:{} runs past the file", loc.file, loc.unit_offset))
        } else {
            Error::Io(e)
        }
    })?;
    decode_unit_owned(b, loc.unit_blocks as usize * BLOCK_SIZE)
}

/// Whether the units in `[start, end)` of `f` are all present and pass their checksums (a batch written but not
/// yet synced when the machine went down may have a valid header over torn units).
fn units_intact(f: &dyn File, start: u64, end: u64) -> Result<bool> {
    let mut b = vec![0u8; (end - start) as usize];
    f.read_exact_at(&mut b, start)?;
    let mut at = 0usize;
    while at < b.len() {
        match intact_unit_len(&b[at..]) {
            Some(n) => at += n,
            None => return Ok(false),
        }
    }
    Ok(true)
}

/// Reads the batch at `pos` of a file of `len` bytes: `None` when it is not a complete valid batch.
pub fn read_batch(f: &dyn File, pos: u64, len: u64) -> Result<Option<(BatchHeader, Vec<BatchOp>, u64)>> {
    if len - pos < BATCH_HEADER_LEN as u64 {
        return Ok(None);
    }
    let mut fixed = [0u8; BATCH_HEADER_LEN];
    f.read_exact_at(&mut fixed, pos)?;
    let Some((h, crc)) = BatchHeader::decode_fixed(&fixed) else { return Ok(None) };
    let ops_len = h.ops as u64 * OP_LEN as u64;
    let end = pos + BATCH_HEADER_LEN as u64 + ops_len;
    if end > len || h.units_len > len - end {
        return Ok(None);
    }
    let mut ops_b = vec![0u8; ops_len as usize];
    f.read_exact_at(&mut ops_b, pos + BATCH_HEADER_LEN as u64)?;
    if !BatchHeader::check(&fixed, &ops_b, crc) {
        return Ok(None);
    }
    let next = end + h.units_len;
    let mut ops = Vec::with_capacity(h.ops as usize);
    for chunk in ops_b.chunks_exact(OP_LEN) {
        let op = BatchOp::decode(chunk)?;
        if let BatchOp::Put { unit_offset, stored_len, .. } = op
            && (unit_offset < end || unit_offset + UNIT_HEADER_LEN as u64 + u64::from(stored_len) > next)
        {
            return Err(Error::Corruption(format!("batch at {pos}: unit outside the batch")));
        }
        ops.push(op);
    }
    Ok(Some((h, ops, next)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::SyncMark;
    use vfs::{Fault, FaultFs, FaultKind, MemFs, Op};

    /// Regression (found while adding early syncs): the kernel reports a writeback error to one sync only, so an
    /// early sync that failed on its own thread must fail every later sync, or a reset's sync would succeed and
    /// the journal be emptied over data that never reached the disk.
    #[test]
    fn a_failed_early_sync_fails_every_later_sync() {
        let faults = Arc::new(FaultFs::new(Arc::new(MemFs::new())));
        let fs: Arc<dyn Fs> = faults.clone();
        fs.create_dir_all(Path::new("/d")).unwrap();
        let (mut data, _) = DataFiles::open(fs, Path::new("/d"), 0, SyncMark::default(), false, 4).unwrap();
        let block = vec![7u8; BLOCK_SIZE];
        data.append_batch(1, &[], &[Cw::new(0, &block)], 1 << 20).unwrap();
        faults.inject(Fault::after(Op::Sync, 0, FaultKind::Eio).on_paths("data-").once());
        data.early_sync();
        // The file system would now sync fine; the early failure must still be reported, every time.
        assert!(matches!(data.sync(), Err(Error::Io(_))));
        assert!(matches!(data.sync(), Err(Error::Io(_))));
        assert_eq!(faults.injected_on(Op::Sync), 1);
        assert!(data.sync_failed());
    }

    /// Regression (found by the randomized recovery test): an early sync that ran out of space was reported as a
    /// plain I/O error, so the volume stopped as if the device had failed and NBD clients got EIO, not ENOSPC.
    #[test]
    fn regression_a_failed_early_sync_keeps_its_kind() {
        let faults = Arc::new(FaultFs::new(Arc::new(MemFs::new())));
        let fs: Arc<dyn Fs> = faults.clone();
        fs.create_dir_all(Path::new("/d")).unwrap();
        let (mut data, _) = DataFiles::open(fs, Path::new("/d"), 0, SyncMark::default(), false, 4).unwrap();
        data.append_batch(1, &[], &[Cw::new(0, &vec![7u8; BLOCK_SIZE])], 1 << 20).unwrap();
        assert!(!data.sync_failed());
        faults.inject(Fault::after(Op::Sync, 0, FaultKind::NoSpace).on_paths("data-").once());
        data.early_sync();
        match data.sync() {
            Err(Error::Io(e)) => assert!(vfs::is_out_of_space(&e), "{e}"),
            other => panic!("{other:?}"),
        }
        assert!(data.sync_failed());
    }

    #[test]
    fn early_syncs_do_not_fail_later_ones() {
        let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
        fs.create_dir_all(Path::new("/d")).unwrap();
        let (mut data, _) = DataFiles::open(fs, Path::new("/d"), 0, SyncMark::default(), false, 4).unwrap();
        let block = vec![7u8; BLOCK_SIZE];
        for i in 0..3 {
            data.append_batch(i + 1, &[], &[Cw::new(i, &block)], 1 << 20).unwrap();
            data.early_sync();
        }
        data.sync().unwrap();
    }

    #[test]
    fn handles_of_sealed_files_stay_within_max_open_and_reopen_on_demand() {
        let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
        fs.create_dir_all(Path::new("/d")).unwrap();
        let (mut data, _) =
            DataFiles::open(fs.clone(), Path::new("/d"), 0, SyncMark::default(), false, 3).unwrap();
        // A 1-byte file size seals every file after one batch: ten files, each holding block i.
        let mut locs = Vec::new();
        for i in 0..10u64 {
            let block = vec![i as u8; BLOCK_SIZE];
            let (_, ops) = data.append_batch(i + 1, &[], &[Cw::new(i, &block)], 1).unwrap();
            let BatchOp::Put { unit_offset, stored_len, unit_blocks, block_in_unit, .. } = ops[0] else {
                panic!("a batch of one CW holds one put");
            };
            locs.push(Location { file: data.current(), unit_offset, stored_len, unit_blocks, block_in_unit });
        }
        data.sync().unwrap();
        for round in 0..2 {
            for (i, loc) in locs.iter().enumerate() {
                assert_eq!(
                    data.read_unit(loc).unwrap()[..BLOCK_SIZE],
                    vec![i as u8; BLOCK_SIZE][..],
                    "{round}"
                );
                assert!(data.open_handles() <= 3, "{} handles open", data.open_handles());
            }
        }
        data.remove(locs[0].file).unwrap();
        assert!(data.read_unit(&locs[0]).is_err(), "a removed file is not reopened");
        let (reopened, _) = DataFiles::open(fs, Path::new("/d"), 0, SyncMark::default(), true, 3).unwrap();
        assert_eq!(reopened.open_handles(), 0, "open keeps only the current file's handle");
    }
}
