//! The byte-bounded LRU block cache shared by every table of a database.
//!
//! Keyed by `(file number, block offset)`; values are decoded blocks. Charge is the block's memory size. A single
//! mutex protects it: lookups are short and the engine runs on few cores.
//!
//! Entries live in a slab and are threaded on two intrusive doubly linked lists: the LRU list (most recent
//! first) and their file's list. A hit moves its entry to the front of the LRU list, O(1) with no allocation
//! (the LRU order used to be a `BTreeMap` by tick, a removal and an insertion per hit); dropping a deleted file's
//! blocks walks that file's list (it used to scan the whole map under the mutex for every file a compaction
//! deleted).
//!
//! What must hold (checked by `check` in tests): every slot in `map` is on the LRU list and on its file's list
//! exactly once, `files` names the head of every non-empty file list, free slots hold no block, and `usage` is the
//! sum of the cached blocks' sizes.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::block::Block;

/// No slot.
const NIL: u32 = u32::MAX;

/// Hashes file numbers and block offsets, which the engine assigns, with one folded multiply per word. std's
/// default, SipHash, guards against keys an attacker picks, at several rounds per word; a block read hashes its
/// key up to three times (lookup, insertion, an eviction). The gain was below the benchmarks' noise; it is kept
/// as the cheaper choice (its spread over hashbrown's buckets and control bytes matched a uniform hash's for
/// 200 K keys of 39 files).
#[derive(Default)]
struct BlockKeyHasher(u64);

impl Hasher for BlockKeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    fn write_u64(&mut self, x: u64) {
        let m = u128::from(self.0 ^ x) * 0x9e37_79b9_7f4a_7c15_u128;
        self.0 = (m as u64) ^ ((m >> 64) as u64);
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<BlockKeyHasher>>;

/// A block cache with a byte budget.
#[derive(Debug)]
pub struct BlockCache {
    inner: Mutex<Lru>,
    capacity: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Debug)]
struct Slot {
    key: (u64, u64),
    /// `None` while the slot is free.
    block: Option<Arc<Block>>,
    /// LRU list neighbours: `prev` was used more recently.
    prev: u32,
    next: u32,
    /// Neighbours on the file's list (no order).
    fprev: u32,
    fnext: u32,
}

#[derive(Debug)]
struct Lru {
    map: FastMap<(u64, u64), u32>,
    /// Head of each file's list.
    files: FastMap<u64, u32>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Most and least recently used.
    head: u32,
    tail: u32,
    usage: usize,
}

impl Lru {
    fn new() -> Self {
        Lru {
            map: FastMap::default(),
            files: FastMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            usage: 0,
        }
    }

    fn slot(&mut self, i: u32) -> &mut Slot {
        &mut self.slots[i as usize]
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next) = (self.slots[i as usize].prev, self.slots[i as usize].next);
        if prev == NIL {
            self.head = next;
        } else {
            self.slot(prev).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slot(next).prev = prev;
        }
    }

    fn push_front(&mut self, i: u32) {
        let head = self.head;
        let s = self.slot(i);
        s.prev = NIL;
        s.next = head;
        if head == NIL {
            self.tail = i;
        } else {
            self.slot(head).prev = i;
        }
        self.head = i;
    }

    fn file_unlink(&mut self, i: u32) {
        let s = &self.slots[i as usize];
        let (file, fprev, fnext) = (s.key.0, s.fprev, s.fnext);
        if fprev != NIL {
            self.slot(fprev).fnext = fnext;
        } else if fnext == NIL {
            self.files.remove(&file);
        } else {
            self.files.insert(file, fnext);
        }
        if fnext != NIL {
            self.slot(fnext).fprev = fprev;
        }
    }

    fn file_push(&mut self, i: u32) {
        let file = self.slots[i as usize].key.0;
        let head = self.files.get(&file).copied().unwrap_or(NIL);
        let s = self.slot(i);
        s.fprev = NIL;
        s.fnext = head;
        if head != NIL {
            self.slot(head).fprev = i;
        }
        self.files.insert(file, i);
    }

    /// Drops entry `i` from every structure and frees its slot.
    fn remove(&mut self, i: u32) {
        self.unlink(i);
        self.file_unlink(i);
        let s = self.slot(i);
        let key = s.key;
        if let Some(b) = s.block.take() {
            self.usage -= b.size();
        }
        self.map.remove(&key);
        self.free.push(i);
    }

    fn alloc(&mut self, key: (u64, u64), block: Arc<Block>) -> u32 {
        let slot = Slot { key, block: Some(block), prev: NIL, next: NIL, fprev: NIL, fnext: NIL };
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// The invariants of the module comment.
    #[cfg(test)]
    fn check(&self) {
        let mut seen = 0;
        let (mut i, mut prev) = (self.head, NIL);
        while i != NIL {
            let s = &self.slots[i as usize];
            assert_eq!(s.prev, prev);
            assert_eq!(self.map.get(&s.key), Some(&i));
            (prev, i, seen) = (i, s.next, seen + 1);
        }
        assert_eq!(self.tail, prev);
        assert_eq!(seen, self.map.len());
        let mut in_files = 0;
        for (&file, &head) in &self.files {
            let (mut i, mut prev) = (head, NIL);
            while i != NIL {
                let s = &self.slots[i as usize];
                assert_eq!((s.key.0, s.fprev), (file, prev));
                (prev, i, in_files) = (i, s.fnext, in_files + 1);
            }
        }
        assert_eq!(in_files, self.map.len());
        assert!(self.free.iter().all(|&i| self.slots[i as usize].block.is_none()));
        let usage: usize =
            self.map.values().filter_map(|&i| self.slots[i as usize].block.as_ref()).map(|b| b.size()).sum();
        assert_eq!(usage, self.usage);
    }
}

impl BlockCache {
    /// A cache holding at most `capacity` bytes of blocks (0 disables caching).
    pub fn new(capacity: usize) -> Self {
        BlockCache {
            inner: Mutex::new(Lru::new()),
            capacity,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The cached block, if present, made the most recently used.
    pub fn get(&self, file: u64, offset: u64) -> Option<Arc<Block>> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let lru = &mut *g;
        let Some(&i) = lru.map.get(&(file, offset)) else {
            drop(g);
            self.misses.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        if lru.head != i {
            lru.unlink(i);
            lru.push_front(i);
        }
        let b = lru.slots[i as usize].block.clone();
        drop(g);
        self.hits.fetch_add(1, Ordering::Relaxed);
        b
    }

    /// Inserts a block, evicting least recently used blocks beyond the budget.
    pub fn insert(&self, file: u64, offset: u64, block: Arc<Block>) {
        if self.capacity == 0 || block.size() > self.capacity {
            return;
        }
        let size = block.size();
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let lru = &mut *g;
        match lru.map.get(&(file, offset)).copied() {
            Some(i) => {
                if let Some(old) = lru.slot(i).block.replace(block) {
                    lru.usage -= old.size();
                }
                lru.unlink(i);
                lru.push_front(i);
            }
            None => {
                let i = lru.alloc((file, offset), block);
                lru.map.insert((file, offset), i);
                lru.push_front(i);
                lru.file_push(i);
            }
        }
        lru.usage += size;
        // The new block is at the front and fits alone, so eviction stops before it.
        while lru.usage > self.capacity && lru.tail != NIL {
            let t = lru.tail;
            lru.remove(t);
        }
    }

    /// Drops every block of `file` (called when the file is deleted).
    pub fn evict_file(&self, file: u64) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let lru = &mut *g;
        while let Some(&i) = lru.files.get(&file) {
            lru.remove(i);
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
        c.inner.lock().unwrap().check();
    }

    /// Against a plain model (a vector, most recent last) under random gets, inserts, replacements and file
    /// evictions, with the invariants checked after every step.
    #[test]
    fn matches_a_plain_lru_model() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        let mut rng = SmallRng::seed_from_u64(7);
        let cap = 2_000;
        let c = BlockCache::new(cap);
        let mut model: Vec<((u64, u64), usize)> = Vec::new();
        let blocks: Vec<Arc<Block>> = (0..8).map(|i| blk(20 + 40 * i)).collect();
        for step in 0..20_000 {
            let key = (rng.random_range(0..6u64), rng.random_range(0..12u64) * 4096);
            match rng.random_range(0..10) {
                0..=4 => {
                    let got = c.get(key.0, key.1).map(|b| b.size());
                    let pos = model.iter().position(|e| e.0 == key);
                    assert_eq!(got, pos.map(|p| model[p].1), "step {step}");
                    if let Some(p) = pos {
                        let e = model.remove(p);
                        model.push(e);
                    }
                }
                5..=8 => {
                    let b = blocks[rng.random_range(0..blocks.len())].clone();
                    let size = b.size();
                    c.insert(key.0, key.1, b);
                    model.retain(|e| e.0 != key);
                    model.push((key, size));
                    while model.iter().map(|e| e.1).sum::<usize>() > cap {
                        model.remove(0);
                    }
                }
                _ => {
                    c.evict_file(key.0);
                    model.retain(|e| e.0.0 != key.0);
                }
            }
            c.inner.lock().unwrap().check();
            assert_eq!(c.usage(), model.iter().map(|e| e.1).sum::<usize>());
        }
    }
}
