//! The table record: `varint klen, varint vlen, key, value, crc32c` (see `docs/formats/flexdb.md`).
//!
//! The table holds live records only: deletes remove bytes from the file (collapse), so there is no tombstone in
//! the table and an empty value is an ordinary record with `vlen = 0`. The trailing CRC32C (little-endian, over
//! every preceding byte of the record) lets a read tell a damaged record from a short value.

use crate::error::{Error, Result};

/// Longest key accepted (keys live in the index and the cache; 64 KiB keeps intervals sane).
pub const MAX_KEY_LEN: usize = 64 << 10;
/// Longest value accepted (a value is one logical run of bytes in the FlexFile; 1 GiB bounds memory per read).
pub const MAX_VALUE_LEN: usize = 1 << 30;

/// Appends `v` as a base-128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Decodes a varint at the start of `buf`: the value and its length, or `None` if truncated, over 10 bytes or
/// not in its shortest form.
pub fn get_varint(buf: &[u8]) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for (i, &b) in buf.iter().enumerate().take(10) {
        let part = (b & 0x7f) as u64;
        if i == 9 && part > 1 {
            return None;
        }
        v |= part << (7 * i);
        if b & 0x80 == 0 {
            // Only the shortest encoding is valid, so every decodable record has exactly one byte form.
            if i > 0 && b == 0 {
                return None;
            }
            return Some((v, i + 1));
        }
    }
    None
}

/// Bytes [`put_varint`] writes for `v`.
pub(crate) fn varint_len(v: u64) -> usize {
    let mut n = 1;
    let mut v = v >> 7;
    while v > 0 {
        n += 1;
        v >>= 7;
    }
    n
}

/// Encoded length of a record.
pub fn encoded_len(key: &[u8], value: &[u8]) -> usize {
    varint_len(key.len() as u64) + varint_len(value.len() as u64) + key.len() + value.len() + 4
}

/// Appends the record for `(key, value)` to `out`.
pub fn encode(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    out.reserve(encoded_len(key, value));
    let start = out.len();
    put_varint(out, key.len() as u64);
    put_varint(out, value.len() as u64);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let crc = vfs::crc32c::crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// The header of a record: key length, value length, header length. `None` if `buf` is too short to tell.
pub fn decode_header(buf: &[u8]) -> Result<Option<(usize, usize, usize)>> {
    let Some((klen, a)) = get_varint(buf) else {
        return if buf.len() >= 10 {
            Err(Error::corruption("table", "bad key length varint"))
        } else {
            Ok(None)
        };
    };
    let Some((vlen, b)) = get_varint(&buf[a..]) else {
        return if buf.len() >= a + 10 {
            Err(Error::corruption("table", "bad value length varint"))
        } else {
            Ok(None)
        };
    };
    if klen as usize > MAX_KEY_LEN || vlen as usize > MAX_VALUE_LEN {
        return Err(Error::corruption(
            "table",
            format!("record lengths out of range: key {klen}, value {vlen}"),
        ));
    }
    Ok(Some((klen as usize, vlen as usize, a + b)))
}

/// One decoded record.
pub type Rec = (Box<[u8]>, Box<[u8]>);

#[cfg(test)]
mod tests {
    use super::*;

    /// Records decoded the way the table reads them (`Interval::decode` checks every checksum and the order).
    fn decode_all(buf: &[u8]) -> Result<Vec<Rec>> {
        Ok(crate::interval::Interval::decode(buf.to_vec())?.to_recs())
    }

    #[test]
    fn roundtrip_including_empty_value() {
        let mut buf = Vec::new();
        encode(&mut buf, b"a", b"");
        encode(&mut buf, b"b", &[7u8; 300]);
        assert_eq!(buf.len(), encoded_len(b"a", b"") + encoded_len(b"b", &[7u8; 300]));
        let recs = decode_all(&buf).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(&*recs[0].1, b"");
        assert_eq!(recs[1].1.len(), 300);
    }

    #[test]
    fn golden_bytes() {
        let mut buf = Vec::new();
        encode(&mut buf, b"cat", b"abcd");
        assert_eq!(&buf[..9], &[3, 4, b'c', b'a', b't', b'a', b'b', b'c', b'd']);
        assert_eq!(buf.len(), 13);
    }

    #[test]
    fn corruption_detected() {
        let mut buf = Vec::new();
        encode(&mut buf, b"key", b"value");
        for i in 0..buf.len() {
            let mut b = buf.clone();
            b[i] ^= 0x40;
            assert!(decode_all(&b).is_err(), "flip at {i} undetected");
        }
    }

    #[test]
    fn overlong_varints_are_rejected() {
        assert_eq!(get_varint(&[0x80, 0x00]), None);
        assert_eq!(get_varint(&[0x81, 0x00]), None);
        assert_eq!(get_varint(&[0x80, 0x01]), Some((128, 2)));
    }

    #[test]
    fn varints() {
        for v in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(get_varint(&b), Some((v, b.len())));
            assert_eq!(b.len(), varint_len(v));
        }
    }
}
