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
}
