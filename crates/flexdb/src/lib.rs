//! FlexDB: a key-value store that keeps its data sorted in place in a FlexFile (Chen, Zhong, Wu: "Efficient Data
//! Management with Flexible File Address Space", ASPLOS 2023, §5).
//!
//! Writes go to a WAL and a BP-tree memtable; a full memtable is frozen and a background committer merges it
//! into the table file (a FlexFile) in place with `insert` and `collapse`: no compaction, no rewrite of
//! untouched data. A volatile sparse index (one entry per interval of at most 16 keys or 16 KiB, shift-encoded
//! offsets) finds a key's interval, and a CLOCK interval cache holds decoded intervals. See `docs/flexdb.md` for
//! the paper mapped to this code and `docs/formats/flexdb.md` for the record and WAL formats.
//!
//! ```
//! use std::sync::Arc;
//! let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
//! let db = flexdb::Db::open(fs, "db".as_ref(), flexdb::Options::tiny()).unwrap();
//! let w = flexdb::WriteOptions::default();
//! db.put(b"k", b"", w).unwrap();
//! assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b""[..]));
//! db.delete(b"k", w).unwrap();
//! assert_eq!(db.get(b"k").unwrap(), None);
//! db.close().unwrap();
//! ```

pub mod cache;
pub mod db;
pub mod error;
mod hints;
pub mod index;
pub mod interval;
pub mod memtable;
pub mod options;
pub mod record;
pub mod table;
pub mod wal;

pub use db::{Db, DbIter, Pair, Snapshot, Stats};
pub use error::{Error, Result};
pub use options::{Defrag, Options, WriteOptions};
pub use vfs::torn::WalRecovery;
