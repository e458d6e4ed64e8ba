//! Taps: wrappers around the merging iterator's children that count what a range query reads and, for the
//! levels it compacts, keep every internal entry in `[lower, upper)` as the query passes it (the data blocks
//! holding them, see [`Run`]).
//!
//! A recording tap accepts exactly one access pattern: a seek to (at most) the lower bound followed by `next`
//! calls, until its child reaches a key at or past the upper bound or its end. That is what a forward scan of the
//! whole range does to every child of the merging iterator, and it means the tap has seen every entry of its
//! child in range, in order, exactly once. Anything else (another seek, a step back, an error, the memory bound)
//! breaks the collection: the query goes on and no rewrite happens. After the upper bound the data is complete
//! and later movements do not matter (the files are immutable).
//!
//! The taps of one iterator share a [`Collect`]; the last tap to drop (the iterator's drop) turns a complete
//! collection into a rewrite job.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::{Job, Owner, Plan, add, lock};
use crate::block::{Block, BlockIter};
use crate::error::{Error, Result};
use crate::ikey;
use crate::iter::InternalIter;

/// The entries of one chosen level in `[lower, upper)`, in internal-key order, as the query passed them.
///
/// A table cursor hands over the data blocks its entries lie in: the run keeps those blocks (the query already
/// read and checked them, so keeping them costs no copy) and skips the entries outside the range when it is
/// read. Copying every entry instead was most of what collecting added to a query: the 0.25-selectivity query
/// of `bench rangereduce`'s `long-short` took 2.1x the plain engine's time under Blind Merge-on-Scan, 1.2x
/// keeping blocks. Entries of any other cursor are copied into one flat buffer. A run holds blocks or copies,
/// never both. The memory bound charges a kept block's whole size.
#[derive(Debug, Default)]
pub(crate) struct Run {
    blocks: Vec<Arc<Block>>,
    data: Vec<u8>,
    /// (offset, key length, value length) of each copied entry.
    ents: Vec<(usize, u32, u32)>,
    lower: Vec<u8>,
    upper: Vec<u8>,
}

impl Run {
    fn new(lower: &[u8], upper: &[u8]) -> Self {
        Run { lower: lower.to_vec(), upper: upper.to_vec(), ..Run::default() }
    }

    /// Whether `b` is the block kept last.
    fn kept_last(&self, b: &Arc<Block>) -> bool {
        self.blocks.last().is_some_and(|l| Arc::ptr_eq(l, b))
    }

    /// Keeps `b` unless it is the block kept last; the bytes newly held, or `None` if this run holds copies.
    fn keep_block(&mut self, b: &Arc<Block>) -> Option<usize> {
        if !self.ents.is_empty() {
            return None;
        }
        if self.blocks.last().is_some_and(|l| Arc::ptr_eq(l, b)) {
            return Some(0);
        }
        self.blocks.push(b.clone());
        Some(b.size() + 16)
    }

    /// Copies one entry; the bytes newly held, or `None` if this run holds blocks.
    fn copy(&mut self, k: &[u8], v: &[u8]) -> Option<usize> {
        if !self.blocks.is_empty() {
            return None;
        }
        self.ents.push((self.data.len(), k.len() as u32, v.len() as u32));
        self.data.extend_from_slice(k);
        self.data.extend_from_slice(v);
        Some(k.len() + v.len() + 16)
    }

    fn copied_key(&self, i: usize) -> &[u8] {
        let (o, k, _) = self.ents[i];
        &self.data[o..o + k as usize]
    }

    fn copied_value(&self, i: usize) -> &[u8] {
        let (o, k, v) = self.ents[i];
        &self.data[o + k as usize..o + k as usize + v as usize]
    }

    /// A forward cursor over the run's entries in `[lower, upper)`.
    pub(crate) fn into_iter(self) -> RunIter {
        RunIter { run: self, pos: usize::MAX, block: None, corrupt: false }
    }
}

/// A forward-only cursor over a [`Run`]: `seek_to_first`, `seek` and `next` (what the rewrite's merge uses);
/// backward moves leave it invalid.
pub(crate) struct RunIter {
    run: Run,
    /// Index of the current copied entry, or of the current block; `usize::MAX` before the first positioning.
    pos: usize,
    block: Option<BlockIter>,
    corrupt: bool,
}

impl RunIter {
    fn in_blocks(&self) -> bool {
        !self.run.blocks.is_empty()
    }

    /// From the current block position, skips entries below `lower`, moving through blocks; stops at the first
    /// entry in range, or ends the run at the first entry at or past `upper` (the entries are sorted).
    fn settle_blocks(&mut self) {
        loop {
            let Some(b) = &mut self.block else { return };
            if b.valid() {
                let uk = ikey::user_key(b.key());
                if uk < self.run.lower.as_slice() {
                    b.next();
                    continue;
                }
                if uk >= self.run.upper.as_slice() {
                    self.block = None;
                }
                return;
            }
            if b.corrupt() {
                self.corrupt = true;
                self.block = None;
                return;
            }
            self.pos += 1;
            self.block = self.run.blocks.get(self.pos).map(|b| {
                let mut it = BlockIter::new(b.clone(), ikey::cmp);
                it.seek_to_first();
                it
            });
        }
    }
}

impl InternalIter for RunIter {
    fn valid(&self) -> bool {
        if self.in_blocks() {
            self.block.as_ref().is_some_and(|b| b.valid())
        } else {
            self.pos < self.run.ents.len()
        }
    }
    fn seek_to_first(&mut self) {
        self.pos = 0;
        if self.in_blocks() {
            let mut it = BlockIter::new(self.run.blocks[0].clone(), ikey::cmp);
            it.seek_to_first();
            self.block = Some(it);
            self.settle_blocks();
        }
    }
    fn seek_to_last(&mut self) {
        self.pos = self.run.ents.len();
        self.block = None;
    }
    fn seek(&mut self, target: &[u8]) {
        self.seek_to_first();
        while self.valid() && ikey::cmp(self.key(), target).is_lt() {
            self.next();
        }
    }
    fn next(&mut self) {
        if let Some(b) = &mut self.block {
            b.next();
            self.settle_blocks();
        } else {
            self.pos += 1;
        }
    }
    fn prev(&mut self) {
        self.seek_to_last();
    }
    fn key(&self) -> &[u8] {
        match &self.block {
            Some(b) => b.key(),
            None => self.run.copied_key(self.pos),
        }
    }
    fn value(&self) -> &[u8] {
        match &self.block {
            Some(b) => b.value(),
            None => self.run.copied_value(self.pos),
        }
    }
    fn status(&self) -> Result<()> {
        if self.corrupt {
            return Err(Error::corruption("range_reduce", "malformed block in a collected run"));
        }
        Ok(())
    }
}

/// The memory bound of one query's collection, shared by its recording taps.
///
/// One bound for all levels, not an even share per level: the plan admitted the query by its total estimate, and
/// the deepest chosen level usually holds most of it (a per-level share of 64 MiB / 2 broke a 0.25-selectivity
/// query's collection on its deepest level after it had copied everything else). Once any tap breaks, the
/// collection cannot become a rewrite, so every tap stops copying.
#[derive(Debug)]
pub(crate) struct Budget {
    used: AtomicUsize,
    cap: usize,
    broken: AtomicBool,
}

impl Budget {
    pub(crate) fn new(cap: usize) -> Self {
        Budget { used: AtomicUsize::new(0), cap, broken: AtomicBool::new(false) }
    }

    /// Charges `n` bytes; false once the bound is passed or any tap broke.
    fn charge(&self, n: usize) -> bool {
        !self.broken.load(Ordering::Relaxed) && self.used.fetch_add(n, Ordering::Relaxed) + n <= self.cap
    }
}

/// What the taps of one iterator share.
pub(crate) struct Collect {
    owner: Arc<Owner>,
    /// The query's plan; taken when the collection is handed to the rewrite or given up.
    plan: Option<Plan>,
    runs: Vec<Option<Run>>,
    complete: usize,
    broken: bool,
}

impl Collect {
    pub(crate) fn new(owner: Arc<Owner>, plan: Plan, recording: usize) -> Self {
        Collect {
            owner,
            plan: Some(plan),
            runs: (0..recording).map(|_| None).collect(),
            complete: 0,
            broken: false,
        }
    }
}

impl Drop for Collect {
    fn drop(&mut self) {
        let Some(plan) = self.plan.take() else { return };
        let complete = !self.broken && self.complete == self.runs.len();
        let runs: Vec<Run> = self.runs.iter_mut().filter_map(Option::take).collect();
        // After `close` the job and its claim are dropped here: there is no engine left to rewrite into.
        self.owner.visit(move |inner| {
            if complete {
                inner.rr.submit(inner, Job { plan, runs });
            } else {
                add(&inner.rr.counters.rewrites_incomplete, 1);
            }
        });
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Fresh,
    Forward,
    Done,
    Broken,
}

/// A recording wrapper around one child of the merging iterator that reads a chosen level: its run goes to
/// `slot` of the collection.
pub(crate) struct Tap {
    inner: Box<dyn InternalIter>,
    col: Arc<Mutex<Collect>>,
    slot: usize,
    lower: Vec<u8>,
    upper: Vec<u8>,
    budget: Arc<Budget>,
    state: State,
    run: Run,
}

impl Tap {
    pub(crate) fn new(
        inner: Box<dyn InternalIter>,
        col: Arc<Mutex<Collect>>,
        slot: usize,
        lower: &[u8],
        upper: &[u8],
        budget: Arc<Budget>,
    ) -> Self {
        Tap {
            inner,
            col,
            slot,
            lower: lower.to_vec(),
            upper: upper.to_vec(),
            budget,
            state: State::Fresh,
            run: Run::new(lower, upper),
        }
    }

    /// A movement outside the accepted pattern: the collection breaks unless the child had already left the
    /// range.
    fn brk(&mut self) {
        self.check();
        self.fail();
    }

    fn fail(&mut self) {
        if self.state != State::Done {
            self.state = State::Broken;
            self.run = Run::default();
            self.budget.broken.store(true, Ordering::Relaxed);
            // The collection can no longer become a rewrite: give its files back to compactions now.
            if let Some(p) = lock(&self.col).plan.as_mut() {
                p.claim = None;
            }
        }
    }

    /// After a step: records the current entry (state Forward) or notes the end of the range. A table cursor
    /// still in the block kept last needs nothing: the block holds the entry, and the run skips entries past the
    /// upper bound when it is read. Comparing every entry with both bounds, through two dynamic calls, made a
    /// query that plans a rewrite cost 46 % more per byte than one that does not (`bench rangereduce
    /// --quick`); the end of the range is then noticed when the cursor leaves the block, or by `check`.
    fn observe(&mut self) {
        if self.state == State::Forward && self.inner.data_block().is_some_and(|b| self.run.kept_last(b)) {
            return;
        }
        self.check();
    }

    /// Records the current entry (state Forward) or notes the end of the range. Also called before the tap's
    /// state is read (a break, the drop), for the verdict `observe` may have skipped.
    fn check(&mut self) {
        if self.state != State::Forward {
            return;
        }
        if self.inner.status().is_err() {
            self.fail();
            return;
        }
        if !self.inner.valid() {
            self.state = State::Done;
            return;
        }
        let k = self.inner.key();
        let uk = ikey::user_key(k);
        if uk >= self.upper.as_slice() {
            self.state = State::Done;
        } else if uk >= self.lower.as_slice() {
            let held = match self.inner.data_block() {
                Some(b) => self.run.keep_block(b),
                None => self.run.copy(k, self.inner.value()),
            };
            if !held.is_some_and(|n| n == 0 || self.budget.charge(n)) {
                self.fail();
            }
        }
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.check();
        let mut c = lock(&self.col);
        match self.state {
            State::Done if !c.broken => {
                c.runs[self.slot] = Some(std::mem::take(&mut self.run));
                c.complete += 1;
            }
            State::Done => {}
            _ => c.broken = true,
        }
    }
}

impl InternalIter for Tap {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) {
        self.brk();
        self.inner.seek_to_first();
    }
    fn seek_to_last(&mut self) {
        self.brk();
        self.inner.seek_to_last();
    }
    fn seek(&mut self, target: &[u8]) {
        if self.state == State::Fresh && ikey::user_key(target) <= self.lower.as_slice() {
            self.state = State::Forward;
        } else {
            self.brk();
        }
        self.inner.seek(target);
        self.observe();
    }
    fn next(&mut self) {
        self.inner.next();
        self.observe();
    }
    fn prev(&mut self) {
        self.brk();
        self.inner.prev();
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn status(&self) -> Result<()> {
        self.inner.status()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::Run;
    use crate::block::{Block, BlockBuilder};
    use crate::ikey::{self, Kind};
    use crate::iter::InternalIter;

    fn ik(i: u32, seq: u64) -> Vec<u8> {
        ikey::make(format!("k{i:04}").as_bytes(), seq, Kind::Value)
    }

    /// Blocks of keys 0..100 (two versions each), ten keys per block.
    fn blocks() -> Vec<Arc<Block>> {
        (0..10)
            .map(|b| {
                let mut bb = BlockBuilder::new(4);
                for i in b * 10..b * 10 + 10 {
                    bb.add(&ik(i, 9), format!("new{i}").as_bytes());
                    bb.add(&ik(i, 3), format!("old{i}").as_bytes());
                }
                Arc::new(Block::new(bb.finish()).unwrap())
            })
            .collect()
    }

    fn read(run: Run) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut it = run.into_iter();
        it.seek_to_first();
        let mut out = Vec::new();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        it.status().unwrap();
        out
    }

    fn want(lo: u32, hi: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
        (lo..hi)
            .flat_map(|i| {
                [(ik(i, 9), format!("new{i}").into_bytes()), (ik(i, 3), format!("old{i}").into_bytes())]
            })
            .collect()
    }

    #[test]
    fn a_run_of_kept_blocks_yields_exactly_the_entries_in_range() {
        let bs = blocks();
        for (lo, hi) in [(0, 100), (15, 37), (10, 20), (19, 21), (95, 99), (42, 43)] {
            let mut run = Run::new(format!("k{lo:04}").as_bytes(), format!("k{hi:04}").as_bytes());
            let (first, last) = (lo as usize / 10, (hi as usize - 1) / 10);
            let mut held = 0;
            for b in &bs[first..=last] {
                // Every entry of a block hands over the same block: kept once.
                held += run.keep_block(b).unwrap();
                assert_eq!(run.keep_block(b), Some(0));
            }
            assert!(held > 0);
            assert_eq!(run.copy(b"x", b"y"), None, "a run of blocks takes no copies");
            assert_eq!(read(run), want(lo, hi), "[{lo}, {hi})");
        }
    }

    #[test]
    fn a_run_of_copies_yields_them_in_order() {
        let mut run = Run::new(b"k0000", b"k0100");
        for (k, v) in want(3, 9) {
            assert!(run.copy(&k, &v).is_some());
        }
        assert_eq!(run.keep_block(&blocks()[0]), None, "a run of copies keeps no blocks");
        assert_eq!(read(run), want(3, 9));
        let mut it = Run::new(b"a", b"b").into_iter();
        it.seek_to_first();
        assert!(!it.valid());
    }
}
