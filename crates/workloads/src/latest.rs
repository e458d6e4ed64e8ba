//! YCSB's `SkewedLatestGenerator`: recently inserted keys are the most popular.
//!
//! A zipfian rank `z` over the keys inserted so far is subtracted from the newest key number, so the newest key is
//! the most popular, the one before it next, and so on. The item count grows with every insert; the zipfian extends
//! ζ incrementally, so each draw stays O(1) amortised.
//!
//! Deviation from YCSB (a fix): YCSB draws `z` over `lastValue` items where `lastValue` is the newest key number, so
//! `newest - z` lies in `[1, newest]` and key 0 can never be chosen. Here `z` is drawn over all `inserted` keys and
//! the result covers `[0, newest]`.

use crate::Error;
use crate::rng::Rng;
use crate::zipfian::Zipfian;

/// Chooses among key numbers `[0, inserted)`, favouring the most recent.
#[derive(Debug, Clone)]
pub struct SkewedLatest {
    zipfian: Zipfian,
}

impl SkewedLatest {
    /// With zipfian constant `theta` (YCSB: 0.99), starting with `initial` keys (at least one).
    pub fn new(initial: u64, theta: f64) -> Result<SkewedLatest, Error> {
        Ok(SkewedLatest { zipfian: Zipfian::new(0, initial.max(1) - 1, theta)? })
    }

    /// A key number in `[0, inserted)`. REQUIRES: `inserted >= 1`.
    pub fn sample(&mut self, rng: &mut Rng, inserted: u64) -> u64 {
        let inserted = inserted.max(1);
        let z = self.zipfian.sample_n(rng, inserted);
        (inserted - 1) - z
    }
}
