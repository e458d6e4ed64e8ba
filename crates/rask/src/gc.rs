//! Two-stage garbage collection of a log-structured leaf (§5.2).
//!
//! A leaf only appends, so older entries pile up under newer ones. When a leaf is full, GC removes entries whose
//! every block is covered by newer entries:
//!
//! 1. **Lightweight GC** scans newest to oldest with the *LT Map* (left bound → largest right bound seen) and drops
//!    an entry when a newer entry with the same left bound reaches at least as far. No ordered search at all; in
//!    the paper's traces this alone finds 73.8 % of the reclaimable entries.
//! 2. **Normal GC**, run only when lightweight GC freed nothing, scans newest to oldest keeping the union of the
//!    ranges seen (the [`NonOverlapList`]); an entry inside one segment is covered by the union of newer ranges and
//!    is dropped. Tombstones are removed here: their ranges go into the [`DeletedList`], every older entry loses
//!    its blocks inside that list first (possibly splitting into pieces, all kept at the entry's position), and the
//!    tombstone itself is dropped. After normal GC no entry is fully covered and no tombstone remains.
//!
//! Surviving entries keep their relative order (newest-wins depends on it).

use crate::nonoverlap::{DeletedList, NonOverlapList};
use crate::{BlockRange, RangeValue};

/// The LT Map of lightweight GC: an open-addressing hash table from left bound to the largest right bound of a
/// newer entry with that left bound. Sized to a power of two at least twice the entries, so probes are short;
/// the allocation is reused across GCs.
#[derive(Debug, Default)]
pub struct LtMap {
    slots: Vec<(u64, u64)>,
    used: Vec<bool>,
}

impl LtMap {
    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * size_of::<(u64, u64)>() + self.used.capacity()
    }

    fn reset(&mut self, entries: usize) {
        let n = (entries * 2).next_power_of_two().max(4);
        self.slots.clear();
        self.slots.resize(n, (0, 0));
        self.used.clear();
        self.used.resize(n, false);
    }

    #[inline]
    fn slot(&self, key: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask;
        while self.used[i] && self.slots[i].0 != key {
            i = (i + 1) & mask;
        }
        i
    }

    /// Whether a newer entry with `r`'s left bound covers `r`; otherwise records `r`.
    #[inline]
    fn covered_or_record(&mut self, r: &BlockRange) -> bool {
        let i = self.slot(r.first());
        if self.used[i] {
            if r.last() <= self.slots[i].1 {
                return true;
            }
            self.slots[i].1 = r.last();
        } else {
            self.used[i] = true;
            self.slots[i] = (r.first(), r.last());
        }
        false
    }
}

/// Lightweight GC over a leaf's range array: sets `dead[i]` for every entry covered by a newer entry with the same
/// left bound and returns how many it marked.
pub fn lightweight_marks(ranges: &[BlockRange], lt: &mut LtMap, dead: &mut Vec<bool>) -> usize {
    dead.clear();
    dead.resize(ranges.len(), false);
    if ranges.len() <= LT_SCAN_MAX {
        return lightweight_marks_by_scan(ranges, dead);
    }
    lt.reset(ranges.len());
    let mut n = 0;
    for (i, r) in ranges.iter().enumerate().rev() {
        if lt.covered_or_record(r) {
            dead[i] = true;
            n += 1;
        }
    }
    n
}

/// Leaves up to this many entries answer the LT Map's question by scanning the newer entries instead of hashing.
/// At the default capacity (16) the scan is ~120 pairwise comparisons with no table to clear or probe, cheaper
/// than the hash table at that size; larger leaves keep the paper's map, whose cost grows linearly.
const LT_SCAN_MAX: usize = 32;

/// [`lightweight_marks`] for small leaves: the same rule (an entry is dead when a newer entry has its left bound
/// and reaches at least as far), found by comparing against every newer entry. REQUIRES: `dead` has one
/// `false` per range.
fn lightweight_marks_by_scan(ranges: &[BlockRange], dead: &mut [bool]) -> usize {
    let mut n = 0;
    for (i, r) in ranges.iter().enumerate() {
        let covered =
            ranges[i + 1..].iter().fold(false, |c, s| c | (s.first() == r.first() && s.last() >= r.last()));
        dead[i] = covered;
        n += covered as usize;
    }
    n
}

/// The result of a normal GC.
#[derive(Debug)]
pub struct NormalGc<V> {
    /// Surviving entries (or pieces of entries), oldest first.
    pub kept: Vec<(BlockRange, V)>,
    /// The union of all ranges processed, with surviving entry counts per segment (input to split).
    pub nonoverlap: NonOverlapList,
    /// Entries and pieces dropped (covered ranges and tombstones).
    pub dropped: usize,
}

/// Normal GC over a leaf's entries (oldest first). See the module comment.
pub fn normal_gc<V: RangeValue>(ranges: &[BlockRange], values: &[V]) -> NormalGc<V> {
    normal_gc_with(ranges, values, None)
}

/// Normal GC over a leaf's entries followed by `newest`, an entry about to be appended: the put path runs the
/// second GC stage with the incoming entry included, so its result can feed a split directly.
pub fn normal_gc_with<V: RangeValue>(
    ranges: &[BlockRange],
    values: &[V],
    newest: Option<(BlockRange, V)>,
) -> NormalGc<V> {
    let mut scratch = GcScratch::default();
    let mut kept = Vec::with_capacity(ranges.len() + 1);
    let dropped = normal_gc_in(ranges, values, newest, 0, &mut scratch, &mut kept);
    NormalGc { kept, nonoverlap: scratch.nonoverlap, dropped }
}

/// The lists a normal GC builds, kept by the index between GCs so a GC does not allocate.
#[derive(Debug, Default)]
pub(crate) struct GcScratch {
    /// After [`normal_gc_in`]: the NonOverlap List of the pass (input to split).
    pub(crate) nonoverlap: NonOverlapList,
    deleted: DeletedList,
    pieces: Vec<BlockRange>,
}

impl GcScratch {
    pub(crate) fn heap_bytes(&self) -> usize {
        self.nonoverlap.heap_bytes()
            + self.deleted.heap_bytes()
            + self.pieces.capacity() * size_of::<BlockRange>()
    }
}

/// [`normal_gc_with`] into caller-owned buffers: `kept` (cleared first) receives the surviving entries oldest
/// first. Returns the number of entries and pieces dropped. `scratch.nonoverlap` holds the pass's NonOverlap List
/// whenever more than `list_above` entries survive (the split that follows needs it); otherwise it may be stale.
///
/// Most leaves' entries span a few dozen blocks and hold no tombstone; their GC marks covered blocks in a bitmap
/// ([`normal_gc_by_bitmap`]) instead of keeping the list, and the list is built only when the result overflows.
pub(crate) fn normal_gc_in<V: RangeValue>(
    ranges: &[BlockRange],
    values: &[V],
    newest: Option<(BlockRange, V)>,
    list_above: usize,
    scratch: &mut GcScratch,
    kept: &mut Vec<(BlockRange, V)>,
) -> usize {
    if let Some(dropped) = normal_gc_by_bitmap(ranges, values, newest.as_ref(), kept)
        && kept.len() <= list_above
    {
        return dropped;
    }
    normal_gc_by_list(ranges, values, newest.as_ref(), scratch, kept)
}

/// Blocks a [`normal_gc_by_bitmap`] bitmap covers.
const BITMAP_BLOCKS: u64 = 64 * 64;

/// Normal GC with the union of newer ranges kept as a bitmap over the entries' span: an entry is dropped when
/// every one of its bits is set (covered by the union of newer entries, the list's test), otherwise its bits are
/// set. `None` (nothing done) when the span exceeds [`BITMAP_BLOCKS`] or an entry is a tombstone.
fn normal_gc_by_bitmap<V: RangeValue>(
    ranges: &[BlockRange],
    values: &[V],
    newest: Option<&(BlockRange, V)>,
    kept: &mut Vec<(BlockRange, V)>,
) -> Option<usize> {
    let all = || newest.map(|(r, v)| (r, v)).into_iter().chain(ranges.iter().zip(values).rev());
    let (mut lo, mut hi) = (u64::MAX, 0);
    for (r, v) in all() {
        if v.is_tombstone() {
            return None;
        }
        lo = lo.min(r.first());
        hi = hi.max(r.last());
    }
    kept.clear();
    if lo > hi {
        return Some(0);
    }
    if hi - lo >= BITMAP_BLOCKS {
        return None;
    }
    let mut bits = [0u64; (BITMAP_BLOCKS / 64) as usize];
    let mut dropped = 0;
    for (r, v) in all() {
        let (a, b) = ((r.first() - lo) as usize, (r.last() - lo) as usize);
        if bits_all_set(&bits, a, b) {
            dropped += 1;
        } else {
            bits_set(&mut bits, a, b);
            kept.push((*r, v.clone()));
        }
    }
    kept.reverse();
    Some(dropped)
}

/// The mask of bits `a..=b` of one word. REQUIRES: `a <= b < 64`.
#[inline]
fn word_mask(a: usize, b: usize) -> u64 {
    (u64::MAX >> (63 - b)) & (u64::MAX << a)
}

/// Whether bits `a..=b` are all set. REQUIRES: `a <= b < 64 * bits.len()`.
#[inline]
fn bits_all_set(bits: &[u64], a: usize, b: usize) -> bool {
    let (wa, wb) = (a / 64, b / 64);
    (wa..=wb).all(|w| {
        let m = word_mask(if w == wa { a % 64 } else { 0 }, if w == wb { b % 64 } else { 63 });
        bits[w] & m == m
    })
}

/// Sets bits `a..=b`. REQUIRES: `a <= b < 64 * bits.len()`.
#[inline]
fn bits_set(bits: &mut [u64], a: usize, b: usize) {
    let (wa, wb) = (a / 64, b / 64);
    for (w, word) in bits.iter_mut().enumerate().take(wb + 1).skip(wa) {
        *word |= word_mask(if w == wa { a % 64 } else { 0 }, if w == wb { b % 64 } else { 63 });
    }
}

/// Normal GC with the NonOverlap and deleted lists (the paper's procedure); see the module comment.
fn normal_gc_by_list<V: RangeValue>(
    ranges: &[BlockRange],
    values: &[V],
    newest: Option<&(BlockRange, V)>,
    scratch: &mut GcScratch,
    kept: &mut Vec<(BlockRange, V)>,
) -> usize {
    debug_assert_eq!(ranges.len(), values.len());
    let GcScratch { nonoverlap, deleted, pieces } = scratch;
    nonoverlap.clear();
    deleted.clear();
    // Built newest first, reversed at the end.
    kept.clear();
    let mut dropped = 0;
    let newest_iter = newest.map(|(r, v)| (r, v)).into_iter();
    for (r, v) in newest_iter.chain(ranges.iter().zip(values).rev()) {
        if v.is_tombstone() {
            // Physically removed; it still hides every older block it covers.
            dropped += 1;
            if !nonoverlap.cover_or_add(*r, 0) {
                deleted.add(*r);
            }
            continue;
        }
        if deleted.is_empty() {
            // The common case: no tombstone seen, the entry is kept or dropped whole.
            if nonoverlap.cover_or_add(*r, 1) {
                dropped += 1;
            } else {
                kept.push((*r, v.clone()));
            }
            continue;
        }
        pieces.clear();
        deleted.subtract(*r, pieces);
        // Pieces are pushed in reverse so `kept`, reversed at the end, lists them in block order.
        let mut any = false;
        for p in pieces.iter().rev() {
            if nonoverlap.cover_or_add(*p, 1) {
                continue;
            }
            let pv = if p == r { v.clone() } else { v.divide(*r, *p) };
            kept.push((*p, pv));
            any = true;
        }
        if !any {
            dropped += 1;
        }
    }
    kept.reverse();
    dropped
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::WriteRef;

    fn r(a: u64, b: u64) -> BlockRange {
        BlockRange::new(a, b).unwrap()
    }

    #[test]
    fn tombstone_trims_older_entries_into_pieces() {
        let ranges = [r(1, 10), r(4, 5)];
        let values = [WriteRef::new(0, 0), WriteRef::tombstone()];
        let gc = normal_gc(&ranges, &values);
        assert_eq!(gc.kept, vec![(r(1, 3), WriteRef::new(0, 0)), (r(6, 10), WriteRef::new(0, 5))]);
        assert_eq!(gc.dropped, 1);
    }

    /// Regression: the paper's "inside one NonOverlap entry" test kept [2, 5] although the newer [1, 3] and
    /// [4, 6] (separate, touching segments) cover it; found by the model test's invariant check.
    #[test]
    fn regression_entry_covered_by_touching_segments_is_dropped() {
        let ranges = [r(2, 5), r(1, 3), r(4, 6)];
        let values = [WriteRef::new(0, 0), WriteRef::new(1, 0), WriteRef::new(2, 0)];
        let gc = normal_gc(&ranges, &values);
        assert_eq!(gc.dropped, 1);
        assert_eq!(gc.kept, vec![(r(1, 3), WriteRef::new(1, 0)), (r(4, 6), WriteRef::new(2, 0))]);
        // The two segments stay apart: 4 remains a split candidate that divides nothing.
        assert_eq!(gc.nonoverlap.segments(), &[(r(1, 3), 1), (r(4, 6), 1)]);
    }

    /// The bitmap and the list give the same survivors, in the same order, on random leaves without tombstones
    /// (overlapping, nested and touching ranges, with and without an incoming entry), and the bitmap declines
    /// leaves it cannot hold.
    #[test]
    fn bitmap_gc_matches_list_gc() {
        let mut rng = SmallRng::seed_from_u64(0x1234_5678_9ABC_DEF1);
        let mut next = |m: u64| rng.random_range(0..m);
        let mut scratch = GcScratch::default();
        let (mut by_bitmap, mut by_list) = (Vec::new(), Vec::new());
        for t in 0..3000u64 {
            let span = if t % 10 == 0 { 2 * BITMAP_BLOCKS } else { 1 + next(300) };
            let base = next(1 << 40);
            let n = next(20) as usize;
            let ranges: Vec<BlockRange> = (0..n)
                .map(|_| {
                    let a = base + next(span);
                    r(a, a + next(span / 4 + 1))
                })
                .collect();
            let values: Vec<WriteRef> = (0..n as u64).map(|i| WriteRef::new(i, 0)).collect();
            let newest = (t % 2 == 0).then(|| (r(base + next(span), base + span), WriteRef::new(999, 0)));
            let list_dropped =
                normal_gc_by_list(&ranges, &values, newest.as_ref(), &mut scratch, &mut by_list);
            match normal_gc_by_bitmap(&ranges, &values, newest.as_ref(), &mut by_bitmap) {
                Some(d) => {
                    assert_eq!((d, &by_bitmap), (list_dropped, &by_list), "{ranges:?} + {newest:?}");
                }
                None => {
                    let lo = ranges.iter().chain(newest.iter().map(|(r, _)| r)).map(|r| r.first()).min();
                    let hi = ranges.iter().chain(newest.iter().map(|(r, _)| r)).map(|r| r.last()).max();
                    assert!(hi.unwrap() - lo.unwrap() >= BITMAP_BLOCKS, "declined a leaf it can hold");
                }
            }
        }
        // A tombstone sends the GC to the lists.
        let ranges = [r(1, 10), r(4, 5)];
        let values = [WriteRef::new(0, 0), WriteRef::tombstone()];
        assert!(normal_gc_by_bitmap(&ranges, &values, None, &mut by_bitmap).is_none());
    }

    /// The scan used for small leaves and the LT Map mark the same entries (ranges with few distinct left
    /// bounds, so many entries share one).
    #[test]
    fn lightweight_scan_matches_lt_map() {
        let mut rng = SmallRng::seed_from_u64(0x2545_F491_4F6C_DD1D);
        let mut next = |m: u64| rng.random_range(0..m);
        let mut lt = LtMap::default();
        for _ in 0..2000 {
            let ranges: Vec<BlockRange> = (0..=next(LT_SCAN_MAX as u64))
                .map(|_| {
                    let first = next(6);
                    r(first, first + next(6))
                })
                .collect();
            let mut by_scan = vec![false; ranges.len()];
            let n_scan = lightweight_marks_by_scan(&ranges, &mut by_scan);
            // The map path, forced.
            lt.reset(ranges.len());
            let by_map: Vec<bool> = ranges.iter().rev().map(|x| lt.covered_or_record(x)).collect::<Vec<_>>();
            let by_map: Vec<bool> = by_map.into_iter().rev().collect();
            assert_eq!(by_scan, by_map, "{ranges:?}");
            assert_eq!(n_scan, by_map.iter().filter(|d| **d).count());
        }
    }

    #[test]
    fn lightweight_marks_same_left_bound_only() {
        let ranges = [r(1, 5), r(1, 7), r(2, 3), r(1, 6)];
        let mut lt = LtMap::default();
        let mut dead = Vec::new();
        assert_eq!(lightweight_marks(&ranges, &mut lt, &mut dead), 1);
        assert_eq!(dead, vec![true, false, false, false]);
    }
}
