//! The journal record decoder: arbitrary bytes never panic, and every record it accepts re-encodes to the same
//! bytes (one byte form per record).
#![no_main]

use blockstore::{decode_record, encode_record};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut at = 0;
    while let Some((seq, op, next)) = decode_record(data, at) {
        assert!(next > at && next <= data.len());
        assert_eq!(encode_record(seq, &op), &data[at..next]);
        at = next;
    }
});
