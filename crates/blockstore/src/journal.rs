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
//!
//! Sync marks tell a torn tail from damaged synced records. After a sync, the next append starts with a *sync
//! mark* (kind 3) carrying the offset through which the sync made the chain durable and, as its seq, the seq of
//! the last record before it. When the chain ends at a record that fails its checks, replay looks further for a
//! valid mark with a larger seq than the last good record's (so it belongs to this chain, not to records left
//! from before a rewind) naming an offset beyond the bad record: then that record had been synced, and replay
//! reports corruption rather than cutting off the acknowledged writes after it. Without such a mark the end is a
//! torn append, as before (unsynced sectors persist in any mix, so later valid records prove nothing).

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
    /// The seq of the last record in the chain (the seq a sync mark carries).
    last_seq: u64,
    /// The chain offset the last sync mark written names (`synced_len` is what the next one would name).
    marked: u64,
    /// A sync of the file failed: the kernel may have dropped the pages it could not write while reads still see
    /// them, so what this file appears to hold can no longer be trusted without a reopen after a power cycle.
    sync_failed: bool,
}

/// Record kind of a sync mark: `first` holds the durable offset, `blocks` is 0, no data.
const KIND_SYNC_MARK: u8 = 3;

impl Journal {
    /// Opens `file`, returns the valid records (seq, op) in order, and cuts off a torn tail durably (unless
    /// `read_only`). `in_data_files` is the largest seq already in a data file: damage among such records loses
    /// nothing, so only marks with larger seqs can make a damaged record corruption.
    pub fn open(
        file: Arc<dyn File>,
        read_only: bool,
        in_data_files: u64,
    ) -> Result<(Journal, Vec<(u64, JournalOp)>)> {
        let total = file.len()?;
        let mut bytes =
            vec![0u8; usize::try_from(total).map_err(|_| std::io::Error::other("journal too big"))?];
        file.read_exact_at(&mut bytes, 0)?;
        let mut at = 0usize;
        let mut out: Vec<(u64, JournalOp)> = Vec::new();
        loop {
            let prev = out.last().map(|r| r.0);
            if let Some((seq, op, next)) = decode_record(&bytes, at) {
                if prev.is_some_and(|p| seq <= p) {
                    break;
                }
                out.push((seq, op));
                at = next;
            } else if let Some((seq, _, next)) = decode_mark(&bytes, at)
                && prev == Some(seq)
            {
                at = next;
            } else {
                break;
            }
        }
        let last = out.last().map_or(in_data_files, |r| r.0.max(in_data_files));
        if at as u64 != total
            && let Some(durable) = durable_beyond(&bytes, at, last)
        {
            return Err(crate::Error::Corruption(format!(
                "journal record at offset {at} is damaged, but a later sync mark shows it was durable (through \
                 {durable})"
            )));
        }
        if at as u64 != total && !read_only {
            file.set_len(at as u64)?;
            file.sync_data()?;
        }
        let records = out.len() as u64;
        let last_seq = out.last().map_or(0, |r| r.0);
        let j = Journal {
            file,
            len: at as u64,
            synced_len: at as u64,
            records,
            appended: 0,
            buf: Vec::new(),
            last_seq,
            // What replay read is durable, but no mark is owed for it: nothing damaged can precede it now.
            marked: at as u64,
            sync_failed: false,
        };
        Ok((j, out))
    }

    /// Appends a record of `data` written at block `first` (not yet durable). REQUIRES: `data` is whole blocks,
    /// at least one.
    pub fn append_write(&mut self, seq: u64, first: u64, data: &[u8]) -> Result<()> {
        let mark = self.start_buf();
        encode_into(seq, 1, first, (data.len() / BLOCK_SIZE) as u32, data, &mut self.buf);
        self.write_buf(seq, mark)
    }

    /// Appends a record of a delete of `blocks` blocks from `first` (not yet durable).
    pub fn append_delete(&mut self, seq: u64, first: u64, blocks: u32) -> Result<()> {
        let mark = self.start_buf();
        encode_into(seq, 2, first, blocks, &[], &mut self.buf);
        self.write_buf(seq, mark)
    }

    /// Clears the buffer and, after a sync since the last mark, starts it with a mark; returns whether it did.
    fn start_buf(&mut self) -> bool {
        self.buf.clear();
        let mark = self.synced_len > self.marked && self.len > 0;
        if mark {
            encode_into(self.last_seq, KIND_SYNC_MARK, self.synced_len, 0, &[], &mut self.buf);
        }
        mark
    }

    fn write_buf(&mut self, seq: u64, mark: bool) -> Result<()> {
        self.file.write_all_at(&self.buf, self.len)?;
        self.len += self.buf.len() as u64;
        self.records += 1;
        self.appended += self.buf.len() as u64;
        self.last_seq = seq;
        if mark {
            self.marked = self.synced_len;
        }
        Ok(())
    }

    /// Makes every appended record durable.
    pub fn sync(&mut self) -> Result<()> {
        if self.synced_len != self.len {
            self.sync_file()?;
            self.synced_len = self.len;
        }
        Ok(())
    }

    fn sync_file(&mut self) -> Result<()> {
        let r = self.file.sync_data();
        self.sync_failed |= r.is_err();
        Ok(r?)
    }

    /// Whether a sync of the journal failed since open.
    pub fn sync_failed(&self) -> bool {
        self.sync_failed
    }

    /// Drops every record: their effects are durable in a data file now. The file is rewound, not truncated
    /// (see the module comment): the next record is written at offset 0 and the old bytes beyond stay until
    /// overwritten; replay ends the chain where the seqs stop increasing.
    /// REQUIRES: the next record's seq is one more than the last one appended.
    pub fn rewind(&mut self) {
        self.len = 0;
        self.records = 0;
        self.synced_len = 0;
        self.marked = 0;
    }

    /// Empties the file durably (at open, when every record in it is already in a data file, so the next record
    /// starts a new chain at offset 0).
    pub fn truncate(&mut self) -> Result<()> {
        self.file.set_len(0)?;
        self.sync_file()?;
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

/// Decodes a sync mark at `at`: `(seq, durable offset, next offset)`, or `None` if no valid mark is there.
fn decode_mark(b: &[u8], at: usize) -> Option<(u64, u64, usize)> {
    let hdr = b.get(at..at + JREC_HEADER_LEN)?;
    if u32_at(hdr, 4) as usize != JREC_BODY_FIXED {
        return None;
    }
    let body = b.get(at + JREC_HEADER_LEN..at + JREC_HEADER_LEN + JREC_BODY_FIXED)?;
    if body[8] != KIND_SYNC_MARK || u32_at(body, 20) != 0 || crc(&[&hdr[4..], body]) != u32_at(hdr, 0) {
        return None;
    }
    Some((u64_at(body, 0), u64_at(body, 12), at + JREC_HEADER_LEN + JREC_BODY_FIXED))
}

/// The durable offset named by a valid sync mark after `at` that belongs to the chain ending with seq `last`
/// (its seq is larger; records left from before a rewind have smaller ones) and lies beyond `at`. Looked for at
/// every byte, since the damage hides where records start; a false match needs a CRC32C to agree.
fn durable_beyond(b: &[u8], at: usize, last: u64) -> Option<u64> {
    (at + 1..b.len())
        .filter_map(|p| decode_mark(b, p))
        .find(|&(seq, durable, _)| seq > last && durable > at as u64)
        .map(|(_, durable, _)| durable)
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
        let (mut j, records) = Journal::open(f.clone(), false, 0).unwrap();
        assert_eq!(records.iter().map(|r| r.0).collect::<Vec<_>>(), vec![20, 21]);
        assert_eq!(j.len(), new.len() as u64);
        assert_eq!(f.len().unwrap(), new.len() as u64, "cut at the end of the chain");
        // Rewinding keeps the file; the next chain starts at 0.
        j.rewind();
        j.append_write(22, 1, &data).unwrap();
        assert_eq!(f.len().unwrap(), new.len() as u64);
        let (_, records) = Journal::open(f, true, 0).unwrap();
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
        let (_, records) = Journal::open(f, true, 0).unwrap();
        assert_eq!(records.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2, 5, 6]);
    }

    fn journal_file() -> Arc<dyn File> {
        let fs = vfs::MemFs::new();
        vfs::Fs::open(&fs, std::path::Path::new("/j"), vfs::OpenMode::CreateTruncate).unwrap()
    }

    fn with_flip(f: &Arc<dyn File>, at: u64) -> Arc<dyn File> {
        let mut b = vec![0u8; f.len().unwrap() as usize];
        f.read_exact_at(&mut b, 0).unwrap();
        b[at as usize] ^= 0x20;
        let g = journal_file();
        g.write_all_at(&b, 0).unwrap();
        g
    }

    /// A bit flip in a synced journal record ended the chain there, and open cut the file: every acknowledged
    /// write after it was gone without an error.
    #[test]
    fn regression_damage_before_a_later_sync_mark_is_corruption() {
        let f = journal_file();
        let (mut j, _) = Journal::open(f.clone(), false, 0).unwrap();
        let data = vec![5u8; BLOCK_SIZE];
        j.append_write(1, 0, &data).unwrap();
        j.append_write(2, 1, &data).unwrap();
        j.sync().unwrap();
        let synced = j.len();
        j.append_delete(3, 0, 1).unwrap(); // preceded by a mark naming `synced`
        j.append_write(4, 2, &data).unwrap();
        let (_, all) = Journal::open(f.clone(), true, 0).unwrap();
        assert_eq!(all.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2, 3, 4], "marks are not records");
        for at in [3, 100, synced - 10] {
            let e = Journal::open(with_flip(&f, at), false, 0).unwrap_err();
            assert!(matches!(e, crate::Error::Corruption(_)), "flip at {at}: {e}");
        }
        // Record 4 was never synced: damage there is a torn tail, cut off as before.
        let torn = with_flip(&f, f.len().unwrap() - 10);
        let (j, recs) = Journal::open(torn.clone(), false, 0).unwrap();
        assert_eq!(recs.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(torn.len().unwrap(), j.len());
        // Records already in a data file: their damage loses nothing, so it is no corruption.
        let (_, recs) = Journal::open(with_flip(&f, 100), true, 4).unwrap();
        assert!(recs.is_empty());
    }

    /// Marks left beyond a rewound chain's end belong to the old chain (smaller seqs): damage in the new chain's
    /// unsynced records is still a torn tail.
    #[test]
    fn marks_of_records_before_a_rewind_do_not_make_a_torn_tail_corruption() {
        let f = journal_file();
        let (mut j, _) = Journal::open(f.clone(), false, 0).unwrap();
        let data = vec![5u8; BLOCK_SIZE];
        for seq in 1..=6 {
            j.append_write(seq, seq, &data).unwrap();
            j.sync().unwrap();
        }
        j.rewind();
        j.append_delete(7, 0, 1).unwrap();
        j.append_write(8, 0, &data).unwrap();
        let first = encode_record(7, &JournalOp::Delete { first: 0, blocks: 1 }).len() as u64;
        // Record 8 (unsynced) torn; old marks (seqs up to 5) lie beyond it.
        let (_, recs) = Journal::open(with_flip(&f, first + 20), true, 6).unwrap();
        assert_eq!(recs.iter().map(|r| r.0).collect::<Vec<_>>(), vec![7]);
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
