//! Counters of the concurrent index.

use super::sync::{AtomicU64, Ordering};
use crate::Stats;

macro_rules! atomic_stats {
    ($($f:ident),*) => {
        /// `Stats` as relaxed atomic counters.
        #[derive(Default)]
        pub(crate) struct AtomicStats { $(pub(crate) $f: AtomicU64,)* }

        impl AtomicStats {
            pub(crate) fn snapshot(&self) -> Stats {
                Stats { $($f: self.$f.load(Ordering::Relaxed),)* }
            }

            /// Adds counters gathered locally (by split, which works on a plain `Stats`).
            pub(crate) fn add(&self, s: &Stats) {
                $(if s.$f != 0 { self.$f.fetch_add(s.$f, Ordering::Relaxed); })*
            }
        }
    };
}

atomic_stats!(
    puts,
    deletes,
    gets,
    gc_lightweight,
    gc_normal,
    gc_reclaimed,
    splits,
    median_splits,
    second_splits,
    split_divided_entries,
    merges,
    resplits,
    ranges_merged,
    fragmented_inserts,
    read_retries
);
