//! A compact, fast-comparing byte-string key for memtables.

use std::alloc::{self, Layout};
use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ptr;
use std::slice;

use crate::heap_size::HeapSize;
use crate::probe::{Fingerprint, PointProbe, Probe, fingerprint_head};

/// Bytes of the length word at the start of a heap key's allocation (little-endian `u32`).
const LEN_BYTES: usize = 4;

/// Keys up to this long live entirely inside the `ByteKey` (no allocation).
pub(crate) const INLINE_MAX: usize = 16;

/// An owned byte string ordered lexicographically, laid out for B-tree search and to be small.
///
/// 24 bytes inline:
///
/// ```text
///   head: [u8; 16]  the first 16 bytes of the string, zero padded (compared as a big-endian integer)
///   tail: *mut u8   odd:  an inline key; the length is tail >> 1 (0..=16) and head holds every byte
///                   even: a heap key; tail points to one exact-size allocation [len: u32 LE][all the bytes]
/// ```
///
/// Most comparisons between two `ByteKey`s are decided by the head integer, which sits in the leaf's key array
/// next to the neighbouring keys, so a block or log scan touches the heap only for keys that share their first
/// sixteen bytes. Keys of at most 16 bytes never allocate, and a search for one compares bytes held in the leaf's
/// own array. The head was 8 bytes (a 16-byte `ByteKey`) until 2026-11: db_bench-shaped keys (`user` and 12
/// digits) share their first 8 bytes across the first 10^8 indexes, so every comparison went through the heap
/// copy: a memtable lookup among 80 k such keys took 518 ns, against 301 ns with the 16-byte head (both searching
/// with a [`ByteProbe`]; `docs/bptree.md` has the measurement). Longer keys allocate `4 + len`
/// bytes once, with no capacity word and no slack: with 17-64-byte keys a `ByteKey` entry costs 24 + 4 + len bytes,
/// where a `Vec<u8>` or `Box<[u8]>` key costs 24 or 16 + len and compares through a pointer. The heap copy keeps
/// the whole string, the first 16 bytes included, so [`ByteKey::as_bytes`] is one slice.
///
/// Why the padded head is order-consistent: if two heads differ at byte `j`, either both strings have byte `j`
/// (and differ there), or the shorter one ended before `j` and reads a padding zero below the other's byte, and a
/// proper prefix sorts first. Equal heads fall back to comparing the full slices. So `Ord` agrees with `[u8]`'s
/// order, and `Eq` and `Hash` are those of the slice, which `Borrow<[u8]>` requires: lookups may pass `&[u8]`.
///
/// REQUIRES: keys shorter than 4 GiB (the length word is 32 bits; [`ByteKey::new`] panics beyond).
#[repr(C)]
pub struct ByteKey {
    head: [u8; INLINE_MAX],
    tail: *mut u8,
}

// SAFETY: a `ByteKey` owns its allocation exclusively (like `Box<[u8]>`), never shares it, and offers only shared
// reads through `&self`; no interior mutability. Moving it or reading it from several threads is therefore safe.
unsafe impl Send for ByteKey {}
// SAFETY: as above.
unsafe impl Sync for ByteKey {}

fn heap_layout(len: usize) -> Layout {
    Layout::from_size_align(LEN_BYTES + len, LEN_BYTES)
        .unwrap_or_else(|_| panic!("ByteKey of {len} bytes exceeds the address space"))
}

fn inline_tail(len: usize) -> *mut u8 {
    ptr::without_provenance_mut((len << 1) | 1)
}

impl ByteKey {
    /// Copies `bytes` into a new key.
    pub fn new(bytes: &[u8]) -> Self {
        let mut head = [0u8; INLINE_MAX];
        let n = bytes.len().min(INLINE_MAX);
        head[..n].copy_from_slice(&bytes[..n]);
        if bytes.len() <= INLINE_MAX {
            return ByteKey { head, tail: inline_tail(bytes.len()) };
        }
        let len = u32::try_from(bytes.len()).unwrap_or_else(|_| panic!("ByteKey longer than 4 GiB"));
        let layout = heap_layout(bytes.len());
        // SAFETY: the layout has a non-zero size (at least LEN_BYTES).
        let p = unsafe { alloc::alloc(layout) };
        if p.is_null() {
            alloc::handle_alloc_error(layout);
        }
        // SAFETY: `p` is valid for writes of `LEN_BYTES + len` bytes and aligned for a `u32`; the source slice
        // cannot overlap a fresh allocation.
        unsafe {
            p.cast::<[u8; LEN_BYTES]>().write(len.to_le_bytes());
            ptr::copy_nonoverlapping(bytes.as_ptr(), p.add(LEN_BYTES), bytes.len());
        }
        ByteKey { head, tail: p }
    }

    #[inline]
    fn is_inline(&self) -> bool {
        self.tail.addr() & 1 == 1
    }

    /// The key's bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        if self.is_inline() {
            return &self.head[..self.tail.addr() >> 1];
        }
        // SAFETY: an even tail points to a live allocation this key owns, written by `new` as a length word
        // followed by that many bytes; it is freed only by `drop`, which needs `&mut self`.
        unsafe {
            let len = u32::from_le_bytes(self.tail.cast::<[u8; LEN_BYTES]>().read()) as usize;
            slice::from_raw_parts(self.tail.add(LEN_BYTES), len)
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Whether the key is the empty string.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the bytes out.
    pub fn into_boxed_bytes(self) -> Box<[u8]> {
        self.as_bytes().into()
    }

    /// The first sixteen bytes as an integer whose order is the strings' order (up to ties).
    #[inline]
    fn head_int(&self) -> u128 {
        u128::from_be_bytes(self.head)
    }
}

/// A lookup key prepared for searching `ByteKey`s ([`ByteKey::probe`]): its head integer is computed once, so a
/// comparison with a stored key is one 16-byte integer comparison unless the two share their first 16 bytes.
/// Searching with the plain `&[u8]` instead builds a slice of every stored key and calls `memcmp` on it, which
/// cost a memtable lookup a third of its time in an unsorted block's equality scan.
#[derive(Debug, Clone, Copy)]
pub struct ByteProbe<'a> {
    head: u128,
    /// `tail` of the equal `ByteKey` if that key is inline; 0 (no inline tag) otherwise.
    inline_tag: usize,
    bytes: &'a [u8],
}

impl ByteKey {
    /// `bytes` prepared as a lookup key for trees of `ByteKey`s (`get_with(&ByteKey::probe(k), ..)`).
    #[inline]
    pub fn probe(bytes: &[u8]) -> ByteProbe<'_> {
        let mut head = [0u8; INLINE_MAX];
        let n = bytes.len().min(INLINE_MAX);
        head[..n].copy_from_slice(&bytes[..n]);
        let inline_tag = if bytes.len() <= INLINE_MAX { inline_tail(bytes.len()).addr() } else { 0 };
        ByteProbe { head: u128::from_be_bytes(head), inline_tag, bytes }
    }
}

impl Probe<ByteKey> for ByteProbe<'_> {
    #[inline]
    fn cmp_to(&self, key: &ByteKey) -> Ordering {
        match self.head.cmp(&key.head_int()) {
            Ordering::Equal => self.bytes.cmp(key.as_bytes()),
            unequal => unequal,
        }
    }

    #[inline]
    fn eq_to(&self, key: &ByteKey) -> bool {
        if self.head != key.head_int() {
            return false;
        }
        // Equal heads: an inline key is equal iff it has the same length (its tag says so); a heap key only
        // equals a probe longer than the head, and then byte for byte.
        if self.inline_tag != 0 {
            return key.tail.addr() == self.inline_tag;
        }
        !key.is_inline() && self.bytes == key.as_bytes()
    }
}

impl PointProbe<ByteKey> for ByteProbe<'_> {
    #[inline]
    fn key_fingerprint(&self) -> u8 {
        fingerprint_head(self.head)
    }
}

/// The digest of the inline head, so a `ByteKey`, its bytes and its [`ByteProbe`] agree (see [`Fingerprint`]).
impl Fingerprint for ByteKey {
    #[inline]
    fn fingerprint(&self) -> u8 {
        fingerprint_head(self.head_int())
    }
}

impl Drop for ByteKey {
    fn drop(&mut self) {
        if !self.is_inline() {
            let layout = heap_layout(self.len());
            // SAFETY: the allocation was made by `new` with this same layout (same length) and is freed once.
            unsafe { alloc::dealloc(self.tail, layout) };
        }
    }
}

impl Clone for ByteKey {
    fn clone(&self) -> Self {
        if self.is_inline() {
            return ByteKey { head: self.head, tail: self.tail };
        }
        ByteKey::new(self.as_bytes())
    }
}

impl Default for ByteKey {
    fn default() -> Self {
        ByteKey { head: [0; INLINE_MAX], tail: inline_tail(0) }
    }
}

impl PartialEq for ByteKey {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.head == other.head && self.as_bytes() == other.as_bytes()
    }
}

impl Eq for ByteKey {}

impl Hash for ByteKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl Ord for ByteKey {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        match self.head_int().cmp(&other.head_int()) {
            Ordering::Equal => self.as_bytes().cmp(other.as_bytes()),
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
        self.as_bytes()
    }
}

impl From<&[u8]> for ByteKey {
    fn from(bytes: &[u8]) -> Self {
        ByteKey::new(bytes)
    }
}

impl From<Vec<u8>> for ByteKey {
    fn from(bytes: Vec<u8>) -> Self {
        ByteKey::new(&bytes)
    }
}

impl From<Box<[u8]>> for ByteKey {
    fn from(bytes: Box<[u8]>) -> Self {
        ByteKey::new(&bytes)
    }
}

impl AsRef<[u8]> for ByteKey {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl fmt::Debug for ByteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ByteKey({:?})", self.as_bytes().escape_ascii().to_string())
    }
}

impl HeapSize for ByteKey {
    fn heap_size(&self) -> usize {
        if self.is_inline() { 0 } else { LEN_BYTES + self.len() }
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
            b"abcdefghijklmnop",
            b"abcdefghijklmnop\0",
            b"abcdefghijklmnopq",
            b"abcdefghijklmnoq",
            b"user000000000042",
            b"user000000000043",
            b"\xff",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        ];
        for a in &samples {
            for b in &samples {
                assert_eq!(ByteKey::new(a).cmp(&ByteKey::new(b)), a.cmp(b), "{a:?} vs {b:?}");
                assert_eq!(ByteKey::new(a) == ByteKey::new(b), a == b, "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn probes_order_and_equal_like_slices() {
        let samples: Vec<Vec<u8>> = [
            &b""[..],
            b"\0",
            b"a",
            b"a\0",
            b"abcdefghijklmno",
            b"abcdefghijklmnop",
            b"abcdefghijklmnop\0",
            b"abcdefghijklmnopq",
            b"abcdefghijklmnoq",
            b"abcdefghijklmnopqrstuvwxyz",
            b"user000000000042",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        ]
        .iter()
        .map(|s| s.to_vec())
        .collect();
        for a in &samples {
            let p = ByteKey::probe(a);
            for b in &samples {
                let k = ByteKey::new(b);
                assert_eq!(p.cmp_to(&k), a.as_slice().cmp(b.as_slice()), "{a:?} vs {b:?}");
                assert_eq!(p.eq_to(&k), a == b, "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn inline_and_heap_forms_round_trip() {
        assert_eq!(std::mem::size_of::<ByteKey>(), 24);
        let mut all = Vec::new();
        for len in 0..40usize {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + len) as u8).collect();
            let k = ByteKey::new(&bytes);
            assert_eq!(k.as_bytes(), &bytes[..]);
            assert_eq!(k.len(), len);
            assert_eq!(k.heap_size(), if len <= INLINE_MAX { 0 } else { LEN_BYTES + len });
            let c = k.clone();
            assert_eq!(c, k);
            assert_eq!(c.as_bytes(), &bytes[..]);
            assert_eq!(ByteKey::from(bytes.clone()).into_boxed_bytes(), bytes.clone().into_boxed_slice());
            let b: &[u8] = k.borrow();
            assert_eq!(b, &bytes[..]);
            all.push((k, bytes));
        }
        // Moving keys around (as leaves do) keeps them intact; dropping frees each allocation once.
        all.reverse();
        for (k, bytes) in &all {
            assert_eq!(k.as_bytes(), &bytes[..]);
        }
        assert!(ByteKey::default().is_empty());
    }

    #[test]
    fn hash_is_the_slice_hash() {
        use std::collections::hash_map::DefaultHasher;
        let h = |x: &dyn Fn(&mut DefaultHasher)| {
            let mut s = DefaultHasher::new();
            x(&mut s);
            s.finish()
        };
        for bytes in [&b""[..], b"abc", b"abcdefghijklmnop"] {
            let k = ByteKey::new(bytes);
            assert_eq!(h(&|s| k.hash(s)), h(&|s| bytes.hash(s)));
        }
    }
}
