//! A leveled LSM-tree key-value engine.
//!
//! Keys and values are byte strings ordered bytewise. Writes go to a write-ahead log (LevelDB's log format) and a
//! memtable; full memtables are flushed to sorted tables in level 0; leveled compaction (size ratio 10) merges
//! tables down. Range deletes are RocksDB-style range tombstones behind [`RangeDeleteStrategy`], so the GLORAN
//! global index can replace them. Every byte of storage goes through [`vfs`], so the engine runs under crash and
//! fault injection in tests.
//!
//! ```no_run
//! # fn main() -> lsm::Result<()> {
//! use std::sync::Arc;
//! let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
//! let db = lsm::Db::open(fs, "/tmp/db", lsm::Options { create_if_missing: true, ..Default::default() })?;
//! let w = lsm::WriteOptions::default();
//! db.put(&w, b"k1", b"v1")?;
//! db.delete_range(&w, b"a", b"k")?;
//! assert_eq!(db.get(b"k1")?, Some(b"v1".to_vec()));
//! # Ok(()) }
//! ```
//!
//! The paths (write, read, flush, compaction, recovery) are mapped to files in docs/lsm.md; the formats are in
//! docs/formats/{wal,sst,manifest}.md.

pub mod batch;
pub mod block;
pub mod bloom;
pub mod cache;
pub mod coding;
pub mod compaction;
pub mod compaction_stats;
mod db;
pub mod db_iter;
pub mod edit;
mod error;
pub mod filename;
pub mod format;
pub mod ikey;
pub mod iter;
pub mod level_iter;
pub mod memtable;
mod options;
pub mod output_cut;
pub mod picker;
pub mod props;
pub mod rangedel;
pub mod rangedel_global;
mod read_epochs;
pub mod readahead;
mod retired;
mod snapshot;
mod stats;
pub mod table;
pub mod table_cache;
mod table_spans;
pub mod tombstones;
pub mod version;
pub mod wal;

pub use batch::{MAX_KEY_LEN, MAX_VALUE_LEN, WriteBatch};
pub use compaction_stats::CompactionLevelStats;
pub use db::range_reduce::{
    LevelEstimate, RangeReduceMode, RangeReduceOptions, RangeReduceStats, SelectParams, compaction_debt,
    decision_matrix, estimate_partial, select_free_levels, select_levels,
};
pub use db::{Db, FileEntry, Recovery};
pub use db_iter::DbIter;
pub use error::{Error, Result};
pub use format::Compression;
pub use options::{CompactionPri, CpuPriority, Options, ReadOptions, WriteOptions};
pub use rangedel::{LocalTombstones, RangeDeleteStrategy};
pub use rangedel_global::{GlobalRangeDeletes, strategy_by_name};
pub use snapshot::Snapshot;
pub use stats::{LevelStats, SpaceAmp, Stats};
pub use vfs::torn::WalRecovery;
