//! The journal: where a write is persisted before it is acknowledged as durable (§2.1 step 2).
//!
//! Every WRITE, TRIM and WRITE_ZEROES appends one checksummed record; FLUSH and FUA `sync_data` the journal, which
//! makes every earlier record durable too. Records carry a sequence number that increases with every record
//! over the volume's life (by one, except where an older version resumed after records it skipped at open). Once every batch is durable in a data file, the journal is *rewound*: new
//! records overwrite the file from offset 0 and the old ones beyond stay in the file. Truncating instead cost a
//! page-cache invalidation and a fresh block allocation for every record of the next 32 MiB (about a tenth of a
//! sequential write stream's time); rewinding writes into pages the file already has, and `sync_data` of a file
//! whose size does not change writes no metadata.
//!
//! Replay reads from offset 0 and stops at the first record that is short, fails its CRC, or whose seq is not
//! larger than its predecessor's. Records left from before a rewind have smaller seqs than any written after it,
//! so the chain ends where the new records end, even when old record boundaries line up with new ones. (A gap is
//! accepted: journals written before the rewind existed can hold one where a reopened volume resumed at the last
//! batch's `journal_seq` after a torn tail; this version empties the journal at open instead.) Records
//! whose seq is at most the last batch's `journal_seq` are skipped (they are in a data file already). At open the
//! file is cut at the end of the chain (the torn tail of an unsynced append, never acknowledged, must not be
//! revived by a later record landing on its boundary), and emptied when every record in it was skipped, so the
//! next record continues the chain.

use std::sync::Arc;

use vfs::File;

use crate::format::{JREC_BODY_FIXED, JREC_HEADER_LEN, crc, u32_at, u64_at};
use crate::{BLOCK_SIZE, Result};

/// What a journal record does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JournalOp {
    /// Blocks `first..` now hold `data` (whole blocks).
    Write {
        /// First block.
        first: u64,
        /// The blocks' bytes.
        data: Vec<u8>,
    },
    /// Blocks `first..first+blocks` read as zeros.
    Delete {
        /// First block.
        first: u64,
        /// Block count.
        blocks: u32,
    },
}

/// An open journal file.
#[derive(Debug)]
pub struct Journal {
    file: Arc<dyn File>,
    len: u64,
    synced_len: u64,
    records: u64,
    appended: u64,
    /// The record being appended, reused so an append neither allocates nor copies the data twice.
    buf: Vec<u8>,
}

impl Journal {
    /// Opens `file`, returns the valid records (seq, op) in order, and cuts off a torn tail durably (unless
    /// `read_only`).
    pub fn open(file: Arc<dyn File>, read_only: bool) -> Result<(Journal, Vec<(u64, JournalOp)>)> {
        let total = file.len()?;
        let mut bytes =
            vec![0u8; usize::try_from(total).map_err(|_| std::io::Error::other("journal too big"))?];
        file.read_exact_at(&mut bytes, 0)?;
        let mut at = 0usize;
        let mut out: Vec<(u64, JournalOp)> = Vec::new();
        while let Some((seq, op, next)) = decode_record(&bytes, at) {
            if out.last().is_some_and(|&(prev, _)| seq <= prev) {
                break;
            }
            out.push((seq, op));
            at = next;
        }
        if at as u64 != total && !read_only {
            file.set_len(at as u64)?;
            file.sync_data()?;
        }
        let records = out.len() as u64;
        Ok((
            Journal { file, len: at as u64, synced_len: at as u64, records, appended: 0, buf: Vec::new() },
            out,
        ))
    }

    /// Appends a record of `data` written at block `first` (not yet durable). REQUIRES: `data` is whole blocks,
    /// at least one.
    pub fn append_write(&mut self, seq: u64, first: u64, data: &[u8]) -> Result<()> {
        self.buf.clear();
        encode_into(seq, 1, first, (data.len() / BLOCK_SIZE) as u32, data, &mut self.buf);
        self.write_buf()
    }

    /// Appends a record of a delete of `blocks` blocks from `first` (not yet durable).
    pub fn append_delete(&mut self, seq: u64, first: u64, blocks: u32) -> Result<()> {
        self.buf.clear();
        encode_into(seq, 2, first, blocks, &[], &mut self.buf);
        self.write_buf()
    }

    fn write_buf(&mut self) -> Result<()> {
        self.file.write_all_at(&self.buf, self.len)?;
        self.len += self.buf.len() as u64;
        self.records += 1;
        self.appended += self.buf.len() as u64;
        Ok(())
    }

    /// Makes every appended record durable.
    pub fn sync(&mut self) -> Result<()> {
        if self.synced_len != self.len {
            self.file.sync_data()?;
            self.synced_len = self.len;
        }
        Ok(())
    }

    /// Drops every record: their effects are durable in a data file now. The file is rewound, not truncated
    /// (see the module comment): the next record is written at offset 0 and the old bytes beyond stay until
    /// overwritten; replay ends the chain where the seqs stop increasing.
    /// REQUIRES: the next record's seq is one more than the last one appended.
    pub fn rewind(&mut self) {
        self.len = 0;
        self.records = 0;
        self.synced_len = 0;
    }

    /// Empties the file durably (at open, when every record in it is already in a data file, so the next record
    /// starts a new chain at offset 0).
    pub fn truncate(&mut self) -> Result<()> {
        self.file.set_len(0)?;
        self.file.sync_data()?;
        self.rewind();
        Ok(())
    }

    /// Bytes appended since open.
    pub fn appended(&self) -> u64 {
        self.appended
    }

    /// Records in the journal (including ones already in a data file that replay will skip).
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Bytes of records in the journal.
    pub fn len(&self) -> u64 {
        self.len
    }
}

/// Encodes one record: crc32c(body_len ‖ body), body_len, body.
pub fn encode_record(seq: u64, op: &JournalOp) -> Vec<u8> {
    let mut b = Vec::new();
    match op {
        JournalOp::Write { first, data } => {
            encode_into(seq, 1, *first, (data.len() / BLOCK_SIZE) as u32, data, &mut b)
        }
        JournalOp::Delete { first, blocks } => encode_into(seq, 2, *first, *blocks, &[], &mut b),
    }
    b
}

fn encode_into(seq: u64, kind: u8, first: u64, blocks: u32, data: &[u8], b: &mut Vec<u8>) {
    let body_len = (JREC_BODY_FIXED + data.len()) as u32;
    b.reserve(JREC_HEADER_LEN + body_len as usize);
    let start = b.len();
    b.extend_from_slice(&[0u8; 4]);
    b.extend_from_slice(&body_len.to_le_bytes());
    b.extend_from_slice(&seq.to_le_bytes());
    b.extend_from_slice(&[kind, 0, 0, 0]);
    b.extend_from_slice(&first.to_le_bytes());
    b.extend_from_slice(&blocks.to_le_bytes());
    b.extend_from_slice(data);
    let c = crc(&[&b[start + 4..]]);
    b[start..start + 4].copy_from_slice(&c.to_le_bytes());
}

/// Decodes the record at `at`: `(seq, op, next offset)`, or `None` at the end of the valid prefix.
pub fn decode_record(b: &[u8], at: usize) -> Option<(u64, JournalOp, usize)> {
    let hdr = b.get(at..at + JREC_HEADER_LEN)?;
    let body_len = u32_at(hdr, 4) as usize;
    if body_len < JREC_BODY_FIXED {
        return None;
    }
    let body = b.get(at + JREC_HEADER_LEN..at + JREC_HEADER_LEN + body_len)?;
    if crc(&[&hdr[4..], body]) != u32_at(hdr, 0) {
        return None;
    }
    let seq = u64_at(body, 0);
    let first = u64_at(body, 12);
    let blocks = u32_at(body, 20);
    let data = &body[JREC_BODY_FIXED..];
    let op = match body[8] {
        1 if data.len() == blocks as usize * BLOCK_SIZE && blocks > 0 => {
            JournalOp::Write { first, data: data.to_vec() }
        }
        2 if data.is_empty() && blocks > 0 => JournalOp::Delete { first, blocks },
        _ => return None,
    };
    Some((seq, op, at + JREC_HEADER_LEN + body_len))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After a rewind, new records overwrite the file from offset 0; old records beyond them, even on a record
    /// boundary, have smaller seqs and end the chain.
    #[test]
    fn a_rewound_journal_ignores_the_records_left_beyond_the_new_ones() {
        let data = vec![7u8; BLOCK_SIZE];
        let old: Vec<u8> = (5..9)
            .flat_map(|s| encode_record(s, &JournalOp::Write { first: s, data: data.clone() }))
            .collect();
        let new: Vec<u8> = (20..22)
            .flat_map(|s| encode_record(s, &JournalOp::Write { first: s, data: data.clone() }))
            .collect();
        let mut file = old.clone();
        file[..new.len()].copy_from_slice(&new);
        let fs = vfs::MemFs::new();
        let f = vfs::Fs::open(&fs, std::path::Path::new("/j"), vfs::OpenMode::CreateTruncate).unwrap();
        f.write_all_at(&file, 0).unwrap();
        let (mut j, records) = Journal::open(f.clone(), false).unwrap();
        assert_eq!(records.iter().map(|r| r.0).collect::<Vec<_>>(), vec![20, 21]);
        assert_eq!(j.len(), new.len() as u64);
        assert_eq!(f.len().unwrap(), new.len() as u64, "cut at the end of the chain");
        // Rewinding keeps the file; the next chain starts at 0.
        j.rewind();
        j.append_write(22, 1, &data).unwrap();
        assert_eq!(f.len().unwrap(), new.len() as u64);
        let (_, records) = Journal::open(f, true).unwrap();
        assert_eq!(records.iter().map(|r| r.0).collect::<Vec<_>>(), vec![22]);
    }

    /// A journal from before rewinding existed may skip seqs where a reopened volume resumed after records it
    /// skipped; replay keeps going across the gap (the records after it may be acknowledged writes).
    #[test]
    fn a_gap_in_the_seqs_does_not_end_replay() {
        let data = vec![7u8; BLOCK_SIZE];
        let file: Vec<u8> = [1u64, 2, 5, 6]
            .iter()
            .flat_map(|&s| encode_record(s, &JournalOp::Write { first: s, data: data.clone() }))
            .collect();
        let fs = vfs::MemFs::new();
        let f = vfs::Fs::open(&fs, std::path::Path::new("/j"), vfs::OpenMode::CreateTruncate).unwrap();
        f.write_all_at(&file, 0).unwrap();
        let (_, records) = Journal::open(f, true).unwrap();
        assert_eq!(records.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2, 5, 6]);
    }

    #[test]
    fn records_round_trip_and_a_torn_tail_ends_replay() {
        let a = encode_record(7, &JournalOp::Write { first: 3, data: vec![9u8; BLOCK_SIZE * 2] });
        let b = encode_record(8, &JournalOp::Delete { first: 1, blocks: 5 });
        let mut all = [a.clone(), b.clone()].concat();
        let (s, op, next) = decode_record(&all, 0).unwrap();
        assert_eq!((s, next), (7, a.len()));
        assert!(matches!(op, JournalOp::Write { first: 3, .. }));
        assert_eq!(decode_record(&all, next).unwrap().1, JournalOp::Delete { first: 1, blocks: 5 });
        all.truncate(all.len() - 1);
        assert!(decode_record(&all, next).is_none());
        all[20] ^= 0x40;
        assert!(decode_record(&all, 0).is_none());
    }
}
