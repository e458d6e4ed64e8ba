//! The log-structured leaf of the single-threaded index (§4.1, Fig. 8(b)).

use crate::{BlockRange, RangeValue};

/// Arena index of a leaf; `NIL` is "no leaf".
pub(crate) type LeafId = u32;
pub(crate) const NIL: LeafId = u32::MAX;

/// A leaf: a *range array* and a *value array* appended to in write order (newest last), the anchor key that
/// starts its range space, and links to its neighbours.
///
/// Invariants (checked by `Rask::check_invariants`):
/// - every range lies in the leaf's range space `[anchor, next.anchor - 1]` (the last leaf's ends at `u64::MAX`),
///   and the leftmost leaf's anchor is 0, so the leaves partition the block space;
/// - `ranges.len() == values.len() <= capacity` between operations; both arrays are allocated at the capacity once
///   and never reallocate (GC rewrites them in place);
/// - for any block, the newest entry covering it holds its current value (a tombstone: unmapped).
///
/// The paper's 8-byte header carries the entry count and concurrency bits; here the count is the arrays' length
/// and the header keeps `N_frag`, the number of fragmented inserts (and deletes) since the last merge/resplit.
#[derive(Debug)]
pub(crate) struct Leaf<V> {
    pub(crate) n_frag: u32,
    pub(crate) anchor: u64,
    /// Last block of the range space (the next leaf's anchor − 1, or `u64::MAX`), cached so a put or get does not
    /// touch the next leaf just to clip its range.
    pub(crate) end: u64,
    pub(crate) prev: LeafId,
    pub(crate) next: LeafId,
    pub(crate) ranges: Vec<BlockRange>,
    pub(crate) values: Vec<V>,
}

impl<V: RangeValue> Leaf<V> {
    pub(crate) fn new(anchor: u64, capacity: usize) -> Leaf<V> {
        Leaf {
            n_frag: 0,
            anchor,
            end: u64::MAX,
            prev: NIL,
            next: NIL,
            ranges: Vec::with_capacity(capacity),
            values: Vec::with_capacity(capacity),
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.ranges.len()
    }

    #[inline]
    pub(crate) fn append(&mut self, r: BlockRange, v: V) {
        self.ranges.push(r);
        self.values.push(v);
    }

    /// Drops the entries marked in `dead`, shifting the others forward in order.
    pub(crate) fn compact(&mut self, dead: &[bool]) {
        let mut i = 0;
        self.ranges.retain(|_| {
            i += 1;
            !dead[i - 1]
        });
        let mut i = 0;
        self.values.retain(|_| {
            i += 1;
            !dead[i - 1]
        });
    }

    /// Moves the entries out (oldest first), leaving the arrays empty with their allocation.
    pub(crate) fn take_entries(&mut self) -> Vec<(BlockRange, V)> {
        self.ranges.drain(..).zip(self.values.drain(..)).collect()
    }

    /// Replaces the entries. More than `capacity` entries is allowed transiently (a normal GC that divides ranges
    /// around tombstones can produce more pieces than it removes); the arrays shrink back once a split fixes it.
    pub(crate) fn set_entries(&mut self, entries: Vec<(BlockRange, V)>, capacity: usize) {
        self.ranges.clear();
        self.values.clear();
        for (r, v) in entries {
            self.ranges.push(r);
            self.values.push(v);
        }
        if self.ranges.capacity() > capacity && self.ranges.len() <= capacity {
            self.ranges.shrink_to(capacity);
            self.values.shrink_to(capacity);
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.ranges.capacity() * size_of::<BlockRange>()
            + self.values.capacity() * size_of::<V>()
            + self.values.iter().map(|v| v.heap_size()).sum::<usize>()
    }
}
