//! Range tombstones and their fragmented form (RocksDB's `FragmentedRangeTombstoneList`).
//!
//! A tombstone `[start, end) @ seq` deletes every entry with a key in the range and a smaller sequence number.
//! Overlapping tombstones are cut at every start and end point into non-overlapping fragments, each carrying the
//! sequence numbers of all tombstones that cover it (newest first). A point query is then a binary search for the
//! fragment holding the key plus a scan of its (few) sequence numbers for the newest one visible at the snapshot.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

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

/// Fragments per chunk at most (see [`Fragments`]).
const CHUNK: usize = 64;

/// Non-overlapping fragments sorted by start, kept in chunks of at most `CHUNK`.
///
/// Why chunks: a memtable adds its tombstones one at a time ([`Fragments::insert`]). In one flat vector each
/// insert shifted every fragment after it, O(n) per range delete: 10.5 µs on average and 45 µs at P99 with full
/// size 64 MiB memtables and 10 % range deletes. Chunks bound the shift to the chunks the new tombstone
/// touches. Each chunk is behind an `Arc`, so the copy a writer makes while readers still hold the list
/// (`Arc::make_mut` in the memtable) copies the chunk pointers and the touched chunks, not every fragment.
/// Lookups binary-search the chunks by their first fragment, then one chunk.
///
/// Invariants: no chunk is empty; fragments are disjoint and ordered across chunk boundaries; `len` counts them.
#[derive(Debug, Clone, Default)]
pub struct Fragments {
    chunks: Vec<Arc<Vec<Fragment>>>,
    len: usize,
}

impl PartialEq for Fragments {
    /// Equal fragments in the same order, however they are chunked.
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for Fragments {}

/// Cuts ordered fragments into chunks of at most [`CHUNK`], as even as possible.
fn chunked(frags: Vec<Fragment>) -> Vec<Arc<Vec<Fragment>>> {
    if frags.is_empty() {
        return Vec::new();
    }
    let k = frags.len().div_ceil(CHUNK);
    let size = frags.len().div_ceil(k);
    let mut out = Vec::with_capacity(k);
    let mut it = frags.into_iter().peekable();
    while it.peek().is_some() {
        out.push(Arc::new(it.by_ref().take(size).collect()));
    }
    out
}

/// [`Fragments::insert`] on one ordered vector holding every fragment that overlaps `[start, end)` (and the
/// place a new one would go): splits the fragments it partly covers, fills the gaps, adds `seq` to the rest.
fn insert_flat(frags: &mut Vec<Fragment>, start: &[u8], end: &[u8], seq: u64) {
    let add = |seqs: &mut Vec<u64>| {
        if let Err(p) = seqs.binary_search_by(|x| seq.cmp(x)) {
            seqs.insert(p, seq);
        }
    };
    let mut i = frags.partition_point(|f| f.end.as_slice() <= start);
    let mut cur = start.to_vec();
    while cur.as_slice() < end {
        if i == frags.len() || frags[i].start.as_slice() >= end {
            frags.insert(i, Fragment { start: cur, end: end.to_vec(), seqs: vec![seq] });
            return;
        }
        if frags[i].start > cur {
            let gap_end = frags[i].start.clone();
            frags.insert(i, Fragment { start: cur, end: gap_end.clone(), seqs: vec![seq] });
            i += 1;
            cur = gap_end;
            continue;
        }
        if frags[i].start < cur {
            let f = &mut frags[i];
            let right = Fragment { start: cur.clone(), end: f.end.clone(), seqs: f.seqs.clone() };
            f.end = cur.clone();
            frags.insert(i + 1, right);
            i += 1;
            continue;
        }
        if frags[i].end.as_slice() > end {
            let f = &mut frags[i];
            let right = Fragment { start: end.to_vec(), end: f.end.clone(), seqs: f.seqs.clone() };
            f.end = end.to_vec();
            frags.insert(i + 1, right);
        }
        add(&mut frags[i].seqs);
        cur = frags[i].end.clone();
        i += 1;
    }
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
        let len = frags.len();
        Fragments { chunks: chunked(frags), len }
    }

    /// Adds one tombstone in place, splitting the fragments it partly covers, so a memtable keeps its fragmented
    /// list current without refragmenting everything. Rewrites only the chunks holding fragments that overlap
    /// `[start, end)` (or the chunk where a new fragment goes): O(log n + those fragments + n / CHUNK).
    pub fn insert(&mut self, start: &[u8], end: &[u8], seq: u64) {
        if start >= end {
            return;
        }
        if self.chunks.is_empty() {
            self.chunks.push(Arc::new(vec![Fragment {
                start: start.to_vec(),
                end: end.to_vec(),
                seqs: vec![seq],
            }]));
            self.len = 1;
            return;
        }
        let last = self.chunks.len() - 1;
        // From the first chunk with a fragment ending after `start` (or the last chunk, where a fragment past
        // every other one goes) to the last chunk with a fragment starting before `end`.
        let lo =
            self.chunks.partition_point(|c| c.last().is_none_or(|f| f.end.as_slice() <= start)).min(last);
        let hi = self
            .chunks
            .partition_point(|c| c.first().is_some_and(|f| f.start.as_slice() < end))
            .saturating_sub(1)
            .max(lo);
        if lo == hi {
            // The common case, one chunk: edited in place (copied first only if a reader shares it), and cut in
            // two once it outgrows `CHUNK`.
            let c = Arc::make_mut(&mut self.chunks[lo]);
            let before = c.len();
            insert_flat(c, start, end, seq);
            self.len = self.len - before + c.len();
            if c.len() > CHUNK {
                let taken = std::mem::take(c);
                self.chunks.splice(lo..=lo, chunked(taken));
            }
            return;
        }
        let taken: Vec<Arc<Vec<Fragment>>> = self.chunks.drain(lo..=hi).collect();
        let mut flat: Vec<Fragment> = Vec::new();
        for c in taken {
            flat.extend(Arc::unwrap_or_clone(c));
        }
        let before = flat.len();
        insert_flat(&mut flat, start, end, seq);
        self.len = self.len - before + flat.len();
        self.chunks.splice(lo..lo, chunked(flat));
    }

    /// Whether there are no fragments.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of fragments.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The fragments in order.
    pub fn iter(&self) -> impl Iterator<Item = &Fragment> + '_ {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// The fragment containing `key`, if any.
    fn find(&self, key: &[u8]) -> Option<&Fragment> {
        let ci = self.chunks.partition_point(|c| c.first().is_some_and(|f| f.start.as_slice() <= key));
        let c = self.chunks.get(ci.checked_sub(1)?)?;
        let i = c.partition_point(|f| f.start.as_slice() <= key).checked_sub(1)?;
        c.get(i).filter(|f| key < f.end.as_slice())
    }

    /// The newest sequence number `<= snapshot` of a tombstone covering `key`, or 0.
    pub fn max_covering_seq(&self, key: &[u8], snapshot: u64) -> u64 {
        match self.find(key) {
            Some(f) => f.seqs.iter().copied().find(|&s| s <= snapshot).unwrap_or(0),
            None => 0,
        }
    }

    /// Whether an entry `key @ seq` is deleted by a tombstone visible at `snapshot`.
    pub fn covers(&self, key: &[u8], seq: u64, snapshot: u64) -> bool {
        self.max_covering_seq(key, snapshot) > seq
    }

    /// The fragment containing `key` or, if none, the next fragment after it (for skipping forward).
    pub fn fragment_at_or_after(&self, key: &[u8]) -> Option<&Fragment> {
        let ci = self.chunks.partition_point(|c| c.last().is_none_or(|f| f.end.as_slice() <= key));
        let c = self.chunks.get(ci)?;
        c.get(c.partition_point(|f| f.end.as_slice() <= key))
    }

    /// Expands back into unfragmented tombstones (one per fragment and seq), sorted in internal-key order.
    pub fn to_tombstones(&self) -> Vec<Tombstone> {
        let mut v: Vec<Tombstone> = self
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
        for f in self.iter() {
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
        let got: Vec<_> = f.iter().map(|f| (f.start.clone(), f.end.clone(), f.seqs.clone())).collect();
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
            let all: Vec<&Fragment> = inc.iter().collect();
            assert!(all.windows(2).all(|w| w[0].end <= w[1].start));
            assert_eq!(all.len(), inc.len());
        }
    }

    /// Hundreds of tombstones, so the list spans many chunks: short ranges that split one chunk, long ones that
    /// rewrite many, and gaps between chunks. Coverage at every point and the skip-forward lookup must match a
    /// batch fragmentation, the chunks must stay non-empty, at most `CHUNK` long and ordered across their
    /// boundaries, and a clone taken before an insert must not change (readers hold such clones).
    #[test]
    fn chunked_inserts_match_batch_fragmentation() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        let key = |k: u16| k.to_be_bytes().to_vec();
        for round in 0..6 {
            let mut ts = Vec::new();
            let mut inc = Fragments::default();
            let n = 100 + 150 * round;
            for seq in 1..=n as u64 {
                let a = rng.random_range(0..2_000u16);
                let len =
                    if rng.random_bool(0.05) { rng.random_range(0..800) } else { rng.random_range(0..6) };
                let t = Tombstone { start: key(a), end: key(a.saturating_add(len)), seq };
                let before = inc.clone();
                let frozen: Vec<Fragment> = before.iter().cloned().collect();
                inc.insert(&t.start, &t.end, t.seq);
                assert!(before.iter().eq(frozen.iter()), "an insert changed a clone taken before it");
                ts.push(t);
            }
            assert!(inc.chunks.len() > 1, "round {round}: one chunk only");
            assert!(inc.chunks.iter().all(|c| !c.is_empty() && c.len() <= CHUNK));
            let all: Vec<&Fragment> = inc.iter().collect();
            assert_eq!(all.len(), inc.len());
            assert!(all.windows(2).all(|w| w[0].end <= w[1].start));
            let batch = Fragments::new(&ts);
            for k in (0..2_900u16).step_by(7) {
                for snap in [n as u64 / 3, u64::MAX] {
                    assert_eq!(
                        inc.max_covering_seq(&key(k), snap),
                        batch.max_covering_seq(&key(k), snap),
                        "{k}"
                    );
                }
                let covered = |f: Option<&Fragment>| f.map(|f| f.start.clone().max(key(k)));
                assert_eq!(
                    covered(inc.fragment_at_or_after(&key(k))),
                    covered(batch.fragment_at_or_after(&key(k)))
                );
            }
        }
    }

    #[test]
    fn gaps_and_empty_ranges() {
        let f = Fragments::new(&[t("a", "b", 1), t("x", "z", 2), t("m", "m", 9)]);
        assert_eq!(f.len(), 2);
        assert_eq!(f.max_covering_seq(b"m", 100), 0);
        assert_eq!(f.fragment_at_or_after(b"c").map(|f| f.start.clone()), Some(b"x".to_vec()));
    }
}
