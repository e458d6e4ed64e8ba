//! The data-file batch decoder (header, op list): arbitrary bytes never panic; accepted ops re-encode exactly.
#![no_main]

use blockstore::format::{BATCH_HEADER_LEN, BatchHeader, BatchOp, OP_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((h, crc)) = BatchHeader::decode_fixed(data) else { return };
    let Some(ops) = (h.ops as usize).checked_mul(OP_LEN).and_then(|n| data.get(BATCH_HEADER_LEN..BATCH_HEADER_LEN + n))
    else {
        return;
    };
    let ok = BatchHeader::check(&data[..BATCH_HEADER_LEN], ops, crc);
    let mut decoded = Vec::new();
    for chunk in ops.chunks_exact(OP_LEN) {
        match BatchOp::decode(chunk) {
            Ok(op) => decoded.push(op),
            Err(_) => return,
        }
    }
    if ok {
        assert_eq!(h.encode(&decoded), &data[..BATCH_HEADER_LEN + ops.len()]);
    }
});
