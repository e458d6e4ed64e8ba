//! `FlexFile::read_at` (reads through a shared reference) and `read_at_ahead` (through a scan's read-ahead
//! windows) return exactly what `read` returns, from the open segment's buffer, from segments whose checksum
//! tables are cached and from segments whose tables are not (after a reopen), across GC (which reuses segments
//! under windows kept from before) and checkpoints; and they report damaged data blocks as corruption. Several
//! threads read at once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use flexfile::flexfile::DATA_FILE;
use flexfile::{FlexFile, Options, ReadAhead};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use vfs::OpenMode;

fn seeds() -> Vec<u64> {
    testkit::seeds(&[21, 22, 23])
}

fn compare(f: &FlexFile, model: &[u8], rng: &mut SmallRng, ctx: &str) {
    for _ in 0..12 {
        if model.is_empty() {
            return;
        }
        let off = rng.random_range(0..model.len());
        let len = rng.random_range(0..=(model.len() - off).min(3000));
        let mut buf = vec![0u8; len];
        f.read_at(off as u64, &mut buf).unwrap_or_else(|e| panic!("{ctx}: read_at {off}+{len}: {e}"));
        assert_eq!(buf, &model[off..off + len], "{ctx}: read_at {off}+{len}");
    }
}

/// A scan: consecutive reads of 1 to 100 bytes from a random offset through `ra`, kept by the caller across
/// edits (and, in the first test, across reopens).
fn compare_scan(f: &FlexFile, model: &[u8], rng: &mut SmallRng, ra: &mut ReadAhead, ctx: &str) {
    if model.is_empty() {
        return;
    }
    let mut off = rng.random_range(0..model.len());
    for _ in 0..20 {
        let len = rng.random_range(1..=100).min(model.len() - off);
        let mut buf = vec![0u8; len];
        f.read_at_ahead(off as u64, &mut buf, ra)
            .unwrap_or_else(|e| panic!("{ctx}: read_at_ahead {off}+{len}: {e}"));
        assert_eq!(buf, &model[off..off + len], "{ctx}: read_at_ahead {off}+{len}");
        off += len;
        if off == model.len() {
            return;
        }
    }
}

#[test]
fn read_at_matches_the_model_through_edits_syncs_and_reopens() {
    for seed in seeds() {
        let mut rng = SmallRng::seed_from_u64(seed);
        let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
        let dir = Path::new("/s");
        let mut f = FlexFile::create(fs.clone(), dir, Options::tiny()).unwrap();
        let mut model: Vec<u8> = Vec::new();
        // Small windows, so that reads also take the path of an extent larger than a window.
        let mut ra = ReadAhead::new(1024);
        for step in 0..700 {
            let ctx = format!("seed {seed} step {step}");
            let n = rng.random_range(1..200);
            if model.len() > 4000 && rng.random_range(0..3) == 0 {
                let off = rng.random_range(0..model.len());
                let len = rng.random_range(1..=(model.len() - off).min(400));
                f.collapse(off as u64, len as u64).unwrap();
                model.drain(off..off + len);
            } else {
                let off = rng.random_range(0..=model.len());
                let d: Vec<u8> = (0..n).map(|_| rng.random()).collect();
                f.insert(off as u64, &d).unwrap();
                model.splice(off..off, d);
            }
            match rng.random_range(0..40) {
                0 => f.sync().unwrap(),
                1 => {
                    // Reopen: no checksum table is cached, so read_at reads the entries from the file.
                    f.close().unwrap();
                    f = FlexFile::open(fs.clone(), dir, Options::tiny()).unwrap();
                }
                _ => {}
            }
            compare(&f, &model, &mut rng, &ctx);
            compare_scan(&f, &model, &mut rng, &mut ra, &ctx);
        }
        // Concurrent readers.
        f.sync().unwrap();
        let f = &f;
        let model = &model;
        std::thread::scope(|s| {
            for t in 0..3u64 {
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(seed ^ t);
                    compare(f, model, &mut rng, &format!("seed {seed} thread {t}"));
                    compare_scan(
                        f,
                        model,
                        &mut rng,
                        &mut ReadAhead::default(),
                        &format!("seed {seed} thread {t}"),
                    );
                });
            }
        });
    }
}

#[test]
fn read_at_reports_damaged_blocks_as_corruption() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let dir = Path::new("/d");
    let mut f = FlexFile::create(fs.clone(), dir, Options::tiny()).unwrap();
    let d: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
    f.insert(0, &d).unwrap();
    f.close().unwrap();
    let file = fs.open(&dir.join(DATA_FILE), OpenMode::ReadWrite).unwrap();
    let mut b = [0u8; 1];
    file.read_exact_at(&mut b, 10).unwrap();
    b[0] ^= 0x5a;
    file.write_all_at(&b, 10).unwrap();
    let f = FlexFile::open(fs.clone(), dir, Options::tiny()).unwrap();
    let mut buf = vec![0u8; 100];
    match f.read_at(0, &mut buf) {
        Err(e) if e.is_corruption() => {}
        other => panic!("expected corruption, got {other:?}"),
    }
    // Through read-ahead: a window that covers the damaged block fails when a read touches it, and a window
    // filled by a read elsewhere does not vouch for it.
    let mut ra = ReadAhead::default();
    let mut far = vec![0u8; 10];
    f.read_at_ahead(300, &mut far, &mut ra).unwrap();
    assert_eq!(far, &d[300..310]);
    match f.read_at_ahead(0, &mut buf, &mut ra) {
        Err(e) if e.is_corruption() => {}
        other => panic!("expected corruption through read-ahead, got {other:?}"),
    }
}

/// Neighbouring extents written one after another are read with one positional read per window, not one per
/// extent.
#[test]
fn read_ahead_reads_neighbouring_extents_once() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let dir = Path::new("/r");
    let opts = Options { segment_size: 1 << 20, block_size: 1024, ..Options::tiny() };
    let mut f = FlexFile::create(fs.clone(), dir, opts.clone()).unwrap();
    // Forty 50-byte extents, each inserted at the front: logically reversed, physically adjacent.
    let mut model = Vec::new();
    for i in 0..40u8 {
        let d = vec![i; 50];
        f.insert(0, &d).unwrap();
        model.splice(0..0, d);
    }
    f.close().unwrap();
    let f = FlexFile::open(fs, dir, opts).unwrap();
    let mut ra = ReadAhead::default();
    for i in 0..40u64 {
        let mut buf = vec![0u8; 50];
        f.read_at_ahead(i * 50, &mut buf, &mut ra).unwrap();
        assert_eq!(buf, &model[(i * 50) as usize..(i * 50 + 50) as usize]);
    }
    assert_eq!(ra.reads, 1, "2,000 adjacent bytes fit one 8 KiB window");
}
