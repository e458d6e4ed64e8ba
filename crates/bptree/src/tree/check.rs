//! The whole-tree invariant check (`check_invariants`) that tests and the fuzz targets run.

use std::ops::Bound;

use crate::heap_size::HeapSize;
use crate::leaf::Leaf;
use crate::probe::Fingerprint;

use super::{BpTree, NIL};

impl<K, V, L> BpTree<K, V, L>
where
    K: Ord + Clone + HeapSize + Fingerprint,
    V: HeapSize,
    L: Leaf<K, V>,
{
    /// Checks the whole structure: node shapes and fences, leaf invariants, the leaf chain, the count. Describes
    /// the first violation. O(n).
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        let mut chain = Vec::new();
        let mut count = 0;
        self.check_rec(self.root, self.height, None, None, true, &mut chain, &mut count)?;
        if count != self.len {
            return Err(format!("len {} but leaves hold {count}", self.len));
        }
        let mut walked = Vec::new();
        let mut l = self.first_leaf;
        let mut prev = NIL;
        while l != NIL {
            if self.leaves[l as usize].prev != prev {
                return Err(format!("leaf {l} has a wrong prev link"));
            }
            walked.push(l);
            prev = l;
            l = self.leaves[l as usize].next;
            if walked.len() > self.leaves.len() {
                return Err("leaf chain has a cycle".into());
            }
        }
        if prev != self.last_leaf {
            return Err("last_leaf is not the end of the chain".into());
        }
        if walked != chain {
            return Err("leaf chain differs from the tree order".into());
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn check_rec(
        &self,
        node: u32,
        level: u32,
        lo: Option<&K>,
        hi: Option<&K>,
        is_root: bool,
        chain: &mut Vec<u32>,
        count: &mut usize,
    ) -> std::result::Result<(), String> {
        if level == 0 {
            let leaf = &self.leaves[node as usize].leaf;
            leaf.check().map_err(|e| format!("leaf {node}: {e}"))?;
            if leaf.is_empty() && !is_root {
                return Err(format!("non-root leaf {node} is empty"));
            }
            if leaf.len() > self.split_at {
                return Err(format!("leaf {node} above split size"));
            }
            for (k, _) in leaf.range::<K>(Bound::Unbounded, Bound::Unbounded) {
                if lo.is_some_and(|lo| k < lo) || hi.is_some_and(|hi| k >= hi) {
                    return Err(format!("leaf {node} holds a key outside its fences"));
                }
            }
            chain.push(node);
            *count += leaf.len();
            return Ok(());
        }
        let n = &self.nodes[node as usize];
        if n.children.len() != n.keys.len() + 1 {
            return Err(format!("node {node}: {} keys for {} children", n.keys.len(), n.children.len()));
        }
        let min = if is_root { 2 } else { self.fanout / 2 };
        if n.children.len() < min || n.children.len() > self.fanout {
            return Err(format!("node {node} has {} children", n.children.len()));
        }
        if n.keys.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!("node {node} keys not sorted"));
        }
        for (i, &c) in n.children.iter().enumerate() {
            let clo = if i == 0 { lo } else { Some(&n.keys[i - 1]) };
            let chi = if i == n.keys.len() { hi } else { Some(&n.keys[i]) };
            self.check_rec(c, level - 1, clo, chi, false, chain, count)?;
        }
        Ok(())
    }
}
