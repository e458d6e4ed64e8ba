//! When garbage collection runs: not before the data file holds more than `live / gc_start_utilization` plus the
//! reserve, and then only on segments no fuller than `utilization_cap`. A lower start utilisation trades space for
//! fewer relocated bytes (the paper's low-GC and intensive-GC cases).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use flexfile::{Error, FlexFile, Options};

/// 1,024 records of 48 bytes, then 8,192 scattered in-place overwrites (collapse the old bytes, insert the new
/// ones, as FlexDB updates a record). Returns the stats after a sync, the
/// largest segment count seen, and the content after a reopen.
fn overwrite(opts: Options) -> (flexfile::Stats, u64, Vec<u8>) {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let dir = Path::new("/gc");
    let mut f = FlexFile::create(fs.clone(), dir, opts.clone()).unwrap();
    let rec = 48u64;
    let n = 1024;
    for i in 0..n {
        f.insert(i * rec, &[i as u8; 48]).unwrap();
    }
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut peak = 0;
    for i in 0..8 * n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = (x % n) * rec;
        f.collapse(off, rec).unwrap();
        f.insert(off, &[(i % 251) as u8; 48]).unwrap();
        if i % 64 == 0 {
            peak = peak.max(f.stats().segments);
        }
    }
    f.sync().unwrap();
    let stats = f.stats();
    let size = f.size();
    drop(f);
    let mut f = FlexFile::open(fs, dir, opts).unwrap();
    f.check(true).unwrap();
    let mut buf = vec![0u8; size as usize];
    f.read(0, &mut buf).unwrap();
    (stats, peak, buf)
}

#[test]
fn a_lower_start_utilization_trades_space_for_relocated_bytes() {
    let base = Options {
        segment_size: 16 << 10,
        block_size: 1024,
        gc_reserve_segments: 2,
        gc_batch: 2,
        ..Options::default()
    };
    let seg = base.segment_size;
    let (tight, tight_peak, want) = overwrite(base.clone());
    let (low, low_peak, got) = overwrite(Options { gc_start_utilization: (1, 2), ..base.clone() });
    assert_eq!(got, want, "same content whatever the GC policy");
    assert!(tight.gc_rounds > 0 && low.gc_rounds > 0, "both must collect: {tight:?} {low:?}");
    // The file stays within its budget: live / start utilisation, the reserve, one segment for the operation and
    // the open segment, plus one segment of rounding (segments hold a little less than `segment_size`).
    let live_segs = |s: &flexfile::Stats| s.live_bytes.div_ceil(seg);
    assert!(tight_peak <= live_segs(&tight) * 32 / 30 + 2 + 4, "{tight_peak} segments: {tight:?}");
    assert!(low_peak <= live_segs(&low) * 2 + 2 + 4, "{low_peak} segments: {low:?}");
    assert!(low_peak > tight_peak, "the low-GC file must use its room: {low_peak} vs {tight_peak}");
    // Victims about half empty instead of nearly full: far fewer bytes relocated.
    assert!(low.gc_bytes * 3 < tight.gc_bytes, "relocated {} vs {} bytes", low.gc_bytes, tight.gc_bytes);
    assert!(low.data_bytes_written < tight.data_bytes_written);
}

#[test]
fn start_utilization_above_the_cap_is_refused() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    for bad in [(31, 32), (1, 0), (0, 2), (3, 2)] {
        let o = Options { gc_start_utilization: bad, ..Options::tiny() };
        let r = FlexFile::create(fs.clone(), Path::new("/bad"), o);
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{bad:?}");
    }
    let o = Options { gc_start_utilization: (30, 32), ..Options::tiny() };
    FlexFile::create(fs, Path::new("/ok"), o).unwrap();
}
