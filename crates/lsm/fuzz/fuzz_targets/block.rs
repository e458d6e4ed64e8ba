//! Block decoding and iteration on arbitrary bytes: never panics.
#![no_main]
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use lsm::block::{Block, BlockIter};

fuzz_target!(|data: &[u8]| {
    let _ = lsm::format::unwrap_block(data.to_vec());
    if let Some(b) = Block::new(data.to_vec()) {
        let b = Arc::new(b);
        for cmp in [lsm::ikey::cmp as lsm::block::Cmp, |a: &[u8], b: &[u8]| a.cmp(b)] {
            let mut it = BlockIter::new(b.clone(), cmp);
            it.seek_to_first();
            let mut n = 0;
            while it.valid() && n < 10_000 {
                it.next();
                n += 1;
            }
            it.seek_to_last();
            while it.valid() && n < 20_000 {
                it.prev();
                n += 1;
            }
            it.seek(data.get(..data.len().min(12)).unwrap_or_default());
        }
    }
});
