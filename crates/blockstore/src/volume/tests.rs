use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use vfs::MemFs;

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
