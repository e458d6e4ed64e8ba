//! Damaged DR-tree files: every bit flip and every truncation is reported as `Corruption` by open, lookups, scans
//! or the checker — never a panic, never a wrong answer taken for a right one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use gloran::{Error, GlobalIndex, IndexOptions, file_name};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use vfs::{Fs, MemFs, OpenMode};

/// A probe `(key, seq)` and whether the undamaged index says it is covered.
type Probe = (Vec<u8>, u64, bool);

fn build() -> (Arc<MemFs>, Vec<gloran::LiveFile>, Vec<Probe>) {
    let fs = Arc::new(MemFs::new());
    let opts = IndexOptions { node_size: 128, ..IndexOptions::default() };
    let mut idx = GlobalIndex::open(fs.clone(), Path::new("/g"), opts, &[]).unwrap();
    let mut rng = SmallRng::seed_from_u64(3);
    for seq in 1..60u64 {
        let a: u16 = rng.random_range(0..1000);
        let len: u16 = rng.random_range(1..50);
        idx.insert(&a.to_be_bytes(), &(a + len).to_be_bytes(), 0, seq).unwrap();
    }
    idx.compact_all().unwrap();
    let probes: Vec<Probe> = (0..200)
        .map(|_| {
            let k = rng.random_range(0u16..1100).to_be_bytes().to_vec();
            let e = rng.random_range(0..60);
            let c = idx.covering(&k, e, u64::MAX).unwrap().is_some();
            (k, e, c)
        })
        .collect();
    assert!(probes.iter().any(|p| p.2) && probes.iter().any(|p| !p.2));
    (fs, idx.live_files(), probes)
}

/// Opens the damaged index and runs everything that reads: each error must be corruption, and every answer
/// that does come back must be right.
fn exercise(fs: Arc<MemFs>, live: &[gloran::LiveFile], probes: &[Probe]) -> bool {
    let idx = match GlobalIndex::open(fs, Path::new("/g"), IndexOptions::default(), live) {
        Ok(i) => i,
        Err(e) => {
            assert!(e.is_corruption(), "open: {e}");
            return true;
        }
    };
    let mut detected = false;
    for (k, e, want) in probes {
        match idx.covering(k, *e, u64::MAX) {
            Ok(got) => assert_eq!(got.is_some(), *want, "a damaged file gave a wrong answer for {k:?}@{e}"),
            Err(err) => {
                assert!(err.is_corruption(), "lookup: {err}");
                detected = true;
            }
        }
    }
    match idx.check() {
        Ok(()) => {}
        Err(err) => {
            assert!(err.is_corruption(), "check: {err}");
            detected = true;
        }
    }
    detected
}

#[test]
fn every_bit_flip_and_truncation_is_corruption() {
    let (fs, live, probes) = build();
    assert_eq!(live.len(), 1);
    let path = Path::new("/g").join(file_name(live[0].number));
    let good = vfs::read_all(fs.as_ref(), &path).unwrap();
    assert!(good.len() > 600, "the file should span several nodes");
    let write = |bytes: &[u8]| {
        let f = fs.open(&path, OpenMode::CreateTruncate).unwrap();
        f.write_all_at(bytes, 0).unwrap();
    };
    for i in 0..good.len() {
        let bit = i % 8;
        let mut bad = good.clone();
        bad[i] ^= 1 << bit;
        write(&bad);
        assert!(exercise(fs.clone(), &live, &probes), "flip of bit {bit} at byte {i} went unnoticed");
    }
    for n in [0, 1, good.len() / 2, good.len() - 68, good.len() - 1] {
        write(&good[..n]);
        assert!(exercise(fs.clone(), &live, &probes), "truncation to {n} went unnoticed");
    }
    write(&good);
    assert!(!exercise(fs.clone(), &live, &probes));
}

#[test]
fn missing_live_file_is_corruption() {
    let (fs, live, _) = build();
    fs.remove_file(&Path::new("/g").join(file_name(live[0].number))).unwrap();
    let err = GlobalIndex::open(fs, Path::new("/g"), IndexOptions::default(), &live).unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
}
