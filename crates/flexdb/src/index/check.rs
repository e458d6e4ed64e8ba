//! The sparse index's whole-structure check ([`SparseIndex::check`]): the invariants of the module comment.

use super::*;

impl SparseIndex {
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
