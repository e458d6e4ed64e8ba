//! The range indexes RASK is compared with, all behind [`RangeIndex`].
//!
//! Every index maps blocks to `WriteRef { write, offset }` with newest-wins semantics and answers a get with the
//! pieces covering the range, so each does the same work per operation.
//!
//! - `btreemap-per-block`: one entry per block, the per-block index cloud block stores replace (§1).
//! - `btreemap-eager` (§3.4 "Eager"): ranges keyed by left bound; a write first trims or removes every overlapping
//!   range, so the map holds exactly the visible pieces.
//! - `btreemap-lazy` (§3.4 "Lazy"): ranges keyed by (left bound, sequence); a write only removes ranges it fully
//!   covers; a read collects every intersecting range and keeps the newest per block.
//! - `rangemap`: the `rangemap` crate's `RangeInclusiveMap`, which splits and coalesces like Eager. It cannot
//!   divide values, so it stores the write's origin block (`first - offset`) and rebuilds offsets on reads.
//! - `interval-tree`: an augmented treap of every range ever written, covered ones included (the paper's interval/
//!   segment tree baseline); a read resolves the newest range per block.
//!
//! No peer allocates per operation beyond what its map needs: scratch buffers are fields, reused like RASK's (an
//! earlier version allocated a fresh Unfound List per Lazy/interval-tree read and a key vector per Eager write,
//! which slowed those peers for no reason of their design).

use std::collections::BTreeMap;

use rask::internal::InternalIndex;
use rask::{BlockRange, LeafHandle, RangeValue, Rask, WriteRef};

/// A range index under test. `get` returns the number of pieces found (so the work cannot be optimised away).
pub trait RangeIndex {
    fn put(&mut self, r: BlockRange, v: WriteRef);
    fn get(&mut self, r: BlockRange) -> usize;
    /// A one-line description of the final structure, for the report's notes.
    fn summary(&self) -> Option<String> {
        None
    }
}

impl<I: InternalIndex<LeafHandle>> RangeIndex for Rask<WriteRef, I> {
    fn put(&mut self, r: BlockRange, v: WriteRef) {
        Rask::put(self, r, v);
    }
    fn get(&mut self, r: BlockRange) -> usize {
        let mut n = 0;
        self.get_with(r, |_, _| n += 1);
        n
    }
    fn summary(&self) -> Option<String> {
        let s = self.stats();
        Some(format!(
            "{} leaves, {} stored entries, {} live pieces; GC lightweight {} (freed in {}) normal {} reclaimed {} \
             (by lightweight {}); splits {} \
             (median {}, second {}); merges {} resplits {} joined {}; fragmented inserts {}",
            self.leaf_count(),
            self.entry_count(),
            self.len(),
            s.gc_lightweight,
            s.gc_lightweight_freed,
            s.gc_normal,
            s.gc_reclaimed,
            s.gc_reclaimed_lightweight,
            s.splits,
            s.median_splits,
            s.second_splits,
            s.merges,
            s.resplits,
            s.ranges_merged,
            s.fragmented_inserts
        ))
    }
}

#[derive(Default)]
pub struct PerBlock(BTreeMap<u64, WriteRef>);

impl RangeIndex for PerBlock {
    fn put(&mut self, r: BlockRange, v: WriteRef) {
        for (i, b) in (r.first()..=r.last()).enumerate() {
            self.0.insert(b, WriteRef::new(v.write, v.offset + i as u64));
        }
    }
    fn get(&mut self, r: BlockRange) -> usize {
        self.0.range(r.first()..=r.last()).count()
    }
}

/// Eager: the map holds disjoint visible pieces keyed by first block: (last, value).
#[derive(Default)]
pub struct Eager(BTreeMap<u64, (u64, WriteRef)>);

impl RangeIndex for Eager {
    fn put(&mut self, r: BlockRange, v: WriteRef) {
        // The piece starting before r may stick out on either side.
        if let Some((&f, &(l, old))) = self.0.range(..r.first()).next_back()
            && l >= r.first()
        {
            self.0.insert(f, (r.first() - 1, old));
            if l > r.last() {
                let whole = BlockRange::new(f, l).unwrap_or(r);
                let tail = BlockRange::new(r.last() + 1, l).unwrap_or(r);
                self.0.insert(r.last() + 1, (l, old.divide(whole, tail)));
            }
        }
        // Pieces starting inside r: removed, the last one's tail (if it sticks out) kept. One lookup per piece,
        // no buffer: the tail is re-inserted past r, outside the range scanned.
        while let Some((&f, &(l, old))) = self.0.range(r.first()..=r.last()).next() {
            self.0.remove(&f);
            if l > r.last() {
                let whole = BlockRange::new(f, l).unwrap_or(r);
                let tail = BlockRange::new(r.last() + 1, l).unwrap_or(r);
                self.0.insert(r.last() + 1, (l, old.divide(whole, tail)));
            }
        }
        self.0.insert(r.first(), (r.last(), v));
    }
    fn get(&mut self, r: BlockRange) -> usize {
        let mut n = 0;
        if let Some((_, &(l, _))) = self.0.range(..r.first()).next_back()
            && l >= r.first()
        {
            n += 1;
        }
        n + self.0.range(r.first()..=r.last()).count()
    }
}

/// Lazy: (first, seq) → (last, value); covered ranges removed on write, newest-per-block resolved on read.
#[derive(Default)]
pub struct Lazy {
    map: BTreeMap<(u64, u64), (u64, WriteRef)>,
    seq: u64,
    max_len: u64,
    scratch: Vec<(u64, BlockRange)>,
    covered: Vec<(u64, u64)>,
    unfound: rask::UnfoundList,
}

impl RangeIndex for Lazy {
    fn put(&mut self, r: BlockRange, v: WriteRef) {
        // Buffers are reused so neither put nor get allocates (as RASK's do not).
        self.covered.clear();
        self.covered.extend(
            self.map
                .range((r.first(), 0)..=(r.last(), u64::MAX))
                .filter(|(_, (l, _))| *l <= r.last())
                .map(|(k, _)| *k),
        );
        for k in &self.covered {
            self.map.remove(k);
        }
        self.seq += 1;
        self.max_len = self.max_len.max(r.len());
        self.map.insert((r.first(), self.seq), (r.last(), v));
    }
    fn get(&mut self, r: BlockRange) -> usize {
        let from = r.first().saturating_sub(self.max_len);
        self.scratch.clear();
        for (&(f, seq), &(l, _)) in self.map.range((from, 0)..=(r.last(), u64::MAX)) {
            if l >= r.first() {
                self.scratch.push((seq, BlockRange::new(f, l).unwrap_or(r)));
            }
        }
        // Newest first, ablating the target (the same resolution RASK does inside a leaf).
        self.scratch.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
        self.unfound.reset(r);
        let mut n = 0;
        for (_, x) in &self.scratch {
            self.unfound.ablate(*x, |_| n += 1);
            if self.unfound.is_empty() {
                break;
            }
        }
        n
    }
}

/// `rangemap::RangeInclusiveMap` storing (write, origin block).
#[derive(Default)]
pub struct RangeMapPeer(rangemap::RangeInclusiveMap<u64, (u64, u64)>);

impl RangeIndex for RangeMapPeer {
    fn put(&mut self, r: BlockRange, v: WriteRef) {
        self.0.insert(r.first()..=r.last(), (v.write, r.first().wrapping_sub(v.offset)));
    }
    fn get(&mut self, r: BlockRange) -> usize {
        self.0.overlapping(r.first()..=r.last()).count()
    }
}

/// An augmented treap (interval tree) keeping every range written.
#[derive(Default)]
pub struct IntervalTree {
    nodes: Vec<ItNode>,
    root: u32,
    seq: u64,
    rng: u64,
    scratch: Vec<(u64, BlockRange)>,
    unfound: rask::UnfoundList,
}

const NONE: u32 = u32::MAX;

struct ItNode {
    r: BlockRange,
    seq: u64,
    prio: u64,
    max_last: u64,
    left: u32,
    right: u32,
}

impl IntervalTree {
    pub fn new() -> Self {
        IntervalTree { root: NONE, rng: 0x9E37_79B9_7F4A_7C15, ..Default::default() }
    }

    fn fix(&mut self, n: u32) {
        let (l, r) = (self.nodes[n as usize].left, self.nodes[n as usize].right);
        let mut m = self.nodes[n as usize].r.last();
        for c in [l, r] {
            if c != NONE {
                m = m.max(self.nodes[c as usize].max_last);
            }
        }
        self.nodes[n as usize].max_last = m;
    }

    fn insert_at(&mut self, t: u32, n: u32) -> u32 {
        if t == NONE {
            return n;
        }
        let key = (self.nodes[n as usize].r.first(), self.nodes[n as usize].seq);
        let tk = (self.nodes[t as usize].r.first(), self.nodes[t as usize].seq);
        let root = if key < tk {
            let l = self.insert_at(self.nodes[t as usize].left, n);
            self.nodes[t as usize].left = l;
            if self.nodes[l as usize].prio > self.nodes[t as usize].prio {
                // Rotate right.
                self.nodes[t as usize].left = self.nodes[l as usize].right;
                self.fix(t);
                self.nodes[l as usize].right = t;
                l
            } else {
                t
            }
        } else {
            let r = self.insert_at(self.nodes[t as usize].right, n);
            self.nodes[t as usize].right = r;
            if self.nodes[r as usize].prio > self.nodes[t as usize].prio {
                self.nodes[t as usize].right = self.nodes[r as usize].left;
                self.fix(t);
                self.nodes[r as usize].left = t;
                r
            } else {
                t
            }
        };
        self.fix(root);
        root
    }

    fn collect(&mut self, t: u32, q: BlockRange) {
        if t == NONE {
            return;
        }
        let (left, right, r, seq, max_last) = {
            let n = &self.nodes[t as usize];
            (n.left, n.right, n.r, n.seq, n.max_last)
        };
        if max_last < q.first() {
            return;
        }
        self.collect(left, q);
        if r.first() > q.last() {
            return;
        }
        if r.last() >= q.first() {
            self.scratch.push((seq, r));
        }
        self.collect(right, q);
    }
}

impl RangeIndex for IntervalTree {
    fn put(&mut self, r: BlockRange, _v: WriteRef) {
        self.seq += 1;
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let n = self.nodes.len() as u32;
        self.nodes.push(ItNode {
            r,
            seq: self.seq,
            prio: self.rng,
            max_last: r.last(),
            left: NONE,
            right: NONE,
        });
        self.root = self.insert_at(self.root, n);
    }
    fn get(&mut self, r: BlockRange) -> usize {
        self.scratch.clear();
        self.collect(self.root, r);
        self.scratch.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
        self.unfound.reset(r);
        let mut n = 0;
        for (_, x) in &self.scratch {
            self.unfound.ablate(*x, |_| n += 1);
            if self.unfound.is_empty() {
                break;
            }
        }
        n
    }
}
