//! Internal iterators and the merging iterator.
//!
//! Every source of entries (memtable, table, level) is an [`InternalIter`] over encoded internal keys. The
//! [`MergingIter`] merges any number of them in both directions, LevelDB-style: when the direction changes, every
//! child other than the current one is re-positioned relative to the current key.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::block::Block;
use crate::error::Result;
use crate::ikey;

/// A bidirectional cursor over internal entries in internal-key order.
pub trait InternalIter: Send {
    /// Whether positioned at an entry.
    fn valid(&self) -> bool;
    /// Positions at the first entry.
    fn seek_to_first(&mut self);
    /// Positions at the last entry.
    fn seek_to_last(&mut self);
    /// Positions at the first entry >= `target` (an internal key).
    fn seek(&mut self, target: &[u8]);
    /// Advances. REQUIRES: valid.
    fn next(&mut self);
    /// Steps back. REQUIRES: valid.
    fn prev(&mut self);
    /// The current internal key. REQUIRES: valid.
    fn key(&self) -> &[u8];
    /// The current value. REQUIRES: valid.
    fn value(&self) -> &[u8];
    /// The first error met (an iterator with an error is not valid).
    fn status(&self) -> Result<()>;
    /// The data block the current entry was decoded from, when this cursor reads tables (`None` otherwise).
    /// RangeReduce's taps keep the blocks a query passes instead of copying its entries.
    fn data_block(&self) -> Option<&Arc<Block>> {
        None
    }
}

/// Merges children; children earlier in the list win ties (they are newer).
///
/// The valid children sit in a binary heap whose root is the current one (the smallest key going forward, the
/// largest going backward). A step moves the root child and sifts it down: two comparisons when the same source
/// supplies the next entry too, two per heap level it sinks otherwise, where picking the smallest of all
/// children cost one per child (a third of a long scan's time with eight sources). RocksDB's merging iterator
/// keeps a heap for the same reason; LevelDB's scans its children.
///
/// A child with an error is not valid, so the merge would silently pass over its entries: the merge is not valid
/// while any child has an error. Only a child that moved can have a new error, and only an invalid one can have
/// one at all, so the children are asked after each move (`failed`) rather than on every `valid` (which cost a
/// call per child per entry of a scan).
pub struct MergingIter {
    children: Vec<Box<dyn InternalIter>>,
    /// Indexes of the valid children, a binary heap ordered by [`comes_first`]; `heap[0]` is current.
    heap: Vec<usize>,
    forward: bool,
    /// Some child has an error (refreshed after every move).
    failed: bool,
}

impl std::fmt::Debug for MergingIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergingIter").field("children", &self.children.len()).finish()
    }
}

/// Whether child `a` comes before child `b` in the merge: by key, ties to the earlier child going forward, in
/// reverse going backward. REQUIRES: both valid.
fn comes_first(children: &[Box<dyn InternalIter>], forward: bool, a: usize, b: usize) -> bool {
    let o = ikey::cmp(children[a].key(), children[b].key()).then(a.cmp(&b));
    if forward { o == Ordering::Less } else { o == Ordering::Greater }
}

/// Restores the heap below position `i`, whose child may have moved back in the order.
fn sift_down(children: &[Box<dyn InternalIter>], forward: bool, heap: &mut [usize], mut i: usize) {
    loop {
        let l = 2 * i + 1;
        if l >= heap.len() {
            return;
        }
        let r = l + 1;
        let c = if r < heap.len() && comes_first(children, forward, heap[r], heap[l]) { r } else { l };
        if !comes_first(children, forward, heap[c], heap[i]) {
            return;
        }
        heap.swap(c, i);
        i = c;
    }
}

impl MergingIter {
    /// Merges `children`.
    pub fn new(children: Vec<Box<dyn InternalIter>>) -> Self {
        MergingIter { heap: Vec::with_capacity(children.len()), children, forward: true, failed: false }
    }

    /// Whether child `i` stopped on an error.
    fn child_failed(&self, i: usize) -> bool {
        let c = &self.children[i];
        !c.valid() && c.status().is_err()
    }

    /// After every child moved: the error flag and the heap from scratch.
    fn rebuild(&mut self) {
        self.failed = (0..self.children.len()).any(|i| self.child_failed(i));
        self.heap.clear();
        self.heap.extend((0..self.children.len()).filter(|&i| self.children[i].valid()));
        for i in (0..self.heap.len() / 2).rev() {
            sift_down(&self.children, self.forward, &mut self.heap, i);
        }
    }

    /// After the current child (the heap's root) moved one step in the merge's direction.
    fn settle_root(&mut self) {
        let cur = self.heap[0];
        self.failed |= self.child_failed(cur);
        if !self.children[cur].valid() {
            self.heap.swap_remove(0);
        }
        sift_down(&self.children, self.forward, &mut self.heap, 0);
    }

    /// Turns the merge around at the current entry: every other child is placed on the current entry's far side,
    /// as LevelDB does. The current child then steps as usual.
    fn turn(&mut self, cur: usize, forward: bool) {
        let key = self.children[cur].key().to_vec();
        for (i, c) in self.children.iter_mut().enumerate() {
            if i == cur {
                continue;
            }
            c.seek(&key);
            if forward {
                if c.valid() && ikey::cmp(&key, c.key()) == Ordering::Equal {
                    c.next();
                }
            } else if c.valid() {
                c.prev();
            } else {
                c.seek_to_last();
            }
        }
        self.forward = forward;
    }
}

impl InternalIter for MergingIter {
    fn valid(&self) -> bool {
        !self.heap.is_empty() && !self.failed
    }

    fn seek_to_first(&mut self) {
        for c in &mut self.children {
            c.seek_to_first();
        }
        self.forward = true;
        self.rebuild();
    }

    fn seek_to_last(&mut self) {
        for c in &mut self.children {
            c.seek_to_last();
        }
        self.forward = false;
        self.rebuild();
    }

    fn seek(&mut self, target: &[u8]) {
        for c in &mut self.children {
            c.seek(target);
        }
        self.forward = true;
        self.rebuild();
    }

    fn next(&mut self) {
        let Some(&cur) = self.heap.first() else { return };
        if !self.forward {
            self.turn(cur, true);
            self.children[cur].next();
            self.rebuild();
            return;
        }
        self.children[cur].next();
        self.settle_root();
    }

    fn prev(&mut self) {
        let Some(&cur) = self.heap.first() else { return };
        if self.forward {
            self.turn(cur, false);
            self.children[cur].prev();
            self.rebuild();
            return;
        }
        self.children[cur].prev();
        self.settle_root();
    }

    fn key(&self) -> &[u8] {
        self.heap.first().map_or(&[], |&c| self.children[c].key())
    }

    fn value(&self) -> &[u8] {
        self.heap.first().map_or(&[], |&c| self.children[c].value())
    }

    fn status(&self) -> Result<()> {
        for c in &self.children {
            c.status()?;
        }
        Ok(())
    }
}

/// An iterator over a sorted in-memory vector of internal entries (tests and small sources).
#[derive(Debug, Default)]
pub struct VecIter {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
}

impl VecIter {
    /// REQUIRES: `entries` sorted by internal key.
    pub fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        let pos = entries.len();
        VecIter { entries, pos }
    }
}

impl InternalIter for VecIter {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }
    fn seek_to_first(&mut self) {
        self.pos = 0;
    }
    fn seek_to_last(&mut self) {
        self.pos = if self.entries.is_empty() { 0 } else { self.entries.len() - 1 };
    }
    fn seek(&mut self, target: &[u8]) {
        self.pos = self.entries.partition_point(|(k, _)| ikey::cmp(k, target) == Ordering::Less);
    }
    fn next(&mut self) {
        self.pos += 1;
    }
    fn prev(&mut self) {
        self.pos = if self.pos == 0 { self.entries.len() } else { self.pos - 1 };
    }
    fn key(&self) -> &[u8] {
        &self.entries[self.pos].0
    }
    fn value(&self) -> &[u8] {
        &self.entries[self.pos].1
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ikey::Kind;

    #[test]
    fn merges_both_directions_with_direction_changes() {
        let mk = |ks: &[(&str, u64)]| -> Box<dyn InternalIter> {
            Box::new(VecIter::new(
                ks.iter().map(|(k, s)| (ikey::make(k.as_bytes(), *s, Kind::Value), vec![])).collect(),
            ))
        };
        let mut m = MergingIter::new(vec![mk(&[("a", 5), ("c", 6)]), mk(&[("a", 2), ("b", 1), ("d", 3)])]);
        let key = |m: &MergingIter| (ikey::user_key(m.key()).to_vec(), ikey::seq(m.key()));
        m.seek_to_first();
        let mut all = vec![];
        while m.valid() {
            all.push(key(&m));
            m.next();
        }
        assert_eq!(all.len(), 5);
        assert_eq!(all[0], (b"a".to_vec(), 5));
        assert_eq!(all[1], (b"a".to_vec(), 2));
        m.seek(&ikey::make(b"b", 100, Kind::Value));
        assert_eq!(key(&m), (b"b".to_vec(), 1));
        m.prev();
        assert_eq!(key(&m), (b"a".to_vec(), 2));
        m.next();
        assert_eq!(key(&m), (b"b".to_vec(), 1));
        m.next();
        assert_eq!(key(&m), (b"c".to_vec(), 6));
        m.seek_to_last();
        assert_eq!(key(&m), (b"d".to_vec(), 3));
        m.prev();
        m.prev();
        assert_eq!(key(&m), (b"b".to_vec(), 1));
    }

    /// Random children of unique internal keys, walked with seeks and steps in both directions against their
    /// sorted union.
    #[test]
    fn merge_matches_the_sorted_union_under_random_walks() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        for seed in 0..200u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let n = rng.random_range(1..10usize);
            let mut lists: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![Vec::new(); n];
            let mut all = Vec::new();
            for seq in 0..rng.random_range(0..120u64) {
                let k = ikey::make(format!("k{:02}", rng.random_range(0..40)).as_bytes(), seq, Kind::Value);
                lists[rng.random_range(0..n)].push((k.clone(), vec![]));
                all.push(k);
            }
            all.sort_by(|a, b| ikey::cmp(a, b));
            for l in &mut lists {
                l.sort_by(|a, b| ikey::cmp(&a.0, &b.0));
            }
            let children: Vec<Box<dyn InternalIter>> =
                lists.into_iter().map(|l| Box::new(VecIter::new(l)) as Box<dyn InternalIter>).collect();
            let mut m = MergingIter::new(children);
            let mut pos: Option<usize> = None;
            for _ in 0..300 {
                match rng.random_range(0..10) {
                    0 => {
                        m.seek_to_first();
                        pos = (!all.is_empty()).then_some(0);
                    }
                    1 => {
                        m.seek_to_last();
                        pos = all.len().checked_sub(1);
                    }
                    2 => {
                        let t = ikey::make(
                            format!("k{:02}", rng.random_range(0..42)).as_bytes(),
                            rng.random_range(0..130),
                            Kind::Value,
                        );
                        m.seek(&t);
                        let i = all.partition_point(|k| ikey::cmp(k, &t) == Ordering::Less);
                        pos = (i < all.len()).then_some(i);
                    }
                    3..=6 if pos.is_some() => {
                        m.next();
                        pos = pos.map(|p| p + 1).filter(|&p| p < all.len());
                    }
                    _ if pos.is_some() => {
                        m.prev();
                        pos = pos.and_then(|p| p.checked_sub(1));
                    }
                    _ => {}
                }
                assert_eq!(m.valid(), pos.is_some(), "seed {seed}");
                if let Some(p) = pos {
                    assert_eq!(m.key(), &all[p][..], "seed {seed}");
                }
            }
        }
    }
}
