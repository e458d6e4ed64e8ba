//! Counters every index exposes through `stats()`.

/// What the index has done since it was created. Plain counters so benchmarks and tests read them without
/// private access.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// `put` calls (deletes excluded).
    pub puts: u64,
    /// `delete` calls.
    pub deletes: u64,
    /// `get` calls (visitor and collecting forms).
    pub gets: u64,
    /// Lightweight GC runs (§5.2, first stage).
    pub gc_lightweight: u64,
    /// Lightweight GC runs that freed at least one entry (the paper's "effectiveness": 59.1 % of runs on the
    /// paper's traces, §7.5).
    pub gc_lightweight_freed: u64,
    /// Entries removed by lightweight GC (included in `gc_reclaimed`).
    pub gc_reclaimed_lightweight: u64,
    /// Normal GC runs (§5.2, second stage), including those run before a merge/resplit.
    pub gc_normal: u64,
    /// Entries removed by GC (fully covered entries and tombstones).
    pub gc_reclaimed: u64,
    /// Leaf splits (§5.3). A split that needs a second split counts twice.
    pub splits: u64,
    /// Splits that fell back to the median boundary because the NonOverlap List had one segment.
    pub median_splits: u64,
    /// Second (and further) splits needed because a new leaf overflowed.
    pub second_splits: u64,
    /// Entries divided by a split point.
    pub split_divided_entries: u64,
    /// Merges of two leaves into one (§5.4).
    pub merges: u64,
    /// Resplits of two leaves whose merged array did not fit one leaf (§5.4).
    pub resplits: u64,
    /// Adjacent entries joined through `RangeValue::merge` during merge/resplit.
    pub ranges_merged: u64,
    /// Fragmented inserts: pieces of a put or delete after the first, stored in a further leaf (§5.4 `N_frag`).
    pub fragmented_inserts: u64,
    /// Optimistic read retries (concurrent index only).
    pub read_retries: u64,
}

impl Stats {
    /// Adds `o`'s counters to these (sums of per-thread counter shards).
    pub(crate) fn add(&mut self, o: &Stats) {
        self.puts += o.puts;
        self.deletes += o.deletes;
        self.gets += o.gets;
        self.gc_lightweight += o.gc_lightweight;
        self.gc_lightweight_freed += o.gc_lightweight_freed;
        self.gc_reclaimed_lightweight += o.gc_reclaimed_lightweight;
        self.gc_normal += o.gc_normal;
        self.gc_reclaimed += o.gc_reclaimed;
        self.splits += o.splits;
        self.median_splits += o.median_splits;
        self.second_splits += o.second_splits;
        self.split_divided_entries += o.split_divided_entries;
        self.merges += o.merges;
        self.resplits += o.resplits;
        self.ranges_merged += o.ranges_merged;
        self.fragmented_inserts += o.fragmented_inserts;
        self.read_retries += o.read_retries;
    }
}
