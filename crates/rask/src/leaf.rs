//! The log-structured leaf of the single-threaded index (§4.1, Fig. 8(b)).

use crate::{BlockRange, RangeValue};

/// Arena index of a leaf; `NIL` is "no leaf".
pub(crate) type LeafId = u32;
pub(crate) const NIL: LeafId = u32::MAX;

/// Largest value a narrow range field holds.
const NARROW_MAX: u64 = u32::MAX as u64;

/// A leaf: a *range array* and a *value array* appended to in write order (newest last), the anchor key that
/// starts its range space, and links to its neighbours.
///
/// **Range array encoding.** Every entry lies inside the leaf's range space, which starts at the anchor, so a
/// range is stored relative to it: one `u64` word per entry, `(first − anchor) << 32 | (last − first)` (the
/// *narrow* form, 8 bytes instead of 16; the same idea as a B-tree's prefix truncation). A leaf whose entries do
/// not all fit (an offset or a length of 2³² blocks or more — a sparse first or last leaf, or a 16 TiB write)
/// switches to the *wide* form, two words `first, last` per entry; GC, split and merge rebuild the array and go
/// back to narrow when everything fits again. Both arrays are allocated once at the leaf capacity and never grow
/// (a transiently oversized leaf, see `set_entries`, is the exception); the value array is a `Vec` whose length is
/// the entry count (the paper's header count).
///
/// Invariants (checked by `Rask::check_invariants`):
/// - every range lies in the leaf's range space `[anchor, next.anchor - 1]` (the last leaf's ends at `u64::MAX`),
///   and the leftmost leaf's anchor is 0, so the leaves partition the block space;
/// - `values.len()` entries are encoded in `words` (one word each when narrow, two when wide);
/// - for any block, the newest entry covering it holds its current value (a tombstone: unmapped).
#[derive(Debug)]
pub(crate) struct Leaf<V> {
    pub(crate) anchor: u64,
    /// Last block of the range space (the next leaf's anchor − 1, or `u64::MAX`), cached so a put or get does not
    /// touch the next leaf just to clip its range.
    pub(crate) end: u64,
    pub(crate) prev: LeafId,
    pub(crate) next: LeafId,
    /// `N_frag`: fragmented inserts (and deletes) since the last merge/resplit.
    pub(crate) n_frag: u32,
    wide: bool,
    words: Box<[u64]>,
    values: Vec<V>,
}

impl<V: RangeValue> Leaf<V> {
    pub(crate) fn new(anchor: u64, capacity: usize) -> Leaf<V> {
        Leaf {
            anchor,
            end: u64::MAX,
            prev: NIL,
            next: NIL,
            n_frag: 0,
            wide: false,
            words: vec![0; capacity].into_boxed_slice(),
            values: Vec::with_capacity(capacity),
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    /// The `i`-th range (append order).
    #[inline]
    pub(crate) fn range(&self, i: usize) -> BlockRange {
        if self.wide {
            BlockRange::raw(self.words[2 * i], self.words[2 * i + 1])
        } else {
            let w = self.words[i];
            let first = self.anchor + (w >> 32);
            BlockRange::raw(first, first + (w & NARROW_MAX))
        }
    }

    #[inline]
    pub(crate) fn value(&self, i: usize) -> &V {
        &self.values[i]
    }

    #[inline]
    pub(crate) fn values(&self) -> &[V] {
        &self.values
    }

    /// Whether `r` has a narrow encoding relative to `anchor`. REQUIRES: `r.first() >= anchor`.
    #[inline]
    fn fits(anchor: u64, r: BlockRange) -> bool {
        r.first() - anchor <= NARROW_MAX && r.last() - r.first() <= NARROW_MAX
    }

    #[inline]
    fn narrow(anchor: u64, r: BlockRange) -> u64 {
        ((r.first() - anchor) << 32) | (r.last() - r.first())
    }

    /// Appends an entry. REQUIRES: `r` inside the range space, `len() < capacity`.
    #[inline]
    pub(crate) fn append(&mut self, r: BlockRange, v: V) {
        let n = self.values.len();
        if !self.wide && !Self::fits(self.anchor, r) {
            self.widen(n + 1);
        } else if n >= self.slots() {
            // Unreachable while leaves hold at most their capacity between operations; growing keeps an
            // oversized leaf correct instead of indexing past the array.
            let mut w = vec![0u64; 2 * self.words.len().max(1)].into_boxed_slice();
            w[..self.words.len()].copy_from_slice(&self.words);
            self.words = w;
        }
        if self.wide {
            self.words[2 * n] = r.first();
            self.words[2 * n + 1] = r.last();
        } else {
            self.words[n] = Self::narrow(self.anchor, r);
        }
        self.values.push(v);
    }

    /// Re-encodes the first `len()` entries in the wide form, in an array for at least `slots` entries.
    fn widen(&mut self, slots: usize) {
        let slots = slots.max(self.words.len());
        let mut w = vec![0u64; 2 * slots].into_boxed_slice();
        for i in 0..self.len() {
            let r = self.range(i);
            w[2 * i] = r.first();
            w[2 * i + 1] = r.last();
        }
        self.words = w;
        self.wide = true;
    }

    /// Slots the range array has room for.
    fn slots(&self) -> usize {
        if self.wide { self.words.len() / 2 } else { self.words.len() }
    }

    /// Decodes the range array into `out` (cleared first), oldest first.
    pub(crate) fn ranges_into(&self, out: &mut Vec<BlockRange>) {
        out.clear();
        out.extend((0..self.len()).map(|i| self.range(i)));
    }

    /// Drops the entries marked in `dead`, shifting the others forward in order (in place).
    pub(crate) fn compact(&mut self, dead: &[bool]) {
        let step = if self.wide { 2 } else { 1 };
        let mut j = 0;
        for (i, &d) in dead.iter().enumerate().take(self.len()) {
            if !d {
                if i != j {
                    self.words.copy_within(i * step..(i + 1) * step, j * step);
                }
                j += 1;
            }
        }
        let mut i = 0;
        self.values.retain(|_| {
            i += 1;
            !dead[i - 1]
        });
    }

    /// Moves the entries out (oldest first), leaving the leaf empty with its allocations.
    pub(crate) fn take_entries(&mut self) -> Vec<(BlockRange, V)> {
        let ranges: Vec<BlockRange> = (0..self.len()).map(|i| self.range(i)).collect();
        ranges.into_iter().zip(self.values.drain(..)).collect()
    }

    /// Replaces the entries, re-choosing the narrow form when every entry fits. More than `capacity` entries is
    /// allowed transiently (a normal GC that divides ranges around tombstones can produce more pieces than it
    /// removes); the arrays shrink back once a split fixes it.
    pub(crate) fn set_entries(&mut self, mut entries: Vec<(BlockRange, V)>, capacity: usize) {
        self.set_entries_from(&mut entries, capacity);
    }

    /// [`set_entries`](Self::set_entries) draining a caller's buffer, which keeps its allocation.
    pub(crate) fn set_entries_from(&mut self, entries: &mut Vec<(BlockRange, V)>, capacity: usize) {
        let n = entries.len();
        let slots = n.max(capacity);
        let wide = !entries.iter().all(|(r, _)| Self::fits(self.anchor, *r));
        let want = if wide { 2 * slots } else { slots };
        if self.words.len() != want {
            self.words = vec![0u64; want].into_boxed_slice();
        }
        self.wide = wide;
        self.values.clear();
        if self.values.capacity() > capacity && n <= capacity {
            self.values.shrink_to(capacity);
        }
        for (i, (r, v)) in entries.drain(..).enumerate() {
            if wide {
                self.words[2 * i] = r.first();
                self.words[2 * i + 1] = r.last();
            } else {
                self.words[i] = Self::narrow(self.anchor, r);
            }
            self.values.push(v);
        }
        debug_assert!(self.slots() >= self.len());
    }

    /// Changes the anchor, re-encoding the ranges. REQUIRES: every entry starts at or after `anchor`.
    pub(crate) fn set_anchor(&mut self, anchor: u64) {
        let entries = self.take_entries();
        let cap = self.values.capacity();
        self.anchor = anchor;
        self.set_entries(entries, cap);
    }

    /// Whether the range array is in the wide form.
    #[cfg(test)]
    pub(crate) fn is_wide(&self) -> bool {
        self.wide
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.words.len() * size_of::<u64>()
            + self.values.capacity() * size_of::<V>()
            + self.values.iter().map(|v| v.heap_size()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WriteRef;

    fn r(a: u64, b: u64) -> BlockRange {
        BlockRange::new(a, b).unwrap()
    }

    #[test]
    fn narrow_until_an_entry_does_not_fit_then_wide_until_rebuilt() {
        let mut l: Leaf<WriteRef> = Leaf::new(100, 4);
        l.append(r(100, 103), WriteRef::new(1, 0));
        l.append(r(100 + (1 << 32) - 1, 100 + (1 << 32) + 5), WriteRef::new(2, 0));
        assert!(!l.is_wide());
        assert_eq!(l.heap_bytes(), 4 * 8 + 4 * 16);
        l.append(r(100 + (1 << 32), 100 + (1 << 32)), WriteRef::new(3, 0));
        assert!(l.is_wide());
        l.append(r(200, 200 + (1 << 32)), WriteRef::new(4, 0));
        let got: Vec<_> = (0..l.len()).map(|i| l.range(i)).collect();
        assert_eq!(
            got,
            vec![
                r(100, 103),
                r(100 + (1 << 32) - 1, 100 + (1 << 32) + 5),
                r(100 + (1 << 32), 100 + (1 << 32)),
                r(200, 200 + (1 << 32))
            ]
        );
        l.compact(&[false, true, true, false]);
        assert_eq!((l.range(0), l.range(1), l.len()), (r(100, 103), r(200, 200 + (1 << 32)), 2));
        let e = l.take_entries();
        l.set_entries(e[..1].to_vec(), 4);
        assert!(!l.is_wide());
        assert_eq!(l.range(0), r(100, 103));
        let mut l: Leaf<WriteRef> = Leaf::new(0, 2);
        l.append(r(u64::MAX - 1, u64::MAX), WriteRef::new(0, 0));
        assert!(l.is_wide());
        assert_eq!(l.range(0), r(u64::MAX - 1, u64::MAX));
        // Past the capacity (never between operations) the arrays grow rather than overflow.
        for (k, leaf_wide) in [(0u64, false), (u64::MAX - 9, true)] {
            let mut l: Leaf<WriteRef> = Leaf::new(0, 2);
            for i in 0..5 {
                l.append(r(k + i, k + i), WriteRef::new(i, 0));
            }
            assert_eq!(l.is_wide(), leaf_wide);
            assert_eq!((0..5).map(|i| l.range(i).first() - k).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
        }
    }
}
