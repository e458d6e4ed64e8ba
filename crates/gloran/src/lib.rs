//! GLORAN's global range-record index (Wang, Mo, Luo: "Don't Forget Range Delete!", §4).
//!
//! Range deletes are kept out of the LSM levels, in one index over their *effective areas*: the rectangle
//! `[start, end) × [min_seq, seq)` of keys and sequence numbers a delete invalidates ([`Area`], §4.1). The index is
//! an LSM-DRtree ([`GlobalIndex`], §4.2): an in-memory R-tree buffer ([`rtree::RTree`]) flushed into on-disk
//! Disjoint R-trees ([`drtree::DrTree`]) whose areas the heap sweep ([`disjoint`]) has cut so no two overlap, on
//! levels growing by a size ratio and merged by streaming two-way compaction. A point lookup asks the chained
//! range-aware entry validity estimator ([`estimator::Eve`], §4.3) first and reads one DR-tree node per tree level
//! only on a positive; scans use a [`Cursor`]. Garbage collection (§4.4) drops what can no longer cover an entry.
//!
//! The crate is the `global` range-delete strategy of `crates/lsm`, kept separate because it owns its files,
//! formats and compaction (`docs/gloran.md`). Formats: `docs/formats/drtree.md`.

pub mod area;
mod cursor;
pub mod disjoint;
pub mod drtree;
mod error;
pub mod estimator;
mod index;
mod inline_key;
pub mod node;
mod options;
pub mod rtree;
mod stats;

pub use area::Area;
pub use cursor::Cursor;
pub use error::{Error, Result};
pub use estimator::EstimatorOptions;
pub use index::{FlushJob, GlobalIndex, LiveFile, MAX_KEY_LEN, file_name};
pub use options::IndexOptions;
pub use stats::Stats;
