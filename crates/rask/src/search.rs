//! Ablation-based search of one leaf (§5.1).

use crate::unfound::UnfoundList;
use crate::{BlockRange, RangeValue};

/// Scans a leaf's entries newest to oldest, ablating `unfound` with each one, and appends to `out` every found
/// piece that is not a tombstone (tombstoned blocks are found, hence no longer searched, but yield nothing).
/// Stops as soon as nothing is left to find (early termination). Pieces come out newest entry first; callers that
/// need block order sort them.
///
/// REQUIRES: `unfound` is within the leaf's range space.
pub fn ablation_search<V: RangeValue>(
    ranges: &[BlockRange],
    values: &[V],
    unfound: &mut UnfoundList,
    out: &mut Vec<(BlockRange, V)>,
) {
    for (r, v) in ranges.iter().zip(values).rev() {
        if unfound.is_empty() {
            return;
        }
        if v.is_tombstone() {
            unfound.ablate(*r, |_| {});
        } else {
            unfound.ablate(*r, |x| out.push((x, if x == *r { v.clone() } else { v.divide(*r, x) })));
        }
    }
}

/// The buffers of one read: the Unfound List and the pieces found, as (piece, index of the entry it came from).
/// Recording the entry index instead of a value means the search neither clones nor divides anything; the caller
/// divides a value only for a piece it hands out. Reused across reads, so a get does not allocate.
#[derive(Debug, Default)]
pub(crate) struct ReadScratch {
    pub(crate) unfound: UnfoundList,
    pub(crate) found: Vec<(BlockRange, u32)>,
}

impl ReadScratch {
    pub(crate) fn heap_bytes(&self) -> usize {
        self.unfound.heap_bytes() + self.found.capacity() * size_of::<(BlockRange, u32)>()
    }
}

/// [`ablation_search`] over `n` entries given by accessors, appending `(piece, entry index)` for every found
/// piece that is not a tombstone. Same order and early termination.
///
/// REQUIRES: `unfound` is within the leaf's range space; `n <= u32::MAX`.
#[inline]
pub(crate) fn ablation_search_idx(
    n: usize,
    range: impl Fn(usize) -> BlockRange,
    tomb: impl Fn(usize) -> bool,
    unfound: &mut UnfoundList,
    found: &mut Vec<(BlockRange, u32)>,
) {
    for i in (0..n).rev() {
        if unfound.is_empty() {
            return;
        }
        let r = range(i);
        if tomb(i) {
            unfound.ablate(r, |_| {});
        } else {
            unfound.ablate(r, |x| found.push((x, i as u32)));
        }
    }
}

/// [`ablation_search`] over a leaf of the single-threaded index, decoding its range array as it scans.
pub(crate) fn ablation_search_leaf<V: RangeValue>(
    leaf: &crate::leaf::Leaf<V>,
    unfound: &mut UnfoundList,
    out: &mut Vec<(BlockRange, V)>,
) {
    for i in (0..leaf.len()).rev() {
        if unfound.is_empty() {
            return;
        }
        let r = leaf.range(i);
        let v = leaf.value(i);
        if v.is_tombstone() {
            unfound.ablate(r, |_| {});
        } else {
            unfound.ablate(r, |x| out.push((x, if x == r { v.clone() } else { v.divide(r, x) })));
        }
    }
}
