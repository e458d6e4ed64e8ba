//! The bounded double-ended range iterator of the tree.

use std::borrow::Borrow;
use std::ops::{Bound, RangeBounds};

use crate::heap_size::HeapSize;
use crate::leaf::Leaf;
use crate::probe::Fingerprint;
use crate::tree::{BpTree, NIL};

/// Entries of a [`BpTree`] (or a frozen one) between two bounds, in key order, from either end.
///
/// The front and the back each iterate one leaf (`L::Iter`, bounded by the range on its side) and move along the
/// leaf chain; when they reach the same leaf, the one leaf iterator serves both ends, so nothing is yielded twice.
pub struct Range<'a, K, V, L: Leaf<K, V> + 'a>
where
    K: Ord + 'a,
    V: 'a,
{
    tree: &'a BpTree<K, V, L>,
    front_leaf: u32,
    back_leaf: u32,
    front: Option<L::Iter<'a>>,
    back: Option<L::Iter<'a>>,
    /// The front and back are in the same leaf and share `front`.
    merged: bool,
}

impl<'a, K: Ord + 'a, V: 'a, L: Leaf<K, V> + 'a> std::fmt::Debug for Range<'a, K, V, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Range")
            .field("front_leaf", &self.front_leaf)
            .field("back_leaf", &self.back_leaf)
            .finish_non_exhaustive()
    }
}

impl<K, V, L> BpTree<K, V, L>
where
    K: Ord + Clone + HeapSize + Fingerprint,
    V: HeapSize,
    L: Leaf<K, V>,
{
    /// A double-ended iterator over the entries with keys in `range`, in key order. Unsorted BPA regions are
    /// ordered through a per-iterator permutation (the tree is not modified); `iterate_range` sorts in place.
    /// An inverted range (start above end) yields nothing.
    pub fn range<Q, R>(&self, range: R) -> Range<'_, K, V, L>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        R: RangeBounds<Q>,
    {
        Range::new(self, range.start_bound(), range.end_bound())
    }

    /// Every entry in key order.
    pub fn iter(&self) -> Range<'_, K, V, L> {
        Range::new::<K>(self, Bound::Unbounded, Bound::Unbounded)
    }

    /// The entry with the smallest key.
    pub fn first_key_value(&self) -> Option<(&K, &V)> {
        self.iter().next()
    }

    /// The entry with the largest key.
    pub fn last_key_value(&self) -> Option<(&K, &V)> {
        self.iter().next_back()
    }
}

fn inverted<Q: Ord + ?Sized>(lo: Bound<&Q>, hi: Bound<&Q>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
        _ => false,
    }
}

impl<'a, K, V, L> Range<'a, K, V, L>
where
    K: Ord + Clone + HeapSize + Fingerprint + 'a,
    V: HeapSize + 'a,
    L: Leaf<K, V> + 'a,
{
    pub(crate) fn new<Q>(tree: &'a BpTree<K, V, L>, lo: Bound<&Q>, hi: Bound<&Q>) -> Self
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        if inverted(lo, hi) {
            return Range { tree, front_leaf: NIL, back_leaf: NIL, front: None, back: None, merged: true };
        }
        let fl = tree.leaf_for_bound(lo, true);
        let bl = tree.leaf_for_bound(hi, false);
        if fl == bl {
            let it = tree.leaves[fl as usize].leaf.range(lo, hi);
            return Range { tree, front_leaf: fl, back_leaf: bl, front: Some(it), back: None, merged: true };
        }
        let front = tree.leaves[fl as usize].leaf.range(lo, Bound::Unbounded);
        let back = tree.leaves[bl as usize].leaf.range(Bound::Unbounded, hi);
        Range { tree, front_leaf: fl, back_leaf: bl, front: Some(front), back: Some(back), merged: false }
    }
}

impl<'a, K, V, L> Iterator for Range<'a, K, V, L>
where
    K: Ord + 'a,
    V: 'a,
    L: Leaf<K, V> + 'a,
{
    type Item = (&'a K, &'a V);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(x) = self.front.as_mut().and_then(Iterator::next) {
                return Some(x);
            }
            if self.merged {
                return None;
            }
            self.front_leaf = self.tree.leaves[self.front_leaf as usize].next;
            if self.front_leaf == self.back_leaf || self.front_leaf == NIL {
                self.front = self.back.take();
                self.merged = true;
            } else {
                self.front = Some(
                    self.tree.leaves[self.front_leaf as usize]
                        .leaf
                        .range::<K>(Bound::Unbounded, Bound::Unbounded),
                );
            }
        }
    }
}

impl<'a, K, V, L> DoubleEndedIterator for Range<'a, K, V, L>
where
    K: Ord + 'a,
    V: 'a,
    L: Leaf<K, V> + 'a,
{
    fn next_back(&mut self) -> Option<Self::Item> {
        loop {
            if self.merged {
                return self.front.as_mut().and_then(DoubleEndedIterator::next_back);
            }
            if let Some(x) = self.back.as_mut().and_then(DoubleEndedIterator::next_back) {
                return Some(x);
            }
            self.back_leaf = self.tree.leaves[self.back_leaf as usize].prev;
            if self.back_leaf == self.front_leaf || self.back_leaf == NIL {
                self.back = None;
                self.merged = true;
            } else {
                self.back = Some(
                    self.tree.leaves[self.back_leaf as usize]
                        .leaf
                        .range::<K>(Bound::Unbounded, Bound::Unbounded),
                );
            }
        }
    }
}
