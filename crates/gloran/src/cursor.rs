//! Range cursors: coverage answers for an ascending stream of keys (iterators and compaction, §6 Exp 7).
//!
//! A point probe per key would read one node per DR-tree level for every entry a scan returns. A cursor instead
//! walks each source in key order alongside the caller: the buffer's areas in the range (disjointized once for
//! the cursor's snapshot, so they behave like one more level) and an iterator over each DR-tree level that reads
//! leaves sequentially. For each key the cursor skips the areas that end at or before it and checks the stack of
//! bands at the key, so a whole scan costs one pass over the areas in its range.

use crate::area::Area;
use crate::drtree::AreaIter;
use crate::error::{Error, Result};

/// The next stack of areas with one key range, and the source they come from.
#[derive(Debug)]
struct Source {
    /// `None`: the in-memory list.
    iter: Option<AreaIter>,
    list: std::sync::Arc<Vec<Area>>,
    /// Next position in `list`.
    at: usize,
    peeked: Option<Area>,
    /// The current stack: areas with identical `[start, end)`, bands in sequence order.
    stack: Vec<Area>,
    done: bool,
}

impl Source {
    fn pull(&mut self) -> Result<Option<Area>> {
        if let Some(a) = self.peeked.take() {
            return Ok(Some(a));
        }
        match &mut self.iter {
            Some(it) => it.next_area(),
            None => {
                let a = self.list.get(self.at).cloned();
                self.at += 1;
                Ok(a)
            }
        }
    }

    fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.peeked = None;
        self.stack.clear();
        self.done = false;
        match &mut self.iter {
            Some(it) => it.seek(key),
            None => {
                // Disjoint and sorted: ends are sorted too, so the first area ending after `key` is found by
                // binary search.
                self.at = self.list.partition_point(|a| a.end.as_slice() <= key);
                Ok(())
            }
        }
    }

    /// Positions the stack on the first areas that end after `key`.
    fn advance(&mut self, key: &[u8]) -> Result<()> {
        while !self.done && self.stack.first().is_none_or(|a| a.end.as_slice() <= key) {
            self.stack.clear();
            let Some(first) = self.pull()? else {
                self.done = true;
                break;
            };
            while let Some(next) = self.pull()? {
                if next.start == first.start && next.end == first.end {
                    self.stack.push(next);
                } else {
                    self.peeked = Some(next);
                    break;
                }
            }
            self.stack.insert(0, first);
        }
        Ok(())
    }
}

/// Answers "is `(key, seq)` deleted for this cursor's reader?" for keys given in ascending order.
#[derive(Debug)]
pub struct Cursor {
    sources: Vec<Source>,
    snapshot: u64,
    last_key: Option<Vec<u8>>,
}

impl Cursor {
    pub(crate) fn new(buffered: Vec<Area>, levels: Vec<AreaIter>, snapshot: u64) -> Self {
        let mut sources = vec![Source {
            iter: None,
            list: std::sync::Arc::new(buffered),
            at: 0,
            peeked: None,
            stack: Vec::new(),
            done: false,
        }];
        for it in levels {
            sources.push(Source {
                iter: Some(it),
                list: std::sync::Arc::new(Vec::new()),
                at: 0,
                peeked: None,
                stack: Vec::new(),
                done: false,
            });
        }
        Cursor { sources, snapshot, last_key: None }
    }

    /// A delete covering `(key, seq)` visible to the cursor's reader, if any.
    /// REQUIRES: keys non-decreasing across calls (a smaller key is `InvalidArgument`).
    pub fn covering(&mut self, key: &[u8], seq: u64) -> Result<Option<u64>> {
        if self.last_key.as_deref().is_some_and(|k| k > key) {
            return Err(Error::InvalidArgument("cursor keys must be non-decreasing".into()));
        }
        match &mut self.last_key {
            Some(k) => {
                k.clear();
                k.extend_from_slice(key);
            }
            None => self.last_key = Some(key.to_vec()),
        }
        for s in &mut self.sources {
            s.advance(key)?;
            if let Some(a) = s.stack.iter().find(|a| a.covers(key, seq) && a.seq <= self.snapshot) {
                return Ok(Some(a.seq));
            }
        }
        Ok(None)
    }

    /// Repositions the cursor so keys from `key` on (in ascending order again) can be asked: for an iterator's
    /// `seek`, or to restart after the caller moved backwards. Keys before the cursor's original lower bound are
    /// not covered by the buffered areas it took at creation.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        for s in &mut self.sources {
            s.seek(key)?;
        }
        self.last_key = None;
        Ok(())
    }

    /// Whether `(key, seq)` is deleted for the cursor's reader.
    pub fn covered(&mut self, key: &[u8], seq: u64) -> Result<bool> {
        Ok(self.covering(key, seq)?.is_some())
    }
}
