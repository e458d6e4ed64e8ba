//! Byte layouts of the store's files (specified in `docs/formats/blockstore.md`). All integers little-endian;
//! every record, header and unit carries a CRC32C.

use crate::{Error, Result};

/// Magic of a volume's `meta` file.
pub const META_MAGIC: &[u8; 8] = b"RDBVOLM1";
/// Length of the `meta` file.
pub const META_LEN: usize = 8 + 4 + 8 + 4 + 4;
/// Magic of a data-file batch header.
pub const BATCH_MAGIC: u32 = 0x4842_4452; // "RDBH"
/// Fixed part of a batch header.
pub const BATCH_HEADER_LEN: usize = 40;
/// Bytes of one operation in a batch's op list.
pub const OP_LEN: usize = 40;
/// Bytes of a unit header: crc32c, stored length, raw length.
pub const UNIT_HEADER_LEN: usize = 12;
/// Fixed part of a journal record: crc32c, body length.
pub const JREC_HEADER_LEN: usize = 8;
/// Fixed part of a journal record body: seq, kind, pad, first block, block count.
pub const JREC_BODY_FIXED: usize = 8 + 1 + 3 + 8 + 4;

/// CRC32C of several byte slices, as one stream.
pub fn crc(parts: &[&[u8]]) -> u32 {
    parts.iter().fold(0, |c, p| crc32c::crc32c_append(c, p))
}

/// Reads a little-endian u32 at `at`. REQUIRES: `at + 4 <= b.len()`.
pub fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

/// Reads a little-endian u64 at `at`. REQUIRES: `at + 8 <= b.len()`.
pub fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// A volume's fixed parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VolumeMeta {
    /// Size in bytes (a multiple of the block size).
    pub size: u64,
    /// Block size in bytes.
    pub block_size: u32,
}

impl VolumeMeta {
    /// Encodes the `meta` file.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(META_LEN);
        b.extend_from_slice(META_MAGIC);
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&self.size.to_le_bytes());
        b.extend_from_slice(&self.block_size.to_le_bytes());
        let c = crc(&[&b]);
        b.extend_from_slice(&c.to_le_bytes());
        b
    }

    /// Decodes the `meta` file.
    pub fn decode(b: &[u8]) -> Result<VolumeMeta> {
        if b.len() != META_LEN || &b[..8] != META_MAGIC {
            return Err(Error::Corruption("volume meta: bad length or magic".into()));
        }
        if crc(&[&b[..META_LEN - 4]]) != u32_at(b, META_LEN - 4) {
            return Err(Error::Corruption("volume meta: checksum mismatch".into()));
        }
        if u32_at(b, 8) != 1 {
            return Err(Error::Corruption(format!("volume meta: unknown version {}", u32_at(b, 8))));
        }
        Ok(VolumeMeta { size: u64_at(b, 12), block_size: u32_at(b, 20) })
    }
}

/// One operation of a batch, applied to the index in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchOp {
    /// Blocks `first..first+blocks` now live in the unit at `unit_offset`, from `block_in_unit` on.
    Put {
        /// First block.
        first: u64,
        /// Block count.
        blocks: u64,
        /// Unit header offset in this data file.
        unit_offset: u64,
        /// Stored payload length of the unit.
        stored_len: u32,
        /// Unit length in blocks.
        unit_blocks: u32,
        /// Offset of `first` inside the unit.
        block_in_unit: u32,
    },
    /// Blocks `first..first+blocks` read as zeros (TRIM, WRITE_ZEROES).
    Delete {
        /// First block.
        first: u64,
        /// Block count.
        blocks: u64,
    },
}

impl BatchOp {
    /// Appends the 40-byte encoding.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let (kind, first, blocks, uo, sl, ub, bi) = match *self {
            BatchOp::Put { first, blocks, unit_offset, stored_len, unit_blocks, block_in_unit } => {
                (1u8, first, blocks, unit_offset, stored_len, unit_blocks, block_in_unit)
            }
            BatchOp::Delete { first, blocks } => (2u8, first, blocks, 0, 0, 0, 0),
        };
        out.extend_from_slice(&[kind, 0, 0, 0]);
        out.extend_from_slice(&first.to_le_bytes());
        out.extend_from_slice(&blocks.to_le_bytes());
        out.extend_from_slice(&uo.to_le_bytes());
        out.extend_from_slice(&sl.to_le_bytes());
        out.extend_from_slice(&ub.to_le_bytes());
        out.extend_from_slice(&bi.to_le_bytes());
    }

    /// Decodes one op. REQUIRES: `b.len() == OP_LEN`.
    pub fn decode(b: &[u8]) -> Result<BatchOp> {
        let first = u64_at(b, 4);
        let blocks = u64_at(b, 12);
        if blocks == 0 || first.checked_add(blocks).is_none() {
            return Err(Error::Corruption(format!("batch op: bad range {first}+{blocks}")));
        }
        match b[0] {
            1 => {
                let op = BatchOp::Put {
                    first,
                    blocks,
                    unit_offset: u64_at(b, 20),
                    stored_len: u32_at(b, 28),
                    unit_blocks: u32_at(b, 32),
                    block_in_unit: u32_at(b, 36),
                };
                if let BatchOp::Put { unit_blocks, block_in_unit, .. } = op
                    && u64::from(block_in_unit) + blocks > u64::from(unit_blocks)
                {
                    return Err(Error::Corruption("batch op: range runs past its unit".into()));
                }
                Ok(op)
            }
            2 => Ok(BatchOp::Delete { first, blocks }),
            k => Err(Error::Corruption(format!("batch op: unknown kind {k}"))),
        }
    }
}

/// The fixed header of a batch in a data file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    /// Batch sequence number, increasing across the volume's data files.
    pub seq: u64,
    /// Every journal record with a sequence number <= this is contained in this or an earlier batch.
    pub journal_seq: u64,
    /// Number of ops following the header.
    pub ops: u32,
    /// Bytes of units following the ops.
    pub units_len: u64,
}

impl BatchHeader {
    /// Encodes header and ops; the CRC covers both.
    pub fn encode(&self, ops: &[BatchOp]) -> Vec<u8> {
        let mut b = Vec::with_capacity(BATCH_HEADER_LEN + ops.len() * OP_LEN);
        b.extend_from_slice(&BATCH_MAGIC.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&self.seq.to_le_bytes());
        b.extend_from_slice(&self.journal_seq.to_le_bytes());
        b.extend_from_slice(&self.ops.to_le_bytes());
        b.extend_from_slice(&self.units_len.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes()); // crc placeholder at 36
        for op in ops {
            op.encode(&mut b);
        }
        let c = crc(&[&b[..36], &b[40..]]);
        b[36..40].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// Decodes the fixed header; `None` when the magic or version is wrong (a torn or never-written tail).
    pub fn decode_fixed(b: &[u8]) -> Option<(BatchHeader, u32)> {
        if b.len() < BATCH_HEADER_LEN || u32_at(b, 0) != BATCH_MAGIC || b[4..6] != 1u16.to_le_bytes() {
            return None;
        }
        let h = BatchHeader {
            seq: u64_at(b, 8),
            journal_seq: u64_at(b, 16),
            ops: u32_at(b, 24),
            units_len: u64_at(b, 28),
        };
        Some((h, u32_at(b, 36)))
    }

    /// Whether `crc` matches the header `fixed` and its ops `ops`.
    pub fn check(fixed: &[u8], ops: &[u8], crc_stored: u32) -> bool {
        crc(&[&fixed[..36], ops]) == crc_stored
    }
}

/// Encodes a compression unit from `raw` (whole blocks): LZ4 when it shrinks the data, else stored raw.
pub fn encode_unit(raw: &[u8], out: &mut Vec<u8>) {
    let compressed = lz4_flex::block::compress(raw);
    let payload: &[u8] = if compressed.len() < raw.len() { &compressed } else { raw };
    let stored = payload.len() as u32;
    let rawlen = raw.len() as u32;
    let c = crc(&[&stored.to_le_bytes(), &rawlen.to_le_bytes(), payload]);
    out.extend_from_slice(&c.to_le_bytes());
    out.extend_from_slice(&stored.to_le_bytes());
    out.extend_from_slice(&rawlen.to_le_bytes());
    out.extend_from_slice(payload);
}

/// Decodes a unit read from a data file (`b` = header + payload) that must hold `raw_len` bytes.
pub fn decode_unit(b: &[u8], raw_len: usize) -> Result<Vec<u8>> {
    if b.len() < UNIT_HEADER_LEN {
        return Err(Error::Corruption("unit shorter than its header".into()));
    }
    let stored = u32_at(b, 4) as usize;
    let rawlen = u32_at(b, 8) as usize;
    if stored != b.len() - UNIT_HEADER_LEN || rawlen != raw_len {
        return Err(Error::Corruption(format!(
            "unit header says {stored}/{rawlen} bytes, index says {}/{raw_len}",
            b.len() - UNIT_HEADER_LEN
        )));
    }
    if crc(&[&b[4..]]) != u32_at(b, 0) {
        return Err(Error::Corruption("unit checksum mismatch".into()));
    }
    let payload = &b[UNIT_HEADER_LEN..];
    if stored == rawlen {
        return Ok(payload.to_vec());
    }
    let out = lz4_flex::block::decompress(payload, rawlen)
        .map_err(|e| Error::Corruption(format!("unit does not decompress: {e}")))?;
    if out.len() != rawlen {
        return Err(Error::Corruption("unit decompressed to the wrong length".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_round_trips_and_detects_flipped_bits() {
        let raw: Vec<u8> = (0..8192u32).map(|i| (i / 100) as u8).collect();
        let mut u = Vec::new();
        encode_unit(&raw, &mut u);
        assert!(u.len() < raw.len());
        assert_eq!(decode_unit(&u, raw.len()).unwrap(), raw);
        for i in [0, 5, 13, u.len() - 1] {
            let mut bad = u.clone();
            bad[i] ^= 1;
            assert!(matches!(decode_unit(&bad, raw.len()), Err(Error::Corruption(_))), "flip at {i}");
        }
    }

    #[test]
    fn batch_header_round_trips() {
        let ops = [
            BatchOp::Delete { first: 3, blocks: 2 },
            BatchOp::Put {
                first: 9,
                blocks: 4,
                unit_offset: 100,
                stored_len: 77,
                unit_blocks: 4,
                block_in_unit: 0,
            },
        ];
        let h = BatchHeader { seq: 5, journal_seq: 17, ops: 2, units_len: 89 };
        let b = h.encode(&ops);
        let (d, c) = BatchHeader::decode_fixed(&b).unwrap();
        assert_eq!(d, h);
        assert!(BatchHeader::check(&b[..40], &b[40..], c));
        assert_eq!(BatchOp::decode(&b[40..80]).unwrap(), ops[0]);
        assert_eq!(BatchOp::decode(&b[80..120]).unwrap(), ops[1]);
        let m = VolumeMeta { size: 1 << 30, block_size: 4096 };
        assert_eq!(VolumeMeta::decode(&m.encode()).unwrap(), m);
    }
}
