//! Bloom filters over user keys, one per table (RocksDB's "full filter").
//!
//! Layout: `bits: [u8; m/8] | k: u8`. Probes use double hashing `h1 + i*h2` over a 64-bit hash of the key, as
//! LevelDB does with its 32-bit hash; `k = round(bits_per_key * ln 2)` clamped to 1..=30. With the default 10 bits
//! per key the false-positive rate is about 1 %.

/// A 64-bit hash of `key` (a 64-bit variant of the murmur-style mixing LevelDB uses; stable, part of the format).
pub fn hash(key: &[u8]) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    let mut h: u64 = 0xbc9f_1d34_u64 ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let mut k = u64::from_le_bytes(w).wrapping_mul(M);
        k ^= k >> 47;
        h = (h ^ k.wrapping_mul(M)).wrapping_mul(M);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(M);
    }
    h ^= h >> 47;
    h = h.wrapping_mul(M);
    h ^ (h >> 47)
}

/// Builds a filter from key hashes.
pub fn build(hashes: &[u64], bits_per_key: usize) -> Vec<u8> {
    let k = ((bits_per_key as f64) * 0.69).round().clamp(1.0, 30.0) as u8;
    let bits = (hashes.len() * bits_per_key).max(64);
    let bytes = bits.div_ceil(8);
    let bits = bytes * 8;
    let mut out = vec![0u8; bytes + 1];
    for &h in hashes {
        let mut h1 = h as u32;
        let h2 = ((h >> 32) as u32) | 1;
        for _ in 0..k {
            let b = h1 as usize % bits;
            out[b / 8] |= 1 << (b % 8);
            h1 = h1.wrapping_add(h2);
        }
    }
    out[bytes] = k;
    out
}

/// Whether the key with hash `h` may be in the set. Malformed filters answer "maybe" (they never hide a key).
pub fn may_contain(filter: &[u8], h: u64) -> bool {
    if filter.len() < 2 {
        return true;
    }
    let k = filter[filter.len() - 1];
    if k == 0 || k > 30 {
        return true;
    }
    let bits = (filter.len() - 1) * 8;
    let mut h1 = h as u32;
    let h2 = ((h >> 32) as u32) | 1;
    for _ in 0..k {
        let b = h1 as usize % bits;
        if filter[b / 8] & (1 << (b % 8)) == 0 {
            return false;
        }
        h1 = h1.wrapping_add(h2);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_about_one_percent_false_positives() {
        let keys: Vec<Vec<u8>> = (0..10_000u32).map(|i| format!("user{i}").into_bytes()).collect();
        let hashes: Vec<u64> = keys.iter().map(|k| hash(k)).collect();
        let f = build(&hashes, 10);
        assert!(keys.iter().all(|k| may_contain(&f, hash(k))));
        let fp = (0..10_000u32).filter(|i| may_contain(&f, hash(format!("other{i}").as_bytes()))).count();
        assert!(fp < 200, "false positives {fp}");
    }
}
