//! Runs the fuzz target's interpreter on seeded random inputs, so the fuzz harness is exercised by every test run.

#![allow(missing_docs, clippy::unwrap_used)]

mod common;

use rand::Rng;

#[test]
fn fuzz_interpreter_on_random_inputs() {
    common::for_each_seed(|seed| {
        let mut rng = common::rng(seed);
        for _ in 0..1000 * common::scale() {
            let len = rng.random_range(0..3000);
            let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            bptree::fuzz_support::check_ops(&data);
        }
    });
}

#[test]
fn byte_key_fuzz_interpreter_on_random_inputs() {
    common::for_each_seed(|seed| {
        let mut rng = common::rng(seed ^ 0xb1);
        for _ in 0..300 * common::scale() {
            let len = rng.random_range(0..3000);
            let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            bptree::fuzz_support::check_byte_keys(&data);
        }
    });
}
