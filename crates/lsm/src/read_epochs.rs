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

/// One epoch of reads. Held (as a [`crate::rangedel::ReadPin`]) by each read that pinned it, by the epoch before
/// it while that one is alive, and by [`Epochs`] while it is current.
#[derive(Debug, Default)]
pub(crate) struct Epoch {
    next: OnceLock<Arc<Epoch>>,
}

impl Drop for Epoch {
    /// Releases the chain of later epochs without recursion: a read held through many decisions leaves a
    /// chain as long as the decisions it outlived.
    fn drop(&mut self) {
        let mut next = self.next.take();
        while let Some(e) = next {
            next = Arc::into_inner(e).and_then(|mut e| e.next.take());
        }
    }
}

/// The current epoch.
#[derive(Debug, Default)]
pub(crate) struct Epochs {
    current: Mutex<Arc<Epoch>>,
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

    /// Closes the current epoch and starts the next; reads pinned from now on belong to the new one.
    pub(crate) fn close(&self) -> Closed {
        let fresh = Arc::new(Epoch::default());
        let mut cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let old = std::mem::replace(&mut *cur, Arc::clone(&fresh));
        // Only the current epoch's `next` is ever set, once, under the lock.
        let _ = old.next.set(fresh);
        Closed(Arc::downgrade(&old))
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
