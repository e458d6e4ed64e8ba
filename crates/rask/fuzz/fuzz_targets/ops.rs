//! Fuzzes sequences of put/delete/get on the single-threaded index (ART and BTreeMap internal nodes) against a
//! per-block model, with leaf capacity, merge threshold and GC stages taken from the input. Every operation runs
//! the structure's invariant checks (the `invariants` feature).
//!
//! Input: byte 0 = leaf capacity (2 + b % 15), byte 1 = merge threshold (b % 6, 5 = never) and, in its top bit,
//! lightweight GC off (`Options::two_stage_gc`); then 5-byte
//! records: kind (put / delete / get), first block (u16 LE, near 0 or near u64::MAX), length (1 + b % 64).
//!
//! `cargo +nightly fuzz run ops` from crates/rask.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use rask::internal::BTreeIndex;
use rask::{BlockRange, LeafHandle, Options, Rask, WriteRef};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let cap = 2 + (data[0] % 15) as usize;
    let thr = match data[1] % 6 {
        5 => usize::MAX,
        t => t as usize,
    };
    let opts = Options { leaf_capacity: cap, merge_threshold: thr, two_stage_gc: data[1] & 0x80 == 0 };
    let Ok(mut art) = Rask::<WriteRef>::new(opts.clone()) else { return };
    let Ok(mut bt) = Rask::<WriteRef, BTreeIndex<LeafHandle>>::new(opts) else { return };
    let mut model: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for (w, rec) in data[2..].chunks_exact(5).enumerate() {
        let raw = u64::from(u16::from_le_bytes([rec[1], rec[2]]));
        let first = if rec[4] & 0x80 != 0 { u64::MAX - raw } else { raw };
        let len = 1 + u64::from(rec[3] % 64);
        let Ok(range) = BlockRange::with_len(first, len) else { continue };
        match rec[0] % 4 {
            0 | 1 => {
                let v = WriteRef::new(w as u64, 0);
                art.put(range, v);
                bt.put(range, v);
                for (i, b) in (range.first()..=range.last()).enumerate() {
                    model.insert(b, (w as u64, i as u64));
                }
            }
            2 => {
                art.delete(range);
                bt.delete(range);
                for b in range.first()..=range.last() {
                    model.remove(&b);
                }
            }
            _ => {
                let want: Vec<(u64, (u64, u64))> =
                    model.range(range.first()..=range.last()).map(|(k, v)| (*k, *v)).collect();
                for got in [art.get(range), bt.get(range)] {
                    let mut blocks = Vec::new();
                    for (r, v) in got {
                        assert!(range.covers(&r));
                        for (i, b) in (r.first()..=r.last()).enumerate() {
                            blocks.push((b, (v.write, v.offset + i as u64)));
                        }
                    }
                    assert_eq!(blocks, want);
                }
            }
        }
        assert_eq!(art.check_invariants(), Ok(()));
        assert_eq!(bt.check_invariants(), Ok(()));
    }
    let all: Vec<_> = model.into_iter().collect();
    for got in [art.iter().collect::<Vec<_>>(), bt.iter().collect::<Vec<_>>()] {
        let mut blocks = Vec::new();
        for (r, v) in got {
            for (i, b) in (r.first()..=r.last()).enumerate() {
                blocks.push((b, (v.write, v.offset + i as u64)));
            }
        }
        assert_eq!(blocks, all);
    }
});
