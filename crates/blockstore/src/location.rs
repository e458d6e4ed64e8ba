//! The index value: where a range's blocks live.

use rask::{BlockRange, RangeValue};

/// The location of the first block of an indexed range: the data file, the compression unit inside it (byte
/// offset of its header, stored length, uncompressed length in blocks) and the block's offset inside the unit.
///
/// Later blocks of the range follow at consecutive offsets in the same unit, so `divide` only shifts
/// `block_in_unit`, and two pieces `merge` back when they are consecutive blocks of one unit (pieces of one CW
/// cut apart by a split or by an overwrite that was itself overwritten). Dividing never needs the data: this is
/// what lets one entry describe a whole CW (§3.1-3.3).
///
/// `file == u32::MAX` is the tombstone RASK stores for TRIM and WRITE_ZEROES.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    /// Data file number.
    pub file: u32,
    /// Offset of the unit's header in the data file.
    pub unit_offset: u64,
    /// Bytes of the unit's payload as stored (compressed, or raw when LZ4 did not shrink it).
    pub stored_len: u32,
    /// Blocks in the unit once decompressed.
    pub unit_blocks: u32,
    /// Offset of the range's first block inside the unit.
    pub block_in_unit: u32,
}

impl Location {
    /// The bytes the unit occupies in its data file (header and payload).
    pub fn unit_bytes(&self) -> u64 {
        crate::format::UNIT_HEADER_LEN as u64 + u64::from(self.stored_len)
    }

    /// Whether the unit is stored raw (LZ4 did not shrink it, or the probe said it would not).
    pub fn is_raw(&self) -> bool {
        u64::from(self.stored_len) == u64::from(self.unit_blocks) * crate::BLOCK_SIZE as u64
    }
}

impl RangeValue for Location {
    fn divide(&self, range: BlockRange, sub: BlockRange) -> Self {
        // The index never stores a range longer than its unit, so the shift fits in u32.
        let shift = (sub.first() - range.first()) as u32;
        Location { block_in_unit: self.block_in_unit + shift, ..*self }
    }

    fn merge(range_a: BlockRange, a: &Self, _range_b: BlockRange, b: &Self) -> Option<Self> {
        let same_unit = a.file == b.file && a.unit_offset == b.unit_offset;
        (same_unit && u64::from(a.block_in_unit) + range_a.len() == u64::from(b.block_in_unit)).then_some(*a)
    }

    fn tombstone() -> Self {
        Location { file: u32::MAX, unit_offset: 0, stored_len: 0, unit_blocks: 0, block_in_unit: 0 }
    }

    fn is_tombstone(&self) -> bool {
        self.file == u32::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divides_by_shifting_and_merges_consecutive_blocks_of_one_unit() {
        let loc = Location { file: 3, unit_offset: 100, stored_len: 50, unit_blocks: 8, block_in_unit: 0 };
        let r = BlockRange::new(10, 17).unwrap();
        let tail = loc.divide(r, BlockRange::new(13, 17).unwrap());
        assert_eq!(tail.block_in_unit, 3);
        let head = BlockRange::new(10, 12).unwrap();
        assert_eq!(Location::merge(head, &loc, BlockRange::new(13, 17).unwrap(), &tail), Some(loc));
        let other = Location { unit_offset: 200, ..tail };
        assert_eq!(Location::merge(head, &loc, BlockRange::new(13, 17).unwrap(), &other), None);
        assert!(Location::tombstone().is_tombstone());
        assert!(!loc.is_tombstone());
    }
}
