//! Model-based randomized tests of FlexFile against a `Vec<u8>`, with tiny segments and nodes so GC, splits,
//! merges, checkpoints and log commits happen constantly; reopen (clean and unclean) mixed in.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use flexfile::{Error, FlexFile, Options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn seeds() -> Vec<u64> {
    testkit::seeds(&[11, 12, 13, 14])
}

fn contents(f: &mut FlexFile) -> Vec<u8> {
    let mut buf = vec![0u8; f.size() as usize];
    f.read(0, &mut buf).unwrap();
    buf
}

fn rand_bytes(rng: &mut SmallRng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.random()).collect()
}

/// Applies a random operation to both the file and the model.
pub fn random_op(rng: &mut SmallRng, f: &mut FlexFile, m: &mut Vec<u8>, ctx: &str) {
    let size = m.len();
    let n = if rng.random_range(0..20) == 0 { rng.random_range(100..1500) } else { rng.random_range(1..120) };
    match rng.random_range(0..100) {
        0..=34 => {
            let off = rng.random_range(0..=size);
            let d = rand_bytes(rng, n);
            f.insert(off as u64, &d).unwrap_or_else(|e| panic!("{ctx}: insert: {e}"));
            m.splice(off..off, d);
        }
        35..=59 => {
            let off = if rng.random_range(0..10) == 0 {
                size + rng.random_range(0..300)
            } else {
                rng.random_range(0..=size)
            };
            let d = rand_bytes(rng, n);
            f.write(off as u64, &d).unwrap_or_else(|e| panic!("{ctx}: write: {e}"));
            if off + n > m.len() {
                m.resize(off + n, 0);
            }
            m[off..off + n].copy_from_slice(&d);
        }
        60..=79 if size > 0 => {
            let off = rng.random_range(0..size);
            let len = rng.random_range(1..=(size - off).min(n * 2));
            f.collapse(off as u64, len as u64).unwrap_or_else(|e| panic!("{ctx}: collapse: {e}"));
            m.drain(off..off + len);
        }
        80..=83 => {
            let len = if rng.random_range(0..2) == 0 {
                size.saturating_sub(rng.random_range(0..50))
            } else {
                size + rng.random_range(0..100)
            };
            f.truncate(len as u64).unwrap_or_else(|e| panic!("{ctx}: truncate: {e}"));
            m.resize(len, 0);
        }
        84..=85 if size > 0 => {
            let off = rng.random_range(0..size);
            let len = rng.random_range(1..=(size - off).min(2000));
            f.defrag(off as u64, len as u64).unwrap_or_else(|e| panic!("{ctx}: defrag: {e}"));
        }
        86 => {
            let off = rng.random_range(0..=size);
            let len = rng.random_range(0..=(size - off).min(n * 2));
            let d = rand_bytes(rng, n);
            f.replace(off as u64, len as u64, &d).unwrap_or_else(|e| panic!("{ctx}: replace: {e}"));
            m.splice(off..off + len, d);
        }
        87..=89 if size > 0 => {
            let off = rng.random_range(0..size);
            let tag = rng.random_range(1..1000);
            f.set_tag(off as u64, tag).unwrap_or_else(|e| panic!("{ctx}: set_tag: {e}"));
            assert_eq!(f.get_tag(off as u64).unwrap(), tag, "{ctx}");
        }
        _ if size > 0 => {
            let off = rng.random_range(0..size);
            let len = rng.random_range(1..=(size - off).min(600));
            let mut buf = vec![0u8; len];
            f.read(off as u64, &mut buf).unwrap_or_else(|e| panic!("{ctx}: read: {e}"));
            assert_eq!(buf, m[off..off + len], "{ctx}: read {off}+{len}");
            let (start, ext) = f.read_extent(off as u64, 64).unwrap();
            assert!(start <= off as u64);
            assert_eq!(ext, m[start as usize..start as usize + ext.len()], "{ctx}: read_extent");
        }
        _ => {}
    }
}

#[test]
fn model_with_reopens() {
    for seed in seeds() {
        run_model(seed);
    }
}

/// Regression: a write past the end logged its hole, then garbage collection (run inside the write) committed
/// the log, so a crash could expose the hole without the data. GC now runs before an operation logs anything.
#[test]
fn regression_gc_inside_write_past_end_split_the_operation() {
    run_model(14);
}

fn run_model(seed: u64) {
    {
        let mut rng = SmallRng::seed_from_u64(seed);
        let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
        let dir = Path::new("/ff");
        // Odd seeds let the data file grow to twice its live bytes before GC (the paper's low-GC case).
        let opts = if seed % 2 == 1 {
            Options { gc_start_utilization: (1, 2), ..Options::tiny() }
        } else {
            Options::tiny()
        };
        let mut f = FlexFile::create(fs.clone(), dir, opts.clone()).unwrap();
        let mut m: Vec<u8> = Vec::new();
        let mut since_sync: Vec<Vec<u8>> = vec![Vec::new()];
        let (mut gc, mut ck, mut cm) = (0, 0, 0);
        for step in 0..2500 * testkit::scale() {
            let ctx = format!("seed {seed} step {step} size {}", m.len());
            random_op(&mut rng, &mut f, &mut m, &ctx);
            since_sync.push(m.clone());
            assert_eq!(f.size(), m.len() as u64, "{ctx}");
            match rng.random_range(0..100) {
                0..=7 => {
                    f.sync().unwrap();
                    since_sync = vec![m.clone()];
                }
                8 => {
                    let st = f.stats();
                    (gc, ck, cm) = (gc + st.gc_rounds, ck + st.checkpoints, cm + st.commits);
                    f.close().unwrap();
                    f = FlexFile::open(fs.clone(), dir, opts.clone()).unwrap();
                    assert_eq!(contents(&mut f), m, "{ctx}: after clean reopen");
                    since_sync = vec![m.clone()];
                }
                9 => {
                    // Unclean: drop without sync. The file must come back at an operation boundary no earlier
                    // than the last sync.
                    let st = f.stats();
                    (gc, ck, cm) = (gc + st.gc_rounds, ck + st.checkpoints, cm + st.commits);
                    drop(f);
                    f = FlexFile::open(fs.clone(), dir, opts.clone()).unwrap();
                    let got = contents(&mut f);
                    let at = since_sync.iter().rposition(|s| *s == got);
                    assert!(at.is_some(), "{ctx}: reopened contents match no state since the last sync");
                    m = got;
                    since_sync = vec![m.clone()];
                }
                _ => {}
            }
            if step % 50 == 0 {
                f.check(true).unwrap_or_else(|e| panic!("{ctx}: check: {e}"));
                assert_eq!(contents(&mut f), m, "{ctx}");
            }
        }
        let st = f.stats();
        eprintln!("seed {seed}: {st:?}");
        (gc, ck, cm) = (gc + st.gc_rounds, ck + st.checkpoints, cm + st.commits);
        assert!(gc > 0 && ck > 0 && cm > 0, "seed {seed}: gc {gc} checkpoints {ck} commits {cm}");
        f.check(true).unwrap();
        assert_eq!(contents(&mut f), m);
    }
}

#[test]
fn sequential_reader_and_read_extent() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let mut f = FlexFile::create(fs, Path::new("/r"), Options::tiny()).unwrap();
    let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    f.write(0, &data).unwrap();
    f.insert(100, b"hello").unwrap();
    let mut expect = data.clone();
    expect.splice(100..100, b"hello".iter().copied());
    let mut r = f.reader(0);
    let mut got = Vec::new();
    let mut buf = [0u8; 333];
    loop {
        let n = r.read_next(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, expect);
    let (start, bytes) = f.read_extent(102, 100).unwrap();
    assert_eq!(start, 100);
    assert_eq!(bytes, b"hello");
}

#[test]
fn write_past_end_leaves_a_hole() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let mut f = FlexFile::create(fs.clone(), Path::new("/h"), Options::tiny()).unwrap();
    f.write(10_000, b"tail").unwrap();
    assert_eq!(f.size(), 10_004);
    let mut buf = vec![1u8; 10_004];
    f.read(0, &mut buf).unwrap();
    assert!(buf[..10_000].iter().all(|b| *b == 0));
    assert_eq!(&buf[10_000..], b"tail");
    assert_eq!(f.stats().live_bytes, 4);
    f.close().unwrap();
    let mut f = FlexFile::open(fs, Path::new("/h"), Options::tiny()).unwrap();
    let mut buf = vec![1u8; 4];
    f.read(10_000, &mut buf).unwrap();
    assert_eq!(&buf, b"tail");
}

#[test]
fn bad_arguments_are_typed_errors() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let mut f = FlexFile::create(fs.clone(), Path::new("/b"), Options::tiny()).unwrap();
    f.write(0, b"abc").unwrap();
    let mut buf = [0u8; 4];
    assert!(matches!(f.read(0, &mut buf), Err(Error::InvalidArgument(_))));
    assert!(matches!(f.insert(4, b"x"), Err(Error::InvalidArgument(_))));
    assert!(matches!(f.collapse(2, 2), Err(Error::InvalidArgument(_))));
    assert!(matches!(f.set_tag(3, 1), Err(Error::InvalidArgument(_))));
    assert!(matches!(f.write(u64::MAX - 1, b"xy"), Err(Error::InvalidArgument(_))));
    // Still usable after bad calls.
    f.write(3, b"d").unwrap();
    assert!(FlexFile::create(fs.clone(), Path::new("/b"), Options::tiny()).is_err());
    let bad = Options { segment_size: 1000, ..Options::tiny() };
    assert!(matches!(FlexFile::create(fs, Path::new("/c"), bad), Err(Error::InvalidArgument(_))));
}

/// Opening a missing directory failed with a bare "No such file or directory" naming no path, and opening one
/// that held no FlexFile left a `LOCK` file in it.
#[test]
fn regression_a_refused_open_names_the_directory_and_writes_nothing() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let err = FlexFile::open(fs.clone(), Path::new("/missing"), Options::tiny()).expect_err("opened nothing");
    assert!(
        matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("/missing does not exist"),
        "{err}"
    );
    assert!(!fs.exists(Path::new("/missing")).unwrap());
    fs.create_dir_all(Path::new("/empty")).unwrap();
    let err = FlexFile::open(fs.clone(), Path::new("/empty"), Options::tiny()).expect_err("opened nothing");
    assert!(
        matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("/empty holds no FlexFile"),
        "{err}"
    );
    assert!(
        fs.list_dir(Path::new("/empty")).unwrap().is_empty(),
        "the refused open wrote into the directory"
    );
    // The directory is still good for creating one.
    FlexFile::create(fs, Path::new("/empty"), Options::tiny()).unwrap();
}

/// A second open of an open FlexFile failed with an I/O error naming its `LOCK` file; it is now an invalid
/// argument naming the FlexFile, as the other engines say it, and the first handle is unaffected.
#[test]
fn regression_a_second_open_names_the_flexfile_in_use() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let mut f = FlexFile::create(fs.clone(), Path::new("/f"), Options::tiny()).unwrap();
    f.insert(0, b"kept").unwrap();
    for err in [
        FlexFile::open(fs.clone(), Path::new("/f"), Options::tiny()).expect_err("opened twice"),
        FlexFile::create(fs.clone(), Path::new("/f"), Options::tiny()).expect_err("created over an open one"),
    ] {
        assert!(
            matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("FlexFile /f is in use"),
            "{err}"
        );
    }
    f.sync().unwrap();
    drop(f);
    let f = FlexFile::open(fs, Path::new("/f"), Options::tiny()).unwrap();
    let mut buf = [0u8; 4];
    f.read_at(0, &mut buf).unwrap();
    assert_eq!((f.size(), &buf), (4, b"kept"));
}

#[test]
fn large_insert_does_not_overflow_the_log_buffer() {
    // Regression for the reference implementation's fixed log buffer: one operation producing far more entries
    // than the buffer holds must still be one atomic batch.
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let mut f = FlexFile::create(fs.clone(), Path::new("/l"), Options::tiny()).unwrap();
    let big: Vec<u8> = (0..200_000u32).map(|i| (i * 7) as u8).collect();
    f.insert(0, &big).unwrap();
    f.sync().unwrap();
    drop(f);
    let mut f = FlexFile::open(fs, Path::new("/l"), Options::tiny()).unwrap();
    assert_eq!(contents(&mut f), big);
}
