//! Sorted key-value blocks with prefix compression and restart points (LevelDB's block format).
//!
//! Entry: `shared: varint | unshared: varint | value_len: varint | key[shared..] | value`. Every
//! `restart_interval`-th entry stores its whole key (shared = 0) and its offset goes into the restart array that
//! ends the block: `restarts: [u32 LE] | num_restarts: u32 LE`. Seeks binary-search the restarts, then scan.
//! Blocks are immutable once built; a [`Block`] is shared between iterators through an `Arc`.
//!
//! Blocks come from disk, so decoding never trusts them: a malformed entry makes the iterator invalid with
//! [`BlockIter::corrupt`] set, never a panic or an out-of-range slice.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::coding::{Decoder, le_u32, put_varint};

/// A key comparator.
pub type Cmp = fn(&[u8], &[u8]) -> Ordering;

/// Builds one block.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    counter: usize,
    interval: usize,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    /// A builder with a full key every `interval` entries (LevelDB: 16).
    pub fn new(interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            counter: 0,
            interval: interval.max(1),
            last_key: Vec::new(),
            entries: 0,
        }
    }

    /// Appends an entry. REQUIRES: `key` sorts after every key added before.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        let mut shared = 0;
        if self.counter < self.interval {
            shared = self.last_key.iter().zip(key).take_while(|(a, b)| a == b).count();
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
        }
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, (key.len() - shared) as u64);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.counter += 1;
        self.entries += 1;
    }

    /// The size the finished block will have.
    pub fn estimated_size(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Whether no entry was added.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The last key added.
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Finishes the block and resets the builder.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for r in &self.restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.last_key.clear();
        self.entries = 0;
        out
    }

    /// Hands back a finished block's buffer for the next block, so that a table's data blocks do not each
    /// allocate and grow their own (a tenth of a flush thread's time went to that). REQUIRES: the builder is
    /// empty (just finished).
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.buf.capacity() == 0 {
            buf.clear();
            self.buf = buf;
        }
    }
}

/// A decoded (uncompressed) block.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    restarts_off: usize,
    num_restarts: usize,
}

impl Block {
    /// Validates the restart array; `None` if the block is structurally impossible.
    pub fn new(data: Vec<u8>) -> Option<Block> {
        let n = data.len();
        let num = le_u32(&data, n.checked_sub(4)?)? as usize;
        let restarts_off = n.checked_sub(4)?.checked_sub(num.checked_mul(4)?)?;
        if num == 0 {
            return None;
        }
        for i in 0..num {
            if le_u32(&data, restarts_off + 4 * i)? as usize > restarts_off {
                return None;
            }
        }
        Some(Block { data, restarts_off, num_restarts: num })
    }

    /// Bytes held in memory (for cache accounting).
    pub fn size(&self) -> usize {
        self.data.len()
    }

    fn restart(&self, i: usize) -> usize {
        le_u32(&self.data, self.restarts_off + 4 * i).unwrap_or(0) as usize
    }
}

/// A bidirectional cursor over a block.
#[derive(Debug)]
pub struct BlockIter {
    block: Arc<Block>,
    cmp: Cmp,
    /// Offset of the current entry; `restarts_off` when invalid.
    cur: usize,
    /// Offset just past the current entry.
    next: usize,
    restart_idx: usize,
    key: Vec<u8>,
    val: (usize, usize),
    corrupt: bool,
}

impl BlockIter {
    /// An unpositioned iterator.
    pub fn new(block: Arc<Block>, cmp: Cmp) -> Self {
        let end = block.restarts_off;
        BlockIter {
            block,
            cmp,
            cur: end,
            next: end,
            restart_idx: 0,
            key: Vec::new(),
            val: (0, 0),
            corrupt: false,
        }
    }

    /// The block this cursor reads.
    pub fn block(&self) -> &Arc<Block> {
        &self.block
    }

    /// Whether a malformed entry was found.
    pub fn corrupt(&self) -> bool {
        self.corrupt
    }

    /// Whether positioned at an entry.
    pub fn valid(&self) -> bool {
        self.cur < self.block.restarts_off && !self.corrupt
    }

    /// The current key. REQUIRES: valid.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current value. REQUIRES: valid.
    pub fn value(&self) -> &[u8] {
        &self.block.data[self.val.0..self.val.1]
    }

    fn invalidate(&mut self) {
        self.cur = self.block.restarts_off;
        self.next = self.cur;
    }

    fn fail(&mut self) {
        self.corrupt = true;
        self.invalidate();
    }

    /// Decodes the entry at `self.next`, making it current. Returns false at the end or on corruption.
    fn parse_next(&mut self) -> bool {
        let end = self.block.restarts_off;
        if self.next >= end {
            self.invalidate();
            return false;
        }
        let off = self.next;
        let data = &self.block.data[..end];
        let mut d = Decoder::new(&data[off..]);
        let (Some(shared), Some(unshared), Some(vlen)) = (d.varint(), d.varint(), d.varint()) else {
            self.fail();
            return false;
        };
        let (shared, unshared, vlen) = (shared as usize, unshared as usize, vlen as usize);
        if shared > self.key.len() {
            self.fail();
            return false;
        }
        let Some(delta) = d.bytes(unshared) else {
            self.fail();
            return false;
        };
        let vstart = end - d.remaining().len();
        if d.bytes(vlen).is_none() {
            self.fail();
            return false;
        }
        self.key.truncate(shared);
        self.key.extend_from_slice(delta);
        self.val = (vstart, vstart + vlen);
        self.cur = off;
        self.next = vstart + vlen;
        while self.restart_idx + 1 < self.block.num_restarts
            && self.block.restart(self.restart_idx + 1) <= off
        {
            self.restart_idx += 1;
        }
        true
    }

    fn seek_restart(&mut self, i: usize) {
        self.key.clear();
        self.restart_idx = i;
        self.next = self.block.restart(i);
    }

    /// Positions at the first entry.
    pub fn seek_to_first(&mut self) {
        self.seek_restart(0);
        self.parse_next();
    }

    /// Positions at the last entry.
    pub fn seek_to_last(&mut self) {
        self.seek_restart(self.block.num_restarts - 1);
        while self.parse_next() && self.next < self.block.restarts_off {}
    }

    /// Positions at the first entry with key >= `target`.
    pub fn seek(&mut self, target: &[u8]) {
        // Find the last restart point whose key is < target.
        let (mut lo, mut hi) = (0usize, self.block.num_restarts - 1);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            self.seek_restart(mid);
            if !self.parse_next() {
                if self.corrupt {
                    return;
                }
                hi = mid - 1;
                continue;
            }
            if (self.cmp)(&self.key, target) == Ordering::Less {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        self.seek_restart(lo);
        while self.parse_next() {
            if (self.cmp)(&self.key, target) != Ordering::Less {
                return;
            }
        }
    }

    /// Positions at the last entry with key <= `target`.
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if self.corrupt {
            return;
        }
        if !self.valid() {
            self.seek_to_last();
        } else if (self.cmp)(&self.key, target) == Ordering::Greater {
            self.prev();
        }
    }

    /// Advances. REQUIRES: valid.
    pub fn next(&mut self) {
        self.parse_next();
    }

    /// Steps back. REQUIRES: valid.
    pub fn prev(&mut self) {
        let original = self.cur;
        while self.block.restart(self.restart_idx) >= original {
            if self.restart_idx == 0 {
                self.invalidate();
                return;
            }
            self.restart_idx -= 1;
        }
        self.seek_restart(self.restart_idx);
        while self.parse_next() && self.next < original {}
        if self.valid() && self.next != original {
            self.fail();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Kvs = Vec<(Vec<u8>, Vec<u8>)>;

    fn build(n: usize, interval: usize) -> (Arc<Block>, Kvs) {
        let mut b = BlockBuilder::new(interval);
        let kvs: Vec<_> =
            (0..n).map(|i| (format!("key{:05}", i * 2).into_bytes(), vec![i as u8; i % 7])).collect();
        for (k, v) in &kvs {
            b.add(k, v);
        }
        (Arc::new(Block::new(b.finish()).unwrap()), kvs)
    }

    #[test]
    fn forward_reverse_and_seek() {
        for interval in [1, 3, 16] {
            let (blk, kvs) = build(100, interval);
            let mut it = BlockIter::new(blk.clone(), |a, b| a.cmp(b));
            it.seek_to_first();
            let mut got = Vec::new();
            while it.valid() {
                got.push((it.key().to_vec(), it.value().to_vec()));
                it.next();
            }
            assert_eq!(got, kvs);
            it.seek_to_last();
            let mut rev = Vec::new();
            while it.valid() {
                rev.push((it.key().to_vec(), it.value().to_vec()));
                it.prev();
            }
            rev.reverse();
            assert_eq!(rev, kvs);
            it.seek(b"key00051");
            assert_eq!(it.key(), b"key00052");
            it.seek(b"key00050");
            assert_eq!(it.key(), b"key00050");
            it.seek(b"zzz");
            assert!(!it.valid());
            it.seek_for_prev(b"key00051");
            assert_eq!(it.key(), b"key00050");
            it.seek_for_prev(b"a");
            assert!(!it.valid());
            assert!(!it.corrupt());
        }
    }

    #[test]
    fn a_recycled_buffer_starts_the_next_block_empty() {
        let mut b = BlockBuilder::new(4);
        for i in 0..50u32 {
            b.add(format!("a{i:03}").as_bytes(), b"first");
        }
        let first = b.finish();
        let cap = first.capacity();
        b.recycle(first);
        b.add(b"b000", b"second");
        b.add(b"b001", b"");
        let raw = b.finish();
        assert!(raw.capacity() >= cap, "the buffer was reused");
        let mut it = BlockIter::new(Arc::new(Block::new(raw).unwrap()), |a, b| a.cmp(b));
        it.seek_to_first();
        let mut got = Vec::new();
        while it.valid() {
            got.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        assert_eq!(got, vec![(b"b000".to_vec(), b"second".to_vec()), (b"b001".to_vec(), Vec::new())]);
    }

    #[test]
    fn garbage_never_panics() {
        let (blk, _) = build(40, 4);
        let raw = blk.data.clone();
        for i in 0..raw.len() {
            for bit in [0x01u8, 0x80] {
                let mut d = raw.clone();
                d[i] ^= bit;
                if let Some(b) = Block::new(d) {
                    let mut it = BlockIter::new(Arc::new(b), |a, b| a.cmp(b));
                    it.seek_to_first();
                    let mut n = 0;
                    while it.valid() && n < 1000 {
                        it.next();
                        n += 1;
                    }
                    it.seek_to_last();
                    while it.valid() && n < 2000 {
                        it.prev();
                        n += 1;
                    }
                    it.seek(b"key00033");
                }
            }
        }
    }
}
