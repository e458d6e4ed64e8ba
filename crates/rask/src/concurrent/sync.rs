//! The synchronization primitives the concurrent index uses: std's, or the `shuttle` scheduler's under the
//! `shuttle` feature so randomized schedule tests control every interleaving point.

#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::{Mutex, RwLock};
#[cfg(feature = "shuttle")]
pub(crate) use shuttle::thread::yield_now;

#[cfg(not(feature = "shuttle"))]
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(feature = "shuttle"))]
pub(crate) use std::sync::{Mutex, RwLock};
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
