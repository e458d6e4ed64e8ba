//! Counters of a volume, readable through the public API.

/// Counters since the volume was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Write requests (after splitting partial blocks).
    pub writes: u64,
    /// Blocks written by clients.
    pub blocks_written: u64,
    /// Delete requests (TRIM, WRITE_ZEROES).
    pub deletes: u64,
    /// Read requests.
    pub reads: u64,
    /// Compression units read and decompressed.
    pub units_read: u64,
    /// Stored bytes of the units read (headers included): with the bytes asked for, the read amplification.
    pub unit_bytes_read: u64,
    /// FLUSH requests.
    pub flushes: u64,
    /// Segment-cache flushes to data files.
    pub cache_flushes: u64,
    /// CWs written by those flushes (I/O compaction's output).
    pub cws_written: u64,
    /// Write requests absorbed by those flushes (I/O compaction's input).
    pub writes_compacted: u64,
    /// Batches replayed from data files at open.
    pub recovered_batches: u64,
    /// Journal records replayed at open.
    pub recovered_journal_records: u64,
    /// Bytes appended to the journal (records of writes and deletes).
    pub journal_bytes_written: u64,
    /// Bytes appended to data files (batches of flushes and of garbage collection, and footers excluded).
    pub data_bytes_written: u64,
    /// Index pieces loaded from the checkpoint at open.
    pub recovered_checkpoint_pieces: u64,
    /// Recoveries of the stopped volume in place (`Volume::recover`, or by itself after running out of space);
    /// the `recovered_*` counters are the last recovery's.
    pub recoveries: u64,
    /// Index checkpoints written.
    pub checkpoints: u64,
    /// Data syncs that let the journal be emptied (at `journal_reset_bytes` and after checkpoints).
    pub data_syncs: u64,
    /// Garbage-collection rounds that relocated or removed something.
    pub gc_runs: u64,
    /// Data files removed by garbage collection.
    pub gc_files_removed: u64,
    /// Bytes of data files removed by garbage collection.
    pub gc_bytes_removed: u64,
    /// Blocks relocated by garbage collection (its write cost).
    pub gc_blocks_relocated: u64,
    /// Blocks garbage collection read but did not relocate because a newer write or delete replaced them first.
    pub gc_blocks_superseded: u64,
}
