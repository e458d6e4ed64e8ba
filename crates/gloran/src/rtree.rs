//! The LSM-DRtree's write buffer (§4.2): an in-memory R-tree over effective areas.
//!
//! A classic Guttman R-tree with the *quadratic* split: on overflow the two entries that would waste the most
//! area together become seeds, then the entry with the strongest preference is assigned next, to the group it
//! enlarges least, until one group must take the rest to reach the minimum fill. Nodes hold at most
//! [`MAX_ENTRIES`] entries and at least [`MIN_ENTRIES`] (40 %) except the root. Insertion descends by least area
//! enlargement (ties: smaller area), as the paper describes (records cluster with related ones).
//!
//! # Byte keys
//! Bounding rectangles keep full byte-string keys (`start` of the leftmost, `end` of the rightmost child), so every
//! containment test a query makes is exact. The geometry that steers heuristics (enlargement, split seeds)
//! projects keys to `f64` through their first 8 bytes past the skipped prefix ([`key_prefix_u64`]); a poor
//! projection (keys sharing a long prefix) can only make the tree less well clustered, never give a wrong answer.
//! Probes use the projection only as a filter in front of the exact test, and only where it is sound (`Probe`).
//!
//! Areas in the buffer are not disjointized (that happens when the buffer is flushed), so a query may meet several
//! covering areas; it stops at the first one a reader at the given snapshot can see.
//!
//! Bounds and leaf entries keep short keys inline (`inline_key.rs`): a probe compares its key with every entry of
//! each node it visits, and with heap-allocated keys each comparison was two cache misses.

use crate::area::{Area, key_prefix_u64};
use crate::inline_key::InlineKey;
use bptree::prefetch;

/// Most entries per node.
pub const MAX_ENTRIES: usize = 16;
/// Fewest entries per non-root node after a split.
pub const MIN_ENTRIES: usize = 6;

/// A minimum bounding rectangle with exact keys.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mbr {
    start: InlineKey,
    end: InlineKey,
    min_seq: u64,
    max_seq: u64,
    /// Smallest reported delete sequence below: readers at older snapshots can skip the subtree.
    min_vis: u64,
}

impl Mbr {
    fn of_area(a: &Area) -> Self {
        Mbr {
            start: InlineKey::new(&a.start),
            end: InlineKey::new(&a.end),
            min_seq: a.min_seq,
            max_seq: a.max_seq,
            min_vis: a.seq,
        }
    }

    fn extend(&mut self, o: &Mbr) {
        if o.start < self.start {
            self.start.clone_from(&o.start);
        }
        if o.end > self.end {
            self.end.clone_from(&o.end);
        }
        self.min_seq = self.min_seq.min(o.min_seq);
        self.max_seq = self.max_seq.max(o.max_seq);
        self.min_vis = self.min_vis.min(o.min_vis);
    }

    fn may_cover(&self, key: &[u8], seq: u64, snapshot: u64) -> bool {
        self.min_seq <= seq
            && seq < self.max_seq
            && self.min_vis <= snapshot
            && self.start.as_slice() <= key
            && key < self.end.as_slice()
    }

    /// `skip`: bytes every key shares (the projection looks past them; heuristics only, so a key that does not
    /// share them just projects poorly).
    fn rect(&self, skip: usize) -> Rect {
        Rect::of(self.start.as_slice(), self.end.as_slice(), self.min_seq, self.max_seq, skip)
    }
}

/// A leaf entry: an area with inline bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Item {
    start: InlineKey,
    end: InlineKey,
    min_seq: u64,
    max_seq: u64,
    seq: u64,
}

impl Item {
    fn of(a: Area) -> Item {
        Item {
            start: InlineKey::new(&a.start),
            end: InlineKey::new(&a.end),
            min_seq: a.min_seq,
            max_seq: a.max_seq,
            seq: a.seq,
        }
    }

    fn to_area(&self) -> Area {
        Area {
            start: self.start.as_slice().to_vec(),
            end: self.end.as_slice().to_vec(),
            min_seq: self.min_seq,
            max_seq: self.max_seq,
            seq: self.seq,
        }
    }

    /// [`Area::covers`].
    #[inline]
    fn covers(&self, key: &[u8], seq: u64) -> bool {
        self.min_seq <= seq && seq < self.max_seq && self.start.as_slice() <= key && key < self.end.as_slice()
    }

    fn rect(&self, skip: usize) -> Rect {
        Rect::of(self.start.as_slice(), self.end.as_slice(), self.min_seq, self.max_seq, skip)
    }
}

/// A projected rectangle: what the heuristics compare, and a sound filter for probes ([`Probe`]).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rect {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Rect {
    fn of(start: &[u8], end: &[u8], min_seq: u64, max_seq: u64, skip: usize) -> Rect {
        let p = |k: &[u8]| key_prefix_u64(&k[skip.min(k.len())..]) as f64;
        Rect { x0: p(start), x1: p(end), y0: min_seq as f64, y1: max_seq as f64 }
    }

    fn area(&self) -> f64 {
        // +1 keeps degenerate (same-prefix) rectangles from all having area 0.
        (self.x1 - self.x0 + 1.0) * (self.y1 - self.y0 + 1.0)
    }
    fn union(&self, o: &Rect) -> Rect {
        Rect { x0: self.x0.min(o.x0), x1: self.x1.max(o.x1), y0: self.y0.min(o.y0), y1: self.y1.max(o.y1) }
    }

    /// False only if no area under this rectangle can cover the probe's key at every sequence number of its band.
    #[inline]
    fn may_hold(&self, p: &Probe) -> bool {
        self.x0 <= p.x && p.x <= self.x1 && self.y0 <= p.lo && p.hi <= self.y1
    }
}

/// A probe's key and sequence band in projected space, a filter in front of the exact test.
///
/// Sound when the key and every bound in the tree begin with the same `skip` bytes: the projection of the rest
/// is then monotone in key order (its first 8 bytes, zero-padded, big-endian), and so is every conversion of a
/// `u64` to `f64`. So `start <= key < end` implies `x0 <= x <= x1`, and `min_seq <= seq < max_seq` implies
/// `y0 <= seq <= y1`: a rectangle that fails the filter holds no covering area.
struct Probe {
    x: f64,
    lo: f64,
    hi: f64,
}

#[derive(Debug)]
enum Node {
    Leaf(Vec<Item>),
    Inner(Inner),
}

/// An inner node's entries in three parallel arrays: projected rectangles, children and exact bounds.
///
/// An insert chooses among every child of each node on its path by their projected rectangles. Projected from
/// the entries themselves, each choice loaded all sixteen entries' bounds (80 bytes each) and stalled on those
/// loads; the rectangles side by side take eight cache lines and no key decoding. Inserting 33 K areas of
/// 16-byte keys took 0.8 µs an area after this, 1.5 µs before. The child pointers sit apart from the bounds for
/// the same reason: the descent asks for the rectangles' and the pointers' lines together, so the chosen child's
/// address is at hand when the choice is made (with `(bounds, child)` pairs, loading the chosen pair was one more
/// miss per level, on the critical path), and the chosen bounds, updated only after the child returns, are asked
/// for on the way down.
///
/// INVARIANT: the three arrays have one length, and `rects[i] == mbrs[i].rect(skip)` for the tree's `skip`.
#[derive(Debug, Default)]
struct Inner {
    rects: Vec<Rect>,
    // Boxed: a child is a pointer in this array, which the descent reads with the rectangles. Nodes by value
    // (an inner node is three vectors) would make the array ten times as long and its lines no longer fit the
    // descent's prefetches.
    #[allow(clippy::vec_box)]
    kids: Vec<Box<Node>>,
    mbrs: Vec<Mbr>,
}

impl Inner {
    fn with(entries: [(Mbr, Box<Node>); 2], skip: usize) -> Inner {
        let mut inner = Inner {
            rects: Vec::with_capacity(MAX_ENTRIES + 1),
            kids: Vec::with_capacity(MAX_ENTRIES + 1),
            mbrs: Vec::with_capacity(MAX_ENTRIES + 1),
        };
        for (m, c) in entries {
            inner.push(m, c, skip);
        }
        inner
    }

    fn push(&mut self, m: Mbr, node: Box<Node>, skip: usize) {
        self.rects.push(m.rect(skip));
        self.kids.push(node);
        self.mbrs.push(m);
    }

    fn len(&self) -> usize {
        self.kids.len()
    }

    /// Moves the entries `second` marks into a new node, keeping the others (in some order).
    fn split_off(&mut self, second: &Marks) -> Inner {
        Inner {
            rects: split_off_marked(&mut self.rects, second),
            kids: split_off_marked(&mut self.kids, second),
            mbrs: split_off_marked(&mut self.mbrs, second),
        }
    }
}

impl Node {
    /// The bounding rectangle of the node's entries, computed on borrowed keys: only the two bounds are copied
    /// (cloning every entry's keys here, on every insert, was once most of a range delete's time).
    fn mbr(&self) -> Option<Mbr> {
        type Bounds<'a> = (&'a [u8], &'a [u8], u64, u64, u64);
        fn fold<'a>(mut it: impl Iterator<Item = Bounds<'a>>) -> Option<Mbr> {
            let (mut start, mut end, mut min_seq, mut max_seq, mut min_vis) = it.next()?;
            for (s, e, lo, hi, vis) in it {
                start = start.min(s);
                end = end.max(e);
                (min_seq, max_seq, min_vis) = (min_seq.min(lo), max_seq.max(hi), min_vis.min(vis));
            }
            Some(Mbr { start: InlineKey::new(start), end: InlineKey::new(end), min_seq, max_seq, min_vis })
        }
        match self {
            Node::Leaf(v) => {
                fold(v.iter().map(|a| (a.start.as_slice(), a.end.as_slice(), a.min_seq, a.max_seq, a.seq)))
            }
            Node::Inner(v) => fold(
                v.mbrs
                    .iter()
                    .map(|m| (m.start.as_slice(), m.end.as_slice(), m.min_seq, m.max_seq, m.min_vis)),
            ),
        }
    }
}

/// The in-memory R-tree write buffer.
#[derive(Debug)]
pub struct RTree {
    root: Node,
    len: usize,
    bytes: usize,
    /// Leading key bytes the split heuristics skip (the keys' common prefix, when the index knows it).
    skip: usize,
    /// The first area's first `skip` key bytes.
    prefix: Vec<u8>,
    /// Every bound held begins with `prefix`, which is `skip` bytes long: probes of keys that begin with it too
    /// may filter children by their projected rectangles ([`Probe`]).
    prefixed: bool,
}

impl Default for RTree {
    fn default() -> Self {
        RTree { root: Node::Leaf(Vec::new()), len: 0, bytes: 0, skip: 0, prefix: Vec::new(), prefixed: true }
    }
}

/// Which entries of an overflowing node go to the second group of a split.
type Marks = [bool; MAX_ENTRIES + 1];

/// Quadratic split of the entries whose projected rectangles are `rects` into two groups, each of at least
/// `MIN_ENTRIES`: marks the entries of the second group.
///
/// REQUIRES: `2 <= rects.len() <= MAX_ENTRIES + 1`.
fn quadratic_split(rects: &[Rect]) -> Marks {
    let (mut s1, mut s2, mut worst) = (0, 1, f64::NEG_INFINITY);
    for i in 0..rects.len() {
        for j in i + 1..rects.len() {
            let d = rects[i].union(&rects[j]).area() - rects[i].area() - rects[j].area();
            if d > worst {
                (s1, s2, worst) = (i, j, d);
            }
        }
    }
    let mut assigned: [Option<bool>; MAX_ENTRIES + 1] = [None; MAX_ENTRIES + 1];
    let assigned = &mut assigned[..rects.len()];
    assigned[s1] = Some(false);
    assigned[s2] = Some(true);
    let (mut r1, mut r2) = (rects[s1], rects[s2]);
    let (mut n1, mut n2) = (1usize, 1usize);
    let total = rects.len();
    let min_fill = MIN_ENTRIES.min(total / 2);
    let mut left = total - 2;
    while left > 0 {
        // A group that needs every remaining entry to reach the minimum fill takes them all.
        if n1 + left <= min_fill {
            for a in assigned.iter_mut().filter(|a| a.is_none()) {
                *a = Some(false);
            }
            break;
        }
        if n2 + left <= min_fill {
            for a in assigned.iter_mut().filter(|a| a.is_none()) {
                *a = Some(true);
            }
            break;
        }
        // PickNext: the unassigned entry with the greatest preference for one group.
        let (mut pick, mut best) = (usize::MAX, f64::NEG_INFINITY);
        for (i, r) in rects.iter().enumerate() {
            if assigned[i].is_some() {
                continue;
            }
            let d1 = r1.union(r).area() - r1.area();
            let d2 = r2.union(r).area() - r2.area();
            let pref = (d1 - d2).abs();
            if pref > best {
                (pick, best) = (i, pref);
            }
        }
        let r = rects[pick];
        let d1 = r1.union(&r).area() - r1.area();
        let d2 = r2.union(&r).area() - r2.area();
        let to_second =
            d2 < d1 || (d2 == d1 && (r2.area() < r1.area() || (r2.area() == r1.area() && n2 < n1)));
        assigned[pick] = Some(to_second);
        if to_second {
            r2 = r2.union(&r);
            n2 += 1;
        } else {
            r1 = r1.union(&r);
            n1 += 1;
        }
        left -= 1;
    }
    let mut second = [false; MAX_ENTRIES + 1];
    for (m, a) in second.iter_mut().zip(assigned.iter()) {
        *m = *a == Some(true);
    }
    second
}

/// Moves the elements `second` marks out of `v` into a new vector, which like `v` has room for a node's overflow
/// entry. What stays keeps its elements but not their order: a node's entries are a set. Parallel arrays split
/// with the same marks stay parallel (the swaps depend on the marks and the length only).
///
/// Split used to build both groups afresh and free the overflowing node's vectors: six allocations and five
/// frees per leaf split, where one allocation (the new node's) is all a split needs.
fn split_off_marked<T>(v: &mut Vec<T>, second: &Marks) -> Vec<T> {
    let mut out = Vec::with_capacity(MAX_ENTRIES + 1);
    // From the back, so each swap brings in an element already looked at (and kept).
    for i in (0..v.len()).rev() {
        if second[i] {
            out.push(v.swap_remove(i));
        }
    }
    out
}

/// Inserts into `node`; returns the new sibling when `node` split.
fn insert_into(node: &mut Node, area: Area, mbr: &Mbr, skip: usize) -> Option<(Mbr, Box<Node>)> {
    match node {
        Node::Leaf(items) => {
            items.push(Item::of(area));
            if items.len() <= MAX_ENTRIES {
                return None;
            }
            prefetch::slice(items);
            let mut rects = [Rect { x0: 0.0, x1: 0.0, y0: 0.0, y1: 0.0 }; MAX_ENTRIES + 1];
            for (r, a) in rects.iter_mut().zip(items.iter()) {
                *r = a.rect(skip);
            }
            let second = quadratic_split(&rects[..items.len()]);
            let sib = Node::Leaf(split_off_marked(items, &second));
            let m = sib.mbr()?;
            Some((m, Box::new(sib)))
        }
        Node::Inner(inner) => {
            prefetch::slice(&inner.rects);
            prefetch::slice(&inner.kids);
            // Every child's node, so the chosen one's is on its way when the choice is made: the lines are
            // independent, so their misses overlap instead of adding up.
            for k in &inner.kids {
                prefetch::line(&**k);
            }
            let r = mbr.rect(skip);
            let mut best = 0;
            let mut best_cost = (f64::INFINITY, f64::INFINITY);
            for (i, cr) in inner.rects.iter().enumerate() {
                let cost = (cr.union(&r).area() - cr.area(), cr.area());
                if cost < best_cost {
                    (best, best_cost) = (i, cost);
                }
            }
            // Updated when the child returns; asked for now so the load overlaps the descent.
            prefetch::line(&inner.mbrs[best]);
            let child = &mut inner.kids[best];
            let split = insert_into(child, area, mbr, skip);
            // Without a split the child's bounds grow by exactly the new area's; a split moved entries out, so
            // they are recomputed.
            let child_mbr = &mut inner.mbrs[best];
            match &split {
                None => child_mbr.extend(mbr),
                Some(_) => {
                    if let Some(m) = inner.kids[best].mbr() {
                        *child_mbr = m;
                    }
                }
            }
            inner.rects[best] = child_mbr.rect(skip);
            if let Some((m, node)) = split {
                inner.push(m, node, skip);
            }
            if inner.len() <= MAX_ENTRIES {
                return None;
            }
            let second = quadratic_split(&inner.rects);
            let sib = Node::Inner(inner.split_off(&second));
            let m = sib.mbr()?;
            Some((m, Box::new(sib)))
        }
    }
}

impl RTree {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty buffer whose split heuristics look past the first `skip` key bytes (keys sharing a long prefix
    /// would otherwise all project alike and the tree would cluster by sequence only).
    pub fn with_skip(skip: usize) -> Self {
        RTree { skip, ..Self::default() }
    }

    /// Number of areas held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no area.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Approximate bytes held (keys, sequence numbers and per-entry overhead).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Inserts an area. REQUIRES: `!area.is_empty()`.
    pub fn insert(&mut self, area: Area) {
        if self.len == 0 {
            self.prefix = area.start[..self.skip.min(area.start.len())].to_vec();
        }
        self.prefixed &= self.prefix.len() == self.skip
            && area.start.starts_with(&self.prefix)
            && area.end.starts_with(&self.prefix);
        self.len += 1;
        self.bytes += area.footprint() + 48;
        let mbr = Mbr::of_area(&area);
        if let Some((sib_mbr, sib)) = insert_into(&mut self.root, area, &mbr, self.skip) {
            let old = std::mem::replace(&mut self.root, Node::Leaf(Vec::new()));
            if let Some(old_mbr) = old.mbr() {
                self.root = Node::Inner(Inner::with([(old_mbr, Box::new(old)), (sib_mbr, sib)], self.skip));
            } else {
                self.root = *sib;
            }
        }
    }

    /// A delete covering `(key, seq)` that a reader at `snapshot` sees, if any; `visited` counts nodes touched.
    pub fn covering(&self, key: &[u8], seq: u64, snapshot: u64, visited: &mut u64) -> Option<u64> {
        self.covering_span(key, seq, seq, snapshot, visited)
    }

    /// The filter for probes of `key` over `[lo, hi]`, when it is sound for them ([`Probe`]).
    fn probe(&self, key: &[u8], lo: u64, hi: u64) -> Option<Probe> {
        (self.prefixed && key.starts_with(&self.prefix)).then(|| Probe {
            x: key_prefix_u64(&key[self.skip..]) as f64,
            lo: lo as f64,
            hi: hi as f64,
        })
    }

    /// A delete a reader at `snapshot` sees that covers `key` for *every* sequence number in `[lo, hi]`, if any
    /// (one area alone must span the band; a band covered only by a stack of areas answers `None`, which callers
    /// treat as "unknown"). `visited` counts nodes touched.
    ///
    /// REQUIRES: `lo <= hi`.
    pub fn covering_span(
        &self,
        key: &[u8],
        lo: u64,
        hi: u64,
        snapshot: u64,
        visited: &mut u64,
    ) -> Option<u64> {
        type Band = (u64, u64);
        fn walk(
            n: &Node,
            key: &[u8],
            band: Band,
            snap: u64,
            p: Option<&Probe>,
            visited: &mut u64,
        ) -> Option<u64> {
            *visited += 1;
            let (lo, hi) = band;
            match n {
                Node::Leaf(items) => items
                    .iter()
                    .find(|a| a.seq <= snap && a.covers(key, lo) && a.covers(key, hi))
                    .map(|a| a.seq),
                Node::Inner(inner) => {
                    // Every child that may hold a cover is chosen, and its node asked for, before the first is
                    // walked: a probe walks about two paths, and the second's loads then overlap the first's.
                    // A node holds at most MAX_ENTRIES children between inserts (one more only inside a split).
                    let mut next: [Option<&Node>; MAX_ENTRIES + 1] = [None; MAX_ENTRIES + 1];
                    let mut n = 0;
                    prefetch::slice(&inner.rects);
                    prefetch::slice(&inner.kids);
                    // Where the projection is sound it alone chooses: the exact bounds would load one more
                    // line per chosen child (on the path's critical chain) to reject, at most, children whose
                    // bounds the projection rounds together with the key, or whose records the snapshot cannot
                    // see; the leaves' exact test decides either way.
                    for ((m, c), r) in inner.mbrs.iter().zip(&inner.kids).zip(&inner.rects) {
                        let chosen = match p {
                            Some(p) => r.may_hold(p),
                            None => m.may_cover(key, lo, snap) && m.may_cover(key, hi, snap),
                        };
                        if chosen {
                            prefetch::line(&**c);
                            next[n] = Some(c);
                            n += 1;
                        }
                    }
                    next[..n].iter().flatten().find_map(|c| walk(c, key, band, snap, p, visited))
                }
            }
        }
        if self.len == 0 || lo > hi {
            return None;
        }
        let p = self.probe(key, lo, hi);
        walk(&self.root, key, (lo, hi), snapshot, p.as_ref(), visited)
    }

    /// Every area whose key range meets `[lo, hi)` (`hi = None`: unbounded).
    pub fn overlapping(&self, lo: &[u8], hi: Option<&[u8]>) -> Vec<Area> {
        fn walk(n: &Node, lo: &[u8], hi: Option<&[u8]>, out: &mut Vec<Area>) {
            let meets = |s: &[u8], e: &[u8]| e > lo && hi.is_none_or(|h| s < h);
            match n {
                Node::Leaf(items) => out.extend(
                    items.iter().filter(|a| meets(a.start.as_slice(), a.end.as_slice())).map(Item::to_area),
                ),
                Node::Inner(inner) => {
                    for (m, c) in inner.mbrs.iter().zip(&inner.kids) {
                        if meets(m.start.as_slice(), m.end.as_slice()) {
                            walk(c, lo, hi, out);
                        }
                    }
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.root, lo, hi, &mut out);
        out
    }

    /// Every area, in no particular order.
    pub fn areas(&self) -> Vec<Area> {
        self.overlapping(&[], None)
    }

    /// Leading key bytes the split heuristics skip.
    pub fn skip(&self) -> usize {
        self.skip
    }

    /// Rebuilds the tree with split heuristics that skip `skip` key bytes (the index learned a different common
    /// prefix). The areas stay; only their grouping into nodes changes.
    pub fn reskip(&mut self, skip: usize) {
        let areas = self.take();
        self.skip = skip;
        for a in areas {
            self.insert(a);
        }
    }

    /// Empties the buffer, returning its areas.
    pub fn take(&mut self) -> Vec<Area> {
        let out = self.areas();
        *self = RTree::with_skip(self.skip);
        out
    }

    /// The tree's height (1 for a single leaf).
    pub fn height(&self) -> usize {
        let mut h = 1;
        let mut n = &self.root;
        while let Node::Inner(c) = n {
            h += 1;
            match c.kids.first() {
                Some(child) => n = child,
                None => break,
            }
        }
        h
    }

    /// Whole-tree check: every stored MBR is exactly its children's and every kept rectangle its MBR's
    /// projection, fill bounds hold, leaves at one depth.
    pub fn check(&self) -> std::result::Result<(), String> {
        fn walk(
            n: &Node,
            depth: usize,
            leaf_depth: &mut Option<usize>,
            root: bool,
            skip: usize,
        ) -> Result<usize, String> {
            let count = match n {
                Node::Leaf(v) => v.len(),
                Node::Inner(v) => v.len(),
            };
            if count > MAX_ENTRIES || (!root && count < MIN_ENTRIES.min(MAX_ENTRIES / 2)) {
                return Err(format!("node with {count} entries at depth {depth}"));
            }
            match n {
                Node::Leaf(v) => {
                    if *leaf_depth.get_or_insert(depth) != depth {
                        return Err("leaves at different depths".into());
                    }
                    Ok(v.len())
                }
                Node::Inner(inner) => {
                    if inner.rects.len() != count || inner.mbrs.len() != count {
                        return Err(format!(
                            "{} rectangles and {} bounds for {count} children at depth {depth}",
                            inner.rects.len(),
                            inner.mbrs.len()
                        ));
                    }
                    let mut total = 0;
                    for ((m, c), r) in inner.mbrs.iter().zip(&inner.kids).zip(&inner.rects) {
                        if c.mbr().as_ref() != Some(m) {
                            return Err(format!("stale MBR at depth {depth}"));
                        }
                        if *r != m.rect(skip) {
                            return Err(format!("stale rectangle at depth {depth}"));
                        }
                        total += walk(c, depth + 1, leaf_depth, false, skip)?;
                    }
                    Ok(total)
                }
            }
        }
        let total = walk(&self.root, 0, &mut None, true, self.skip)?;
        if total != self.len {
            return Err(format!("{total} areas found, {} counted", self.len));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
