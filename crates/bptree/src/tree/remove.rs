//! Removal: a leaf left below `merge_at` entries merges with a neighbour or borrows from it, and internal nodes
//! below half their fanout do the same, up to the root.

use std::mem;

use crate::heap_size::HeapSize;
use crate::leaf::Leaf;
use crate::probe::{Fingerprint, PointProbe};

use super::{BpTree, Internal, NIL};

impl<K, V, L> BpTree<K, V, L>
where
    K: Ord + Clone + HeapSize + Fingerprint,
    V: HeapSize,
    L: Leaf<K, V>,
{
    /// Removes `key`; returns its value.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        Q: PointProbe<K> + ?Sized,
    {
        self.remove_entry(key).map(|(_, v)| v)
    }

    /// Removes `key`; returns the stored key and value.
    pub fn remove_entry<Q>(&mut self, key: &Q) -> Option<(K, V)>
    where
        Q: PointProbe<K> + ?Sized,
    {
        let out = self.remove_rec(self.root, self.height, key)?;
        self.len -= 1;
        self.heap_bytes = self.heap_bytes.saturating_sub(out.0.heap_size() + out.1.heap_size());
        if self.height > 0 && self.nodes[self.root as usize].children.len() == 1 {
            let old = self.root;
            self.root = self.nodes[old as usize].children[0];
            self.free_node(old);
            self.height -= 1;
        }
        Some(out)
    }

    fn remove_rec<Q>(&mut self, node: u32, level: u32, key: &Q) -> Option<(K, V)>
    where
        Q: PointProbe<K> + ?Sized,
    {
        if level == 0 {
            let out = self.leaves[node as usize].leaf.remove(key, &mut self.stats);
            self.check_leaf_light(node);
            return out;
        }
        let n = &self.nodes[node as usize];
        let idx = n.keys.partition_point(|k| key.cmp_to(k).is_ge());
        let child = n.children[idx];
        let out = self.remove_rec(child, level - 1, key)?;
        if level == 1 {
            if self.leaves[child as usize].leaf.len() < self.merge_at {
                self.fix_leaf(node, idx);
            }
        } else if self.nodes[child as usize].children.len() < self.fanout / 2 {
            self.fix_node(node, idx);
        }
        Some(out)
    }

    /// Child `idx` of `parent` (a leaf) is underfull: merge it with a neighbour, or borrow from it.
    fn fix_leaf(&mut self, parent: u32, idx: usize) {
        let p = &self.nodes[parent as usize];
        if p.children.len() < 2 {
            return;
        }
        let (li, ri) = if idx + 1 < p.children.len() { (idx, idx + 1) } else { (idx - 1, idx) };
        let (l, r) = (p.children[li], p.children[ri]);
        let total = self.leaves[l as usize].leaf.len() + self.leaves[r as usize].leaf.len();
        let mut all = Vec::with_capacity(total);
        self.leaves[l as usize].leaf.drain_sorted(&mut all, &mut self.stats);
        self.leaves[r as usize].leaf.drain_sorted(&mut all, &mut self.stats);
        self.stats.redistributes += 1;
        if total < self.split_at {
            self.stats.leaf_merges += 1;
            self.leaves[l as usize].leaf.load_sorted(all.into_iter());
            let p = &mut self.nodes[parent as usize];
            p.keys.remove(li);
            p.children.remove(ri);
            let next = self.leaves[r as usize].next;
            self.leaves[l as usize].next = next;
            if next == NIL {
                self.last_leaf = l;
            } else {
                self.leaves[next as usize].prev = l;
            }
            self.free_leaf(r);
        } else {
            self.stats.leaf_borrows += 1;
            let upper = all.split_off(total / 2);
            self.nodes[parent as usize].keys[li] = upper[0].0.clone();
            self.leaves[l as usize].leaf.load_sorted(all.into_iter());
            self.leaves[r as usize].leaf.load_sorted(upper.into_iter());
            self.check_leaf(r);
        }
        self.check_leaf(l);
    }

    /// Child `idx` of `parent` (an internal node) is underfull: merge it with a neighbour, or borrow from it.
    fn fix_node(&mut self, parent: u32, idx: usize) {
        self.stats.internal_merges += 1;
        let p = &self.nodes[parent as usize];
        if p.children.len() < 2 {
            return;
        }
        let (li, ri) = if idx + 1 < p.children.len() { (idx, idx + 1) } else { (idx - 1, idx) };
        let (l, r) = (p.children[li], p.children[ri]);
        let sep = self.nodes[parent as usize].keys.remove(li);
        let rn =
            mem::replace(&mut self.nodes[r as usize], Internal { keys: Vec::new(), children: Vec::new() });
        let ln = &mut self.nodes[l as usize];
        ln.keys.push(sep);
        ln.keys.extend(rn.keys);
        ln.children.extend(rn.children);
        if ln.children.len() <= self.fanout {
            self.nodes[parent as usize].children.remove(ri);
            self.nodes[r as usize] = Internal {
                keys: Vec::with_capacity(self.fanout + 1),
                children: Vec::with_capacity(self.fanout + 1),
            };
            self.free_node(r);
            return;
        }
        // Borrow: split the concatenation evenly again.
        let h = ln.children.len() / 2;
        let rchildren: Vec<u32> = ln.children.drain(h..).collect();
        let mut rkeys: Vec<K> = ln.keys.drain(h - 1..).collect();
        let sep = rkeys.remove(0);
        let rnode = &mut self.nodes[r as usize];
        rnode.keys.reserve(self.fanout + 1);
        rnode.children.reserve(self.fanout + 1);
        rnode.keys.extend(rkeys);
        rnode.children.extend(rchildren);
        self.nodes[parent as usize].keys.insert(li, sep);
    }

    fn free_leaf(&mut self, id: u32) {
        let e = &mut self.leaves[id as usize];
        e.prev = NIL;
        e.next = NIL;
        self.free_leaves.push(id);
    }

    fn free_node(&mut self, id: u32) {
        let n = &mut self.nodes[id as usize];
        n.keys.clear();
        n.children.clear();
        self.free_nodes.push(id);
    }
}
