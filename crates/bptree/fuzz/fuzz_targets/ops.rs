//! Random operation sequences against a model: `cargo +nightly fuzz run ops` from `crates/bptree/fuzz`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bptree::fuzz_support::check_ops(data);
});
