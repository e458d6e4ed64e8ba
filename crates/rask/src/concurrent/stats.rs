//! Counters of the concurrent index.

use super::sync::{AtomicU64, CachePadded, Ordering, thread_hint};
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
    gc_lightweight_freed,
    gc_reclaimed_lightweight,
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

/// Counter shards: a thread bumps the shard of its thread hint (each on its own cache lines), so per-operation
/// counting does not make every thread write one shared line; a snapshot sums the shards.
pub(crate) struct ShardedStats {
    shards: Box<[CachePadded<AtomicStats>]>,
}

impl Default for ShardedStats {
    fn default() -> Self {
        ShardedStats { shards: (0..STAT_SHARDS).map(|_| CachePadded(AtomicStats::default())).collect() }
    }
}

const STAT_SHARDS: usize = 8;

impl ShardedStats {
    /// The calling thread's shard.
    #[inline]
    pub(crate) fn local(&self) -> &AtomicStats {
        &self.shards[thread_hint() % STAT_SHARDS]
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let mut total = Stats::default();
        for s in self.shards.iter() {
            let x = s.snapshot();
            total.add(&x);
        }
        total
    }

    pub(crate) fn add(&self, s: &Stats) {
        self.local().add(s);
    }
}
