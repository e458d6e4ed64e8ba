//! Damage to any header, node, log entry or data block is reported as `Corruption`, never as a panic or a
//! silently wrong answer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use flexfile::flexfile::{DATA_FILE, LOG_FILE, TREE_FILE};
use flexfile::treefile::TreeFile;
use flexfile::{Error, FlexFile, Options};
use vfs::OpenMode;

const DIR: &str = "/c";

fn build(fs: &Arc<dyn vfs::Fs>, close: bool) -> Vec<u8> {
    let mut f = FlexFile::create(fs.clone(), Path::new(DIR), Options::tiny()).unwrap();
    let mut model = Vec::new();
    for i in 0..200u32 {
        let d: Vec<u8> = (0..37).map(|j| (i * 31 + j) as u8).collect();
        let off = (i as usize * 7919) % (model.len() + 1);
        f.insert(off as u64, &d).unwrap();
        model.splice(off..off, d);
    }
    f.sync().unwrap();
    if close {
        f.close().unwrap();
    }
    model
}

fn flip(fs: &Arc<dyn vfs::Fs>, name: &str, off: u64) {
    let f = fs.open(&Path::new(DIR).join(name), OpenMode::ReadWrite).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, off).unwrap();
    b[0] ^= 0x5a;
    f.write_all_at(&b, off).unwrap();
}

fn open(fs: &Arc<dyn vfs::Fs>) -> flexfile::Result<FlexFile> {
    FlexFile::open(fs.clone(), Path::new(DIR), Options::tiny())
}

fn read_all(f: &mut FlexFile) -> flexfile::Result<Vec<u8>> {
    let mut buf = vec![0u8; f.size() as usize];
    f.read(0, &mut buf)?;
    Ok(buf)
}

fn assert_corruption<T: std::fmt::Debug>(r: flexfile::Result<T>, what: &str) {
    match r {
        Err(e) if e.is_corruption() => {}
        other => panic!("{what}: expected corruption, got {other:?}"),
    }
}

#[test]
fn newest_tree_header_damaged_is_corruption() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    build(&fs, true);
    let t = fs.open(&Path::new(DIR).join(TREE_FILE), OpenMode::ReadOnly).unwrap();
    let h = TreeFile::read_header(t.as_ref()).unwrap();
    drop(t);
    flip(&fs, TREE_FILE, (h.version % 2) * h.node_size as u64 + 20);
    assert_corruption(open(&fs), "newest header");
}

#[test]
fn older_tree_header_damaged_is_harmless() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let model = build(&fs, true);
    let t = fs.open(&Path::new(DIR).join(TREE_FILE), OpenMode::ReadOnly).unwrap();
    let h = TreeFile::read_header(t.as_ref()).unwrap();
    drop(t);
    flip(&fs, TREE_FILE, ((h.version + 1) % 2) * h.node_size as u64 + 20);
    let mut f = open(&fs).unwrap();
    assert_eq!(read_all(&mut f).unwrap(), model);
}

#[test]
fn every_tree_node_byte_damage_is_corruption() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    build(&fs, true);
    let t = fs.open(&Path::new(DIR).join(TREE_FILE), OpenMode::ReadOnly).unwrap();
    let h = TreeFile::read_header(t.as_ref()).unwrap();
    let ns = h.node_size as u64;
    drop(t);
    // The root's slot, and a sample of bytes in it.
    for off in [0u64, 4, 6, 16, 20, ns - 1] {
        flip(&fs, TREE_FILE, (2 + h.root_slot as u64) * ns + off);
        assert_corruption(open(&fs), &format!("root node byte {off}"));
        flip(&fs, TREE_FILE, (2 + h.root_slot as u64) * ns + off);
        open(&fs).unwrap();
    }
    // Every live slot (a damaged free slot is never read).
    let mut live = 0;
    for slot in 0..h.slot_count as u64 {
        flip(&fs, TREE_FILE, (2 + slot) * ns + 9);
        let r = open(&fs);
        flip(&fs, TREE_FILE, (2 + slot) * ns + 9);
        if let Err(e) = r {
            assert!(e.is_corruption(), "slot {slot}: {e}");
            live += 1;
        }
    }
    assert!(live > 10, "only {live} slots were live");
}

#[test]
fn damaged_log_entry_before_a_later_batch_is_corruption() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let mut opts = Options::tiny();
    opts.checkpoint_log_bytes = 1 << 30;
    let mut f = FlexFile::create(fs.clone(), Path::new(DIR), opts.clone()).unwrap();
    for i in 0..10u8 {
        f.insert(0, &[i; 10]).unwrap();
        f.sync().unwrap();
    }
    drop(f);
    flip(&fs, LOG_FILE, 32 + 5);
    assert_corruption(FlexFile::open(fs.clone(), Path::new(DIR), opts), "log entry");
}

#[test]
fn damaged_log_header_is_corruption() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let mut f = FlexFile::create(fs.clone(), Path::new(DIR), Options::tiny()).unwrap();
    f.insert(0, b"abc").unwrap();
    f.sync().unwrap();
    drop(f);
    flip(&fs, LOG_FILE, 9);
    assert_corruption(open(&fs), "log header");
}

/// Two synced batches ("first", then "second" appended); returns the log's length and the first batch's end.
fn two_batches(fs: &Arc<dyn vfs::Fs>, opts: &Options) -> (u64, u64) {
    let mut f = FlexFile::create(fs.clone(), Path::new(DIR), opts.clone()).unwrap();
    f.insert(0, b"first").unwrap();
    f.sync().unwrap();
    let log = fs.open(&Path::new(DIR).join(LOG_FILE), OpenMode::ReadOnly).unwrap();
    let first_end = log.len().unwrap();
    f.insert(5, b"second").unwrap();
    f.sync().unwrap();
    drop(f);
    (log.len().unwrap(), first_end)
}

fn no_checkpoints() -> Options {
    let mut opts = Options::tiny();
    opts.checkpoint_log_bytes = 1 << 30;
    opts
}

#[test]
fn torn_last_log_batch_with_unwritten_sectors_is_dropped() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let opts = no_checkpoints();
    let (len, first_end) = two_batches(&fs, &opts);
    // As a crash leaves an unsynced append: the last batch's bytes in a sector that never reached the media
    // read as zeros (here all of them lie in one sector).
    let log = fs.open(&Path::new(DIR).join(LOG_FILE), OpenMode::ReadWrite).unwrap();
    log.write_all_at(&vec![0u8; (len - first_end) as usize], first_end).unwrap();
    drop(log);
    let mut f = FlexFile::open(fs.clone(), Path::new(DIR), opts.clone()).unwrap();
    assert_eq!(read_all(&mut f).unwrap(), b"first");
    assert_eq!(f.stats().torn_log_bytes, len - first_end);
    f.check(true).unwrap();
}

#[test]
fn torn_last_log_batch_cut_short_is_dropped() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let opts = no_checkpoints();
    let (len, first_end) = two_batches(&fs, &opts);
    for cut in [first_end + 1, first_end + 24, len - 24, len - 1] {
        let fs2: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
        for name in [DATA_FILE, LOG_FILE, TREE_FILE] {
            let p = Path::new(DIR).join(name);
            let src = fs.open(&p, OpenMode::ReadOnly).unwrap();
            let mut b = vec![0u8; src.len().unwrap() as usize];
            src.read_exact_at(&mut b, 0).unwrap();
            if name == LOG_FILE {
                b.truncate(cut as usize);
            }
            fs2.create_dir_all(Path::new(DIR)).unwrap();
            fs2.open(&p, OpenMode::CreateTruncate).unwrap().write_all_at(&b, 0).unwrap();
        }
        let mut f = FlexFile::open(fs2, Path::new(DIR), opts.clone()).unwrap();
        assert_eq!(read_all(&mut f).unwrap(), b"first", "log cut at {cut}");
    }
}

#[test]
fn regression_flipped_byte_in_last_synced_log_batch_is_corruption() {
    // This used to be taken for a torn write and the synced batch silently dropped.
    let opts = no_checkpoints();
    let probe: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let (len, first_end) = two_batches(&probe, &opts);
    for off in first_end..len {
        let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
        two_batches(&fs, &opts);
        flip(&fs, LOG_FILE, off);
        assert_corruption(
            FlexFile::open(fs.clone(), Path::new(DIR), opts.clone()),
            &format!("log byte {off}"),
        );
    }
}

#[test]
fn regression_flipped_commit_of_only_log_batch_is_corruption() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let opts = no_checkpoints();
    let mut f = FlexFile::create(fs.clone(), Path::new(DIR), opts.clone()).unwrap();
    f.insert(0, b"only").unwrap();
    f.sync().unwrap();
    drop(f);
    let log = fs.open(&Path::new(DIR).join(LOG_FILE), OpenMode::ReadOnly).unwrap();
    let len = log.len().unwrap();
    drop(log);
    flip(&fs, LOG_FILE, len - 2);
    assert_corruption(FlexFile::open(fs.clone(), Path::new(DIR), opts), "commit entry");
}

#[test]
fn damaged_data_block_is_corruption_on_read_and_check() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    build(&fs, true);
    flip(&fs, DATA_FILE, 100);
    let mut f = open(&fs).unwrap();
    assert_corruption(read_all(&mut f), "data read");
    assert_corruption(f.check(true), "deep check");
    // A checksum-table entry too.
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    build(&fs, true);
    let o = Options::tiny();
    flip(&fs, DATA_FILE, o.segment_capacity() + 1);
    let mut f = open(&fs).unwrap();
    assert_corruption(read_all(&mut f), "table entry");
}

#[test]
fn truncated_files_are_corruption() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    build(&fs, true);
    let d = fs.open(&Path::new(DIR).join(DATA_FILE), OpenMode::ReadWrite).unwrap();
    d.set_len(1000).unwrap();
    drop(d);
    // Found at open (an extent maps past the end) or at the latest on read.
    match open(&fs) {
        Ok(mut f) => assert_corruption(read_all(&mut f), "short data file"),
        Err(e) => assert!(e.is_corruption(), "{e}"),
    }
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    build(&fs, true);
    let t = fs.open(&Path::new(DIR).join(TREE_FILE), OpenMode::ReadWrite).unwrap();
    t.set_len(600).unwrap();
    drop(t);
    let r = open(&fs);
    assert!(matches!(r, Err(Error::Corruption { .. })), "{r:?}");
}
