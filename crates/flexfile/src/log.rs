//! The logical log: FlexTree operations since the last checkpoint, in checksummed 24-byte entries.
//!
//! # Design
//!
//! Header (32 bytes): magic `RDBFLXL\0`, version u64 (the tree version the log extends), format u32, 8 reserved
//! bytes, CRC32C of bytes `[0, 28)` at `[28, 32)`. Entries follow, 24 bytes each, little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | CRC32C of bytes 4..24, seeded with the CRC32C of the version (entries of an older log never verify) |
//! | 4 | op: 1 insert, 2 collapse, 3 relocate (GC), 4 set-tag, 5 commit |
//! | 5 | reserved, 0 |
//! | 6..8 | tag (insert, set-tag) |
//! | 8..14 | logical offset, u48 (commit: number of entries in the batch) |
//! | 14..20 | physical address, u48 (insert: address or hole; relocate: new address) |
//! | 20..24 | length u32 (commit: CRC32C of the batch's entry bytes) |
//!
//! The paper packs an entry into 16 bytes (48-bit address, 30-bit length, 2-bit op) with no room for a checksum;
//! we spend 8 more bytes on a CRC, a tag (set-tag is a fourth op) and a full 48-bit logical offset.
//!
//! Entries are written in batches, each closed by a commit entry; a batch is replayed only if its commit entry is
//! valid and matches. Damage after the last complete batch is dropped only when it is a torn write of the one
//! unsynced batch (cut short, or with sectors that were never written and read as zeros; see `check_torn_tail`);
//! a flipped byte in a synced batch, or damage followed by a later batch, is corruption.

use crate::error::{Error, Result};
use crate::flextree::HOLE;
use crate::treefile::{u32_at, u64_at};

const MAGIC: &[u8; 8] = b"RDBFLXL\0";
const FORMAT: u32 = 1;
/// Bytes of the log header.
pub const HEADER_LEN: usize = 32;
/// Bytes of one entry.
pub const ENTRY_LEN: usize = 24;

/// One logged FlexTree operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Insert `len` bytes at `off` mapped at `addr` (or a hole) with `tag`.
    Insert {
        /// Logical offset.
        off: u64,
        /// Length.
        len: u32,
        /// Physical address or `HOLE`.
        addr: u64,
        /// Tag of the new extent.
        tag: u16,
    },
    /// Remove `[off, off + len)`.
    Collapse {
        /// Logical offset.
        off: u64,
        /// Length.
        len: u32,
    },
    /// GC moved the extent `[off, off + len)` to `addr`.
    Relocate {
        /// Logical offset of the extent.
        off: u64,
        /// Its length.
        len: u32,
        /// New physical address.
        addr: u64,
    },
    /// Set the tag at `off`.
    SetTag {
        /// Logical offset.
        off: u64,
        /// Tag.
        tag: u16,
    },
}

fn seed(version: u64) -> u32 {
    vfs::crc32c::crc32c(&version.to_le_bytes())
}

fn put_u48(b: &mut [u8], v: u64) {
    b.copy_from_slice(&v.to_le_bytes()[..6]);
}

fn u48(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    x[..6].copy_from_slice(b);
    u64::from_le_bytes(x)
}

fn raw_entry(version: u64, op: u8, tag: u16, off: u64, addr: u64, len: u32) -> [u8; ENTRY_LEN] {
    let mut b = [0u8; ENTRY_LEN];
    b[4] = op;
    b[6..8].copy_from_slice(&tag.to_le_bytes());
    put_u48(&mut b[8..14], off);
    put_u48(&mut b[14..20], addr);
    b[20..24].copy_from_slice(&len.to_le_bytes());
    let crc = vfs::crc32c::crc32c_append(seed(version), &b[4..]);
    b[0..4].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Encodes `op` for a log of `version`.
pub fn encode_op(version: u64, op: &Op) -> [u8; ENTRY_LEN] {
    match *op {
        Op::Insert { off, len, addr, tag } => raw_entry(version, 1, tag, off, addr, len),
        Op::Collapse { off, len } => raw_entry(version, 2, 0, off, 0, len),
        Op::Relocate { off, len, addr } => raw_entry(version, 3, 0, off, addr, len),
        Op::SetTag { off, tag } => raw_entry(version, 4, tag, off, 0, 0),
    }
}

/// The commit entry closing a batch of `count` entries whose bytes are `batch`.
pub fn encode_commit(version: u64, batch: &[u8]) -> [u8; ENTRY_LEN] {
    raw_entry(version, 5, 0, (batch.len() / ENTRY_LEN) as u64, 0, vfs::crc32c::crc32c(batch))
}

/// Encodes a log header.
pub fn encode_header(version: u64) -> [u8; HEADER_LEN] {
    let mut b = [0u8; HEADER_LEN];
    b[0..8].copy_from_slice(MAGIC);
    b[8..16].copy_from_slice(&version.to_le_bytes());
    b[16..20].copy_from_slice(&FORMAT.to_le_bytes());
    let crc = vfs::crc32c::crc32c(&b[0..28]);
    b[28..32].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes a log header's version; `None` if it is not a valid header (a log from before a reset finished).
pub fn decode_header(b: &[u8]) -> Option<u64> {
    if b.len() < HEADER_LEN || &b[0..8] != MAGIC || u32_at(b, 16) != FORMAT {
        return None;
    }
    (vfs::crc32c::crc32c(&b[0..28]) == u32_at(b, 28)).then(|| u64_at(b, 8))
}

enum Decoded {
    Op(Op),
    Commit { count: u64, crc: u32 },
}

fn decode_entry(version: u64, b: &[u8]) -> Result<Option<Decoded>> {
    if vfs::crc32c::crc32c_append(seed(version), &b[4..ENTRY_LEN]) != u32_at(b, 0) {
        return Ok(None);
    }
    let bad = |m: &str| Err(Error::corruption("log", m.to_string()));
    let tag = u16::from_le_bytes([b[6], b[7]]);
    let off = u48(&b[8..14]);
    let addr = u48(&b[14..20]);
    let len = u32_at(b, 20);
    if b[5] != 0 {
        return bad("reserved byte set in a log entry");
    }
    Ok(Some(match b[4] {
        1 => Decoded::Op(Op::Insert { off, len, addr, tag }),
        2 => Decoded::Op(Op::Collapse { off, len }),
        3 if addr != HOLE => Decoded::Op(Op::Relocate { off, len, addr }),
        4 => Decoded::Op(Op::SetTag { off, tag }),
        5 => Decoded::Commit { count: off, crc: len },
        _ => return bad("unknown op in a log entry"),
    }))
}

/// The unit in which an interrupted write may persist partially (`docs/vfs.md`): each sector of an unsynced
/// write is independently old or new, and new file bytes with no old value read as zeros.
pub const SECTOR: usize = vfs::SECTOR_SIZE as usize;

/// Decides whether the bytes after the last complete batch (entry `batch_start` of the body on) are a torn tail,
/// an incomplete final write that was never synced, or damage to synced bytes.
///
/// Only one batch can be unsynced: a commit writes its batch in one write and syncs before the next. The tail
/// is therefore at most one batch, written past the durable end of the log, and a crash can leave it (a) cut at
/// any length (a partial final record, or whole entries without their commit), or (b) with some of its sectors
/// never written, which read as zeros. A torn tail is accepted when every entry failing its checksum overlaps a
/// sector piece of the tail (the part of a 512-byte sector inside the tail) that is entirely zero. Anything else
/// is `Corruption`:
/// - a failing entry with no zero sector piece under it (a flipped byte in synced bytes: valid entries never
///   contain a zero run as long as a sector, since every 24 bytes hold a nonzero op byte);
/// - a valid commit entry whose count does not match the damaged batch;
/// - any bytes after the damaged batch's valid commit entry (a later write happened, so the batch was synced).
///
/// A sector piece shorter than an entry (at the tail's first or last sector) can be zero in valid data only if
/// those bytes of a CRC or length happen to be zero, so a flip in such an entry may rarely pass as torn; then the
/// last batch is dropped as if the crash had come before its sync.
fn check_torn_tail(bytes: &[u8], version: u64, batch_start: usize) -> Result<()> {
    let body = &bytes[HEADER_LEN..];
    let tail_start = HEADER_LEN + batch_start * ENTRY_LEN;
    let unwritten = |a: usize, b: usize| vfs::torn::overlaps_unwritten_sector(bytes, tail_start, a, b);
    let n = body.len() / ENTRY_LEN;
    let mut commit: Option<usize> = None;
    for k in batch_start..n {
        if let Some(c) = commit {
            return Err(Error::corruption(
                "log",
                format!("damaged batch closed by commit entry {c} is followed by entry {k}: it was synced"),
            ));
        }
        let a = HEADER_LEN + k * ENTRY_LEN;
        match decode_entry(version, &body[k * ENTRY_LEN..(k + 1) * ENTRY_LEN])? {
            Some(Decoded::Op(_)) => {}
            Some(Decoded::Commit { count, .. }) => {
                if count != (k - batch_start) as u64 {
                    return Err(Error::corruption(
                        "log",
                        format!("commit entry {k} does not match its damaged batch"),
                    ));
                }
                commit = Some(k);
            }
            None if unwritten(a, a + ENTRY_LEN) => {}
            None => {
                return Err(Error::corruption(
                    "log",
                    format!("entry {k} fails its checksum and is not an unwritten part of a torn write"),
                ));
            }
        }
    }
    if let Some(c) = commit.filter(|_| !body.len().is_multiple_of(ENTRY_LEN)) {
        return Err(Error::corruption("log", format!("bytes after the commit entry {c} of a damaged batch")));
    }
    Ok(())
}

/// What a log file holds.
#[derive(Debug, Default)]
pub struct Parsed {
    /// The version in the header, if the header is valid.
    pub version: Option<u64>,
    /// Operations of complete batches, in order.
    pub ops: Vec<Op>,
    /// Complete batches.
    pub batches: u64,
    /// Bytes after the last complete batch that were dropped as a torn tail.
    pub torn_bytes: u64,
}

/// Parses a whole log for a tree of `version`. A log whose header is invalid or carries another version is
/// returned with no ops (it belongs to an older tree). A torn final write is dropped (`torn_bytes`); any other
/// damage is `Corruption`.
pub fn parse(bytes: &[u8], version: u64) -> Result<Parsed> {
    let mut p = Parsed { version: decode_header(bytes), ..Parsed::default() };
    if p.version != Some(version) {
        return Ok(p);
    }
    let body = &bytes[HEADER_LEN..];
    let n = body.len() / ENTRY_LEN;
    let mut batch_start = 0usize;
    let mut pending: Vec<Op> = Vec::new();
    let mut i = 0;
    while i < n {
        let e = &body[i * ENTRY_LEN..(i + 1) * ENTRY_LEN];
        match decode_entry(version, e)? {
            Some(Decoded::Op(op)) => pending.push(op),
            Some(Decoded::Commit { count, crc }) => {
                let batch = &body[batch_start * ENTRY_LEN..i * ENTRY_LEN];
                if count != (i - batch_start) as u64 || vfs::crc32c::crc32c(batch) != crc {
                    return Err(Error::corruption(
                        "log",
                        format!("commit entry {i} does not match its batch"),
                    ));
                }
                p.ops.append(&mut pending);
                p.batches += 1;
                batch_start = i + 1;
            }
            None => break,
        }
        i += 1;
    }
    check_torn_tail(bytes, version, batch_start)?;
    p.torn_bytes = (body.len() - batch_start * ENTRY_LEN) as u64;
    Ok(p)
}
