//! An EBS-style block store (the BlockServer of RASK §2.1): named fixed-size volumes whose writes go to a journal
//! and a segment cache, are compacted into consecutive writes (§3.1), stored in append-only data files as LZ4 units
//! aligned to those CWs (§3.2), and indexed by RASK with one entry per CW. `docs/blockstore.md` is the design;
//! `docs/formats/blockstore.md` the byte layouts.
//!
//! - [`Store`]: a directory of volumes. [`Volume`]: one virtual disk; implements [`nbd::BlockDevice`].

mod cache;
pub mod datafile;
mod device;
mod error;
pub mod format;
mod gc;
mod journal;
mod location;
mod options;
mod read_plan;
mod stats;
mod store;
mod volume;

pub use cache::{Cw, SegmentCache};
pub use datafile::DataFileInfo;
pub use error::{Error, Result};
pub use format::{Checkpoint, Footer, Piece, SyncMark};
pub use gc::GcReport;
pub use journal::{JournalOp, decode_record, encode_record};
pub use location::Location;
pub use options::{BLOCK_SIZE, MAX_VOLUME_SIZE, Options};
pub use stats::Stats;
pub use store::{Store, validate_volume_name};
pub use volume::{CHECKPOINT_FILE, Health, SYNCED_FILE, Volume, VolumeInfo};
