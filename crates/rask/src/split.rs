//! Range-conscious split (§5.3).
//!
//! A split point `P` sends blocks `< P` to the left leaf and `>= P` to the right one (which gets anchor `P`);
//! entries across `P` are divided with `RangeValue::divide`. RASK chooses `P` to avoid dividing any entry:
//!
//! 1. The candidates are the left bounds of the NonOverlap List's segments except the first: no entry spans a
//!    segment boundary, so no entry is divided. Among them, the one that best balances the entry counts (known per
//!    segment from GC) wins.
//! 2. When the list has a single segment, `P` comes from the entries' boundaries: the multiset of left bounds
//!    and (right bound + 1)s, of even size. `P` is one of the two medians that is neither the smallest nor the
//!    largest boundary (either would leave a side empty); if both qualify, the smaller. If neither does (heavy
//!    duplication), the boundary strictly inside that is nearest the median.
//!
//! A median split may divide entries, and a side may then still hold more than a leaf's capacity; it is split
//! again (the paper's "second split"). [`split_entries`] does this recursively and GCs each side first, since a
//! divided piece can be fully covered on its side. It terminates: each side has strictly fewer distinct
//! boundaries than its parent, and a list whose entries survive normal GC with at most two distinct boundaries
//! is a single entry.

use crate::gc::normal_gc;
use crate::nonoverlap::NonOverlapList;
use crate::{BlockRange, RangeValue, Stats};

/// Entries of one leaf, oldest first.
pub type Entries<V> = Vec<(BlockRange, V)>;

/// A chosen split point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitPoint {
    /// First block of the right leaf (its anchor key).
    pub at: u64,
    /// Whether it came from the median fallback (it may divide entries).
    pub median: bool,
}

/// Chooses the split point for GC'd `entries` whose NonOverlap List is `nonoverlap`; `None` when every entry has
/// the same range (impossible after normal GC of more than one entry).
pub fn choose_split<V>(entries: &[(BlockRange, V)], nonoverlap: &NonOverlapList) -> Option<SplitPoint> {
    let segs = nonoverlap.segments();
    if segs.len() > 1 {
        let total: u64 = segs.iter().map(|(_, c)| u64::from(*c)).sum();
        let mut left = 0u64;
        let mut best: Option<(u64, u64)> = None;
        for (i, (seg, count)) in segs.iter().enumerate() {
            if i > 0 {
                let imbalance = (2 * left).abs_diff(total);
                if best.is_none_or(|(b, _)| imbalance < b) {
                    best = Some((imbalance, seg.first()));
                }
            }
            left += u64::from(*count);
        }
        return best.map(|(_, at)| SplitPoint { at, median: false });
    }
    let mut bounds: Vec<u64> = Vec::with_capacity(entries.len() * 2);
    for (r, _) in entries {
        bounds.push(r.first());
        if let Some(end) = r.last().checked_add(1) {
            bounds.push(end);
        }
    }
    bounds.sort_unstable();
    let (&min, &max) = (bounds.first()?, bounds.last()?);
    let n = bounds.len();
    let medians =
        if n.is_multiple_of(2) { [bounds[n / 2 - 1], bounds[n / 2]] } else { [bounds[n / 2], bounds[n / 2]] };
    if let Some(&at) = medians.iter().find(|&&m| m != min && m != max) {
        return Some(SplitPoint { at, median: true });
    }
    let mid = bounds[n / 2];
    bounds
        .iter()
        .copied()
        .filter(|&b| b != min && b != max)
        .min_by_key(|&b| b.abs_diff(mid))
        .map(|at| SplitPoint { at, median: true })
}

/// Divides `entries` (oldest first) at `at`, keeping the order on both sides. Returns (left, right, divided).
pub fn divide_at<V: RangeValue>(entries: Vec<(BlockRange, V)>, at: u64) -> (Entries<V>, Entries<V>, u64) {
    let mut left = Vec::with_capacity(entries.len());
    let mut right = Vec::with_capacity(entries.len());
    let mut divided = 0;
    for (r, v) in entries {
        if r.last() < at {
            left.push((r, v));
        } else if r.first() >= at {
            right.push((r, v));
        } else {
            let (lr, rr) = (BlockRange::raw(r.first(), at - 1), BlockRange::raw(at, r.last()));
            let (lv, rv) = if v.is_tombstone() { (v.clone(), v) } else { (v.divide(r, lr), v.divide(r, rr)) };
            left.push((lr, lv));
            right.push((rr, rv));
            divided += 1;
        }
    }
    (left, right, divided)
}

/// Splits GC'd entries (`kept` with its `nonoverlap`, from normal GC) into leaves of at most `capacity` entries,
/// without GC'ing the whole list again. Appends `(anchor, entries)` per resulting leaf, in block order.
pub fn split_gced<V: RangeValue>(
    kept: Entries<V>,
    nonoverlap: &NonOverlapList,
    anchor: u64,
    capacity: usize,
    stats: &mut Stats,
    out: &mut Vec<(u64, Entries<V>)>,
) {
    if kept.len() <= capacity {
        out.push((anchor, kept));
        return;
    }
    let Some(point) = choose_split(&kept, nonoverlap) else {
        out.push((anchor, kept));
        return;
    };
    split_at(kept, point, anchor, capacity, stats, out, 0);
}

#[allow(clippy::too_many_arguments)]
fn split_at<V: RangeValue>(
    kept: Entries<V>,
    point: SplitPoint,
    anchor: u64,
    capacity: usize,
    stats: &mut Stats,
    out: &mut Vec<(u64, Entries<V>)>,
    depth: u32,
) {
    debug_assert!(point.at > anchor);
    stats.splits += 1;
    if depth > 0 {
        stats.second_splits += 1;
    }
    if point.median {
        stats.median_splits += 1;
    }
    let (left, right, divided) = divide_at(kept, point.at);
    stats.split_divided_entries += divided;
    split_rec(left, anchor, capacity, stats, out, depth + 1);
    split_rec(right, point.at, capacity, stats, out, depth + 1);
}

/// Splits `entries` (oldest first, all within the space starting at `anchor`) into leaves of at most `capacity`
/// entries, GC'ing each list first. Appends `(anchor, entries)` per resulting leaf, in block order.
pub fn split_entries<V: RangeValue>(
    entries: Vec<(BlockRange, V)>,
    anchor: u64,
    capacity: usize,
    stats: &mut Stats,
    out: &mut Vec<(u64, Vec<(BlockRange, V)>)>,
) {
    split_rec(entries, anchor, capacity, stats, out, 0);
}

fn split_rec<V: RangeValue>(
    entries: Vec<(BlockRange, V)>,
    anchor: u64,
    capacity: usize,
    stats: &mut Stats,
    out: &mut Vec<(u64, Vec<(BlockRange, V)>)>,
    depth: u32,
) {
    if entries.len() <= capacity {
        out.push((anchor, entries));
        return;
    }
    let (ranges, values): (Vec<BlockRange>, Vec<V>) = entries.into_iter().unzip();
    let gc = normal_gc(&ranges, &values);
    stats.gc_reclaimed += gc.dropped as u64;
    if gc.kept.len() <= capacity {
        out.push((anchor, gc.kept));
        return;
    }
    let Some(point) = choose_split(&gc.kept, &gc.nonoverlap) else {
        // Unreachable after normal GC (see the module comment); keep the data rather than lose it.
        out.push((anchor, gc.kept));
        return;
    };
    split_at(gc.kept, point, anchor, capacity, stats, out, depth);
}
