//! What a FlexFile reports about itself.

use super::FlexFile;

/// Counters and shape figures, all plain numbers readable through the API.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Logical size.
    pub size: u64,
    /// Extents in the tree (holes included).
    pub extents: u64,
    /// Tree nodes.
    pub tree_nodes: u64,
    /// Segments in the data file's address space.
    pub segments: u64,
    /// Free segments.
    pub free_segments: u64,
    /// Segments holding live data (or open).
    pub used_segments: u64,
    /// Bytes mapped by data extents.
    pub live_bytes: u64,
    /// Average data-extent length in bytes (0 for no data).
    pub avg_extent_bytes: f64,
    /// Dead fraction of the used segments: `1 - live / (used * capacity)`.
    pub fragmentation: f64,
    /// GC rounds run.
    pub gc_rounds: u64,
    /// Segments GC emptied.
    pub gc_segments: u64,
    /// Bytes GC relocated.
    pub gc_bytes: u64,
    /// Bytes handed to write and insert.
    pub user_bytes: u64,
    /// Bytes written to the data file.
    pub data_bytes_written: u64,
    /// Bytes written to the log file.
    pub log_bytes_written: u64,
    /// Bytes written to the tree file.
    pub tree_bytes_written: u64,
    /// Log commits.
    pub commits: u64,
    /// Tree checkpoints.
    pub checkpoints: u64,
    /// Tree node splits.
    pub splits: u64,
    /// Tree node merges.
    pub merges: u64,
    /// Tree leaf rebases.
    pub rebases: u64,
    /// Operations replayed from the log at open (or at the last [`reload`](FlexFile::reload)).
    pub replayed_ops: u64,
    /// Bytes of a torn, never-synced final log write dropped at open (or at the last reload).
    pub torn_log_bytes: u64,
    /// Reloads in place since open. The counters above (the shape figures and the last two aside) add up
    /// across reloads.
    pub reloads: u64,
}

impl Stats {
    /// Bytes written to all three files per user byte written.
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes == 0 {
            return 0.0;
        }
        (self.data_bytes_written + self.log_bytes_written + self.tree_bytes_written) as f64
            / self.user_bytes as f64
    }
}

impl FlexFile {
    /// Counters and shape figures.
    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        let ts = self.tree.stats();
        s.size = self.tree.size();
        s.extents = self.tree.extent_count();
        s.tree_nodes = self.tree.node_count() as u64;
        s.segments = self.data.count();
        s.free_segments = self.data.free_count();
        s.used_segments = self.data.used_count();
        s.live_bytes = self.data.live_bytes();
        let mut data_extents = 0u64;
        let _ = self.tree.for_each_extent(|_, e| data_extents += u64::from(!e.is_hole()));
        s.avg_extent_bytes = if data_extents == 0 { 0.0 } else { s.live_bytes as f64 / data_extents as f64 };
        let used = s.used_segments * self.data.capacity();
        s.fragmentation = if used == 0 { 0.0 } else { 1.0 - s.live_bytes as f64 / used as f64 };
        s.data_bytes_written = self.data.stats.bytes_written;
        s.tree_bytes_written = self.tf.stats.bytes_written;
        s.checkpoints = self.tf.stats.checkpoints;
        s.splits = ts.splits;
        s.merges = ts.merges;
        s.rebases = ts.rebases;
        let r = &self.reloaded;
        for (now, before) in [
            (&mut s.gc_rounds, r.gc_rounds),
            (&mut s.gc_segments, r.gc_segments),
            (&mut s.gc_bytes, r.gc_bytes),
            (&mut s.user_bytes, r.user_bytes),
            (&mut s.data_bytes_written, r.data_bytes_written),
            (&mut s.log_bytes_written, r.log_bytes_written),
            (&mut s.tree_bytes_written, r.tree_bytes_written),
            (&mut s.commits, r.commits),
            (&mut s.checkpoints, r.checkpoints),
            (&mut s.splits, r.splits),
            (&mut s.merges, r.merges),
            (&mut s.rebases, r.rebases),
        ] {
            *now += before;
        }
        s.reloads = r.reloads;
        s
    }
}
