//! Epoch-based reclamation of retired leaves and leaf bodies (§6.2 ❷).
//!
//! Optimistic readers hold raw pointers to leaves and bodies that a writer may unlink at any moment, so unlinked
//! memory must outlive every reader that could have seen it. The classic three-epoch scheme does that:
//!
//! - A reader *pins* before touching the structure: it claims a participant slot and announces the global epoch
//!   in it; unpinning clears the slot.
//! - A writer *retires* an unlinked object tagged with the global epoch at retirement.
//! - The global epoch advances from `g` to `g + 1` only when every announced epoch equals `g`. An object retired
//!   at `r` is freed once the global epoch reaches `r + 2`: every reader pinned when it was unlinked has unpinned
//!   by then, and readers pinned later cannot reach it.
//!
//! This is our own ~150 lines rather than `crossbeam-epoch` because the concurrent index is tested under the
//! `shuttle` scheduler, which must see every synchronization point: crossbeam's thread-local participant handles
//! and its internal std atomics are invisible to it. Slots are claimed per pin (a CAS on a fixed array), each
//! slot on its own cache lines; a thread starts its scan at the slot of its thread hint, so threads that pin on
//! every operation do not bounce one line between cores. The hint is only a starting point (any free slot will
//! do), so correctness never depends on it.

use super::sync::{AtomicU64, AtomicUsize, CachePadded, Mutex, Ordering, backoff, thread_hint};

const SLOTS: usize = 64;
const INACTIVE: u64 = 0;
/// Retirements between attempts to advance the epoch and free garbage.
const COLLECT_EVERY: usize = 32;

/// A type-erased object waiting to be freed.
struct Retired {
    ptr: *mut (),
    free: unsafe fn(*mut ()),
}

// SAFETY: a retired object is unreachable from the structure; whichever thread frees it is its only owner. The
// objects retired here (leaves and bodies of `V: Send + Sync`) may be dropped on any thread.
unsafe impl Send for Retired {}

/// The collector: global epoch, participant slots and garbage.
pub(crate) struct Collector {
    global: AtomicU64,
    slots: Box<[CachePadded<AtomicU64>]>,
    garbage: Mutex<Vec<(u64, Retired)>>,
    retired_since: AtomicUsize,
}

/// Proof that the current thread is pinned; objects it reads stay allocated until it is dropped.
pub(crate) struct Guard<'a> {
    c: &'a Collector,
    slot: usize,
}

impl Collector {
    pub(crate) fn new() -> Collector {
        Collector {
            global: AtomicU64::new(1),
            slots: (0..SLOTS).map(|_| CachePadded(AtomicU64::new(INACTIVE))).collect(),
            garbage: Mutex::new(Vec::new()),
            retired_since: AtomicUsize::new(0),
        }
    }

    /// Pins the calling thread.
    pub(crate) fn pin(&self) -> Guard<'_> {
        let mut spins = 0;
        let start = thread_hint() % SLOTS;
        loop {
            for k in 0..SLOTS {
                let i = (start + k) % SLOTS;
                let slot = &self.slots[i];
                if slot.load(Ordering::Relaxed) != INACTIVE {
                    continue;
                }
                let e = self.global.load(Ordering::SeqCst);
                if slot.compare_exchange(INACTIVE, e, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                    // Announce, then make sure the announcement is of the current epoch.
                    loop {
                        let now = self.global.load(Ordering::SeqCst);
                        if now == slot.load(Ordering::SeqCst) {
                            break;
                        }
                        slot.store(now, Ordering::SeqCst);
                    }
                    return Guard { c: self, slot: i };
                }
            }
            // More concurrent readers than slots: wait for one to unpin.
            backoff(&mut spins);
        }
    }

    /// Hands `ptr` (from `Box::into_raw`) to the collector, to be dropped once no pinned reader can hold it.
    ///
    /// # Safety
    /// `ptr` must come from `Box::<T>::into_raw`, be unreachable for readers that pin after this call, and be
    /// retired only once.
    pub(crate) unsafe fn retire<T: Send>(&self, ptr: *mut T) {
        unsafe fn free<T>(p: *mut ()) {
            // SAFETY: `retire`'s contract: the pointer came from `Box::<T>::into_raw` and is freed once.
            drop(unsafe { Box::from_raw(p.cast::<T>()) });
        }
        let e = self.global.load(Ordering::SeqCst);
        let mut g = self.garbage.lock().unwrap_or_else(|p| p.into_inner());
        g.push((e, Retired { ptr: ptr.cast(), free: free::<T> }));
        drop(g);
        if self.retired_since.fetch_add(1, Ordering::Relaxed) % COLLECT_EVERY == COLLECT_EVERY - 1 {
            self.collect();
        }
    }

    /// Advances the epoch if every pinned reader has caught up, then frees what is old enough.
    pub(crate) fn collect(&self) {
        let g = self.global.load(Ordering::SeqCst);
        if self.slots.iter().all(|s| {
            let v = s.load(Ordering::SeqCst);
            v == INACTIVE || v == g
        }) {
            let _ = self.global.compare_exchange(g, g + 1, Ordering::SeqCst, Ordering::SeqCst);
        }
        let now = self.global.load(Ordering::SeqCst);
        // Freed after the lock is released, so other writers' retirements do not wait on the frees.
        let ready: Vec<Retired> = {
            let mut garbage = self.garbage.lock().unwrap_or_else(|p| p.into_inner());
            garbage.extract_if(.., |(e, _)| *e + 2 <= now).map(|(_, r)| r).collect()
        };
        for r in ready {
            // SAFETY: retired at least two epochs ago, so no pinned reader can still hold it (module comment).
            unsafe { (r.free)(r.ptr) };
        }
    }

    /// Objects waiting to be freed.
    pub(crate) fn pending(&self) -> usize {
        self.garbage.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.c.slots[self.slot].store(INACTIVE, Ordering::SeqCst);
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        // No guard can outlive the collector (guards borrow it), so everything retired can go.
        let garbage = std::mem::take(self.garbage.get_mut().unwrap_or_else(|p| p.into_inner()));
        for (_, r) in garbage {
            // SAFETY: no reader exists any more; each object was retired once.
            unsafe { (r.free)(r.ptr) };
        }
    }
}
