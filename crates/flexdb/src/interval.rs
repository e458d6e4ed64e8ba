//! A decoded interval in one buffer: the form the interval cache holds and readers search.
//!
//! Why one buffer: an interval decoded into a `Vec` of boxed keys and values cost two allocations per record to
//! load and two frees per record to evict, and on a cache miss that work (16 allocations and 16 frees for an
//! 8-key interval) cost as much as the file read itself. Here a load keeps the bytes it read and adds one array
//! of entries (where each key starts, its length and the value's); an interval built by the committer packs its
//! keys and values the same way. Readers binary-search the entries and borrow keys and values from the buffer.
//!
//! The buffer is not an encoding: entries point at the key and value bytes wherever they lie (after the record
//! headers of a buffer read from the file, back to back in one the committer built). Checksums are verified when
//! a buffer is decoded from the file and never again; a cached interval is trusted.

use crate::error::{Error, Result};
use crate::record::{self, Rec};

/// Where one record's key and value lie in the buffer: the key at `at`, the value right after it.
#[derive(Clone, Copy, Debug)]
struct Ent {
    at: u64,
    klen: u32,
    vlen: u32,
}

/// The records of one interval, in key order. See the module comment.
#[derive(Debug)]
pub struct Interval {
    buf: Box<[u8]>,
    ents: Box<[Ent]>,
}

/// Fixed memory charged per interval on top of its buffer and entries.
const INTERVAL_OVERHEAD: usize = 64;
/// Memory charged per record for its entry.
pub const ENTRY_BYTES: usize = std::mem::size_of::<Ent>();

impl Interval {
    /// Decodes an interval read from the table file: every record's checksum, the lengths and the key order are
    /// checked (problems are `Corruption`), and the buffer is kept.
    pub fn decode(buf: Vec<u8>) -> Result<Interval> {
        let mut ents: Vec<Ent> = Vec::new();
        let mut at = 0;
        while at < buf.len() {
            let rest = &buf[at..];
            let (klen, vlen, h) = record::decode_header(rest)?
                .ok_or_else(|| Error::corruption("table", "truncated record header"))?;
            let total = h + klen + vlen + 4;
            if rest.len() < total {
                return Err(Error::corruption("table", format!("record at +{at} runs past its interval")));
            }
            let body = &rest[..total - 4];
            let crc =
                u32::from_le_bytes([rest[total - 4], rest[total - 3], rest[total - 2], rest[total - 1]]);
            if vfs::crc32c::crc32c(body) != crc {
                return Err(Error::corruption("table", format!("record checksum mismatch at +{at}")));
            }
            let key = &body[h..h + klen];
            if let Some(last) = ents.last()
                && key_of(&buf, last) >= key
            {
                return Err(Error::corruption("table", "keys out of order"));
            }
            // decode_header bounds klen and vlen far below 4 GiB.
            ents.push(Ent { at: (at + h) as u64, klen: klen as u32, vlen: vlen as u32 });
            at += total;
        }
        Ok(Interval { buf: buf.into_boxed_slice(), ents: ents.into_boxed_slice() })
    }

    /// Packs records, owned or borrowed (REQUIRES: strictly increasing keys, each within the record limits).
    pub fn from_recs<K: AsRef<[u8]>, V: AsRef<[u8]>>(recs: &[(K, V)]) -> Interval {
        let mut buf = Vec::with_capacity(recs.iter().map(|r| r.0.as_ref().len() + r.1.as_ref().len()).sum());
        let mut ents = Vec::with_capacity(recs.len());
        for (k, v) in recs {
            let (k, v) = (k.as_ref(), v.as_ref());
            ents.push(Ent { at: buf.len() as u64, klen: k.len() as u32, vlen: v.len() as u32 });
            buf.extend_from_slice(k);
            buf.extend_from_slice(v);
        }
        Interval { buf: buf.into_boxed_slice(), ents: ents.into_boxed_slice() }
    }

    /// Records in the interval.
    pub fn len(&self) -> usize {
        self.ents.len()
    }

    /// Whether the interval holds no record.
    pub fn is_empty(&self) -> bool {
        self.ents.is_empty()
    }

    /// The `i`-th record. REQUIRES: `i < len()`.
    pub fn rec(&self, i: usize) -> (&[u8], &[u8]) {
        let e = &self.ents[i];
        let k = e.at as usize;
        let v = k + e.klen as usize;
        (&self.buf[k..v], &self.buf[v..v + e.vlen as usize])
    }

    /// The value of `key`, if the interval holds it.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        let i = self.ents.binary_search_by(|e| key_of(&self.buf, e).cmp(key)).ok()?;
        Some(self.rec(i).1)
    }

    /// The index of the first record whose key is `>= key` (`len()` if none).
    pub fn lower_bound(&self, key: &[u8]) -> usize {
        self.ents.partition_point(|e| key_of(&self.buf, e) < key)
    }

    /// The records in key order (reversible).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], &[u8])> + ExactSizeIterator + '_ {
        (0..self.ents.len()).map(|i| self.rec(i))
    }

    /// The records as owned pairs (the committer's working form).
    pub fn to_recs(&self) -> Vec<Rec> {
        self.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    /// Memory charged to the cache for this interval.
    pub fn charge(&self) -> usize {
        self.buf.len() + self.ents.len() * ENTRY_BYTES + INTERVAL_OVERHEAD
    }

    /// The largest charge of an interval of at most `max_keys` records and `max_bytes` encoded bytes.
    pub fn max_charge(max_keys: usize, max_bytes: u64) -> usize {
        usize::try_from(max_bytes)
            .unwrap_or(usize::MAX)
            .saturating_add(max_keys.saturating_mul(ENTRY_BYTES))
            .saturating_add(INTERVAL_OVERHEAD)
    }
}

fn key_of<'a>(buf: &'a [u8], e: &Ent) -> &'a [u8] {
    &buf[e.at as usize..e.at as usize + e.klen as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(recs: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut b = Vec::new();
        for (k, v) in recs {
            record::encode(&mut b, k, v);
        }
        b
    }

    #[test]
    fn decoded_and_packed_forms_agree() {
        let recs: Vec<(&[u8], &[u8])> = vec![(b"a", b""), (b"b", &[7u8; 300]), (b"cc", b"x")];
        let d = Interval::decode(encoded(&recs)).unwrap();
        let owned: Vec<Rec> = recs.iter().map(|(k, v)| (Box::from(*k), Box::from(*v))).collect();
        let p = Interval::from_recs(&owned);
        for iv in [&d, &p] {
            assert_eq!(iv.len(), 3);
            assert_eq!(iv.iter().collect::<Vec<_>>(), recs);
            assert_eq!(iv.iter().rev().map(|r| r.0).collect::<Vec<_>>(), vec![&b"cc"[..], b"b", b"a"]);
            assert_eq!(iv.get(b"a"), Some(&b""[..]));
            assert_eq!(iv.get(b"cc"), Some(&b"x"[..]));
            assert_eq!(iv.get(b"c"), None);
            assert_eq!(iv.to_recs(), owned);
        }
        assert!(Interval::decode(Vec::new()).unwrap().is_empty());
    }

    #[test]
    fn corruption_and_disorder_detected() {
        let buf = encoded(&[(b"key", b"value"), (b"kez", b"v")]);
        for i in 0..buf.len() {
            let mut b = buf.clone();
            b[i] ^= 0x40;
            assert!(Interval::decode(b).is_err(), "flip at {i} undetected");
        }
        assert!(Interval::decode(encoded(&[(b"b", b""), (b"a", b"")])).is_err());
        assert!(Interval::decode(encoded(&[(b"a", b""), (b"a", b"")])).is_err());
        assert!(Interval::decode(buf[..buf.len() - 1].to_vec()).is_err());
    }
}
