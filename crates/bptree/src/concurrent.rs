//! The concurrent BP-tree (paper §2.1 and §5): per-node reader-writer locks with hand-over-hand descent. Lookups,
//! inserts and the invariant check are here; removal is in `concurrent/remove.rs`, range reads in
//! `concurrent/scan.rs`.

use std::borrow::Borrow;
use std::marker::PhantomData;
use std::mem;
use std::ops::Bound;
use std::sync::Arc;

use crate::bpa::Bpa;
use crate::error::Result;
use crate::frozen::FrozenBpTree;
use crate::heap_size::HeapSize;
use crate::leaf::Leaf;
use crate::options::Options;
use crate::prefetch;
use crate::probe::{Fingerprint, PointProbe, Probe};
use crate::stats::Stats;
use crate::sync::{ArcReadGuard, ArcWriteGuard, AtomicUsize, Mutex, Ordering, RwLock};
use crate::tree::BpTree;

mod remove;
mod scan;

pub use scan::ConcurrentRange;

type NodeRef<K, V, L> = Arc<RwLock<Node<K, V, L>>>;
type ReadGuard<K, V, L> = ArcReadGuard<Node<K, V, L>>;
type WriteGuard<K, V, L> = ArcWriteGuard<Node<K, V, L>>;

enum Node<K, V, L> {
    Internal(InternalNode<K, V, L>),
    Leaf(LeafNode<K, V, L>),
}

/// `children[i]` holds keys in `[keys[i-1], keys[i])`; `leaf_children` says whether the children are leaves, so a
/// descent knows which lock to take on the next level before touching it.
struct InternalNode<K, V, L> {
    keys: Vec<K>,
    children: Vec<NodeRef<K, V, L>>,
    leaf_children: bool,
}

/// A leaf with its right neighbour. `epoch` changes whenever entries move between leaves (split, merge, borrow),
/// so a range scan that had to let go of the leaf's lock to upgrade it can tell whether its position is still good.
struct LeafNode<K, V, L> {
    leaf: L,
    next: Option<NodeRef<K, V, L>>,
    epoch: u64,
    _kv: PhantomData<(K, V)>,
}

impl<K, V, L> Node<K, V, L> {
    fn leaf(&self) -> Option<&LeafNode<K, V, L>> {
        match self {
            Node::Leaf(l) => Some(l),
            Node::Internal(_) => None,
        }
    }
}

/// A BP-tree that many threads update and read at once through `&self`.
///
/// Concurrency control is the paper's (§2.1, §5): every node has a reader-writer lock; operations descend with
/// hand-over-hand locking (the child's lock is taken before the parent's is released), always top-down and, among
/// leaves, left to right, so there is no deadlock.
///
/// - `insert` is optimistic: read locks down to the leaf's parent, then the leaf's write lock. If the leaf can take
///   the entry without splitting, done. Otherwise it lets everything go and retries pessimistically: write locks
///   from the root down, releasing all ancestors whenever it reaches a node that cannot split (lock coupling), then
///   splits the leaf (after draining its log in sorted order) and pushes separators up the held nodes.
///   Deviation: the paper first tries to upgrade the parent's read lock in place; `parking_lot` read locks cannot
///   be upgraded (only exclusive "upgradable" reads, which would serialise all inserts under a parent), so a
///   split always takes the pessimistic path. Splits are one insert in ~500.
/// - `remove` is optimistic in the same way when the leaf stays above the merge threshold; otherwise the
///   pessimistic descent keeps every ancestor that could underflow write-locked, merges the leaf with a neighbour
///   or borrows from it, then does the same for internal nodes below `fanout / 2` on the way up; the root
///   collapses when it has one child.
/// - `iterate_range` takes the leaf's read lock and checks (with the sorted-block bits) whether the log and the
///   blocks it will read are sorted; only if not does it let go, take the write lock, sort exactly what the scan
///   needs, downgrade atomically to a read lock and scan. If the leaf's `epoch` changed while it held no lock, it
///   re-descends from the root after the last key it delivered. It then moves right hand-over-hand.
/// - `map_range` never sorts (the BPA's log and blocks are disjoint), so it only ever takes read locks.
/// - `range` returns an owned-entry iterator that holds no lock between calls: it copies a batch of entries
///   under a leaf's read lock and re-descends from the root for the next batch, from either end.
pub struct ConcurrentBpTree<K, V, L = Bpa<K, V>> {
    root: RwLock<NodeRef<K, V, L>>,
    opts: Options,
    fanout: usize,
    split_at: usize,
    merge_at: usize,
    leaf_bytes: usize,
    len: AtomicUsize,
    heap_bytes: AtomicUsize,
    leaves: AtomicUsize,
    nodes: AtomicUsize,
    stats: Mutex<Stats>,
}

/// A summary, not the entries.
impl<K, V, L> std::fmt::Debug for ConcurrentBpTree<K, V, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConcurrentBpTree")
            .field("len", &self.len.load(std::sync::atomic::Ordering::Relaxed))
            .field("leaves", &self.leaves.load(std::sync::atomic::Ordering::Relaxed))
            .field("heap_bytes", &self.heap_bytes.load(std::sync::atomic::Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

const BATCH: usize = 64;

impl<K, V, L> ConcurrentBpTree<K, V, L>
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
        let leaf_bytes = leaf.memory_usage();
        let split_at = L::split_at(&opts);
        let merge_at = opts.merge_at(split_at);
        ConcurrentBpTree {
            root: RwLock::new(Self::new_leaf(leaf, None)),
            fanout: opts.fanout(mem::size_of::<K>()),
            opts,
            split_at,
            merge_at,
            leaf_bytes,
            len: AtomicUsize::new(0),
            heap_bytes: AtomicUsize::new(0),
            leaves: AtomicUsize::new(1),
            nodes: AtomicUsize::new(0),
            stats: Mutex::new(Stats::default()),
        }
    }

    fn new_leaf(leaf: L, next: Option<NodeRef<K, V, L>>) -> NodeRef<K, V, L> {
        Arc::new(RwLock::new(Node::Leaf(LeafNode { leaf, next, epoch: 0, _kv: PhantomData })))
    }

    /// The options the tree was built with.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Number of entries (exact once concurrent writers are quiet).
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Whether the tree holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes allocated by the tree, including heap memory owned by keys and values. O(1).
    pub fn memory_usage(&self) -> usize {
        let node = mem::size_of::<RwLock<Node<K, V, L>>>() + 16;
        self.leaves.load(Ordering::Relaxed) * (self.leaf_bytes + node)
            + self.nodes.load(Ordering::Relaxed) * (node + (self.fanout + 1) * (mem::size_of::<K>() + 8))
            + self.heap_bytes.load(Ordering::Relaxed)
            + mem::size_of::<Self>()
    }

    /// Counters of structural work so far.
    pub fn stats(&self) -> Stats {
        *self.stats.lock()
    }

    fn note(&self, local: &Stats) {
        if !local.is_zero() {
            self.stats.lock().add(local);
        }
    }

    /// Descends with read locks to the leaf whose range holds `key` (or the leftmost leaf for `None`); the leaf
    /// is read-locked too.
    fn read_leaf<Q>(&self, key: Option<&Q>) -> ReadGuard<K, V, L>
    where
        Q: Probe<K> + ?Sized,
    {
        let rp = self.root.read();
        let mut g = rp.read_arc();
        drop(rp);
        loop {
            let next = match &*g {
                Node::Leaf(_) => return g,
                Node::Internal(n) => {
                    prefetch::slice(&n.keys);
                    let idx = key.map_or(0, |k| n.keys.partition_point(|p| k.cmp_to(p).is_ge()));
                    n.children[idx].read_arc()
                }
            };
            g = next;
        }
    }

    /// Descends with read locks to the leaf that holds the keys just below `key` (strictly, or including it),
    /// or the rightmost leaf for `None`. Returns the leaf and the lower fence of its range.
    fn read_leaf_before<Q>(&self, key: Option<&Q>, inclusive: bool) -> (ReadGuard<K, V, L>, Option<K>)
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let rp = self.root.read();
        let mut g = rp.read_arc();
        drop(rp);
        let mut fence = None;
        loop {
            let next = match &*g {
                Node::Leaf(_) => return (g, fence),
                Node::Internal(n) => {
                    let idx = match key {
                        None => n.children.len() - 1,
                        Some(k) if inclusive => n.keys.partition_point(|p| p.borrow() <= k),
                        Some(k) => n.keys.partition_point(|p| p.borrow() < k),
                    };
                    if idx > 0 {
                        fence = Some(n.keys[idx - 1].clone());
                    }
                    n.children[idx].read_arc()
                }
            };
            g = next;
        }
    }

    /// Optimistic descent for a write: read locks on internal nodes, the write lock on the leaf. Also says
    /// whether the leaf is the root.
    fn write_leaf_optimistic<Q>(&self, key: &Q) -> (WriteGuard<K, V, L>, bool)
    where
        Q: Probe<K> + ?Sized,
    {
        let rp = self.root.read();
        let root = rp.clone();
        let g = root.read_arc();
        if let Node::Leaf(_) = &*g {
            drop(g);
            // Still under the root pointer's read lock: the root cannot be replaced meanwhile.
            let w = root.write_arc();
            drop(rp);
            return (w, true);
        }
        drop(rp);
        let mut g = g;
        loop {
            let Node::Internal(n) = &*g else { unreachable!("a read descent stops above the leaves") };
            prefetch::slice(&n.keys);
            let idx = n.keys.partition_point(|p| key.cmp_to(p).is_ge());
            let child = n.children[idx].clone();
            if n.leaf_children {
                let w = child.write_arc();
                drop(g);
                return (w, false);
            }
            let cg = child.read_arc();
            g = cg;
        }
    }

    /// The value of `key`, cloned.
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        Q: PointProbe<K> + ?Sized,
        V: Clone,
    {
        self.get_with(key, V::clone)
    }

    /// Applies `f` to the value of `key` under the leaf's read lock.
    pub fn get_with<Q, R>(&self, key: &Q, f: impl FnOnce(&V) -> R) -> Option<R>
    where
        Q: PointProbe<K> + ?Sized,
    {
        let g = self.read_leaf(Some(key));
        g.leaf().and_then(|l| l.leaf.get(key)).map(|(_, v)| f(v))
    }

    /// Whether `key` is present.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        Q: PointProbe<K> + ?Sized,
    {
        self.get_with(key, |_| ()).is_some()
    }

    /// Inserts `key` with `value`; returns the previous value.
    pub fn insert(&self, key: K, value: V) -> Option<V> {
        let (kheap, vheap) = (key.heap_size(), value.heap_size());
        let mut local = Stats::default();
        let old = match self.insert_optimistic(key, value, &mut local) {
            Ok(old) => old,
            Err((key, value)) => {
                local.pessimistic_retries += 1;
                self.insert_pessimistic(key, value, &mut local, |slot, new| Some(mem::replace(slot, new)))
            }
        };
        match &old {
            None => {
                self.len.fetch_add(1, Ordering::Relaxed);
                self.heap_bytes.fetch_add(kheap + vheap, Ordering::Relaxed);
            }
            Some(v) => {
                self.heap_bytes.fetch_add(vheap, Ordering::Relaxed);
                self.heap_bytes.fetch_sub(v.heap_size(), Ordering::Relaxed);
            }
        }
        self.note(&local);
        old
    }

    /// Updates the value of `key` in place with `update`, or inserts the pair `make` returns when `key` is
    /// absent. Returns whether it inserted. One descent and one leaf search, where a [`Self::get_with`] followed
    /// by an [`Self::insert`] makes two of each (a leaf that must split costs a second, pessimistic descent).
    /// Both closures run under the leaf's write lock, so no other writer's change to `key` comes in between.
    ///
    /// REQUIRES: `make` returns `key` (as `K`).
    pub fn upsert<Q>(&self, key: &Q, update: impl FnOnce(&mut V), make: impl FnOnce() -> (K, V)) -> bool
    where
        Q: PointProbe<K> + ?Sized,
    {
        let mut local = Stats::default();
        let update_counted = |slot: &mut V| {
            let before = slot.heap_size();
            update(slot);
            let after = slot.heap_size();
            self.heap_bytes.fetch_add(after, Ordering::Relaxed);
            self.heap_bytes.fetch_sub(before, Ordering::Relaxed);
        };
        let (mut w, _) = self.write_leaf_optimistic(key);
        let Node::Leaf(l) = &mut *w else { unreachable!("write descent ends at a leaf") };
        if let Some(slot) = l.leaf.get_mut(key) {
            update_counted(slot);
            return false;
        }
        let (k, v) = make();
        debug_assert!(key.eq_to(&k), "upsert: make() returned another key");
        let (kheap, vheap) = (k.heap_size(), v.heap_size());
        let inserted = if l.leaf.len() < self.split_at {
            l.leaf.insert_new(k, v, &mut local);
            check_leaf(&l.leaf, false);
            true
        } else {
            drop(w);
            local.pessimistic_retries += 1;
            // The leaf lock was released: re-check presence under the pessimistic descent's locks.
            let mut update = Some(update_counted);
            let mut present = false;
            self.insert_pessimistic(k, v, &mut local, |slot, _new| {
                present = true;
                if let Some(u) = update.take() {
                    u(slot);
                }
                None
            });
            !present
        };
        if inserted {
            self.len.fetch_add(1, Ordering::Relaxed);
            self.heap_bytes.fetch_add(kheap + vheap, Ordering::Relaxed);
        }
        self.note(&local);
        inserted
    }

    /// Inserts if the leaf has room (or holds the key); hands the entry back if the leaf must split.
    fn insert_optimistic(
        &self,
        key: K,
        value: V,
        local: &mut Stats,
    ) -> std::result::Result<Option<V>, (K, V)> {
        let (mut w, _) = self.write_leaf_optimistic(&key);
        let Node::Leaf(l) = &mut *w else { unreachable!("write descent ends at a leaf") };
        if l.leaf.len() < self.split_at {
            let old = l.leaf.insert(key, value, local);
            check_leaf(&l.leaf, false);
            return Ok(old);
        }
        if let Some(v) = l.leaf.get_mut(&key) {
            return Ok(Some(mem::replace(v, value)));
        }
        Err((key, value))
    }

    /// Write locks from the root down, keeping only the ancestors that a split could reach. When `key` is
    /// present, `on_present(slot, value)` decides what happens to its value and gives the result.
    fn insert_pessimistic(
        &self,
        key: K,
        value: V,
        local: &mut Stats,
        on_present: impl FnOnce(&mut V, V) -> Option<V>,
    ) -> Option<V> {
        let mut rp = Some(self.root.write());
        let root = rp.as_ref().map(|g| (**g).clone()).unwrap_or_else(|| unreachable!());
        let mut cur = root.write_arc();
        let root_was_leaf = matches!(&*cur, Node::Leaf(_));
        let mut stack: Vec<(WriteGuard<K, V, L>, usize)> = Vec::new();
        loop {
            let safe = match &*cur {
                Node::Internal(n) => n.children.len() < self.fanout,
                Node::Leaf(l) => l.leaf.len() < self.split_at,
            };
            if safe {
                stack.clear();
                rp = None;
            }
            let (child, idx) = match &*cur {
                Node::Leaf(_) => break,
                Node::Internal(n) => {
                    let idx = n.keys.partition_point(|p| *p <= key);
                    (n.children[idx].clone(), idx)
                }
            };
            let cg = child.write_arc();
            stack.push((cur, idx));
            cur = cg;
        }
        let Node::Leaf(l) = &mut *cur else { unreachable!("write descent ends at a leaf") };
        if let Some(v) = l.leaf.get_mut(&key) {
            return on_present(v, value);
        }
        if l.leaf.len() < self.split_at {
            l.leaf.insert_new(key, value, local);
            return None;
        }
        // Split: drain in sorted order (this flushes the log), keep the lower half, move the upper half right.
        local.leaf_splits += 1;
        local.redistributes += 1;
        let mut all = Vec::with_capacity(self.split_at + 1);
        l.leaf.drain_sorted(&mut all, local);
        let upper = all.split_off(all.len() / 2);
        let pivot = upper[0].0.clone();
        l.leaf.load_sorted(all.into_iter());
        let mut rleaf = L::new(&self.opts);
        rleaf.load_sorted(upper.into_iter());
        l.epoch += 1;
        if key >= pivot {
            rleaf.insert_new(key, value, local);
        } else {
            l.leaf.insert_new(key, value, local);
        }
        check_leaf(&l.leaf, true);
        check_leaf(&rleaf, true);
        let right = Self::new_leaf(rleaf, l.next.take());
        l.next = Some(right.clone());
        self.leaves.fetch_add(1, Ordering::Relaxed);
        drop(cur);
        let mut pending = Some((pivot, right));
        while let Some((pk, rnode)) = pending.take() {
            match stack.pop() {
                Some((mut pg, idx)) => {
                    let Node::Internal(n) = &mut *pg else { unreachable!("ancestors are internal") };
                    n.keys.insert(idx, pk);
                    n.children.insert(idx + 1, rnode);
                    if n.children.len() > self.fanout {
                        local.internal_splits += 1;
                        let h = n.children.len() / 2;
                        let mut children = Vec::with_capacity(self.fanout + 1);
                        children.extend(n.children.drain(h..));
                        let mut keys = Vec::with_capacity(self.fanout + 1);
                        keys.extend(n.keys.drain(h..));
                        let sep = n.keys.pop().unwrap_or_else(|| unreachable!());
                        let node = InternalNode { keys, children, leaf_children: n.leaf_children };
                        self.nodes.fetch_add(1, Ordering::Relaxed);
                        pending = Some((sep, Arc::new(RwLock::new(Node::Internal(node)))));
                    }
                }
                None => {
                    // The root split; it was unsafe, so the root pointer is still held.
                    let Some(rp) = rp.as_mut() else { unreachable!("root pointer released under a split") };
                    let old_root = (**rp).clone();
                    let mut keys = Vec::with_capacity(self.fanout + 1);
                    keys.push(pk);
                    let mut children = Vec::with_capacity(self.fanout + 1);
                    children.push(old_root);
                    children.push(rnode);
                    let leaf_children = root_was_leaf;
                    **rp =
                        Arc::new(RwLock::new(Node::Internal(InternalNode { keys, children, leaf_children })));
                    self.nodes.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        None
    }

    /// Moves every entry into a frozen (sorted, read-only, `Sync`) tree.
    pub fn freeze(self) -> FrozenBpTree<K, V, L> {
        self.into_tree().freeze()
    }

    /// Moves every entry into a single-writer tree with the same options.
    pub fn into_tree(self) -> BpTree<K, V, L> {
        let mut all = Vec::with_capacity(self.len());
        let mut local = Stats::default();
        let mut node = Some(self.root.read().clone());
        while let Some(n) = node.take() {
            let mut w = n.write_arc();
            let Node::Leaf(l) = &mut *w else {
                let Node::Internal(i) = &*w else { unreachable!() };
                node = Some(i.children[0].clone());
                continue;
            };
            l.leaf.drain_sorted(&mut all, &mut local);
            node = l.next.clone();
        }
        BpTree::from_sorted(self.opts, all)
    }

    /// Checks the whole structure (node shapes and fences, every leaf, the leaf chain, the count). Call it when
    /// no writer runs. O(n).
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        let root = self.root.read().clone();
        let mut leaves = Vec::new();
        self.check_rec(&root, None, None, true, &mut leaves)?;
        let mut count = 0;
        let mut prev_last: Option<K> = None;
        let mut node = Some(leaves.first().cloned().ok_or("no leaf")?);
        let mut i = 0;
        while let Some(n) = node.take() {
            if i >= leaves.len() || !Arc::ptr_eq(&n, &leaves[i]) {
                return Err("leaf chain differs from the tree order".into());
            }
            i += 1;
            let g = n.read();
            let Node::Leaf(l) = &*g else { return Err("chain reaches an internal node".into()) };
            count += l.leaf.len();
            if let (Some(p), Some(f)) = (&prev_last, l.leaf.first_key())
                && p >= f
            {
                return Err("leaves out of order".into());
            }
            if let Some((k, _)) = l.leaf.range::<K>(Bound::Unbounded, Bound::Unbounded).next_back() {
                prev_last = Some(k.clone());
            }
            node = l.next.clone();
        }
        if i != leaves.len() {
            return Err("leaf chain ends early".into());
        }
        if count != self.len() {
            return Err(format!("len {} but leaves hold {count}", self.len()));
        }
        Ok(())
    }

    fn check_rec(
        &self,
        node: &NodeRef<K, V, L>,
        lo: Option<&K>,
        hi: Option<&K>,
        is_root: bool,
        leaves: &mut Vec<NodeRef<K, V, L>>,
    ) -> std::result::Result<(), String> {
        let g = node.read();
        match &*g {
            Node::Leaf(l) => {
                l.leaf.check()?;
                if l.leaf.is_empty() && !is_root {
                    return Err("non-root leaf is empty".into());
                }
                for (k, _) in l.leaf.range::<K>(Bound::Unbounded, Bound::Unbounded) {
                    if lo.is_some_and(|lo| k < lo) || hi.is_some_and(|hi| k >= hi) {
                        return Err("leaf holds a key outside its fences".into());
                    }
                }
                leaves.push(node.clone());
            }
            Node::Internal(n) => {
                if n.children.len() != n.keys.len() + 1
                    || n.children.is_empty()
                    || n.children.len() > self.fanout
                {
                    return Err(format!(
                        "internal node with {} keys, {} children",
                        n.keys.len(),
                        n.children.len()
                    ));
                }
                let min = if is_root { 2 } else { self.fanout / 2 };
                if n.children.len() < min {
                    return Err(format!("internal node with {} children, below {min}", n.children.len()));
                }
                if n.keys.windows(2).any(|w| w[0] >= w[1]) {
                    return Err("internal keys not sorted".into());
                }
                for (i, c) in n.children.iter().enumerate() {
                    let is_leaf = matches!(&*c.read(), Node::Leaf(_));
                    if is_leaf != n.leaf_children {
                        return Err("leaf_children flag wrong".into());
                    }
                    let clo = if i == 0 { lo } else { Some(&n.keys[i - 1]) };
                    let chi = if i == n.keys.len() { hi } else { Some(&n.keys[i]) };
                    self.check_rec(c, clo, chi, false, leaves)?;
                }
            }
        }
        Ok(())
    }
}

/// With the `invariants` feature, checks a leaf just changed (fully after structural changes).
#[inline]
fn check_leaf<K: Ord, V, L: Leaf<K, V>>(_leaf: &L, _full: bool) {
    #[cfg(feature = "invariants")]
    {
        let r = if _full { _leaf.check() } else { _leaf.check_light() };
        if let Err(e) = r {
            panic!("leaf invariant violated: {e}");
        }
    }
}

impl<K, V, L> Default for ConcurrentBpTree<K, V, L>
where
    K: Ord + Clone + HeapSize + Fingerprint,
    V: HeapSize,
    L: Leaf<K, V>,
{
    fn default() -> Self {
        Self::new()
    }
}
