//! The Unfound List of ablation-based search (§5.1).

use crate::BlockRange;

/// The parts of a search target not yet found, as an ordered list of disjoint sub-ranges.
///
/// A search starts with the target (clipped to the leaf's range space) and *ablates* it with each leaf entry,
/// newest first: the intersections are results, and are cut out of the list. Because the list is ordered, once the
/// first sub-range overlapping an entry is found, the others it overlaps follow contiguously, so one entry costs a
/// search for the first overlap plus work proportional to what it removes. The list never holds more sub-ranges
/// than entries processed plus one, so it stays tiny (a leaf holds 16 entries by default); a `Vec` beats a linked
/// list at this size, and the "O(1) removal" of the paper becomes a short `splice`.
#[derive(Clone, Debug, Default)]
pub struct UnfoundList {
    parts: Vec<BlockRange>,
}

impl UnfoundList {
    /// An empty list.
    pub fn new() -> UnfoundList {
        UnfoundList { parts: Vec::new() }
    }

    /// Restarts the list with the single sub-range `target`.
    pub fn reset(&mut self, target: BlockRange) {
        self.parts.clear();
        self.parts.push(target);
    }

    /// Replaces the list with `parts`. REQUIRES: ordered, disjoint.
    pub fn set(&mut self, parts: &[BlockRange]) {
        self.parts.clear();
        self.parts.extend_from_slice(parts);
    }

    /// Whether everything has been found (the search may terminate early).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.parts.capacity() * size_of::<BlockRange>()
    }

    /// The unfound sub-ranges, in block order.
    pub fn parts(&self) -> &[BlockRange] {
        &self.parts
    }

    /// Cuts `r` out of the list, calling `found` with each removed intersection in block order.
    #[inline]
    pub fn ablate(&mut self, r: BlockRange, mut found: impl FnMut(BlockRange)) {
        let (Some(lo), Some(hi)) = (self.parts.first(), self.parts.last()) else { return };
        if r.last() < lo.first() || r.first() > hi.last() {
            return;
        }
        if self.parts.len() == 1 {
            // The common case (a read inside one write, or the first entries scanned): one part, cut in place.
            let p = *lo;
            let x = BlockRange::raw(p.first().max(r.first()), p.last().min(r.last()));
            found(x);
            match (p.first() < x.first(), x.last() < p.last()) {
                (false, false) => self.parts.clear(),
                (true, false) => self.parts[0] = BlockRange::raw(p.first(), x.first() - 1),
                (false, true) => self.parts[0] = BlockRange::raw(x.last() + 1, p.last()),
                (true, true) => {
                    self.parts[0] = BlockRange::raw(p.first(), x.first() - 1);
                    self.parts.push(BlockRange::raw(x.last() + 1, p.last()));
                }
            }
            return;
        }
        // Linear search for the first overlapping part: the list is a handful of elements.
        let Some(start) = self.parts.iter().position(|p| p.last() >= r.first()) else { return };
        let mut end = start;
        let mut rest: [Option<BlockRange>; 2] = [None, None];
        while end < self.parts.len() && self.parts[end].first() <= r.last() {
            let p = self.parts[end];
            if let Some(x) = p.intersect(&r) {
                found(x);
                if p.first() < x.first() {
                    rest[0] = Some(BlockRange::raw(p.first(), x.first() - 1));
                }
                if p.last() > x.last() {
                    rest[1] = Some(BlockRange::raw(x.last() + 1, p.last()));
                }
            }
            end += 1;
        }
        if start == end {
            return;
        }
        self.parts.splice(start..end, rest.into_iter().flatten());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(a: u64, b: u64) -> BlockRange {
        BlockRange::new(a, b).unwrap()
    }

    #[test]
    fn ablation_cuts_middle_ends_and_spans() {
        let mut u = UnfoundList::new();
        u.reset(r(3, 15));
        let mut got = Vec::new();
        u.ablate(r(1, 6), |x| got.push(x));
        assert_eq!(got, vec![r(3, 6)]);
        assert_eq!(u.parts(), &[r(7, 15)]);
        u.ablate(r(9, 10), |x| got.push(x));
        assert_eq!(u.parts(), &[r(7, 8), r(11, 15)]);
        got.clear();
        u.ablate(r(6, 13), |x| got.push(x));
        assert_eq!(got, vec![r(7, 8), r(11, 13)]);
        assert_eq!(u.parts(), &[r(14, 15)]);
        u.ablate(r(0, 100), |_| {});
        assert!(u.is_empty());
    }
}
