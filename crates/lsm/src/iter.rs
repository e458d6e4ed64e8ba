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
/// A child with an error is not valid, so the merge would silently pass over its entries: the merge is not valid
/// while any child has an error. Only a child that moved can have a new error, and only an invalid one can have
/// one at all, so the children are asked after each move (`failed`) rather than on every `valid` (which cost a
/// call per child per entry of a scan).
pub struct MergingIter {
    children: Vec<Box<dyn InternalIter>>,
    current: Option<usize>,
    forward: bool,
    /// Some child has an error (refreshed after every move).
    failed: bool,
}

impl std::fmt::Debug for MergingIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergingIter").field("children", &self.children.len()).finish()
    }
}

impl MergingIter {
    /// Merges `children`.
    pub fn new(children: Vec<Box<dyn InternalIter>>) -> Self {
        MergingIter { children, current: None, forward: true, failed: false }
    }

    /// Whether child `i` stopped on an error.
    fn child_failed(&self, i: usize) -> bool {
        let c = &self.children[i];
        !c.valid() && c.status().is_err()
    }

    /// After every child moved.
    fn refresh_failed(&mut self) {
        self.failed = (0..self.children.len()).any(|i| self.child_failed(i));
    }

    fn find_smallest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if c.valid() && best.is_none_or(|b| ikey::cmp(c.key(), self.children[b].key()) == Ordering::Less)
            {
                best = Some(i);
            }
        }
        self.current = best;
    }

    fn find_largest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate().rev() {
            if c.valid()
                && best.is_none_or(|b| ikey::cmp(c.key(), self.children[b].key()) == Ordering::Greater)
            {
                best = Some(i);
            }
        }
        self.current = best;
    }
}

impl InternalIter for MergingIter {
    fn valid(&self) -> bool {
        self.current.is_some() && !self.failed
    }

    fn seek_to_first(&mut self) {
        for c in &mut self.children {
            c.seek_to_first();
        }
        self.forward = true;
        self.refresh_failed();
        self.find_smallest();
    }

    fn seek_to_last(&mut self) {
        for c in &mut self.children {
            c.seek_to_last();
        }
        self.forward = false;
        self.refresh_failed();
        self.find_largest();
    }

    fn seek(&mut self, target: &[u8]) {
        for c in &mut self.children {
            c.seek(target);
        }
        self.forward = true;
        self.refresh_failed();
        self.find_smallest();
    }

    fn next(&mut self) {
        let Some(cur) = self.current else { return };
        if !self.forward {
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != cur {
                    c.seek(&key);
                    if c.valid() && ikey::cmp(&key, c.key()) == Ordering::Equal {
                        c.next();
                    }
                }
            }
            self.forward = true;
            self.refresh_failed();
        }
        self.children[cur].next();
        self.failed |= self.child_failed(cur);
        self.find_smallest();
    }

    fn prev(&mut self) {
        let Some(cur) = self.current else { return };
        if self.forward {
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != cur {
                    c.seek(&key);
                    if c.valid() {
                        c.prev();
                    } else {
                        c.seek_to_last();
                    }
                }
            }
            self.forward = false;
            self.refresh_failed();
        }
        self.children[cur].prev();
        self.failed |= self.child_failed(cur);
        self.find_largest();
    }

    fn key(&self) -> &[u8] {
        self.current.map_or(&[], |c| self.children[c].key())
    }

    fn value(&self) -> &[u8] {
        self.current.map_or(&[], |c| self.children[c].value())
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
}
