//! Removal from the concurrent BP-tree: optimistic while the leaf stays above the merge threshold, else a
//! pessimistic descent that merges or rebalances leaves and internal nodes on the way up (see the type comment
//! of `ConcurrentBpTree`).

use crate::heap_size::HeapSize;
use crate::leaf::Leaf;
use crate::probe::{Fingerprint, PointProbe};
use crate::stats::Stats;
use crate::sync::Ordering;

use super::{ConcurrentBpTree, InternalNode, Node, WriteGuard, check_leaf};

impl<K, V, L> ConcurrentBpTree<K, V, L>
where
    K: Ord + Clone + HeapSize + Fingerprint,
    V: HeapSize,
    L: Leaf<K, V>,
{
    /// Removes `key`; returns its value.
    pub fn remove<Q>(&self, key: &Q) -> Option<V>
    where
        Q: PointProbe<K> + ?Sized,
    {
        self.remove_entry(key).map(|(_, v)| v)
    }

    /// Removes `key`; returns the stored key and value.
    pub fn remove_entry<Q>(&self, key: &Q) -> Option<(K, V)>
    where
        Q: PointProbe<K> + ?Sized,
    {
        let mut local = Stats::default();
        let out = match self.remove_optimistic(key, &mut local) {
            Some(out) => out,
            None => {
                local.pessimistic_retries += 1;
                self.remove_pessimistic(key, &mut local)
            }
        };
        if let Some((k, v)) = &out {
            self.len.fetch_sub(1, Ordering::Relaxed);
            self.heap_bytes.fetch_sub(k.heap_size() + v.heap_size(), Ordering::Relaxed);
        }
        self.note(&local);
        out
    }

    /// Removes if the leaf stays above the merge threshold; `None` asks for the pessimistic path.
    #[allow(clippy::option_option)]
    fn remove_optimistic<Q>(&self, key: &Q, local: &mut Stats) -> Option<Option<(K, V)>>
    where
        Q: PointProbe<K> + ?Sized,
    {
        let (mut w, is_root) = self.write_leaf_optimistic(key);
        let Node::Leaf(l) = &mut *w else { unreachable!("write descent ends at a leaf") };
        if is_root || l.leaf.len() > self.merge_at || l.leaf.get(key).is_none() {
            let out = l.leaf.remove(key, local);
            check_leaf(&l.leaf, false);
            return Some(out);
        }
        None
    }

    fn remove_pessimistic<Q>(&self, key: &Q, local: &mut Stats) -> Option<(K, V)>
    where
        Q: PointProbe<K> + ?Sized,
    {
        let mut rp = Some(self.root.write());
        let root = rp.as_ref().map(|g| (**g).clone()).unwrap_or_else(|| unreachable!());
        let mut cur = root.write_arc();
        let mut stack: Vec<(WriteGuard<K, V, L>, usize)> = Vec::new();
        loop {
            let safe = match &*cur {
                // Losing one child must leave the node at or above its minimum (2 for the root).
                Node::Internal(n) => n.children.len() > (self.fanout / 2).max(2),
                Node::Leaf(l) => l.leaf.len() > self.merge_at,
            };
            if safe {
                stack.clear();
                rp = None;
            }
            let (child, idx) = match &*cur {
                Node::Leaf(_) => break,
                Node::Internal(n) => {
                    let idx = n.keys.partition_point(|p| key.cmp_to(p).is_ge());
                    (n.children[idx].clone(), idx)
                }
            };
            let cg = child.write_arc();
            stack.push((cur, idx));
            cur = cg;
        }
        let Node::Leaf(l) = &mut *cur else { unreachable!("write descent ends at a leaf") };
        let out = l.leaf.remove(key, local);
        if out.is_none() || l.leaf.len() >= self.merge_at {
            return out;
        }
        let depth = stack.len();
        let Some((pg, idx)) = stack.last_mut() else { return out };
        let idx = *idx;
        let Node::Internal(p) = &mut **pg else { unreachable!("ancestors are internal") };
        if p.children.len() < 2 {
            return out;
        }
        let (li, ri) = if idx + 1 < p.children.len() { (idx, idx + 1) } else { (idx - 1, idx) };
        // Leaf locks are taken left to right, like a scan's: let go of our leaf if it is the right one.
        let (mut lg, mut rg) = if li == idx {
            let rg = p.children[ri].write_arc();
            (cur, rg)
        } else {
            drop(cur);
            let lg = p.children[li].write_arc();
            let rg = p.children[ri].write_arc();
            (lg, rg)
        };
        let (Node::Leaf(left), Node::Leaf(right)) = (&mut *lg, &mut *rg) else {
            unreachable!("siblings of a leaf")
        };
        let total = left.leaf.len() + right.leaf.len();
        let mut all = Vec::with_capacity(total);
        left.leaf.drain_sorted(&mut all, local);
        right.leaf.drain_sorted(&mut all, local);
        left.epoch += 1;
        right.epoch += 1;
        local.redistributes += 1;
        if total < self.split_at {
            local.leaf_merges += 1;
            left.leaf.load_sorted(all.into_iter());
            left.next = right.next.take();
            p.keys.remove(li);
            p.children.remove(ri);
            self.leaves.fetch_sub(1, Ordering::Relaxed);
        } else {
            local.leaf_borrows += 1;
            let upper = all.split_off(total / 2);
            p.keys[li] = upper[0].0.clone();
            left.leaf.load_sorted(all.into_iter());
            right.leaf.load_sorted(upper.into_iter());
        }
        check_leaf(&left.leaf, true);
        check_leaf(&right.leaf, true);
        drop((lg, rg));
        // Walk up the held ancestors, merging or rebalancing internal nodes that fell below fanout / 2. Internal
        // siblings are locked in any order: only a holder of the parent's write lock (us) can reach them as a
        // writer, and readers only go down from them.
        let mut level = depth - 1;
        while level >= 1 {
            let (upper, lower) = stack.split_at_mut(level);
            let (pg, idx) = &mut upper[level - 1];
            let idx = *idx;
            let Node::Internal(p) = &mut **pg else { unreachable!("ancestors are internal") };
            let Node::Internal(node) = &mut *lower[0].0 else { unreachable!("ancestors are internal") };
            if node.children.len() >= self.fanout / 2 || p.children.len() < 2 {
                break;
            }
            local.internal_merges += 1;
            let (li, ri) = if idx + 1 < p.children.len() { (idx, idx + 1) } else { (idx - 1, idx) };
            let sib = p.children[if li == idx { ri } else { li }].clone();
            let mut sg = sib.write_arc();
            let Node::Internal(sibling) = &mut *sg else { unreachable!("siblings of an internal node") };
            let (left, right) = if li == idx { (node, sibling) } else { (sibling, node) };
            if self.merge_internal(p, li, left, right) {
                self.nodes.fetch_sub(1, Ordering::Relaxed);
            }
            level -= 1;
        }
        // The root lost its second-to-last child: its only child becomes the root.
        if let (Some(rp), Some((root_guard, _))) = (rp.as_mut(), stack.first())
            && let Node::Internal(r) = &**root_guard
            && r.children.len() == 1
        {
            let only = r.children[0].clone();
            stack.clear();
            **rp = only;
            self.nodes.fetch_sub(1, Ordering::Relaxed);
        }
        out
    }

    /// Merges `right` into `left` (children `li` and `li + 1` of `parent`) when they fit in one node, else
    /// splits their concatenation evenly. Returns whether they merged.
    fn merge_internal(
        &self,
        parent: &mut InternalNode<K, V, L>,
        li: usize,
        left: &mut InternalNode<K, V, L>,
        right: &mut InternalNode<K, V, L>,
    ) -> bool {
        let sep = parent.keys.remove(li);
        left.keys.push(sep);
        left.keys.append(&mut right.keys);
        left.children.append(&mut right.children);
        if left.children.len() <= self.fanout {
            parent.children.remove(li + 1);
            return true;
        }
        let h = left.children.len() / 2;
        right.children.extend(left.children.drain(h..));
        right.keys.extend(left.keys.drain(h..));
        let sep = left.keys.pop().unwrap_or_else(|| unreachable!("a split node has keys"));
        parent.keys.insert(li, sep);
        false
    }
}
