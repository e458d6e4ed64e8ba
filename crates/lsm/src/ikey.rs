//! Internal keys: a user key followed by an 8-byte little-endian trailer `(seq << 8) | kind`.
//!
//! Order: user key ascending (bytewise), then trailer descending, so the newest version of a key comes first and
//! a seek to `(k, snapshot)` lands on the newest version visible at `snapshot`. Sequence numbers are 56 bits;
//! 0 is never assigned to a write (it is the "before everything" sequence).

use std::cmp::Ordering;

/// The largest sequence number (56 bits).
pub const MAX_SEQ: u64 = (1 << 56) - 1;

/// What an internal entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Kind {
    /// A point tombstone.
    Delete = 0,
    /// A value.
    Value = 1,
    /// A range tombstone `[key, value)`; lives in range-deletion blocks and batches, never among point entries.
    RangeDelete = 2,
}

/// The kind used when seeking: the largest, so `(k, seq, SEEK_KIND)` sorts before every entry of `k` at `seq`.
pub const SEEK_KIND: Kind = Kind::RangeDelete;

impl Kind {
    /// Decodes a kind byte.
    pub fn from_u8(b: u8) -> Option<Kind> {
        match b {
            0 => Some(Kind::Delete),
            1 => Some(Kind::Value),
            2 => Some(Kind::RangeDelete),
            _ => None,
        }
    }
}

/// Packs a sequence number and kind into a trailer.
pub fn pack(seq: u64, kind: Kind) -> u64 {
    debug_assert!(seq <= MAX_SEQ);
    (seq << 8) | kind as u64
}

/// Encodes an internal key into a new buffer.
pub fn make(user_key: &[u8], seq: u64, kind: Kind) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + 8);
    append(&mut v, user_key, seq, kind);
    v
}

/// Appends an internal key to `dst`.
pub fn append(dst: &mut Vec<u8>, user_key: &[u8], seq: u64, kind: Kind) {
    dst.extend_from_slice(user_key);
    dst.extend_from_slice(&pack(seq, kind).to_le_bytes());
}

/// The user-key part. REQUIRES: `ik.len() >= 8` (checked by `parse` for untrusted bytes).
pub fn user_key(ik: &[u8]) -> &[u8] {
    &ik[..ik.len().saturating_sub(8)]
}

/// The trailer. REQUIRES: `ik.len() >= 8`.
pub fn trailer(ik: &[u8]) -> u64 {
    let n = ik.len();
    let mut t = [0u8; 8];
    if n >= 8 {
        t.copy_from_slice(&ik[n - 8..]);
    }
    u64::from_le_bytes(t)
}

/// The sequence number. REQUIRES: `ik.len() >= 8`.
pub fn seq(ik: &[u8]) -> u64 {
    trailer(ik) >> 8
}

/// A decoded internal key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// The user key.
    pub user_key: &'a [u8],
    /// The sequence number.
    pub seq: u64,
    /// The kind.
    pub kind: Kind,
}

/// Decodes untrusted bytes; `None` if too short or the kind byte is unknown.
pub fn parse(ik: &[u8]) -> Option<Parsed<'_>> {
    if ik.len() < 8 {
        return None;
    }
    let t = trailer(ik);
    Some(Parsed { user_key: user_key(ik), seq: t >> 8, kind: Kind::from_u8((t & 0xff) as u8)? })
}

/// The internal-key order. Keys shorter than 8 bytes (only from corrupt input) order by their raw bytes first.
pub fn cmp(a: &[u8], b: &[u8]) -> Ordering {
    if a.len() < 8 || b.len() < 8 {
        return a.cmp(b);
    }
    match user_key(a).cmp(user_key(b)) {
        Ordering::Equal => trailer(b).cmp(&trailer(a)),
        o => o,
    }
}

/// Writes to `out` a short index key between two adjacent data blocks: an internal key `s` with `a <= s < b`,
/// where `a` is the last key of one block and `b` the first of the next (RocksDB's default index shortening,
/// `kShortenSeparators`). When the user keys differ at some byte, the separator is the shortest prefix of `a`'s
/// user key that, with one byte raised, still sorts below `b`'s, followed by the seek trailer
/// `(MAX_SEQ, SEEK_KIND)`, which sorts before every entry of that user key. Otherwise it is `a` itself.
///
/// Why a point lookup still reads one block only: a target above `a` but at or below `s` has a user key above
/// `a`'s and at or below `s`'s (or is `a`'s user key at a sequence below every entry of it, and the next block,
/// which starts at a greater user key, holds none of it), so no entry with the target's user key exists in the
/// table at all.
///
/// REQUIRES: `a` and `b` are internal keys and `a < b`.
pub fn separator(a: &[u8], b: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let (ua, ub) = (user_key(a), user_key(b));
    let p = ua.iter().zip(ub).take_while(|(x, y)| x == y).count();
    if p < ua.len() && p < ub.len() {
        // `ua[p] < ub[p]`, as `a < b` and the user keys differ here. Raising `ua[p]` gives a key below `ub` if
        // the raised byte is still below `ub[p]`; otherwise any key that starts with `ua[..=p]` is below `ub`,
        // so raise the first later byte of `ua` that can be.
        let i =
            if ua[p].saturating_add(1) < ub[p] { Some(p) } else { (p + 1..ua.len()).find(|&i| ua[i] < 0xff) };
        if let Some(i) = i
            && i + 1 < ua.len()
        {
            out.extend_from_slice(&ua[..=i]);
            out[i] += 1;
            out.extend_from_slice(&pack(MAX_SEQ, SEEK_KIND).to_le_bytes());
            return;
        }
    }
    out.extend_from_slice(a);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_user_key_then_newest_first() {
        let a5 = make(b"a", 5, Kind::Value);
        let a3 = make(b"a", 3, Kind::Value);
        let a5d = make(b"a", 5, Kind::Delete);
        let ab1 = make(b"ab", 1, Kind::Value);
        let b9 = make(b"b", 9, Kind::Value);
        let mut v = vec![b9.clone(), a3.clone(), ab1.clone(), a5d.clone(), a5.clone()];
        v.sort_by(|x, y| cmp(x, y));
        assert_eq!(v, vec![a5, a5d, a3, ab1, b9]);
        let k = make(b"k", MAX_SEQ, Kind::RangeDelete);
        let p = parse(&k).unwrap();
        assert_eq!((p.user_key, p.seq, p.kind), (&b"k"[..], MAX_SEQ, Kind::RangeDelete));
        assert!(parse(&[1, 2, 3]).is_none());
        assert!(parse(&[9, 0, 0, 0, 0, 0, 0, 0]).is_none());
    }

    fn sep(a: &[u8], b: &[u8]) -> Vec<u8> {
        let (a, b) = (make(a, 7, Kind::Value), make(b, 9, Kind::Value));
        let mut out = Vec::new();
        separator(&a, &b, &mut out);
        assert!(cmp(&a, &out).is_le() && cmp(&out, &b).is_lt());
        out
    }

    #[test]
    fn separators_are_short_and_between_the_blocks() {
        let seek = |uk: &[u8]| make(uk, MAX_SEQ, SEEK_KIND);
        assert_eq!(sep(b"abcdefgh", b"abzzz"), seek(b"abd"));
        // The differing byte cannot be raised below `b`'s: a later byte of `a` is raised instead.
        assert_eq!(sep(b"abcdefgh", b"abdxyz"), seek(b"abce"));
        assert_eq!(sep(b"ab\xff\xffqrs", b"ac"), seek(b"ab\xff\xffr"));
        // Nothing shorter exists: `a` itself.
        for (a, b) in [(&b"abc"[..], &b"abcd"[..]), (b"abc", b"abd"), (b"ab\xff\xff", b"ac"), (b"a", b"z")] {
            assert_eq!(sep(a, b), make(a, 7, Kind::Value));
        }
        // The same user key in both blocks: `a` exactly.
        let (a, b) = (make(b"key", 9, Kind::Value), make(b"key", 3, Kind::Delete));
        let mut out = Vec::new();
        separator(&a, &b, &mut out);
        assert_eq!(out, a);
    }

    #[test]
    fn separators_hold_for_random_keys() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let mut key = || {
                let len = (next() % 6) as usize;
                // Few distinct bytes, many of them at the ends of the range, so prefixes and 0xff runs are common.
                (0..len).map(|_| [0u8, 1, 2, 0xfe, 0xff][(next() % 5) as usize]).collect::<Vec<u8>>()
            };
            let (ua, ub) = (key(), key());
            let (a, b) = (make(&ua, next() % 10, Kind::Value), make(&ub, next() % 10, Kind::Value));
            let (a, b) = match cmp(&a, &b) {
                Ordering::Less => (a, b),
                Ordering::Greater => (b, a),
                Ordering::Equal => continue,
            };
            let mut out = Vec::new();
            separator(&a, &b, &mut out);
            assert!(cmp(&a, &out).is_le() && cmp(&out, &b).is_lt(), "{a:?} {out:?} {b:?}");
            assert!(out.len() <= a.len());
            if out != a {
                // A shortened separator's user key lies strictly between the two user keys.
                assert!(user_key(&a) < user_key(&out) && user_key(&out) < user_key(&b));
            }
        }
    }
}
