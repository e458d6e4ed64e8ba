//! The `BTreeMap` internal index: the ablation baseline for the adaptive radix tree.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::InternalIndex;

/// Internal nodes as std's B-tree (the paper's "B-tree internal nodes" ablation).
#[derive(Debug, Clone)]
pub struct BTreeIndex<T> {
    map: BTreeMap<u64, T>,
}

impl<T> Default for BTreeIndex<T> {
    fn default() -> Self {
        BTreeIndex { map: BTreeMap::new() }
    }
}

impl<T: Copy> InternalIndex<T> for BTreeIndex<T> {
    fn insert(&mut self, key: u64, value: T) -> Option<T> {
        self.map.insert(key, value)
    }

    fn remove(&mut self, key: u64) -> Option<T> {
        self.map.remove(&key)
    }

    fn get(&self, key: u64) -> Option<T> {
        self.map.get(&key).copied()
    }

    fn predecessor(&self, key: u64) -> Option<(u64, T)> {
        self.map.range((Bound::Unbounded, Bound::Included(key))).next_back().map(|(k, v)| (*k, *v))
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    /// std does not expose its node count; this is computed from its layout (B = 6: leaf nodes of up to 11
    /// keys and values plus a parent pointer and lengths, internal nodes adding 12 edges) assuming nodes two-thirds
    /// full, so it is an estimate, unlike the other indexes' exact figures.
    fn memory_usage(&self) -> usize {
        let n = self.map.len();
        if n == 0 {
            return 0;
        }
        let leaf_node = 11 * (8 + size_of::<T>()) + 8 + 4;
        let leaves = n.div_ceil(7);
        let internal = leaves.div_ceil(7);
        leaves * leaf_node + internal * (leaf_node + 12 * 8)
    }

    fn for_each(&self, f: &mut dyn FnMut(u64, T)) {
        for (k, v) in &self.map {
            f(*k, *v);
        }
    }
}
