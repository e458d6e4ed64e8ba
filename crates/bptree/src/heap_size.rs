//! Heap bytes owned by keys and values, for `memory_usage`.

use std::sync::Arc;

/// Bytes a value owns on the heap beyond its inline size. Trees add it up incrementally on insert and remove, so
/// `memory_usage()` is O(1) and counts byte-string keys and values for what they really cost (a memtable decides
/// when to flush from it).
pub trait HeapSize {
    /// Heap bytes owned by `self` (0 for plain-old-data).
    fn heap_size(&self) -> usize {
        0
    }
}

macro_rules! no_heap {
    ($($t:ty),*) => { $(impl HeapSize for $t {})* };
}
no_heap!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, bool, char, ());

impl<T: Copy, const N: usize> HeapSize for [T; N] {}

impl HeapSize for Vec<u8> {
    fn heap_size(&self) -> usize {
        self.capacity()
    }
}

impl HeapSize for Box<[u8]> {
    fn heap_size(&self) -> usize {
        self.len()
    }
}

impl HeapSize for String {
    fn heap_size(&self) -> usize {
        self.capacity()
    }
}

impl HeapSize for Arc<[u8]> {
    fn heap_size(&self) -> usize {
        // Shared: counted once per holder, with the two reference counts.
        self.len() + 16
    }
}

impl<T: HeapSize> HeapSize for Option<T> {
    fn heap_size(&self) -> usize {
        self.as_ref().map_or(0, HeapSize::heap_size)
    }
}

impl<A: HeapSize, B: HeapSize> HeapSize for (A, B) {
    fn heap_size(&self) -> usize {
        self.0.heap_size() + self.1.heap_size()
    }
}
