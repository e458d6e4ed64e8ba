//! `BpaIter`: a double-ended iterator over one BPA through `&self`, sorting slot permutations instead of the
//! leaf (see the type comment).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::ops::Bound;

use crate::leaf::{above, below};

use super::Bpa;

/// The entries of one BPA between two bounds, in key order, from both ends, through `&self`.
///
/// The paper's range iteration sorts the log and each block it reaches in place; through `&self` we cannot, so a
/// cursor sorts a permutation of slot numbers instead, for the log once and for each unsorted block it enters.
/// Blocks whose sorted bit is set (all of them in a frozen tree) are read directly. Block entries are numbered
/// globally in key order (`h_0`, block 0's slots, `h_1`, ...); the front has consumed everything below `gf`, the
/// back everything from `gb` on, and the two fingers (log, blocks) are merged at both ends.
pub struct BpaIter<'a, K, V> {
    leaf: &'a Bpa<K, V>,
    /// Log slots in key order, when the log is not sorted.
    log_order: Vec<u16>,
    lf: usize,
    lb: usize,
    front: BlockCursor,
    back: BlockCursor,
    gf: usize,
    gb: usize,
}

impl<K, V> std::fmt::Debug for BpaIter<'_, K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BpaIter").field("leaf", self.leaf).finish_non_exhaustive()
    }
}

/// A position among block entries: block `b`, entry `p` (0 is the header entry, `p >= 1` the `p`-th slot in key
/// order), with the key order of block `b`'s slots when that block is unsorted.
struct BlockCursor {
    b: usize,
    p: usize,
    order_of: usize,
    order: Vec<u16>,
}

impl BlockCursor {
    fn new(b: usize, p: usize) -> Self {
        BlockCursor { b, p, order_of: usize::MAX, order: Vec::new() }
    }

    fn prepare<K: Ord + Default, V: Default>(&mut self, leaf: &Bpa<K, V>, b: usize) {
        if leaf.block_sorted(b) || self.order_of == b {
            return;
        }
        let s = leaf.blk(b);
        let keys = &leaf.keys[s..s + leaf.count(b)];
        self.order.clear();
        self.order.extend(0..keys.len() as u16);
        self.order.sort_unstable_by(|&x, &y| keys[x as usize].cmp(&keys[y as usize]));
        self.order_of = b;
    }

    /// Slot of entry `p` of block `b`. REQUIRES: `prepare(b)` was called since the cursor last moved blocks.
    fn slot<K: Ord + Default, V: Default>(&self, leaf: &Bpa<K, V>, b: usize, p: usize) -> usize {
        if p == 0 {
            leaf.hdr(b)
        } else if leaf.block_sorted(b) {
            leaf.blk(b) + p - 1
        } else {
            leaf.blk(b) + self.order[p - 1] as usize
        }
    }

    /// How many entries of block `b` lie before the bound: below `lo` (`lower`) or not above `hi`.
    fn count_before<K, V, Q>(&mut self, leaf: &Bpa<K, V>, b: usize, bound: Bound<&Q>, lower: bool) -> usize
    where
        K: Ord + Default + Borrow<Q>,
        V: Default,
        Q: Ord + ?Sized,
    {
        self.prepare(leaf, b);
        let n = 1 + leaf.count(b);
        let pred = |p: usize| {
            let k = leaf.keys[self.slot(leaf, b, p)].borrow();
            if lower { !above(k, bound) } else { below(k, bound) }
        };
        // Entries in key order are a prefix satisfying `pred`; binary search it.
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if pred(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

impl<'a, K: Ord + Default, V: Default> BpaIter<'a, K, V> {
    pub(super) fn new<Q>(leaf: &'a Bpa<K, V>, lo: Bound<&Q>, hi: Bound<&Q>) -> Self
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let log_n = leaf.log_len as usize;
        let mut log_order = Vec::new();
        if !leaf.log_sorted {
            log_order.extend(0..log_n as u16);
            log_order.sort_unstable_by(|&x, &y| leaf.keys[x as usize].cmp(&leaf.keys[y as usize]));
        }
        let log_key = |i: usize| -> &Q {
            let slot = if leaf.log_sorted { i } else { log_order[i] as usize };
            leaf.keys[slot].borrow()
        };
        let lf = partition(log_n, |i| !above(log_key(i), lo));
        let lb = partition(log_n, |i| below(log_key(i), hi)).max(lf);
        let hl = leaf.header_len as usize;
        let prefix = |b: usize| (0..b).map(|i| 1 + leaf.count(i)).sum::<usize>();
        let mut front = BlockCursor::new(0, 0);
        let mut gf = 0;
        if let Bound::Included(s) | Bound::Excluded(s) = lo
            && let Some(b) = leaf.block_of(s)
        {
            let p = front.count_before(leaf, b, lo, true);
            front.b = b;
            front.p = p;
            gf = prefix(b) + p;
            if p == 1 + leaf.count(b) {
                front.b += 1;
                front.p = 0;
            }
        }
        let mut back = BlockCursor::new(0, 0);
        let mut gb = 0;
        match hi {
            Bound::Unbounded => {
                if hl > 0 {
                    back.b = hl - 1;
                    back.p = 1 + leaf.count(hl - 1);
                    gb = prefix(hl);
                }
            }
            Bound::Included(s) | Bound::Excluded(s) => {
                if let Some(b) = leaf.block_of(s) {
                    back.p = back.count_before(leaf, b, hi, false);
                    back.b = b;
                    gb = prefix(b) + back.p;
                }
            }
        }
        let gb = gb.max(gf);
        BpaIter { leaf, log_order, lf, lb, front, back, gf, gb }
    }

    #[inline]
    fn log_slot(&self, i: usize) -> usize {
        if self.leaf.log_sorted { i } else { self.log_order[i] as usize }
    }
}

/// Number of leading indices in `0..n` satisfying a predicate that holds on a prefix.
fn partition(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

impl<'a, K: Ord + Default, V: Default> Iterator for BpaIter<'a, K, V> {
    type Item = (&'a K, &'a V);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let leaf = self.leaf;
        let bslot = if self.gf < self.gb {
            let (b, p) = (self.front.b, self.front.p);
            self.front.prepare(leaf, b);
            Some(self.front.slot(leaf, b, p))
        } else {
            None
        };
        let lslot = (self.lf < self.lb).then(|| self.log_slot(self.lf));
        let slot = match (lslot, bslot) {
            (None, None) => return None,
            (Some(l), Some(b)) if leaf.keys[l].cmp(&leaf.keys[b]) == Ordering::Less => {
                self.lf += 1;
                l
            }
            (Some(l), None) => {
                self.lf += 1;
                l
            }
            (_, Some(b)) => {
                self.gf += 1;
                self.front.p += 1;
                if self.front.p > leaf.count(self.front.b) {
                    self.front.b += 1;
                    self.front.p = 0;
                }
                b
            }
        };
        Some((&leaf.keys[slot], &leaf.vals[slot]))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = (self.lb - self.lf) + (self.gb - self.gf);
        (n, Some(n))
    }
}

impl<'a, K: Ord + Default, V: Default> DoubleEndedIterator for BpaIter<'a, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let leaf = self.leaf;
        let bslot = if self.gf < self.gb {
            let (mut b, mut p) = (self.back.b, self.back.p);
            if p == 0 {
                b -= 1;
                p = 1 + leaf.count(b);
            }
            self.back.prepare(leaf, b);
            Some((b, p - 1, self.back.slot(leaf, b, p - 1)))
        } else {
            None
        };
        let lslot = (self.lf < self.lb).then(|| self.log_slot(self.lb - 1));
        let slot = match (lslot, bslot) {
            (None, None) => return None,
            (Some(l), Some((_, _, s))) if leaf.keys[l] > leaf.keys[s] => {
                self.lb -= 1;
                l
            }
            (Some(l), None) => {
                self.lb -= 1;
                l
            }
            (_, Some((b, p, s))) => {
                self.gb -= 1;
                self.back.b = b;
                self.back.p = p;
                s
            }
        };
        Some((&leaf.keys[slot], &leaf.vals[slot]))
    }
}

impl<K: Ord + Default, V: Default> ExactSizeIterator for BpaIter<'_, K, V> {}
