//! FlexTree: the shift-encoded extent B+-tree of the FlexFile paper (§3).
//!
//! # Design
//!
//! A FlexTree maps a logical byte range `[0, size)` onto physical addresses. Leaves hold extents
//! `(partial offset, length, tag, address)`; internal nodes hold pivots (partial offsets) and child pointers, each
//! child pointer carrying a signed *shift*. The effective offset of an entry is the sum of the shifts on its search
//! path plus its partial offset, so shifting every extent after a point (insert-range, collapse-range) touches one
//! leaf and, on each level above it, the pointers and pivots to the right of the path: O(log N) work instead of
//! rewriting every extent after the point.
//!
//! Invariants (checked by [`FlexTree::check`]; after every operation under the `invariants` feature):
//!
//! - The extents on the leaf level are logically contiguous and cover `[0, size)` exactly. Unmapped ranges are
//!   explicit *hole* extents (address [`HOLE`]), which is what makes a forward scan from any point correct (§3.2.2).
//!   Inside a leaf, `poff[k + 1] = poff[k] + len[k]`.
//! - For child `i > 0` of an internal node, its first extent's effective offset equals pivot `i - 1` (effective);
//!   pivots strictly increase. Every non-root node is non-empty; all leaves are at one depth.
//! - Every extent length is at most `u32::MAX / leaf_cap`, so a leaf of `leaf_cap` extents spans less than
//!   `2^32` bytes and a leaf *rebase* (subtract the smallest partial offset, add it to the parent's shift: §3.3)
//!   always brings its partial offsets back into 32 bits. Longer insertions are stored as several extents.
//! - Data extents never cross a multiple of `boundary` (the FlexFile segment size) in the physical space, so
//!   space accounting per segment stays exact; adjacent extents are merged only when that keeps holding.
//! - Tags mark the start of an extent: splitting an extent gives the right part tag 0, and a new extent is merged
//!   into its left neighbour only when its own tag is 0. So `get_tag(off)` is the tag set at `off` for as long as
//!   the byte at `off` survives.
//!
//! Modifications split full nodes on the way down (a leaf at `leaf_cap - 1` entries, since one operation may add
//! two extents; an internal node at `internal_cap` children); the new right node inherits the shift of the
//! pointer to the old node and the new pivot is the old median's partial offset plus that shift (§3.2.1, Fig. 5).
//! Removals merge underfull nodes with a sibling, moving the entries into the survivor's frame by the difference
//! of the two pointers' shifts (Fig. 8).
//!
//! Nodes live in an arena addressed by `u32` ids. Every node also remembers the slot it occupies in the persistent
//! tree file (if any) and whether it changed since it was last written; FlexFile's checkpoint writes the dirty
//! nodes copy-on-write and the slots of nodes freed by merges are handed to it through
//! `FlexTree::take_released_slots`, to be reused only once the next tree version is durable.
//!
//! Lookups are in `flextree/read.rs`, the merges after a removal in `flextree/rebalance.rs`, the invariant check
//! in `flextree/check.rs`.

use crate::error::{Error, Result};

mod check;
mod read;
mod rebalance;
mod update;

/// The physical address of an unmapped extent (a hole): the largest 48-bit value.
pub const HOLE: u64 = (1 << 48) - 1;

/// The largest logical size of a FlexTree (48-bit offsets, as in the log entries).
pub const MAX_SIZE: u64 = (1 << 48) - 1;

/// One leaf entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Partial offset: the effective offset minus the sum of the shifts on the path.
    pub poff: u32,
    /// Length in bytes (> 0).
    pub len: u32,
    /// User tag attached to the start of the extent (0 = none).
    pub tag: u16,
    /// Physical address, or [`HOLE`].
    pub addr: u64,
}

impl Extent {
    /// Whether the extent is an unmapped range.
    pub fn is_hole(&self) -> bool {
        self.addr == HOLE
    }
}

/// A child pointer of an internal node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Child {
    /// Arena id of the child.
    pub id: u32,
    /// Added to the offsets of everything below this pointer.
    pub shift: i64,
}

/// The contents of a node.
#[derive(Clone, Debug)]
pub enum Body {
    /// A leaf: contiguous extents.
    Leaf(Vec<Extent>),
    /// An internal node: `pivots.len() == children.len() - 1`; pivot `i` is the partial offset where child `i + 1`
    /// begins.
    Internal {
        /// Child pointers with their shifts.
        children: Vec<Child>,
        /// Partial offsets separating the children.
        pivots: Vec<i64>,
    },
}

/// An arena node.
#[derive(Clone, Debug)]
pub struct Node {
    /// Entries.
    pub body: Body,
    /// Changed since last written to the tree file (or never written).
    pub dirty: bool,
    /// The tree-file slot holding the last written version.
    pub slot: Option<u32>,
}

impl Node {
    fn new(body: Body) -> Self {
        Node { body, dirty: true, slot: None }
    }

    fn count(&self) -> usize {
        match &self.body {
            Body::Leaf(e) => e.len(),
            Body::Internal { children, .. } => children.len(),
        }
    }
}

/// A mapped (or unmapped) piece of a logical range, as returned by queries and removals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Logical offset where the piece starts.
    pub off: u64,
    /// Length in bytes.
    pub len: u64,
    /// Physical address of the first byte, or [`HOLE`].
    pub addr: u64,
    /// Tag of the extent the piece comes from.
    pub tag: u16,
}

/// Shape parameters. Defaults are the paper's (and reference implementation's): leaves of 60 extents, internal
/// nodes of 30 children, which fit 1 KiB nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeConfig {
    /// Maximum extents per leaf (>= 4).
    pub leaf_cap: usize,
    /// Maximum children per internal node (>= 4).
    pub internal_cap: usize,
    /// Physical boundary merged data extents never cross (the segment size); 0 for none.
    pub boundary: u64,
    /// Longest data extent a merge may produce; 0 for the structural limit.
    pub max_merge: u32,
}

impl Default for TreeConfig {
    fn default() -> Self {
        TreeConfig { leaf_cap: 60, internal_cap: 30, boundary: 0, max_merge: 0 }
    }
}

impl TreeConfig {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<()> {
        if !(4..=4096).contains(&self.leaf_cap) || !(4..=4096).contains(&self.internal_cap) {
            return Err(Error::invalid("leaf_cap and internal_cap must be in 4..=4096"));
        }
        Ok(())
    }

    /// The longest extent a leaf entry holds: a full leaf then spans less than 2^32 bytes.
    pub fn max_extent_len(&self) -> u32 {
        (u32::MAX as usize / self.leaf_cap) as u32
    }
}

/// Structural counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeStats {
    /// Node splits.
    pub splits: u64,
    /// Node merges and removals of emptied nodes.
    pub merges: u64,
    /// Leaf rebases (partial offsets moved into the parent's shift).
    pub rebases: u64,
}

#[derive(Clone, Copy, Debug)]
struct Step {
    node: u32,
    idx: usize,
}

/// The shift-encoded extent index. See the module documentation.
#[derive(Clone, Debug)]
pub struct FlexTree {
    cfg: TreeConfig,
    nodes: Vec<Option<Node>>,
    free_ids: Vec<u32>,
    root: u32,
    size: u64,
    nr_extents: u64,
    released_slots: Vec<u32>,
    stats: TreeStats,
    /// The descent path's buffer, lent to each modification and given back at its end, so an insert costs no
    /// allocation (one per operation was about 2% of a 4 KiB insert's time).
    path_buf: Vec<Step>,
}

// Both searches count instead of bisecting. The entries are sorted, so the count is the partition point, and the
// loads are independent: a node that is not in cache costs one round of parallel misses, where a binary search
// pays one miss per probe. On random reads of a large file the descent's misses are most of its cost.

/// The child of an internal node covering partial offset `xr`.
fn route(pivots: &[i64], xr: i64) -> usize {
    pivots.iter().map(|&p| usize::from(p <= xr)).sum()
}

/// The index of the first extent of a leaf ending after partial offset `xr` (`ext.len()` if none does).
fn leaf_index(ext: &[Extent], xr: u64) -> usize {
    ext.iter().map(|e| usize::from(e.poff as u64 + e.len as u64 <= xr)).sum()
}

fn corrupt(msg: impl Into<String>) -> Error {
    Error::corruption("tree", msg)
}

/// Rewrites the partial offsets of `ext[from..]` so they follow `ext[from - 1]` (or start at `start` when
/// `from == 0`). When an extent would end past 32 bits the whole leaf is *rebased*: its offsets restart at 0 and
/// the returned amount (the leaf's old first offset) must be added to the parent's shift for this leaf.
fn relayout(ext: &mut [Extent], from: usize, start: u64) -> Result<Option<u32>> {
    let mut pos = if from == 0 { start } else { ext[from - 1].poff as u64 + ext[from - 1].len as u64 };
    let mut overflow = false;
    for e in ext[from..].iter_mut() {
        if pos + e.len as u64 > u32::MAX as u64 {
            overflow = true;
            break;
        }
        e.poff = pos as u32;
        pos += e.len as u64;
    }
    if !overflow {
        return Ok(None);
    }
    let m = if from == 0 { start } else { ext[0].poff as u64 };
    let mut pos = 0u64;
    for e in ext.iter_mut() {
        if pos + e.len as u64 > u32::MAX as u64 {
            return Err(corrupt("leaf span exceeds 32 bits"));
        }
        e.poff = pos as u32;
        pos += e.len as u64;
    }
    Ok(Some(u32::try_from(m).map_err(|_| corrupt("leaf rebase amount exceeds 32 bits"))?))
}

impl FlexTree {
    /// An empty tree.
    pub fn new(cfg: TreeConfig) -> Result<Self> {
        cfg.validate()?;
        let mut t = FlexTree {
            cfg,
            nodes: Vec::new(),
            free_ids: Vec::new(),
            root: 0,
            size: 0,
            nr_extents: 0,
            released_slots: Vec::new(),
            stats: TreeStats::default(),
            path_buf: Vec::new(),
        };
        t.root = t.alloc(Node::new(Body::Leaf(Vec::new())));
        Ok(t)
    }

    /// Builds a tree from loaded nodes (the persistent form). Verifies every invariant.
    pub(crate) fn from_nodes(cfg: TreeConfig, nodes: Vec<Node>, root: u32) -> Result<Self> {
        cfg.validate()?;
        let mut t = FlexTree {
            cfg,
            nodes: nodes.into_iter().map(Some).collect(),
            free_ids: Vec::new(),
            root,
            size: 0,
            nr_extents: 0,
            released_slots: Vec::new(),
            stats: TreeStats::default(),
            path_buf: Vec::new(),
        };
        if root as usize >= t.nodes.len() {
            return Err(corrupt("root id out of range"));
        }
        let (size, n) = t.check_inner()?;
        t.size = size;
        t.nr_extents = n;
        Ok(t)
    }

    /// The shape parameters.
    pub fn config(&self) -> &TreeConfig {
        &self.cfg
    }

    /// The logical size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The number of leaf extents (holes included).
    pub fn extent_count(&self) -> u64 {
        self.nr_extents
    }

    /// The number of live nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len() - self.free_ids.len()
    }

    /// Structural counters.
    pub fn stats(&self) -> TreeStats {
        self.stats
    }

    pub(crate) fn root(&self) -> u32 {
        self.root
    }

    pub(crate) fn node(&self, id: u32) -> &Node {
        // Ids come from the tree's own pointers; a dangling id is a bug, but never panic on it.
        match self.nodes.get(id as usize).and_then(Option::as_ref) {
            Some(n) => n,
            None => &DANGLING,
        }
    }

    pub(crate) fn node_mut(&mut self, id: u32) -> Option<&mut Node> {
        self.nodes.get_mut(id as usize).and_then(Option::as_mut)
    }

    /// Tree-file slots of nodes freed since the last call; the caller owns them from now on.
    pub(crate) fn take_released_slots(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.released_slots)
    }

    fn alloc(&mut self, node: Node) -> u32 {
        if let Some(id) = self.free_ids.pop() {
            self.nodes[id as usize] = Some(node);
            id
        } else {
            self.nodes.push(Some(node));
            (self.nodes.len() - 1) as u32
        }
    }

    fn free_node(&mut self, id: u32) -> Option<Node> {
        let n = self.nodes.get_mut(id as usize)?.take()?;
        if let Some(s) = n.slot {
            self.released_slots.push(s);
        }
        self.free_ids.push(id);
        Some(n)
    }

    fn body_mut(&mut self, id: u32) -> Result<&mut Body> {
        let n = self.node_mut(id).ok_or_else(|| corrupt(format!("dangling node id {id}")))?;
        n.dirty = true;
        Ok(&mut n.body)
    }

    fn leaf_mut(&mut self, id: u32) -> Result<&mut Vec<Extent>> {
        match self.body_mut(id)? {
            Body::Leaf(e) => Ok(e),
            Body::Internal { .. } => Err(corrupt("expected a leaf")),
        }
    }

    fn is_full(&self, id: u32) -> bool {
        match &self.node(id).body {
            Body::Leaf(e) => e.len() + 1 >= self.cfg.leaf_cap,
            Body::Internal { children, .. } => children.len() >= self.cfg.internal_cap,
        }
    }

    /// Splits child `i` of `parent` in two; the new right node inherits the pointer's shift.
    fn split_child(&mut self, parent: u32, i: usize) -> Result<()> {
        let Body::Internal { children, .. } = &self.node(parent).body else {
            return Err(corrupt("split under a leaf"));
        };
        let Child { id: cid, shift: s } = children[i];
        let (right, pivot, right_shift) = match self.body_mut(cid)? {
            Body::Leaf(e) => {
                let mid = e.len() / 2;
                let right = e.split_off(mid);
                // The new pointer inherits the old one's shift (§3.2.1), so the moved extents keep their partial
                // offsets; the new pivot is the median's partial offset plus that shift.
                let p = right.first().map_or(0, |x| x.poff as i64) + s;
                (Body::Leaf(right), p, s)
            }
            Body::Internal { children: c, pivots: p } => {
                let mid = c.len() / 2;
                let rc = c.split_off(mid);
                let mut rp = p.split_off(mid - 1);
                let up = rp.remove(0);
                (Body::Internal { children: rc, pivots: rp }, up + s, s)
            }
        };
        let new = self.alloc(Node::new(right));
        let Body::Internal { children, pivots } = self.body_mut(parent)? else {
            return Err(corrupt("split under a leaf"));
        };
        children.insert(i + 1, Child { id: new, shift: right_shift });
        pivots.insert(i, pivot);
        self.stats.splits += 1;
        Ok(())
    }

    /// Descends to the leaf where a modification at `x` happens, splitting full nodes on the way and marking the
    /// path dirty. Returns the path (node, chosen child) from the root, the leaf and the leaf's base.
    fn descend_mut(&mut self, x: u64) -> Result<(Vec<Step>, u32, i64)> {
        if self.is_full(self.root) {
            let old = self.root;
            self.root = self.alloc(Node::new(Body::Internal {
                children: vec![Child { id: old, shift: 0 }],
                pivots: vec![],
            }));
            self.split_child(self.root, 0)?;
        }
        let mut path = std::mem::take(&mut self.path_buf);
        path.clear();
        let mut cur = self.root;
        let mut base = 0i64;
        loop {
            if path.len() > 64 {
                return Err(corrupt("tree deeper than 64 levels"));
            }
            let xr = x as i64 - base;
            let i = match self.body_mut(cur)? {
                Body::Leaf(_) => return Ok((path, cur, base)),
                Body::Internal { pivots, .. } => route(pivots, xr),
            };
            let child = match &self.node(cur).body {
                Body::Internal { children, .. } => children.get(i).copied(),
                Body::Leaf(_) => None,
            }
            .ok_or_else(|| corrupt("internal node without children"))?;
            let i = if self.is_full(child.id) {
                self.split_child(cur, i)?;
                match &self.node(cur).body {
                    Body::Internal { pivots, .. } => route(pivots, xr),
                    Body::Leaf(_) => return Err(corrupt("split turned a node into a leaf")),
                }
            } else {
                i
            };
            let Body::Internal { children, .. } = &self.node(cur).body else {
                return Err(corrupt("expected an internal node"));
            };
            let ch = children[i];
            path.push(Step { node: cur, idx: i });
            base += ch.shift;
            cur = ch.id;
        }
    }

    /// Adds `delta` to every pointer and pivot right of the path: every extent after the modified leaf moves.
    fn shift_after(&mut self, path: &[Step], delta: i64) -> Result<()> {
        for st in path {
            if let Body::Internal { children, pivots } = self.body_mut(st.node)? {
                for c in &mut children[st.idx + 1..] {
                    c.shift += delta;
                }
                for p in &mut pivots[st.idx..] {
                    *p += delta;
                }
            }
        }
        Ok(())
    }

    fn apply_rebase(&mut self, path: &[Step], m: Option<u32>) -> Result<()> {
        let Some(m) = m else { return Ok(()) };
        self.stats.rebases += 1;
        match path.last() {
            Some(st) => {
                if let Body::Internal { children, .. } = self.body_mut(st.node)? {
                    children[st.idx].shift += m as i64;
                }
                Ok(())
            }
            None if m == 0 => Ok(()),
            None => Err(corrupt("root leaf does not start at offset 0")),
        }
    }

    fn can_merge(&self, prev: &Extent, addr: u64, len: u32) -> bool {
        let total = prev.len as u64 + len as u64;
        if total > self.cfg.max_extent_len() as u64 {
            return false;
        }
        if prev.is_hole() || addr == HOLE {
            return prev.is_hole() && addr == HOLE;
        }
        if self.cfg.max_merge != 0 && total > self.cfg.max_merge as u64 {
            return false;
        }
        if prev.addr + prev.len as u64 != addr {
            return false;
        }
        let b = self.cfg.boundary;
        b == 0 || prev.addr / b == (addr + len as u64 - 1) / b
    }

    fn check_range(&self, off: u64, len: u64) -> Result<()> {
        match off.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(Error::invalid(format!("range {off}+{len} past the end ({})", self.size))),
        }
    }

    fn after_change(&self) -> Result<()> {
        #[cfg(feature = "invariants")]
        self.check()?;
        Ok(())
    }
}

static DANGLING: Node = Node { body: Body::Leaf(Vec::new()), dirty: false, slot: None };

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    /// The counting searches agree with a binary search on every sorted node, at every key including the
    /// boundaries.
    #[test]
    fn counting_searches_equal_the_partition_point() {
        let mut rng = SmallRng::seed_from_u64(7);
        for n in 0..70 {
            let mut ext = Vec::new();
            let mut at = rng.random_range(0..1000u32);
            for _ in 0..n {
                let len = rng.random_range(1..5000u32);
                ext.push(Extent { poff: at, len, tag: 0, addr: 0 });
                at += len;
            }
            let pivots: Vec<i64> = ext.iter().map(|e| e.poff as i64).collect();
            let mut keys: Vec<u64> =
                ext.iter().flat_map(|e| [e.poff as u64, (e.poff + e.len) as u64]).collect();
            keys.extend([0, u64::from(at) + 1, rng.random_range(0..u64::from(at) + 2)]);
            for x in keys {
                let want = ext.partition_point(|e| e.poff as u64 + e.len as u64 <= x);
                assert_eq!(leaf_index(&ext, x), want, "leaf of {n}, key {x}");
                for xr in [x as i64, x as i64 - 1] {
                    assert_eq!(
                        route(&pivots, xr),
                        pivots.partition_point(|&p| p <= xr),
                        "pivots of {n}, {xr}"
                    );
                }
            }
        }
    }
}
