//! Options of a FlexDB store, with the paper's and the reference implementation's defaults.

use crate::error::{Error, Result};

/// Store options. Defaults follow the paper (§5, §6.3) and the reference code.
#[derive(Clone, Debug)]
pub struct Options {
    /// Create the store if the directory holds none. Default false.
    pub create_if_missing: bool,
    /// Memtable budget: key and value bytes written (plus 16 per operation) before the memtable is frozen and
    /// committed. Default 256 MiB (the paper's evaluation setting).
    pub memtable_bytes: usize,
    /// Most keys in one interval before it splits. Default 16.
    pub interval_max_keys: usize,
    /// Most bytes in one interval before it splits. Default 16 KiB.
    pub interval_max_bytes: u64,
    /// Interval cache budget in bytes. Default 1 GiB.
    pub cache_bytes: usize,
    /// Interval cache partitions. Default 1,024; fewer are used when the budget would give a partition room for
    /// under 8 intervals of the largest size (see `cache.rs`).
    pub cache_partitions: usize,
    /// The committer releases and retakes the index lock after this many committed bytes (§5.2). Default 4 MiB.
    pub commit_lock_bytes: u64,
    /// When the committer rewrites an interval it changes as one contiguous run instead of editing its records in
    /// place. In-place updates split an interval into one FlexFile extent per updated record, and a cache miss
    /// pays one positional read per extent. Default [`Defrag::Never`]: the paper's design never rewrites untouched
    /// records, and the reference implementation's rule ([`Defrag::HalfRecords`]) nearly doubled the bytes a
    /// Zipfian load wrote for about 10 % faster reads (`docs/flexdb.md`).
    pub defrag: Defrag,
    /// Distance between interval anchors read when the index is rebuilt at open (§5.4). Default 4 KiB (the
    /// paper's smallest setting; larger values open faster and split intervals on first use).
    pub rebuild_interval: u64,
    /// Threads reading anchor keys when the index is rebuilt at open (§5.4: in parallel). Default 4.
    pub rebuild_threads: usize,
    /// Options of the table FlexFile. Default: FlexFile's defaults with 1 KiB checksum blocks and
    /// `gc_start_utilization` 1/2, the paper's low-GC data file (90 GB for 42 GB of records): the data file may
    /// grow to twice its live bytes (plus the 64 reserved segments) before GC runs, and GC then relocates
    /// segments about half empty. The paper's FlexDB experiments ran with a data file that never filled (its
    /// reference implementation collects only when an 800 GB address space runs out); at the cap itself (30/32,
    /// the paper's intensive-GC case) GC relocations were a quarter of the table bytes a 512 MiB
    /// Zipfian-composite load wrote (`docs/flexdb.md`, "Space against GC").
    pub flexfile: flexfile::Options,
    /// What recovery does with log damage a crash cannot explain (default `Strict`: fail the open with
    /// `Corruption`; `PointInTime` salvages the writes before the damage, see [`crate::Db::salvaged`]).
    pub wal_recovery: vfs::torn::WalRecovery,
    /// After a background error caused by a full disk or an exceeded quota (ENOSPC, EDQUOT), a resumer thread
    /// (and a write or flush that meets the error) tries [`crate::Db::resume`] by itself at most this often, so
    /// writes pick up again once space is freed, even if nobody writes meanwhile (default 1 s, as the LSM engine;
    /// `None`: only an explicit `resume` or a reopen, and no resumer thread). Other errors always wait
    /// for the caller: a device error may mean a failing disk.
    pub auto_resume_interval: Option<std::time::Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: false,
            memtable_bytes: 256 << 20,
            interval_max_keys: 16,
            interval_max_bytes: 16 << 10,
            cache_bytes: 1 << 30,
            cache_partitions: 1024,
            commit_lock_bytes: 4 << 20,
            defrag: Defrag::Never,
            rebuild_interval: 4 << 10,
            rebuild_threads: 4,
            flexfile: flexfile::Options {
                block_size: 1024,
                gc_start_utilization: (1, 2),
                ..flexfile::Options::default()
            },
            wal_recovery: vfs::torn::WalRecovery::Strict,
            auto_resume_interval: Some(std::time::Duration::from_secs(1)),
        }
    }
}

impl Options {
    /// Small memtable, cache and FlexFile segments: makes commits, splits, merges, evictions and FlexFile GC
    /// happen constantly in tests.
    pub fn tiny() -> Self {
        Options {
            create_if_missing: true,
            memtable_bytes: 4 << 10,
            interval_max_keys: 4,
            interval_max_bytes: 512,
            cache_bytes: 8 << 10,
            cache_partitions: 4,
            commit_lock_bytes: 2 << 10,
            defrag: Defrag::HalfRecords,
            rebuild_interval: 256,
            rebuild_threads: 3,
            flexfile: flexfile::Options::tiny(),
            wal_recovery: vfs::torn::WalRecovery::Strict,
            auto_resume_interval: Some(std::time::Duration::from_secs(1)),
        }
    }

    /// Checks the options.
    pub fn validate(&self) -> Result<()> {
        if self.memtable_bytes < 1024 {
            return Err(Error::invalid("memtable_bytes must be at least 1 KiB"));
        }
        if self.interval_max_keys < 2 || self.interval_max_bytes < 64 {
            return Err(Error::invalid("intervals must allow at least 2 keys and 64 bytes"));
        }
        if self.cache_partitions == 0
            || self.commit_lock_bytes == 0
            || self.rebuild_interval == 0
            || self.rebuild_threads == 0
        {
            return Err(Error::invalid(
                "cache_partitions, commit_lock_bytes, rebuild_interval and rebuild_threads must be positive",
            ));
        }
        self.flexfile.validate()?;
        Ok(())
    }
}

/// When the committer defragments an interval: replaces it with one contiguous run of its records (one
/// `FlexFile::replace`), writing its unchanged records again, so later cache misses read it with one positional
/// read. Checked each time a commit changes the interval, against its current extent count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Defrag {
    /// Never: records are always edited in place and untouched records are never rewritten.
    Never,
    /// When the interval spans more extents than half its records (before the commit's changes). The reference
    /// implementation measures the extents when it loads an interval into its cache and rewrites the interval at
    /// the next write to it, with this bound; the paper calls it defragmentation based on access locality.
    HalfRecords,
    /// When the interval spans more than this many extents (a fixed bound; `Extents(0)` rewrites every interval a
    /// commit changes).
    Extents(usize),
}

impl Defrag {
    /// Whether an interval of `records` records in `extents` extents is rewritten.
    pub fn due(self, extents: usize, records: usize) -> bool {
        match self {
            Defrag::Never => false,
            Defrag::HalfRecords => extents > records / 2,
            Defrag::Extents(n) => extents > n,
        }
    }
}

/// Per-write options.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// Sync the WAL before acknowledging. Default false.
    pub sync: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defrag_rules() {
        assert!(!Defrag::Never.due(100, 2));
        // The reference's bound: more extents than half the records (integer half, as `count >> 1`).
        assert!(!Defrag::HalfRecords.due(4, 8));
        assert!(Defrag::HalfRecords.due(5, 8));
        assert!(!Defrag::HalfRecords.due(1, 3));
        assert!(Defrag::HalfRecords.due(2, 3));
        assert!(!Defrag::HalfRecords.due(0, 0));
        assert!(!Defrag::Extents(2).due(2, 8));
        assert!(Defrag::Extents(2).due(3, 8));
        assert_eq!(Options::default().defrag, Defrag::Never);
    }
}
