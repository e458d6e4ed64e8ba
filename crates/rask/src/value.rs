//! The user's value type and the two functions RASK needs from it (the paper's Fig. 12).

use crate::BlockRange;

/// A value stored for a block range.
///
/// A value usually describes a whole range (for a cloud block store: where the range's blocks live in a data
/// file), so RASK cannot cut or join values itself; it asks the value:
///
/// - [`divide`](RangeValue::divide) (the paper's `DivideValue`) gives the value of a sub-range. RASK calls it when
///   a read needs only part of a stored range, when a split or a cross-leaf put cuts a range in two, and when
///   garbage collection trims a range.
/// - [`merge`](RangeValue::merge) (the paper's `MergeRange`) joins two adjacent pieces when they come from the same
///   user write, so merge/resplit can undo fragmentation.
///
/// The paper reserves one value as the *tombstone* that `delete` stores; [`tombstone`](RangeValue::tombstone)
/// and [`is_tombstone`](RangeValue::is_tombstone) name it. Putting a tombstone value is a delete. Reserving a
/// value keeps each entry as small as the value itself (no tag word), which is the point of the index.
pub trait RangeValue: Clone {
    /// The value of `sub`, a sub-range of `range`, when `self` is the value of `range`.
    ///
    /// REQUIRES: `range.covers(&sub)`. Never called on a tombstone.
    fn divide(&self, range: BlockRange, sub: BlockRange) -> Self;

    /// The value of `range_a ∪ range_b` if the two pieces can be represented by one entry, else `None`.
    ///
    /// REQUIRES: `range_a.last() + 1 == range_b.first()`. Never called on a tombstone.
    fn merge(range_a: BlockRange, a: &Self, range_b: BlockRange, b: &Self) -> Option<Self>;

    /// The reserved value `delete` stores.
    fn tombstone() -> Self;

    /// Whether `self` is the reserved tombstone.
    fn is_tombstone(&self) -> bool;

    /// Heap bytes owned by this value (not counting `size_of::<Self>()`), for `memory_usage`. Default: none.
    fn heap_size(&self) -> usize {
        0
    }
}

/// A value naming the write that stored a block and the block's offset within that write: the value
/// `rangedb rask replay` and the tests store, and the shape of a real location (file id, offset).
///
/// Dividing shifts the offset; two pieces merge when they come from the same write at consecutive offsets.
/// `write == u64::MAX` is reserved as the tombstone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WriteRef {
    /// The write's number.
    pub write: u64,
    /// The offset of the range's first block within the write.
    pub offset: u64,
}

impl WriteRef {
    /// The value of the first block of write `write`.
    pub fn new(write: u64, offset: u64) -> WriteRef {
        WriteRef { write, offset }
    }
}

impl RangeValue for WriteRef {
    fn divide(&self, range: BlockRange, sub: BlockRange) -> Self {
        WriteRef { write: self.write, offset: self.offset + (sub.first() - range.first()) }
    }

    fn merge(range_a: BlockRange, a: &Self, _range_b: BlockRange, b: &Self) -> Option<Self> {
        (a.write == b.write && a.offset.checked_add(range_a.len()) == Some(b.offset)).then_some(*a)
    }

    fn tombstone() -> Self {
        WriteRef { write: u64::MAX, offset: 0 }
    }

    fn is_tombstone(&self) -> bool {
        self.write == u64::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_ref_divides_and_merges_consecutive_offsets() {
        let r = BlockRange::new(10, 19).unwrap();
        let v = WriteRef::new(7, 0);
        let sub = BlockRange::new(13, 15).unwrap();
        assert_eq!(v.divide(r, sub), WriteRef::new(7, 3));
        let a = BlockRange::new(10, 12).unwrap();
        let b = BlockRange::new(13, 19).unwrap();
        assert_eq!(WriteRef::merge(a, &v, b, &WriteRef::new(7, 3)), Some(v));
        assert_eq!(WriteRef::merge(a, &v, b, &WriteRef::new(7, 4)), None);
        assert_eq!(WriteRef::merge(a, &v, b, &WriteRef::new(8, 3)), None);
        assert!(WriteRef::tombstone().is_tombstone());
    }
}
