//! Building the merged array of workload-aware merge/resplit (§5.4).

use crate::{BlockRange, RangeValue};

/// Concatenates the entries of two neighbouring leaves (each oldest first; `boundary` is the right leaf's anchor)
/// into one array, joining pairs that come from the same user write through [`RangeValue::merge`]. Returns the
/// array and how many pairs were joined.
///
/// Entries of different leaves never overlap, so any interleaving that keeps each leaf's own order is a valid
/// log. A joined entry must sit after every entry older than either half and before every entry newer than
/// either half; emitting `left[..i]`, `right[..j]`, the joined entry, then the rest does that. Joined pairs must
/// therefore be increasing in both positions, which the greedy matching below guarantees.
pub fn merge_arrays<V: RangeValue>(
    left: Vec<(BlockRange, V)>,
    right: Vec<(BlockRange, V)>,
    boundary: u64,
) -> (Vec<(BlockRange, V)>, u64) {
    let mut pairs: Vec<(usize, usize, V)> = Vec::new();
    if let Some(edge) = boundary.checked_sub(1) {
        let mut next_i = 0;
        for (j, (rb, vb)) in right.iter().enumerate() {
            if rb.first() != boundary || vb.is_tombstone() {
                continue;
            }
            let hit = left.iter().enumerate().skip(next_i).find_map(|(i, (ra, va))| {
                if ra.last() != edge || va.is_tombstone() {
                    return None;
                }
                V::merge(*ra, va, *rb, vb).map(|m| (i, m))
            });
            if let Some((i, m)) = hit {
                pairs.push((i, j, m));
                next_i = i + 1;
            }
        }
    }
    if pairs.is_empty() {
        let mut all = left;
        all.extend(right);
        return (all, 0);
    }
    let joined = pairs.len() as u64;
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut li = left.into_iter().enumerate().peekable();
    let mut ri = right.into_iter().enumerate().peekable();
    for (i, j, m) in pairs {
        let mut lr = None;
        while let Some((k, e)) = li.next_if(|(k, _)| *k <= i) {
            if k == i {
                lr = Some(e.0);
            } else {
                out.push(e);
            }
        }
        let mut rr = None;
        while let Some((k, e)) = ri.next_if(|(k, _)| *k <= j) {
            if k == j {
                rr = Some(e.0);
            } else {
                out.push(e);
            }
        }
        if let (Some(a), Some(b)) = (lr, rr) {
            out.push((BlockRange::raw(a.first(), b.last()), m));
        }
    }
    out.extend(li.map(|(_, e)| e));
    out.extend(ri.map(|(_, e)| e));
    (out, joined)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WriteRef;

    fn r(a: u64, b: u64) -> BlockRange {
        BlockRange::new(a, b).unwrap()
    }

    #[test]
    fn joins_pieces_of_one_write_keeping_relative_order() {
        // Left leaf [0, 6], right leaf from 7. Write 5 was divided into [6, 6] and [7, 8].
        let left = vec![
            (r(5, 6), WriteRef::new(1, 0)),
            (r(6, 6), WriteRef::new(5, 0)),
            (r(6, 6), WriteRef::new(6, 0)),
        ];
        let right = vec![
            (r(7, 8), WriteRef::new(2, 0)),
            (r(7, 8), WriteRef::new(5, 1)),
            (r(8, 8), WriteRef::new(7, 0)),
        ];
        let (m, n) = merge_arrays(left, right, 7);
        assert_eq!(n, 1);
        assert_eq!(
            m,
            vec![
                (r(5, 6), WriteRef::new(1, 0)),
                (r(7, 8), WriteRef::new(2, 0)),
                (r(6, 8), WriteRef::new(5, 0)),
                (r(6, 6), WriteRef::new(6, 0)),
                (r(8, 8), WriteRef::new(7, 0)),
            ]
        );
    }
}
