//! The synchronization primitives of the concurrent tree: `parking_lot`'s locks and std's atomics normally, or
//! locks built on the `shuttle` scheduler's primitives under the `shuttle` feature, so that randomized schedule
//! tests control every point where a thread can block or be preempted (lock, unlock, upgrade, downgrade, atomic).
//!
//! The concurrent tree needs more of a reader-writer lock than `std` offers: guards that own the lock through an
//! `Arc` (hand-over-hand descent moves a guard from one node to the next, so it cannot borrow from a stack
//! frame), an atomic write-to-read downgrade (a range scan sorts under the write lock and then scans under the
//! read lock without letting another writer in between), and the lock behind a read guard (to retake it as a
//! writer). `parking_lot` has all three; shuttle's `RwLock` has none, so the `shuttle` build implements the lock
//! on a shuttle `Mutex` and `Condvar` with `parking_lot`'s policy: a reader waits while a writer holds *or waits
//! for* the lock (no writer starvation), so any schedule that deadlocks on `parking_lot` deadlocks here too.
//!
//! The facade: `RwLock<T>` (`new`, `read`, `write`, `read_arc`, `write_arc`), `ArcReadGuard<T>`,
//! `ArcWriteGuard<T>`, [`downgrade`], [`lock_of`], `Mutex<T>` (`lock` returns the guard, no poisoning), and
//! `AtomicUsize` / `Ordering`.

#[cfg(not(feature = "shuttle"))]
pub(crate) use imp_parking_lot::*;
#[cfg(feature = "shuttle")]
pub(crate) use imp_shuttle::*;

#[cfg(not(feature = "shuttle"))]
mod imp_parking_lot {
    use std::sync::Arc;

    pub(crate) use parking_lot::{Mutex, RwLock};
    pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};

    /// A read guard that owns its lock through an `Arc`.
    pub(crate) type ArcReadGuard<T> = parking_lot::ArcRwLockReadGuard<parking_lot::RawRwLock, T>;
    /// A write guard that owns its lock through an `Arc`.
    pub(crate) type ArcWriteGuard<T> = parking_lot::ArcRwLockWriteGuard<parking_lot::RawRwLock, T>;

    /// Turns a write lock into a read lock atomically: no writer can get in between.
    #[inline]
    pub(crate) fn downgrade<T>(g: ArcWriteGuard<T>) -> ArcReadGuard<T> {
        parking_lot::ArcRwLockWriteGuard::downgrade(g)
    }

    /// The lock a read guard holds.
    #[inline]
    pub(crate) fn lock_of<T>(g: &ArcReadGuard<T>) -> &Arc<RwLock<T>> {
        parking_lot::ArcRwLockReadGuard::rwlock(g)
    }
}

#[cfg(feature = "shuttle")]
mod imp_shuttle {
    use std::cell::UnsafeCell;
    use std::ops::{Deref, DerefMut};
    use std::sync::{Arc, PoisonError};

    pub(crate) use shuttle::sync::atomic::{AtomicUsize, Ordering};

    /// A mutex whose `lock` returns the guard directly, like `parking_lot`'s.
    pub(crate) struct Mutex<T>(shuttle::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(t: T) -> Self {
            Mutex(shuttle::sync::Mutex::new(t))
        }

        pub(crate) fn lock(&self) -> shuttle::sync::MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(PoisonError::into_inner)
        }
    }

    #[derive(Default)]
    struct State {
        readers: usize,
        writer: bool,
        writers_waiting: usize,
    }

    /// A reader-writer lock on shuttle's mutex and condition variable, with `parking_lot`'s writer preference.
    ///
    /// Invariant: `state.writer` implies `state.readers == 0`; `data` is borrowed mutably only by the holder of
    /// `writer`, and shared only by the `readers` holders.
    pub(crate) struct RwLock<T> {
        state: shuttle::sync::Mutex<State>,
        cv: shuttle::sync::Condvar,
        data: UnsafeCell<T>,
    }

    // SAFETY: the lock hands out `&T` only to readers and `&mut T` only to the one writer (see the invariant), the
    // same contract as `std::sync::RwLock`, so the same bounds apply.
    unsafe impl<T: Send> Send for RwLock<T> {}
    // SAFETY: as above; shared readers on several threads need `T: Sync`.
    unsafe impl<T: Send + Sync> Sync for RwLock<T> {}

    impl<T> RwLock<T> {
        pub(crate) fn new(t: T) -> Self {
            RwLock {
                state: shuttle::sync::Mutex::default(),
                cv: shuttle::sync::Condvar::new(),
                data: UnsafeCell::new(t),
            }
        }

        fn state(&self) -> shuttle::sync::MutexGuard<'_, State> {
            self.state.lock().unwrap_or_else(PoisonError::into_inner)
        }

        fn lock_shared(&self) {
            let mut s = self.state();
            while s.writer || s.writers_waiting > 0 {
                s = self.cv.wait(s).unwrap_or_else(PoisonError::into_inner);
            }
            s.readers += 1;
        }

        fn lock_exclusive(&self) {
            let mut s = self.state();
            s.writers_waiting += 1;
            while s.writer || s.readers > 0 {
                s = self.cv.wait(s).unwrap_or_else(PoisonError::into_inner);
            }
            s.writers_waiting -= 1;
            s.writer = true;
        }

        fn unlock_shared(&self) {
            let mut s = self.state();
            s.readers -= 1;
            if s.readers == 0 {
                self.cv.notify_all();
            }
        }

        fn unlock_exclusive(&self) {
            let mut s = self.state();
            s.writer = false;
            self.cv.notify_all();
        }

        fn downgrade_exclusive(&self) {
            let mut s = self.state();
            s.writer = false;
            s.readers = 1;
            self.cv.notify_all();
        }

        pub(crate) fn read(&self) -> ReadGuard<'_, T> {
            self.lock_shared();
            ReadGuard { lock: self }
        }

        pub(crate) fn write(&self) -> WriteGuard<'_, T> {
            self.lock_exclusive();
            WriteGuard { lock: self }
        }

        pub(crate) fn read_arc(self: &Arc<Self>) -> ArcReadGuard<T> {
            self.lock_shared();
            ArcReadGuard { lock: self.clone() }
        }

        pub(crate) fn write_arc(self: &Arc<Self>) -> ArcWriteGuard<T> {
            self.lock_exclusive();
            ArcWriteGuard { lock: Some(self.clone()) }
        }
    }

    pub(crate) struct ReadGuard<'a, T> {
        lock: &'a RwLock<T>,
    }

    impl<T> Deref for ReadGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            // SAFETY: this guard counts as one of `readers`, so no writer exists while it lives.
            unsafe { &*self.lock.data.get() }
        }
    }

    impl<T> Drop for ReadGuard<'_, T> {
        fn drop(&mut self) {
            self.lock.unlock_shared();
        }
    }

    pub(crate) struct WriteGuard<'a, T> {
        lock: &'a RwLock<T>,
    }

    impl<T> Deref for WriteGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            // SAFETY: this guard holds `writer`, so nobody else borrows the data while it lives.
            unsafe { &*self.lock.data.get() }
        }
    }

    impl<T> DerefMut for WriteGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            // SAFETY: as in `deref`; `&mut self` makes this the only borrow through the guard.
            unsafe { &mut *self.lock.data.get() }
        }
    }

    impl<T> Drop for WriteGuard<'_, T> {
        fn drop(&mut self) {
            self.lock.unlock_exclusive();
        }
    }

    pub(crate) struct ArcReadGuard<T> {
        lock: Arc<RwLock<T>>,
    }

    impl<T> Deref for ArcReadGuard<T> {
        type Target = T;
        fn deref(&self) -> &T {
            // SAFETY: this guard counts as one of `readers`, so no writer exists while it lives.
            unsafe { &*self.lock.data.get() }
        }
    }

    impl<T> Drop for ArcReadGuard<T> {
        fn drop(&mut self) {
            self.lock.unlock_shared();
        }
    }

    /// `lock` is `None` only after `downgrade` moved the lock into a read guard.
    pub(crate) struct ArcWriteGuard<T> {
        lock: Option<Arc<RwLock<T>>>,
    }

    impl<T> ArcWriteGuard<T> {
        fn lock(&self) -> &RwLock<T> {
            self.lock.as_deref().unwrap_or_else(|| unreachable!("a live write guard holds its lock"))
        }
    }

    impl<T> Deref for ArcWriteGuard<T> {
        type Target = T;
        fn deref(&self) -> &T {
            // SAFETY: this guard holds `writer`, so nobody else borrows the data while it lives.
            unsafe { &*self.lock().data.get() }
        }
    }

    impl<T> DerefMut for ArcWriteGuard<T> {
        fn deref_mut(&mut self) -> &mut T {
            // SAFETY: as in `deref`; `&mut self` makes this the only borrow through the guard.
            unsafe { &mut *self.lock().data.get() }
        }
    }

    impl<T> Drop for ArcWriteGuard<T> {
        fn drop(&mut self) {
            if let Some(l) = self.lock.take() {
                l.unlock_exclusive();
            }
        }
    }

    /// Turns a write lock into a read lock atomically: no writer can get in between.
    pub(crate) fn downgrade<T>(mut g: ArcWriteGuard<T>) -> ArcReadGuard<T> {
        let lock = g.lock.take().unwrap_or_else(|| unreachable!("a live write guard holds its lock"));
        lock.downgrade_exclusive();
        ArcReadGuard { lock }
    }

    /// The lock a read guard holds.
    pub(crate) fn lock_of<T>(g: &ArcReadGuard<T>) -> &Arc<RwLock<T>> {
        &g.lock
    }
}
