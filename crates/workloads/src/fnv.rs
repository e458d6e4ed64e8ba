//! YCSB's 64-bit FNV hash (`Utils.fnvhash64`), used to scramble zipfian ranks and to hash key numbers into keys.
//!
//! YCSB hashes the eight bytes of the value least significant first with FNV-1a and then takes `Math.abs` of the
//! signed result. This crate keeps the full 64 bits ([`fnv64`]) for key hashing, where an unsigned key space is
//! wanted, and offers [`fnv64_ycsb`] (the 63-bit `abs` form) where YCSB's exact values matter: the scrambled
//! zipfian generator takes it modulo the item count, so its popular items land where YCSB's do.

const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// FNV-1a over the eight little-endian bytes of `val`.
#[inline]
pub fn fnv64(mut val: u64) -> u64 {
    let mut h = FNV_OFFSET_BASIS_64;
    for _ in 0..8 {
        h ^= val & 0xff;
        val >>= 8;
        h = h.wrapping_mul(FNV_PRIME_64);
    }
    h
}

/// YCSB's `fnvhash64`: [`fnv64`] as a signed value, then its absolute value. Java's `Math.abs(Long.MIN_VALUE)` is
/// `Long.MIN_VALUE` (negative); YCSB then takes a negative remainder and emits a key below `min`. This returns the
/// magnitude instead (`2^63`), which keeps every result in range.
#[inline]
pub fn fnv64_ycsb(val: u64) -> u64 {
    (fnv64(val) as i64).unsigned_abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_reference_values() {
        assert_eq!(fnv64(0), 0xa8c7_f832_281a_39c5);
        assert_eq!(fnv64(1), 0x89cd_3129_1d2a_efa4);
        assert_eq!(fnv64(2), 0xe6bd_8644_3df8_ce07);
        // Math.abs of the signed value.
        assert_eq!(fnv64_ycsb(0), (0xa8c7_f832_281a_39c5u64 as i64).unsigned_abs());
    }
}
