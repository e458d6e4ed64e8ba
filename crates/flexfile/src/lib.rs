//! FlexTree and FlexFile: a file whose bytes can be inserted and removed in the middle in O(log N).
//!
//! [`flextree::FlexTree`] is the shift-encoded extent index of the FlexFile paper (§3); it is a module of this
//! crate rather than a crate of its own because its persistent form (node slots, dirty tracking, copy-on-write
//! checkpoints) is part of FlexFile's on-disk format and shares its error type, while the in-memory tree stays
//! usable alone (the `flextree` benchmark uses it directly). See `docs/flexfile.md` for the mapping from the
//! paper to this code and `docs/formats/flexfile.md` for the byte layouts.

pub mod error;
pub mod flextree;

pub use error::{Error, Result};
pub use flextree::{FlexTree, HOLE, Piece, TreeConfig};
pub mod flexfile;
pub mod log;
pub mod options;
pub mod readahead;
pub mod segments;
pub mod treefile;

pub use crate::flexfile::{FlexFile, Reader, Stats};
pub use options::Options;
pub use readahead::ReadAhead;
