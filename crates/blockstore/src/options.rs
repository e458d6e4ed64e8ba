//! Tuning knobs of the block store.

use crate::{Error, Result};

/// Bytes per block: the unit of the index, the segment cache and the compression units.
pub const BLOCK_SIZE: usize = 4096;

/// Largest volume [`Store::create_volume`](crate::Store::create_volume) makes: the last multiple of
/// [`BLOCK_SIZE`] not above 2^63 - 1. A volume is a disk, and its users (NBD clients, kernels, image tools) hold
/// byte offsets as signed 64-bit integers; a larger volume could be created but never served.
pub const MAX_VOLUME_SIZE: u64 = nbd::protocol::MAX_EXPORT_SIZE / BLOCK_SIZE as u64 * BLOCK_SIZE as u64;

/// How many data-file handles a volume keeps open: `max_open_data_files`, and at most a quarter of the process's
/// open-file limit `process_limit`; at least one.
pub(crate) fn open_data_files(max_open_data_files: usize, process_limit: Option<u64>) -> usize {
    let quarter = process_limit.map_or(usize::MAX, |l| usize::try_from(l / 4).unwrap_or(usize::MAX));
    max_open_data_files.min(quarter).max(1)
}

/// Options of a store. Defaults follow the paper (§2.1: 512 KiB segment cache, 4-block compression units).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Bytes of written blocks a volume's segment cache holds before it is flushed to a data file (the I/O
    /// compaction window). Default 512 KiB (128 blocks), the paper's threshold. Range 4 KiB..=64 MiB.
    pub segment_cache_bytes: usize,
    /// The cache is also flushed once the journal holds this many bytes (overwrites of cached blocks grow the
    /// journal but not the cache). Default 4 × `segment_cache_bytes`; must be >= `segment_cache_bytes`.
    pub journal_flush_bytes: u64,
    /// Batches are appended to data files without syncing them; the journal keeps their writes until a data
    /// sync makes them durable. Once the journal holds this many bytes after a segment-cache flush, the data file
    /// is synced and the journal emptied (so do an index checkpoint and a data file's sealing). Larger values sync
    /// less often and lengthen the journal recovery reads. Default 32 MiB; must be >= `journal_flush_bytes`.
    pub journal_reset_bytes: u64,
    /// A data file is sealed and a new one started once it reaches this size. Default 64 MiB; at least 64 KiB.
    pub data_file_bytes: u64,
    /// An index checkpoint is written after a segment-cache flush once this many bytes of batches were appended
    /// since the last one (or four times the last checkpoint's size, if larger, so checkpointing stays a bounded
    /// fraction of the write traffic). Recovery replays only the batches after the checkpoint. Default 64 MiB;
    /// at least 4 KiB.
    pub checkpoint_bytes: u64,
    /// Garbage collection: a sealed data file whose live blocks are at most this percentage of the blocks written
    /// into it is a candidate; after a segment-cache flush that leaves a candidate, the emptiest candidates are
    /// collected (their live ranges relocated, then the files deleted). 0 disables automatic collection
    /// (`Volume::collect_garbage` still runs it). Default 50; at most 100.
    pub gc_live_percent: u32,
    /// Automatic collection relocates live data only once the sealed data files' dead blocks reach this
    /// percentage of the volume's live blocks, and at least one data file's worth; below that it only removes
    /// sealed files with no live block left, which copies nothing. Data that is about to be overwritten anyway
    /// (a sequential rewrite kills a file a little at a time) is then not copied first, and collection works on
    /// emptier files; the price is disk space: when files empty unevenly, the data files hold up to about
    /// (1 + this/100) × the live data plus two files. 0: collect whenever a candidate exists. Default 50; at most
    /// 1000.
    pub gc_garbage_percent: u32,
    /// A full segment cache is frozen and written to a data file by the volume's flusher thread (I/O compaction,
    /// compression and the data-file write leave the writing thread), while a new cache takes writes; a writer
    /// waits only when that cache fills twice over before the flusher is done. Journal resets and checkpoints
    /// still run under the volume lock. false: the writer flushes a full cache itself (deterministic, for tests).
    /// Default true.
    pub flush_in_background: bool,
    /// Automatic collection rounds run on a short-lived background thread (one round at a time), so the write
    /// whose flush found a candidate does not wait for the copying; the round's install still takes the volume
    /// lock. false: the round runs inside that write after it released the lock (deterministic, for tests).
    /// Default true.
    pub gc_in_background: bool,
    /// Longest compression unit in blocks: a CW longer than this is cut into several units. Default 32 (128 KiB).
    /// LZ4 decodes a unit from its start, so a read that starts inside a long unit decodes up to all of it; the
    /// paper accepts that because EBS reads nearly always start at a CW's beginning (§3.2), but a random-read
    /// client (fio, a database's page reads) would decode 512 KiB on average with 1 MiB units. 128 KiB, the
    /// common largest request size, keeps long sequential writes at a few index entries per MiB.
    pub max_unit_blocks: u32,
    /// Data files other than the current one whose handles stay open; a read of another one opens it again
    /// (closing the least recently used). Clipped at open to a quarter of the process's open-file limit, which
    /// the volume shares with the journal, clients' sockets and other volumes. Default 256 (16 GiB of data
    /// files at the default size); at least 1.
    pub max_open_data_files: usize,
    /// Options of the RASK index of each volume (the paper's defaults).
    pub index: rask::Options,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            segment_cache_bytes: 512 << 10,
            journal_flush_bytes: 4 * (512 << 10),
            journal_reset_bytes: 32 << 20,
            data_file_bytes: 64 << 20,
            checkpoint_bytes: 64 << 20,
            gc_live_percent: 50,
            gc_garbage_percent: 50,
            flush_in_background: true,
            gc_in_background: true,
            max_unit_blocks: 32,
            max_open_data_files: 256,
            index: rask::Options::default(),
        }
    }
}

impl Options {
    /// Checks every field against its documented bounds.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if !(BLOCK_SIZE..=64 << 20).contains(&self.segment_cache_bytes) {
            return bad(format!(
                "segment_cache_bytes {} is outside 4 KiB..=64 MiB",
                self.segment_cache_bytes
            ));
        }
        if self.journal_flush_bytes < self.segment_cache_bytes as u64 {
            return bad("journal_flush_bytes must be >= segment_cache_bytes".into());
        }
        if self.journal_reset_bytes < self.journal_flush_bytes {
            return bad("journal_reset_bytes must be >= journal_flush_bytes".into());
        }
        if self.data_file_bytes < 64 << 10 {
            return bad(format!("data_file_bytes {} is below 64 KiB", self.data_file_bytes));
        }
        if self.checkpoint_bytes < BLOCK_SIZE as u64 {
            return bad(format!("checkpoint_bytes {} is below 4 KiB", self.checkpoint_bytes));
        }
        if self.gc_live_percent > 100 {
            return bad(format!("gc_live_percent {} is above 100", self.gc_live_percent));
        }
        if self.gc_garbage_percent > 1000 {
            return bad(format!("gc_garbage_percent {} is above 1000", self.gc_garbage_percent));
        }
        if !(4..=4096).contains(&self.max_unit_blocks) {
            return bad(format!("max_unit_blocks {} is outside 4..=4096", self.max_unit_blocks));
        }
        if self.max_open_data_files == 0 {
            return bad("max_open_data_files must be at least 1".into());
        }
        self.index.validate().map_err(|e| Error::InvalidArgument(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_data_files_leave_the_process_three_quarters_of_its_limit() {
        assert_eq!(open_data_files(256, None), 256);
        assert_eq!(open_data_files(256, Some(1 << 20)), 256);
        assert_eq!(open_data_files(256, Some(1024)), 256);
        assert_eq!(open_data_files(256, Some(128)), 32);
        assert_eq!(open_data_files(256, Some(2)), 1, "at least one");
        let zero = Options { max_open_data_files: 0, ..Options::default() };
        assert!(matches!(zero.validate(), Err(Error::InvalidArgument(_))));
    }
}
