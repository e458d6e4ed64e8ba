//! FlexTree lookups: the extent at an offset, the pieces mapping a range, and a walk over every extent; each
//! adds the shifts on its path to the partial offsets it meets (§3.2.2).

use crate::error::Result;

use super::{Body, Extent, FlexTree, HOLE, Piece, corrupt, leaf_index, route};

impl FlexTree {
    /// The tag of the extent starting at `off`; 0 when `off` is inside an extent.
    pub fn get_tag(&self, off: u64) -> Result<u16> {
        let (start, e) = self.extent_at(off)?;
        Ok(if start == off { e.tag } else { 0 })
    }

    /// The extent containing `off`: its effective start and the entry.
    pub fn extent_at(&self, off: u64) -> Result<(u64, Extent)> {
        self.check_range(off, 1)?;
        let mut cur = self.root;
        let mut base = 0i64;
        for _ in 0..64 {
            match &self.node(cur).body {
                Body::Leaf(ext) => {
                    let xr = (off as i64 - base) as u64;
                    let k = leaf_index(ext, xr);
                    return match ext.get(k) {
                        Some(e) => Ok(((base + e.poff as i64) as u64, *e)),
                        None => Err(corrupt(format!("no extent at offset {off}"))),
                    };
                }
                Body::Internal { children, pivots } => {
                    let c = children
                        .get(route(pivots, off as i64 - base))
                        .ok_or_else(|| corrupt("empty internal node"))?;
                    base += c.shift;
                    cur = c.id;
                }
            }
        }
        Err(corrupt("tree deeper than 64 levels"))
    }

    /// The pieces mapping `[off, off + len)`, in logical order, clipped to the range.
    pub fn query(&self, off: u64, len: u64) -> Result<Vec<Piece>> {
        self.check_range(off, len)?;
        let mut out = Vec::new();
        if len > 0 {
            self.collect(self.root, 0, off as i64, (off + len) as i64, &mut out, 0)?;
        }
        Ok(out)
    }

    pub(super) fn collect(
        &self,
        id: u32,
        base: i64,
        lo: i64,
        hi: i64,
        out: &mut Vec<Piece>,
        depth: usize,
    ) -> Result<()> {
        if depth > 64 {
            return Err(corrupt("tree deeper than 64 levels"));
        }
        match &self.node(id).body {
            Body::Leaf(ext) => {
                let lor = lo - base;
                let k = u64::try_from(lor).map_or(0, |x| leaf_index(ext, x));
                for e in &ext[k..] {
                    let s = base + e.poff as i64;
                    if s >= hi {
                        break;
                    }
                    let a = s.max(lo);
                    let b = (s + e.len as i64).min(hi);
                    let addr = if e.is_hole() { HOLE } else { e.addr + (a - s) as u64 };
                    out.push(Piece { off: a as u64, len: (b - a) as u64, addr, tag: e.tag });
                }
            }
            Body::Internal { children, pivots } => {
                let i0 = route(pivots, lo - base);
                for i in i0..children.len() {
                    if i > 0 && pivots[i - 1] + base >= hi {
                        break;
                    }
                    self.collect(children[i].id, base + children[i].shift, lo, hi, out, depth + 1)?;
                }
            }
        }
        Ok(())
    }

    /// Calls `f(effective offset, extent)` for every extent in logical order.
    pub fn for_each_extent(&self, mut f: impl FnMut(u64, &Extent)) -> Result<()> {
        self.walk(self.root, 0, &mut f, 0)
    }

    fn walk(&self, id: u32, base: i64, f: &mut impl FnMut(u64, &Extent), depth: usize) -> Result<()> {
        if depth > 64 {
            return Err(corrupt("tree deeper than 64 levels"));
        }
        match &self.node(id).body {
            Body::Leaf(ext) => {
                for e in ext {
                    f((base + e.poff as i64) as u64, e);
                }
            }
            Body::Internal { children, .. } => {
                for c in children {
                    self.walk(c.id, base + c.shift, f, depth + 1)?;
                }
            }
        }
        Ok(())
    }
}
