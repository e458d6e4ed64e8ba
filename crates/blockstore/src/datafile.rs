//! Append-only data files: batches of CW-aligned compression units (§2.1 step 5, §3.2).
//!
//! A segment-cache flush appends one *batch* to the volume's current data file: a header with the batch's index
//! operations (deletes, then one put per CW) followed by the units. The units are written and synced first, the
//! header after them and synced again, so a header that passes its CRC proves its units are durable; recovery
//! scans headers forward and cuts a torn last batch off. A data file is sealed once it passes
//! `Options::data_file_bytes` and a new one is started.
//!
//! Units (§3.2, "CU alignment"): a CW longer than four blocks is compressed whole as one unit (cut at
//! `max_unit_blocks`); shorter CWs are packed, in address order, into units of at most four blocks, the paper's
//! 4-block compression unit that keeps small writes' compression ratio. Each unit is LZ4-compressed on its own
//! and checksummed, so a read decompresses only the units it touches.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use vfs::{File, Fs, OpenMode};

use crate::cache::Cw;
use crate::format::{
    BATCH_HEADER_LEN, BatchHeader, BatchOp, OP_LEN, UNIT_HEADER_LEN, decode_unit, encode_unit,
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

/// The data files of one volume.
#[derive(Debug)]
pub struct DataFiles {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    files: BTreeMap<u32, Arc<dyn File>>,
    current: u32,
    current_len: u64,
    next_seq: u64,
}

/// The file name of data file `n`.
pub fn data_file_name(n: u32) -> String {
    format!("data-{n:08}.dat")
}

fn parse_name(name: &str) -> Option<u32> {
    name.strip_prefix("data-")?.strip_suffix(".dat")?.parse().ok()
}

impl DataFiles {
    /// Opens every data file in `dir`, returning the batches in order. A torn batch at the end of the newest
    /// file is cut off; an invalid batch anywhere else is corruption.
    pub fn open(fs: Arc<dyn Fs>, dir: &Path) -> Result<(DataFiles, Vec<RecoveredBatch>)> {
        let mut ids: Vec<u32> = fs.list_dir(dir)?.iter().filter_map(|n| parse_name(n)).collect();
        ids.sort_unstable();
        let mut files = BTreeMap::new();
        let mut batches = Vec::new();
        let mut current_len = 0;
        let mut last_seq = 0;
        for (i, &id) in ids.iter().enumerate() {
            let f = fs.open(&vfs::join(dir, &data_file_name(id)), OpenMode::ReadWrite)?;
            let len = f.len()?;
            let mut pos = 0u64;
            while pos < len {
                match read_batch(f.as_ref(), pos, len)? {
                    Some((header, ops, next)) => {
                        if header.seq <= last_seq {
                            return Err(Error::Corruption(format!(
                                "data file {id}: batch sequence {} after {last_seq}",
                                header.seq
                            )));
                        }
                        last_seq = header.seq;
                        batches.push(RecoveredBatch { file: id, header, ops });
                        pos = next;
                    }
                    None if i + 1 == ids.len() => {
                        f.set_len(pos)?;
                        f.sync_data()?;
                        break;
                    }
                    None => {
                        return Err(Error::Corruption(format!(
                            "data file {id}: invalid batch at offset {pos}"
                        )));
                    }
                }
            }
            current_len = pos;
            files.insert(id, f);
        }
        let current = ids.last().copied().unwrap_or(0);
        Ok((
            DataFiles { fs, dir: dir.to_path_buf(), files, current, current_len, next_seq: last_seq + 1 },
            batches,
        ))
    }

    /// Appends one batch holding `deletes` and the units of `cws` (address order), durably. Returns the data file
    /// and the ops written (the puts carry the units' locations).
    pub fn append_batch(
        &mut self,
        journal_seq: u64,
        deletes: &[(u64, u64)],
        cws: &[Cw],
        data_file_bytes: u64,
    ) -> Result<(u32, Vec<BatchOp>)> {
        if self.current == 0 || self.current_len >= data_file_bytes {
            let id = self.current + 1;
            let f = self.fs.open(&vfs::join(&self.dir, &data_file_name(id)), OpenMode::CreateNew)?;
            self.fs.sync_dir(&self.dir)?;
            self.files.insert(id, f);
            self.current = id;
            self.current_len = 0;
        }
        let base = self.current_len;
        let n_ops = deletes.len() + cws.len();
        let units_start = base + (BATCH_HEADER_LEN + n_ops * OP_LEN) as u64;
        let mut ops: Vec<BatchOp> =
            deletes.iter().map(|&(first, blocks)| BatchOp::Delete { first, blocks }).collect();
        let mut units = Vec::new();
        let mut i = 0;
        while i < cws.len() {
            // A long CW is its own unit; a run of short CWs shares 4-block units.
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
            let raw: Vec<u8> = cws[i..j].iter().flat_map(|c| c.data.iter().copied()).collect();
            let unit_offset = units_start + units.len() as u64;
            let before = units.len();
            encode_unit(&raw, &mut units);
            let stored_len = (units.len() - before - UNIT_HEADER_LEN) as u32;
            let unit_blocks = (raw.len() / BLOCK_SIZE) as u32;
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
        let header = BatchHeader {
            seq: self.next_seq,
            journal_seq,
            ops: ops.len() as u32,
            units_len: units.len() as u64,
        };
        let head = header.encode(&ops);
        let f = self.file(self.current)?;
        f.write_all_at(&units, units_start)?;
        f.sync_data()?;
        f.write_all_at(&head, base)?;
        f.sync_data()?;
        self.next_seq += 1;
        self.current_len = units_start + units.len() as u64;
        Ok((self.current, ops))
    }

    /// Reads, verifies and decompresses the unit at `loc`.
    pub fn read_unit(&self, loc: &Location) -> Result<Vec<u8>> {
        let f = self.file(loc.file)?;
        let mut b = vec![0u8; loc.unit_bytes() as usize];
        f.read_exact_at(&mut b, loc.unit_offset).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::Corruption(format!("unit at {}:{} runs past the file", loc.file, loc.unit_offset))
            } else {
                Error::Io(e)
            }
        })?;
        decode_unit(&b, loc.unit_blocks as usize * BLOCK_SIZE)
    }

    /// Data files and their lengths in bytes.
    pub fn sizes(&self) -> Result<Vec<(u32, u64)>> {
        self.files.iter().map(|(id, f)| Ok((*id, f.len()?))).collect()
    }

    fn file(&self, id: u32) -> Result<&Arc<dyn File>> {
        self.files.get(&id).ok_or_else(|| Error::Corruption(format!("index names missing data file {id}")))
    }
}

/// Reads the batch at `pos` of a file of `len` bytes: `None` when it is not a complete valid batch.
fn read_batch(f: &dyn File, pos: u64, len: u64) -> Result<Option<(BatchHeader, Vec<BatchOp>, u64)>> {
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
