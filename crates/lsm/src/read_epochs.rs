//! Read epochs: how the global index's GC (`rangedel_global.rs`) knows that every read which started before a
//! decision has finished.
//!
//! A read pins the current [`Epoch`] before it captures its sources; a GC decision closes the current epoch and
//! starts the next. The decision may act once no read of the epoch it closed, *nor of any earlier one*, is left:
//! an earlier read can hold an even older version. Each closed epoch therefore holds the epoch after it, so an
//! epoch stays alive while any read of it or of an earlier epoch does, and a decision watches only the epoch it
//! closed ([`Closed::drained`]). Decisions may then be merged freely: a merged one watches the newest epoch among
//! them, which waits for all the older ones.
//!
//! (The first version watched each decision's own epoch and kept decisions in order, waiting for every older
//! one; when a new decision absorbed the newest waiting one, the absorbed epoch's readers were forgotten.
//! Regression `db::tests::regression_gc_waits_for_the_readers_of_an_absorbed_plan`.)

use std::sync::{Arc, Mutex, OnceLock, Weak};

/// Called when a closed epoch drains (see [`Epochs::set_waker`]).
pub(crate) type Waker = Arc<dyn Fn() + Send + Sync>;

/// One epoch of reads. Held (as a [`crate::rangedel::ReadPin`]) by each read that pinned it, by the epoch before
/// it while that one is alive, and by [`Epochs`] while it is current.
#[derive(Default)]
pub(crate) struct Epoch {
    next: OnceLock<Arc<Epoch>>,
    /// Set when the epoch is closed.
    on_drain: OnceLock<Waker>,
}

impl std::fmt::Debug for Epoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Epoch").field("closed", &self.next.get().is_some()).finish_non_exhaustive()
    }
}

impl Drop for Epoch {
    /// Releases the chain of later epochs without recursion (a read held through many decisions leaves a chain
    /// as long as the decisions it outlived), then calls the waker once for every epoch that drained with it.
    fn drop(&mut self) {
        let mut wake = self.on_drain.take();
        let mut next = self.next.take();
        while let Some(e) = next {
            let Some(mut e) = Arc::into_inner(e) else { break };
            next = e.next.take();
            wake = e.on_drain.take().or(wake);
        }
        if let Some(w) = wake {
            w();
        }
    }
}

/// The current epoch.
#[derive(Default)]
pub(crate) struct Epochs {
    current: Mutex<Arc<Epoch>>,
    waker: OnceLock<Waker>,
}

impl std::fmt::Debug for Epochs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Epochs").field("current", &self.current).finish_non_exhaustive()
    }
}

/// A closed epoch, as a decision watches it.
#[derive(Debug)]
pub(crate) struct Closed(Weak<Epoch>);

impl Closed {
    /// Whether every read of this epoch and of every earlier one has finished.
    pub(crate) fn drained(&self) -> bool {
        self.0.strong_count() == 0
    }
}

impl Epochs {
    /// Pins the current epoch. REQUIRES: taken before the read captures anything it reads.
    pub(crate) fn pin(&self) -> Arc<Epoch> {
        Arc::clone(&self.current.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Closes the current epoch and starts the next; reads pinned from now on belong to the new one. If no read
    /// of it or of an earlier epoch is left, it drains (and the waker runs) before this returns.
    pub(crate) fn close(&self) -> Closed {
        let fresh = Arc::new(Epoch::default());
        let old = {
            let mut cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
            std::mem::replace(&mut *cur, Arc::clone(&fresh))
        };
        // Only the current epoch's `next` is ever set, once, under the lock; `on_drain` only here.
        let _ = old.next.set(fresh);
        if let Some(w) = self.waker.get() {
            let _ = old.on_drain.set(Arc::clone(w));
        }
        // Dropped here, outside the lock: draining may run the waker.
        Closed(Arc::downgrade(&old))
    }

    /// Sets what runs when a closed epoch drains: once, on the thread that released its last pin (or in
    /// `close`). It must not need a lock that a thread may hold while it drops a pin.
    pub(crate) fn set_waker(&self, waker: Waker) {
        let _ = self.waker.set(waker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_epoch_drains_when_its_reads_and_every_earlier_one_finish() {
        let e = Epochs::default();
        let first = e.close();
        assert!(first.drained(), "no read was pinned");
        let a = e.pin();
        let second = e.close();
        let b = e.pin();
        let third = e.close();
        assert!(!second.drained() && !third.drained());
        drop(b);
        // `a` is older than the third decision too.
        assert!(!third.drained());
        drop(a);
        assert!(second.drained() && third.drained());
        // Reads pinned after a decision do not hold it.
        let c = e.pin();
        assert!(third.drained());
        let fourth = e.close();
        assert!(!fourth.drained());
        drop(c);
        assert!(fourth.drained());
    }

    #[test]
    fn the_waker_runs_once_when_closed_epochs_drain() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let e = Epochs::default();
        let woken = Arc::new(AtomicUsize::new(0));
        let w = Arc::clone(&woken);
        e.set_waker(Arc::new(move || {
            w.fetch_add(1, Ordering::SeqCst);
        }));
        // No read: the epoch drains as it closes.
        e.close();
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        // A read held through three decisions: nothing drains until it ends, then all three at once.
        let long = e.pin();
        let closed: Vec<Closed> = (0..3).map(|_| e.close()).collect();
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        drop(long);
        assert!(closed.iter().all(Closed::drained));
        assert_eq!(woken.load(Ordering::SeqCst), 2);
        // The current epoch is not closed: a read of it wakes nobody.
        drop(e.pin());
        assert_eq!(woken.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_read_held_through_many_decisions_releases_them_all_at_once() {
        let e = Epochs::default();
        let long = e.pin();
        let closed: Vec<Closed> = (0..200_000).map(|_| e.close()).collect();
        assert!(closed.iter().all(|c| !c.drained()));
        // Dropping the pin drops the whole chain (without a stack overflow).
        drop(long);
        assert!(closed.iter().all(Closed::drained));
    }
}
