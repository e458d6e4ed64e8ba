//! Byte layouts of the store's files (specified in `docs/formats/blockstore.md`). All integers little-endian;
//! every record, header and unit carries a CRC32C. The index checkpoint is in `format/checkpoint.rs`, compression
//! units in `format/unit.rs`.

use crate::{Error, Result};

mod checkpoint;
mod unit;

pub use checkpoint::{
    CHECKPOINT_FILE_LEN, CHECKPOINT_HEADER_LEN, CHECKPOINT_MAGIC, CHECKPOINT_PIECE_LEN, Checkpoint, Piece,
};
pub use unit::{PROBE_MIN_BYTES, decode_unit, decode_unit_owned, encode_unit, intact_unit_len};

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
    parts.iter().fold(0, |c, p| vfs::crc32c::crc32c_append(c, p))
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

/// Encodes a small fixed-layout file: `magic`, version 1 (u32), `body`, CRC32C of everything before it.
fn encode_fixed(magic: &[u8; 8], version: u32, body: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + 4 + body.len() + 4);
    b.extend_from_slice(magic);
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(body);
    let c = crc(&[&b]);
    b.extend_from_slice(&c.to_le_bytes());
    b
}

/// Checks a file written by [`encode_fixed`]: length `len`, `magic`, checksum, a version in `1..=newest`; returns
/// the version. `what` names it in the corruption message. The body starts at offset 12.
fn check_fixed(b: &[u8], magic: &[u8; 8], len: usize, what: &str, newest: u32) -> Result<u32> {
    if b.len() != len || &b[..8] != magic {
        return Err(Error::Corruption(format!("{what}: bad length or magic")));
    }
    if crc(&[&b[..len - 4]]) != u32_at(b, len - 4) {
        return Err(Error::Corruption(format!("{what}: checksum mismatch")));
    }
    let version = u32_at(b, 8);
    if !(1..=newest).contains(&version) {
        return Err(Error::Corruption(format!("{what}: unknown version {version}")));
    }
    Ok(version)
}

/// The newest `meta` version. Version 2 (2026-11-27) says the journal may hold sync marks (journal record kind
/// 3): a binary that knows only version 1 refuses the volume instead of ending its journal at the first mark and
/// cutting off the acknowledged writes after it. A version-1 volume is rewritten as version 2 when it is first
/// opened for writing, before any record is appended.
pub const META_VERSION: u32 = 2;

/// A volume's fixed parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VolumeMeta {
    /// Format version (1 or [`META_VERSION`]).
    pub version: u32,
    /// Size in bytes (a multiple of the block size).
    pub size: u64,
    /// Block size in bytes.
    pub block_size: u32,
}

impl VolumeMeta {
    /// Encodes the `meta` file.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(12);
        body.extend_from_slice(&self.size.to_le_bytes());
        body.extend_from_slice(&self.block_size.to_le_bytes());
        encode_fixed(META_MAGIC, self.version, &body)
    }

    /// Decodes the `meta` file.
    pub fn decode(b: &[u8]) -> Result<VolumeMeta> {
        let version = check_fixed(b, META_MAGIC, META_LEN, "volume meta", META_VERSION)?;
        Ok(VolumeMeta { version, size: u64_at(b, 12), block_size: u32_at(b, 20) })
    }
}

/// Magic of the `synced` file.
pub const SYNCED_MAGIC: &[u8; 8] = b"RDBSYNC1";
/// Length of the `synced` file: magic, version, batch sequence number, data file, length, CRC32C.
pub const SYNCED_LEN: usize = 8 + 4 + 8 + 4 + 8 + 4;

/// The `synced` file: every batch whose sequence number is at most `batch_seq` was durable when it was written,
/// and data file `file` was durable up to `len` bytes. Recovery trusts those batches' headers as before and
/// verifies the units of later ones (which may be torn); an invalid batch below `len` of `file` is corruption.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SyncMark {
    /// The newest batch made durable by a data sync.
    pub batch_seq: u64,
    /// The data file that batch is in.
    pub file: u32,
    /// Bytes of batches in `file` at the sync.
    pub len: u64,
}

impl SyncMark {
    /// Encodes the `synced` file.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(20);
        body.extend_from_slice(&self.batch_seq.to_le_bytes());
        body.extend_from_slice(&self.file.to_le_bytes());
        body.extend_from_slice(&self.len.to_le_bytes());
        encode_fixed(SYNCED_MAGIC, 1, &body)
    }

    /// Decodes the `synced` file.
    pub fn decode(b: &[u8]) -> Result<SyncMark> {
        check_fixed(b, SYNCED_MAGIC, SYNCED_LEN, "synced mark", 1)?;
        Ok(SyncMark { batch_seq: u64_at(b, 12), file: u32_at(b, 20), len: u64_at(b, 24) })
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
        if b[1..4] != [0, 0, 0] {
            return Err(Error::Corruption("batch op: reserved bytes are not zero".into()));
        }
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
            2 if b[20..OP_LEN].iter().all(|&x| x == 0) => Ok(BatchOp::Delete { first, blocks }),
            2 => Err(Error::Corruption("batch op: a delete with unit fields set".into())),
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

    /// Decodes the fixed header; `None` when the magic, version or flags are wrong (a torn or never-written tail;
    /// no version of the format sets flags, so a header with flags is not one this code can read).
    pub fn decode_fixed(b: &[u8]) -> Option<(BatchHeader, u32)> {
        if b.len() < BATCH_HEADER_LEN
            || u32_at(b, 0) != BATCH_MAGIC
            || b[4..6] != 1u16.to_le_bytes()
            || b[6..8] != [0, 0]
        {
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

/// Magic of a data-file footer ("RDBF").
pub const FOOTER_MAGIC: u32 = 0x4642_4452;
/// Length of a data-file footer.
pub const FOOTER_LEN: usize = 48;

/// The footer a data file gets when it is sealed: what recovery needs to know about the file without scanning
/// its batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footer {
    /// Bytes of batches in front of the footer (the footer's own offset).
    pub data_len: u64,
    /// Sequence number of the file's first batch (0 when it has none).
    pub first_seq: u64,
    /// Sequence number of the file's last batch (0 when it has none).
    pub last_seq: u64,
    /// Blocks put into the file by its batches (the denominator of its live ratio).
    pub written_blocks: u64,
    /// Number of batches.
    pub batches: u32,
}

impl Footer {
    /// Encodes the 48-byte footer.
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut b = [0u8; FOOTER_LEN];
        b[0..4].copy_from_slice(&FOOTER_MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&1u16.to_le_bytes());
        b[8..16].copy_from_slice(&self.data_len.to_le_bytes());
        b[16..24].copy_from_slice(&self.first_seq.to_le_bytes());
        b[24..32].copy_from_slice(&self.last_seq.to_le_bytes());
        b[32..40].copy_from_slice(&self.written_blocks.to_le_bytes());
        b[40..44].copy_from_slice(&self.batches.to_le_bytes());
        let c = crc(&[&b[..44]]);
        b[44..48].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// Decodes the last `FOOTER_LEN` bytes of a file of `file_len` bytes: `None` when they are not a valid footer
    /// of exactly this file (an unsealed file ends in a batch).
    pub fn decode(b: &[u8], file_len: u64) -> Option<Footer> {
        if b.len() != FOOTER_LEN
            || u32_at(b, 0) != FOOTER_MAGIC
            || b[4..6] != 1u16.to_le_bytes()
            || b[6..8] != [0, 0]
            || crc(&[&b[..44]]) != u32_at(b, 44)
        {
            return None;
        }
        let f = Footer {
            data_len: u64_at(b, 8),
            first_seq: u64_at(b, 16),
            last_seq: u64_at(b, 24),
            written_blocks: u64_at(b, 32),
            batches: u32_at(b, 40),
        };
        (f.data_len.checked_add(FOOTER_LEN as u64) == Some(file_len) && f.first_seq <= f.last_seq)
            .then_some(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_round_trips_and_detects_flipped_bits() {
        let raw: Vec<u8> = (0..8192u32).map(|i| (i / 100) as u8).collect();
        let mut u = Vec::new();
        encode_unit(&[&raw], true, &mut u);
        assert!(u.len() < raw.len());
        assert_eq!(decode_unit(&u, raw.len()).unwrap(), raw);
        for i in [0, 5, 13, u.len() - 1] {
            let mut bad = u.clone();
            bad[i] ^= 1;
            assert!(matches!(decode_unit(&bad, raw.len()), Err(Error::Corruption(_))), "flip at {i}");
        }
    }

    fn noise(n: usize, seed: u64) -> Vec<u8> {
        use rand::{RngCore, SeedableRng};
        let mut b = vec![0u8; n];
        rand::rngs::SmallRng::seed_from_u64(seed).fill_bytes(&mut b);
        b
    }

    #[test]
    fn incompressible_units_are_stored_raw_after_the_probe() {
        let raw = noise(32 * 4096, 7);
        let mut u = Vec::new();
        encode_unit(&[&raw[..4096], &raw[4096..]], true, &mut u);
        assert_eq!(u.len(), UNIT_HEADER_LEN + raw.len());
        assert_eq!(u32_at(&u, 4) as usize, raw.len(), "stored raw");
        assert_eq!(decode_unit(&u, raw.len()).unwrap(), raw);
        assert_eq!(decode_unit_owned(u, raw.len()).unwrap(), raw);
    }

    #[test]
    fn a_unit_split_into_parts_encodes_like_one_slice() {
        // Half zeros, half noise: the probe must see the zeros and let LZ4 run.
        let mut raw = vec![0u8; 16 * 4096];
        raw.extend(noise(16 * 4096, 3));
        let (mut one, mut parts) = (Vec::new(), Vec::new());
        encode_unit(&[&raw], true, &mut one);
        let pieces: Vec<&[u8]> = raw.chunks(4096).collect();
        encode_unit(&pieces, true, &mut parts);
        assert_eq!(one, parts);
        assert!(one.len() < raw.len() * 3 / 4, "compressed: {}", one.len());
        assert_eq!(decode_unit(&one, raw.len()).unwrap(), raw);
        // Appending keeps what `out` held.
        let mut out = vec![9u8; 5];
        encode_unit(&pieces, true, &mut out);
        assert_eq!(&out[..5], &[9u8; 5]);
        assert_eq!(&out[5..], &one[..]);
        // Told not to compress: raw, and still a valid unit.
        let mut plain = Vec::new();
        encode_unit(&pieces, false, &mut plain);
        assert_eq!(plain.len(), UNIT_HEADER_LEN + raw.len());
        assert_eq!(decode_unit(&plain, raw.len()).unwrap(), raw);
    }

    #[test]
    fn synced_mark_round_trips_and_rejects_damage() {
        let m = SyncMark { batch_seq: 41, file: 3, len: 1 << 33 };
        let b = m.encode();
        assert_eq!(b.len(), SYNCED_LEN);
        assert_eq!(&b[..8], SYNCED_MAGIC);
        assert_eq!(SyncMark::decode(&b).unwrap(), m);
        for i in 0..SYNCED_LEN {
            let mut bad = b.clone();
            bad[i] ^= 2;
            assert!(matches!(SyncMark::decode(&bad), Err(Error::Corruption(_))), "flip at {i}");
        }
        assert!(SyncMark::decode(&b[..SYNCED_LEN - 1]).is_err());
    }

    #[test]
    fn footer_and_checkpoint_round_trip_and_reject_damage() {
        let f = Footer { data_len: 4000, first_seq: 3, last_seq: 9, written_blocks: 77, batches: 7 };
        let b = f.encode();
        assert_eq!(Footer::decode(&b, 4048), Some(f));
        assert_eq!(Footer::decode(&b, 4049), None);
        for i in 0..FOOTER_LEN {
            let mut bad = b;
            bad[i] ^= 4;
            assert_eq!(Footer::decode(&bad, 4048), None, "flip at {i}");
        }
        let loc =
            crate::Location { file: 2, unit_offset: 80, stored_len: 100, unit_blocks: 8, block_in_unit: 1 };
        let c = Checkpoint {
            batch_seq: 12,
            journal_seq: 40,
            current_file: 3,
            files: vec![(2, 50), (3, 9)],
            pieces: vec![
                Piece { first: 5, blocks: 3, loc },
                Piece { first: 8, blocks: 7, loc: crate::Location { block_in_unit: 0, file: 3, ..loc } },
            ],
        };
        let e = c.encode();
        assert_eq!(Checkpoint::decode(&e).unwrap(), c);
        for i in [0, 9, 17, 40, 50, 70, e.len() - 1] {
            let mut bad = e.clone();
            bad[i] ^= 1;
            assert!(matches!(Checkpoint::decode(&bad), Err(Error::Corruption(_))), "flip at {i}");
        }
        assert!(Checkpoint::decode(&e[..e.len() - 5]).is_err());
    }

    /// A delete and a put, as a batch holds them.
    fn sample_ops() -> [BatchOp; 2] {
        [
            BatchOp::Delete { first: 3, blocks: 2 },
            BatchOp::Put {
                first: 9,
                blocks: 4,
                unit_offset: 100,
                stored_len: 77,
                unit_blocks: 4,
                block_in_unit: 0,
            },
        ]
    }

    #[test]
    fn batch_header_round_trips() {
        let ops = sample_ops();
        let h = BatchHeader { seq: 5, journal_seq: 17, ops: 2, units_len: 89 };
        let b = h.encode(&ops);
        let (d, c) = BatchHeader::decode_fixed(&b).unwrap();
        assert_eq!(d, h);
        assert!(BatchHeader::check(&b[..40], &b[40..], c));
        assert_eq!(BatchOp::decode(&b[40..80]).unwrap(), ops[0]);
        assert_eq!(BatchOp::decode(&b[80..120]).unwrap(), ops[1]);
        for version in [1, META_VERSION] {
            let m = VolumeMeta { version, size: 1 << 30, block_size: 4096 };
            assert_eq!(VolumeMeta::decode(&m.encode()).unwrap(), m);
        }
        let future = VolumeMeta { version: META_VERSION + 1, size: 1 << 30, block_size: 4096 };
        assert!(matches!(VolumeMeta::decode(&future.encode()), Err(Error::Corruption(_))));
    }

    /// Found by the `batch` fuzz target: the batch header's flags field (offset 6, "flags = 0" in the format
    /// spec) was never checked, so a header with flags set and a CRC over them decoded as if they were zero.
    #[test]
    fn regression_batch_header_with_flags_set_is_rejected() {
        let h = BatchHeader { seq: 5, journal_seq: 17, ops: 0, units_len: 0 };
        let mut b = h.encode(&[]);
        b[7] = 190;
        let c = crc(&[&b[..36]]);
        b[36..40].copy_from_slice(&c.to_le_bytes());
        assert!(
            BatchHeader::check(&b[..40], &b[40..], c),
            "the CRC covers the flags, so only the flags are wrong"
        );
        assert_eq!(BatchHeader::decode_fixed(&b), None);
    }

    /// Found by the `batch` fuzz target with the header fixed: an op's reserved bytes (1..4) and a delete's unit
    /// fields (20..40), zero in the format spec, were not checked either.
    #[test]
    fn regression_batch_op_with_reserved_bytes_set_is_rejected() {
        let [delete, put_op] = sample_ops();
        let mut put = Vec::new();
        put_op.encode(&mut put);
        let mut del = Vec::new();
        delete.encode(&mut del);
        assert!(BatchOp::decode(&put).is_ok() && BatchOp::decode(&del).is_ok());
        for at in 1..4 {
            for op in [&put, &del] {
                let mut b = op.clone();
                b[at] = 1;
                assert!(matches!(BatchOp::decode(&b), Err(Error::Corruption(_))), "byte {at}");
            }
        }
        for at in 20..OP_LEN {
            let mut b = del.clone();
            b[at] = 249;
            assert!(matches!(BatchOp::decode(&b), Err(Error::Corruption(_))), "delete byte {at}");
        }
    }
}
