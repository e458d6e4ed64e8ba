//! From key numbers to keys: the key order ([`KeyOrder`]) and byte encodings ([`KeyEncoding`]).
//!
//! Generators work with *key numbers* `0, 1, 2, ...` in insertion order. [`KeyOrder`] turns a key number into the
//! u64 key an engine stores: `Ordered` keeps it (inserts append at the end of the key space), `Hashed` scatters it
//! like YCSB's default `insertorder=hashed`, so inserts land all over the key space and the keys are uniformly spread
//! 64-bit values, as in the BP-tree paper's "uniform random elements in [1, 2^64 − 1]". YCSB hashes with FNV-64,
//! which is not injective on 64-bit inputs (two key numbers can collide, turning an insert into an update); this
//! crate uses the splitmix64 finaliser instead, a bijection, so distinct key numbers are always distinct keys.
//!
//! [`KeyEncoding`] turns a u64 key into bytes whose lexicographic order is the numeric order, so a scan in an engine
//! with byte keys visits the same keys in the same order as one over u64 keys:
//! - `U64BigEndian`: the 8 bytes big-endian;
//! - `Str`: an optional prefix, the key as 16 lowercase hex digits (fixed width, so order is kept), then filler up to a
//!   length in `[min_len, max_len]` chosen from the key (the same key always has the same bytes). This is the 16–64
//!   byte string-key form for memtable-style workloads and the FlexFile Table 3 key sizes.

use crate::Error;
use crate::rng::mix64;
use crate::sizes::SizeDistribution;

/// How key numbers map to u64 keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyOrder {
    /// key = key number.
    Ordered,
    /// key = splitmix64-finaliser(key number): scattered like YCSB's default, but collision-free.
    #[default]
    Hashed,
}

impl KeyOrder {
    /// The key of key number `n`. Both orders are bijections, so distinct key numbers give distinct keys.
    #[inline]
    pub fn key(&self, n: u64) -> u64 {
        match self {
            KeyOrder::Ordered => n,
            KeyOrder::Hashed => mix64(n),
        }
    }
}

/// Hex digits in the string encoding.
const HEX_DIGITS: usize = 16;

/// A byte encoding of u64 keys that preserves order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyEncoding {
    /// 8 bytes, big-endian.
    U64BigEndian,
    /// `prefix` + 16 hex digits + filler, total length in `[min_len, max_len]`.
    Str {
        /// Constant prefix (e.g. `user`).
        prefix: Vec<u8>,
        /// Shortest encoded key; at least `prefix.len() + 16`.
        min_len: usize,
        /// Longest encoded key.
        max_len: usize,
    },
}

impl KeyEncoding {
    /// String keys of exactly `len` bytes without a prefix (`len >= 16`).
    pub fn fixed_str(len: usize) -> KeyEncoding {
        KeyEncoding::Str { prefix: Vec::new(), min_len: len, max_len: len }
    }

    /// String keys of `min_len..=max_len` bytes without a prefix.
    pub fn variable_str(min_len: usize, max_len: usize) -> KeyEncoding {
        KeyEncoding::Str { prefix: Vec::new(), min_len, max_len }
    }

    /// The encoding whose key lengths follow `size` (e.g. [`crate::KvSizes::UDB`]'s key size): 8 fixed bytes are
    /// big-endian u64s; any other size is a string key of that length (at least 16 bytes), uniform sizes spreading
    /// lengths over their range.
    pub fn for_size(size: SizeDistribution) -> Result<KeyEncoding, Error> {
        let enc = match size {
            SizeDistribution::Fixed(8) => KeyEncoding::U64BigEndian,
            SizeDistribution::Fixed(n) => KeyEncoding::fixed_str(n as usize),
            SizeDistribution::Uniform { min, max } => KeyEncoding::variable_str(min as usize, max as usize),
        };
        enc.validate()?;
        Ok(enc)
    }

    /// Checks that the lengths can hold the prefix and the hex digits.
    pub fn validate(&self) -> Result<(), Error> {
        match self {
            KeyEncoding::U64BigEndian => Ok(()),
            KeyEncoding::Str { prefix, min_len, max_len } => {
                if *min_len < prefix.len() + HEX_DIGITS {
                    return Err(Error::InvalidArgument(format!(
                        "string keys need at least {} bytes (prefix + {HEX_DIGITS} hex digits), min_len is {min_len}",
                        prefix.len() + HEX_DIGITS
                    )));
                }
                if min_len > max_len {
                    return Err(Error::InvalidArgument(format!(
                        "key length range [{min_len}, {max_len}] is empty"
                    )));
                }
                Ok(())
            }
        }
    }

    /// Appends the encoding of `key` to `out`. REQUIRES: `validate()` passed (a too-short `min_len` only makes
    /// keys longer than asked, never wrong).
    pub fn encode_into(&self, key: u64, out: &mut Vec<u8>) {
        match self {
            KeyEncoding::U64BigEndian => out.extend_from_slice(&key.to_be_bytes()),
            KeyEncoding::Str { prefix, min_len, max_len } => {
                let start = out.len();
                out.extend_from_slice(prefix);
                const HEX: &[u8; 16] = b"0123456789abcdef";
                for i in (0..HEX_DIGITS).rev() {
                    out.push(HEX[((key >> (4 * i)) & 0xf) as usize]);
                }
                let h = mix64(key);
                let span = (max_len.saturating_sub(*min_len)) as u64 + 1;
                let len = *min_len + (h % span) as usize;
                let mut filler = h;
                while out.len() - start < len {
                    out.push(b'a' + (filler % 26) as u8);
                    filler = mix64(filler);
                }
            }
        }
    }

    /// The encoding of `key`.
    pub fn encode(&self, key: u64) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.max_len());
        self.encode_into(key, &mut v);
        v
    }

    /// The key an encoding came from, or `None` if `bytes` is not an encoding of this form.
    pub fn decode(&self, bytes: &[u8]) -> Option<u64> {
        match self {
            KeyEncoding::U64BigEndian => Some(u64::from_be_bytes(bytes.try_into().ok()?)),
            KeyEncoding::Str { prefix, .. } => {
                let rest = bytes.strip_prefix(prefix.as_slice())?;
                let digits = rest.get(..HEX_DIGITS)?;
                let mut key = 0u64;
                for &d in digits {
                    let v = match d {
                        b'0'..=b'9' => d - b'0',
                        b'a'..=b'f' => d - b'a' + 10,
                        _ => return None,
                    };
                    key = (key << 4) | v as u64;
                }
                Some(key)
            }
        }
    }

    /// The longest encoding.
    pub fn max_len(&self) -> usize {
        match self {
            KeyEncoding::U64BigEndian => 8,
            KeyEncoding::Str { prefix, max_len, .. } => (*max_len).max(prefix.len() + HEX_DIGITS),
        }
    }
}

/// Fills `buf` with deterministic pseudo-random bytes for version `version` of the value of `key`, so a reader can
/// recompute what a writer stored and check it.
pub fn fill_value(key: u64, version: u64, buf: &mut [u8]) {
    let mut state = mix64(key ^ mix64(version));
    for chunk in buf.chunks_mut(8) {
        state = mix64(state);
        let bytes = state.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn encodings_preserve_order_and_round_trip() {
        let encs = [
            KeyEncoding::U64BigEndian,
            KeyEncoding::fixed_str(16),
            KeyEncoding::variable_str(16, 64),
            KeyEncoding::Str { prefix: b"user".to_vec(), min_len: 27, max_len: 27 },
        ];
        let mut rng = Rng::new(5);
        let mut keys: Vec<u64> = (0..2000).map(|_| rng.next_u64()).collect();
        keys.extend([0, 1, u64::MAX, u64::MAX - 1, 15, 16]);
        for enc in &encs {
            enc.validate().unwrap();
            let mut encoded: Vec<(Vec<u8>, u64)> = keys.iter().map(|&k| (enc.encode(k), k)).collect();
            for (bytes, k) in &encoded {
                assert_eq!(enc.decode(bytes), Some(*k));
                if let KeyEncoding::Str { min_len, max_len, .. } = enc {
                    assert!((*min_len..=*max_len).contains(&bytes.len()));
                }
            }
            encoded.sort();
            assert!(encoded.windows(2).all(|w| w[0].1 <= w[1].1), "{enc:?} does not preserve order");
        }
    }

    #[test]
    fn string_lengths_vary_but_are_stable() {
        let enc = KeyEncoding::variable_str(16, 64);
        assert_eq!(enc.encode(42), enc.encode(42));
        let lens: std::collections::BTreeSet<usize> = (0..1000u64).map(|k| enc.encode(k).len()).collect();
        assert!(lens.len() > 40);
        assert!(KeyEncoding::fixed_str(15).validate().is_err());
        assert!(KeyEncoding::variable_str(20, 19).validate().is_err());
    }

    #[test]
    fn hashed_order_is_injective_and_spread() {
        let keys: std::collections::HashSet<u64> = (0..100_000).map(|n| KeyOrder::Hashed.key(n)).collect();
        assert_eq!(keys.len(), 100_000);
        // Spread: each eighth of the key space gets about an eighth of the keys.
        let mut buckets = [0u32; 8];
        for k in &keys {
            buckets[(k >> 61) as usize] += 1;
        }
        assert!(buckets.iter().all(|&b| (11_500..13_500).contains(&b)), "{buckets:?}");
    }

    #[test]
    fn encodings_for_table_3_sizes() {
        for (sizes, len) in
            [(crate::KvSizes::ZIPPYDB, 48), (crate::KvSizes::UDB, 27), (crate::KvSizes::SYS, 28)]
        {
            let enc = KeyEncoding::for_size(sizes.key).unwrap();
            assert_eq!(enc.encode(12345).len(), len);
        }
        assert_eq!(KeyEncoding::for_size(SizeDistribution::Fixed(8)).unwrap(), KeyEncoding::U64BigEndian);
        assert!(KeyEncoding::for_size(SizeDistribution::Fixed(12)).is_err());
        let enc = KeyEncoding::for_size(SizeDistribution::Uniform { min: 16, max: 64 }).unwrap();
        assert!((16..=64).contains(&enc.encode(7).len()));
    }

    #[test]
    fn values_are_deterministic() {
        let mut a = [0u8; 13];
        let mut b = [0u8; 13];
        fill_value(1, 2, &mut a);
        fill_value(1, 2, &mut b);
        assert_eq!(a, b);
        fill_value(1, 3, &mut b);
        assert_ne!(a, b);
    }
}
