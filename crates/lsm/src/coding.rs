//! Little-endian fixed-width and LEB128 varint encodings, and the masked CRC32C used by every on-disk record.

/// Appends `v` as a LEB128 varint.
pub fn put_varint(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Appends a varint length followed by the bytes.
pub fn put_len_prefixed(dst: &mut Vec<u8>, b: &[u8]) {
    put_varint(dst, b.len() as u64);
    dst.extend_from_slice(b);
}

/// A cursor over a byte slice that decodes without panicking: every getter returns `None` on short or
/// malformed input.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
}

impl<'a> Decoder<'a> {
    /// Decodes from `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder { buf }
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> &'a [u8] {
        self.buf
    }

    /// Whether everything was consumed.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// A LEB128 varint of at most 10 bytes.
    pub fn varint(&mut self) -> Option<u64> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = *self.buf.get(i)?;
            if i == 9 && b > 1 {
                return None;
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                self.buf = &self.buf[i + 1..];
                return Some(v);
            }
        }
        None
    }

    /// A varint that must fit in `u32`.
    pub fn varint32(&mut self) -> Option<u32> {
        u32::try_from(self.varint()?).ok()
    }

    /// `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Some(a)
    }

    /// A varint length followed by that many bytes.
    pub fn len_prefixed(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        self.bytes(n)
    }

    /// A little-endian u64.
    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.bytes(8)?.try_into().ok()?))
    }

    /// A little-endian u32.
    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.bytes(4)?.try_into().ok()?))
    }

    /// One byte.
    pub fn u8(&mut self) -> Option<u8> {
        Some(self.bytes(1)?[0])
    }
}

/// Reads a little-endian u32 at `off`, `None` if out of range.
pub fn le_u32(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off.checked_add(4)?)?.try_into().ok()?))
}

/// Reads a little-endian u64 at `off`, `None` if out of range.
pub fn le_u64(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off.checked_add(8)?)?.try_into().ok()?))
}

const MASK_DELTA: u32 = 0xa282_ead8;

/// CRC32C of `data`, masked as LevelDB does so that a CRC stored inside checksummed data does not make the outer
/// checksum degenerate.
pub fn masked_crc(data: &[u8]) -> u32 {
    mask(vfs::crc32c::crc32c(data))
}

/// Masked CRC32C of the concatenation `a ++ b`.
pub fn masked_crc2(a: &[u8], b: &[u8]) -> u32 {
    mask(vfs::crc32c::crc32c_append(vfs::crc32c::crc32c(a), b))
}

fn mask(c: u32) -> u32 {
    c.rotate_right(15).wrapping_add(MASK_DELTA)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_roundtrip_and_rejects_overlong() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut d = Decoder::new(&b);
            assert_eq!(d.varint(), Some(v));
            assert!(d.is_empty());
        }
        assert_eq!(Decoder::new(&[0x80; 11]).varint(), None);
        assert_eq!(Decoder::new(&[0x80]).varint(), None);
    }

    #[test]
    fn crc32c_known_value_and_mask_differs() {
        // RFC 3720 test vector: 32 bytes of zeros.
        assert_eq!(vfs::crc32c::crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_ne!(masked_crc(b"foo"), vfs::crc32c::crc32c(b"foo"));
        assert_eq!(masked_crc2(b"fo", b"o"), masked_crc(b"foo"));
    }
}
