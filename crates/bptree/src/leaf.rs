//! The leaf abstraction: what the tree needs from a leaf, so the BPA and a plain sorted array are interchangeable.

use std::borrow::Borrow;
use std::ops::Bound;

use crate::options::Options;
use crate::probe::PointProbe;
use crate::stats::Stats;

/// A B+-tree leaf holding a set of unique keys with values.
///
/// Two implementations: [`crate::Bpa`] (the paper's buffered partitioned array, the default) and
/// [`crate::SortedLeaf`] (a sorted array, the classic B-tree leaf: the paper's baseline and our ablation). The tree
/// never looks inside a leaf; everything it needs is here.
///
/// Keys are unique within a leaf at all times (the BPA updates a buffered or stored duplicate in place instead of
/// buffering a second copy), so `len` is exact.
pub trait Leaf<K: Ord, V>: Sized {
    /// A double-ended iterator over the leaf's entries between two bounds, in key order, through `&self`.
    type Iter<'a>: DoubleEndedIterator<Item = (&'a K, &'a V)>
    where
        Self: 'a,
        K: 'a,
        V: 'a;

    /// A new empty leaf.
    fn new(opts: &Options) -> Self;

    /// Most entries a leaf may hold; the tree splits a leaf that holds this many before inserting into it.
    fn split_at(opts: &Options) -> usize;

    /// Entries held.
    fn len(&self) -> usize;

    /// Whether the leaf holds no entry.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry with key `key`.
    fn get<Q>(&self, key: &Q) -> Option<(&K, &V)>
    where
        Q: PointProbe<K> + ?Sized;

    /// The value of `key`, mutably. Changing a value never moves an entry.
    fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        Q: PointProbe<K> + ?Sized;

    /// Inserts or updates; returns the old value of an update.
    /// REQUIRES: `len() < split_at(opts)` (the tree splits first).
    fn insert(&mut self, key: K, value: V, stats: &mut Stats) -> Option<V>;

    /// Inserts a key known to be absent, skipping the search [`Leaf::insert`] makes for an existing entry.
    /// REQUIRES: `key` is not in the leaf; `len() < split_at(opts)`.
    fn insert_new(&mut self, key: K, value: V, stats: &mut Stats) {
        let old = self.insert(key, value, stats);
        debug_assert!(old.is_none(), "insert_new of a present key");
    }

    /// Removes `key`, returning the entry.
    fn remove<Q>(&mut self, key: &Q, stats: &mut Stats) -> Option<(K, V)>
    where
        Q: PointProbe<K> + ?Sized;

    /// Moves every entry, in key order, to the end of `out`, leaving the leaf empty.
    fn drain_sorted(&mut self, out: &mut Vec<(K, V)>, stats: &mut Stats);

    /// Fills an empty leaf from `items`.
    /// REQUIRES: the leaf is empty; keys strictly increasing; `items.len() <= split_at(opts)`.
    fn load_sorted<I: ExactSizeIterator<Item = (K, V)>>(&mut self, items: I);

    /// The smallest key.
    fn first_key(&self) -> Option<&K>;

    /// Calls `f` on up to `length` entries with keys after `start`, in key order, sorting lazily in place what the
    /// iteration reaches; returns how many entries it visited.
    fn iterate_from<Q, F>(&mut self, start: Bound<&Q>, length: usize, f: &mut F, stats: &mut Stats) -> usize
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        F: FnMut(&K, &V);

    /// `iterate_from` through `&self`: fast when `sorted_for(start, length)` holds (what a frozen tree and a
    /// concurrent scan after its upgrade guarantee), correct (through `range`) otherwise.
    fn scan<Q, F>(&self, start: Bound<&Q>, length: usize, f: &mut F) -> usize
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        F: FnMut(&K, &V);

    /// Whether `iterate_from(start, length, ..)` would have nothing to sort, so it can run under a read lock.
    fn sorted_for<Q>(&self, start: Bound<&Q>, length: usize) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized;

    /// Calls `f` on every entry with a key in `(lo, hi)` (bounds as given), in no particular order. Returns whether
    /// the leaf holds a key beyond `hi` (so no later leaf can hold keys in range).
    fn map_range<Q, F>(&self, lo: Bound<&Q>, hi: Bound<&Q>, f: &mut F) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        F: FnMut(&K, &V);

    /// Entries with keys in `(lo, hi)`, in key order, from either end.
    fn range<'a, Q>(&'a self, lo: Bound<&Q>, hi: Bound<&Q>) -> Self::Iter<'a>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized;

    /// Sorts everything so later reads never need to (the frozen tree).
    fn sort_all(&mut self, stats: &mut Stats);

    /// Bytes this leaf occupies, not counting heap memory owned by keys and values.
    fn memory_usage(&self) -> usize;

    /// Checks every structural invariant; describes the first violation. O(leaf size · log).
    fn check(&self) -> Result<(), String>;

    /// The invariants that must hold after every insert, in O(header) time: run after every leaf operation
    /// with the `invariants` feature (the full `check` runs after flushes, splits and merges).
    fn check_light(&self) -> Result<(), String> {
        self.check()
    }
}

/// Whether `key` is at or after the lower bound `lo`.
#[inline]
pub(crate) fn above<Q: Ord + ?Sized>(key: &Q, lo: Bound<&Q>) -> bool {
    match lo {
        Bound::Unbounded => true,
        Bound::Included(b) => key >= b,
        Bound::Excluded(b) => key > b,
    }
}

/// Whether `key` is at or before the upper bound `hi`.
#[inline]
pub(crate) fn below<Q: Ord + ?Sized>(key: &Q, hi: Bound<&Q>) -> bool {
    match hi {
        Bound::Unbounded => true,
        Bound::Included(b) => key <= b,
        Bound::Excluded(b) => key < b,
    }
}
