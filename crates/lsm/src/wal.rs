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

use std::sync::Arc;

use crate::coding::{le_u32, masked_crc2};
use crate::error::{Error, Result};

/// Log block size.
pub const BLOCK_SIZE: usize = 32 * 1024;
/// Fragment header size.
pub const HEADER_SIZE: usize = 7;

const FULL: u8 = 1;
const FIRST: u8 = 2;
const MIDDLE: u8 = 3;
const LAST: u8 = 4;

/// Appends records to a log file.
#[derive(Debug)]
pub struct LogWriter {
    file: Arc<dyn vfs::File>,
    /// Bytes written so far (the append offset).
    offset: u64,
    /// Offset within the current block.
    block_off: usize,
    buf: Vec<u8>,
}

impl LogWriter {
    /// A writer appending to `file`, which already holds `offset` bytes of log.
    pub fn new(file: Arc<dyn vfs::File>, offset: u64) -> Self {
        LogWriter { file, offset, block_off: (offset % BLOCK_SIZE as u64) as usize, buf: Vec::new() }
    }

    /// Bytes in the log.
    pub fn len(&self) -> u64 {
        self.offset
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.offset == 0
    }

    /// Appends one record (not durable until [`LogWriter::sync`]).
    pub fn add_record(&mut self, rec: &[u8]) -> Result<()> {
        self.buf.clear();
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
        self.file.write_all_at(&self.buf, self.offset)?;
        self.offset += self.buf.len() as u64;
        Ok(())
    }

    /// Makes everything appended durable.
    pub fn sync(&self) -> Result<()> {
        Ok(self.file.sync_data()?)
    }
}

/// Reads records back from a whole log image.
#[derive(Debug)]
pub struct LogReader {
    data: Vec<u8>,
    pos: usize,
    name: String,
    tail_dropped: Option<String>,
    rec: Vec<u8>,
}

impl LogReader {
    /// Reads the whole file `name` into memory.
    pub fn open(fs: &dyn vfs::Fs, path: &std::path::Path, name: &str) -> Result<Self> {
        Ok(Self::from_bytes(vfs::read_all(fs, path)?, name))
    }

    /// A reader over a log image.
    pub fn from_bytes(data: Vec<u8>, name: &str) -> Self {
        LogReader { data, pos: 0, name: name.to_string(), tail_dropped: None, rec: Vec::new() }
    }

    /// If reading stopped at a damaged fragment rather than the clean end, why.
    pub fn tail_dropped(&self) -> Option<&str> {
        self.tail_dropped.as_deref()
    }

    /// The offset just past the last complete record returned.
    pub fn offset(&self) -> usize {
        self.pos
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
                return self.damaged(pos, "short fragment header");
            };
            let crc = le_u32(hdr, 0).unwrap_or(0);
            let len = usize::from(u16::from_le_bytes([hdr[4], hdr[5]]));
            let ty = hdr[6];
            if ty == 0 && len == 0 && crc == 0 {
                // Zero padding: preallocated or never-written space. Anything after it is not part of the log.
                if in_record || self.data[pos..].iter().any(|&b| b != 0) {
                    return self.damaged(pos, "zeroed fragment followed by data");
                }
                return None;
            }
            let start = pos + HEADER_SIZE;
            if start + len > self.data.len() || len > BLOCK_SIZE - pos % BLOCK_SIZE - HEADER_SIZE {
                return self.damaged(pos, "fragment extends past its block or the file");
            }
            let payload = &self.data[start..start + len];
            if masked_crc2(&[ty], payload) != crc {
                return self.damaged(pos, "fragment checksum mismatch");
            }
            pos = start + len;
            match (ty, in_record) {
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
                _ => return self.damaged(pos, "fragment type out of sequence"),
            }
        }
    }

    fn damaged(&mut self, at: usize, why: &str) -> Option<&[u8]> {
        self.tail_dropped = Some(format!("{} at offset {at}: {why}", self.name));
        None
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
