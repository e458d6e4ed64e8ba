//! The memtable: a BP-tree from keys to [`MemValue`]s, frozen into a [`FrozenBpTree`] when full.

use bptree::{BpTree, ByteKey, FrozenBpTree, HeapSize};

/// A memtable entry: a value (possibly empty) or a point tombstone. Tombstones live only in memtables and WALs;
/// the table file holds live records only.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum MemValue {
    /// The key maps to these bytes.
    Put(Box<[u8]>),
    /// The key is deleted.
    #[default]
    Delete,
}

impl MemValue {
    /// The value, or `None` for a tombstone.
    pub fn as_value(&self) -> Option<&[u8]> {
        match self {
            MemValue::Put(v) => Some(v),
            MemValue::Delete => None,
        }
    }
}

impl HeapSize for MemValue {
    fn heap_size(&self) -> usize {
        match self {
            MemValue::Put(v) => v.len(),
            MemValue::Delete => 0,
        }
    }
}

/// The active memtable.
pub type Memtable = BpTree<ByteKey, MemValue>;
/// An immutable memtable waiting for the committer.
pub type FrozenMemtable = FrozenBpTree<ByteKey, MemValue>;
