//! A helper thread that takes the write faults of mapped log windows ahead of the appender (`os_log.rs`).
//!
//! Why: the first store into each 4 KiB page of a mapped log faults, and on ext4 that fault reads the page in
//! (zeros, for the reserved blocks), marks it writable and journals the page's block state: several
//! microseconds, once per 30 or so LSM puts, on the appender's thread. A profile of the GLORAN balanced mix put
//! 11 % of an update's samples there, and every such put lands in the update latency's tail (P99 18-25 us
//! against a median under 2 us). `madvise(MADV_POPULATE_WRITE)` takes the same faults without storing anything, so a thread that runs
//! it a little ahead of the appender moves that work to another core; the appender then finds its pages mapped
//! and writable.
//!
//! How: one process-wide thread, started at the first request, runs the requests in order; a request holds its
//! window (an `Arc`), so the window stays mapped until the request is done even if the log moved on or closed.
//! Populating changes no byte of the file: pages past the log's written end stay zeros, as the reservation
//! already reads. A page the log's owner cuts away meanwhile makes the call fail with `EFAULT` instead of a
//! `SIGBUS`; failures are ignored, since the appender takes any fault the helper did not. A kernel without
//! `MADV_POPULATE_WRITE` (before Linux 5.14) answers `EINVAL`, and the helper is then switched off for the
//! process, as it is if its thread cannot be started, and in a child forked after it started (the child has the
//! channel but not the thread, so its windows would never be unmapped).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, OnceLock};

use crate::os_log::Window;

/// One request: populate `len` bytes of `window` from byte `at` (both page aligned, within the window).
enum Request {
    Populate {
        window: Arc<Window>,
        at: usize,
        len: usize,
    },
    /// Let go of a window the log moved past; the last holder unmaps it.
    Release(Arc<Window>),
    /// Answered once every earlier request is done (tests wait on it).
    #[cfg(test)]
    Barrier(mpsc::SyncSender<()>),
}

/// Set once populating is known not to work here; requests are then dropped at the caller.
static OFF: AtomicBool = AtomicBool::new(false);

/// The process that started the helper thread.
static PID: AtomicU32 = AtomicU32::new(0);

fn helper() -> Option<&'static Sender<Request>> {
    static HELPER: OnceLock<Option<Sender<Request>>> = OnceLock::new();
    HELPER
        .get_or_init(|| {
            PID.store(std::process::id(), Ordering::Relaxed);
            let (tx, rx) = mpsc::channel::<Request>();
            let spawned = std::thread::Builder::new().name("vfs-prefault".into()).spawn(move || {
                for req in rx {
                    match req {
                        Request::Populate { window, at, len } => {
                            if let Err(e) = window.populate(at, len)
                                && e.raw_os_error() == Some(libc::EINVAL)
                            {
                                OFF.store(true, Ordering::Relaxed);
                            }
                        }
                        Request::Release(window) => drop(window),
                        #[cfg(test)]
                        Request::Barrier(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            });
            spawned.ok().map(|_| tx)
        })
        .as_ref()
}

fn send(req: Request) -> bool {
    let Some(tx) = helper().filter(|_| PID.load(Ordering::Relaxed) == std::process::id()) else {
        OFF.store(true, Ordering::Relaxed);
        return false;
    };
    // A failed send drops the request here: its window is then unmapped on this thread, if this was its last holder.
    let sent = tx.send(req).is_ok();
    if !sent {
        OFF.store(true, Ordering::Relaxed);
    }
    sent
}

/// Asks the helper to populate `len` bytes of `window` from `at`. Nothing is reported back: every store still
/// faults in whatever the helper did not populate.
pub(crate) fn populate(window: &Arc<Window>, at: usize, len: usize) {
    if !OFF.load(Ordering::Relaxed) && len > 0 {
        send(Request::Populate { window: Arc::clone(window), at, len });
    }
}

/// Lets go of `window` on the helper thread, where unmapping it costs the appender nothing (`munmap` of a
/// window with its pages written takes a few hundred microseconds: page-table teardown and a TLB shootdown), or
/// here if the helper is off.
pub(crate) fn release(window: Arc<Window>) {
    if !OFF.load(Ordering::Relaxed) {
        send(Request::Release(window));
    }
}

/// Whether requests are being taken (false once populating failed as unsupported here).
#[cfg(test)]
pub(crate) fn enabled() -> bool {
    !OFF.load(Ordering::Relaxed)
}

/// Waits until every request made before the call is done.
#[cfg(test)]
pub(crate) fn drain() {
    let (tx, rx) = mpsc::sync_channel(1);
    if send(Request::Barrier(tx)) {
        let _ = rx.recv();
    }
}
