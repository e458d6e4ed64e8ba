//! A read split in two: what to read is decided under the volume lock, the data-file reads and decompression run
//! after it is released.
//!
//! Why this is safe: data files are append-only, so a unit at `(file, offset)` never changes once its batch is
//! written; the plan holds the files' handles, so a file that garbage collection removes after the plan is taken
//! stays readable through them (an unlinked file keeps its bytes while a handle is open). The plan copies the
//! cached blocks it overlays, since the segment cache changes under later writes. A read therefore returns the
//! volume's contents as of the moment its plan was taken, which is all NBD asks of a read concurrent with writes,
//! and every write acknowledged before the read began is in it.

use std::collections::HashMap;
use std::sync::Arc;

use rask::BlockRange;
use vfs::File;

use crate::datafile::read_unit_from;
use crate::location::Location;
use crate::{BLOCK_SIZE, Error, Result};

/// The pieces, file handles and cached blocks one read needs.
pub(crate) struct ReadPlan {
    pub(crate) first: u64,
    /// Index pieces in block order, each with its unit's location.
    pub(crate) pieces: Vec<(BlockRange, Location)>,
    /// Handles of every data file a piece names.
    pub(crate) files: HashMap<u32, Arc<dyn File>>,
    /// Copies of the segment cache's blocks in the range (newer than the index).
    pub(crate) cached: Vec<(u64, Box<[u8]>)>,
}

impl ReadPlan {
    /// Distinct compression units the plan reads.
    pub(crate) fn unit_count(&self) -> u64 {
        let mut seen: Vec<(u32, u64)> = self.pieces.iter().map(|(_, l)| (l.file, l.unit_offset)).collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len() as u64
    }

    /// Stored bytes (headers included) of the distinct units the plan reads.
    pub(crate) fn unit_bytes(&self) -> u64 {
        let mut seen: Vec<(u32, u64, u64)> =
            self.pieces.iter().map(|(_, l)| (l.file, l.unit_offset, l.unit_bytes())).collect();
        seen.sort_unstable();
        seen.dedup();
        seen.iter().map(|&(_, _, b)| b).sum()
    }

    /// Fills `out` (`n * BLOCK_SIZE` bytes for the plan's `n` blocks): unmapped blocks read as zeros, each unit
    /// is read and decompressed once. Runs without the volume lock.
    pub(crate) fn execute(&self, out: &mut [u8]) -> Result<()> {
        out.fill(0);
        let mut units: HashMap<(u32, u64), Vec<u8>> = HashMap::new();
        for (r, loc) in &self.pieces {
            let key = (loc.file, loc.unit_offset);
            let unit = match units.entry(key) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let f = self.files.get(&loc.file).ok_or_else(|| {
                        Error::Corruption(format!("index names missing data file {}", loc.file))
                    })?;
                    e.insert(read_unit_from(f.as_ref(), loc)?)
                }
            };
            let src = loc.block_in_unit as usize * BLOCK_SIZE;
            let len = r.len() as usize * BLOCK_SIZE;
            let dst = (r.first() - self.first) as usize * BLOCK_SIZE;
            let piece = unit.get(src..src + len).ok_or_else(|| {
                Error::Corruption(format!(
                    "index piece {r:?} runs past its unit at {}:{}",
                    loc.file, loc.unit_offset
                ))
            })?;
            out[dst..dst + len].copy_from_slice(piece);
        }
        for (b, d) in &self.cached {
            let dst = (b - self.first) as usize * BLOCK_SIZE;
            out[dst..dst + BLOCK_SIZE].copy_from_slice(d);
        }
        Ok(())
    }
}
