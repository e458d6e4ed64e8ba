//! The frozen (read-only, fully sorted) tree: the immutable memtable.

use std::borrow::Borrow;
use std::ops::{Bound, RangeBounds};

use crate::bpa::Bpa;
use crate::heap_size::HeapSize;
use crate::iter::Range;
use crate::leaf::Leaf;
use crate::probe::{Fingerprint, PointProbe};
use crate::stats::Stats;
use crate::tree::BpTree;

/// A BP-tree that no longer changes, with every BPA log and block sorted, produced by [`BpTree::freeze`].
///
/// All reads take `&self` and never write, so a `FrozenBpTree` is `Sync` whenever its keys and values are and can
/// be shared (`Arc<FrozenBpTree<..>>`) by any number of reader threads, the way an LSM engine keeps an immutable
/// memtable readable while it is flushed. Because everything is sorted, range reads are plain two-finger merges
/// of sorted runs with no per-block permutation work.
pub struct FrozenBpTree<K, V, L = Bpa<K, V>> {
    tree: BpTree<K, V, L>,
}

impl<K, V, L> std::fmt::Debug for FrozenBpTree<K, V, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("FrozenBpTree").field(&self.tree).finish()
    }
}

impl<K, V, L> BpTree<K, V, L>
where
    K: Ord + Clone + HeapSize + Fingerprint,
    V: HeapSize,
    L: Leaf<K, V>,
{
    /// Sorts every leaf so that all later reads are plain sequential scans, and returns the read-only tree
    /// (the immutable memtable). O(n) on top of the sorting still pending.
    pub fn freeze(mut self) -> FrozenBpTree<K, V, L> {
        for e in &mut self.leaves {
            e.leaf.sort_all(&mut self.stats);
        }
        FrozenBpTree::new(self)
    }
}

impl<K, V, L> FrozenBpTree<K, V, L>
where
    K: Ord + Clone + HeapSize + Fingerprint,
    V: HeapSize,
    L: Leaf<K, V>,
{
    pub(crate) fn new(tree: BpTree<K, V, L>) -> Self {
        FrozenBpTree { tree }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.tree.len()
    }

    /// Whether the tree holds no entry.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    /// Bytes allocated, including heap memory owned by keys and values.
    pub fn memory_usage(&self) -> usize {
        self.tree.memory_usage()
    }

    /// Counters of the structural work done while the tree was mutable and by the freeze.
    pub fn stats(&self) -> Stats {
        self.tree.stats()
    }

    /// The value of `key`.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        Q: PointProbe<K> + ?Sized,
    {
        self.tree.get(key)
    }

    /// The stored key and value of `key`.
    pub fn get_key_value<Q>(&self, key: &Q) -> Option<(&K, &V)>
    where
        Q: PointProbe<K> + ?Sized,
    {
        self.tree.get_key_value(key)
    }

    /// A double-ended iterator over the entries with keys in `range`, in key order.
    pub fn range<Q, R>(&self, range: R) -> Range<'_, K, V, L>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        R: RangeBounds<Q>,
    {
        self.tree.range(range)
    }

    /// Every entry in key order.
    pub fn iter(&self) -> Range<'_, K, V, L> {
        self.tree.iter()
    }

    /// Calls `f` on up to `length` entries in key order from the first key at or after `start`; returns how many.
    pub fn iterate_range<Q, F>(&self, start: Bound<&Q>, length: usize, mut f: F) -> usize
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        F: FnMut(&K, &V),
    {
        self.tree.scan_sorted(start, length, &mut f)
    }

    /// Calls `f` on every entry with a key in `range`, in no particular order.
    pub fn map_range<Q, R, F>(&self, range: R, f: F)
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        R: RangeBounds<Q>,
        F: FnMut(&K, &V),
    {
        self.tree.map_range(range, f)
    }

    /// Checks the whole structure (see [`BpTree::check_invariants`]) and that everything is sorted.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.tree.check_invariants()
    }

    /// Gives the tree back for updates (the caller owns the only copy).
    pub fn into_inner(self) -> BpTree<K, V, L> {
        self.tree
    }
}
