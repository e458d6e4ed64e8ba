//! Index updates that keep the per-data-file live-block counts (`State::live`, which drive garbage
//! collection) in step, and the checks that reject a record whose blocks lie outside the volume.

use std::collections::BTreeMap;

use rask::{BlockRange, RangeValue, Rask};

use crate::format::BatchOp;
use crate::location::Location;
use crate::{Error, Result};

/// Unmaps `range` in the index, keeping `live` in step: the index reports the pieces the delete covers.
pub(crate) fn index_delete(index: &mut Rask<Location>, live: &mut BTreeMap<u32, u64>, range: BlockRange) {
    index.put_reporting(range, Location::tombstone(), |r, old| unaccount(live, r, old));
}

/// Maps `range` to `loc`, keeping `live` in step.
fn index_put(index: &mut Rask<Location>, live: &mut BTreeMap<u32, u64>, range: BlockRange, loc: Location) {
    index.put_reporting(range, loc, |r, old| unaccount(live, r, old));
    *live.entry(loc.file).or_default() += range.len();
}

fn unaccount(live: &mut BTreeMap<u32, u64>, r: BlockRange, loc: &Location) {
    if let Some(n) = live.get_mut(&loc.file) {
        *n = n.saturating_sub(r.len());
    }
}

/// Applies one batch op to the index; with `live`, keeps the accounting in step (recovery recomputes it instead).
pub(crate) fn apply_batch_op(
    index: &mut Rask<Location>,
    live: Option<&mut BTreeMap<u32, u64>>,
    file: u32,
    op: &BatchOp,
    volume_blocks: u64,
) -> Result<()> {
    match *op {
        BatchOp::Put { first, blocks, unit_offset, stored_len, unit_blocks, block_in_unit } => {
            check_blocks(first, blocks, volume_blocks)?;
            let loc = Location { file, unit_offset, stored_len, unit_blocks, block_in_unit };
            match live {
                Some(live) => index_put(index, live, block_range(first, blocks), loc),
                None => index.put(block_range(first, blocks), loc),
            }
        }
        BatchOp::Delete { first, blocks } => {
            check_blocks(first, blocks, volume_blocks)?;
            match live {
                Some(live) => index_delete(index, live, block_range(first, blocks)),
                None => index.delete(block_range(first, blocks)),
            }
        }
    }
    Ok(())
}

pub(crate) fn check_blocks(first: u64, n: u64, volume_blocks: u64) -> Result<()> {
    match first.checked_add(n) {
        Some(end) if n > 0 && end <= volume_blocks => Ok(()),
        _ => Err(Error::Corruption(format!(
            "record range {first}+{n} outside the volume's {volume_blocks} blocks"
        ))),
    }
}

/// REQUIRES: `n > 0` and `first + n` does not overflow (checked by callers).
pub(crate) fn block_range(first: u64, n: u64) -> BlockRange {
    BlockRange::with_len(first, n).unwrap_or(BlockRange::block(first))
}
