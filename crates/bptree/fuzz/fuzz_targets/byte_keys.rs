//! Random operation sequences on byte-string keys against a model: `cargo +nightly fuzz run byte_keys` from
//! `crates/bptree/fuzz`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bptree::fuzz_support::check_byte_keys(data);
});
