//! The ordered lists normal GC keeps (§5.2): the NonOverlap List and the deleted list.

use crate::BlockRange;

/// The union of the ranges a reverse scan has processed, kept as ordered, pairwise non-overlapping segments,
/// each with the number of surviving entries it absorbed.
///
/// Normal GC asks "is this older range inside one segment?" (then it is fully covered by newer data and is
/// dropped), and otherwise unions the range into the list. Segments that merely touch (`[1, 3]`, `[4, 6]`) stay
/// separate: a split point at a segment's left bound then cuts no range, which is what range-conscious split
/// (§5.3) takes its candidates from, and the per-segment counts let it balance the two leaves without another
/// pass. Lookups are binary searches rather than the paper's linear scan; the list is ordered either way.
#[derive(Clone, Debug, Default)]
pub struct NonOverlapList {
    segs: Vec<(BlockRange, u32)>,
}

impl NonOverlapList {
    /// An empty list.
    pub fn new() -> NonOverlapList {
        NonOverlapList { segs: Vec::new() }
    }

    /// Empties the list, keeping its allocation.
    pub fn clear(&mut self) {
        self.segs.clear();
    }

    /// Whether the union contains all of `r`. Usually one segment does; segments that touch are walked too,
    /// since they are kept apart only for split candidates (the paper's single-segment test misses an entry
    /// covered by two touching segments, e.g. `[2, 5]` under `[1, 3]` and `[4, 6]`).
    #[inline]
    pub fn covers(&self, r: &BlockRange) -> bool {
        self.covers_from(self.first_reaching(r), r)
    }

    /// The index of the first segment that reaches `r`'s first block: the one holding it, or the first one
    /// right of it (or the list's length).
    #[inline]
    fn first_reaching(&self, r: &BlockRange) -> usize {
        self.segs.partition_point(|(s, _)| s.last() < r.first())
    }

    /// [`NonOverlapList::covers`] given `start = first_reaching(r)`.
    #[inline]
    fn covers_from(&self, start: usize, r: &BlockRange) -> bool {
        let Some((first, _)) = self.segs.get(start).filter(|(s, _)| s.first() <= r.first()) else {
            return false;
        };
        let mut end = first.last();
        for (s, _) in &self.segs[start + 1..] {
            if end >= r.last() || s.first() != end + 1 {
                break;
            }
            end = s.last();
        }
        end >= r.last()
    }

    /// Unions `r` into the list, adding `count` surviving entries to the resulting segment.
    pub fn add(&mut self, r: BlockRange, count: u32) {
        let start = self.first_reaching(&r);
        let end = self.segs.partition_point(|(s, _)| s.first() <= r.last());
        self.union_at(start, end, r, count);
    }

    /// `covers(r)`, and when it does not, `add(r, count)`: normal GC's step for every entry, with one search
    /// of the list instead of three. Returns whether `r` was covered (the list is then unchanged).
    pub fn cover_or_add(&mut self, r: BlockRange, count: u32) -> bool {
        let start = self.first_reaching(&r);
        if self.covers_from(start, &r) {
            return true;
        }
        // Segments overlapping `r` are few (usually none or one): walk to the first one past it.
        let mut end = start;
        while end < self.segs.len() && self.segs[end].0.first() <= r.last() {
            end += 1;
        }
        self.union_at(start, end, r, count);
        false
    }

    /// Replaces segments `start..end` (those overlapping `r`) and `r` by their union.
    fn union_at(&mut self, start: usize, end: usize, r: BlockRange, count: u32) {
        if start == end {
            self.segs.insert(start, (r, count));
            return;
        }
        let first = r.first().min(self.segs[start].0.first());
        let last = r.last().max(self.segs[end - 1].0.last());
        let total = self.segs[start..end].iter().map(|(_, c)| *c).sum::<u32>() + count;
        // Usually one segment absorbs `r`: overwrite it in place rather than splice.
        self.segs[start] = (BlockRange::raw(first, last), total);
        if end > start + 1 {
            self.segs.drain(start + 1..end);
        }
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.segs.capacity() * size_of::<(BlockRange, u32)>()
    }

    /// The segments in block order with their entry counts.
    pub fn segments(&self) -> &[(BlockRange, u32)] {
        &self.segs
    }
}

/// The union of the tombstoned ranges a normal GC has passed, as ordered disjoint segments. Older entries lose
/// their blocks inside it, which is how tombstones are physically removed without resurrecting older data.
#[derive(Clone, Debug, Default)]
pub struct DeletedList {
    segs: Vec<BlockRange>,
}

impl DeletedList {
    /// An empty list.
    pub fn new() -> DeletedList {
        DeletedList { segs: Vec::new() }
    }

    /// Empties the list, keeping its allocation.
    pub fn clear(&mut self) {
        self.segs.clear();
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.segs.capacity() * size_of::<BlockRange>()
    }

    /// Whether no tombstone has been seen.
    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// Unions `r` into the list (touching segments coalesce).
    pub fn add(&mut self, r: BlockRange) {
        let start = self.segs.partition_point(|s| s.last() < r.first().saturating_sub(1));
        let end = self.segs.partition_point(|s| s.first() <= r.last().saturating_add(1));
        if start == end {
            self.segs.insert(start, r);
            return;
        }
        let first = r.first().min(self.segs[start].first());
        let last = r.last().max(self.segs[end - 1].last());
        self.segs.splice(start..end, [BlockRange::raw(first, last)]);
    }

    /// Appends to `out` the parts of `r` outside the list, in block order.
    pub fn subtract(&self, r: BlockRange, out: &mut Vec<BlockRange>) {
        let mut next = r.first();
        let start = self.segs.partition_point(|s| s.last() < r.first());
        for s in &self.segs[start..] {
            if s.first() > r.last() {
                break;
            }
            if s.first() > next {
                out.push(BlockRange::raw(next, s.first() - 1));
            }
            if s.last() >= r.last() {
                return;
            }
            next = s.last() + 1;
        }
        out.push(BlockRange::raw(next, r.last()));
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn r(a: u64, b: u64) -> BlockRange {
        BlockRange::new(a, b).unwrap()
    }

    #[test]
    fn nonoverlap_unions_overlaps_but_keeps_touching_segments() {
        let mut n = NonOverlapList::new();
        n.add(r(9, 10), 1);
        n.add(r(4, 7), 1);
        n.add(r(4, 9), 1);
        assert_eq!(n.segments(), &[(r(4, 10), 3)]);
        assert!(n.covers(&r(5, 7)));
        n.add(r(11, 12), 1);
        assert_eq!(n.segments(), &[(r(4, 10), 3), (r(11, 12), 1)]);
        assert!(n.covers(&r(10, 11)));
        assert!(!n.covers(&r(10, 13)));
        assert!(!n.covers(&r(3, 5)));
    }

    /// `cover_or_add` is `covers` followed, when false, by `add`, on random lists with touching and
    /// overlapping segments.
    #[test]
    fn cover_or_add_matches_covers_then_add() {
        let mut rng = SmallRng::seed_from_u64(0x9E37_79B9_7F4A_7C15);
        let mut next = |m: u64| rng.random_range(0..m);
        for _ in 0..2000 {
            let (mut a, mut b) = (NonOverlapList::new(), NonOverlapList::new());
            for _ in 0..next(24) {
                let first = next(64);
                let x = r(first, first + next(8));
                let count = next(3) as u32;
                let covered = a.covers(&x);
                if !covered {
                    a.add(x, count);
                }
                assert_eq!(b.cover_or_add(x, count), covered, "{x:?} on {:?}", a.segments());
                assert_eq!(a.segments(), b.segments());
            }
        }
        let mut top = NonOverlapList::new();
        assert!(!top.cover_or_add(r(u64::MAX - 3, u64::MAX), 1));
        assert!(top.cover_or_add(r(u64::MAX, u64::MAX), 1));
        assert!(!top.cover_or_add(r(u64::MAX - 5, u64::MAX), 1));
        assert_eq!(top.segments(), &[(r(u64::MAX - 5, u64::MAX), 2)]);
    }

    #[test]
    fn deleted_list_subtracts() {
        let mut d = DeletedList::new();
        d.add(r(4, 5));
        d.add(r(8, 8));
        d.add(r(6, 6));
        let mut out = Vec::new();
        d.subtract(r(1, 10), &mut out);
        assert_eq!(out, vec![r(1, 3), r(7, 7), r(9, 10)]);
        out.clear();
        d.subtract(r(4, 6), &mut out);
        assert!(out.is_empty());
        d.subtract(r(0, u64::MAX), &mut out);
        assert_eq!(out, vec![r(0, 3), r(7, 7), r(9, u64::MAX)]);
    }
}
