//! A byte key kept inside its owner when it is short, for the write buffer's R-tree (`rtree.rs`).
//!
//! A point probe of the buffer compares the key with the bounds of every entry of each node it visits: up to
//! sixteen per node, several nodes per probe. With `Vec<u8>` bounds each comparison loads two heap blocks, and
//! those loads were most of a probe's time. Keys of up to [`INLINE_MAX`] bytes (typical user keys) are stored in
//! the node's own array here, so a node's comparisons read memory that is already adjacent; longer keys fall back
//! to the heap. The type is the same size as a `Vec<u8>` (24 bytes).

use std::cmp::Ordering;

/// Longest key stored inline.
pub const INLINE_MAX: usize = 22;

/// A key: inline when at most [`INLINE_MAX`] bytes, else boxed. Which form a key takes depends only on its length,
/// so the derived equality is equality of the bytes.
#[derive(Clone, PartialEq, Eq)]
pub enum InlineKey {
    /// `len` bytes at the start of `b`; the rest are zero.
    Inline {
        /// Length in bytes.
        len: u8,
        /// The bytes.
        b: [u8; INLINE_MAX],
    },
    /// A key longer than [`INLINE_MAX`].
    Heap(Box<[u8]>),
}

impl InlineKey {
    /// `k` in the form its length calls for.
    pub fn new(k: &[u8]) -> Self {
        if k.len() <= INLINE_MAX {
            let mut b = [0u8; INLINE_MAX];
            b[..k.len()].copy_from_slice(k);
            InlineKey::Inline { len: k.len() as u8, b }
        } else {
            InlineKey::Heap(k.into())
        }
    }

    /// The key's bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        match self {
            InlineKey::Inline { len, b } => &b[..usize::from(*len)],
            InlineKey::Heap(k) => k,
        }
    }
}

impl Ord for InlineKey {
    fn cmp(&self, o: &Self) -> Ordering {
        self.as_slice().cmp(o.as_slice())
    }
}

impl PartialOrd for InlineKey {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl std::fmt::Debug for InlineKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_their_bytes_and_order_in_either_form() {
        assert_eq!(std::mem::size_of::<InlineKey>(), std::mem::size_of::<Vec<u8>>());
        let keys: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            b"a".to_vec(),
            b"a\0".to_vec(),
            vec![b'k'; INLINE_MAX],
            vec![b'k'; INLINE_MAX + 1],
            [vec![b'k'; INLINE_MAX], vec![0]].concat(),
            vec![0xff; 40],
        ];
        for a in &keys {
            let ka = InlineKey::new(a);
            assert_eq!(ka.as_slice(), a.as_slice());
            assert_eq!(matches!(ka, InlineKey::Inline { .. }), a.len() <= INLINE_MAX);
            for b in &keys {
                let kb = InlineKey::new(b);
                assert_eq!(ka.cmp(&kb), a.cmp(b), "{a:?} against {b:?}");
                assert_eq!(ka == kb, a == b);
            }
        }
    }
}
