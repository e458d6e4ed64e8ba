//! Removing intervals from the sparse index: the emptied leaf entry goes, and a node that falls below a quarter
//! full absorbs its right sibling under the same parent (entries and children rebased by the difference of the
//! two shifts), up to the root.

use super::*;

impl SparseIndex {
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
    pub(super) fn raise_pivot(&mut self, mut id: u32, key: Box<[u8]>) {
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
}
