//! `Rask::put_reporting`: a put that reports the mappings it overrides, checked against a per-block model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use rask::{BlockRange, Options, RangeValue, Rask, WriteRef};

#[test]
fn put_reporting_reports_exactly_the_blocks_it_overrides() {
    let seed = testkit::seeds(&[7])[0];
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut index = Rask::<WriteRef>::new(Options::with_capacity(16)).unwrap();
    // Per block: the write id that maps it.
    let mut model: BTreeMap<u64, u64> = BTreeMap::new();
    for id in 1..=3000u64 {
        let first = next() % 2000;
        let len = 1 + next() % 40;
        let range = BlockRange::with_len(first, len).unwrap();
        let delete = next() % 5 == 0;
        let value = if delete { WriteRef::tombstone() } else { WriteRef::new(id, 0) };
        let mut reported: Vec<(u64, u64)> = Vec::new();
        index.put_reporting(range, value, |r, v| {
            for b in r.first()..=r.last() {
                reported.push((b, v.write));
            }
        });
        let expected: Vec<(u64, u64)> = model.range(first..first + len).map(|(&b, &w)| (b, w)).collect();
        assert_eq!(reported, expected, "seed {seed}: put {id} of {range:?}");
        for b in first..first + len {
            if delete {
                model.remove(&b);
            } else {
                model.insert(b, id);
            }
        }
    }
    index.check_invariants().unwrap();
}
