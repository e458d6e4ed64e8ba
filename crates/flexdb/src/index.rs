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

    /// Removes the interval at `p`, giving its bytes to the previous interval (the caller merged its records
    /// there, or it is empty). REQUIRES: `p` is not interval 0.
    pub fn remove(&mut self, p: Pos) -> Interval {
        let prev = self.prev(p).unwrap_or(p);
        let l = p.leaf as u32;
        let gone = self.ents_mut(l).remove(p.ent);
        self.refresh(l);
        self.count -= 1;
        // No offset moves: the previous interval now covers the removed one's bytes.
        let pl = prev.leaf as u32;
        let pent = if pl == l && prev.ent > p.ent { prev.ent - 1 } else { prev.ent };
        self.ents_mut(pl)[pent].size += gone.size;
        if self.ents(l).is_empty() {
            self.unlink_leaf(l);
            self.remove_child(l);
        } else {
            if p.ent == 0 {
                // Keys from the removed key up to the leaf's new smallest key now belong to the previous interval.
                let k = self.ents(l)[0].key.clone();
                self.raise_pivot(l, k);
            }
            if self.ents(l).len() < LEAF_MAX / 4 {
                self.absorb_right(l);
            }
        }
        gone
    }

    fn unlink_leaf(&mut self, l: u32) {
        let (prev, next) = self.links(l);
        if prev != NIL {
            self.set_next(prev, next);
        } else {
            self.head = next;
        }
        if next != NIL {
            self.set_prev(next, prev);
        } else {
            self.tail = prev;
        }
    }

    /// Removes the (empty) node `c` from its parent and frees it, repairing the parent.
    fn remove_child(&mut self, c: u32) {
        let parent = self.nodes[c as usize].parent;
        self.release(c);
        if parent == NIL {
            return;
        }
        let at = self.children(parent).iter().position(|&x| x == c).unwrap_or(0);
        let (pivots, children) = self.internal_mut(parent);
        children.remove(at);
        if children.is_empty() {
            self.remove_child(parent);
            return;
        }
        if at == 0 {
            pivots.remove(0);
            // The subtree's smallest key rose: so must the pivot left of it.
            let first = children[0];
            self.refresh(parent);
            let k = self.min_key(first);
            self.raise_pivot(parent, k);
        } else {
            pivots.remove(at - 1);
            self.refresh(parent);
        }
        self.shrink(parent);
    }

    /// After `id` lost a child: collapse a one-child root, or absorb the right sibling when underfull.
    fn shrink(&mut self, id: u32) {
        let n = self.children(id).len();
        if id == self.root {
            if n == 1 {
                let child = self.children(id)[0];
                self.nodes[child as usize].shift += self.nodes[id as usize].shift;
                self.nodes[child as usize].parent = NIL;
                self.release(id);
                self.root = child;
            }
            return;
        }
        if n < INTERNAL_MAX / 4 {
            self.absorb_right(id);
        }
    }

    fn min_key(&self, mut id: u32) -> Box<[u8]> {
        loop {
            match &self.nodes[id as usize].kind {
                Kind::Internal { children, .. } => id = children[0],
                Kind::Leaf { ents, .. } => return ents[0].key.clone(),
            }
        }
    }

    /// The subtree `id` now starts at `key`: set the pivot left of it (in the first ancestor where it is not the
    /// leftmost child).
    fn raise_pivot(&mut self, mut id: u32, key: Box<[u8]>) {
        while self.nodes[id as usize].parent != NIL {
            let parent = self.nodes[id as usize].parent;
            let at = self.slot(id);
            if at > 0 {
                self.internal_mut(parent).0[at - 1] = key;
                self.refresh(parent);
                return;
            }
            id = parent;
        }
    }

    /// Moves the right sibling of `id` (same parent) into `id` when both fit in one node.
    fn absorb_right(&mut self, id: u32) {
        let parent = self.nodes[id as usize].parent;
        if parent == NIL {
            return;
        }
        let at = self.slot(id);
        let Some(&r) = self.children(parent).get(at + 1) else { return };
        let rebase = self.nodes[r as usize].shift - self.nodes[id as usize].shift;
        if matches!(self.nodes[id as usize].kind, Kind::Leaf { .. }) {
            if self.ents(id).len() + self.ents(r).len() > LEAF_MAX {
                return;
            }
            let mut moved = std::mem::take(self.ents_mut(r));
            for iv in &mut moved {
                iv.poff += rebase;
            }
            self.ents_mut(id).extend(moved);
            self.refresh(id);
            self.unlink_leaf(r);
        } else {
            if self.children(id).len() + self.children(r).len() > INTERNAL_MAX {
                return;
            }
            let sep = self.internal_mut(parent).0[at].clone();
            let (rp, rc) = {
                let (p, c) = self.internal_mut(r);
                (std::mem::take(p), std::mem::take(c))
            };
            for &c in &rc {
                self.nodes[c as usize].shift += rebase;
                self.nodes[c as usize].parent = id;
            }
            let (pivots, children) = self.internal_mut(id);
            pivots.push(sep);
            pivots.extend(rp);
            children.extend(rc);
            self.refresh(id);
        }
        // `r` is empty now; removing it drops the pivot between the two (`r` is never the leftmost child).
        self.remove_child(r);
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

    /// Whole-structure check: see the module comment for the invariants.
    pub fn check(&self, file_size: u64) -> Result<()> {
        let bad = |m: String| Err(Error::corruption("index", m));
        if self.nodes[self.root as usize].parent != NIL {
            return bad("root has a parent".into());
        }
        // Structure: parents, pivots bracketing subtrees, uniform depth.
        let mut leaves = Vec::new();
        let mut stack = vec![(self.root, None::<Box<[u8]>>, None::<Box<[u8]>>, 0usize)];
        let mut depth = None;
        while let Some((id, lo, hi, d)) = stack.pop() {
            if self.nodes[id as usize].hints != self.hints_of(id) {
                return bad(format!("node {id}: search hints do not match its keys"));
            }
            match &self.nodes[id as usize].kind {
                Kind::Leaf { ents, .. } => {
                    if ents.is_empty() {
                        return bad("empty leaf".into());
                    }
                    if *depth.get_or_insert(d) != d {
                        return bad("leaves at different depths".into());
                    }
                    if lo.as_ref().is_some_and(|lo| ents[0].key < *lo)
                        || hi.as_ref().is_some_and(|hi| ents[ents.len() - 1].key >= *hi)
                    {
                        return bad("leaf keys outside their pivots".into());
                    }
                    leaves.push(id);
                }
                Kind::Internal { pivots, children } => {
                    if children.is_empty() || pivots.len() + 1 != children.len() {
                        return bad("internal node shape".into());
                    }
                    for (i, &c) in children.iter().enumerate().rev() {
                        if self.nodes[c as usize].parent != id {
                            return bad("bad parent link".into());
                        }
                        let clo = if i == 0 { lo.clone() } else { Some(pivots[i - 1].clone()) };
                        let chi = if i + 1 == children.len() { hi.clone() } else { Some(pivots[i].clone()) };
                        stack.push((c, clo, chi, d + 1));
                    }
                }
            }
        }
        if leaves.first() != Some(&self.head) || leaves.last() != Some(&self.tail) {
            return bad("head or tail leaf wrong".into());
        }
        for w in leaves.windows(2) {
            if self.links(w[0]).1 != w[1] || self.links(w[1]).0 != w[0] {
                return bad("sibling links disagree with the tree".into());
            }
        }
        // Contents: offsets contiguous from 0, keys increasing.
        if !self.get(self.first()).key.is_empty() {
            return bad("interval 0 has a key".into());
        }
        let mut expect = 0u64;
        let mut last: Option<&[u8]> = None;
        let mut n = 0;
        let mut p = Some(self.first());
        while let Some(q) = p {
            let iv = self.get(q);
            if self.offset(q) != expect {
                return bad(format!("interval {n} at {} expected {expect}", self.offset(q)));
            }
            if let Some(l) = last
                && l >= &*iv.key
            {
                return bad("keys not increasing".into());
            }
            last = Some(&iv.key);
            expect += iv.size;
            n += 1;
            p = self.next(q);
        }
        if expect != file_size || n != self.count {
            return bad(format!("intervals cover {expect} of {file_size} bytes"));
        }
        Ok(())
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Box<[u8]> {
        s.as_bytes().into()
    }

    #[test]
    fn paper_figure_10_shift() {
        // Four intervals at 0, 42, 64, 90 ("", bit, foo, pin); inserting 9 bytes into "bit" shifts foo and pin.
        let mut idx =
            SparseIndex::from_anchors(vec![(k(""), 0), (k("bit"), 42), (k("foo"), 64), (k("pin"), 90)], 120)
                .unwrap();
        let p = idx.locate(b"kit");
        assert_eq!(&*idx.get(p).key, b"foo");
        assert_eq!(idx.offset(p), 64);
        let bit = idx.locate(b"cat");
        idx.resize(bit, 9);
        assert_eq!(idx.offset(idx.locate(b"foo")), 73);
        assert_eq!(idx.offset(idx.locate(b"pin")), 99);
        idx.check(129).unwrap();
    }

    #[test]
    fn many_splits_and_shifts() {
        let mut idx = SparseIndex::new();
        let mut size = 0u64;
        // Grow a single interval and split it into 1000 intervals of 10 bytes, in key order.
        idx.resize(idx.first(), 10_000);
        size += 10_000;
        let mut p = idx.first();
        for i in 1..1000u32 {
            p = idx.split(p, 10, format!("k{i:05}").as_bytes().into());
        }
        idx.check(size).unwrap();
        assert!(idx.leaf_count() > 10);
        // Resize in key order with deferred shifts, then out of order.
        for i in (1..1000u32).step_by(7) {
            let p = idx.locate(format!("k{i:05}").as_bytes());
            idx.resize(p, 3);
            size += 3;
            idx.check(size).unwrap();
        }
        for i in (1..1000u32).rev().step_by(13) {
            let p = idx.locate(format!("k{i:05}").as_bytes());
            idx.resize(p, -2);
            size -= 2;
            idx.check(size).unwrap();
        }
        for i in (1..1000u32).step_by(3) {
            let p = idx.locate(format!("k{i:05}").as_bytes());
            idx.remove(p);
            idx.check(size).unwrap();
        }
    }

    /// Randomized model test: the index against a vector of (key, size), through growth to a three-level tree and
    /// back down (splits, shifts, removals with merges, key changes), checking every invariant as it goes.
    #[test]
    fn model_random_ops() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        let seeds: Vec<u64> = match std::env::var("RANGEDB_SEED") {
            Ok(s) => vec![s.parse().expect("RANGEDB_SEED must be a number")],
            Err(_) => vec![1, 2, 3],
        };
        let key = |k: u32| -> Box<[u8]> { if k == 0 { Box::new([]) } else { k.to_be_bytes().into() } };
        for seed in seeds {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut idx = SparseIndex::new();
            // (key as a number, 0 = the empty key; size); keys strictly increase.
            let mut model: Vec<(u32, u64)> = vec![(0, 0)];
            let mut max_height = 0;
            let steps = 30_000;
            for step in 0..steps {
                let growing = step < steps / 2;
                let n = model.len();
                let i = rng.random_range(0..n);
                let p = idx.locate(&key(model[i].0));
                assert_eq!(idx.get(p).key, key(model[i].0), "seed {seed} step {step}: locate");
                // Keys that are no interval's key land in the interval below them.
                let mut longer = key(model[i].0).into_vec();
                longer.push(0);
                assert_eq!(idx.locate(&longer), p, "seed {seed} step {step}: locate a longer key");
                let next = if i + 1 < n { model[i + 1].0 } else { u32::MAX };
                if next - model[i].0 >= 2 {
                    let between = key(rng.random_range(model[i].0 + 1..next));
                    assert_eq!(idx.locate(&between), p, "seed {seed} step {step}: locate between keys");
                }
                // Growing: mostly splits; shrinking: mostly removals (which merge nodes).
                let r = rng.random_range(0..10);
                let op = match (growing, r) {
                    (true, 0..=5) | (false, 9) => 0,
                    (_, 6..=7) => 1,
                    (_, 8) => 2,
                    _ => 3,
                };
                match op {
                    0 => {
                        // Split interval i with a key strictly between it and the next.
                        let lo = model[i].0;
                        let hi = if i + 1 < n { model[i + 1].0 } else { u32::MAX };
                        if hi - lo >= 2 {
                            let k = rng.random_range(lo + 1..hi);
                            let keep = rng.random_range(0..=model[i].1);
                            let q = idx.split(p, keep, key(k));
                            assert_eq!(idx.get(q).key, key(k), "seed {seed} step {step}: split position");
                            let rest = model[i].1 - keep;
                            model[i].1 = keep;
                            model.insert(i + 1, (k, rest));
                        }
                    }
                    1 => {
                        let d: i64 = rng.random_range(-(model[i].1 as i64)..=64);
                        idx.resize(p, d);
                        model[i].1 = (model[i].1 as i64 + d) as u64;
                    }
                    2 if i > 0 => {
                        // A new key between the neighbours.
                        let lo = model[i - 1].0;
                        let hi = if i + 1 < n { model[i + 1].0 } else { u32::MAX };
                        if hi - lo >= 2 {
                            let k = rng.random_range(lo + 1..hi);
                            idx.set_key(p, key(k));
                            model[i].0 = k;
                        }
                    }
                    3 if i > 0 => {
                        let gone = idx.remove(p);
                        assert_eq!(gone.key, key(model[i].0));
                        model[i - 1].1 += model[i].1;
                        model.remove(i);
                    }
                    _ => {}
                }
                max_height = max_height.max(idx.height());
                let size: u64 = model.iter().map(|m| m.1).sum();
                if model.len() < 200 || step % 101 == 0 {
                    idx.check(size).unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
                    let mut off = 0;
                    let mut q = Some(idx.first());
                    for m in &model {
                        let at = q.unwrap_or_else(|| panic!("seed {seed} step {step}: index too short"));
                        assert_eq!(
                            (idx.get(at).key.clone(), idx.offset(at)),
                            (key(m.0), off),
                            "seed {seed} step {step}"
                        );
                        off += m.1;
                        q = idx.next(at);
                    }
                    assert!(q.is_none(), "seed {seed} step {step}: index too long");
                    // A key between two index keys locates the earlier interval.
                    let probe: u32 = rng.random();
                    let want = model.partition_point(|m| m.0 <= probe).max(1) - 1;
                    assert_eq!(
                        idx.get(idx.locate(&key(probe))).key,
                        key(model[want].0),
                        "seed {seed} step {step}"
                    );
                }
                assert_eq!(idx.len(), model.len());
            }
            assert!(max_height >= 3, "seed {seed}: the tree never grew to three levels ({max_height})");
            assert!(idx.height() <= 2, "seed {seed}: the tree did not shrink ({})", idx.height());
        }
    }

    /// The leftmost leaf of a non-root internal node empties without absorbing its (too full) right sibling: its
    /// parent drops its first pivot and must rebuild its search hints.
    #[test]
    fn emptying_a_leftmost_leaf_keeps_the_parent_searchable() {
        let key = |k: u32| -> Box<[u8]> { if k == 0 { Box::new([]) } else { k.to_be_bytes().into() } };
        // 2048 intervals: 64 half-full leaves under two internal nodes under the root.
        let anchors: Vec<(Box<[u8]>, u64)> = (0..2048u32).map(|i| (key(i * 1000), i as u64 * 10)).collect();
        let size = 2048 * 10;
        let mut idx = SparseIndex::from_anchors(anchors, size).unwrap();
        assert_eq!(idx.height(), 3);
        // Fill leaf 33 (the second child of the second internal node) to 64 intervals, so that leaf 32 never fits
        // in one node with it.
        for j in 1..=32 {
            let p = idx.locate(&key(1056 * 1000 + j - 1));
            idx.split(p, 0, key(1056 * 1000 + j));
        }
        idx.check(size).unwrap();
        // Empty leaf 32, the second internal node's leftmost child.
        for i in (1024..1056u32).rev() {
            let p = idx.locate(&key(i * 1000));
            assert_eq!(idx.get(p).key, key(i * 1000));
            idx.remove(p);
            idx.check(size).unwrap_or_else(|e| panic!("after removing {i}: {e}"));
        }
        for i in (0..1024u32).chain(1057..2048) {
            assert_eq!(idx.get(idx.locate(&key(i * 1000 + 500))).key, key(i * 1000), "locate {i}");
        }
        assert_eq!(idx.get(idx.locate(&key(1056 * 1000 + 500))).key, key(1056 * 1000 + 32));
        assert_eq!(idx.get(idx.locate(&key(1040 * 1000))).key, key(1023 * 1000));
    }

    #[test]
    fn from_anchors_builds_a_deep_tree() {
        let anchors: Vec<(Box<[u8]>, u64)> = (0..5000u32)
            .map(|i| (if i == 0 { Box::from(&[][..]) } else { i.to_be_bytes().into() }, i as u64 * 10))
            .collect();
        let mut idx = SparseIndex::from_anchors(anchors, 50_000).unwrap();
        assert!(idx.height() >= 3);
        idx.check(50_000).unwrap();
        // Growing the first interval shifts all 4,999 later ones through O(log N) pointers.
        idx.resize(idx.first(), 7);
        idx.check(50_007).unwrap();
        assert_eq!(idx.offset(idx.locate(&4999u32.to_be_bytes())), 49_997);
    }
}
