//! The synchronization primitives the concurrent index uses: std's, or the `shuttle` scheduler's under the
//! `shuttle` feature so randomized schedule tests control every interleaving point.

#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
#[cfg(feature = "shuttle")]
pub(crate) use shuttle::thread::yield_now;

#[cfg(not(feature = "shuttle"))]
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(feature = "shuttle"))]
pub(crate) use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
#[cfg(not(feature = "shuttle"))]
pub(crate) use std::thread::yield_now;

/// Backs off in a spin loop: a few busy spins, then yields the CPU (the lock holder may be descheduled on a
/// 2-core machine).
#[inline]
pub(crate) fn backoff(spins: &mut u32) {
    *spins += 1;
    if cfg!(feature = "shuttle") || *spins > 16 {
        yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// Pads (and aligns) a value to its own pair of cache lines, so counters and lock words that different threads
/// write do not share a line (adjacent-line prefetch pairs lines, hence 128 bytes).
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A small number identifying the calling thread, stable for its lifetime: which epoch slot it tries first,
/// which reader shard it locks and which counter shard it bumps. Only a hint for spreading threads over padded
/// slots; correctness never depends on two threads getting different hints.
#[inline]
pub(crate) fn thread_hint() -> usize {
    use std::cell::Cell;
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    thread_local!(static HINT: Cell<usize> = const { Cell::new(usize::MAX) });
    HINT.with(|h| {
        let v = h.get();
        if v != usize::MAX {
            return v;
        }
        let v = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        h.set(v);
        v
    })
}

/// Reader shards of [`ShardedRwLock`].
pub(crate) const READ_SHARDS: usize = 8;

/// A reader-writer lock whose readers scale: one lock per shard, each on its own cache lines; a reader takes the
/// shard of its thread hint in read mode, a writer takes every shard in write mode (in shard order, so writers
/// cannot deadlock). The internal index is read on every operation and written only by structural changes, so
/// readers must not all bump one shared reader count.
pub(crate) struct ShardedRwLock<T> {
    shards: Box<[CachePadded<RwLock<()>>]>,
    data: std::cell::UnsafeCell<T>,
}

// SAFETY: `data` is only reached through guards that hold a shard in read mode (shared access) or every shard in
// write mode (exclusive access), the same discipline as `RwLock<T>`.
unsafe impl<T: Send> Send for ShardedRwLock<T> {}
// SAFETY: as above; shared readers need `T: Sync`.
unsafe impl<T: Send + Sync> Sync for ShardedRwLock<T> {}

/// Shared access to a [`ShardedRwLock`]'s data.
pub(crate) struct ShardedRead<'a, T> {
    data: &'a T,
    _g: RwLockReadGuard<'a, ()>,
}

/// Exclusive access to a [`ShardedRwLock`]'s data.
pub(crate) struct ShardedWrite<'a, T> {
    data: &'a mut T,
    _g: Vec<RwLockWriteGuard<'a, ()>>,
}

impl<T> ShardedRwLock<T> {
    pub(crate) fn new(data: T) -> Self {
        ShardedRwLock {
            shards: (0..READ_SHARDS).map(|_| CachePadded(RwLock::new(()))).collect(),
            data: std::cell::UnsafeCell::new(data),
        }
    }

    pub(crate) fn read(&self) -> ShardedRead<'_, T> {
        let g = self.shards[thread_hint() % READ_SHARDS].read().unwrap_or_else(|p| p.into_inner());
        // SAFETY: a shard is held in read mode, so no writer (which needs every shard) holds `data`.
        ShardedRead { data: unsafe { &*self.data.get() }, _g: g }
    }

    pub(crate) fn write(&self) -> ShardedWrite<'_, T> {
        let g: Vec<_> = self.shards.iter().map(|s| s.write().unwrap_or_else(|p| p.into_inner())).collect();
        // SAFETY: every shard is held in write mode, so no reader or other writer holds `data`.
        ShardedWrite { data: unsafe { &mut *self.data.get() }, _g: g }
    }
}

impl<T> std::ops::Deref for ShardedRead<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.data
    }
}

impl<T> std::ops::Deref for ShardedWrite<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.data
    }
}

impl<T> std::ops::DerefMut for ShardedWrite<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.data
    }
}
