use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use vfs::{Fault, FaultFs, FaultKind, MemFs, Op};

use super::*;
use crate::Store;

/// Dropping a volume set `shutdown` and notified the flusher without taking the lock: a flusher between finding
/// no shutdown and starting to wait missed the notification and waited forever, and so did the drop joining it
/// (the likely cause of a fuzz run of whole-volume recovery that stalled once and could not be repeated).
#[test]
fn regression_drop_never_loses_the_flushers_wakeup() {
    let store = Store::open(Arc::new(MemFs::new()), Path::new("/s"), Options::default()).unwrap();
    let v = store.create_volume("v", 64 * 4096).unwrap();
    drop(store);
    let v = Arc::into_inner(v).expect("the only handle");
    let shared = v.shared.clone();
    // Let the flusher sit between its shutdown check and its wait while the volume is dropped.
    shared.pause_before_wait_ms.store(200, Ordering::Relaxed);
    shared.cv.notify_all();
    std::thread::sleep(Duration::from_millis(50));
    let (done, dropped) = mpsc::channel();
    std::thread::spawn(move || {
        drop(v);
        let _ = done.send(());
    });
    assert!(dropped.recv_timeout(Duration::from_secs(10)).is_ok(), "dropping the volume hung");
}

/// Regression (found by `tests/recover.rs`, writers beside recoveries): a collection round waiting in `drained`
/// for the flusher to install a frozen cache was not woken when a writer's failure stopped the volume (the flusher
/// never takes a stopped volume's frozen cache). It waited until the volume was dropped, holding the round lock,
/// so `Volume::recover`, and every write that tried it, waited for ever.
#[test]
fn regression_a_stop_wakes_a_round_waiting_for_the_frozen_cache() {
    let faults = Arc::new(FaultFs::new(Arc::new(MemFs::new())));
    let opts = Options { flush_in_background: false, gc_in_background: false, ..Options::default() };
    let store = Store::open(faults.clone(), Path::new("/s"), opts).unwrap();
    let v = store.create_volume("v", 64 * 4096).unwrap();
    // A frozen cache nobody takes yet (this volume has no flusher), as while the flusher is busy.
    {
        let mut s = v.lock();
        s.cache.write(0, &[1u8; BLOCK_SIZE]);
        s.freeze();
    }
    let (done, waited) = mpsc::channel();
    let shared = v.shared.clone();
    std::thread::spawn(move || {
        let stopped = shared.drained().poisoned.is_some();
        let _ = done.send(stopped);
    });
    std::thread::sleep(Duration::from_millis(50));
    faults.inject(Fault::after(Op::Sync, 0, FaultKind::NoSpace).once());
    assert!(v.write(&[2u8; BLOCK_SIZE], BLOCK_SIZE as u64, true).is_err());
    let r = waited.recv_timeout(Duration::from_secs(10));
    // Release the waiter whatever happened.
    v.lock().frozen = None;
    v.shared.cv.notify_all();
    assert_eq!(r, Ok(true), "a wait for the frozen cache missed the stop");
}
