//! The operation interpreter behind the fuzz target (`crates/bptree/fuzz`), also run by the test suite on
//! random inputs so it never rots.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::{BpTree, Options};

/// Interprets `data` as a sequence of operations on a tree with tiny leaves and on a `BTreeMap`, and panics on
/// the first disagreement or broken invariant. Every input is valid: bytes are consumed three at a time.
pub fn check_ops(data: &[u8]) {
    let Some((&cfg, data)) = data.split_first() else { return };
    let opts = Options {
        log_size: 2 + usize::from(cfg & 3),
        num_blocks: 1 + usize::from((cfg >> 2) & 3),
        block_size: 2 + usize::from((cfg >> 4) & 3),
        internal_bytes: usize::from(cfg >> 6) * 40,
        ..Options::default()
    };
    let Ok(mut t) = BpTree::<u16, u16>::with_options(opts) else { return };
    let mut m: BTreeMap<u16, u16> = BTreeMap::new();
    for (i, op) in data.chunks_exact(3).enumerate() {
        let k = u16::from(op[1]) | (u16::from(op[2] & 3) << 8);
        match op[0] % 6 {
            0 | 1 => assert_eq!(t.insert(k, i as u16), m.insert(k, i as u16)),
            2 => assert_eq!(t.remove(&k), m.remove(&k)),
            3 => assert_eq!(t.get(&k), m.get(&k)),
            4 => {
                let len = usize::from(op[2] >> 2);
                let mut got = Vec::new();
                t.iterate_range(Bound::Included(&k), len, |k, v| got.push((*k, *v)));
                let want: Vec<_> = m.range(k..).take(len).map(|(a, b)| (*a, *b)).collect();
                assert_eq!(got, want);
            }
            _ => {
                let hi = k.saturating_add(u16::from(op[2] >> 2) * 4);
                let got: Vec<_> = t.range(k..hi).rev().map(|(a, b)| (*a, *b)).collect();
                let want: Vec<_> = m.range(k..hi).rev().map(|(a, b)| (*a, *b)).collect();
                assert_eq!(got, want);
                let mut mapped = Vec::new();
                t.map_range(k..hi, |a, b| mapped.push((*a, *b)));
                mapped.sort();
                let mut fwd = want;
                fwd.reverse();
                assert_eq!(mapped, fwd);
            }
        }
        assert_eq!(t.len(), m.len());
    }
    if let Err(e) = t.check_invariants() {
        panic!("invariant violated: {e}");
    }
    assert!(t.iter().map(|(a, b)| (*a, *b)).eq(m.into_iter()));
}

/// Like [`check_ops`] with [`ByteKey`](crate::ByteKey) keys against `BTreeMap<Vec<u8>, u16>`: exercises the key's
/// inline and heap forms (and its `unsafe` allocation code) through every tree operation, including the moves,
/// clones and drops that flushes, splits and merges do. Bytes are consumed four at a time: an operation, a key
/// length (0-16), a fill byte from a 3-letter alphabet (so keys share long prefixes) and a last byte.
pub fn check_byte_keys(data: &[u8]) {
    use crate::ByteKey;
    let Some((&cfg, data)) = data.split_first() else { return };
    let opts = Options {
        log_size: 2 + usize::from(cfg & 3),
        num_blocks: 1 + usize::from((cfg >> 2) & 3),
        block_size: 2 + usize::from((cfg >> 4) & 3),
        internal_bytes: usize::from(cfg >> 6) * 40,
        ..Options::default()
    };
    let Ok(mut t) = BpTree::<ByteKey, u16>::with_options(opts) else { return };
    let mut m: BTreeMap<Vec<u8>, u16> = BTreeMap::new();
    for (i, op) in data.chunks_exact(4).enumerate() {
        let len = usize::from(op[1] % 17);
        let fill = [0u8, b'k', 0xff][usize::from(op[2] % 3)];
        let k: Vec<u8> = (0..len).map(|j| if j + 1 == len { op[3] } else { fill }).collect();
        match op[0] % 5 {
            0 | 1 => assert_eq!(t.insert(ByteKey::new(&k), i as u16), m.insert(k, i as u16)),
            2 => assert_eq!(t.remove(&k[..]), m.remove(&k)),
            3 => assert_eq!(t.get(&k[..]), m.get(&k)),
            _ => {
                let n = usize::from(op[2] >> 2);
                let mut got = Vec::new();
                t.iterate_range(Bound::Included(&k[..]), n, |k, v| got.push((k.as_bytes().to_vec(), *v)));
                let want: Vec<_> = m.range(k..).take(n).map(|(a, b)| (a.clone(), *b)).collect();
                assert_eq!(got, want);
            }
        }
        assert_eq!(t.len(), m.len());
    }
    if let Err(e) = t.check_invariants() {
        panic!("invariant violated: {e}");
    }
    let frozen = t.freeze();
    assert!(frozen.iter().map(|(a, b)| (a.as_bytes().to_vec(), *b)).eq(m.into_iter()));
}
