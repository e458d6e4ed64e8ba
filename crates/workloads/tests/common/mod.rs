//! Shared helpers for the integration tests: seeds and scale from the environment.
#![allow(dead_code)]

/// Seeds to run randomized tests with: `RANGEDB_SEED` alone when set, else a fixed default plus a few.
pub fn seeds() -> Vec<u64> {
    testkit::seeds(&[0x5EED, 1, 2])
}

/// `RANGEDB_TEST_SCALE` (default 1): multiplies sample counts.
pub fn scale() -> u64 {
    testkit::scale() as u64
}

/// Runs `f` for every seed, naming the seed if it panics.
pub fn for_each_seed(mut f: impl FnMut(u64)) {
    for seed in seeds() {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(seed)));
        if let Err(e) = result {
            eprintln!("failed with RANGEDB_SEED={seed}");
            std::panic::resume_unwind(e);
        }
    }
}
