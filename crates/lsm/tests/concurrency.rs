//! Concurrent writers (group commit) and readers while flushes and compactions run in the background.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use lsm::{Db, Options, ReadOptions, WriteOptions};

#[test]
fn concurrent_writers_and_readers_see_consistent_state() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let o = Options {
        create_if_missing: true,
        write_buffer_size: 16 << 10,
        max_bytes_for_level_base: 64 << 10,
        target_file_size_base: 16 << 10,
        level0_file_num_compaction_trigger: 2,
        level0_slowdown_writes_trigger: 4,
        level0_stop_writes_trigger: 8,
        ..Options::default()
    };
    let db = Arc::new(Db::open(fs.clone(), "/db", o.clone()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let n_threads = 4;
    let per = 1500u32;
    let mut hs = Vec::new();
    for t in 0..n_threads {
        let db = db.clone();
        hs.push(std::thread::spawn(move || {
            for i in 0..per {
                let k = format!("t{t}-{i:05}");
                db.put(&WriteOptions { sync: i % 50 == 0 }, k.as_bytes(), k.as_bytes()).unwrap();
                if i % 100 == 99 {
                    // Each thread deletes its own range of the last 10 keys.
                    let a = format!("t{t}-{:05}", i - 9);
                    let b = format!("t{t}-{:05}", i + 1);
                    db.delete_range(&WriteOptions::default(), a.as_bytes(), b.as_bytes()).unwrap();
                }
            }
        }));
    }
    let reader = {
        let db = db.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // Within one snapshot, each thread's keys form a prefix of its write order minus deleted ranges:
                // so every visible key's value equals its key, and the scan is sorted.
                let s = db.snapshot();
                let ro = ReadOptions { snapshot: Some(s.seq()), ..Default::default() };
                let all = db.scan(&ro, b"", b"\xff", usize::MAX).unwrap();
                assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
                assert!(all.iter().all(|(k, v)| k == v));
                if let Some((k, _)) = all.last() {
                    assert_eq!(db.get_opt(&ro, k).unwrap().as_deref(), Some(k.as_slice()));
                }
            }
        })
    };
    for h in hs {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    db.wait_for_compactions().unwrap();
    let st = db.stats();
    let all = db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap();
    assert_eq!(all.len(), (n_threads * (per - per / 100 * 10)) as usize);
    assert!(st.flushes > 0 && st.compactions > 0, "{}", st.to_json());
    assert!(st.write_groups <= st.writes);
    let db = Arc::into_inner(db).unwrap();
    db.close().unwrap();
    let db = Db::open(fs, "/db", o).unwrap();
    assert_eq!(db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap(), all);
}

/// Writers that form groups and ones that write alone, while another thread forces memtable switches
/// (`Db::flush`): every waiter must be woken (a writer skips the notify when it counts no waiter), every batch
/// applied whole. Before the fix a write leader took a waiting switch's queue entry into its group, and the
/// flush then waited for that entry to reach the front forever.
#[test]
fn regression_flush_beside_writers_never_hangs() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let o = Options { create_if_missing: true, write_buffer_size: 32 << 10, ..Options::default() };
    let db = Arc::new(Db::open(fs, "/db", o).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let flusher = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                db.flush().unwrap();
            }
        })
    };
    let writers: Vec<_> = (0..4u32)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..400u32 {
                    let mut b = lsm::WriteBatch::new();
                    for j in 0..3 {
                        let k = format!("t{t}-{i:04}-{j}");
                        b.put(k.as_bytes(), k.as_bytes());
                    }
                    db.write(&WriteOptions { sync: i % 64 == 0 }, b).unwrap();
                }
            })
        })
        .collect();
    for h in writers {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    flusher.join().unwrap();
    let all = db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap();
    assert_eq!(all.len(), 4 * 400 * 3);
    assert!(all.iter().all(|(k, v)| k == v));
    let st = db.stats();
    assert_eq!(st.writes, 4 * 400, "{}", st.to_json());
    assert!(st.flushes > 0, "{}", st.to_json());
}
