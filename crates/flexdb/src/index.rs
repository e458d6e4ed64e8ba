//! The sparse KV index (§5.1): one entry per interval of the table file, keyed by the interval's smallest key,
//! with the interval's file offset shift-encoded as in FlexTree.
//!
//! # Design
//!
//! The index is a two-level tree: a root array of leaves, each root pointer carrying a `shift`, and leaves holding
//! up to [`LEAF_MAX`] intervals `(key, partial offset, size, id)`. The effective offset of an interval is its
//! leaf's shift plus its partial offset. Growing or shrinking an interval by `d` bytes adds `d` to the partial
//! offsets after it in its leaf and to the shifts of all later leaves: keys and pivots never change, exactly as the
//! paper describes for its B+-tree-shaped index.
//!
//! Deviation: the paper's index is a multi-level B+-tree, where one shift updates O(log N) pointers. Here the
//! committer applies updates in key order, so the shifts of later leaves are *deferred*: `lazy = (c, a)` means
//! "every leaf after `c` still owes `a` bytes". Passing from one leaf to a later one settles the leaves in
//! between once, so a whole commit window costs O(touched intervals x leaf size + number of leaves), and
//! [`SparseIndex::settle`] runs before the committer releases its lock so readers never see a deferred shift (the
//! offset computation includes it anyway, so the index is correct at every moment).
//!
//! Invariants (checked by [`SparseIndex::check`]): interval 0 has the empty key and offset 0; keys strictly
//! increase; each interval starts where the previous one ends; no leaf is empty.

use crate::error::{Error, Result};

/// Most intervals per leaf before the leaf splits.
pub const LEAF_MAX: usize = 64;

/// One interval of the table file.
#[derive(Clone, Debug)]
pub struct Interval {
    /// Smallest key of the interval (empty for interval 0, which covers every key below interval 1).
    pub key: Box<[u8]>,
    poff: i64,
    /// Bytes of the interval in the table file.
    pub size: u64,
    /// Stable identity for the interval cache.
    pub id: u64,
}

#[derive(Debug)]
struct Leaf {
    shift: i64,
    ents: Vec<Interval>,
}

/// A position in the index: leaf and entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    /// Leaf index.
    pub leaf: usize,
    /// Entry within the leaf.
    pub ent: usize,
}

/// The sparse index. See the module comment.
#[derive(Debug)]
pub struct SparseIndex {
    leaves: Vec<Leaf>,
    next_id: u64,
    lazy: Option<(usize, i64)>,
    count: usize,
}

impl Default for SparseIndex {
    fn default() -> Self {
        Self::new()
    }
}

impl SparseIndex {
    /// An index of one empty interval at offset 0.
    pub fn new() -> Self {
        SparseIndex {
            leaves: vec![Leaf {
                shift: 0,
                ents: vec![Interval { key: Box::new([]), poff: 0, size: 0, id: 0 }],
            }],
            next_id: 1,
            lazy: None,
            count: 1,
        }
    }

    /// Builds an index from `(key, offset)` anchors in increasing order (the first must be `([], 0)`) and the
    /// file size. Used by recovery (§5.4).
    pub fn from_anchors(anchors: Vec<(Box<[u8]>, u64)>, file_size: u64) -> Result<Self> {
        let mut idx = SparseIndex { leaves: Vec::new(), next_id: 0, lazy: None, count: 0 };
        let n = anchors.len();
        let mut cur = Leaf { shift: 0, ents: Vec::new() };
        for i in 0..n {
            let (ref key, off) = anchors[i];
            let end = if i + 1 < n { anchors[i + 1].1 } else { file_size };
            if end < off || (i > 0 && anchors[i - 1].0 >= *key) || (i == 0 && (off != 0 || !key.is_empty())) {
                return Err(Error::corruption("index", "interval anchors out of order"));
            }
            if cur.ents.len() == LEAF_MAX / 2 {
                let shift = off as i64;
                idx.leaves.push(std::mem::replace(&mut cur, Leaf { shift, ents: Vec::new() }));
            }
            let poff = off as i64 - cur.shift;
            cur.ents.push(Interval { key: key.clone(), poff, size: end - off, id: idx.next_id });
            idx.next_id += 1;
            idx.count += 1;
        }
        if cur.ents.is_empty() {
            return Err(Error::corruption("index", "no anchors"));
        }
        idx.leaves.push(cur);
        Ok(idx)
    }

    /// Number of intervals.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Always false: interval 0 exists.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Number of leaves.
    pub fn leaf_count(&self) -> usize {
        self.leaves.len()
    }

    /// The interval whose range holds `key`: the last interval with index key `<= key`.
    pub fn locate(&self, key: &[u8]) -> Pos {
        let l = self.leaves.partition_point(|lf| &*lf.ents[0].key <= key).max(1) - 1;
        let ents = &self.leaves[l].ents;
        let e = ents.partition_point(|iv| &*iv.key <= key).max(1) - 1;
        Pos { leaf: l, ent: e }
    }

    /// The first interval.
    pub fn first(&self) -> Pos {
        Pos { leaf: 0, ent: 0 }
    }

    /// The last interval.
    pub fn last(&self) -> Pos {
        let l = self.leaves.len() - 1;
        Pos { leaf: l, ent: self.leaves[l].ents.len() - 1 }
    }

    /// The interval at `p`.
    pub fn get(&self, p: Pos) -> &Interval {
        &self.leaves[p.leaf].ents[p.ent]
    }

    /// The interval after `p`, if any.
    pub fn next(&self, p: Pos) -> Option<Pos> {
        if p.ent + 1 < self.leaves[p.leaf].ents.len() {
            Some(Pos { leaf: p.leaf, ent: p.ent + 1 })
        } else if p.leaf + 1 < self.leaves.len() {
            Some(Pos { leaf: p.leaf + 1, ent: 0 })
        } else {
            None
        }
    }

    /// The interval before `p`, if any.
    pub fn prev(&self, p: Pos) -> Option<Pos> {
        if p.ent > 0 {
            Some(Pos { leaf: p.leaf, ent: p.ent - 1 })
        } else if p.leaf > 0 {
            Some(Pos { leaf: p.leaf - 1, ent: self.leaves[p.leaf - 1].ents.len() - 1 })
        } else {
            None
        }
    }

    /// The effective file offset of the interval at `p`: leaf shift + partial offset (+ a deferred shift).
    pub fn offset(&self, p: Pos) -> u64 {
        let lf = &self.leaves[p.leaf];
        let mut off = lf.shift + lf.ents[p.ent].poff;
        if let Some((c, a)) = self.lazy
            && p.leaf > c
        {
            off += a;
        }
        off as u64
    }

    /// Settles the deferred shift up to and including leaf `l`.
    fn catch_up(&mut self, l: usize) {
        if let Some((c, a)) = self.lazy
            && l > c
        {
            for lf in &mut self.leaves[c + 1..=l] {
                lf.shift += a;
            }
            self.lazy = Some((l, a));
        }
    }

    /// Applies every deferred shift (before readers may look at the index).
    pub fn settle(&mut self) {
        if let Some((c, a)) = self.lazy.take() {
            for lf in &mut self.leaves[c + 1..] {
                lf.shift += a;
            }
        }
    }

    /// Records that the interval at `p` grew by `delta` bytes (negative: shrank): every later interval shifts.
    pub fn resize(&mut self, p: Pos, delta: i64) {
        if delta == 0 {
            return;
        }
        self.catch_up(p.leaf);
        let lf = &mut self.leaves[p.leaf];
        lf.ents[p.ent].size = (lf.ents[p.ent].size as i64 + delta) as u64;
        for iv in &mut lf.ents[p.ent + 1..] {
            iv.poff += delta;
        }
        match self.lazy {
            Some((c, a)) => {
                // c >= p.leaf after catch_up: leaves p.leaf+1..=c are settled and must move now.
                for lf in &mut self.leaves[p.leaf + 1..=c] {
                    lf.shift += delta;
                }
                self.lazy = Some((c, a + delta));
            }
            None => self.lazy = Some((p.leaf, delta)),
        }
    }

    /// Splits the interval at `p`: its first `keep` bytes stay, and a new interval with index key `key` starts at
    /// `keep`. Returns the new interval's position. REQUIRES: `0 < keep < size` or the caller knows the key order.
    pub fn split(&mut self, p: Pos, keep: u64, key: Box<[u8]>) -> Pos {
        self.catch_up(p.leaf);
        let id = self.next_id;
        self.next_id += 1;
        self.count += 1;
        let lf = &mut self.leaves[p.leaf];
        let old = &mut lf.ents[p.ent];
        let rest = old.size - keep;
        old.size = keep;
        let poff = old.poff + keep as i64;
        lf.ents.insert(p.ent + 1, Interval { key, poff, size: rest, id });
        let mut at = Pos { leaf: p.leaf, ent: p.ent + 1 };
        if lf.ents.len() > LEAF_MAX {
            let half = lf.ents.len() / 2;
            let tail = lf.ents.split_off(half);
            let shift = lf.shift;
            self.leaves.insert(p.leaf + 1, Leaf { shift, ents: tail });
            if let Some((c, a)) = self.lazy {
                self.lazy = Some((c + 1, a));
            }
            if at.ent >= half {
                at = Pos { leaf: p.leaf + 1, ent: at.ent - half };
            }
        }
        at
    }

    /// Removes the interval at `p`, giving its bytes to the previous interval (the caller merged its records
    /// there, or it is empty). REQUIRES: `p` is not interval 0.
    pub fn remove(&mut self, p: Pos) -> Interval {
        let prev = self.prev(p).unwrap_or(p);
        self.catch_up(p.leaf);
        let gone = self.leaves[p.leaf].ents.remove(p.ent);
        self.count -= 1;
        let pl = &mut self.leaves[prev.leaf].ents[prev.ent];
        pl.size += gone.size;
        if self.leaves[p.leaf].ents.is_empty() {
            self.leaves.remove(p.leaf);
            if let Some((c, a)) = self.lazy
                && c >= p.leaf
            {
                self.lazy = Some((c - 1, a));
            }
        }
        gone
    }

    /// Replaces the index key of the interval at `p`. REQUIRES: the key order is kept and the interval's records
    /// are all `>= key`.
    pub fn set_key(&mut self, p: Pos, key: Box<[u8]>) {
        self.leaves[p.leaf].ents[p.ent].key = key;
    }

    /// Whole-structure check: see the module comment for the invariants.
    pub fn check(&self, file_size: u64) -> Result<()> {
        let mut expect = 0u64;
        let mut last: Option<&[u8]> = None;
        let mut n = 0;
        let mut p = Some(self.first());
        if !self.get(self.first()).key.is_empty() {
            return Err(Error::corruption("index", "interval 0 has a key"));
        }
        while let Some(q) = p {
            if self.leaves[q.leaf].ents.is_empty() {
                return Err(Error::corruption("index", "empty leaf"));
            }
            let iv = self.get(q);
            if self.offset(q) != expect {
                return Err(Error::corruption(
                    "index",
                    format!("interval {n} at {} expected {expect}", self.offset(q)),
                ));
            }
            if let Some(l) = last
                && l >= &*iv.key
            {
                return Err(Error::corruption("index", "keys not increasing"));
            }
            last = Some(&iv.key);
            expect += iv.size;
            n += 1;
            p = self.next(q);
        }
        if expect != file_size || n != self.count {
            return Err(Error::corruption("index", format!("intervals cover {expect} of {file_size} bytes")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Box<[u8]> {
        s.as_bytes().into()
    }

    #[test]
    fn paper_figure_10_shift() {
        // Four intervals at 0, 42, 64, 90 ("", bit, foo, pin); inserting 9 bytes into "bit" shifts foo and pin.
        let mut idx =
            SparseIndex::from_anchors(vec![(k(""), 0), (k("bit"), 42), (k("foo"), 64), (k("pin"), 90)], 120)
                .unwrap();
        let p = idx.locate(b"kit");
        assert_eq!(&*idx.get(p).key, b"foo");
        assert_eq!(idx.offset(p), 64);
        let bit = idx.locate(b"cat");
        idx.resize(bit, 9);
        assert_eq!(idx.offset(idx.locate(b"foo")), 73);
        assert_eq!(idx.offset(idx.locate(b"pin")), 99);
        idx.settle();
        idx.check(129).unwrap();
    }

    #[test]
    fn many_splits_and_shifts() {
        let mut idx = SparseIndex::new();
        let mut size = 0u64;
        // Grow a single interval and split it into 1000 intervals of 10 bytes, in key order.
        idx.resize(idx.first(), 10_000);
        size += 10_000;
        let mut p = idx.first();
        for i in 1..1000u32 {
            p = idx.split(p, 10, format!("k{i:05}").as_bytes().into());
        }
        idx.settle();
        idx.check(size).unwrap();
        assert!(idx.leaf_count() > 10);
        // Resize in key order with deferred shifts, then out of order.
        for i in (1..1000u32).step_by(7) {
            let p = idx.locate(format!("k{i:05}").as_bytes());
            idx.resize(p, 3);
            size += 3;
            idx.check(size).unwrap();
        }
        for i in (1..1000u32).rev().step_by(13) {
            let p = idx.locate(format!("k{i:05}").as_bytes());
            idx.resize(p, -2);
            size -= 2;
            idx.check(size).unwrap();
        }
        idx.settle();
        for i in (1..1000u32).step_by(3) {
            let p = idx.locate(format!("k{i:05}").as_bytes());
            idx.remove(p);
            idx.check(size).unwrap();
        }
    }
}
