//! The index-checkpoint decoder: arbitrary bytes never panic or over-allocate; an accepted checkpoint re-encodes
//! exactly, and its pieces are disjoint, ordered and inside their units.
#![no_main]

use blockstore::Checkpoint;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = Checkpoint::decode(data) {
        assert_eq!(c.encode(), data);
        let mut end = 0;
        for p in &c.pieces {
            assert!(p.blocks > 0 && p.first >= end);
            assert!(u64::from(p.loc.block_in_unit) + p.blocks <= u64::from(p.loc.unit_blocks));
            end = p.first + p.blocks;
        }
    }
});
