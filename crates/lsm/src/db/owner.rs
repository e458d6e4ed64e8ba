//! The way back to the engine for the parts of a read that outlive it: a range query's statistics sink, and
//! RangeReduce's collection and file claims, which act when the query's iterator drops.
//!
//! They used to hold a `Weak<Inner>` and upgrade it. An iterator dropped on another thread while the store
//! closed then held the engine for a moment after `close` returned, and the engine, with its directory lock,
//! went away on that thread instead: a reopen right after `close` could find the store locked (regression
//! `regression_iterators_dropped_beside_close_do_not_keep_the_store_locked`). A visit now goes through a gate
//! that `close` shuts and then drains, so once `close` returns no visit holds the engine and none can start.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use super::Inner;

/// Shared by the engine and every part that may call back into it; see the module comment.
#[derive(Default)]
pub(crate) struct Owner {
    inner: OnceLock<Weak<Inner>>,
    closed: AtomicBool,
    visits: AtomicUsize,
}

impl Owner {
    /// Records the engine (once, right after it is built).
    pub(crate) fn set(&self, inner: &Arc<Inner>) {
        let _ = self.inner.set(Arc::downgrade(inner));
    }

    /// Runs `f` on the engine unless it is closing or gone. The engine is released before the visit ends, so
    /// `close` never returns while `f` holds it.
    ///
    /// REQUIRES: `f` does not wait for `close` (it runs on a thread other than the closing one, and takes only
    /// locks `close` does not hold while it drains).
    pub(crate) fn visit<R>(&self, f: impl FnOnce(&Inner) -> R) -> Option<R> {
        // SeqCst on both sides (here: count, then check; in `close`: shut, then read the count): either `close`
        // sees this visit counted and waits for it, or this visit sees the gate shut.
        self.visits.fetch_add(1, Ordering::SeqCst);
        let r = if self.closed.load(Ordering::SeqCst) {
            None
        } else {
            self.inner.get().and_then(Weak::upgrade).map(|inner| f(&inner))
        };
        self.visits.fetch_sub(1, Ordering::SeqCst);
        r
    }

    /// Shuts the gate and waits for the visits under way, which are short (a counter, a queue push, clearing
    /// claim marks).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        while self.visits.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
    }
}

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owner").field("closed", &self.closed.load(Ordering::Relaxed)).finish_non_exhaustive()
    }
}
