//! RASK, the range-as-a-key index (Zhao et al., "“Range as a Key” is the Key! Fast and Compact Cloud Block Store
//! Index with RASK", FAST'26).
//!
//! A cloud block store's index maps logical blocks to where their data lives. Writes mostly cover runs of
//! consecutive blocks, so RASK indexes whole ranges: one entry per written range instead of one per block. Newer
//! writes override older ones on the blocks they share; RASK copes with the resulting overlap with log-structured
//! leaves, ablation-based search and two-stage GC, and with fragmentation across leaves with range-conscious split
//! and workload-aware merge/resplit. `docs/rask.md` maps each section of the paper to the code here.
//!
//! - [`Rask`]: the single-threaded index, generic over the value ([`RangeValue`]) and the internal index
//!   ([`internal::Art`] by default, [`internal::BTreeIndex`] for the ablation).
//! - [`ConcurrentRask`]: the thread-safe index of §6.2.
//! - [`WriteRef`]: a ready-made value, (write number, offset within the write).

mod concurrent;
mod error;
mod gc;
mod index;
pub mod internal;
#[cfg(feature = "invariants")]
mod invariants;
mod leaf;
mod merge;
mod nonoverlap;
mod options;
mod range;
mod search;
mod split;
mod stats;
mod unfound;
mod value;

pub use concurrent::ConcurrentRask;
pub use error::Error;
pub use index::{Iter, LeafView, Rask};
pub use nonoverlap::{DeletedList, NonOverlapList};
pub use options::Options;
pub use range::BlockRange;
pub use stats::Stats;
pub use unfound::UnfoundList;
pub use value::{RangeValue, WriteRef};

/// The leaf handle stored in the single-threaded index's internal nodes.
pub type LeafHandle = u32;

/// Algorithms of one leaf, exposed for golden tests of the paper's worked examples and for tools.
pub mod algo {
    pub use crate::gc::{LtMap, NormalGc, lightweight_marks, normal_gc};
    pub use crate::merge::merge_arrays;
    pub use crate::search::ablation_search;
    pub use crate::split::{SplitPoint, choose_split, divide_at};
}
