//! FlexTree invariant check ([`FlexTree::check`]): every invariant in the module comment of `flextree.rs`,
//! violations reported as `Corruption`.

use crate::error::Result;

use super::{Body, FlexTree, HOLE, corrupt};

impl FlexTree {
    /// Verifies every structural invariant; errors are `Corruption`.
    pub fn check(&self) -> Result<()> {
        let (size, n) = self.check_inner()?;
        if size != self.size || n != self.nr_extents {
            return Err(corrupt(format!(
                "counters disagree: size {} vs {size}, extents {} vs {n}",
                self.size, self.nr_extents
            )));
        }
        Ok(())
    }

    pub(super) fn check_inner(&self) -> Result<(u64, u64)> {
        let mut seen = vec![false; self.nodes.len()];
        let mut leaf_depth = None;
        let mut count = 0u64;
        let end = self.check_node(self.root, 0, 0, true, 0, &mut seen, &mut leaf_depth, &mut count)?;
        let live = seen.iter().filter(|s| **s).count();
        if live != self.nodes.iter().filter(|n| n.is_some()).count() {
            return Err(corrupt("unreachable nodes in the arena"));
        }
        Ok((end as u64, count))
    }

    /// Checks the subtree at `id` whose first extent starts at effective offset `start`; returns its end.
    #[allow(clippy::too_many_arguments)]
    fn check_node(
        &self,
        id: u32,
        base: i64,
        start: i64,
        is_root: bool,
        depth: usize,
        seen: &mut [bool],
        leaf_depth: &mut Option<usize>,
        count: &mut u64,
    ) -> Result<i64> {
        if depth > 64 {
            return Err(corrupt("tree deeper than 64 levels"));
        }
        match seen.get_mut(id as usize) {
            Some(s) if !*s => *s = true,
            _ => return Err(corrupt(format!("node {id} dangling or reachable twice"))),
        }
        let node = self.nodes[id as usize].as_ref().ok_or_else(|| corrupt("dangling node"))?;
        if !is_root && node.count() == 0 {
            return Err(corrupt(format!("empty non-root node {id}")));
        }
        match &node.body {
            Body::Leaf(ext) => {
                if ext.len() > self.cfg.leaf_cap {
                    return Err(corrupt(format!("leaf {id} over capacity")));
                }
                if leaf_depth.get_or_insert(depth) != &depth {
                    return Err(corrupt("leaves at different depths"));
                }
                let mut pos = start;
                for e in ext {
                    if base + e.poff as i64 != pos {
                        return Err(corrupt(format!(
                            "leaf {id}: extent at {} expected at {pos}",
                            base + e.poff as i64
                        )));
                    }
                    if e.len == 0 || e.len > self.cfg.max_extent_len() {
                        return Err(corrupt(format!("leaf {id}: bad extent length {}", e.len)));
                    }
                    if e.poff as u64 + e.len as u64 > u32::MAX as u64 {
                        return Err(corrupt(format!("leaf {id}: extent end past 32 bits")));
                    }
                    if !e.is_hole() {
                        let last = e.addr.checked_add(e.len as u64 - 1).filter(|l| *l < HOLE);
                        let Some(last) = last else { return Err(corrupt("extent address out of range")) };
                        let b = self.cfg.boundary;
                        if b != 0 && e.addr / b != last / b {
                            return Err(corrupt(format!("leaf {id}: extent crosses a segment boundary")));
                        }
                    }
                    pos += e.len as i64;
                }
                *count += ext.len() as u64;
                Ok(pos)
            }
            Body::Internal { children, pivots } => {
                if children.len() > self.cfg.internal_cap || pivots.len() + 1 != children.len().max(1) {
                    return Err(corrupt(format!("internal node {id}: bad counts")));
                }
                let mut pos = start;
                for (i, c) in children.iter().enumerate() {
                    if i > 0 {
                        let p = pivots[i - 1] + base;
                        if p != pos {
                            return Err(corrupt(format!(
                                "internal node {id}: pivot {i} at {p}, child starts at {pos}"
                            )));
                        }
                    }
                    let cn = self.nodes.get(c.id as usize).and_then(Option::as_ref);
                    if let Some(cn) = cn
                        && cn.dirty
                        && !node.dirty
                    {
                        return Err(corrupt(format!("clean node {id} has a dirty child")));
                    }
                    let end = self.check_node(
                        c.id,
                        base + c.shift,
                        pos,
                        false,
                        depth + 1,
                        seen,
                        leaf_depth,
                        count,
                    )?;
                    if end <= pos {
                        return Err(corrupt(format!("internal node {id}: empty child range")));
                    }
                    pos = end;
                }
                Ok(pos)
            }
        }
    }
}
