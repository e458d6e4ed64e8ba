//! Range reads of the concurrent BP-tree: `iterate_range` (sorting under the write lock only what a scan
//! needs), `map_range` (read locks only) and the lock-free-between-calls `ConcurrentRange` iterator.

use std::borrow::Borrow;
use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};

use crate::heap_size::HeapSize;
use crate::leaf::{Leaf, above};
use crate::probe::Fingerprint;
use crate::stats::Stats;
use crate::sync;

use super::{BATCH, ConcurrentBpTree, Node};

impl<K, V, L> ConcurrentBpTree<K, V, L>
where
    K: Ord + Clone + HeapSize + Fingerprint,
    V: HeapSize,
    L: Leaf<K, V>,
{
    /// Calls `f` on up to `length` entries in key order from the first key at or after `start`; returns how
    /// many it visited. Sorts (under the leaf's write lock) only what is not sorted yet.
    pub fn iterate_range<Q, F>(&self, start: Bound<&Q>, length: usize, mut f: F) -> usize
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        F: FnMut(&K, &V),
    {
        let mut local = Stats::default();
        let mut done = 0;
        // The largest key visited so far (exclusive lower bound of the rest of the scan). Every leaf is scanned
        // from it, not from its beginning: while the read lock is let go to sort a leaf, a rebalance can move
        // keys already visited, or keys below `start`, into it (regression test
        // `iterate_range_never_yields_keys_below_start_or_twice`).
        let mut resume: Option<K> = None;
        'descend: while done < length {
            let key = match resume.as_ref().map(|k| k.borrow()).map_or(start, Bound::Excluded) {
                Bound::Included(k) | Bound::Excluded(k) => Some(k),
                Bound::Unbounded => None,
            };
            let mut g = self.read_leaf(key);
            loop {
                let b: Bound<&Q> = resume.as_ref().map(|k| k.borrow()).map_or(start, Bound::Excluded);
                let rem = length - done;
                let Node::Leaf(l) = &*g else { unreachable!("read descent ends at a leaf") };
                if !l.leaf.sorted_for(b, rem) {
                    // Upgrade: let go of the read lock, take the write lock, sort what the scan needs, and
                    // downgrade atomically. Entries may have moved to another leaf meanwhile (the epoch tells).
                    let epoch = l.epoch;
                    let node = sync::lock_of(&g).clone();
                    drop(g);
                    let mut w = node.write_arc();
                    local.lock_upgrades += 1;
                    let Node::Leaf(wl) = &mut *w else { unreachable!("a leaf stays a leaf") };
                    if wl.epoch != epoch {
                        continue 'descend;
                    }
                    wl.leaf.iterate_from(b, rem, &mut |_, _| {}, &mut local);
                    g = sync::downgrade(w);
                }
                let Node::Leaf(l) = &*g else { unreachable!("read descent ends at a leaf") };
                done += l.leaf.scan(b, rem, &mut f);
                if done == length {
                    break 'descend;
                }
                // The leaf is exhausted from `b` on: the rest of the scan starts after its largest key, if that
                // key was past `b` (else nothing here was visited and `b` stands).
                if let Some((k, _)) = l.leaf.range::<K>(Bound::Unbounded, Bound::Unbounded).next_back()
                    && above(k.borrow(), b)
                {
                    resume = Some(k.clone());
                }
                let Some(next) = l.next.clone() else { break 'descend };
                let ng = next.read_arc();
                g = ng;
            }
        }
        self.note(&local);
        done
    }

    /// Calls `f` on every entry with a key in `range`, in no particular order, under read locks only.
    pub fn map_range<Q, R, F>(&self, range: R, mut f: F)
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        R: RangeBounds<Q>,
        F: FnMut(&K, &V),
    {
        let (lo, hi) = (range.start_bound(), range.end_bound());
        let key = match lo {
            Bound::Included(k) | Bound::Excluded(k) => Some(k),
            Bound::Unbounded => None,
        };
        let mut g = self.read_leaf(key);
        loop {
            let Node::Leaf(l) = &*g else { unreachable!("read descent ends at a leaf") };
            if l.leaf.map_range(lo, hi, &mut f) {
                return;
            }
            let Some(next) = l.next.clone() else { return };
            let ng = next.read_arc();
            g = ng;
        }
    }

    /// A double-ended iterator of owned entries with keys in `range`, in key order. It holds no lock between
    /// calls: each refill copies up to 64 entries under one leaf's read lock, re-descending from the root, so
    /// it sees a mix of states when writers run concurrently, but never an entry twice or out of order.
    pub fn range<R: RangeBounds<K>>(&self, range: R) -> ConcurrentRange<'_, K, V, L>
    where
        V: Clone,
    {
        let lo = range.start_bound().cloned();
        let hi = range.end_bound().cloned();
        let exhausted = match (&lo, &hi) {
            (Bound::Included(a), Bound::Included(b)) => a > b,
            (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
            | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
            _ => false,
        };
        ConcurrentRange { tree: self, lo, hi, front: VecDeque::new(), back: VecDeque::new(), exhausted }
    }

    /// Every entry in key order, owned.
    pub fn iter(&self) -> ConcurrentRange<'_, K, V, L>
    where
        V: Clone,
    {
        self.range(..)
    }
}

/// Owned entries of a [`ConcurrentBpTree`] between two bounds, from either end (see
/// [`ConcurrentBpTree::range`]).
///
/// The front buffer holds entries just above `lo`, the back buffer entries just below `hi`; `lo` and `hi` move
/// as the buffers fill, so the two never overlap, and when the region between them is found empty
/// (`exhausted`) each end continues from the other's buffer.
pub struct ConcurrentRange<'a, K, V, L> {
    tree: &'a ConcurrentBpTree<K, V, L>,
    lo: Bound<K>,
    hi: Bound<K>,
    front: VecDeque<(K, V)>,
    back: VecDeque<(K, V)>,
    exhausted: bool,
}

impl<K, V, L> std::fmt::Debug for ConcurrentRange<'_, K, V, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConcurrentRange")
            .field("buffered", &(self.front.len() + self.back.len()))
            .field("exhausted", &self.exhausted)
            .finish_non_exhaustive()
    }
}

fn key_of<K>(b: &Bound<K>) -> Option<&K> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    }
}

impl<K, V, L> ConcurrentRange<'_, K, V, L>
where
    K: Ord + Clone + HeapSize + Fingerprint,
    V: HeapSize + Clone,
    L: Leaf<K, V>,
{
    fn refill_front(&mut self) {
        let mut g = self.tree.read_leaf(key_of(&self.lo));
        loop {
            let Node::Leaf(l) = &*g else { unreachable!("read descent ends at a leaf") };
            for (k, v) in l.leaf.range(self.lo.as_ref(), self.hi.as_ref()).take(BATCH) {
                self.front.push_back((k.clone(), v.clone()));
            }
            if let Some((k, _)) = self.front.back() {
                self.lo = Bound::Excluded(k.clone());
                return;
            }
            let passed = l
                .leaf
                .range::<K>(Bound::Unbounded, Bound::Unbounded)
                .next_back()
                .is_some_and(|(k, _)| !crate::leaf::below(k, self.hi.as_ref()));
            let next = l.next.clone();
            match next {
                Some(n) if !passed => {
                    let ng = n.read_arc();
                    g = ng;
                }
                _ => {
                    self.exhausted = true;
                    return;
                }
            }
        }
    }

    fn refill_back(&mut self) {
        loop {
            let inclusive = matches!(self.hi, Bound::Included(_));
            let (g, fence) = self.tree.read_leaf_before(key_of(&self.hi), inclusive);
            let Node::Leaf(l) = &*g else { unreachable!("read descent ends at a leaf") };
            for (k, v) in l.leaf.range(self.lo.as_ref(), self.hi.as_ref()).rev().take(BATCH) {
                self.back.push_front((k.clone(), v.clone()));
            }
            if let Some((k, _)) = self.back.front() {
                self.hi = Bound::Excluded(k.clone());
                return;
            }
            match fence {
                Some(f)
                    if crate::leaf::above(&f, self.lo.as_ref())
                        && !matches!(&self.lo, Bound::Included(a) if *a == f) =>
                {
                    self.hi = Bound::Excluded(f);
                }
                _ => {
                    self.exhausted = true;
                    return;
                }
            }
        }
    }
}

impl<K, V, L> Iterator for ConcurrentRange<'_, K, V, L>
where
    K: Ord + Clone + HeapSize + Fingerprint,
    V: HeapSize + Clone,
    L: Leaf<K, V>,
{
    type Item = (K, V);

    fn next(&mut self) -> Option<(K, V)> {
        if let Some(x) = self.front.pop_front() {
            return Some(x);
        }
        if !self.exhausted {
            self.refill_front();
            if let Some(x) = self.front.pop_front() {
                return Some(x);
            }
        }
        self.back.pop_front()
    }
}

impl<K, V, L> DoubleEndedIterator for ConcurrentRange<'_, K, V, L>
where
    K: Ord + Clone + HeapSize + Fingerprint,
    V: HeapSize + Clone,
    L: Leaf<K, V>,
{
    fn next_back(&mut self) -> Option<(K, V)> {
        if let Some(x) = self.back.pop_back() {
            return Some(x);
        }
        if !self.exhausted {
            self.refill_back();
            if let Some(x) = self.back.pop_back() {
                return Some(x);
            }
        }
        self.front.pop_back()
    }
}
