//! Counters of the structural work a tree has done.

/// Plain counters of structural work, readable through `stats()` on every tree so benchmarks and tests can see
/// what the paper's mechanisms did (how often the log flushed, how often a flush had to redistribute, ...).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Log flushes (Case 2 of the BPA insert).
    pub flushes: u64,
    /// Flushes that appended into the blocks (Case 2a).
    pub flush_appends: u64,
    /// Global redistributes of a leaf: Case 2b flushes, plus those done by splits, merges and block removal.
    pub redistributes: u64,
    /// Blocks sorted lazily by a range operation.
    pub block_sorts: u64,
    /// Logs sorted by a range operation or a flush.
    pub log_sorts: u64,
    /// Leaf splits.
    pub leaf_splits: u64,
    /// Leaf merges (two underfull-neighbour leaves became one).
    pub leaf_merges: u64,
    /// Leaf rebalances (an underfull leaf borrowed from a neighbour).
    pub leaf_borrows: u64,
    /// Internal node splits.
    pub internal_splits: u64,
    /// Internal node merges or borrows.
    pub internal_merges: u64,
    /// Concurrent inserts that restarted with a pessimistic (write-locked) descent.
    pub pessimistic_retries: u64,
    /// Concurrent range operations that upgraded a leaf lock from read to write to sort.
    pub lock_upgrades: u64,
}

impl Stats {
    /// Adds every counter of `other` into `self`.
    pub fn add(&mut self, other: &Stats) {
        self.flushes += other.flushes;
        self.flush_appends += other.flush_appends;
        self.redistributes += other.redistributes;
        self.block_sorts += other.block_sorts;
        self.log_sorts += other.log_sorts;
        self.leaf_splits += other.leaf_splits;
        self.leaf_merges += other.leaf_merges;
        self.leaf_borrows += other.leaf_borrows;
        self.internal_splits += other.internal_splits;
        self.internal_merges += other.internal_merges;
        self.pessimistic_retries += other.pessimistic_retries;
        self.lock_upgrades += other.lock_upgrades;
    }

    /// Whether every counter is zero.
    pub fn is_zero(&self) -> bool {
        *self == Stats::default()
    }
}
