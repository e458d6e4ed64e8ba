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
