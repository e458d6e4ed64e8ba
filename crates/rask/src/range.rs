//! Inclusive block ranges, the keys of RASK.

use std::fmt;

use crate::Error;

/// An inclusive range of block addresses `[first, last]`.
///
/// The paper writes it `[l, r]`; "range key" means the left bound. A `BlockRange` is never empty: construction
/// checks `first <= last`, so every range held by the index covers at least one block.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct BlockRange {
    first: u64,
    last: u64,
}

impl BlockRange {
    /// The range `[first, last]`; `InvalidRange` when `first > last`.
    pub fn new(first: u64, last: u64) -> Result<BlockRange, Error> {
        if first > last {
            return Err(Error::InvalidRange { first, last });
        }
        Ok(BlockRange { first, last })
    }

    /// The range of `len` blocks starting at `first`; `InvalidRange` when `len == 0` or it passes `u64::MAX`.
    pub fn with_len(first: u64, len: u64) -> Result<BlockRange, Error> {
        match len.checked_sub(1).and_then(|l| first.checked_add(l)) {
            Some(last) => Ok(BlockRange { first, last }),
            None => Err(Error::InvalidRange { first, last: first.wrapping_add(len).wrapping_sub(1) }),
        }
    }

    /// The single block `b`.
    pub fn block(b: u64) -> BlockRange {
        BlockRange { first: b, last: b }
    }

    /// REQUIRES: `first <= last` (checked in debug builds only; for internal derived ranges).
    pub(crate) fn raw(first: u64, last: u64) -> BlockRange {
        debug_assert!(first <= last, "empty range [{first}, {last}]");
        BlockRange { first, last }
    }

    /// The whole block address space.
    pub const FULL: BlockRange = BlockRange { first: 0, last: u64::MAX };

    /// The left bound (inclusive).
    #[inline]
    pub fn first(&self) -> u64 {
        self.first
    }

    /// The right bound (inclusive).
    #[inline]
    pub fn last(&self) -> u64 {
        self.last
    }

    /// Number of blocks; saturates at `u64::MAX` for the full space.
    pub fn len(&self) -> u64 {
        (self.last - self.first).saturating_add(1)
    }

    /// Never true: a range covers at least one block. Present for API symmetry with `len`.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether `b` lies in the range.
    #[inline]
    pub fn contains_block(&self, b: u64) -> bool {
        self.first <= b && b <= self.last
    }

    /// Whether `other` lies entirely inside `self`.
    #[inline]
    pub fn covers(&self, other: &BlockRange) -> bool {
        self.first <= other.first && other.last <= self.last
    }

    /// Whether the two ranges share at least one block.
    #[inline]
    pub fn overlaps(&self, other: &BlockRange) -> bool {
        self.first <= other.last && other.first <= self.last
    }

    /// The shared blocks, if any.
    #[inline]
    pub fn intersect(&self, other: &BlockRange) -> Option<BlockRange> {
        let first = self.first.max(other.first);
        let last = self.last.min(other.last);
        (first <= last).then_some(BlockRange { first, last })
    }
}

impl fmt::Debug for BlockRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {}]", self.first, self.last)
    }
}

impl fmt::Display for BlockRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn construction_rejects_empty_and_overflowing_ranges() {
        assert!(BlockRange::new(5, 4).is_err());
        assert!(BlockRange::with_len(5, 0).is_err());
        assert!(BlockRange::with_len(u64::MAX, 2).is_err());
        assert_eq!(BlockRange::with_len(u64::MAX, 1).unwrap(), BlockRange::block(u64::MAX));
        assert_eq!(BlockRange::FULL.len(), u64::MAX);
    }

    #[test]
    fn set_relations() {
        let a = BlockRange::new(3, 9).unwrap();
        let b = BlockRange::new(9, 12).unwrap();
        assert!(a.overlaps(&b));
        assert_eq!(a.intersect(&b), Some(BlockRange::block(9)));
        assert!(!a.covers(&b));
        assert!(a.covers(&BlockRange::new(4, 9).unwrap()));
        assert_eq!(a.intersect(&BlockRange::new(10, 11).unwrap()), None);
    }
}
