//! Taps: wrappers around the merging iterator's children that count what a range query reads and, for the
//! levels it compacts, copy every internal entry in `[lower, upper)` as the query passes it.
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
use std::sync::{Arc, Mutex, Weak};

use super::{Inner, Job, Plan, add, lock};
use crate::error::Result;
use crate::ikey;
use crate::iter::InternalIter;

/// Internal entries in internal-key order, stored flat (one buffer, offsets).
#[derive(Debug, Default)]
pub(crate) struct Run {
    data: Vec<u8>,
    /// (offset, key length, value length)
    ents: Vec<(usize, u32, u32)>,
}

impl Run {
    fn push(&mut self, k: &[u8], v: &[u8]) {
        self.ents.push((self.data.len(), k.len() as u32, v.len() as u32));
        self.data.extend_from_slice(k);
        self.data.extend_from_slice(v);
    }

    fn key(&self, i: usize) -> &[u8] {
        let (o, k, _) = self.ents[i];
        &self.data[o..o + k as usize]
    }

    fn value(&self, i: usize) -> &[u8] {
        let (o, k, v) = self.ents[i];
        &self.data[o + k as usize..o + k as usize + v as usize]
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.ents.len()
    }

    /// A cursor over the run.
    pub(crate) fn into_iter(self) -> RunIter {
        let n = self.ents.len();
        RunIter { run: self, pos: n }
    }
}

/// A cursor over a [`Run`] (`pos == len` is "not valid").
pub(crate) struct RunIter {
    run: Run,
    pos: usize,
}

impl InternalIter for RunIter {
    fn valid(&self) -> bool {
        self.pos < self.run.len()
    }
    fn seek_to_first(&mut self) {
        self.pos = 0;
    }
    fn seek_to_last(&mut self) {
        self.pos = self.run.len().saturating_sub(1);
        if self.run.len() == 0 {
            self.pos = 0;
        }
    }
    fn seek(&mut self, target: &[u8]) {
        let (mut a, mut b) = (0, self.run.len());
        while a < b {
            let m = (a + b) / 2;
            if ikey::cmp(self.run.key(m), target).is_lt() {
                a = m + 1;
            } else {
                b = m;
            }
        }
        self.pos = a;
    }
    fn next(&mut self) {
        self.pos += 1;
    }
    fn prev(&mut self) {
        self.pos = if self.pos == 0 { self.run.len() } else { self.pos - 1 };
    }
    fn key(&self) -> &[u8] {
        self.run.key(self.pos)
    }
    fn value(&self) -> &[u8] {
        self.run.value(self.pos)
    }
    fn status(&self) -> Result<()> {
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
    owner: Weak<Inner>,
    plan: Option<Plan>,
    runs: Vec<Option<Run>>,
    complete: usize,
    broken: bool,
    bytes_read: u64,
}

impl Collect {
    pub(crate) fn new(owner: Weak<Inner>, plan: Option<Plan>, recording: usize) -> Self {
        Collect {
            owner,
            plan,
            runs: (0..recording).map(|_| None).collect(),
            complete: 0,
            broken: false,
            bytes_read: 0,
        }
    }
}

impl Drop for Collect {
    fn drop(&mut self) {
        let Some(inner) = self.owner.upgrade() else { return };
        add(&inner.rr.counters.range_query_bytes_read, self.bytes_read);
        let Some(plan) = self.plan.take() else { return };
        if self.broken || self.complete != self.runs.len() {
            add(&inner.rr.counters.rewrites_incomplete, 1);
            return;
        }
        let runs: Vec<Run> = self.runs.iter_mut().filter_map(Option::take).collect();
        inner.rr.submit(Job { plan, runs });
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Fresh,
    Forward,
    Done,
    Broken,
}

/// A counting (and, with a slot, recording) wrapper around one child of the merging iterator.
pub(crate) struct Tap {
    inner: Box<dyn InternalIter>,
    col: Arc<Mutex<Collect>>,
    slot: Option<usize>,
    lower: Vec<u8>,
    upper: Vec<u8>,
    budget: Arc<Budget>,
    state: State,
    run: Run,
    bytes_read: u64,
}

impl Tap {
    pub(crate) fn new(
        inner: Box<dyn InternalIter>,
        col: Arc<Mutex<Collect>>,
        slot: Option<usize>,
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
            state: if slot.is_some() { State::Fresh } else { State::Done },
            run: Run::default(),
            bytes_read: 0,
        }
    }

    fn count(&mut self) {
        if self.inner.valid() {
            self.bytes_read += (self.inner.key().len() + self.inner.value().len()) as u64;
        }
    }

    fn brk(&mut self) {
        if self.slot.is_some() && self.state != State::Done {
            self.state = State::Broken;
            self.run = Run::default();
            self.budget.broken.store(true, Ordering::Relaxed);
            // The collection can no longer become a rewrite: give its files back to compactions now.
            if let Some(p) = lock(&self.col).plan.as_mut() {
                p.claim = None;
            }
        }
    }

    /// Records the current entry (state Forward) or notes the end of the range.
    fn observe(&mut self) {
        self.count();
        if self.state != State::Forward {
            return;
        }
        if self.inner.status().is_err() {
            self.brk();
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
            let v = self.inner.value();
            // The entry's bytes and its offset triple.
            if self.budget.charge(k.len() + v.len() + 16) {
                self.run.push(k, v);
            } else {
                self.brk();
            }
        }
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        let mut c = lock(&self.col);
        c.bytes_read += self.bytes_read;
        if let Some(s) = self.slot {
            match self.state {
                State::Done if !c.broken => {
                    c.runs[s] = Some(std::mem::take(&mut self.run));
                    c.complete += 1;
                }
                State::Done => {}
                _ => c.broken = true,
            }
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
        self.count();
    }
    fn seek_to_last(&mut self) {
        self.brk();
        self.inner.seek_to_last();
        self.count();
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
        self.count();
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
