//! A compact, fast-comparing byte-string key for memtables.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;

use crate::heap_size::HeapSize;

/// An owned byte string ordered lexicographically, laid out for B-tree search.
///
/// 24 bytes inline: the first eight bytes of the string as a big-endian integer (zero padded), then the whole
/// string in one exact-size heap allocation (no capacity word, no slack). Most comparisons between two `ByteKey`s
/// are decided by the integer prefix, which sits in the leaf's key array next to the neighbouring keys, so a block
/// or log scan touches the heap only for keys that share their first eight bytes.
///
/// Why the padded prefix is order-consistent: if two prefixes differ at byte `j`, either both strings have byte
/// `j` (and differ there), or the shorter one ended before `j` and reads a padding zero below the other's byte,
/// and a proper prefix sorts first. Equal prefixes fall back to comparing the full slices. So `Ord` agrees with
/// `[u8]`'s order, which `Borrow<[u8]>` requires: lookups may pass a plain `&[u8]`.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct ByteKey {
    prefix: u64,
    bytes: Box<[u8]>,
}

impl ByteKey {
    /// Copies `bytes` into a new key.
    pub fn new(bytes: &[u8]) -> Self {
        ByteKey { prefix: prefix_of(bytes), bytes: bytes.into() }
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the key is the empty string.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Takes the bytes back out.
    pub fn into_boxed_bytes(self) -> Box<[u8]> {
        self.bytes
    }
}

fn prefix_of(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let n = bytes.len().min(8);
    buf[..n].copy_from_slice(&bytes[..n]);
    u64::from_be_bytes(buf)
}

impl Ord for ByteKey {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        match self.prefix.cmp(&other.prefix) {
            Ordering::Equal => self.bytes.cmp(&other.bytes),
            unequal => unequal,
        }
    }
}

impl PartialOrd for ByteKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Borrow<[u8]> for ByteKey {
    fn borrow(&self) -> &[u8] {
        &self.bytes
    }
}

impl From<&[u8]> for ByteKey {
    fn from(bytes: &[u8]) -> Self {
        ByteKey::new(bytes)
    }
}

impl From<Vec<u8>> for ByteKey {
    fn from(bytes: Vec<u8>) -> Self {
        ByteKey { prefix: prefix_of(&bytes), bytes: bytes.into_boxed_slice() }
    }
}

impl From<Box<[u8]>> for ByteKey {
    fn from(bytes: Box<[u8]>) -> Self {
        ByteKey { prefix: prefix_of(&bytes), bytes }
    }
}

impl AsRef<[u8]> for ByteKey {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl fmt::Debug for ByteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ByteKey({:?})", self.bytes.escape_ascii().to_string())
    }
}

impl HeapSize for ByteKey {
    fn heap_size(&self) -> usize {
        self.bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_matches_slices() {
        let samples: Vec<&[u8]> = vec![
            b"",
            b"\0",
            b"a",
            b"a\0",
            b"a\0\x01",
            b"ab",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefghi",
            b"abcdefgi",
            b"\xff",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        ];
        for a in &samples {
            for b in &samples {
                assert_eq!(ByteKey::new(a).cmp(&ByteKey::new(b)), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }
}
