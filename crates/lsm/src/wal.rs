//! The record log used for the write-ahead log and the MANIFEST: LevelDB's log format.
//!
//! The file is a sequence of 32 KiB blocks. A record is split into fragments that never cross a block boundary;
//! each fragment has a 7-byte header `crc: u32 LE (masked CRC32C of type byte + payload) | len: u16 LE | type: u8`
//! with type FULL (1), FIRST (2), MIDDLE (3) or LAST (4). A block tail shorter than a header is zero-filled.
//! See docs/formats/wal.md.
//!
//! Recovery contract: a log ends at the first fragment that is short, has a bad checksum or an impossible type:
//! that is how a torn tail (a crash during an unsynced append) looks. [`LogReader`] reports it through
//! [`LogReader::tail_dropped`] so the caller can decide whether a damaged tail is acceptable (the newest WAL) or
//! corruption (any log that was completely synced before a newer one was started).
//!
//! Sync marks tell the two apart inside the newest log. After a sync, the writer's next append starts with a
//! *sync mark*, a FULL record of [`MARK_MAGIC`] and the offset through which the sync made the log durable.
//! (A record, not a new fragment type: a reader older than marks takes a fragment type it does not know for a
//! torn tail and would silently drop the rest of the log, MANIFEST edits included, where a record it cannot
//! decode stops it with a corruption error.)
//! Damage before an offset that a later valid mark names lay in bytes that had been synced, so it is not a torn
//! append but corruption ([`LogReader::check_durable`]). Past every mark, damage is a torn tail only if a crash
//! can explain it: the file ends inside the damaged fragment, or a sector piece under it reads as never written
//! (zeros; logs are only appended to fresh files, see `vfs::torn`). Valid records after a damaged one prove
//! nothing (unsynced sectors persist in any mix), but a flipped bit in fully written bytes, such as the records a
//! final sync covered before a crash, is corruption too. A writer whose write or sync failed writes no more
//! ([`LogWriter::failed`]), so the leftovers of a failed write are never followed by data.

use std::sync::Arc;

use crate::coding::{le_u32, le_u64, masked_crc2};
use crate::error::{Error, Result};

/// Log block size.
pub const BLOCK_SIZE: usize = 32 * 1024;
/// Fragment header size.
pub const HEADER_SIZE: usize = 7;

const FULL: u8 = 1;
const FIRST: u8 = 2;
const MIDDLE: u8 = 3;
const LAST: u8 = 4;
/// A sync mark is a FULL record of these 20 bytes and then a u64 LE: the log offset through which the log was
/// durable when the mark was appended. Marks sit between records; readers skip them. No WAL record starts so (a
/// write batch with sequence number 2^64 - 1 and 2^32 - 1 updates), nor a MANIFEST edit (tags are small varints).
pub const MARK_MAGIC: [u8; 20] = *b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xffRDBSYNC\x01";
/// Bytes of a sync mark's payload.
const MARK_PAYLOAD: usize = MARK_MAGIC.len() + 8;
/// Fragment type 5 with an 8-byte payload: a sync mark as one development build wrote it (2026-11-27), before
/// marks became records. Reserved; read as a mark, never written.
const LEGACY_MARK: u8 = 5;
/// Bytes of a sync mark (header and payload); a mark never crosses a block boundary.
const MARK_SIZE: usize = HEADER_SIZE + MARK_PAYLOAD;

/// Appends records to a log file.
#[derive(Debug)]
pub struct LogWriter {
    file: Arc<dyn vfs::File>,
    /// Bytes written so far (the append offset).
    offset: u64,
    /// Offset within the current block.
    block_off: usize,
    buf: Vec<u8>,
    /// The offset through which the last successful sync made the log durable.
    durable: u64,
    /// The durable offset the last sync mark written carries.
    marked: u64,
    /// A write or sync failed: what the file holds past `durable` is unknown (a failed write may have left part
    /// of its bytes, which a later write at the same offset would only partly cover), so nothing more is written.
    failed: vfs::StickyError,
}

impl LogWriter {
    /// A writer appending to `file`, which already holds `offset` bytes of log.
    pub fn new(file: Arc<dyn vfs::File>, offset: u64) -> Self {
        let block_off = (offset % BLOCK_SIZE as u64) as usize;
        // Nothing is claimed durable for bytes this writer did not sync itself.
        LogWriter {
            file,
            offset,
            block_off,
            buf: Vec::new(),
            durable: 0,
            marked: 0,
            failed: vfs::StickyError::default(),
        }
    }

    /// Bytes in the log.
    pub fn len(&self) -> u64 {
        self.offset
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.offset == 0
    }

    /// Whether a write or sync failed, after which the writer refuses to write (see `docs/vfs.md`, assumption 7).
    pub fn failed(&self) -> bool {
        self.failed.is_set()
    }

    /// Appends one record (not durable until [`LogWriter::sync`]).
    pub fn add_record(&mut self, rec: &[u8]) -> Result<()> {
        self.failed.check()?;
        self.buf.clear();
        // A sync since the last mark: say so before the record (when the block has room; else before a later one).
        let mark = self.durable > self.marked && BLOCK_SIZE - self.block_off >= MARK_SIZE;
        if mark {
            push_mark(&mut self.buf, self.durable);
            self.block_off += MARK_SIZE;
        }
        let mut rest = rec;
        let mut first = true;
        loop {
            let left = BLOCK_SIZE - self.block_off;
            if left < HEADER_SIZE {
                self.buf.extend(std::iter::repeat_n(0u8, left));
                self.block_off = 0;
            }
            let avail = BLOCK_SIZE - self.block_off - HEADER_SIZE;
            let n = rest.len().min(avail);
            let end = n == rest.len();
            let ty = match (first, end) {
                (true, true) => FULL,
                (true, false) => FIRST,
                (false, true) => LAST,
                (false, false) => MIDDLE,
            };
            let (frag, tail) = rest.split_at(n);
            self.buf.extend_from_slice(&masked_crc2(&[ty], frag).to_le_bytes());
            self.buf.extend_from_slice(&(n as u16).to_le_bytes());
            self.buf.push(ty);
            self.buf.extend_from_slice(frag);
            self.block_off += HEADER_SIZE + n;
            rest = tail;
            first = false;
            if end {
                break;
            }
        }
        self.failed.record(self.file.write_all_at(&self.buf, self.offset))?;
        self.offset += self.buf.len() as u64;
        if mark {
            self.marked = self.durable;
        }
        Ok(())
    }

    /// Makes everything appended durable.
    pub fn sync(&mut self) -> Result<()> {
        self.failed.check()?;
        self.failed.record_sync(self.file.sync_data())?;
        self.durable = self.offset;
        Ok(())
    }

    /// After a failed write or sync: cuts the log back to the records it can vouch for (`vfs::StickyError::cut`)
    /// so a newer log may follow it. Records past the cut are lost from this log: the caller must have them
    /// elsewhere (the memtable it flushes next). Returns the log's length.
    /// REQUIRES: [`LogWriter::failed`].
    pub fn cut_failed_tail(&mut self) -> Result<u64> {
        Ok(self.failed.cut(&*self.file, self.offset, self.durable)?)
    }

    /// Syncs, then ends the log with a sync mark covering everything (when its block has room), so that damage
    /// anywhere in a log closed cleanly is reported as corruption at the next open rather than read as a torn
    /// tail. No record may follow. A writer that failed writes nothing more: its error reached the caller then.
    pub fn seal(&mut self) -> Result<()> {
        if self.failed.is_set() {
            return Ok(());
        }
        self.sync()?;
        if self.durable > self.marked && BLOCK_SIZE - self.block_off >= MARK_SIZE {
            let mut m = Vec::with_capacity(MARK_SIZE);
            push_mark(&mut m, self.durable);
            self.failed.record(self.file.write_all_at(&m, self.offset))?;
            self.offset += MARK_SIZE as u64;
            self.block_off += MARK_SIZE;
            self.marked = self.durable;
            self.sync()?;
        }
        Ok(())
    }
}

/// Appends a sync mark naming `durable`.
fn push_mark(buf: &mut Vec<u8>, durable: u64) {
    let mut payload = [0u8; MARK_PAYLOAD];
    payload[..MARK_MAGIC.len()].copy_from_slice(&MARK_MAGIC);
    payload[MARK_MAGIC.len()..].copy_from_slice(&durable.to_le_bytes());
    buf.extend_from_slice(&masked_crc2(&[FULL], &payload).to_le_bytes());
    buf.extend_from_slice(&(MARK_PAYLOAD as u16).to_le_bytes());
    buf.push(FULL);
    buf.extend_from_slice(&payload);
}

/// The durable offset of a valid sync mark fragment at `p` (either form), if one is there.
fn mark_at(d: &[u8], p: usize) -> Option<u64> {
    let hdr = d.get(p..p + HEADER_SIZE)?;
    let (ty, len) = (hdr[6], usize::from(u16::from_le_bytes([hdr[4], hdr[5]])));
    let fits = |n: usize| p % BLOCK_SIZE + HEADER_SIZE + n <= BLOCK_SIZE;
    let payload = match (ty, len) {
        (FULL, MARK_PAYLOAD) | (LEGACY_MARK, 8) if fits(len) => {
            d.get(p + HEADER_SIZE..p + HEADER_SIZE + len)?
        }
        _ => return None,
    };
    if le_u32(hdr, 0) != Some(masked_crc2(&[ty], payload)) {
        return None;
    }
    if ty == FULL { mark_of(payload) } else { le_u64(payload, 0) }
}

/// The durable offset of a sync mark's payload, if `payload` is one.
fn mark_of(payload: &[u8]) -> Option<u64> {
    (payload.len() == MARK_PAYLOAD && payload[..MARK_MAGIC.len()] == MARK_MAGIC)
        .then(|| le_u64(payload, MARK_MAGIC.len()))
        .flatten()
}

/// Reads records back from a whole log image.
#[derive(Debug)]
pub struct LogReader {
    data: Vec<u8>,
    pos: usize,
    name: String,
    tail_dropped: Option<String>,
    /// Set when the damage lies inside the durable prefix a later sync mark names (see the module comment).
    durable_damage: Option<String>,
    rec: Vec<u8>,
}

impl LogReader {
    /// Reads the whole file `name` into memory.
    pub fn open(fs: &dyn vfs::Fs, path: &std::path::Path, name: &str) -> Result<Self> {
        Ok(Self::from_bytes(vfs::read_all(fs, path)?, name))
    }

    /// A reader over a log image.
    pub fn from_bytes(data: Vec<u8>, name: &str) -> Self {
        LogReader {
            data,
            pos: 0,
            name: name.to_string(),
            tail_dropped: None,
            durable_damage: None,
            rec: Vec::new(),
        }
    }

    /// If reading stopped at a damaged fragment rather than the clean end, why.
    pub fn tail_dropped(&self) -> Option<&str> {
        self.tail_dropped.as_deref()
    }

    /// The offset just past the last complete record returned.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// Bytes after the last complete record returned (a dropped tail, or zero padding after a clean end).
    pub fn unread_bytes(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The next record, or `None` at the end (clean or damaged: see [`LogReader::tail_dropped`]).
    pub fn next_record(&mut self) -> Option<&[u8]> {
        self.rec.clear();
        let mut in_record = false;
        let mut pos = self.pos;
        loop {
            let block_left = BLOCK_SIZE - pos % BLOCK_SIZE;
            if block_left < HEADER_SIZE {
                pos += block_left;
            }
            if pos >= self.data.len() {
                if in_record {
                    self.tail_dropped = Some(format!("record at {} is missing its last fragment", self.pos));
                }
                return None;
            }
            let Some(hdr) = self.data.get(pos..pos + HEADER_SIZE) else {
                // Zeros shorter than a header end the log as longer zero padding does (below).
                if !in_record && self.data[pos..].iter().all(|&b| b == 0) {
                    return None;
                }
                return self.damaged(pos, None, "short fragment header");
            };
            let crc = le_u32(hdr, 0).unwrap_or(0);
            let len = usize::from(u16::from_le_bytes([hdr[4], hdr[5]]));
            let ty = hdr[6];
            if ty == 0 && len == 0 && crc == 0 {
                // Zero padding: preallocated or never-written space. Anything after it is not part of the log.
                if in_record || self.data[pos..].iter().any(|&b| b != 0) {
                    return self.damaged(pos, Some(pos + HEADER_SIZE), "zeroed fragment followed by data");
                }
                return None;
            }
            let start = pos + HEADER_SIZE;
            if len > BLOCK_SIZE - pos % BLOCK_SIZE - HEADER_SIZE {
                let block_end = (pos / BLOCK_SIZE + 1) * BLOCK_SIZE;
                return self.damaged(pos, Some(block_end), "fragment extends past its block");
            }
            if start + len > self.data.len() {
                return self.damaged(pos, None, "fragment extends past the end of the file");
            }
            let payload = &self.data[start..start + len];
            let fragment = pos;
            if masked_crc2(&[ty], payload) != crc {
                return self.damaged(pos, Some(start + len), "fragment checksum mismatch");
            }
            pos = start + len;
            match (ty, in_record) {
                (FULL, false) if mark_of(payload).is_some() => self.pos = pos,
                (LEGACY_MARK, false) if len == 8 => self.pos = pos,
                (FULL, false) => {
                    self.rec.extend_from_slice(payload);
                    self.pos = pos;
                    return Some(&self.rec);
                }
                (FIRST, false) => {
                    self.rec.extend_from_slice(payload);
                    in_record = true;
                }
                (MIDDLE, true) => self.rec.extend_from_slice(payload),
                (LAST, true) => {
                    self.rec.extend_from_slice(payload);
                    self.pos = pos;
                    return Some(&self.rec);
                }
                _ => return self.damaged(fragment, Some(pos), "fragment type out of sequence"),
            }
        }
    }

    /// Records damage at `at`: a fragment whose bytes run to `end`, or (`None`) one the end of the file cuts
    /// short. Damage is a torn append only when nothing shows the bytes were synced: no later sync mark names an
    /// offset past them, and the file ends inside them or a sector piece under them reads as never written
    /// (`vfs::torn`). A flipped bit in a fully written fragment has neither, so it is corruption even after the
    /// last mark (the records a final sync covered before a crash).
    fn damaged(&mut self, at: usize, end: Option<usize>, why: &str) -> Option<&[u8]> {
        // The file's name is the error's (`Error::corruption(name, ..)`); not repeated here.
        let msg = format!("at offset {at}: {why}");
        if let Some(durable) = self.durable_beyond(at) {
            self.durable_damage =
                Some(format!("{msg}, inside the part a later sync made durable (through {durable})"));
        } else if let Some(end) = end
            && !vfs::torn::overlaps_unwritten_sector(&self.data, at, at, end)
        {
            self.durable_damage = Some(format!(
                "{msg}, in bytes that were all written (no sector of it reads as zeros), so not a torn append"
            ));
        }
        self.tail_dropped = Some(msg);
        None
    }

    /// The durable offset named by a valid sync mark after `at`, if it lies beyond `at`. Marks are looked for at
    /// every byte (the damage may hide where fragments start); a false match needs a 32-bit checksum to agree.
    fn durable_beyond(&self, at: usize) -> Option<u64> {
        (at + 1..self.data.len()).filter_map(|p| mark_at(&self.data, p)).find(|&durable| durable > at as u64)
    }

    /// Converts damage inside the log's durable prefix into a corruption error. A damaged tail past every sync
    /// mark stays acceptable (a torn append); [`LogReader::check_complete`] refuses that too.
    pub fn check_durable(&self) -> Result<()> {
        match &self.durable_damage {
            Some(why) => Err(Error::corruption(self.name.clone(), why.clone())),
            None => Ok(()),
        }
    }

    /// Converts a damaged tail into a corruption error (for logs that must be complete).
    pub fn check_complete(&self) -> Result<()> {
        match &self.tail_dropped {
            Some(why) => Err(Error::corruption(self.name.clone(), why.clone())),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use vfs::{Fs, MemFs, OpenMode};

    fn write(recs: &[Vec<u8>]) -> Vec<u8> {
        let fs = MemFs::new();
        let f = fs.open(Path::new("log"), OpenMode::CreateNew).unwrap();
        let mut w = LogWriter::new(f, 0);
        for r in recs {
            w.add_record(r).unwrap();
        }
        vfs::read_all(&fs, Path::new("log")).unwrap()
    }

    fn read(data: Vec<u8>) -> (Vec<Vec<u8>>, bool) {
        let mut r = LogReader::from_bytes(data, "log");
        let mut out = Vec::new();
        while let Some(rec) = r.next_record() {
            out.push(rec.to_vec());
        }
        (out, r.tail_dropped().is_some())
    }

    #[test]
    fn records_of_every_size_roundtrip_across_blocks() {
        let recs: Vec<Vec<u8>> = [0usize, 1, 100, BLOCK_SIZE - 14, BLOCK_SIZE, 3 * BLOCK_SIZE + 5, 7]
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (i * 31 + j) as u8).collect())
            .collect();
        let data = write(&recs);
        assert_eq!(read(data), (recs, false));
    }

    #[test]
    fn torn_tail_is_dropped_and_reported() {
        let recs = vec![vec![1u8; 1000], vec![2u8; 50_000], vec![3u8; 10]];
        let data = write(&recs);
        for cut in [data.len() - 1, data.len() - 10, 1007 + 20_000, 1007 + 40_000] {
            let (got, dropped) = read(data[..cut].to_vec());
            assert!(dropped);
            assert!(recs.starts_with(&got), "cut {cut}");
        }
        // A flipped bit in the middle record stops reading there.
        let mut bad = data.clone();
        bad[1007 + 100] ^= 0x10;
        let (got, dropped) = read(bad);
        assert_eq!(got, vec![recs[0].clone()]);
        assert!(dropped);
    }

    /// A WAL as a killed process or a crash leaves it on real files: records, then zeros reserved ahead of the
    /// appends (`vfs::Fs::create_log`), at any offset in a block. The zeros are the clean end, also for the
    /// checks of an older log; data after zeros is damage.
    #[test]
    fn a_reserved_zero_tail_is_the_clean_end() {
        let recs = vec![vec![1u8; 1000], vec![2u8; 40_000], vec![3u8; 10]];
        let data = write(&recs);
        for pad in [1, 6, 7, 100, 64 << 10] {
            let mut padded = data.clone();
            padded.resize(data.len() + pad, 0);
            let mut r = LogReader::from_bytes(padded.clone(), "log");
            let mut got = Vec::new();
            while let Some(rec) = r.next_record() {
                got.push(rec.to_vec());
            }
            assert_eq!(got, recs, "pad {pad}");
            assert!(r.tail_dropped().is_none() && r.check_complete().is_ok(), "pad {pad}");
            padded.push(9);
            let (got, dropped) = read(padded);
            assert!(dropped && recs.starts_with(&got), "pad {pad}: data after the zeros");
        }
    }

    /// Writes `recs`, syncing after the records whose index is in `syncs`, then sealing if asked.
    fn write_synced(recs: &[Vec<u8>], syncs: &[usize], seal: bool) -> Vec<u8> {
        let fs = MemFs::new();
        let f = fs.open(Path::new("log"), OpenMode::CreateNew).unwrap();
        let mut w = LogWriter::new(f, 0);
        for (i, r) in recs.iter().enumerate() {
            w.add_record(r).unwrap();
            if syncs.contains(&i) {
                w.sync().unwrap();
            }
        }
        if seal {
            w.seal().unwrap();
        }
        vfs::read_all(&fs, Path::new("log")).unwrap()
    }

    fn durable_damage(data: Vec<u8>) -> bool {
        let mut r = LogReader::from_bytes(data, "log");
        while r.next_record().is_some() {}
        r.check_durable().is_err()
    }

    #[test]
    fn sync_marks_are_not_records() {
        // Sizes that put a mark at every position in a block, including where none fits.
        let recs: Vec<Vec<u8>> = (0..60).map(|i| vec![i as u8; (i * 997) % (BLOCK_SIZE + 50)]).collect();
        let syncs: Vec<usize> = (0..60).collect();
        let data = write_synced(&recs, &syncs, true);
        assert_eq!(read(data.clone()), (recs, false));
        assert!(!durable_damage(data));
    }

    /// A bit flip in the newest WAL's synced records was read as a torn tail: every record after it, all of them
    /// acknowledged as durable, was dropped without an error.
    #[test]
    fn regression_damage_inside_the_synced_prefix_is_corruption() {
        let recs = vec![vec![1u8; 1000], vec![2u8; 50_000], vec![3u8; 10], vec![4u8; 2000]];
        // Synced after record 2: the mark before record 3 covers records 0 to 2.
        let data = write_synced(&recs, &[2], false);
        for at in [10, 1007 + 100, 1007 + 40_000] {
            let mut bad = data.clone();
            bad[at] ^= 0x10;
            assert!(durable_damage(bad), "flip at {at}");
        }
        // Record 3 was never synced: a sector of it that never reached the media is a torn append.
        let mut torn = data.clone();
        let n = torn.len();
        let sector = (n - 700) / 512 * 512;
        torn[sector..sector + 512].fill(0);
        assert!(!durable_damage(torn.clone()));
        assert_eq!(read(torn).0, recs[..3].to_vec());
        // Sealed, the last record is covered too.
        let sealed = write_synced(&recs, &[2], true);
        let mut bad = sealed.clone();
        let n = sealed.len();
        bad[n - MARK_SIZE - 5] ^= 0x10;
        assert!(durable_damage(bad));
        // Cut short, a sealed log is indistinguishable from a torn one (no mark follows the cut).
        assert!(!durable_damage(sealed[..n - 20].to_vec()));
    }

    /// After the last sync mark, damage was always read as a torn tail, so a bit flip in the records a final sync
    /// had covered (a crash right after it, before any later append carried a mark) dropped them silently. Only a
    /// cut file or a sector reading as zeros can be a torn append.
    #[test]
    fn regression_a_flip_in_records_a_final_sync_covered_is_corruption() {
        let recs: Vec<Vec<u8>> = (1..=6u8).map(|i| vec![i; 300 * usize::from(i)]).collect();
        let data = write_synced(&recs, &[5], false);
        let n = data.len();
        for at in [3, 400, n / 2, n - 600, n - 1] {
            let mut bad = data.clone();
            bad[at] ^= 0x01;
            assert!(durable_damage(bad), "flip at {at}");
        }
        // Torn: the file cut short anywhere, or any one sector of the tail never written.
        for cut in [n - 1, n - 500, n - 1500, n / 2] {
            assert!(!durable_damage(data[..cut].to_vec()), "cut at {cut}");
        }
        for sector in (0..n).step_by(512) {
            let mut torn = data.clone();
            torn[sector..(sector + 512).min(n)].fill(0);
            assert!(!durable_damage(torn), "sector at {sector} unwritten");
        }
    }

    /// A writer whose write failed writes nothing more, not even the seal's mark: a failed write may have left
    /// part of its bytes, and a later write at the same offset would cover only some of them, leaving damage that
    /// reads as corruption rather than as a torn tail.
    #[test]
    fn a_writer_stops_after_a_failed_write() {
        use vfs::{Fault, FaultFs, FaultKind};
        let fs = FaultFs::new(Arc::new(MemFs::new()));
        let f = fs.open(Path::new("log"), OpenMode::CreateNew).unwrap();
        let mut w = LogWriter::new(f, 0);
        w.add_record(&[1u8; 100]).unwrap();
        w.sync().unwrap();
        fs.inject(Fault::after(vfs::Op::Write, 0, FaultKind::Eio).partial());
        assert!(w.add_record(&[2u8; 3000]).is_err());
        assert!(w.failed());
        fs.clear_all();
        // Refused, with the first error's kind, so callers classify it the same way.
        for refused in [w.add_record(&[3u8; 10]), w.sync()] {
            assert!(matches!(refused, Err(Error::Io(e)) if vfs::is_eio(&e)));
        }
        w.seal().unwrap();
        let data = vfs::read_all(&fs, Path::new("log")).unwrap();
        let (got, dropped) = read(data.clone());
        assert_eq!((got, dropped), (vec![vec![1u8; 100]], true));
        assert!(!durable_damage(data));
    }

    /// After a failed write the log is cut back to the last record written whole; after a failed sync, to what
    /// the last successful sync covered (the pages in between may never reach the media). Either way the log
    /// then reads to its end with no damaged tail, as a log followed by a newer one must.
    #[test]
    fn cutting_a_failed_log_leaves_only_the_records_it_can_vouch_for() {
        use vfs::{Fault, FaultFs, FaultKind};
        for sync_fails in [false, true] {
            let fs = FaultFs::new(Arc::new(MemFs::new()));
            let f = fs.open(Path::new("log"), OpenMode::CreateNew).unwrap();
            let mut w = LogWriter::new(f, 0);
            w.add_record(&[1u8; 100]).unwrap();
            w.sync().unwrap();
            // Unsynced, but written whole.
            w.add_record(&[2u8; 40_000]).unwrap();
            if sync_fails {
                fs.inject(Fault::after(vfs::Op::Sync, 0, FaultKind::Eio));
                assert!(w.sync().is_err());
            } else {
                fs.inject(Fault::after(vfs::Op::Write, 0, FaultKind::NoSpace).partial());
                assert!(w.add_record(&[3u8; 3000]).is_err());
            }
            fs.clear_all();
            let len = w.cut_failed_tail().unwrap();
            assert!(w.failed(), "a cut writer stays retired");
            let data = vfs::read_all(&fs, Path::new("log")).unwrap();
            assert_eq!(data.len() as u64, len);
            let (got, dropped) = read(data);
            let want =
                if sync_fails { vec![vec![1u8; 100]] } else { vec![vec![1u8; 100], vec![2u8; 40_000]] };
            assert_eq!((got, dropped), (want, false), "sync fails: {sync_fails}");
        }
    }

    /// A cut whose own sync fails falls back, at the next try, to what the last successful sync covered.
    #[test]
    fn a_cut_whose_sync_fails_cuts_to_the_synced_records_next_time() {
        use vfs::{Fault, FaultFs, FaultKind};
        let fs = FaultFs::new(Arc::new(MemFs::new()));
        let f = fs.open(Path::new("log"), OpenMode::CreateNew).unwrap();
        let mut w = LogWriter::new(f, 0);
        w.add_record(&[1u8; 10]).unwrap();
        w.sync().unwrap();
        w.add_record(&[2u8; 10]).unwrap();
        fs.inject(Fault::after(vfs::Op::Write, 0, FaultKind::Eio));
        assert!(w.add_record(&[3u8; 10]).is_err());
        fs.inject(Fault::after(vfs::Op::Sync, 0, FaultKind::Eio));
        assert!(w.cut_failed_tail().is_err());
        fs.clear_all();
        w.cut_failed_tail().unwrap();
        let (got, dropped) = read(vfs::read_all(&fs, Path::new("log")).unwrap());
        assert_eq!((got, dropped), (vec![vec![1u8; 10]], false));
    }

    /// A mark is a record an older reader cannot decode, so it stops with an error instead of reading the mark
    /// as a torn tail and dropping the rest: neither a write batch nor a MANIFEST edit decodes from it.
    #[test]
    fn a_sync_mark_is_no_write_batch_and_no_edit() {
        let mut m = Vec::new();
        push_mark(&mut m, 12345);
        let payload = &m[HEADER_SIZE..];
        assert_eq!(mark_of(payload), Some(12345));
        assert!(crate::WriteBatch::from_data(payload, "log").is_err());
        assert!(crate::edit::VersionEdit::decode(payload).is_err());
    }

    /// One development build wrote marks as fragments of type 5 with an 8-byte payload; format tags are
    /// permanent, so they still read as marks.
    #[test]
    fn legacy_type_5_marks_still_read_as_marks() {
        let legacy = |durable: u64| {
            let payload = durable.to_le_bytes();
            let mut m = masked_crc2(&[LEGACY_MARK], &payload).to_le_bytes().to_vec();
            m.extend_from_slice(&8u16.to_le_bytes());
            m.push(LEGACY_MARK);
            m.extend_from_slice(&payload);
            m
        };
        let r1 = write(&[vec![1u8; 100]]);
        let r2 = write(&[vec![2u8; 50]]);
        let data = [r1.clone(), legacy(r1.len() as u64), r2.clone()].concat();
        assert_eq!(read(data.clone()), (vec![vec![1u8; 100], vec![2u8; 50]], false));
        let mut bad = data;
        bad[20] ^= 1;
        assert!(durable_damage(bad));
    }

    #[test]
    fn writer_resumes_at_offset_mid_block() {
        let fs = MemFs::new();
        let f = fs.open(Path::new("log"), OpenMode::CreateNew).unwrap();
        let mut w = LogWriter::new(f.clone(), 0);
        w.add_record(&[9u8; 40_000]).unwrap();
        let mut w2 = LogWriter::new(f, w.len());
        w2.add_record(b"next").unwrap();
        let (got, dropped) = read(vfs::read_all(&fs, Path::new("log")).unwrap());
        assert_eq!(got, vec![vec![9u8; 40_000], b"next".to_vec()]);
        assert!(!dropped);
    }
}
