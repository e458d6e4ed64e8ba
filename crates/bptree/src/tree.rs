//! The single-writer BP-tree (paper §5): sorted-array internal nodes over BPA leaves.

use std::borrow::Borrow;
use std::marker::PhantomData;
use std::mem;
use std::ops::{Bound, RangeBounds};

use crate::bpa::Bpa;
use crate::error::{Error, Result};
use crate::heap_size::HeapSize;
use crate::leaf::Leaf;
use crate::options::Options;
use crate::prefetch;
use crate::probe::{Fingerprint, PointProbe, Probe};
use crate::stats::Stats;

mod check;
mod remove;

pub(crate) const NIL: u32 = u32::MAX;

/// A leaf in the arena with its neighbours in key order (`NIL` at the ends).
pub(crate) struct LeafEntry<L> {
    pub(crate) leaf: L,
    pub(crate) prev: u32,
    pub(crate) next: u32,
}

/// An internal node: `children[i]` holds the keys in `[keys[i-1], keys[i])`; `keys[i]` is the smallest key of
/// `children[i+1]`'s subtree at the time it was set (a separator: any key in between works).
pub(crate) struct Internal<K> {
    pub(crate) keys: Vec<K>,
    pub(crate) children: Vec<u32>,
}

/// An ordered map from `K` to `V`: a B+-tree with small sorted-array internal nodes (1 KiB by default) and large
/// leaves of type `L`, by default the paper's buffered partitioned array ([`Bpa`], 1,088 slots).
///
/// This is the single-writer tree: updates take `&mut self`, reads `&self`. It is the active memtable of the LSM
/// engine and FlexDB (wrap it in a lock, or use [`crate::ConcurrentBpTree`] for concurrent writers); [`freeze`](Self::freeze)
/// turns it into a [`FrozenBpTree`](crate::FrozenBpTree), the immutable memtable that many threads read at once.
///
/// Nodes live in two arenas (`leaves`, `nodes`) addressed by `u32`; leaves are also linked in key order so range
/// operations continue from leaf to leaf without going back to the root (paper §5, "Range iteration").
///
/// Structure rules: a leaf splits when an insert finds it holding `L::split_at` entries (the BPA flushes its log as
/// part of the split's sorted drain); after a removal a leaf below `merge_at` entries (~40 % of its slots) merges
/// with a neighbour, or borrows half of their entries when both together would be too many for one leaf; internal
/// nodes hold between `fanout / 2` and `fanout` children (the root at least 2).
///
/// [`freeze`]: BpTree::freeze
pub struct BpTree<K, V, L = Bpa<K, V>> {
    pub(crate) opts: Options,
    fanout: usize,
    split_at: usize,
    merge_at: usize,
    pub(crate) leaves: Vec<LeafEntry<L>>,
    free_leaves: Vec<u32>,
    pub(crate) nodes: Vec<Internal<K>>,
    free_nodes: Vec<u32>,
    pub(crate) root: u32,
    pub(crate) height: u32,
    pub(crate) first_leaf: u32,
    pub(crate) last_leaf: u32,
    len: usize,
    heap_bytes: usize,
    leaf_bytes: usize,
    pub(crate) stats: Stats,
    _v: PhantomData<V>,
}

/// A summary, not the entries (a memtable holds millions).
impl<K, V, L> std::fmt::Debug for BpTree<K, V, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BpTree")
            .field("len", &self.len)
            .field("height", &self.height)
            .field("leaves", &(self.leaves.len() - self.free_leaves.len()))
            .field("heap_bytes", &self.heap_bytes)
            .finish_non_exhaustive()
    }
}

impl<K, V, L> BpTree<K, V, L>
where
    K: Ord + Clone + HeapSize + Fingerprint,
    V: HeapSize,
    L: Leaf<K, V>,
{
    /// An empty tree with the paper's default parameters.
    pub fn new() -> Self {
        Self::build(Options::default())
    }

    /// An empty tree with `opts` (validated).
    pub fn with_options(opts: Options) -> Result<Self> {
        opts.validate()?;
        Ok(Self::build(opts))
    }

    fn build(opts: Options) -> Self {
        let leaf = L::new(&opts);
        let leaf_bytes = leaf.memory_usage().saturating_sub(mem::size_of::<L>());
        let split_at = L::split_at(&opts);
        let merge_at = opts.merge_at(split_at);
        BpTree {
            fanout: opts.fanout(mem::size_of::<K>()),
            split_at,
            merge_at,
            opts,
            leaves: vec![LeafEntry { leaf, prev: NIL, next: NIL }],
            free_leaves: Vec::new(),
            nodes: Vec::new(),
            free_nodes: Vec::new(),
            root: 0,
            height: 0,
            first_leaf: 0,
            last_leaf: 0,
            len: 0,
            heap_bytes: 0,
            leaf_bytes,
            stats: Stats::default(),
            _v: PhantomData,
        }
    }

    /// Builds a tree from entries in strictly increasing key order, filling leaves to about 7/8 of their split
    /// size and internal nodes fully. Fails with [`Error::UnsortedInput`] otherwise.
    pub fn bulk_load<I: IntoIterator<Item = (K, V)>>(opts: Options, items: I) -> Result<Self> {
        opts.validate()?;
        let items: Vec<(K, V)> = items.into_iter().collect();
        if let Some(i) = items.windows(2).position(|w| w[0].0 >= w[1].0) {
            return Err(Error::UnsortedInput(i + 1));
        }
        Ok(Self::from_sorted(opts, items))
    }

    /// Builds a tree from entries with strictly increasing keys. REQUIRES: sorted, valid options.
    pub(crate) fn from_sorted(opts: Options, items: Vec<(K, V)>) -> Self {
        let mut t = Self::build(opts);
        let n = items.len();
        if n == 0 {
            return t;
        }
        t.len = n;
        t.heap_bytes = items.iter().map(|(k, v)| k.heap_size() + v.heap_size()).sum();
        let target = (t.split_at * 7 / 8).max(1);
        let m = n.div_ceil(target);
        let mut level: Vec<(K, u32)> = Vec::with_capacity(m);
        let mut it = items.into_iter();
        for i in 0..m {
            let cnt = n / m + usize::from(i < n % m);
            let chunk: Vec<(K, V)> = it.by_ref().take(cnt).collect();
            let id = if i == 0 { 0 } else { t.alloc_leaf() };
            let min = chunk[0].0.clone();
            t.leaves[id as usize].leaf.load_sorted(chunk.into_iter());
            if i > 0 {
                let prev = level[i - 1].1;
                t.leaves[prev as usize].next = id;
                t.leaves[id as usize].prev = prev;
            }
            level.push((min, id));
        }
        t.last_leaf = level[m - 1].1;
        while level.len() > 1 {
            let c = level.len();
            let g = c.div_ceil(t.fanout);
            let mut up = Vec::with_capacity(g);
            let mut it = level.into_iter();
            for i in 0..g {
                let cnt = c / g + usize::from(i < c % g);
                let group: Vec<(K, u32)> = it.by_ref().take(cnt).collect();
                let min = group[0].0.clone();
                let id = t.alloc_node();
                let node = &mut t.nodes[id as usize];
                for (j, (k, child)) in group.into_iter().enumerate() {
                    if j > 0 {
                        node.keys.push(k);
                    }
                    node.children.push(child);
                }
                up.push((min, id));
            }
            level = up;
            t.height += 1;
        }
        t.root = level[0].1;
        t
    }

    /// The options the tree was built with.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the tree holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated by the tree, including heap memory owned by keys and values (see [`HeapSize`]). O(1).
    pub fn memory_usage(&self) -> usize {
        mem::size_of::<Self>()
            + self.leaves.capacity() * mem::size_of::<LeafEntry<L>>()
            + self.leaves.len() * self.leaf_bytes
            + self.nodes.capacity() * mem::size_of::<Internal<K>>()
            + self.nodes.len() * (self.fanout + 1) * (mem::size_of::<K>() + 4)
            + (self.free_leaves.capacity() + self.free_nodes.capacity()) * 4
            + self.heap_bytes
    }

    /// Counters of structural work so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Height of the tree: 1 for a single leaf.
    pub fn height(&self) -> usize {
        self.height as usize + 1
    }

    /// Number of leaves in use.
    pub fn leaf_count(&self) -> usize {
        self.leaves.len() - self.free_leaves.len()
    }

    fn alloc_leaf(&mut self) -> u32 {
        if let Some(id) = self.free_leaves.pop() {
            return id;
        }
        self.leaves.push(LeafEntry { leaf: L::new(&self.opts), prev: NIL, next: NIL });
        (self.leaves.len() - 1) as u32
    }

    fn alloc_node(&mut self) -> u32 {
        if let Some(id) = self.free_nodes.pop() {
            return id;
        }
        let cap = self.fanout + 1;
        self.nodes.push(Internal { keys: Vec::with_capacity(cap), children: Vec::with_capacity(cap) });
        (self.nodes.len() - 1) as u32
    }

    /// The leaf whose key range holds `key`.
    #[inline]
    pub(crate) fn leaf_for<Q>(&self, key: &Q) -> u32
    where
        Q: Probe<K> + ?Sized,
    {
        let mut node = self.root;
        for _ in 0..self.height {
            let n = &self.nodes[node as usize];
            prefetch::slice(&n.keys);
            let idx = n.keys.partition_point(|k| key.cmp_to(k).is_ge());
            node = n.children[idx];
        }
        node
    }

    pub(crate) fn leaf_for_bound<Q>(&self, b: Bound<&Q>, low: bool) -> u32
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        match b {
            Bound::Included(k) | Bound::Excluded(k) => self.leaf_for(k),
            Bound::Unbounded if low => self.first_leaf,
            Bound::Unbounded => self.last_leaf,
        }
    }

    /// The value of `key`.
    #[inline]
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        Q: PointProbe<K> + ?Sized,
    {
        self.leaves[self.leaf_for(key) as usize].leaf.get(key).map(|(_, v)| v)
    }

    /// The stored key and value of `key`.
    pub fn get_key_value<Q>(&self, key: &Q) -> Option<(&K, &V)>
    where
        Q: PointProbe<K> + ?Sized,
    {
        self.leaves[self.leaf_for(key) as usize].leaf.get(key)
    }

    /// Whether `key` is present.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        Q: PointProbe<K> + ?Sized,
    {
        self.get(key).is_some()
    }

    /// The value of `key`, mutably. The value's heap size must not change through this reference if
    /// `memory_usage` is to stay exact.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        Q: PointProbe<K> + ?Sized,
    {
        let leaf = self.leaf_for(key);
        self.leaves[leaf as usize].leaf.get_mut(key)
    }

    /// Inserts `key` with `value`; returns the previous value of `key` (the stored key is kept, as `BTreeMap`
    /// does).
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        let (kheap, vheap) = (key.heap_size(), value.heap_size());
        let (old, split) = self.insert_rec(self.root, self.height, key, value);
        if let Some((pivot, right)) = split {
            let id = self.alloc_node();
            let node = &mut self.nodes[id as usize];
            node.keys.push(pivot);
            node.children.push(self.root);
            node.children.push(right);
            self.root = id;
            self.height += 1;
        }
        match &old {
            None => {
                self.len += 1;
                self.heap_bytes += kheap + vheap;
            }
            Some(v) => self.heap_bytes = (self.heap_bytes + vheap).saturating_sub(v.heap_size()),
        }
        old
    }

    fn insert_rec(&mut self, node: u32, level: u32, key: K, value: V) -> (Option<V>, Option<(K, u32)>) {
        if level == 0 {
            let entry = &mut self.leaves[node as usize];
            if entry.leaf.len() < self.split_at {
                let flushes = self.stats.flushes;
                let old = entry.leaf.insert(key, value, &mut self.stats);
                if self.stats.flushes != flushes {
                    self.check_leaf(node);
                } else {
                    self.check_leaf_light(node);
                }
                return (old, None);
            }
            if let Some(v) = entry.leaf.get_mut(&key) {
                return (Some(mem::replace(v, value)), None);
            }
            let (pivot, right) = self.split_leaf(node);
            let target = if key >= pivot { right } else { node };
            let old = self.leaves[target as usize].leaf.insert(key, value, &mut self.stats);
            self.check_leaf(node);
            self.check_leaf(right);
            return (old, Some((pivot, right)));
        }
        let n = &self.nodes[node as usize];
        prefetch::slice(&n.keys);
        let idx = n.keys.partition_point(|k| *k <= key);
        let child = n.children[idx];
        let (old, split) = self.insert_rec(child, level - 1, key, value);
        let Some((pivot, right)) = split else { return (old, None) };
        let n = &mut self.nodes[node as usize];
        n.keys.insert(idx, pivot);
        n.children.insert(idx + 1, right);
        if n.children.len() <= self.fanout {
            return (old, None);
        }
        (old, Some(self.split_node(node)))
    }

    /// Splits a full leaf: its entries are drained in sorted order (which flushes the BPA log) and the upper
    /// half moves to a new right neighbour. Returns the new leaf's smallest key and id.
    fn split_leaf(&mut self, id: u32) -> (K, u32) {
        self.stats.leaf_splits += 1;
        self.stats.redistributes += 1;
        let right = self.alloc_leaf();
        let mut all = Vec::with_capacity(self.split_at + 1);
        self.leaves[id as usize].leaf.drain_sorted(&mut all, &mut self.stats);
        let upper = all.split_off(all.len() / 2);
        let pivot = upper[0].0.clone();
        self.leaves[id as usize].leaf.load_sorted(all.into_iter());
        self.leaves[right as usize].leaf.load_sorted(upper.into_iter());
        let next = self.leaves[id as usize].next;
        self.leaves[right as usize].prev = id;
        self.leaves[right as usize].next = next;
        self.leaves[id as usize].next = right;
        if next == NIL {
            self.last_leaf = right;
        } else {
            self.leaves[next as usize].prev = right;
        }
        (pivot, right)
    }

    fn split_node(&mut self, id: u32) -> (K, u32) {
        self.stats.internal_splits += 1;
        let right = self.alloc_node();
        let n = &mut self.nodes[id as usize];
        let h = n.children.len() / 2;
        let rchildren: Vec<u32> = n.children.drain(h..).collect();
        let mut rkeys: Vec<K> = n.keys.drain(h - 1..).collect();
        let pivot = rkeys.remove(0);
        let r = &mut self.nodes[right as usize];
        r.keys.extend(rkeys);
        r.children.extend(rchildren);
        (pivot, right)
    }

    #[inline]
    fn check_leaf_light(&self, _id: u32) {
        #[cfg(feature = "invariants")]
        if let Err(e) = self.leaves[_id as usize].leaf.check_light() {
            panic!("leaf {_id} invariant violated: {e}");
        }
    }

    #[inline]
    fn check_leaf(&self, _id: u32) {
        #[cfg(feature = "invariants")]
        if let Err(e) = self.leaves[_id as usize].leaf.check() {
            panic!("leaf {_id} invariant violated: {e}");
        }
    }

    /// Calls `f` on up to `length` entries in key order, starting at the smallest key at or after `start`
    /// (paper: `iterate_range(start, length, f)`); returns how many it visited. Sorts the BPA log and the blocks it
    /// reaches in place, so later scans of the same region are cheaper.
    pub fn iterate_range<Q, F>(&mut self, start: Bound<&Q>, length: usize, mut f: F) -> usize
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        F: FnMut(&K, &V),
    {
        let mut leaf = self.leaf_for_bound(start, true);
        let mut bound = start;
        let mut done = 0;
        while done < length && leaf != NIL {
            let e = &mut self.leaves[leaf as usize];
            done += e.leaf.iterate_from(bound, length - done, &mut f, &mut self.stats);
            leaf = e.next;
            bound = Bound::Unbounded;
        }
        done
    }

    /// `iterate_range` through `&self` for sorted leaves (the frozen tree): no sorting, plain two-finger scans.
    pub(crate) fn scan_sorted<Q, F>(&self, start: Bound<&Q>, length: usize, f: &mut F) -> usize
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        F: FnMut(&K, &V),
    {
        let mut leaf = self.leaf_for_bound(start, true);
        let mut bound = start;
        let mut done = 0;
        while done < length && leaf != NIL {
            let e = &self.leaves[leaf as usize];
            done += e.leaf.scan(bound, length - done, f);
            leaf = e.next;
            bound = Bound::Unbounded;
        }
        done
    }

    /// Calls `f` on every entry with a key in `range`, in no particular order (paper: `map_range`). Never
    /// sorts, so it takes `&self`.
    pub fn map_range<Q, R, F>(&self, range: R, mut f: F)
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        R: RangeBounds<Q>,
        F: FnMut(&K, &V),
    {
        let (lo, hi) = (range.start_bound(), range.end_bound());
        let mut leaf = self.leaf_for_bound(lo, true);
        while leaf != NIL {
            let e = &self.leaves[leaf as usize];
            if e.leaf.map_range(lo, hi, &mut f) {
                break;
            }
            leaf = e.next;
        }
    }

    /// Removes every entry, keeping the options.
    pub fn clear(&mut self) {
        *self = Self::build(self.opts);
    }
}

impl<K, V, L> Default for BpTree<K, V, L>
where
    K: Ord + Clone + HeapSize + Fingerprint,
    V: HeapSize,
    L: Leaf<K, V>,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<K, V, L> Extend<(K, V)> for BpTree<K, V, L>
where
    K: Ord + Clone + HeapSize + Fingerprint,
    V: HeapSize,
    L: Leaf<K, V>,
{
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}
