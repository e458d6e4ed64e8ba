//! A sorted-array leaf: the classic B-tree leaf, the paper's baseline and the ablation of the BPA.

use std::borrow::Borrow;
use std::iter::Zip;
use std::mem;
use std::ops::Bound;
use std::slice;

use crate::leaf::{Leaf, above, below};
use crate::options::Options;
use crate::probe::{PointProbe, Probe};
use crate::stats::Stats;

/// A leaf that keeps its entries in one sorted array (keys and values in parallel arrays), shifting on every
/// insert and remove. With `Options::leaf_slots()` slots it is the same size as a BPA with those options, so
/// `BpTree<K, V, SortedLeaf<K, V>>` isolates what the BPA contributes; with ~64 slots (1 KiB of 8-byte pairs) it is
/// the paper's tuned B-tree baseline.
pub struct SortedLeaf<K, V> {
    keys: Vec<K>,
    vals: Vec<V>,
}

impl<K, V> std::fmt::Debug for SortedLeaf<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SortedLeaf").field("len", &self.keys.len()).finish_non_exhaustive()
    }
}

impl<K: Ord, V> SortedLeaf<K, V> {
    fn position<Q>(&self, key: &Q) -> Result<usize, usize>
    where
        Q: Probe<K> + ?Sized,
    {
        self.keys.binary_search_by(|k| key.cmp_to(k).reverse())
    }

    fn lower<Q>(&self, lo: Bound<&Q>) -> usize
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        match lo {
            Bound::Unbounded => 0,
            _ => self.keys.partition_point(|k| !above(k.borrow(), lo)),
        }
    }

    fn upper<Q>(&self, hi: Bound<&Q>) -> usize
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        match hi {
            Bound::Unbounded => self.keys.len(),
            _ => self.keys.partition_point(|k| below(k.borrow(), hi)),
        }
    }
}

impl<K: Ord, V> Leaf<K, V> for SortedLeaf<K, V> {
    type Iter<'a>
        = Zip<slice::Iter<'a, K>, slice::Iter<'a, V>>
    where
        Self: 'a,
        K: 'a,
        V: 'a;

    fn new(opts: &Options) -> Self {
        let cap = opts.leaf_slots();
        SortedLeaf { keys: Vec::with_capacity(cap), vals: Vec::with_capacity(cap) }
    }

    fn split_at(opts: &Options) -> usize {
        ((opts.split_fill * opts.leaf_slots() as f64) as usize).clamp(2, opts.leaf_slots())
    }

    fn len(&self) -> usize {
        self.keys.len()
    }

    fn get<Q>(&self, key: &Q) -> Option<(&K, &V)>
    where
        Q: PointProbe<K> + ?Sized,
    {
        self.position(key).ok().map(|i| (&self.keys[i], &self.vals[i]))
    }

    fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        Q: PointProbe<K> + ?Sized,
    {
        self.position(key).ok().map(|i| &mut self.vals[i])
    }

    fn insert(&mut self, key: K, value: V, _stats: &mut Stats) -> Option<V> {
        match self.position(&key) {
            Ok(i) => Some(mem::replace(&mut self.vals[i], value)),
            Err(i) => {
                self.keys.insert(i, key);
                self.vals.insert(i, value);
                None
            }
        }
    }

    fn remove<Q>(&mut self, key: &Q, _stats: &mut Stats) -> Option<(K, V)>
    where
        Q: PointProbe<K> + ?Sized,
    {
        let i = self.position(key).ok()?;
        Some((self.keys.remove(i), self.vals.remove(i)))
    }

    fn drain_sorted(&mut self, out: &mut Vec<(K, V)>, _stats: &mut Stats) {
        out.extend(self.keys.drain(..).zip(self.vals.drain(..)));
    }

    fn load_sorted<I: ExactSizeIterator<Item = (K, V)>>(&mut self, items: I) {
        for (k, v) in items {
            self.keys.push(k);
            self.vals.push(v);
        }
    }

    fn first_key(&self) -> Option<&K> {
        self.keys.first()
    }

    fn iterate_from<Q, F>(&mut self, start: Bound<&Q>, length: usize, f: &mut F, _stats: &mut Stats) -> usize
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        F: FnMut(&K, &V),
    {
        self.scan(start, length, f)
    }

    fn scan<Q, F>(&self, start: Bound<&Q>, length: usize, f: &mut F) -> usize
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        F: FnMut(&K, &V),
    {
        let i = self.lower(start);
        let end = i.saturating_add(length).min(self.keys.len());
        for j in i..end {
            f(&self.keys[j], &self.vals[j]);
        }
        end - i
    }

    fn sorted_for<Q>(&self, _start: Bound<&Q>, _length: usize) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        true
    }

    fn map_range<Q, F>(&self, lo: Bound<&Q>, hi: Bound<&Q>, f: &mut F) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        F: FnMut(&K, &V),
    {
        let (i, j) = (self.lower(lo), self.upper(hi));
        for x in i..j.max(i) {
            f(&self.keys[x], &self.vals[x]);
        }
        j < self.keys.len()
    }

    fn range<'a, Q>(&'a self, lo: Bound<&Q>, hi: Bound<&Q>) -> Self::Iter<'a>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let i = self.lower(lo);
        let j = self.upper(hi).max(i);
        self.keys[i..j].iter().zip(self.vals[i..j].iter())
    }

    fn sort_all(&mut self, _stats: &mut Stats) {}

    fn memory_usage(&self) -> usize {
        mem::size_of::<Self>()
            + self.keys.capacity() * mem::size_of::<K>()
            + self.vals.capacity() * mem::size_of::<V>()
    }

    fn check_light(&self) -> Result<(), String> {
        if self.keys.len() != self.vals.len() {
            return Err("keys and values differ in length".into());
        }
        Ok(())
    }

    fn check(&self) -> Result<(), String> {
        if self.keys.len() != self.vals.len() {
            return Err("keys and values differ in length".into());
        }
        if self.keys.windows(2).any(|w| w[0] >= w[1]) {
            return Err("sorted leaf is not strictly sorted".into());
        }
        Ok(())
    }
}
