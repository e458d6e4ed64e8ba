//! Flushed memtables waiting for their last reader, so that freeing them is background work.
//!
//! A read captures the memtables it searches (`Arc<MemTable>`). When the flush that turned one into a table
//! removed the engine's own reference, whichever reader dropped its clone last used to free it: a 64 MiB memtable
//! is millions of nodes, and a profile of a lookup mix found 11 % of the lookups' time in that drop, all of it in
//! the few lookups that happened to be last. The flush now hands its memtable here instead, and the purge thread
//! frees each one once no reader holds it.

use std::sync::{Arc, Mutex};

/// Values kept alive until only this list holds them.
#[derive(Debug)]
pub(crate) struct Retired<T> {
    held: Mutex<Vec<Arc<T>>>,
}

impl<T> Default for Retired<T> {
    fn default() -> Self {
        Retired { held: Mutex::new(Vec::new()) }
    }
}

impl<T> Retired<T> {
    /// Keeps `v` until [`release`](Self::release) finds no other holder.
    pub(crate) fn retire(&self, v: Arc<T>) {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).push(v);
    }

    /// Frees (here, on the calling thread, outside the lock) every value no one else holds; returns how many.
    /// REQUIRES: no new reference to a retired value can be made (it is gone from wherever readers clone it).
    pub(crate) fn release(&self) -> usize {
        let free: Vec<Arc<T>> = {
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            let (free, keep) =
                std::mem::take(&mut *held).into_iter().partition(|v| Arc::strong_count(v) == 1);
            *held = keep;
            free
        };
        free.len()
    }

    /// Values still held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retired_value_is_freed_by_release_once_its_readers_are_gone() {
        let r = Retired::default();
        let a = Arc::new(vec![1u8; 16]);
        let weak = Arc::downgrade(&a);
        let reader = Arc::clone(&a);
        r.retire(a);
        r.retire(Arc::new(vec![2u8]));
        assert_eq!(r.release(), 1, "the value no reader holds goes");
        assert_eq!(r.len(), 1);
        // The last reader's drop does not free it: the list still holds it.
        drop(reader);
        assert!(weak.upgrade().is_some());
        assert_eq!(r.release(), 1);
        assert!(weak.upgrade().is_none());
        assert_eq!(r.len(), 0);
    }
}
