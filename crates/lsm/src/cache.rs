//! The byte-bounded LRU block cache shared by every table of a database.
//!
//! Keyed by `(file number, block offset)`; values are decoded blocks. Charge is the block's memory size. A single
//! mutex protects the map: lookups are short (hash + list splice) and the engine runs on few cores. Eviction is
//! strict LRU by a monotonically increasing tick kept in a `BTreeMap` (O(log n) per touch).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::block::Block;

/// A block cache with a byte budget.
#[derive(Debug)]
pub struct BlockCache {
    inner: Mutex<Lru>,
    capacity: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Debug, Default)]
struct Lru {
    map: HashMap<(u64, u64), (Arc<Block>, u64)>,
    order: BTreeMap<u64, (u64, u64)>,
    tick: u64,
    usage: usize,
}

impl BlockCache {
    /// A cache holding at most `capacity` bytes of blocks (0 disables caching).
    pub fn new(capacity: usize) -> Self {
        BlockCache {
            inner: Mutex::new(Lru::default()),
            capacity,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The cached block, if present.
    pub fn get(&self, file: u64, offset: u64) -> Option<Arc<Block>> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let lru = &mut *g;
        lru.tick += 1;
        let tick = lru.tick;
        match lru.map.get_mut(&(file, offset)) {
            Some((b, t)) => {
                lru.order.remove(t);
                *t = tick;
                lru.order.insert(tick, (file, offset));
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(b.clone())
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Inserts a block, evicting least recently used blocks beyond the budget.
    pub fn insert(&self, file: u64, offset: u64, block: Arc<Block>) {
        if self.capacity == 0 || block.size() > self.capacity {
            return;
        }
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let lru = &mut *g;
        lru.tick += 1;
        let tick = lru.tick;
        let size = block.size();
        if let Some((old, t)) = lru.map.insert((file, offset), (block, tick)) {
            lru.order.remove(&t);
            lru.usage -= old.size();
        }
        lru.order.insert(tick, (file, offset));
        lru.usage += size;
        while lru.usage > self.capacity {
            let Some((_, key)) = lru.order.pop_first() else { break };
            if let Some((b, _)) = lru.map.remove(&key) {
                lru.usage -= b.size();
            }
        }
    }

    /// Drops every block of `file` (called when the file is deleted).
    pub fn evict_file(&self, file: u64) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let lru = &mut *g;
        let keys: Vec<_> = lru.map.keys().filter(|k| k.0 == file).copied().collect();
        for k in keys {
            if let Some((b, t)) = lru.map.remove(&k) {
                lru.order.remove(&t);
                lru.usage -= b.size();
            }
        }
    }

    /// Bytes currently cached.
    pub fn usage(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).usage
    }

    /// (hits, misses) so far.
    pub fn hit_miss(&self) -> (u64, u64) {
        (self.hits.load(Ordering::Relaxed), self.misses.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::BlockBuilder;

    fn blk(n: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(16);
        b.add(b"k", &vec![0u8; n]);
        Arc::new(Block::new(b.finish()).unwrap())
    }

    #[test]
    fn evicts_least_recent_within_budget() {
        let c = BlockCache::new(350);
        c.insert(1, 0, blk(100));
        c.insert(1, 1, blk(100));
        c.insert(1, 2, blk(100));
        assert!(c.get(1, 0).is_some());
        c.insert(1, 3, blk(100));
        assert!(c.get(1, 1).is_none());
        assert!(c.get(1, 0).is_some());
        assert!(c.usage() <= 350);
        c.evict_file(1);
        assert_eq!(c.usage(), 0);
    }
}
