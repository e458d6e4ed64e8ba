//! Tuning knobs of the index.

use crate::Error;

/// Options of a RASK index. Defaults are the paper's (§7.1 "Parameters").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Entries a leaf holds before it must garbage-collect or split. Default 16 (the paper's peak-throughput
    /// setting, §7.4.1). Range 2..=4096: a leaf needs room for two entries to split, and the per-leaf searches
    /// are linear.
    pub leaf_capacity: usize,
    /// Merge/resplit trigger: a leaf is merged (or resplit) with its left neighbour once its count of fragmented
    /// inserts (`N_frag`, which deletes also bump) exceeds this. Default `leaf_capacity / 4` = 4. Zero makes every
    /// fragmented insert or delete merge; `usize::MAX` disables merging.
    pub merge_threshold: usize,
    /// Two-stage GC (§5.2): a full leaf first runs lightweight GC and runs normal GC only when that frees nothing.
    /// Default `true`. `false` sends every full leaf straight to normal GC: the "+ Normal GC" step of the
    /// paper's ablation (§7.5), against which two-stage GC gained 24.1 % throughput there.
    pub two_stage_gc: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { leaf_capacity: 16, merge_threshold: 4, two_stage_gc: true }
    }
}

impl Options {
    /// Options with `leaf_capacity` and the paper's merge threshold of a quarter of it.
    pub fn with_capacity(leaf_capacity: usize) -> Options {
        Options { leaf_capacity, merge_threshold: leaf_capacity / 4, ..Options::default() }
    }

    /// Checks every field against its documented bounds.
    pub fn validate(&self) -> Result<(), Error> {
        if !(2..=4096).contains(&self.leaf_capacity) {
            return Err(Error::InvalidOption {
                name: "leaf_capacity",
                reason: format!("{} is outside 2..=4096", self.leaf_capacity),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_papers_and_validate() {
        let o = Options::default();
        assert_eq!((o.leaf_capacity, o.merge_threshold, o.two_stage_gc), (16, 4, true));
        assert_eq!(Options::with_capacity(16), o);
        o.validate().unwrap();
        assert!(Options::with_capacity(1).validate().is_err());
        assert!(Options::with_capacity(5000).validate().is_err());
    }
}
