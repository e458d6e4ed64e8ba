//! Internal nodes: the map from leaf anchor keys to leaves (§4.1).
//!
//! RASK's leaves are found through a predecessor search over their anchor keys: the leaf for block `b` is the one
//! with the largest anchor `<= b`. The paper uses an adaptive radix tree ([`Art`]); [`BTreeIndex`] (std's
//! `BTreeMap`) is the ablation baseline. Both sit behind [`InternalIndex`], generic over the leaf handle `T`.

mod art;
mod btree;

pub use art::Art;
pub use btree::BTreeIndex;

/// An ordered map from anchor keys to leaf handles with predecessor search.
pub trait InternalIndex<T: Copy>: Default {
    /// Maps `key` to `value`, returning the previous value.
    fn insert(&mut self, key: u64, value: T) -> Option<T>;
    /// Removes `key`, returning its value.
    fn remove(&mut self, key: u64) -> Option<T>;
    /// The value of exactly `key`.
    fn get(&self, key: u64) -> Option<T>;
    /// The entry with the largest key `<= key`.
    fn predecessor(&self, key: u64) -> Option<(u64, T)>;
    /// Number of keys.
    fn len(&self) -> usize;
    /// Whether the map is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Heap bytes used by the map (not counting `size_of::<Self>()`).
    fn memory_usage(&self) -> usize;
    /// Calls `f` for every entry in ascending key order.
    fn for_each(&self, f: &mut dyn FnMut(u64, T));
}
