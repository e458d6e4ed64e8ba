//! `Options::background_cpu_priority`: every background thread of the database, and only those, runs at the
//! priority asked for. Alone in its test binary, so no other test's database threads are counted even when the
//! tests of one binary share a process (`cargo test`).
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use lsm::{CpuPriority, Db, Options, WriteOptions};
use vfs::{Fs, MemFs};

/// The nice value in a `/proc/.../stat` line (field 19; fields counted after the parenthesized name, which may
/// hold spaces).
fn nice_of(stat: &str) -> i64 {
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split(' ').nth(19 - 3).unwrap().parse().unwrap()
}

/// The nice values of this process's threads named `lsm-*`.
fn background_nice_values() -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = t.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default().trim().to_string();
        if comm.starts_with("lsm-") {
            out.push((comm, nice_of(&std::fs::read_to_string(dir.join("stat")).unwrap())));
        }
    }
    out
}

fn own_nice() -> i64 {
    nice_of(&std::fs::read_to_string("/proc/thread-self/stat").unwrap())
}

fn options(p: CpuPriority) -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 16 << 10,
        max_bytes_for_level_base: 64 << 10,
        target_file_size_base: 8 << 10,
        level0_file_num_compaction_trigger: 2,
        max_background_compactions: 2,
        background_cpu_priority: p,
        ..Options::default()
    }
}

/// Waits (up to 20 s) until the database's four background threads are running with nice `want`.
fn settled_nice_values(want: i64) -> Vec<(String, i64)> {
    let t = std::time::Instant::now();
    let mut nice = background_nice_values();
    while (nice.len() < 4 || nice.iter().any(|(_, n)| *n != want)) && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(5));
        nice = background_nice_values();
    }
    nice
}

#[test]
fn low_cpu_priority_lowers_every_background_thread_and_only_those() {
    let caller = own_nice();
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Db::open(fs, "/db", options(CpuPriority::Low)).unwrap();
    let nice = settled_nice_values(19);
    let mut names: Vec<&str> = nice.iter().map(|(c, _)| c.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["lsm-compact-0", "lsm-compact-1", "lsm-flush", "lsm-purge"]);
    assert!(nice.iter().all(|(_, n)| *n == 19), "{nice:?}");
    // Writes, flushes and compactions still run at that priority.
    for i in 0..2000u32 {
        db.put(&WriteOptions::default(), format!("key{i:06}").as_bytes(), b"v").unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    assert_eq!(db.get(b"key001999").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(own_nice(), caller, "the caller's thread keeps its priority");
    drop(db);
    // The default leaves the threads at the priority of the thread that opened the database.
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Db::open(fs, "/db", options(CpuPriority::Normal)).unwrap();
    let nice = settled_nice_values(caller);
    assert_eq!(nice.len(), 4, "{nice:?}");
    assert!(nice.iter().all(|(_, n)| *n == caller), "{nice:?}");
    drop(db);
}
