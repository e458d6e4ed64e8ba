use std::cell::RefCell;
use std::sync::mpsc;

use super::*;
use crate::rangedel_global::GlobalRangeDeletes;

thread_local! {
    /// Run once (then cleared) by this thread's next read right after it captured its sources and snapshot.
    static AFTER_CAPTURE: RefCell<Option<Box<dyn FnOnce()>>> = const { RefCell::new(None) };
}

pub(super) fn after_capture() {
    if let Some(f) = AFTER_CAPTURE.with(|h| h.borrow_mut().take()) {
        f();
    }
}

/// Starts `read` on another thread and returns once it has captured its sources and snapshot; it reads on when
/// the returned sender sends (or is dropped). Join the handle for what it read.
pub(super) fn start_paused<T: Send + 'static>(
    db: &Arc<Db>,
    read: impl FnOnce(&Db) -> T + Send + 'static,
) -> (mpsc::Sender<()>, std::thread::JoinHandle<T>) {
    let (entered, wait_entered) = mpsc::channel();
    let (go, wait_go) = mpsc::channel::<()>();
    let db = db.clone();
    let reader = std::thread::spawn(move || {
        AFTER_CAPTURE.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                entered.send(()).unwrap();
                let _ = wait_go.recv();
            }))
        });
        read(&db)
    });
    wait_entered.recv().unwrap();
    (go, reader)
}

/// Runs `read` on another thread, stopped right after it captured its snapshot while `write` runs here, and
/// returns what it read.
fn read_across<T: Send + 'static>(
    db: &Arc<Db>,
    read: impl FnOnce(&Db) -> T + Send + 'static,
    write: impl FnOnce(&Db),
) -> T {
    let (go, reader) = start_paused(db, read);
    write(db);
    go.send(()).unwrap();
    reader.join().unwrap()
}

/// A `get` of `key` at a snapshot taken now, stopped after its capture while `write` runs here.
fn get_at_a_snapshot_across(db: &Arc<Db>, key: &'static [u8], write: impl FnOnce(&Db)) -> Option<Vec<u8>> {
    let snap = Arc::new(db.snapshot());
    let at = snap.clone();
    read_across(
        db,
        move |db| db.get_opt(&ReadOptions { snapshot: Some(&at), ..Default::default() }, key).unwrap(),
        write,
    )
}

/// A global-strategy store holding `k` in a table and one range delete over it, in the index's buffer.
fn store_with_a_deleted_key() -> Arc<Db> {
    let opts = Options {
        create_if_missing: true,
        range_delete_strategy: Arc::new(GlobalRangeDeletes::new()),
        ..Options::default()
    };
    let db = Db::open(Arc::new(vfs::MemFs::new()), "/db", opts).unwrap();
    let w = WriteOptions::default();
    db.put(&w, b"k", b"v").unwrap();
    db.flush().unwrap();
    db.delete_range(&w, b"a", b"z").unwrap();
    Arc::new(db)
}

/// A second delete over the same keys and an index flush: with no snapshot between the two deletes, the flush
/// merges them into one area reporting the newer one's sequence number.
fn delete_again_and_flush(db: &Db) {
    let w = WriteOptions::default();
    db.delete_range(&w, b"a", b"z").unwrap();
    db.put(&w, b"zz", b"x").unwrap();
    db.flush().unwrap();
}

/// A scan read its implicit snapshot, then the global index merged the delete it sees into a newer one it does
/// not see (nothing kept the unregistered snapshot apart), and the scan's cursor, taken after that, found no
/// delete covering `k`: the deleted key came back.
#[test]
fn regression_scan_across_an_index_flush_keeps_the_deletes_of_its_snapshot() {
    let db = store_with_a_deleted_key();
    let got = read_across(
        &db,
        |db| db.scan(&ReadOptions::default(), b"a", b"z", 10).unwrap(),
        delete_again_and_flush,
    );
    assert_eq!(got, Vec::<(Vec<u8>, Vec<u8>)>::new());
}

/// The same for a point lookup, which asks the index after its search found `k` in the table.
#[test]
fn regression_get_across_an_index_flush_keeps_the_deletes_of_its_snapshot() {
    let db = store_with_a_deleted_key();
    let got = read_across(&db, |db| db.get(b"k").unwrap(), delete_again_and_flush);
    assert_eq!(got, None);
}

/// An empty global-strategy store that compacts only when asked, so each `compact_range` is one bottommost
/// compaction (and one planned GC).
fn manual_global_store() -> Arc<Db> {
    let opts = Options {
        create_if_missing: true,
        disable_auto_compactions: true,
        range_delete_strategy: Arc::new(GlobalRangeDeletes::new()),
        ..Options::default()
    };
    Arc::new(Db::open(Arc::new(vfs::MemFs::new()), "/db", opts).unwrap())
}

/// Global-index GC used to wait only for the readers of the epoch the latest plan closed: a second bottommost
/// compaction replaced the first plan, and the GC ran while a lookup that had pinned the first epoch still held
/// a version with an entry below the watermark. The GC clipped the delete covering that entry, and the lookup,
/// at a registered snapshot (so no retry), returned the deleted value.
#[test]
fn regression_gc_waits_for_readers_of_every_older_epoch() {
    let db = manual_global_store();
    let w = WriteOptions::default();
    db.put(&w, b"k", b"old").unwrap();
    db.flush().unwrap();
    db.delete_range(&w, b"a", b"z").unwrap();
    let got = get_at_a_snapshot_across(&db, b"k", |db| {
        // Two bottommost compactions, each planning a GC, then a flush, which runs what is ready.
        for key in [&b"zz"[..], b"zzz", b"zzzz"] {
            db.put(&w, key, b"x").unwrap();
            db.flush().unwrap();
            db.compact_range(None, None).unwrap();
        }
        db.put(&w, b"zzzzz", b"x").unwrap();
        db.flush().unwrap();
    });
    assert_eq!(got, None);
}

/// When plans pile up behind a long reader, a new plan absorbs the newest waiting one. The absorbed plan's epoch
/// used to drop out of what GC waited for, so a lookup pinned to it (a get at a registered snapshot, which does
/// not retry) could find an entry whose range record GC had just purged, and return a deleted value. Found by a
/// soak of `reads_see_one_state_beside_range_deletes_and_rewrites` at `RANGEDB_TEST_SCALE=20`, where slowly
/// stepped iterators hold their pins through many bottommost compactions.
#[test]
fn regression_gc_waits_for_the_readers_of_an_absorbed_plan() {
    let db = manual_global_store();
    let w = WriteOptions::default();
    // A bottommost compaction of a key outside the deleted range; each plans a GC.
    let compact = |db: &Db| {
        db.put(&w, b"zz", b"x").unwrap();
        db.compact_range(None, None).unwrap();
    };
    compact(&db);
    // A long reader: every plan from here on waits for it.
    let long = db.iter(&ReadOptions::default()).unwrap();
    for _ in 0..7 {
        compact(&db);
    }
    db.put(&w, b"k", b"old").unwrap();
    db.flush().unwrap();
    db.delete_range(&w, b"a", b"z").unwrap();
    let got = get_at_a_snapshot_across(&db, b"k", move |db| {
        // The eighth plan waits for the paused get, which holds the table with `k`; the compaction before
        // the ninth drops `k`, so that plan's spans find the record's area dead, and it absorbs the eighth.
        compact(db);
        compact(db);
        drop(long);
        // A flush runs whatever GC is ready.
        db.put(&w, b"zzz", b"x").unwrap();
        db.flush().unwrap();
    });
    assert_eq!(got, None);
}
