//! Search hints of a sparse-index node: the keys' common prefix and, per key, the next eight bytes after it as a
//! big-endian `u64`.
//!
//! A lookup in a node of heap-allocated keys pays a cache miss per probe of its binary search, and a second one
//! for the key behind the entry; most lookups of a large index miss on every node. The hints put what the probes
//! need in one contiguous array: a probe compares two integers and touches a key only when its word equals the
//! query's. Keys of one node share long prefixes (they are neighbours in key order; benchmark keys share their
//! first dozen bytes), so the words are taken after the common prefix, where the keys differ.
//!
//! Why a word comparison decides: let `a` and `b` be the key suffixes after the prefix, zero-padded to eight bytes.
//! At the first byte `j < 8` where the padded forms differ, either both are real bytes (so the keys differ there
//! the same way), or the smaller side is padding, which means its key ended at `j` and is a proper prefix of the
//! other, hence smaller. Equal words decide nothing (a key may continue with zero bytes), and fall back to the
//! full keys.

use std::cmp::Ordering;

/// See the module comment. Rebuilt whenever a node's keys change; the index's `check` verifies that.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Hints {
    prefix: Box<[u8]>,
    words: Vec<u64>,
}

/// The eight bytes of `key` from `at`, zero-padded, as a big-endian integer.
fn word(key: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    let tail = key.get(at..).unwrap_or(&[]);
    let n = tail.len().min(8);
    b[..n].copy_from_slice(&tail[..n]);
    u64::from_be_bytes(b)
}

impl Hints {
    /// The hints of `keys` (in increasing order).
    pub fn build<'a>(keys: impl Iterator<Item = &'a [u8]> + Clone) -> Hints {
        let mut it = keys.clone();
        let Some(first) = it.next() else { return Hints::default() };
        let mut cpl = first.len();
        for k in it {
            cpl = first[..cpl].iter().zip(k).take_while(|(a, b)| a == b).count();
        }
        Hints { prefix: first[..cpl].into(), words: keys.map(|k| word(k, cpl)).collect() }
    }

    /// Updates the hints for `key` inserted as the `i`-th key, when `key` starts with the common prefix: the
    /// prefix then stays the longest one, so the result equals a rebuild, at the cost of one word. Returns
    /// `false`, changing nothing, otherwise (the caller rebuilds). An interval split lands here, once per split,
    /// and a rebuild reads every key of the node.
    pub fn insert(&mut self, i: usize, key: &[u8]) -> bool {
        if self.words.is_empty() || i > self.words.len() || !key.starts_with(&self.prefix) {
            return false;
        }
        self.words.insert(i, word(key, self.prefix.len()));
        true
    }

    /// How many keys are `<= query`, `key(i)` being the node's `i`-th key. REQUIRES: the hints are those of the
    /// node's current keys.
    pub fn count_le<'a>(&self, query: &[u8], key: impl Fn(usize) -> &'a [u8]) -> usize {
        let n = self.words.len();
        let cpl = self.prefix.len();
        // Every key starts with the prefix: a query ordered apart from it is below or above them all.
        let head = &query[..cpl.min(query.len())];
        match head.cmp(&self.prefix[..head.len()]) {
            Ordering::Less => return 0,
            Ordering::Greater => return n,
            // A query that is a proper prefix of the prefix is below every key.
            Ordering::Equal if query.len() < cpl => return 0,
            Ordering::Equal => {}
        }
        let q = word(query, cpl);
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let le = match self.words[mid].cmp(&q) {
                Ordering::Less => true,
                Ordering::Greater => false,
                Ordering::Equal => key(mid) <= query,
            };
            if le {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    fn check(keys: &[Vec<u8>], queries: &[Vec<u8>]) {
        let h = Hints::build(keys.iter().map(|k| k.as_slice()));
        for q in queries {
            let want = keys.partition_point(|k| k.as_slice() <= q.as_slice());
            assert_eq!(h.count_le(q, |i| &keys[i]), want, "keys {keys:?} query {q:?}");
        }
    }

    #[test]
    fn empty_and_single_nodes() {
        check(&[], &[vec![], vec![1]]);
        check(&[vec![]], &[vec![], vec![0], vec![5]]);
        check(
            &[b"abc".to_vec()],
            &[vec![], b"ab".to_vec(), b"abc".to_vec(), b"abc\0".to_vec(), b"abd".to_vec()],
        );
    }

    /// Keys that end inside the word, continue with zero bytes, or are prefixes of one another.
    #[test]
    fn zero_bytes_and_prefixes() {
        let keys: Vec<Vec<u8>> = vec![
            b"p".to_vec(),
            b"p\0".to_vec(),
            b"p\0\0\0\0\0\0\0\0".to_vec(),
            b"p\0\0\0\0\0\0\0\0\x01".to_vec(),
            b"p\x01".to_vec(),
            b"p\x01\xff\xff\xff\xff\xff\xff\xff\xff".to_vec(),
            b"q".to_vec(),
        ];
        let mut queries = keys.clone();
        for k in &keys {
            let mut a = k.clone();
            a.push(0);
            queries.push(a);
            let mut b = k.clone();
            b.push(0xff);
            queries.push(b);
            queries.push(k[..k.len() - 1].to_vec());
        }
        check(&keys, &queries);
    }

    /// Inserting a key incrementally gives exactly the rebuilt hints whenever `insert` accepts it.
    #[test]
    fn insert_equals_rebuild_when_accepted() {
        let mut rng = SmallRng::seed_from_u64(9);
        let (mut accepted, mut refused) = (0, 0);
        for _ in 0..2000 {
            let shared: Vec<u8> = (0..rng.random_range(0..6)).map(|_| rng.random_range(0..3u8)).collect();
            let mut keys: Vec<Vec<u8>> = (0..rng.random_range(0..12))
                .map(|_| {
                    let mut k = shared.clone();
                    k.extend((0..rng.random_range(0..4)).map(|_| rng.random_range(0..3u8)));
                    k
                })
                .collect();
            keys.sort();
            keys.dedup();
            let mut h = Hints::build(keys.iter().map(|k| k.as_slice()));
            let mut new: Vec<u8> = if rng.random_bool(0.8) { shared.clone() } else { Vec::new() };
            new.extend((0..rng.random_range(0..5)).map(|_| rng.random_range(0..3u8)));
            if keys.contains(&new) {
                continue;
            }
            let i = keys.partition_point(|k| *k < new);
            let before = h.clone();
            let ok = h.insert(i, &new);
            keys.insert(i, new);
            if ok {
                accepted += 1;
                assert_eq!(h, Hints::build(keys.iter().map(|k| k.as_slice())), "keys {keys:?} at {i}");
            } else {
                refused += 1;
                assert_eq!(h, before, "a refused insert changes nothing");
            }
        }
        assert!(accepted > 100 && refused > 100, "{accepted} accepted, {refused} refused");
    }

    /// Random sorted key sets over a small alphabet with long shared prefixes, against a binary search.
    #[test]
    fn equal_to_the_partition_point_on_random_nodes() {
        let mut rng = SmallRng::seed_from_u64(3);
        for _ in 0..400 {
            let shared: Vec<u8> = (0..rng.random_range(0..20)).map(|_| rng.random_range(0..3u8)).collect();
            let key_gen = |rng: &mut SmallRng| {
                let mut k = shared.clone();
                k.extend((0..rng.random_range(0..14)).map(|_| rng.random_range(0..3u8)));
                k
            };
            let mut keys: Vec<Vec<u8>> = (0..rng.random_range(0..70)).map(|_| key_gen(&mut rng)).collect();
            if rng.random_bool(0.2) {
                keys.push(Vec::new());
            }
            keys.sort();
            keys.dedup();
            let mut queries: Vec<Vec<u8>> = (0..40).map(|_| key_gen(&mut rng)).collect();
            queries.extend(keys.iter().cloned());
            queries.push(Vec::new());
            queries.push(vec![0xff; 30]);
            check(&keys, &queries);
        }
    }
}
