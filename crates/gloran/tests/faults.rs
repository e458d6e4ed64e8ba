//! I/O faults (`vfs::FaultFs`): EIO and ENOSPC on reads, writes, syncs and directory syncs during flushes,
//! compactions and lookups surface as `Error::Io` (never `Corruption`, never a panic), and a failed flush or
//! compaction changes nothing: with the faults cleared, every answer still matches the model, and the index can
//! be reopened from its live files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use gloran::{Error, GlobalIndex, IndexOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use vfs::{Fault, FaultFs, FaultKind, Fs, MemFs, Op};

fn check_io(e: Error) {
    match e {
        Error::Io(io) => assert!(vfs::is_eio(&io) || vfs::is_no_space(&io), "unexpected I/O error {io}"),
        other => panic!("a fault surfaced as {other}"),
    }
}

#[test]
fn faults_are_io_errors_and_lose_nothing() {
    for seed in [1u64, 2, 3] {
        eprintln!("fault test seed {seed}");
        let mut rng = SmallRng::seed_from_u64(seed);
        let mem: Arc<dyn Fs> = Arc::new(MemFs::new());
        let fs = Arc::new(FaultFs::new(mem.clone()));
        let dir = Path::new("/db/gloran");
        let opts =
            IndexOptions { buffer_bytes: 400, size_ratio: 2, node_size: 128, ..IndexOptions::default() };
        let mut idx = GlobalIndex::open(fs.clone(), dir, opts.clone(), &[]).unwrap();
        let mut recs: Vec<(u16, u16, u64)> = Vec::new();
        let mut errors = 0;
        for seq in 1..400u64 {
            let kind = if rng.random_bool(0.5) { FaultKind::Eio } else { FaultKind::NoSpace };
            let op = [Op::Write, Op::Sync, Op::SyncDir, Op::Read, Op::Open][rng.random_range(0..5)];
            let armed = rng.random_bool(0.2);
            if armed {
                fs.inject(Fault::random(op, 0.3, seed * 1000 + seq, kind));
            }
            let a: u16 = rng.random_range(0..1000);
            let b = a + rng.random_range(1..100);
            // The record enters the buffer even when the flush it triggers fails (the engine's WAL holds it).
            if let Err(e) = idx.insert(&a.to_be_bytes(), &b.to_be_bytes(), 0, seq) {
                check_io(e);
                errors += 1;
            }
            recs.push((a, b, seq));
            if rng.random_bool(0.05)
                && let Err(e) = idx.compact_all()
            {
                check_io(e);
                errors += 1;
            }
            // Lookups under faults: an answer, when one comes, is right.
            for _ in 0..5 {
                let k: u16 = rng.random_range(0..1100);
                let e = rng.random_range(0..=seq);
                let want = recs.iter().any(|&(s, t, q)| s <= k && k < t && e < q);
                match idx.check_entry(&k.to_be_bytes(), e, u64::MAX) {
                    Ok(got) => assert_eq!(got, want, "seed {seed} seq {seq}: {k}@{e}"),
                    Err(err) => {
                        check_io(err);
                        errors += 1;
                    }
                }
            }
            fs.clear_all();
            for _ in 0..5 {
                let k: u16 = rng.random_range(0..1100);
                let e = rng.random_range(0..=seq);
                let want = recs.iter().any(|&(s, t, q)| s <= k && k < t && e < q);
                assert_eq!(
                    idx.check_entry(&k.to_be_bytes(), e, u64::MAX).unwrap(),
                    want,
                    "after clearing faults"
                );
            }
        }
        assert!(errors > 0, "the faults should have hit something");
        idx.flush().unwrap();
        let live = idx.live_files();
        let obsolete = idx.take_obsolete();
        idx.remove_files(&obsolete).unwrap();
        drop(idx);
        let mut idx = GlobalIndex::open(mem, dir, opts, &live).unwrap();
        idx.remove_unlisted().unwrap();
        idx.check().unwrap();
        for k in (0u16..1100).step_by(7) {
            let want = recs.iter().any(|&(s, t, q)| s <= k && k < t && 0 < q);
            assert_eq!(idx.covering(&k.to_be_bytes(), 0, u64::MAX).unwrap().is_some(), want);
        }
    }
}
