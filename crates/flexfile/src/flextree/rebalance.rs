//! FlexTree removal repair: underfull nodes merged with a sibling bottom-up, entries moved into the survivor's
//! frame by the difference of the two pointers' shifts (Fig. 8), and a root with one child shortened.

use crate::error::Result;

use super::{Body, Child, FlexTree, Step, corrupt, relayout};

impl FlexTree {
    /// Merges or removes underfull nodes on the path, bottom-up, then shortens a root with one child.
    pub(super) fn rebalance(&mut self, path: &[Step]) -> Result<()> {
        for st in path.iter().rev() {
            self.fix_child(st.node, st.idx)?;
        }
        loop {
            let (child, shift) = match &self.node(self.root).body {
                Body::Internal { children, .. } if children.len() == 1 => (children[0].id, children[0].shift),
                Body::Internal { children, .. } if children.is_empty() => {
                    *self.body_mut(self.root)? = Body::Leaf(Vec::new());
                    return Ok(());
                }
                _ => return Ok(()),
            };
            match self.body_mut(child)? {
                Body::Leaf(ext) => {
                    let start = ext.first().map_or(0, |e| e.poff as i64 + shift);
                    if start != 0 {
                        return Err(corrupt("the first extent does not start at offset 0"));
                    }
                    relayout(ext, 0, 0)?;
                }
                Body::Internal { children, pivots } => {
                    for c in children.iter_mut() {
                        c.shift += shift;
                    }
                    for p in pivots.iter_mut() {
                        *p += shift;
                    }
                }
            }
            let old = self.root;
            self.root = child;
            self.free_node(old);
            self.stats.merges += 1;
        }
    }

    /// Removes child `i` of `parent` if it is empty, or merges it with a sibling if it is underfull and they fit.
    fn fix_child(&mut self, parent: u32, i: usize) -> Result<()> {
        let Body::Internal { children, .. } = &self.node(parent).body else {
            return Err(corrupt("expected an internal node"));
        };
        let Some(c) = children.get(i).copied() else { return Ok(()) };
        let n = children.len();
        let cnt = self.node(c.id).count();
        if cnt == 0 {
            let Body::Internal { children, pivots } = self.body_mut(parent)? else {
                return Err(corrupt("expected an internal node"));
            };
            children.remove(i);
            if i > 0 {
                pivots.remove(i - 1);
            } else if !pivots.is_empty() {
                pivots.remove(0);
            }
            self.free_node(c.id);
            self.stats.merges += 1;
            return Ok(());
        }
        let (cap, limit) = match &self.node(c.id).body {
            Body::Leaf(_) => (self.cfg.leaf_cap, self.cfg.leaf_cap - 2),
            Body::Internal { .. } => (self.cfg.internal_cap, self.cfg.internal_cap - 1),
        };
        if cnt > cap / 4 {
            return Ok(());
        }
        let Body::Internal { children, .. } = &self.node(parent).body else {
            return Err(corrupt("expected an internal node"));
        };
        if i > 0 && self.node(children[i - 1].id).count() + cnt <= limit {
            self.merge_children(parent, i - 1)
        } else if i + 1 < n && self.node(children[i + 1].id).count() + cnt <= limit {
            self.merge_children(parent, i)
        } else {
            Ok(())
        }
    }

    /// Merges child `i + 1` of `parent` into child `i`, moving its entries into the left node's frame.
    fn merge_children(&mut self, parent: u32, i: usize) -> Result<()> {
        let Body::Internal { children, pivots } = &self.node(parent).body else {
            return Err(corrupt("expected an internal node"));
        };
        let (a, b, mid) = (children[i], children[i + 1], pivots[i]);
        let right = self.free_node(b.id).ok_or_else(|| corrupt("dangling child"))?.body;
        let mut a_shift = a.shift;
        match (self.body_mut(a.id)?, right) {
            (Body::Leaf(ae), Body::Leaf(be)) => {
                // The merged leaf is rebased to start at 0; its pointer takes the old first offset.
                a_shift = match ae.first() {
                    Some(e) => a.shift + e.poff as i64,
                    None => mid,
                };
                ae.extend(be);
                relayout(ae, 0, 0)?;
            }
            (Body::Internal { children: ac, pivots: ap }, Body::Internal { children: bc, pivots: bp }) => {
                let delta = b.shift - a.shift;
                ap.push(mid - a.shift);
                ap.extend(bp.into_iter().map(|p| p + delta));
                ac.extend(bc.into_iter().map(|c| Child { id: c.id, shift: c.shift + delta }));
            }
            _ => return Err(corrupt("siblings at different levels")),
        }
        let Body::Internal { children, pivots } = self.body_mut(parent)? else {
            return Err(corrupt("expected an internal node"));
        };
        children[i].shift = a_shift;
        children.remove(i + 1);
        pivots.remove(i);
        self.stats.merges += 1;
        Ok(())
    }
}
