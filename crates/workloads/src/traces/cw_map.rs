//! Consecutive writes (CWs) within an observation window, and which CW last wrote each block.
//!
//! Shared by [`super::analyze`] (measuring a trace) and the synthetic generator (which must read CWs exactly as
//! the measurement will see them), so the two can never disagree on what a CW is.

use std::collections::BTreeMap;

/// Chains a window's writes into CWs: sorted by first block, a write that overlaps or touches the current CW
/// (`first <= last + 1`) joins it. Returns `(first, last, requests)` per CW in block order. Empties `writes`.
pub(crate) fn chain_window(writes: &mut Vec<(u64, u64)>) -> Vec<(u64, u64, u64)> {
    writes.sort_unstable();
    let mut out = Vec::new();
    let mut i = 0;
    while i < writes.len() {
        let (first, mut last) = writes[i];
        let mut members = 1u64;
        let mut j = i + 1;
        while j < writes.len() && writes[j].0 <= last.saturating_add(1) {
            last = last.max(writes[j].1);
            members += 1;
            j += 1;
        }
        out.push((first, last, members));
        i = j;
    }
    writes.clear();
    out
}

/// For every written block, the first block of the newest CW that covers it. Disjoint ranges keyed by first block.
#[derive(Debug, Default, Clone)]
pub(crate) struct CwMap {
    /// first block -> (last block, first block of the owning CW)
    ranges: BTreeMap<u64, (u64, u64)>,
}

impl CwMap {
    /// The first block of the CW that last wrote `block`.
    pub(crate) fn cw_start(&self, block: u64) -> Option<u64> {
        let (_, &(last, cw)) = self.ranges.range(..=block).next_back()?;
        (last >= block).then_some(cw)
    }

    /// Records that the CW `[first, last]` now owns its blocks.
    pub(crate) fn assign(&mut self, first: u64, last: u64) {
        let mut overlapping = Vec::new();
        if let Some((&s, &(e, c))) = self.ranges.range(..first).next_back()
            && e >= first
        {
            overlapping.push((s, e, c));
        }
        for (&s, &(e, c)) in self.ranges.range(first..=last) {
            overlapping.push((s, e, c));
        }
        for (s, e, c) in overlapping {
            self.ranges.remove(&s);
            if s < first {
                self.ranges.insert(s, (first - 1, c));
            }
            if e > last {
                self.ranges.insert(last + 1, (e, c));
            }
        }
        self.ranges.insert(first, (last, first));
        #[cfg(any(test, feature = "invariants"))]
        self.check_around(first);
    }

    /// Around the range just assigned at `first`: it and its neighbours are well formed, disjoint and ordered, and
    /// each CW start lies at or before the blocks it owns. Local (O(log n)), so it can run after every assign; the
    /// per-block model test checks the whole map.
    #[cfg(any(test, feature = "invariants"))]
    fn check_around(&self, first: u64) {
        let before = self.ranges.range(..first).next_back();
        let here = self.ranges.range(first..).take(2);
        let mut prev_last: Option<u64> = None;
        for (&f, &(l, cw)) in before.into_iter().chain(here) {
            assert!(f <= l, "range [{f}, {l}] is inverted");
            assert!(cw <= f, "CW start {cw} after its range [{f}, {l}]");
            if let Some(p) = prev_last {
                assert!(p < f, "ranges overlap at {f}");
            }
            prev_last = Some(l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_cws_take_over_blocks() {
        let mut m = CwMap::default();
        m.assign(10, 20);
        m.assign(15, 25);
        m.assign(0, 11);
        assert_eq!(m.cw_start(5), Some(0));
        assert_eq!(m.cw_start(11), Some(0));
        assert_eq!(m.cw_start(12), Some(10));
        assert_eq!(m.cw_start(14), Some(10));
        assert_eq!(m.cw_start(15), Some(15));
        assert_eq!(m.cw_start(25), Some(15));
        assert_eq!(m.cw_start(26), None);
        m.assign(13, 13);
        assert_eq!(m.cw_start(12), Some(10));
        assert_eq!(m.cw_start(13), Some(13));
        assert_eq!(m.cw_start(14), Some(10));
    }

    /// Against a per-block model: random CWs over a small block space.
    #[test]
    fn matches_a_per_block_model() {
        let mut rng = crate::Rng::new(testkit::seeds(&[7])[0]);
        for _ in 0..200 {
            let mut m = CwMap::default();
            let mut model: Vec<Option<u64>> = vec![None; 64];
            for _ in 0..30 {
                let first = rng.below(60);
                let last = (first + rng.geometric(0.3)).min(63);
                m.assign(first, last);
                for b in first..=last {
                    model[b as usize] = Some(first);
                }
                for (b, want) in model.iter().enumerate() {
                    assert_eq!(m.cw_start(b as u64), *want, "block {b}");
                }
            }
        }
    }

    #[test]
    fn chaining() {
        let mut w = vec![(1, 4), (11, 12), (5, 6), (7, 8)];
        assert_eq!(chain_window(&mut w), vec![(1, 8, 3), (11, 12, 1)]);
        assert!(w.is_empty());
        let mut w = vec![(5, 9), (1, 20), (21, 21), (23, 23)];
        assert_eq!(chain_window(&mut w), vec![(1, 21, 3), (23, 23, 1)]);
    }
}
