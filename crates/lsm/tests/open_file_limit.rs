//! The engine on a real file system under a low open-file limit. Alone in its test binary because it lowers
//! the process's limit (`RLIMIT_NOFILE`), which would starve tests running beside it in the same process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use lsm::{Db, Options, WriteOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// What the process holds open, by kind (tables counted together): the diagnosis when a test runs out.
fn open_files() -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    for f in std::fs::read_dir("/proc/self/fd").into_iter().flatten().flatten() {
        let t = std::fs::read_link(f.path()).map(|p| p.display().to_string()).unwrap_or_default();
        *kinds.entry(if t.ends_with(".sst") { "tables".to_string() } else { t }).or_insert(0) += 1;
    }
    kinds
}

/// Puts `n` random keys with 60-byte values; the model of what the database holds.
fn fill(db: &Db, seed: u64, n: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut rng = SmallRng::seed_from_u64(testkit::seeds(&[seed])[0]);
    let mut m = BTreeMap::new();
    for i in 0..n {
        let k = format!("k{:06}", rng.random_range(0..200_000)).into_bytes();
        let v = format!("v{i}-{}", "x".repeat(60)).into_bytes();
        db.put(&WriteOptions::default(), &k, &v)
            .unwrap_or_else(|e| panic!("put {i}: {e}; open: {:?}", open_files()));
        m.insert(k, v);
    }
    m
}

fn tables_in(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".sst"))
        .count()
}

#[test]
fn regression_more_tables_than_the_open_file_limit_allows_keep_working() {
    // With `max_open_files` at its default (1000) and the limit at 1024 (Linux's usual default), writes stopped
    // with "Too many open files" once the database held about 1000 tables. Scaled down: a limit of 256 and
    // several hundred tables.
    testkit::lower_open_file_limit(256);
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    let opts = Options {
        create_if_missing: true,
        write_buffer_size: 8 << 10,
        target_file_size_base: 2 << 10,
        max_bytes_for_level_base: 32 << 10,
        ..Options::default()
    };
    let db = Db::open(fs, dir.path(), opts).unwrap();
    let m = fill(&db, 11, 30_000);
    db.flush().unwrap();
    let tables = tables_in(dir.path());
    assert!(tables > 300, "only {tables} tables: the limit was never tested");
    for (k, v) in m.iter().step_by(97) {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    let all = db.scan(&Default::default(), b"k", b"l", usize::MAX).unwrap();
    assert_eq!(all.len(), m.len());
    db.close().unwrap();
}

#[test]
fn regression_a_compaction_writing_many_tables_keeps_few_open() {
    // A compaction kept every output it wrote open until its end (to clip range tombstones to the outputs'
    // final bounds), so one compaction writing more tables than the limit failed: the bulk load that compacts
    // once at the end did exactly that.
    testkit::lower_open_file_limit(256);
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    let opts = Options {
        create_if_missing: true,
        disable_auto_compactions: true,
        write_buffer_size: 64 << 10,
        target_file_size_base: 2 << 10,
        ..Options::default()
    };
    let db = Db::open(fs, dir.path(), opts).unwrap();
    let mut m = fill(&db, 12, 20_000);
    db.delete_range(&WriteOptions::default(), b"k100000", b"k100500").unwrap();
    m.retain(|k, _| !(&k[..] >= b"k100000" && &k[..] < b"k100500"));
    db.flush().unwrap();
    db.compact_range(None, None).unwrap_or_else(|e| panic!("{e}; open: {:?}", open_files()));
    let tables = tables_in(dir.path());
    assert!(tables > 300, "only {tables} tables: the limit was never tested");
    let all = db.scan(&Default::default(), b"k", b"l", usize::MAX).unwrap();
    assert_eq!(all.len(), m.len());
    assert!(all.iter().zip(&m).all(|((k, v), (mk, mv))| k == mk && v == mv));
    db.close().unwrap();
}
