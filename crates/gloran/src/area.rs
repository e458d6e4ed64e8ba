//! Effective areas (§4.1): the two-dimensional form of a range record.
//!
//! A range delete of keys `[start, end)` issued at sequence number `D` invalidates every entry `(key, seq)` with
//! `start <= key < end` and `seq < D`. Drawn in the working space of keys × sequence numbers this is a rectangle,
//! the record's *effective area*; an entry is deleted iff its point lies inside some area (Lemma 4.1). The lower
//! sequence bound `min_seq` says below which sequence number no entry of the range can exist any more (garbage
//! collection raises it, §4.4); a fresh record normally has `min_seq = 0`.
//!
//! Disjointization (see `disjoint.rs`) cuts and stacks areas so that no two overlap. Once records are merged, the
//! sequence number an area *reports* (`seq`, the delete a reader must be able to see for the entry to count as
//! deleted) can exceed the area's upper sequence bound `max_seq`: a merged area answers for several deletes that
//! every live snapshot sees alike, and reports the newest of them. For a fresh record `max_seq == seq`.
//!
//! Keys are byte strings compared lexicographically, exactly, on their full length; nothing in the index's answers
//! depends on a lossy projection. The only projection, [`key_prefix_u64`] (first 8 bytes, big-endian, zero
//! padded), feeds heuristics (R-tree split costs) and the estimator's virtual bit array, both of which only need
//! monotonicity: `a <= b` implies `key_prefix_u64(a) <= key_prefix_u64(b)`.

use std::cmp::Ordering;

/// One effective area: keys `[start, end)` × sequence numbers `[min_seq, max_seq)`, reporting delete `seq`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Area {
    /// First key covered.
    pub start: Vec<u8>,
    /// First key past the covered range (exclusive).
    pub end: Vec<u8>,
    /// Lowest entry sequence number covered.
    pub min_seq: u64,
    /// First entry sequence number not covered (exclusive).
    pub max_seq: u64,
    /// The sequence number of the delete a reader must see: covered entries are deleted for readers at
    /// snapshots `>= seq`. Always `>= max_seq`.
    pub seq: u64,
}

impl Area {
    /// The effective area of a range delete of `[start, end)` at `seq`, for entries no older than `min_seq`.
    pub fn record(start: &[u8], end: &[u8], min_seq: u64, seq: u64) -> Self {
        Area { start: start.to_vec(), end: end.to_vec(), min_seq, max_seq: seq, seq }
    }

    /// Whether the entry `(key, seq)` lies inside the area.
    #[inline]
    pub fn covers(&self, key: &[u8], seq: u64) -> bool {
        self.min_seq <= seq && seq < self.max_seq && self.start.as_slice() <= key && key < self.end.as_slice()
    }

    /// Whether the area covers at least one (key, seq) point.
    pub fn is_empty(&self) -> bool {
        self.start >= self.end || self.min_seq >= self.max_seq
    }

    /// Whether the key ranges of the two areas intersect.
    pub fn keys_overlap(&self, other: &Area) -> bool {
        self.start < other.end && other.start < self.end
    }

    /// The bytes this area costs in memory or on disk, roughly: keys plus three sequence numbers.
    pub fn footprint(&self) -> usize {
        self.start.len() + self.end.len() + 24
    }

    /// The order of areas in a DR-tree: by start key, then by sequence band.
    pub fn order(a: &Area, b: &Area) -> Ordering {
        a.start
            .cmp(&b.start)
            .then(a.min_seq.cmp(&b.min_seq))
            .then(a.end.cmp(&b.end))
            .then(a.max_seq.cmp(&b.max_seq))
    }
}

/// The first 8 bytes of `key` as a big-endian integer, zero padded: a monotone projection of byte-string order.
#[inline]
pub fn key_prefix_u64(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

/// The projection of an exclusive end key: every key `k < end` has `key_prefix_u64(k) <= end_prefix_u64(end)`,
/// so this is the inclusive upper bound of the projected range `[start, end)`.
#[inline]
pub fn end_prefix_u64(end: &[u8]) -> u64 {
    key_prefix_u64(end)
}

/// A monotone projection of the keys that extend `prefix`: keys below every extension map to 0, keys above to
/// `u64::MAX`, and an extension to the 8 bytes after the prefix (`key_prefix_u64`). When the keys in use share a
/// long common prefix (`user0000…`), projecting after it keeps the projection's resolution where keys differ.
#[inline]
pub fn project_after(key: &[u8], prefix: &[u8]) -> u64 {
    let n = prefix.len().min(key.len());
    match key[..n].cmp(&prefix[..n]) {
        std::cmp::Ordering::Less => 0,
        std::cmp::Ordering::Greater => u64::MAX,
        std::cmp::Ordering::Equal if key.len() < prefix.len() => 0,
        std::cmp::Ordering::Equal => key_prefix_u64(&key[prefix.len()..]),
    }
}

/// The longest common prefix of `a` and `b`.
pub fn common_prefix<'a>(a: &'a [u8], b: &[u8]) -> &'a [u8] {
    let n = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    &a[..n]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_is_monotone() {
        let keys: Vec<&[u8]> =
            vec![b"", b"\0", b"a", b"a\0", b"ab", b"abcdefgh", b"abcdefgh\xff", b"abcdefgi", b"b"];
        for w in keys.windows(2) {
            assert!(w[0] <= w[1]);
            assert!(key_prefix_u64(w[0]) <= key_prefix_u64(w[1]), "{:?} {:?}", w[0], w[1]);
        }
    }

    #[test]
    fn projection_after_a_prefix_is_monotone() {
        let keys: Vec<&[u8]> = vec![
            b"",
            b"a",
            b"user",
            b"user0",
            b"user00",
            b"user000000000001",
            b"user000000000002",
            b"user000000012345",
            b"user00\xff",
            b"user01",
            b"user1",
            b"v",
        ];
        for p in [&b""[..], b"user", b"user00", b"user0000000000", b"zz"] {
            for w in keys.windows(2) {
                assert!(w[0] <= w[1]);
                assert!(project_after(w[0], p) <= project_after(w[1], p), "{:?} {:?} {:?}", w[0], w[1], p);
            }
        }
        assert_eq!(common_prefix(b"user0001", b"user0100"), b"user0");
    }

    #[test]
    fn covers_is_half_open_in_both_dimensions() {
        let a = Area::record(b"b", b"d", 2, 8);
        assert!(a.covers(b"b", 2));
        assert!(a.covers(b"c\xff", 7));
        assert!(!a.covers(b"d", 5));
        assert!(!a.covers(b"a\xff", 5));
        assert!(!a.covers(b"c", 8));
        assert!(!a.covers(b"c", 1));
    }
}
