//! Shared pieces of the SST format: block handles, the block trailer (compression type + CRC32C), the footer.
//! See docs/formats/sst.md.

use crate::coding::{Decoder, le_u32, le_u64, masked_crc, masked_crc2, put_varint};

/// The table magic number, last 8 bytes of every SST.
pub const TABLE_MAGIC: u64 = 0x7a1b_5ed0_4c53_4d01;
/// The SST format version written by this code. Version 2 (since 2026-11-27) keys each index entry but the last
/// by a separator between two blocks (`ikey::separator`); version 1 keyed every entry by its block's last key,
/// which is one such separator, so readers take both alike.
pub const FORMAT_VERSION: u32 = 2;
/// The oldest SST format version readers accept.
pub const MIN_FORMAT_VERSION: u32 = 1;
/// Footer length in bytes.
pub const FOOTER_LEN: usize = 48;
/// Block trailer: compression type (1) + masked CRC32C (4).
pub const TRAILER_LEN: usize = 5;
/// The largest length a compressed block may claim for its contents (guards the allocation a corrupt length
/// would drive). Larger blocks (one entry over 64 MiB) are stored plain, whose reads are bounded by the file.
pub const MAX_BLOCK_LEN: usize = 64 << 20;

/// Per-block compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Compression {
    /// Stored as is.
    #[default]
    None = 0,
    /// LZ4 block format with the uncompressed length prepended (u32 LE).
    Lz4 = 1,
    /// A Zstandard frame (level 3, zstd's and RocksDB's default) with the uncompressed length prepended (u32 LE).
    Zstd = 2,
}

/// The zstd level written (zstd's default, which RocksDB uses when no level is set).
pub const ZSTD_LEVEL: i32 = 3;

/// Where a block lives: offset and length of its contents (the trailer follows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Handle {
    /// Offset of the block in the file.
    pub offset: u64,
    /// Length of the block contents, without the trailer.
    pub size: u64,
}

impl Handle {
    /// Appends the varint encoding.
    pub fn encode(&self, dst: &mut Vec<u8>) {
        put_varint(dst, self.offset);
        put_varint(dst, self.size);
    }

    /// Decodes a varint-encoded handle.
    pub fn decode(b: &[u8]) -> Option<Handle> {
        let mut d = Decoder::new(b);
        Some(Handle { offset: d.varint()?, size: d.varint()? })
    }
}

/// Appends the trailer for `contents` compressed as `ty`.
pub fn block_trailer(contents: &[u8], ty: Compression) -> [u8; TRAILER_LEN] {
    let mut t = [0u8; TRAILER_LEN];
    t[0] = ty as u8;
    t[1..].copy_from_slice(&masked_crc2(contents, &[ty as u8]).to_le_bytes());
    t
}

/// Compresses `raw` if `ty` asks for it and it saves at least 1/8; returns the bytes and the type used. A block
/// over [`MAX_BLOCK_LEN`] is stored plain: readers refuse a compressed block claiming more.
pub fn compress(raw: Vec<u8>, ty: Compression) -> (Vec<u8>, Compression) {
    if raw.len() > MAX_BLOCK_LEN {
        return (raw, Compression::None);
    }
    match ty {
        Compression::None => (raw, Compression::None),
        Compression::Lz4 => {
            let c = lz4_flex::block::compress_prepend_size(&raw);
            if c.len() < raw.len() - raw.len() / 8 { (c, Compression::Lz4) } else { (raw, Compression::None) }
        }
        Compression::Zstd => {
            let Ok(len) = u32::try_from(raw.len()) else { return (raw, Compression::None) };
            match zstd::bulk::compress(&raw, ZSTD_LEVEL) {
                Ok(z) if z.len() + 4 < raw.len() - raw.len() / 8 => {
                    let mut c = Vec::with_capacity(4 + z.len());
                    c.extend_from_slice(&len.to_le_bytes());
                    c.extend_from_slice(&z);
                    (c, Compression::Zstd)
                }
                // Incompressible (or the encoder refused): stored plain, as RocksDB does.
                _ => (raw, Compression::None),
            }
        }
    }
}

/// Verifies the trailer of `buf` (contents + trailer) and returns the uncompressed contents.
pub fn unwrap_block(mut buf: Vec<u8>) -> Result<Vec<u8>, String> {
    let n = buf.len().checked_sub(TRAILER_LEN).ok_or("block shorter than its trailer")?;
    let ty = buf[n];
    let crc = le_u32(&buf, n + 1).ok_or("short trailer")?;
    if masked_crc2(&buf[..n], &[ty]) != crc {
        return Err("block checksum mismatch".into());
    }
    buf.truncate(n);
    match ty {
        0 => Ok(buf),
        1 => {
            let len = le_u32(&buf, 0).ok_or("short lz4 block")? as usize;
            if len > MAX_BLOCK_LEN {
                return Err("lz4 block claims an impossible length".into());
            }
            lz4_flex::block::decompress_size_prepended(&buf).map_err(|e| format!("lz4: {e}"))
        }
        2 => {
            let len = le_u32(&buf, 0).ok_or("short zstd block")? as usize;
            if len > MAX_BLOCK_LEN {
                return Err("zstd block claims an impossible length".into());
            }
            let out = zstd::bulk::decompress(&buf[4..], len).map_err(|e| format!("zstd: {e}"))?;
            if out.len() != len {
                return Err(format!("zstd block holds {} bytes, its header says {len}", out.len()));
            }
            Ok(out)
        }
        t => Err(format!("unknown compression type {t}")),
    }
}

/// The fixed-size footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// The metaindex block.
    pub metaindex: Handle,
    /// The index block.
    pub index: Handle,
    /// Format version.
    pub version: u32,
}

impl Footer {
    /// `metaindex off u64 | size u64 | index off u64 | size u64 | version u32 | crc u32 | magic u64`, all LE.
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut b = [0u8; FOOTER_LEN];
        b[0..8].copy_from_slice(&self.metaindex.offset.to_le_bytes());
        b[8..16].copy_from_slice(&self.metaindex.size.to_le_bytes());
        b[16..24].copy_from_slice(&self.index.offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.index.size.to_le_bytes());
        b[32..36].copy_from_slice(&self.version.to_le_bytes());
        let crc = masked_crc(&b[0..36]);
        b[36..40].copy_from_slice(&crc.to_le_bytes());
        b[40..48].copy_from_slice(&TABLE_MAGIC.to_le_bytes());
        b
    }

    /// Decodes and checks magic, checksum and version.
    pub fn decode(b: &[u8]) -> Result<Footer, String> {
        if b.len() != FOOTER_LEN {
            return Err("short footer".into());
        }
        if le_u64(b, 40) != Some(TABLE_MAGIC) {
            return Err("bad table magic".into());
        }
        if le_u32(b, 36) != Some(masked_crc(&b[0..36])) {
            return Err("footer checksum mismatch".into());
        }
        let g = |o| le_u64(b, o).unwrap_or(0);
        let version = le_u32(b, 32).unwrap_or(0);
        if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(format!("unsupported table format version {version}"));
        }
        Ok(Footer {
            metaindex: Handle { offset: g(0), size: g(8) },
            index: Handle { offset: g(16), size: g(24) },
            version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_roundtrip_and_checks() {
        let f = Footer {
            metaindex: Handle { offset: 1, size: 2 },
            index: Handle { offset: 300, size: 4000 },
            version: FORMAT_VERSION,
        };
        let b = f.encode();
        assert_eq!(Footer::decode(&b), Ok(f));
        for i in 0..FOOTER_LEN {
            let mut c = b;
            c[i] ^= 4;
            assert!(Footer::decode(&c).is_err());
        }
        // Every version from the oldest on opens; versions on either side are refused (with a valid checksum).
        for version in 0..=FORMAT_VERSION + 1 {
            let g = Footer { version, ..f };
            let supported = (MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version);
            assert_eq!(Footer::decode(&g.encode()).is_ok(), supported, "version {version}");
        }
    }

    fn wrap(c: &[u8], ty: Compression) -> Vec<u8> {
        let mut buf = c.to_vec();
        buf.extend_from_slice(&block_trailer(c, ty));
        buf
    }

    #[test]
    fn block_wrap_unwrap_with_each_compression() {
        let raw: Vec<u8> = (0..4000).map(|i| (i % 13) as u8).collect();
        for want in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let (c, ty) = compress(raw.clone(), want);
            assert_eq!(ty, want);
            let mut buf = wrap(&c, ty);
            assert_eq!(unwrap_block(buf.clone()).unwrap(), raw);
            buf[3] ^= 1;
            assert!(unwrap_block(buf).is_err());
        }
    }

    #[test]
    fn blocks_over_the_claimable_length_are_stored_plain() {
        // Readers refuse a compressed block claiming more than MAX_BLOCK_LEN; such a block would have been
        // unreadable (`regression_a_value_over_64_mib_survives_a_flush`).
        let raw = vec![7u8; MAX_BLOCK_LEN + 1];
        for ty in [Compression::Lz4, Compression::Zstd] {
            let (c, used) = compress(raw.clone(), ty);
            assert_eq!((c.len(), used), (raw.len(), Compression::None), "{ty:?}");
        }
        let (_, used) = compress(vec![7u8; MAX_BLOCK_LEN], Compression::Zstd);
        assert_eq!(used, Compression::Zstd, "a block of exactly the limit still compresses");
    }

    #[test]
    fn incompressible_blocks_are_stored_plain() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let raw: Vec<u8> = (0..4000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for want in [Compression::Lz4, Compression::Zstd] {
            assert_eq!(compress(raw.clone(), want), (raw.clone(), Compression::None));
        }
    }

    /// A block whose checksum holds but whose compressed contents lie (a writer bug, or damage the CRC missed)
    /// is an error, not a panic or a wrong block.
    #[test]
    fn lying_compressed_contents_are_errors() {
        let raw = vec![7u8; 4000];
        let (mut c, ty) = compress(raw, Compression::Zstd);
        c[..4].copy_from_slice(&5000u32.to_le_bytes());
        assert!(unwrap_block(wrap(&c, ty)).is_err());
        c[..4].copy_from_slice(&(MAX_BLOCK_LEN as u32 + 1).to_le_bytes());
        assert!(unwrap_block(wrap(&c, ty)).is_err());
        let junk = [1u8, 0, 0, 0, 0xff, 0xfe];
        assert!(unwrap_block(wrap(&junk, Compression::Zstd)).is_err());
        assert!(unwrap_block(wrap(&junk, Compression::Lz4)).is_err());
        assert!(unwrap_block(wrap(&junk, Compression::None)).is_ok());
        let mut unknown = wrap(&junk, Compression::None);
        let n = unknown.len() - TRAILER_LEN;
        unknown[n] = 9;
        let crc = masked_crc2(&unknown[..n], &[9]).to_le_bytes();
        unknown[n + 1..].copy_from_slice(&crc);
        assert!(unwrap_block(unknown).unwrap_err().contains("unknown compression"));
    }
}
