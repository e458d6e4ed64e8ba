//! The data file: fixed-size segments written log-structured, with per-block checksums.
//!
//! # Design
//!
//! Segment `s` occupies `[s * segment_size, (s + 1) * segment_size)` of the data file. Its first
//! `segment_capacity` bytes hold data, appended in order; the tail is a table of one 8-byte entry per block
//! (`crc32c` u32, `fill` u16, reserved u16): the checksum of the block's first `fill` bytes, seeded with the
//! block's absolute data-file offset so misplaced blocks do not verify. Data is only ever appended to the one
//! *open* segment, whose bytes stay in an in-memory buffer (the segment buffer of §4.1: contiguous small writes
//! become one file write) until a flush; reads of the open segment are served from that buffer.
//!
//! Crash safety of the table: an entry is never rewritten once a sync has covered its block. A sync ends the
//! open segment's current block (the next append starts at a block boundary, leaving the rest of the block
//! unused), so every block's entry is written with its data, rewritten only while later unsynced flushes extend
//! the block, and frozen by the sync that makes it durable. A torn or short write of an entry (or of the data)
//! can therefore only damage bytes no commit refers to. An earlier design extended synced blocks and rewrote
//! their entries in place after a second sync; a short write of such an entry (new checksum, old fill) made
//! the committed front of the block unreadable. File systems pad to a block on `fsync` for the same reason;
//! the cost is at most one partial block per sync.
//!
//! Space accounting: `valid[s]` counts the live bytes the tree maps into segment `s`. A segment whose count drops
//! to zero is *pending*: the durable tree or log may still map it, so it becomes free (reusable) only when the
//! caller says the state that stopped referencing it is durable ([`Segments::release_pending`]).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::options::Options;

/// The largest unaligned read served from the per-thread buffer, which therefore never exceeds it.
const SCRATCH_MAX: usize = 64 << 10;

thread_local! {
    /// Whole checksum blocks of an unaligned read of at most [`SCRATCH_MAX`] bytes (see
    /// [`Segments::read_checked`]).
    static READ_SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    Used,
    Pending,
}

#[derive(Debug)]
struct OpenSeg {
    id: u64,
    buf: Vec<u8>,
    fill: usize,
    flushed: usize,
    /// The segment's checksum table as of the last flush.
    table: Vec<u8>,
}

/// Data-file counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentStats {
    /// Bytes written to the data file (data and checksum tables).
    pub bytes_written: u64,
    /// `sync_data` calls on the data file.
    pub syncs: u64,
}

/// The segment manager of the data file.
#[derive(Debug)]
pub struct Segments {
    file: Arc<dyn vfs::File>,
    seg: u64,
    cap: u64,
    bs: u64,
    table_off: u64,
    states: Vec<State>,
    valid: Vec<u64>,
    /// Sum of `valid` (asked for before every write, so not recomputed).
    live: u64,
    free: BTreeSet<u64>,
    open: Option<OpenSeg>,
    /// Checksum tables of closed segments, by segment id (one cell per segment), loaded on first read, also
    /// through a shared reference: a closed segment's table on disk is final until the segment is reopened,
    /// which replaces the cell.
    tables: Vec<OnceLock<Vec<u8>>>,
    spare: Option<Vec<u8>>,
    /// Changes whenever a segment is opened for writing: a closed segment's bytes change only when it is
    /// reopened, so read-ahead windows copied under another generation may be stale. Drawn from a process-wide
    /// counter, so two instances (a file closed and opened again) never share a value either.
    generation: u64,
    pub(crate) stats: SegmentStats,
}

/// Where a read of one extent's piece lies in a closed segment whose checksum table is loaded
/// ([`Segments::block_check`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockCheck {
    /// The segment.
    pub seg: u64,
    /// Segment-relative offset of the first byte read.
    pub seg_off: u64,
    /// Segment-relative start of the first block touched.
    pub rstart: u64,
    /// Segment-relative end of the written bytes of the last block touched.
    pub rend: u64,
}

fn next_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn crc_block(abs: u64, data: &[u8]) -> u32 {
    vfs::crc32c::crc32c_append(vfs::crc32c::crc32c(&abs.to_le_bytes()), data)
}

fn corrupt(msg: impl Into<String>) -> Error {
    Error::corruption("data", msg)
}

impl Segments {
    /// Manages `file`, which holds `nseg` segments (those past its end read as never written).
    pub fn new(file: Arc<dyn vfs::File>, opts: &Options) -> Result<Self> {
        let seg = opts.segment_size;
        let nseg = file.len()?.div_ceil(seg);
        let mut s = Segments {
            file,
            seg,
            cap: opts.segment_capacity(),
            bs: opts.block_size as u64,
            table_off: opts.segment_capacity(),
            states: Vec::new(),
            valid: Vec::new(),
            live: 0,
            free: BTreeSet::new(),
            open: None,
            tables: Vec::new(),
            spare: None,
            generation: next_generation(),
            stats: SegmentStats::default(),
        };
        s.grow_to(nseg);
        Ok(s)
    }

    fn grow_to(&mut self, n: u64) {
        while (self.states.len() as u64) < n {
            self.free.insert(self.states.len() as u64);
            self.states.push(State::Free);
            self.valid.push(0);
        }
        if self.tables.len() < self.states.len() {
            self.tables.resize_with(self.states.len(), OnceLock::new);
        }
    }

    /// Sets the live-byte counters from a scan of the tree (at open); segments without live bytes become free.
    pub fn set_valid(&mut self, valid: HashMap<u64, u64>) -> Result<()> {
        if let Some(m) = valid.keys().max().filter(|m| **m >= self.count()) {
            return Err(corrupt(format!("an extent maps segment {m}, past the end of the data file")));
        }
        for s in 0..self.states.len() as u64 {
            let v = valid.get(&s).copied().unwrap_or(0);
            if v > self.cap {
                return Err(corrupt(format!("segment {s} maps {v} bytes, more than its capacity")));
            }
            self.live = self.live - self.valid[s as usize] + v;
            self.valid[s as usize] = v;
            if v == 0 {
                self.states[s as usize] = State::Free;
                self.free.insert(s);
            } else {
                self.states[s as usize] = State::Used;
                self.free.remove(&s);
            }
        }
        Ok(())
    }

    /// The segment holding physical address `addr`.
    pub fn segment_of(&self, addr: u64) -> u64 {
        addr / self.seg
    }

    /// Segments in the data file's address space.
    pub fn count(&self) -> u64 {
        self.states.len() as u64
    }

    /// Free (reusable) segments.
    pub fn free_count(&self) -> u64 {
        self.free.len() as u64
    }

    /// Data bytes a segment holds.
    pub fn capacity(&self) -> u64 {
        self.cap
    }

    /// Whether segment `s` is free (reusable).
    pub fn is_free(&self, s: u64) -> bool {
        self.states.get(s as usize).is_none_or(|st| *st == State::Free)
    }

    /// Live bytes of segment `s`.
    pub fn valid(&self, s: u64) -> u64 {
        self.valid.get(s as usize).copied().unwrap_or(0)
    }

    /// Total live bytes.
    pub fn live_bytes(&self) -> u64 {
        self.live
    }

    /// Segments holding live data or open.
    pub fn used_count(&self) -> u64 {
        self.states.iter().filter(|s| **s != State::Free).count() as u64
    }

    /// The open segment, if any.
    pub fn open_id(&self) -> Option<u64> {
        self.open.as_ref().map(|o| o.id)
    }

    /// Closed segments with live data, emptiest first.
    pub fn gc_candidates(&self) -> Vec<(u64, u64)> {
        let open = self.open_id();
        let mut v: Vec<(u64, u64)> = (0..self.count())
            .filter(|&s| self.states[s as usize] == State::Used && Some(s) != open)
            .map(|s| (self.valid[s as usize], s))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(v, s)| (s, v)).collect()
    }

    /// Records `len` live bytes at `addr`.
    pub fn add_valid(&mut self, addr: u64, len: u64) -> Result<()> {
        let s = self.segment_of(addr) as usize;
        match self.valid.get_mut(s) {
            Some(v) if *v + len <= self.cap => {
                *v += len;
                self.live += len;
                Ok(())
            }
            _ => Err(corrupt(format!("live bytes of segment {s} exceed its capacity"))),
        }
    }

    /// Forgets `len` live bytes at `addr`; an emptied closed segment becomes pending.
    pub fn sub_valid(&mut self, addr: u64, len: u64) -> Result<()> {
        let s = self.segment_of(addr);
        let v = self.valid.get_mut(s as usize).ok_or_else(|| corrupt(format!("segment {s} out of range")))?;
        *v = v.checked_sub(len).ok_or_else(|| corrupt(format!("live bytes of segment {s} underflow")))?;
        self.live -= len;
        if *v == 0 && self.open_id() != Some(s) {
            self.states[s as usize] = State::Pending;
        }
        Ok(())
    }

    /// Makes pending segments free: the durable state no longer maps them.
    pub fn release_pending(&mut self) {
        for s in 0..self.states.len() {
            if self.states[s] == State::Pending {
                self.states[s] = State::Free;
                self.free.insert(s as u64);
            }
        }
    }

    /// Closes the open segment (flushing it) so the next append starts a fresh one.
    pub fn close_open(&mut self) -> Result<()> {
        self.flush()?;
        if let Some(o) = self.open.take() {
            if self.valid[o.id as usize] == 0 {
                self.states[o.id as usize] = State::Pending;
            }
            self.set_table(o.id, Some(o.table));
            self.spare = Some(o.buf);
        }
        Ok(())
    }

    fn table_len(&self) -> usize {
        ((self.cap / self.bs) * 8) as usize
    }

    /// Recomputes the table entries of blocks `b0..=b1` of the open segment from its buffer.
    fn update_table(o: &mut OpenSeg, seg: u64, bs: u64, b0: u64, b1: u64) {
        for b in b0..=b1 {
            let start = (b * bs) as usize;
            let end = ((b + 1) * bs).min(o.fill as u64) as usize;
            let crc = crc_block(o.id * seg + start as u64, &o.buf[start..end]);
            let e = &mut o.table[(b * 8) as usize..(b * 8 + 8) as usize];
            e[0..4].copy_from_slice(&crc.to_le_bytes());
            e[4..6].copy_from_slice(&((end - start) as u16).to_le_bytes());
            e[6..8].copy_from_slice(&0u16.to_le_bytes());
        }
    }

    fn open_new(&mut self) -> Result<()> {
        self.close_open()?;
        self.generation = next_generation();
        let id = match self.free.pop_first() {
            Some(s) => s,
            None => {
                let s = self.count();
                self.grow_to(s + 1);
                self.free.remove(&s);
                s
            }
        };
        self.states[id as usize] = State::Used;
        self.set_table(id, None);
        self.open = Some(OpenSeg {
            id,
            // Reuse the last closed segment's buffer: stale bytes past `fill` are never read or written out.
            buf: match self.spare.take() {
                Some(b) => b,
                None => vec![0u8; self.cap as usize],
            },
            fill: 0,
            flushed: 0,
            table: vec![0u8; self.table_len()],
        });
        Ok(())
    }

    /// Room left in the open segment.
    pub fn open_room(&self) -> u64 {
        self.open.as_ref().map_or(0, |o| self.cap - o.fill as u64)
    }

    /// Appends `data` as one extent that does not cross a segment (opening a new segment when the open one has
    /// less room than `data.len()` if `whole`, else filling the open one first). Returns the address and the
    /// bytes taken. REQUIRES: `data.len() <= capacity`.
    pub fn append(&mut self, data: &[u8], whole: bool) -> Result<(u64, usize)> {
        let room = self.open_room();
        if room == 0 || (whole && room < data.len() as u64) {
            self.open_new()?;
        }
        let seg = self.seg;
        let o = self.open.as_mut().ok_or_else(|| corrupt("no open segment"))?;
        let n = data.len().min(self.cap as usize - o.fill);
        o.buf[o.fill..o.fill + n].copy_from_slice(&data[..n]);
        let addr = o.id * seg + o.fill as u64;
        o.fill += n;
        Ok((addr, n))
    }

    /// Writes the unflushed part of the open segment and its checksum entries (not synced).
    pub fn flush(&mut self) -> Result<()> {
        let (seg, bs, table_off) = (self.seg, self.bs, self.table_off);
        let Some(o) = self.open.as_mut() else { return Ok(()) };
        if o.flushed == o.fill {
            return Ok(());
        }
        let base = o.id * seg;
        let (from, to) = (o.flushed, o.fill);
        self.file.write_all_at(&o.buf[from..to], base + from as u64)?;
        self.stats.bytes_written += (to - from) as u64;
        let b0 = from as u64 / bs;
        let b1 = (to as u64 - 1) / bs;
        Self::update_table(o, seg, bs, b0, b1);
        // Block `b0` may already hold flushed bytes, but never synced ones (a sync ends the block), so its entry
        // is rewritten here with nothing durable depending on the old one.
        let (a, b) = ((b0 * 8) as usize, ((b1 + 1) * 8) as usize);
        self.file.write_all_at(&o.table[a..b], base + table_off + a as u64)?;
        self.stats.bytes_written += (b - a) as u64;
        o.flushed = to;
        Ok(())
    }

    /// Flushes and makes the data file durable, then ends the open segment's current block so no later write
    /// touches a synced block or its checksum entry.
    pub fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.file.sync_data()?;
        self.stats.syncs += 1;
        let (bs, cap) = (self.bs as usize, self.cap as usize);
        if let Some(o) = self.open.as_mut() {
            let end = o.fill.next_multiple_of(bs).min(cap);
            o.fill = end;
            o.flushed = end;
        }
        Ok(())
    }

    fn set_table(&mut self, s: u64, t: Option<Vec<u8>>) {
        let i = s as usize;
        if self.tables.len() <= i {
            self.tables.resize_with(i + 1, OnceLock::new);
        }
        self.tables[i] = t.map_or_else(OnceLock::new, OnceLock::from);
    }

    /// The checksum table of closed segment `s`, read from the file and cached on first use. Entries past the
    /// file's end read as zeros (blocks never written).
    fn table(&self, s: u64) -> Result<&[u8]> {
        let cell = self.tables.get(s as usize).ok_or_else(|| corrupt(format!("no segment {s}")))?;
        if let Some(t) = cell.get() {
            return Ok(t);
        }
        let mut t = vec![0u8; self.table_len()];
        let off = s * self.seg + self.table_off;
        let flen = self.file.len()?;
        if off < flen {
            let n = (t.len() as u64).min(flen - off) as usize;
            self.file.read_exact_at(&mut t[..n], off)?;
        }
        // A concurrent reader may have won: both read the same bytes.
        let _ = cell.set(t);
        cell.get().map(Vec::as_slice).ok_or_else(|| corrupt("checksum table vanished"))
    }

    /// Reads `buf.len()` bytes at `addr`, verifying block checksums. REQUIRES: the range lies in one segment.
    pub fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.read_shared(addr, buf)
    }

    /// [`Segments::read`] through a shared reference, for concurrent readers.
    pub fn read_shared(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        match self.block_check(addr, buf.len())? {
            Some(c) => self.read_checked(c, buf),
            None => {
                self.read_open(addr, buf);
                Ok(())
            }
        }
    }

    /// Copies `buf.len()` bytes at `addr` from the open segment's buffer. REQUIRES: [`Segments::block_check`]
    /// returned `None` for this read.
    pub(crate) fn read_open(&self, addr: u64, buf: &mut [u8]) {
        if let Some(o) = self.open.as_ref().filter(|_| !buf.is_empty()) {
            let off = (addr % self.seg) as usize;
            buf.copy_from_slice(&o.buf[off..off + buf.len()]);
        }
    }

    /// Reads and verifies the blocks of the read `c` describes and copies its bytes into `buf`. REQUIRES: `c` is
    /// what [`Segments::block_check`] returned for this read (`buf.len()` bytes).
    pub(crate) fn read_checked(&self, c: BlockCheck, buf: &mut [u8]) -> Result<()> {
        let (bs, s) = (self.bs, c.seg);
        let (b0, b1) = (c.rstart / bs, (c.rend - 1) / bs);
        let end = c.seg_off + buf.len() as u64;
        // Whole blocks requested exactly (the common aligned read): read straight into the caller's buffer.
        let direct = c.rstart == c.seg_off && c.rend == end;
        let verify = |dst: &[u8]| -> Result<()> {
            for b in b0..=b1 {
                let fill = self.check_fill(s, b, b1)?;
                let a = ((b - b0) * bs) as usize;
                self.verify_block(s, b, &dst[a..a + fill as usize])?;
            }
            Ok(())
        };
        if direct {
            self.read_raw(s, c.rstart, buf)?;
            return verify(buf);
        }
        let n = (c.rend - c.rstart) as usize;
        let mut copy_out = |raw: &mut [u8]| -> Result<()> {
            self.read_raw(s, c.rstart, raw)?;
            verify(raw)?;
            let a = (c.seg_off - c.rstart) as usize;
            buf.copy_from_slice(&raw[a..a + buf.len()]);
            Ok(())
        };
        if n > SCRATCH_MAX {
            return copy_out(&mut vec![0u8; n]);
        }
        // Small unaligned reads (every interval load makes some) go through a per-thread buffer: a fresh zeroed
        // allocation per piece cost more than the copy out of it.
        READ_SCRATCH.with_borrow_mut(|raw| {
            if raw.len() < n {
                raw.resize(n, 0);
            }
            copy_out(&mut raw[..n])
        })
    }

    /// The current generation (see the field).
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Bytes per checksum block.
    pub(crate) fn block_size(&self) -> u64 {
        self.bs
    }

    /// The read of `len` bytes at `addr` placed in its closed segment, after checking the range (and loading the
    /// segment's checksum table); `None` when `len` is 0 or the range is valid in the open segment (read it from
    /// the segment buffer).
    pub(crate) fn block_check(&self, addr: u64, len: usize) -> Result<Option<BlockCheck>> {
        if len == 0 {
            return Ok(None);
        }
        let (s, off) = (addr / self.seg, addr % self.seg);
        let end = off + len as u64;
        if end > self.cap {
            return Err(corrupt(format!("extent at {addr} runs past its segment's data area")));
        }
        if let Some(o) = self.open.as_ref().filter(|o| o.id == s) {
            if end > o.fill as u64 {
                return Err(corrupt(format!("extent at {addr} maps unwritten bytes of the open segment")));
            }
            return Ok(None);
        }
        self.table(s)?;
        let b1 = (end - 1) / self.bs;
        let rend = b1 * self.bs + self.block_fill(s, b1);
        if rend < end {
            return Err(corrupt(format!(
                "extent at {addr} maps bytes its segment's checksum table never covered"
            )));
        }
        Ok(Some(BlockCheck { seg: s, seg_off: off, rstart: off / self.bs * self.bs, rend }))
    }

    /// The fill of block `b` of closed segment `s` by its loaded table (0: unwritten, or no such block).
    pub(crate) fn block_fill(&self, s: u64, b: u64) -> u64 {
        let Some(t) = self.tables.get(s as usize).and_then(OnceLock::get) else { return 0 };
        let i = (b * 8) as usize;
        t.get(i + 4..i + 6).map_or(0, |f| u16::from_le_bytes([f[0], f[1]]) as u64)
    }

    /// Block `b`'s fill, checked as a block of a read whose last block is `b1`: at most a block, and whole unless
    /// it is the last.
    pub(crate) fn check_fill(&self, s: u64, b: u64, b1: u64) -> Result<u64> {
        let fill = self.block_fill(s, b);
        if fill > self.bs || (b < b1 && fill != self.bs) {
            return Err(corrupt(format!("segment {s} block {b}: bad fill {fill}")));
        }
        Ok(fill)
    }

    /// Checks `data`, the written bytes of block `b` of closed segment `s`, against the loaded table.
    pub(crate) fn verify_block(&self, s: u64, b: u64, data: &[u8]) -> Result<()> {
        let crc = self
            .tables
            .get(s as usize)
            .and_then(OnceLock::get)
            .and_then(|t| t.get((b * 8) as usize..(b * 8 + 4) as usize))
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        if crc != Some(crc_block(s * self.seg + b * self.bs, data)) {
            return Err(corrupt(format!("segment {s} block {b}: checksum mismatch")));
        }
        Ok(())
    }

    /// Reads segment `s`'s bytes from segment-relative offset `start` into `buf`, unverified.
    pub(crate) fn read_raw(&self, s: u64, start: u64, buf: &mut [u8]) -> Result<()> {
        self.file.read_exact_at(buf, s * self.seg + start).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                corrupt(format!("segment {s} is shorter than its checksum table says"))
            } else {
                Error::from(e)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After a reopen no checksum table is cached. A read through a shared reference used to read the entries it
    /// needed from the file every time without keeping them, so every later read paid a second positional read.
    #[test]
    fn regression_shared_reads_cache_the_checksum_table() {
        let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
        let path = std::path::Path::new("/data");
        let opts = Options::tiny();
        let file = fs.open(path, vfs::OpenMode::CreateNew).unwrap_or_else(|e| panic!("create: {e}"));
        let mut segs = Segments::new(file, &opts).unwrap_or_else(|e| panic!("new: {e}"));
        let data: Vec<u8> = (0..100u8).collect();
        let (addr, n) = segs.append(&data, true).unwrap_or_else(|e| panic!("append: {e}"));
        assert_eq!(n, data.len());
        segs.close_open().unwrap_or_else(|e| panic!("close: {e}"));
        segs.sync().unwrap_or_else(|e| panic!("sync: {e}"));
        let file = fs.open(path, vfs::OpenMode::ReadWrite).unwrap_or_else(|e| panic!("open: {e}"));
        let segs = Segments::new(file, &opts).unwrap_or_else(|e| panic!("reopen: {e}"));
        let s = (addr / opts.segment_size) as usize;
        assert!(segs.tables[s].get().is_none());
        let mut buf = vec![0u8; data.len()];
        segs.read_shared(addr, &mut buf).unwrap_or_else(|e| panic!("read: {e}"));
        assert_eq!(buf, data);
        assert!(segs.tables[s].get().is_some(), "the table read for the first read is kept");
    }
}
