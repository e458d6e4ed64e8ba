//! Checks run under the `invariants` feature.

use crate::{BlockRange, RangeValue};

/// After a normal GC: no entry is covered by the union of newer ones, and no tombstone remains.
pub(crate) fn check_no_covered<V: RangeValue>(kept: &[(BlockRange, V)]) {
    let mut newer: Vec<BlockRange> = Vec::new();
    for (r, v) in kept.iter().rev() {
        assert!(!v.is_tombstone(), "tombstone {r:?} survived normal GC");
        newer.sort_unstable();
        // Walk r's blocks through the sorted newer ranges; r is covered if the walk passes its end.
        let mut next = r.first();
        let mut covered = false;
        for s in &newer {
            if s.first() > next {
                break;
            }
            if s.last() >= next {
                if s.last() >= r.last() {
                    covered = true;
                    break;
                }
                next = s.last() + 1;
            }
        }
        assert!(!covered, "entry {r:?} fully covered by newer entries survived normal GC");
        newer.push(*r);
    }
}
