//! The single-threaded RASK index.

use std::cell::{Cell, RefCell};

use crate::gc::{GcScratch, LtMap, lightweight_marks, normal_gc_in};
use crate::internal::{Art, InternalIndex};
use crate::leaf::{Leaf, LeafId, NIL};
use crate::merge::merge_arrays;
use crate::search::{ReadScratch, ablation_search_idx, ablation_search_leaf};
use crate::split::{split_entries, split_gced};
use crate::unfound::UnfoundList;
use crate::{BlockRange, Error, Options, RangeValue, Stats};

/// RASK: a map from block ranges to values where a newer write overrides older ones on the blocks they share.
///
/// Structure (§4.1): internal nodes `I` (an adaptive radix tree by default; `BTreeIndex` for the ablation) map
/// each leaf's *anchor key* to the leaf; leaves are log-structured (appends only, newest last) and doubly linked in
/// block order, and their range spaces partition `[0, u64::MAX]`. Leaves live in an arena and link by index.
///
/// - `put` appends to the leaf whose space holds the range's first block; the part past that leaf's space goes to
///   the next leaf, and so on (Fig. 14). A full leaf is garbage-collected (lightweight, then normal GC if that
///   freed nothing), then split if still full. A leaf whose `N_frag` passes the threshold is merged or resplit with
///   its left neighbour.
/// - `delete` is a put of the tombstone; normal GC removes tombstones physically.
/// - `get` walks the leaves the range spans, ablation-searching each one newest-first.
///
/// Single-threaded; `ConcurrentRask` is the thread-safe form (§6.2).
pub struct Rask<V, I = Art<LeafId>> {
    opts: Options,
    /// The leaf arena in chunks of `CHUNK` slots, so growing it never copies leaves or leaves half a doubling
    /// unused (a freed slot goes to `free`).
    leaves: Vec<Vec<Option<Leaf<V>>>>,
    free: Vec<LeafId>,
    index: I,
    head: LeafId,
    stats: Stats,
    // Scratch reused across operations so the hot paths do not allocate.
    lt: LtMap,
    dead: Vec<bool>,
    ranges: Vec<BlockRange>,
    gc: GcScratch,
    kept: Vec<(BlockRange, V)>,
    gets: Cell<u64>,
    /// Buffers a read reuses; a read nested inside a `get_with` visitor gets fresh ones.
    read_scratch: RefCell<ReadScratch>,
}

/// A summary, not the mappings.
impl<V, I> std::fmt::Debug for Rask<V, I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let leaves: usize = self.leaves.iter().map(|c| c.iter().filter(|l| l.is_some()).count()).sum();
        f.debug_struct("Rask").field("leaves", &leaves).field("stats", &self.stats).finish_non_exhaustive()
    }
}

/// One leaf as seen by tests and tools: its anchor key and its entries, oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeafView<V> {
    /// The leaf's anchor key (first block of its range space).
    pub anchor: u64,
    /// The entries in append order.
    pub entries: Vec<(BlockRange, V)>,
}

impl<V: RangeValue, I: InternalIndex<LeafId>> Rask<V, I> {
    /// An empty index. Fails if `opts` does not validate.
    pub fn new(opts: Options) -> Result<Self, Error> {
        opts.validate()?;
        let mut index = I::default();
        index.insert(0, 0);
        Ok(Rask {
            leaves: vec![new_chunk(Leaf::new(0, opts.leaf_capacity))],
            opts,
            free: Vec::new(),
            index,
            head: 0,
            stats: Stats::default(),
            lt: LtMap::default(),
            dead: Vec::new(),
            ranges: Vec::new(),
            gc: GcScratch::default(),
            kept: Vec::new(),
            gets: Cell::new(0),
            read_scratch: RefCell::new(ReadScratch::default()),
        })
    }

    /// The options the index was built with.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Maps every block of `range` to the corresponding part of `value` (divided with `RangeValue::divide`),
    /// overriding older mappings. A tombstone `value` deletes.
    pub fn put(&mut self, range: BlockRange, value: V) {
        if value.is_tombstone() {
            self.stats.deletes += 1;
        } else {
            self.stats.puts += 1;
        }
        self.insert(range, value);
    }

    /// [`put`](Self::put) that first calls `covered` with every piece of `range` mapped before the put, in block
    /// order (the pieces [`get_with`](Self::get_with) would visit): what the put overrides, for callers that keep
    /// accounting per value (a block store's live bytes per data file). A tombstone `value` reports what it
    /// deletes.
    pub fn put_reporting(&mut self, range: BlockRange, value: V, covered: impl FnMut(BlockRange, &V)) {
        self.get_with(range, covered);
        self.put(range, value);
    }

    /// Unmaps every block of `range` (a put of the tombstone, §6.1).
    pub fn delete(&mut self, range: BlockRange) {
        self.stats.deletes += 1;
        self.insert(range, V::tombstone());
    }

    /// Calls `visit` with the current value of every mapped piece of `range`, in block order. Unmapped blocks are
    /// skipped. Pieces are maximal per stored entry, clipped to `range` and to leaf boundaries.
    pub fn get_with(&self, range: BlockRange, mut visit: impl FnMut(BlockRange, &V)) {
        self.gets.set(self.gets.get() + 1);
        let mut fresh;
        let mut borrowed;
        let scratch: &mut ReadScratch = match self.read_scratch.try_borrow_mut() {
            Ok(b) => {
                borrowed = b;
                &mut borrowed
            }
            Err(_) => {
                fresh = ReadScratch::default();
                &mut fresh
            }
        };
        let mut id = self.locate(range.first());
        loop {
            let leaf = self.leaf(id);
            let end = leaf.end;
            let space = BlockRange::raw(range.first().max(leaf.anchor), range.last().min(end));
            scratch.unfound.reset(space);
            scratch.found.clear();
            ablation_search_idx(
                leaf.len(),
                |i| leaf.range(i),
                |i| leaf.value(i).is_tombstone(),
                &mut scratch.unfound,
                &mut scratch.found,
            );
            scratch.found.sort_unstable_by_key(|(r, _)| r.first());
            for &(x, i) in &scratch.found {
                let (r, v) = (leaf.range(i as usize), leaf.value(i as usize));
                if x == r {
                    visit(x, v);
                } else {
                    visit(x, &v.divide(r, x));
                }
            }
            if end >= range.last() || leaf.next == NIL {
                break;
            }
            id = leaf.next;
        }
        scratch.found.clear();
    }

    /// The current value pieces of `range` in block order (the collecting form of [`get_with`](Self::get_with)).
    pub fn get(&self, range: BlockRange) -> Vec<(BlockRange, V)> {
        let mut out = Vec::new();
        self.get_with(range, |r, v| out.push((r, v.clone())));
        out
    }

    /// Every live mapping piece in block order.
    pub fn iter(&self) -> Iter<'_, V, I> {
        Iter { rask: self, leaf: self.head, buf: Vec::new(), pos: 0, unfound: UnfoundList::new() }
    }

    /// Number of live mapping pieces (what [`iter`](Self::iter) yields). O(entries).
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether no block is mapped. O(entries).
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// Entries stored in all leaves, including superseded ones and tombstones not yet collected. O(leaves).
    pub fn entry_count(&self) -> usize {
        self.leaves.iter().flatten().flatten().map(|l| l.len()).sum()
    }

    /// Number of leaves.
    pub fn leaf_count(&self) -> usize {
        self.index.len()
    }

    /// Bytes of memory the index holds: the struct, the leaf arena, every leaf's arrays (at capacity), values'
    /// own heap bytes, the internal index and the scratch buffers.
    pub fn memory_usage(&self) -> usize {
        size_of::<Self>()
            + self.leaves.capacity() * size_of::<Vec<Option<Leaf<V>>>>()
            + self.leaves.iter().map(|c| c.capacity() * size_of::<Option<Leaf<V>>>()).sum::<usize>()
            + self.leaves.iter().flatten().flatten().map(|l| l.heap_bytes()).sum::<usize>()
            + self.free.capacity() * size_of::<LeafId>()
            + self.index.memory_usage()
            + self.dead.capacity()
            + self.ranges.capacity() * size_of::<BlockRange>()
            + self.gc.heap_bytes()
            + self.kept.capacity() * size_of::<(BlockRange, V)>()
            + self.lt.heap_bytes()
            + self.read_scratch.try_borrow().map_or(0, |s| s.heap_bytes())
    }

    /// Counters since creation.
    pub fn stats(&self) -> Stats {
        Stats { gets: self.gets.get(), ..self.stats }
    }

    /// The leaves in block order with their entries (oldest first): for tests, tools and golden examples.
    pub fn leaves(&self) -> Vec<LeafView<V>> {
        let mut out = Vec::new();
        let mut id = self.head;
        while id != NIL {
            let l = self.leaf(id);
            out.push(LeafView {
                anchor: l.anchor,
                entries: (0..l.len()).map(|i| (l.range(i), l.value(i).clone())).collect(),
            });
            id = l.next;
        }
        out
    }

    // ---- internals -------------------------------------------------------------------------------------------

    #[inline]
    fn leaf(&self, id: LeafId) -> &Leaf<V> {
        match self.leaves.get(id as usize / CHUNK).and_then(|c| c.get(id as usize % CHUNK)) {
            Some(Some(l)) => l,
            _ => unreachable_leaf(id),
        }
    }

    #[inline]
    fn leaf_mut(&mut self, id: LeafId) -> &mut Leaf<V> {
        match self.leaves.get_mut(id as usize / CHUNK).and_then(|c| c.get_mut(id as usize % CHUNK)) {
            Some(Some(l)) => l,
            _ => unreachable_leaf(id),
        }
    }

    /// Last block of `id`'s range space.
    #[inline]
    fn space_end(&self, id: LeafId) -> u64 {
        self.leaf(id).end
    }

    fn refresh_end(&mut self, id: LeafId) {
        let end = match self.leaf(id).next {
            NIL => u64::MAX,
            n => self.leaf(n).anchor - 1,
        };
        self.leaf_mut(id).end = end;
    }

    /// The leaf whose range space holds `block`: the internal index's predecessor of `block`.
    #[inline]
    fn locate(&self, block: u64) -> LeafId {
        match self.index.predecessor(block) {
            Some((_, id)) => id,
            None => self.head,
        }
    }

    /// Walks right from `id` to the leaf whose range space holds `block`. REQUIRES: `id`'s anchor <= `block`.
    fn walk_to(&self, mut id: LeafId, block: u64) -> LeafId {
        loop {
            let next = self.leaf(id).next;
            if next == NIL || self.leaf(next).anchor > block {
                return id;
            }
            id = next;
        }
    }

    fn insert(&mut self, range: BlockRange, value: V) {
        let tomb = value.is_tombstone();
        let mut id = self.locate(range.first());
        let mut range = range;
        let mut value = value;
        let mut fragmented = false;
        loop {
            let end = self.space_end(id);
            if range.last() <= end {
                self.insert_into_leaf(id, range, value, fragmented, tomb);
                return;
            }
            let part = BlockRange::raw(range.first(), end);
            let rest = BlockRange::raw(end + 1, range.last());
            let (pv, rv) = if tomb {
                (value.clone(), value)
            } else {
                (value.divide(range, part), value.divide(range, rest))
            };
            let at = self.insert_into_leaf(id, part, pv, fragmented, tomb);
            id = self.walk_to(at, rest.first());
            range = rest;
            value = rv;
            fragmented = true;
        }
    }

    /// Inserts `part` (within `id`'s range space) into leaf `id`; returns a leaf at or left of the one now holding
    /// `part` (merge may have moved it into the left neighbour).
    fn insert_into_leaf(
        &mut self,
        id: LeafId,
        part: BlockRange,
        v: V,
        fragmented: bool,
        tomb: bool,
    ) -> LeafId {
        let cap = self.opts.leaf_capacity;
        if fragmented {
            self.stats.fragmented_inserts += 1;
        }
        if fragmented || tomb {
            let l = self.leaf_mut(id);
            l.n_frag = l.n_frag.saturating_add(1);
        }
        if self.leaf(id).len() >= cap && !(self.opts.two_stage_gc && self.lightweight_gc(id)) {
            // Second stage, with the incoming entry included: its result either fits (append done) or is
            // exactly what the split needs, so the leaf is scanned once.
            self.stats.gc_normal += 1;
            let mut ranges = std::mem::take(&mut self.ranges);
            let mut kept = std::mem::take(&mut self.kept);
            let mut gc = std::mem::take(&mut self.gc);
            let leaf = self.leaf(id);
            let anchor = leaf.anchor;
            // With two stages, `lightweight_gc` freed nothing, so `ranges` still holds this leaf's decoded range
            // array; without, it is decoded here.
            if !self.opts.two_stage_gc {
                leaf.ranges_into(&mut ranges);
            }
            debug_assert_eq!(ranges.len(), leaf.len());
            let dropped = normal_gc_in(&ranges, leaf.values(), Some((part, v)), cap, &mut gc, &mut kept);
            self.ranges = ranges;
            self.stats.gc_reclaimed += dropped as u64;
            #[cfg(feature = "invariants")]
            crate::invariants::check_no_covered(&kept);
            if kept.len() <= cap {
                self.leaf_mut(id).set_entries_from(&mut kept, cap);
                self.kept = kept;
                self.gc = gc;
            } else {
                let mut pieces = Vec::with_capacity(2);
                split_gced(kept, &gc.nonoverlap, anchor, cap, &mut self.stats, &mut pieces);
                self.gc = gc;
                // The split took the GC buffer; one allocation at full size now instead of the next GC growing
                // it 4 → 8 → 16 → 32.
                self.kept = Vec::with_capacity(cap + 1);
                self.install(id, None, pieces);
                self.check();
                // No merge/resplit right after a split (§6.1).
                return id;
            }
        } else {
            self.leaf_mut(id).append(part, v);
        }
        if self.leaf(id).n_frag as usize > self.opts.merge_threshold {
            return self.merge_resplit(id);
        }
        id
    }

    /// First GC stage on a full leaf; whether it freed anything.
    fn lightweight_gc(&mut self, id: LeafId) -> bool {
        self.stats.gc_lightweight += 1;
        let mut dead = std::mem::take(&mut self.dead);
        let mut lt = std::mem::take(&mut self.lt);
        let mut ranges = std::mem::take(&mut self.ranges);
        self.leaf(id).ranges_into(&mut ranges);
        let freed = lightweight_marks(&ranges, &mut lt, &mut dead);
        self.lt = lt;
        self.ranges = ranges;
        if freed > 0 {
            self.stats.gc_reclaimed += freed as u64;
            self.stats.gc_lightweight_freed += 1;
            self.stats.gc_reclaimed_lightweight += freed as u64;
            self.leaf_mut(id).compact(&dead);
        }
        self.dead = dead;
        freed > 0
    }

    fn normal_gc(&mut self, id: LeafId) {
        self.stats.gc_normal += 1;
        let cap = self.opts.leaf_capacity;
        let mut ranges = std::mem::take(&mut self.ranges);
        let mut kept = std::mem::take(&mut self.kept);
        let mut gc = std::mem::take(&mut self.gc);
        let leaf = self.leaf(id);
        leaf.ranges_into(&mut ranges);
        let dropped = normal_gc_in(&ranges, leaf.values(), None, usize::MAX, &mut gc, &mut kept);
        self.gc = gc;
        self.ranges = ranges;
        self.stats.gc_reclaimed += dropped as u64;
        #[cfg(feature = "invariants")]
        crate::invariants::check_no_covered(&kept);
        if dropped > 0 {
            self.leaf_mut(id).set_entries_from(&mut kept, cap);
        }
        kept.clear();
        self.kept = kept;
    }

    /// Workload-aware merge/resplit of `id` with its left neighbour (§5.4); the leftmost leaf pairs with its right
    /// neighbour instead. Returns the left leaf of the pair.
    fn merge_resplit(&mut self, id: LeafId) -> LeafId {
        let cap = self.opts.leaf_capacity;
        let (l, r) = match (self.leaf(id).prev, self.leaf(id).next) {
            (NIL, NIL) => {
                self.leaf_mut(id).n_frag = 0;
                return id;
            }
            (NIL, next) => (id, next),
            (prev, _) => (prev, id),
        };
        self.normal_gc(l);
        self.normal_gc(r);
        let boundary = self.leaf(r).anchor;
        let left = self.leaf_mut(l).take_entries();
        let right = self.leaf_mut(r).take_entries();
        let (merged, joined) = merge_arrays(left, right, boundary);
        self.stats.ranges_merged += joined;
        let anchor = self.leaf(l).anchor;
        let pieces = if merged.len() <= cap {
            self.stats.merges += 1;
            vec![(anchor, merged)]
        } else {
            self.stats.resplits += 1;
            let splits = self.stats.splits;
            let mut pieces = Vec::with_capacity(2);
            split_entries(merged, anchor, cap, &mut self.stats, &mut pieces);
            // A resplit is counted as such, not as a split.
            self.stats.splits = splits;
            pieces
        };
        self.install(l, Some(r), pieces);
        self.check();
        l
    }

    /// Makes `pieces` (block order, first anchored at `first`'s anchor) the leaves starting at `first`, reusing
    /// `reuse` (the leaf right of `first`) for the second piece or removing it if there is none.
    fn install(&mut self, first: LeafId, reuse: Option<LeafId>, pieces: Vec<(u64, Vec<(BlockRange, V)>)>) {
        let cap = self.opts.leaf_capacity;
        let mut prev = first;
        for (k, (anchor, entries)) in pieces.into_iter().enumerate() {
            if k == 0 {
                debug_assert_eq!(anchor, self.leaf(first).anchor);
                let l = self.leaf_mut(first);
                l.set_entries(entries, cap);
                l.n_frag = 0;
                continue;
            }
            let id = match reuse {
                Some(r) if k == 1 => {
                    let old = self.leaf(r).anchor;
                    if old != anchor {
                        self.index.remove(old);
                        self.index.insert(anchor, r);
                        // Emptied by the merge (`take_entries`); the entries arrive below.
                        self.leaf_mut(r).set_anchor(anchor);
                    }
                    r
                }
                _ => {
                    let id = self.alloc(anchor);
                    let next = self.leaf(prev).next;
                    self.leaf_mut(id).prev = prev;
                    self.leaf_mut(id).next = next;
                    if next != NIL {
                        self.leaf_mut(next).prev = id;
                    }
                    self.leaf_mut(prev).next = id;
                    self.index.insert(anchor, id);
                    id
                }
            };
            let l = self.leaf_mut(id);
            l.set_entries(entries, cap);
            l.n_frag = 0;
            prev = id;
        }
        // Cached space ends: every leaf of the chain, its right neighbour's is unchanged.
        let mut id = first;
        loop {
            self.refresh_end(id);
            if id == prev {
                break;
            }
            id = self.leaf(id).next;
        }
        if let Some(r) = reuse
            && prev == first
        {
            // Merged: the right leaf goes away.
            let (rp, rn, anchor) = {
                let l = self.leaf(r);
                (l.prev, l.next, l.anchor)
            };
            self.leaf_mut(rp).next = rn;
            if rn != NIL {
                self.leaf_mut(rn).prev = rp;
            }
            self.index.remove(anchor);
            self.leaves[r as usize / CHUNK][r as usize % CHUNK] = None;
            self.free.push(r);
            self.refresh_end(rp);
        }
    }

    fn alloc(&mut self, anchor: u64) -> LeafId {
        let leaf = Leaf::new(anchor, self.opts.leaf_capacity);
        match self.free.pop() {
            Some(id) => {
                self.leaves[id as usize / CHUNK][id as usize % CHUNK] = Some(leaf);
                id
            }
            None => {
                let chunks = self.leaves.len();
                match self.leaves.last_mut() {
                    Some(c) if c.len() < CHUNK => {
                        c.push(Some(leaf));
                        ((chunks - 1) * CHUNK + c.len() - 1) as LeafId
                    }
                    _ => {
                        self.leaves.push(new_chunk(leaf));
                        (chunks * CHUNK) as LeafId
                    }
                }
            }
        }
    }

    #[inline]
    fn check(&self) {
        #[cfg(feature = "invariants")]
        if let Err(e) = self.check_invariants() {
            #[allow(clippy::panic)]
            {
                panic!("RASK invariant violated: {e}");
            }
        }
    }

    /// Checks the whole structure: leaves linked both ways in anchor order starting at anchor 0, every anchor in
    /// the internal index pointing at its leaf and nothing else there, every entry inside its leaf's range space,
    /// no leaf over capacity. Returns a description of the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut id = self.head;
        let mut prev = NIL;
        let mut count = 0usize;
        if self.leaf(id).anchor != 0 {
            return Err("leftmost leaf does not anchor at 0".into());
        }
        while id != NIL {
            let l = self.leaf(id);
            count += 1;
            if l.prev != prev {
                return Err(format!("leaf {id} prev link {} != {prev}", l.prev));
            }
            if self.index.get(l.anchor) != Some(id) {
                return Err(format!("anchor {} of leaf {id} not indexed", l.anchor));
            }
            let end = if l.next == NIL { u64::MAX } else { self.leaf(l.next).anchor - 1 };
            if l.end != end {
                return Err(format!("leaf {id} caches space end {} != {end}", l.end));
            }
            if l.next != NIL && self.leaf(l.next).anchor <= l.anchor {
                return Err(format!("anchors out of order at leaf {id}"));
            }
            if l.len() > self.opts.leaf_capacity {
                return Err(format!("leaf {id} holds {} > capacity", l.len()));
            }
            for r in (0..l.len()).map(|i| l.range(i)) {
                if r.first() < l.anchor || r.last() > end {
                    return Err(format!("entry {r:?} outside space [{}, {end}] of leaf {id}", l.anchor));
                }
            }
            prev = id;
            id = l.next;
        }
        if count != self.index.len() {
            return Err(format!("{count} linked leaves but {} indexed anchors", self.index.len()));
        }
        Ok(())
    }
}

/// Leaves per arena chunk.
const CHUNK: usize = 64;

fn new_chunk<V>(first: Leaf<V>) -> Vec<Option<Leaf<V>>> {
    let mut c = Vec::with_capacity(CHUNK);
    c.push(Some(first));
    c
}

#[cold]
fn unreachable_leaf(id: LeafId) -> ! {
    // Leaf ids come only from links and the internal index, which the invariants keep pointing at live leaves.
    #[allow(clippy::panic)]
    {
        panic!("RASK: dangling leaf id {id}")
    }
}

/// Iterator over live mapping pieces in block order (see [`Rask::iter`]).
pub struct Iter<'a, V, I> {
    rask: &'a Rask<V, I>,
    leaf: LeafId,
    buf: Vec<(BlockRange, V)>,
    pos: usize,
    unfound: UnfoundList,
}

impl<V, I> std::fmt::Debug for Iter<'_, V, I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Iter")
            .field("leaf", &self.leaf)
            .field("buffered", &(self.buf.len() - self.pos))
            .finish_non_exhaustive()
    }
}

impl<V: RangeValue, I: InternalIndex<LeafId>> Iterator for Iter<'_, V, I> {
    type Item = (BlockRange, V);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.pos < self.buf.len() {
                self.pos += 1;
                return Some(self.buf[self.pos - 1].clone());
            }
            if self.leaf == NIL {
                return None;
            }
            let l = self.rask.leaf(self.leaf);
            self.unfound.reset(BlockRange::raw(l.anchor, self.rask.space_end(self.leaf)));
            self.buf.clear();
            self.pos = 0;
            ablation_search_leaf(l, &mut self.unfound, &mut self.buf);
            self.buf.sort_unstable_by_key(|(r, _)| r.first());
            self.leaf = l.next;
        }
    }
}
