//! A memtable key's versions (`Versions`): the value type of the memtable's BP-tree.

use bptree::HeapSize;

/// The versions of one user key, newest (largest trailer) first, each version `[trailer: u64 LE][value length:
/// u32 LE][value]`, packed into exact-size segments.
///
/// Why packed: a `Vec<(trailer, Box<[u8]>)>` cost a 24-byte leaf slot, a 24-byte element allocation and the
/// value's own allocation per entry (191 requested bytes per 16-byte key with a 100-byte value, memtable
/// included); a segment costs a 16-byte slot and `12 + value` bytes, and the write path makes one allocation per
/// entry. A new version of a key with few versions copies them into its new segment (the tree has no in-place
/// update, and the old list form cloned and grew it anyway).
///
/// Why segments: that copy grew with the list, so a key updated `n` times in one memtable cost `O(n^2)` bytes
/// copied: 32,000 updates of one key took 37 s (1.2 ms each, against 1 µs for new keys). A segment is copied
/// only while it holds at most `SEGMENT_MAX` (512) bytes; past that the new version starts a new segment in front of
/// the old list (`Chain`), so an update copies a bounded number of bytes whatever the key's history.
#[derive(Debug)]
pub(crate) enum Versions {
    /// One segment: every version of the key.
    Flat(Box<[u8]>),
    /// A newest segment in front of the older versions.
    Chain(Box<Chain>),
}

/// A segment of a key's newest versions and the older ones behind it.
#[derive(Debug)]
pub(crate) struct Chain {
    pub(super) newest: Box<[u8]>,
    pub(super) older: Versions,
    /// `older.heap_size()`, kept so that a list's size is found in constant time (the tree asks on every write).
    older_heap: usize,
}

/// Bytes a segment may hold and still be copied into a new version's segment (a few versions of the usual sizes).
pub(super) const SEGMENT_MAX: usize = 512;

// The chained form costs no slot space: the `Chain` variant sits in the niche of the segment's pointer.
const _: () = assert!(std::mem::size_of::<Versions>() == 16);

/// Bytes of a version's header (trailer and value length).
pub(super) const VERSION_HEADER: usize = 12;

impl Clone for Versions {
    /// A copy in one segment, built in a loop (a derived clone would recurse once per segment). Copies are only
    /// read: the tree hands them to backward iterators' buffers.
    fn clone(&self) -> Self {
        match self {
            Versions::Flat(b) => Versions::Flat(b.clone()),
            Versions::Chain(_) => {
                let mut b = Vec::with_capacity(self.heap_size());
                for (t, v) in self.iter() {
                    b.extend_from_slice(&t.to_le_bytes());
                    b.extend_from_slice(&(v.len() as u32).to_le_bytes());
                    b.extend_from_slice(v);
                }
                Versions::Flat(b.into_boxed_slice())
            }
        }
    }
}

impl Default for Versions {
    fn default() -> Self {
        Versions::Flat(Box::default())
    }
}

impl Drop for Chain {
    /// Drops the segments behind this one in a loop: a hot key's list can be thousands of segments long, and the
    /// recursive drop would run the dropping thread out of stack.
    fn drop(&mut self) {
        let mut next = std::mem::take(&mut self.older);
        while let Versions::Chain(mut c) = next {
            next = std::mem::take(&mut c.older);
        }
    }
}

impl Versions {
    /// `(trailer, value)` newest first.
    pub(super) fn iter(&self) -> VersionsIter<'_> {
        let (seg, rest) = self.split();
        VersionsIter { seg, rest }
    }

    /// The newest segment and what lies behind it.
    fn split(&self) -> (&[u8], Option<&Versions>) {
        match self {
            Versions::Flat(b) => (b, None),
            Versions::Chain(c) => (&c.newest, Some(&c.older)),
        }
    }

    /// One version as a segment of its own.
    fn segment(front: &[u8], trailer: u64, value: &[u8]) -> Box<[u8]> {
        let mut b = Vec::with_capacity(VERSION_HEADER + value.len() + front.len());
        b.extend_from_slice(&trailer.to_le_bytes());
        b.extend_from_slice(&(value.len() as u32).to_le_bytes());
        b.extend_from_slice(value);
        b.extend_from_slice(front);
        b.into_boxed_slice()
    }

    /// A key's first version.
    pub(super) fn first(trailer: u64, value: &[u8]) -> Versions {
        Versions::Flat(Self::segment(&[], trailer, value))
    }

    /// Puts `(trailer, value)` in front. REQUIRES: `trailer` larger than every trailer in the list.
    pub(super) fn push(&mut self, trailer: u64, value: &[u8]) {
        match self {
            Versions::Flat(b) if b.len() <= SEGMENT_MAX => *b = Self::segment(b, trailer, value),
            Versions::Chain(c) if c.newest.len() <= SEGMENT_MAX => {
                c.newest = Self::segment(&c.newest, trailer, value);
            }
            _ => {
                let older = std::mem::take(self);
                let older_heap = older.heap_size();
                *self = Versions::Chain(Box::new(Chain {
                    newest: Self::segment(&[], trailer, value),
                    older,
                    older_heap,
                }));
            }
        }
    }
}

/// Cursor over a version list, segment by segment. Segments are only ever built by [`Versions::segment`], so
/// they are well formed; a short remainder ends the segment rather than panicking.
pub(super) struct VersionsIter<'a> {
    seg: &'a [u8],
    rest: Option<&'a Versions>,
}

impl<'a> Iterator for VersionsIter<'a> {
    type Item = (u64, &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(head) = self.seg.get(..VERSION_HEADER) {
                let t = u64::from_le_bytes(head[..8].try_into().ok()?);
                let n = u32::from_le_bytes(head[8..].try_into().ok()?) as usize;
                let v = self.seg.get(VERSION_HEADER..VERSION_HEADER + n)?;
                self.seg = &self.seg[VERSION_HEADER + n..];
                return Some((t, v));
            }
            (self.seg, self.rest) = self.rest?.split();
        }
    }
}

impl HeapSize for Versions {
    fn heap_size(&self) -> usize {
        match self {
            Versions::Flat(b) => b.len(),
            Versions::Chain(c) => std::mem::size_of::<Chain>() + c.newest.len() + c.older_heap,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list of thousands of segments (versions larger than a segment each) is dropped in a loop: on a thread
    /// with a 64 KiB stack, a drop recursing once per segment overflows it.
    #[test]
    fn a_long_version_chain_drops_without_recursion() {
        let t = std::thread::Builder::new().stack_size(64 << 10).spawn(|| {
            let mut vs = Versions::first(1 << 8, &[7; SEGMENT_MAX + 1]);
            for i in 2..=20_000u64 {
                vs.push(i << 8, &[7; SEGMENT_MAX + 1]);
            }
            assert_eq!(vs.iter().count(), 20_000);
            drop(vs);
        });
        t.unwrap().join().unwrap();
    }
}
