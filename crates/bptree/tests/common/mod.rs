//! Shared helpers of the integration tests: seeds and scale from the environment.

#![allow(dead_code, missing_docs)]

use rand::SeedableRng;
use rand::rngs::SmallRng;

/// Seeds to run: `RANGEDB_SEED` alone when set, else a fixed default plus a few.
pub fn seeds() -> Vec<u64> {
    testkit::seeds(&[0x5eed, 1, 2, 3])
}

/// Multiplier for test sizes from `RANGEDB_TEST_SCALE` (default 1).
pub fn scale() -> usize {
    testkit::scale()
}

pub fn rng(seed: u64) -> SmallRng {
    SmallRng::seed_from_u64(seed)
}

/// Runs `f` for every seed, printing the seed if it panics.
pub fn for_each_seed(f: impl Fn(u64)) {
    for seed in seeds() {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(seed)));
        if let Err(e) = r {
            eprintln!("failed with RANGEDB_SEED={seed}");
            std::panic::resume_unwind(e);
        }
    }
}
