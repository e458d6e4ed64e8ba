//! Every FlexFile decoder on arbitrary bytes: tree header, tree node, log. None may panic; what decodes must
//! re-encode to bytes that decode to the same value.
#![no_main]

use flexfile::flextree::TreeConfig;
use flexfile::log;
use flexfile::treefile::{Header, decode_node, encode_node};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(h) = Header::decode(data) {
        assert_eq!(Header::decode(&h.encode()), Some(h));
    }
    let cfg = TreeConfig { leaf_cap: 60, internal_cap: 30, boundary: 0, max_merge: 0 };
    for slot in [0u32, 7] {
        if let Ok(n) = decode_node(data, slot, &cfg) {
            let again = encode_node(&n, slot, data.len());
            assert_eq!(decode_node(&again, slot, &cfg).ok(), Some(n));
        }
    }
    let version = data.first().copied().unwrap_or(0) as u64;
    let _ = log::parse(data, version);
    let _ = log::parse(data, 1);
});
