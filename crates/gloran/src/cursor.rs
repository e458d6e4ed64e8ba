//! Range cursors: coverage answers for an ascending stream of keys (iterators and compaction, §6 Exp 7).
//!
//! A point probe per key would read one node per DR-tree level for every entry a scan returns. A cursor instead
//! walks each source in key order alongside the caller: the buffer's areas in the range (disjointized once for
//! the cursor's snapshot, so they behave like one more level) and an iterator over each DR-tree level that reads
//! leaves sequentially. For each key the cursor skips the areas that end at or before it and checks the stack of
//! bands at the key, so a whole scan costs one pass over the areas in its range.
//!
//! Keys may also come in descending order (reverse iteration) or jump anywhere (seeks). Each source remembers
//! the uncovered gap below its current stack, `[gap_lo, stack start)`: a key inside the stack or the gap is
//! answered where the source stands, and only a key below `gap_lo` repositions it (one descent per DR-tree, a
//! binary search in the buffered list). A reverse scan therefore repositions once per area it walks back over,
//! not once per key.

use std::sync::Arc;

use crate::area::Area;
use crate::drtree::AreaIter;
use crate::error::Result;

/// The next stack of areas with one key range, and the source they come from.
#[derive(Debug)]
struct Source {
    /// `None`: the in-memory list.
    iter: Option<AreaIter>,
    list: Arc<Vec<Area>>,
    /// Next position in `list`.
    at: usize,
    peeked: Option<Area>,
    /// The current stack: areas with identical `[start, end)`, bands in sequence order.
    stack: Vec<Area>,
    done: bool,
    /// No area of this source covers a key in `[gap_lo, start of the stack)` (or `[gap_lo, ∞)` when done), and
    /// every area not yet pulled starts at or after the stack's end.
    gap_lo: Vec<u8>,
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

    /// Repositions on the first areas that end after `key`, in either direction, and sets `gap_lo` as low as
    /// the source allows.
    fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.peeked = None;
        self.stack.clear();
        self.done = false;
        self.gap_lo.clear();
        match &mut self.iter {
            Some(it) => it.seek(key)?,
            None => {
                // Disjoint and sorted: ends are sorted too, so the first area ending after `key` is found by
                // binary search, and the one before it ends where the gap starts.
                self.at = self.list.partition_point(|a| a.end.as_slice() <= key);
                if let Some(prev) = self.at.checked_sub(1).map(|i| &self.list[i]) {
                    self.gap_lo.extend_from_slice(&prev.end);
                }
            }
        }
        self.advance(key)?;
        if let Some(it) = &self.iter {
            match it.floor() {
                Some(f) => self.gap_lo.extend_from_slice(f),
                // Nothing skipped or stepped over: every earlier area ends at or before the stack's start (a band
                // stack never straddles two leaves), and there is none if that start is after `key`.
                None => {
                    if let Some(a) = self.stack.first().filter(|a| a.start.as_slice() <= key) {
                        self.gap_lo.extend_from_slice(&a.start);
                    }
                }
            }
        }
        Ok(())
    }

    /// Makes the source answer for `key`: forward from where it stands, or by a seek when `key` is below the gap.
    fn position(&mut self, key: &[u8]) -> Result<()> {
        if key < self.gap_lo.as_slice() { self.seek(key) } else { self.advance(key) }
    }

    /// Positions the stack on the first areas that end after `key`. REQUIRES: `key >= gap_lo`.
    fn advance(&mut self, key: &[u8]) -> Result<()> {
        while !self.done && self.stack.first().is_none_or(|a| a.end.as_slice() <= key) {
            if let Some(a) = self.stack.first() {
                // The next area starts at or after this stack's end.
                self.gap_lo.clear();
                self.gap_lo.extend_from_slice(&a.end);
            }
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

/// Answers "is `(key, seq)` deleted for this cursor's reader?" for keys in `[lo, hi)` of its creation. Cheapest
/// for ascending keys (one pass over the areas), cheap for descending ones (one reposition per area walked back
/// over); any order is answered correctly.
#[derive(Debug)]
pub struct Cursor {
    sources: Vec<Source>,
    snapshot: u64,
}

impl Cursor {
    /// REQUIRES: `buffered` holds (at least) the buffer's areas overlapping the cursor's range, disjoint and
    /// sorted; each level iterator starts at `lo`.
    pub(crate) fn new(buffered: Arc<Vec<Area>>, levels: Vec<AreaIter>, lo: &[u8], snapshot: u64) -> Self {
        let source = |iter: Option<AreaIter>, list: Arc<Vec<Area>>| Source {
            iter,
            // The list may reach below `lo` (a shared view of the whole buffer): start on the first area ending
            // after it, as the level iterators do.
            at: list.partition_point(|a| a.end.as_slice() <= lo),
            list,
            peeked: None,
            stack: Vec::new(),
            done: false,
            // Every source starts on its first area ending after `lo`.
            gap_lo: lo.to_vec(),
        };
        // An empty list can never cover a key: leaving it out spares every key a comparison, and a cursor over
        // an index without records has no source at all (`is_empty`).
        let mut sources = Vec::with_capacity(1 + levels.len());
        if !buffered.is_empty() {
            sources.push(source(None, buffered));
        }
        sources.extend(levels.into_iter().map(|it| source(Some(it), Arc::new(Vec::new()))));
        Cursor { sources, snapshot }
    }

    /// Whether the cursor has nothing to check (no buffered area, no disk level): every answer is "not covered".
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// A delete covering `(key, seq)` visible to the cursor's reader, if any.
    /// REQUIRES: `key` within the cursor's range (the buffered areas were taken for that range only).
    pub fn covering(&mut self, key: &[u8], seq: u64) -> Result<Option<u64>> {
        for s in &mut self.sources {
            s.position(key)?;
            let Some(top) = s.stack.first() else { continue };
            if top.start.as_slice() > key {
                continue; // `key` is in the gap below the stack.
            }
            if let Some(a) = s.stack.iter().find(|a| a.covers(key, seq) && a.seq <= self.snapshot) {
                return Ok(Some(a.seq));
            }
        }
        Ok(None)
    }

    /// Repositions every source at `key` (an iterator's seek). Never needed for correctness; it saves walking
    /// forward over areas between the old and the new position.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        for s in &mut self.sources {
            s.seek(key)?;
        }
        Ok(())
    }

    /// Whether `(key, seq)` is deleted for the cursor's reader.
    pub fn covered(&mut self, key: &[u8], seq: u64) -> Result<bool> {
        Ok(self.covering(key, seq)?.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_without_areas_is_empty_and_covers_nothing() {
        let mut c = Cursor::new(Arc::new(Vec::new()), Vec::new(), b"", u64::MAX);
        assert!(c.is_empty());
        assert!(!c.covered(b"k", 0).unwrap());
        let mut c = Cursor::new(Arc::new(vec![Area::record(b"b", b"d", 0, 5)]), Vec::new(), b"", u64::MAX);
        assert!(!c.is_empty());
        assert!(!c.covered(b"a", 1).unwrap());
        assert!(c.covered(b"c", 1).unwrap());
        assert!(!c.covered(b"c", 5).unwrap(), "an entry as new as the delete survives it");
        assert!(!c.covered(b"d", 1).unwrap());
    }
}
