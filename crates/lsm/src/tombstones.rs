//! Range tombstones and their fragmented form (RocksDB's `FragmentedRangeTombstoneList`).
//!
//! A tombstone `[start, end) @ seq` deletes every entry with a key in the range and a smaller sequence number.
//! Overlapping tombstones are cut at every start and end point into non-overlapping fragments, each carrying the
//! sequence numbers of all tombstones that cover it (newest first). A point query is then a binary search for the
//! fragment holding the key plus a scan of its (few) sequence numbers for the newest one visible at the snapshot.

use std::cmp::Ordering;
use std::collections::BTreeMap;

/// One range tombstone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tombstone {
    /// First deleted key.
    pub start: Vec<u8>,
    /// First key after the range (exclusive).
    pub end: Vec<u8>,
    /// Sequence number of the delete.
    pub seq: u64,
}

impl Tombstone {
    /// Orders by start ascending, then seq descending (the internal-key order of `(start, seq)`).
    pub fn cmp_ikey(&self, o: &Tombstone) -> Ordering {
        self.start.cmp(&o.start).then(o.seq.cmp(&self.seq)).then(self.end.cmp(&o.end))
    }
}

/// A non-overlapping piece `[start, end)` and the sequence numbers (descending) of the tombstones covering it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment {
    /// Inclusive start.
    pub start: Vec<u8>,
    /// Exclusive end.
    pub end: Vec<u8>,
    /// Covering sequence numbers, newest first, no duplicates.
    pub seqs: Vec<u64>,
}

/// Non-overlapping fragments sorted by start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fragments {
    frags: Vec<Fragment>,
}

impl Fragments {
    /// Fragments `ts` (any order, overlaps allowed). Empty ranges are ignored.
    pub fn new<'a>(ts: impl IntoIterator<Item = &'a Tombstone>) -> Self {
        // Sweep over boundary points: at each point, the active set is every tombstone with start <= p < end.
        let mut events: BTreeMap<&[u8], (Vec<u64>, Vec<u64>)> = BTreeMap::new();
        for t in ts {
            if t.start < t.end {
                events.entry(&t.start).or_default().0.push(t.seq);
                events.entry(&t.end).or_default().1.push(t.seq);
            }
        }
        let mut active: BTreeMap<u64, usize> = BTreeMap::new();
        let mut frags = Vec::new();
        let mut prev: Option<&[u8]> = None;
        for (p, (starts, ends)) in events {
            if let Some(s) = prev
                && !active.is_empty()
            {
                frags.push(Fragment {
                    start: s.to_vec(),
                    end: p.to_vec(),
                    seqs: active.keys().rev().copied().collect(),
                });
            }
            for e in ends {
                if let Some(c) = active.get_mut(&e) {
                    *c -= 1;
                    if *c == 0 {
                        active.remove(&e);
                    }
                }
            }
            for s in starts {
                *active.entry(s).or_default() += 1;
            }
            prev = Some(p);
        }
        Fragments { frags }
    }

    /// Adds one tombstone in place, splitting the fragments it partly covers: O(log n + pieces touched) plus the
    /// vector shifts, so a memtable keeps its fragmented list current without refragmenting everything.
    pub fn insert(&mut self, start: &[u8], end: &[u8], seq: u64) {
        if start >= end {
            return;
        }
        let add = |seqs: &mut Vec<u64>| {
            if let Err(p) = seqs.binary_search_by(|x| seq.cmp(x)) {
                seqs.insert(p, seq);
            }
        };
        let mut i = self.frags.partition_point(|f| f.end.as_slice() <= start);
        let mut cur = start.to_vec();
        while cur.as_slice() < end {
            if i == self.frags.len() || self.frags[i].start.as_slice() >= end {
                self.frags.insert(i, Fragment { start: cur, end: end.to_vec(), seqs: vec![seq] });
                return;
            }
            if self.frags[i].start > cur {
                let gap_end = self.frags[i].start.clone();
                self.frags.insert(i, Fragment { start: cur, end: gap_end.clone(), seqs: vec![seq] });
                i += 1;
                cur = gap_end;
                continue;
            }
            if self.frags[i].start < cur {
                let f = &mut self.frags[i];
                let right = Fragment { start: cur.clone(), end: f.end.clone(), seqs: f.seqs.clone() };
                f.end = cur.clone();
                self.frags.insert(i + 1, right);
                i += 1;
                continue;
            }
            if self.frags[i].end.as_slice() > end {
                let f = &mut self.frags[i];
                let right = Fragment { start: end.to_vec(), end: f.end.clone(), seqs: f.seqs.clone() };
                f.end = end.to_vec();
                self.frags.insert(i + 1, right);
            }
            add(&mut self.frags[i].seqs);
            cur = self.frags[i].end.clone();
            i += 1;
        }
    }

    /// Whether there are no fragments.
    pub fn is_empty(&self) -> bool {
        self.frags.is_empty()
    }

    /// The fragments.
    pub fn fragments(&self) -> &[Fragment] {
        &self.frags
    }

    /// The index of the fragment containing `key`, if any.
    fn find(&self, key: &[u8]) -> Option<usize> {
        let i = self.frags.partition_point(|f| f.start.as_slice() <= key);
        let i = i.checked_sub(1)?;
        (key < self.frags[i].end.as_slice()).then_some(i)
    }

    /// The newest sequence number `<= snapshot` of a tombstone covering `key`, or 0.
    pub fn max_covering_seq(&self, key: &[u8], snapshot: u64) -> u64 {
        match self.find(key) {
            Some(i) => self.frags[i].seqs.iter().copied().find(|&s| s <= snapshot).unwrap_or(0),
            None => 0,
        }
    }

    /// Whether an entry `key @ seq` is deleted by a tombstone visible at `snapshot`.
    pub fn covers(&self, key: &[u8], seq: u64, snapshot: u64) -> bool {
        self.max_covering_seq(key, snapshot) > seq
    }

    /// The fragment containing `key` or, if none, the next fragment after it (for skipping forward).
    pub fn fragment_at_or_after(&self, key: &[u8]) -> Option<&Fragment> {
        let i = self.frags.partition_point(|f| f.end.as_slice() <= key);
        self.frags.get(i)
    }

    /// Expands back into unfragmented tombstones (one per fragment and seq), sorted in internal-key order.
    pub fn to_tombstones(&self) -> Vec<Tombstone> {
        let mut v: Vec<Tombstone> = self
            .frags
            .iter()
            .flat_map(|f| {
                f.seqs.iter().map(|&seq| Tombstone { start: f.start.clone(), end: f.end.clone(), seq })
            })
            .collect();
        v.sort_by(|a, b| a.cmp_ikey(b));
        v
    }

    /// Tombstone pieces clipped to `[lo, hi)` (`None` = unbounded), sorted in internal-key order.
    pub fn clipped(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Vec<Tombstone> {
        let mut v = Vec::new();
        for f in &self.frags {
            let s = match lo {
                Some(l) if f.start.as_slice() < l => l,
                _ => f.start.as_slice(),
            };
            let e = match hi {
                Some(h) if f.end.as_slice() > h => h,
                _ => f.end.as_slice(),
            };
            if s < e {
                for &seq in &f.seqs {
                    v.push(Tombstone { start: s.to_vec(), end: e.to_vec(), seq });
                }
            }
        }
        v.sort_by(|a, b| a.cmp_ikey(b));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str, e: &str, seq: u64) -> Tombstone {
        Tombstone { start: s.into(), end: e.into(), seq }
    }

    #[test]
    fn fragments_overlaps_like_rocksdb() {
        // [a,e)@4 and [c,g)@6 and [c,d)@2 -> [a,c){4} [c,d){6,4,2} [d,e){6,4} [e,g){6}
        let f = Fragments::new(&[t("a", "e", 4), t("c", "g", 6), t("c", "d", 2)]);
        let got: Vec<_> =
            f.fragments().iter().map(|f| (f.start.clone(), f.end.clone(), f.seqs.clone())).collect();
        assert_eq!(
            got,
            vec![
                (b"a".to_vec(), b"c".to_vec(), vec![4]),
                (b"c".to_vec(), b"d".to_vec(), vec![6, 4, 2]),
                (b"d".to_vec(), b"e".to_vec(), vec![6, 4]),
                (b"e".to_vec(), b"g".to_vec(), vec![6]),
            ]
        );
        assert_eq!(f.max_covering_seq(b"c", 100), 6);
        assert_eq!(f.max_covering_seq(b"c", 5), 4);
        assert_eq!(f.max_covering_seq(b"c", 1), 0);
        assert_eq!(f.max_covering_seq(b"g", 100), 0);
        assert!(f.covers(b"b", 3, 10));
        assert!(!f.covers(b"b", 4, 10));
        assert_eq!(Fragments::new(&f.to_tombstones()), f);
        let c = f.clipped(Some(b"b"), Some(b"cc"));
        assert_eq!(c[0], t("b", "c", 4));
        assert_eq!(c.len(), 4);
    }

    #[test]
    fn incremental_insert_equals_batch_fragmentation() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(9);
        for _ in 0..200 {
            let mut ts = Vec::new();
            let mut inc = Fragments::default();
            for seq in 1..rng.random_range(1..30) {
                let a = rng.random_range(0..40u8);
                let b = rng.random_range(0..40u8);
                let t = Tombstone { start: vec![a], end: vec![b], seq };
                inc.insert(&t.start, &t.end, t.seq);
                ts.push(t);
            }
            // Batch fragmentation never splits where no boundary lies; compare by coverage at every point.
            let batch = Fragments::new(&ts);
            for k in 0..41u8 {
                for snap in [0u64, 5, 15, 100] {
                    assert_eq!(inc.max_covering_seq(&[k], snap), batch.max_covering_seq(&[k], snap));
                }
            }
            assert!(inc.frags.windows(2).all(|w| w[0].end <= w[1].start));
        }
    }

    #[test]
    fn gaps_and_empty_ranges() {
        let f = Fragments::new(&[t("a", "b", 1), t("x", "z", 2), t("m", "m", 9)]);
        assert_eq!(f.fragments().len(), 2);
        assert_eq!(f.max_covering_seq(b"m", 100), 0);
        assert_eq!(f.fragment_at_or_after(b"c").map(|f| f.start.clone()), Some(b"x".to_vec()));
    }
}
