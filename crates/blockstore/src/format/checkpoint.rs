//! The index checkpoint: the live pieces of every volume's index and the data files they point into.

use super::{crc, u32_at, u64_at};
use crate::{Error, Result};

/// Magic of an index checkpoint.
pub const CHECKPOINT_MAGIC: &[u8; 8] = b"RDBCKPT1";
/// Fixed part of a checkpoint.
pub const CHECKPOINT_HEADER_LEN: usize = 48;
/// Bytes of one data-file entry of a checkpoint.
pub const CHECKPOINT_FILE_LEN: usize = 16;
/// Bytes of one index piece of a checkpoint.
pub const CHECKPOINT_PIECE_LEN: usize = 40;

/// One live index piece: blocks `first..first+blocks` start at `loc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// First block.
    pub first: u64,
    /// Block count (> 0).
    pub blocks: u64,
    /// Where the first block lives.
    pub loc: crate::Location,
}

/// An index checkpoint: the exact index after batch `batch_seq`, so recovery replays only later batches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// Every batch with a sequence number <= this is reflected; later ones are replayed.
    pub batch_seq: u64,
    /// Every journal record with a sequence number <= this is in a batch <= `batch_seq`.
    pub journal_seq: u64,
    /// The data file batches were appended to when the checkpoint was taken. A data file with a smaller number
    /// that is not in `files` is left over from an interrupted garbage collection and is removed.
    pub current_file: u32,
    /// The data files the index may reference, with the blocks put into each.
    pub files: Vec<(u32, u64)>,
    /// The live pieces in block order.
    pub pieces: Vec<Piece>,
}

impl Checkpoint {
    /// Bytes of the encoded checkpoint.
    pub fn encode_len(&self) -> usize {
        CHECKPOINT_HEADER_LEN
            + self.files.len() * CHECKPOINT_FILE_LEN
            + self.pieces.len() * CHECKPOINT_PIECE_LEN
            + 4
    }

    /// Encodes the checkpoint file; the trailing CRC32C covers every byte before it.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.encode_len());
        b.extend_from_slice(CHECKPOINT_MAGIC);
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&self.batch_seq.to_le_bytes());
        b.extend_from_slice(&self.journal_seq.to_le_bytes());
        b.extend_from_slice(&self.current_file.to_le_bytes());
        b.extend_from_slice(&(self.files.len() as u32).to_le_bytes());
        b.extend_from_slice(&(self.pieces.len() as u64).to_le_bytes());
        for &(id, written) in &self.files {
            b.extend_from_slice(&id.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
            b.extend_from_slice(&written.to_le_bytes());
        }
        for p in &self.pieces {
            b.extend_from_slice(&p.first.to_le_bytes());
            b.extend_from_slice(&p.blocks.to_le_bytes());
            b.extend_from_slice(&p.loc.file.to_le_bytes());
            b.extend_from_slice(&p.loc.stored_len.to_le_bytes());
            b.extend_from_slice(&p.loc.unit_offset.to_le_bytes());
            b.extend_from_slice(&p.loc.unit_blocks.to_le_bytes());
            b.extend_from_slice(&p.loc.block_in_unit.to_le_bytes());
        }
        let c = crc(&[&b]);
        b.extend_from_slice(&c.to_le_bytes());
        b
    }

    /// Decodes a checkpoint file, checking its CRC, lengths, and that pieces are in block order, disjoint, within
    /// their units and name listed files.
    pub fn decode(b: &[u8]) -> Result<Checkpoint> {
        let bad = |m: &str| Err(Error::Corruption(format!("index checkpoint: {m}")));
        if b.len() < CHECKPOINT_HEADER_LEN + 4 || &b[..8] != CHECKPOINT_MAGIC {
            return bad("bad length or magic");
        }
        let body = &b[..b.len() - 4];
        if crc(&[body]) != u32_at(b, b.len() - 4) {
            return bad("checksum mismatch");
        }
        if u32_at(b, 8) != 1 || u32_at(b, 12) != 0 {
            return bad("unknown version or flags");
        }
        let nfiles = u32_at(b, 36) as usize;
        let npieces = u64_at(b, 40);
        let want = (CHECKPOINT_HEADER_LEN as u64)
            .checked_add(nfiles as u64 * CHECKPOINT_FILE_LEN as u64)
            .and_then(|x| x.checked_add(npieces.checked_mul(CHECKPOINT_PIECE_LEN as u64)?));
        if want != Some(body.len() as u64) {
            return bad("counts do not match the length");
        }
        let mut files = Vec::with_capacity(nfiles);
        let mut at = CHECKPOINT_HEADER_LEN;
        for _ in 0..nfiles {
            let id = u32_at(b, at);
            if files.last().is_some_and(|&(p, _)| p >= id) || id == 0 || id == u32::MAX {
                return bad("file list out of order");
            }
            files.push((id, u64_at(b, at + 8)));
            at += CHECKPOINT_FILE_LEN;
        }
        let mut pieces = Vec::with_capacity(npieces as usize);
        let mut next_free = 0u64;
        for _ in 0..npieces {
            let p = Piece {
                first: u64_at(b, at),
                blocks: u64_at(b, at + 8),
                loc: crate::Location {
                    file: u32_at(b, at + 16),
                    stored_len: u32_at(b, at + 20),
                    unit_offset: u64_at(b, at + 24),
                    unit_blocks: u32_at(b, at + 32),
                    block_in_unit: u32_at(b, at + 36),
                },
            };
            at += CHECKPOINT_PIECE_LEN;
            if p.blocks == 0 || p.first < next_free || p.first.checked_add(p.blocks).is_none() {
                return bad("pieces overlap or are out of order");
            }
            if u64::from(p.loc.block_in_unit) + p.blocks > u64::from(p.loc.unit_blocks) {
                return bad("piece runs past its unit");
            }
            if files.binary_search_by_key(&p.loc.file, |&(id, _)| id).is_err() {
                return bad("piece names an unlisted data file");
            }
            next_free = p.first + p.blocks;
            pieces.push(p);
        }
        Ok(Checkpoint {
            batch_seq: u64_at(b, 16),
            journal_seq: u64_at(b, 24),
            current_file: u32_at(b, 32),
            files,
            pieces,
        })
    }
}
