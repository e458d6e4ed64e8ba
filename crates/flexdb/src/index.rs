//! The sparse KV index (§5.1): one entry per interval of the table file, keyed by the interval's smallest key,
//! with the interval's file offset shift-encoded as in FlexTree.
//!
//! # Design
//!
//! A B+-tree over intervals. Leaves hold up to [`LEAF_MAX`] intervals `(key, partial offset, size, id)`; internal
//! nodes hold up to [`INTERNAL_MAX`] children separated by pivot keys. Every child pointer carries a *shift*
//! (stored in the child node, next to its parent pointer, so a leaf can sum its path bottom-up). The effective
//! file offset of an interval is its partial offset plus the shifts of every node on its root-to-leaf path.
//!
//! Growing or shrinking an interval by `d` bytes (an insert or collapse in the table file) adds `d` to the partial
//! offsets after it in its leaf, then, at every level up to the root, to the shifts of the siblings right of the
//! path: O(fanout x height) = O(log N) updates, and no key or pivot changes, as the paper describes. Nodes split
//! when full; a node that falls below a quarter full absorbs its right sibling under the same parent when both fit
//! in one node (moved entries and children are rebased by the difference of the two shifts); a root with one
//! child gives way to that child.
//!
//! Positions ([`Pos`]) name a leaf by its arena slot and an entry within it. A position stays valid across
//! operations that do not move its entry: `split` may move entries of the split leaf (it returns the new
//! interval's position), `remove` shifts the later entries of its leaf and may move the entries of the leaf right
//! of it into it; entries left of a removed one never move.
//!
//! Invariants (checked by [`SparseIndex::check`]): interval 0 has the empty key and offset 0; keys strictly
//! increase; each interval starts where the previous one ends; no node is empty; every pivot is greater than
//! every key left of it and at most the smallest key right of it; parent and sibling links agree.

use crate::cache::CacheSlot;
use crate::error::{Error, Result};
use crate::hints::Hints;

mod check;
mod remove;

/// Most intervals per leaf before the leaf splits.
pub const LEAF_MAX: usize = 64;
/// Most children per internal node before it splits.
pub const INTERNAL_MAX: usize = 64;
const NIL: u32 = u32::MAX;

/// One interval of the table file.
#[derive(Debug)]
pub struct Interval {
    /// Smallest key of the interval (empty for interval 0, which covers every key below interval 1).
    pub key: Box<[u8]>,
    poff: i64,
    /// Bytes of the interval in the table file.
    pub size: u64,
    /// Stable identity for the interval cache.
    pub id: u64,
    /// The paper's cache pointer (§5.3): where the interval was last seen in its cache partition, so a hit skips
    /// the partition's map. A hint only: the cache checks the slot still holds `id` (see `cache.rs`). Readers
    /// update it under the index's shared lock, hence atomic.
    pub cache_slot: CacheSlot,
}

impl Interval {
    fn new(key: Box<[u8]>, poff: i64, size: u64, id: u64) -> Self {
        Interval { key, poff, size, id, cache_slot: CacheSlot::default() }
    }
}

#[derive(Debug)]
enum Kind {
    Leaf {
        ents: Vec<Interval>,
        prev: u32,
        next: u32,
    },
    /// `pivots[i]` separates `children[i]` from `children[i + 1]`.
    Internal {
        pivots: Vec<Box<[u8]>>,
        children: Vec<u32>,
    },
}

#[derive(Debug)]
struct Node {
    /// The shift of the pointer from the parent to this node.
    shift: i64,
    parent: u32,
    kind: Kind,
    /// Search hints over the node's keys (leaf: interval keys; internal: pivots). Every change of a node's keys
    /// ends with [`SparseIndex::refresh`]; [`SparseIndex::check`] verifies it.
    hints: Hints,
}

/// A position in the index: leaf (arena slot) and entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    /// Leaf slot.
    pub leaf: usize,
    /// Entry within the leaf.
    pub ent: usize,
}

/// The sparse index. See the module comment.
#[derive(Debug)]
pub struct SparseIndex {
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
    head: u32,
    tail: u32,
    next_id: u64,
    count: usize,
}

impl Default for SparseIndex {
    fn default() -> Self {
        Self::new()
    }
}

fn leaf(ents: Vec<Interval>, parent: u32, shift: i64) -> Node {
    Node { shift, parent, kind: Kind::Leaf { ents, prev: NIL, next: NIL }, hints: Hints::default() }
}

impl SparseIndex {
    /// An index of one empty interval at offset 0.
    pub fn new() -> Self {
        let iv = Interval::new(Box::new([]), 0, 0, 0);
        let mut idx = SparseIndex {
            nodes: Vec::new(),
            free: Vec::new(),
            root: 0,
            head: 0,
            tail: 0,
            next_id: 1,
            count: 1,
        };
        idx.alloc(leaf(vec![iv], NIL, 0));
        idx
    }

    /// Builds an index from `(key, offset)` anchors in increasing order (the first must be `([], 0)`) and the
    /// file size. Used by recovery (§5.4). Nodes are filled to half so that both splits and merges stay cheap.
    pub fn from_anchors(anchors: Vec<(Box<[u8]>, u64)>, file_size: u64) -> Result<Self> {
        let n = anchors.len();
        if n == 0 {
            return Err(Error::corruption("index", "no anchors"));
        }
        let mut ivs = Vec::with_capacity(n);
        for i in 0..n {
            let (ref key, off) = anchors[i];
            let end = if i + 1 < n { anchors[i + 1].1 } else { file_size };
            if end < off || (i > 0 && anchors[i - 1].0 >= *key) || (i == 0 && (off != 0 || !key.is_empty())) {
                return Err(Error::corruption("index", "interval anchors out of order"));
            }
            ivs.push(Interval::new(key.clone(), off as i64, end - off, i as u64));
        }
        let mut idx = SparseIndex {
            nodes: Vec::new(),
            free: Vec::new(),
            root: 0,
            head: 0,
            tail: 0,
            next_id: n as u64,
            count: n,
        };
        // Leaves, then levels of internal nodes, each node half full; every shift is 0 (partial offsets absolute).
        let mut level: Vec<(u32, Box<[u8]>)> = Vec::new();
        let mut it = ivs.into_iter().peekable();
        while it.peek().is_some() {
            let ents: Vec<Interval> = it.by_ref().take(LEAF_MAX / 2).collect();
            let min = ents[0].key.clone();
            let id = idx.alloc(leaf(ents, NIL, 0));
            if let Some(&(prev, _)) = level.last() {
                idx.set_next(prev, id);
                idx.set_prev(id, prev);
            }
            level.push((id, min));
        }
        idx.head = level[0].0;
        idx.tail = level[level.len() - 1].0;
        while level.len() > 1 {
            let mut up = Vec::new();
            for group in level.chunks(INTERNAL_MAX / 2) {
                let children: Vec<u32> = group.iter().map(|c| c.0).collect();
                let pivots = group[1..].iter().map(|c| c.1.clone()).collect();
                let kind = Kind::Internal { pivots, children };
                let id = idx.alloc(Node { shift: 0, parent: NIL, kind, hints: Hints::default() });
                for c in group {
                    idx.nodes[c.0 as usize].parent = id;
                }
                up.push((id, group[0].1.clone()));
            }
            level = up;
        }
        idx.root = level[0].0;
        Ok(idx)
    }

    fn alloc(&mut self, n: Node) -> u32 {
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize] = n;
                id
            }
            None => {
                self.nodes.push(n);
                (self.nodes.len() - 1) as u32
            }
        };
        self.refresh(id);
        id
    }

    fn release(&mut self, id: u32) {
        self.nodes[id as usize].kind = Kind::Internal { pivots: Vec::new(), children: Vec::new() };
        self.nodes[id as usize].parent = NIL;
        // Frees the hints' memory; `alloc` rebuilds them when the slot is reused.
        self.refresh(id);
        self.free.push(id);
    }

    /// The hints of node `id`'s keys as they are now.
    fn hints_of(&self, id: u32) -> Hints {
        match &self.nodes[id as usize].kind {
            Kind::Leaf { ents, .. } => Hints::build(ents.iter().map(|iv| &*iv.key)),
            Kind::Internal { pivots, .. } => Hints::build(pivots.iter().map(|p| &**p)),
        }
    }

    /// Rebuilds node `id`'s hints after its keys changed.
    fn refresh(&mut self, id: u32) {
        self.nodes[id as usize].hints = self.hints_of(id);
    }

    fn ents(&self, id: u32) -> &Vec<Interval> {
        match &self.nodes[id as usize].kind {
            Kind::Leaf { ents, .. } => ents,
            Kind::Internal { .. } => unreachable!("leaf expected"),
        }
    }

    fn ents_mut(&mut self, id: u32) -> &mut Vec<Interval> {
        match &mut self.nodes[id as usize].kind {
            Kind::Leaf { ents, .. } => ents,
            Kind::Internal { .. } => unreachable!("leaf expected"),
        }
    }

    fn links(&self, id: u32) -> (u32, u32) {
        match &self.nodes[id as usize].kind {
            Kind::Leaf { prev, next, .. } => (*prev, *next),
            Kind::Internal { .. } => (NIL, NIL),
        }
    }

    fn set_next(&mut self, id: u32, to: u32) {
        if let Kind::Leaf { next, .. } = &mut self.nodes[id as usize].kind {
            *next = to;
        }
    }

    fn set_prev(&mut self, id: u32, to: u32) {
        if let Kind::Leaf { prev, .. } = &mut self.nodes[id as usize].kind {
            *prev = to;
        }
    }

    fn children(&self, id: u32) -> &Vec<u32> {
        match &self.nodes[id as usize].kind {
            Kind::Internal { children, .. } => children,
            Kind::Leaf { .. } => unreachable!("internal node expected"),
        }
    }

    fn internal_mut(&mut self, id: u32) -> (&mut Vec<Box<[u8]>>, &mut Vec<u32>) {
        match &mut self.nodes[id as usize].kind {
            Kind::Internal { pivots, children } => (pivots, children),
            Kind::Leaf { .. } => unreachable!("internal node expected"),
        }
    }

    /// The slot of child `id` in its parent.
    fn slot(&self, id: u32) -> usize {
        let p = self.nodes[id as usize].parent;
        self.children(p).iter().position(|&c| c == id).unwrap_or(0)
    }

    /// Sum of the shifts from the root down to `id`, inclusive.
    fn path_shift(&self, mut id: u32) -> i64 {
        let mut s = 0;
        while id != NIL {
            s += self.nodes[id as usize].shift;
            id = self.nodes[id as usize].parent;
        }
        s
    }

    /// Number of intervals.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Always false: interval 0 exists.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Number of leaves.
    pub fn leaf_count(&self) -> usize {
        let mut n = 0;
        let mut l = self.head;
        while l != NIL {
            n += 1;
            l = self.links(l).1;
        }
        n
    }

    /// Height of the tree (1: the root is a leaf).
    pub fn height(&self) -> usize {
        let mut h = 1;
        let mut id = self.root;
        while let Kind::Internal { children, .. } = &self.nodes[id as usize].kind {
            id = children[0];
            h += 1;
        }
        h
    }

    /// The interval whose range holds `key`: the last interval with index key `<= key`.
    pub fn locate(&self, key: &[u8]) -> Pos {
        let mut id = self.root;
        loop {
            let node = &self.nodes[id as usize];
            match &node.kind {
                Kind::Internal { pivots, children } => {
                    id = children[node.hints.count_le(key, |i| &pivots[i])];
                }
                Kind::Leaf { ents, .. } => {
                    let e = node.hints.count_le(key, |i| &ents[i].key).max(1) - 1;
                    return Pos { leaf: id as usize, ent: e };
                }
            }
        }
    }

    /// The first interval.
    pub fn first(&self) -> Pos {
        Pos { leaf: self.head as usize, ent: 0 }
    }

    /// The last interval.
    pub fn last(&self) -> Pos {
        Pos { leaf: self.tail as usize, ent: self.ents(self.tail).len() - 1 }
    }

    /// The interval at `p`.
    pub fn get(&self, p: Pos) -> &Interval {
        &self.ents(p.leaf as u32)[p.ent]
    }

    /// The interval after `p`, if any.
    pub fn next(&self, p: Pos) -> Option<Pos> {
        if p.ent + 1 < self.ents(p.leaf as u32).len() {
            return Some(Pos { leaf: p.leaf, ent: p.ent + 1 });
        }
        let n = self.links(p.leaf as u32).1;
        (n != NIL).then_some(Pos { leaf: n as usize, ent: 0 })
    }

    /// The interval before `p`, if any.
    pub fn prev(&self, p: Pos) -> Option<Pos> {
        if p.ent > 0 {
            return Some(Pos { leaf: p.leaf, ent: p.ent - 1 });
        }
        let l = self.links(p.leaf as u32).0;
        (l != NIL).then(|| Pos { leaf: l as usize, ent: self.ents(l).len() - 1 })
    }

    /// The effective file offset of the interval at `p`: its partial offset plus the shifts on its path.
    pub fn offset(&self, p: Pos) -> u64 {
        (self.path_shift(p.leaf as u32) + self.get(p).poff) as u64
    }

    /// Records that the interval at `p` grew by `delta` bytes (negative: shrank): every later interval shifts.
    /// O(fanout x height).
    pub fn resize(&mut self, p: Pos, delta: i64) {
        if delta == 0 {
            return;
        }
        let l = p.leaf as u32;
        let ents = self.ents_mut(l);
        ents[p.ent].size = (ents[p.ent].size as i64 + delta) as u64;
        for iv in &mut ents[p.ent + 1..] {
            iv.poff += delta;
        }
        let mut id = l;
        while self.nodes[id as usize].parent != NIL {
            let parent = self.nodes[id as usize].parent;
            let at = self.slot(id);
            for i in at + 1..self.children(parent).len() {
                let c = self.children(parent)[i];
                self.nodes[c as usize].shift += delta;
            }
            id = parent;
        }
    }

    /// Splits the interval at `p`: its first `keep` bytes stay, and a new interval with index key `key` starts at
    /// `keep`. Returns the new interval's position. REQUIRES: `key` lies strictly between the interval's key and
    /// the next interval's key, and `keep <= size`.
    pub fn split(&mut self, p: Pos, keep: u64, key: Box<[u8]>) -> Pos {
        let id = self.next_id;
        self.next_id += 1;
        self.count += 1;
        let l = p.leaf as u32;
        let hinted = self.ents(l).len() < LEAF_MAX && self.nodes[p.leaf].hints.insert(p.ent + 1, &key);
        let ents = self.ents_mut(l);
        let old = &mut ents[p.ent];
        let rest = old.size - keep;
        old.size = keep;
        let poff = old.poff + keep as i64;
        ents.insert(p.ent + 1, Interval::new(key, poff, rest, id));
        let at = Pos { leaf: p.leaf, ent: p.ent + 1 };
        if ents.len() <= LEAF_MAX {
            if !hinted {
                self.refresh(l);
            }
            return at;
        }
        let half = ents.len() / 2;
        let tail = ents.split_off(half);
        let min = tail[0].key.clone();
        self.refresh(l);
        let (shift, parent) = (self.nodes[p.leaf].shift, self.nodes[p.leaf].parent);
        let r = self.alloc(leaf(tail, parent, shift));
        let (_, next) = self.links(l);
        self.set_next(l, r);
        self.set_prev(r, l);
        self.set_next(r, next);
        if next == NIL {
            self.tail = r;
        } else {
            self.set_prev(next, r);
        }
        self.insert_child(l, r, min);
        if at.ent >= half { Pos { leaf: r as usize, ent: at.ent - half } } else { at }
    }

    /// Puts the new node `r` (with shift already equal to `l`'s) right of `l` under `l`'s parent, separated by
    /// `pivot`, splitting full ancestors.
    fn insert_child(&mut self, l: u32, r: u32, pivot: Box<[u8]>) {
        let parent = self.nodes[l as usize].parent;
        if parent == NIL {
            let root = self.alloc(Node {
                shift: 0,
                parent: NIL,
                kind: Kind::Internal { pivots: vec![pivot], children: vec![l, r] },
                hints: Hints::default(),
            });
            self.nodes[l as usize].parent = root;
            self.nodes[r as usize].parent = root;
            self.root = root;
            return;
        }
        let at = self.slot(l);
        self.nodes[r as usize].parent = parent;
        let (pivots, children) = self.internal_mut(parent);
        children.insert(at + 1, r);
        pivots.insert(at, pivot);
        if children.len() <= INTERNAL_MAX {
            self.refresh(parent);
            return;
        }
        let half = children.len() / 2;
        let tail_children = children.split_off(half);
        let mut tail_pivots = pivots.split_off(half - 1);
        let up = tail_pivots.remove(0);
        self.refresh(parent);
        let (shift, gp) = (self.nodes[parent as usize].shift, self.nodes[parent as usize].parent);
        let moved = tail_children.clone();
        let nr = self.alloc(Node {
            shift,
            parent: gp,
            kind: Kind::Internal { pivots: tail_pivots, children: tail_children },
            hints: Hints::default(),
        });
        for c in moved {
            self.nodes[c as usize].parent = nr;
        }
        self.insert_child(parent, nr, up);
    }

    /// Replaces the index key of the interval at `p`. REQUIRES: the key order is kept and the interval's records
    /// are all `>= key`.
    pub fn set_key(&mut self, p: Pos, key: Box<[u8]>) {
        if p.ent == 0 {
            self.raise_pivot(p.leaf as u32, key.clone());
        }
        self.ents_mut(p.leaf as u32)[p.ent].key = key;
        self.refresh(p.leaf as u32);
    }
}

#[cfg(test)]
mod tests;
