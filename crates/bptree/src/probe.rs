//! How a lookup key is compared against the keys a tree stores.
//!
//! Point operations (`get`, `get_with`, `upsert`, `remove`) take any `Q: PointProbe<K>`, seeks any `Q: Probe<K>`.
//! Every `Q` that `K` borrows as is a `Probe`, and a `PointProbe` if it has a [`Fingerprint`] (`&[u8]` for
//! `ByteKey`, `u64` for `u64`), through the blanket impls; a key type can also offer a prepared form that compares
//! faster than its borrowed slice, as [`crate::ByteKey::probe`] does.

use std::borrow::Borrow;
use std::cmp::Ordering;

/// A one-byte digest of a key. The BPA keeps one beside every stored key, so a scan of an unsorted block or of
/// the log reads a line of digests instead of a dozen lines of keys, and compares keys only where digests match.
///
/// REQUIRES: equal keys have equal fingerprints, and a key and every form it borrows as (`K: Borrow<Q>`) have the
/// same fingerprint (the tree stores `K::fingerprint` and searches with `Q::fingerprint`). Any function meeting
/// that is correct; a constant one only makes every scan compare every key, as without digests.
pub trait Fingerprint {
    /// Whether the BPA keeps this key type's digests (default `true`). Integers of up to 64 bits set `false`: a
    /// block of 32 eight-byte keys spans four lines and compares as fast as its digests would, so keeping them
    /// only cost inserts (measured: sequential `u64` inserts 15 % slower, finds unchanged).
    const STORED: bool = true;

    /// The digest.
    fn fingerprint(&self) -> u8;
}

/// Spreads every bit of `x` into the top byte (a Fibonacci-hashing multiply after folding): keys that differ
/// only in their last bytes, the usual case of sequential or decimal keys, get different digests.
#[inline]
pub(crate) fn fingerprint_u64(x: u64) -> u8 {
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8
}

/// The digest of a byte string's first sixteen bytes, zero padded, read as a big-endian integer: the form
/// [`crate::ByteKey`] keeps inline, so a `ByteKey`, its `&[u8]` and its [`crate::ByteProbe`] agree.
#[inline]
pub(crate) fn fingerprint_head(head: u128) -> u8 {
    fingerprint_u64((head as u64) ^ ((head >> 64) as u64).rotate_left(29))
}

/// `bytes`' first sixteen bytes, zero padded, as a big-endian integer.
#[inline]
pub(crate) fn head_of(bytes: &[u8]) -> u128 {
    let mut head = [0u8; 16];
    let n = bytes.len().min(16);
    head[..n].copy_from_slice(&bytes[..n]);
    u128::from_be_bytes(head)
}

impl Fingerprint for [u8] {
    #[inline]
    fn fingerprint(&self) -> u8 {
        fingerprint_head(head_of(self))
    }
}

impl Fingerprint for Vec<u8> {
    #[inline]
    fn fingerprint(&self) -> u8 {
        self.as_slice().fingerprint()
    }
}

impl Fingerprint for Box<[u8]> {
    #[inline]
    fn fingerprint(&self) -> u8 {
        (**self).fingerprint()
    }
}

impl<const N: usize> Fingerprint for [u8; N] {
    #[inline]
    fn fingerprint(&self) -> u8 {
        self.as_slice().fingerprint()
    }
}

impl Fingerprint for str {
    #[inline]
    fn fingerprint(&self) -> u8 {
        self.as_bytes().fingerprint()
    }
}

impl Fingerprint for String {
    #[inline]
    fn fingerprint(&self) -> u8 {
        self.as_bytes().fingerprint()
    }
}

macro_rules! int_fingerprint {
    ($($t:ty),*) => {$(
        impl Fingerprint for $t {
            const STORED: bool = false;

            #[inline]
            fn fingerprint(&self) -> u8 {
                // Two's complement bits: equal integers, equal digests, whatever the width.
                fingerprint_u64(*self as u64)
            }
        }
    )*};
}
int_fingerprint!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

impl Fingerprint for u128 {
    #[inline]
    fn fingerprint(&self) -> u8 {
        fingerprint_head(*self)
    }
}

impl Fingerprint for i128 {
    #[inline]
    fn fingerprint(&self) -> u8 {
        fingerprint_head(*self as u128)
    }
}

/// A lookup key that can be compared with stored keys `K` in `K`'s order (seeks and descents).
pub trait Probe<K> {
    /// The probe's order against `key`: `Less` when the probe sorts before `key`.
    fn cmp_to(&self, key: &K) -> Ordering;

    /// Whether the probe equals `key`.
    #[inline]
    fn eq_to(&self, key: &K) -> bool {
        self.cmp_to(key).is_eq()
    }
}

impl<Q: Ord + ?Sized, K: Borrow<Q>> Probe<K> for Q {
    #[inline]
    fn cmp_to(&self, key: &K) -> Ordering {
        self.cmp(key.borrow())
    }

    #[inline]
    fn eq_to(&self, key: &K) -> bool {
        self == key.borrow()
    }
}

/// A probe for point operations (`get`, `remove`, `upsert`): it also knows the [`Fingerprint`] of the key it
/// stands for, which the BPA's equality scans filter on.
pub trait PointProbe<K>: Probe<K> {
    /// The fingerprint of the key the probe stands for. REQUIRES: equal to `key.fingerprint()` of every stored
    /// `key` the probe equals (see [`Fingerprint`]).
    fn key_fingerprint(&self) -> u8;
}

impl<Q: Ord + Fingerprint + ?Sized, K: Borrow<Q>> PointProbe<K> for Q {
    #[inline]
    fn key_fingerprint(&self) -> u8 {
        Fingerprint::fingerprint(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrowed_forms_share_the_fingerprint() {
        for k in [&b""[..], b"a", b"abc\0", b"0123456789abcdef", b"0123456789abcdefXYZ"] {
            assert_eq!(k.fingerprint(), k.to_vec().fingerprint());
            assert_eq!(k.fingerprint(), Box::<[u8]>::from(k).fingerprint());
        }
        assert_eq!(b"0123456789abcdefXYZ".fingerprint(), b"0123456789abcdefXYZ"[..].fingerprint());
        assert_eq!("key".fingerprint(), b"key"[..].fingerprint());
        assert_eq!(7u64.fingerprint(), 7usize.fingerprint());
    }

    #[test]
    fn keys_differing_in_their_last_byte_spread() {
        // Sequential decimal keys: the digests of 256 neighbours take many values, not a handful.
        let mut seen = [false; 256];
        for i in 0..256u32 {
            seen[format!("user{i:012}").as_bytes().fingerprint() as usize] = true;
        }
        assert!(seen.iter().filter(|s| **s).count() > 120);
        let mut seen = [false; 256];
        for i in 0..256u64 {
            seen[i.fingerprint() as usize] = true;
        }
        assert!(seen.iter().filter(|s| **s).count() > 120);
    }
}
