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
