//! `FaultFs`: every operation kind can fail with EIO and with ENOSPC, typed, on schedule, reproducibly.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests may panic on failure.

use std::io;
use std::path::Path;
use std::sync::Arc;

use vfs::{
    CrashFs, Fault, FaultFs, FaultKind, File, Fs, MemFs, Op, OpenMode, is_eio, is_no_space, read_all,
    write_atomic,
};

fn p(s: &str) -> &Path {
    Path::new(s)
}

/// A fault file system over a `MemFs` holding directory `d` and file `d/f` (8 bytes).
fn setup() -> (FaultFs, Arc<dyn File>) {
    let mem = MemFs::new();
    mem.create_dir_all(p("d")).unwrap();
    mem.open(p("d/f"), OpenMode::CreateNew).unwrap().write_all_at(b"01234567", 0).unwrap();
    let fs = FaultFs::new(Arc::new(mem));
    let f = fs.open(p("d/f"), OpenMode::ReadWrite).unwrap();
    (fs, f)
}

/// Performs one operation of kind `op`.
fn run(op: Op, fs: &FaultFs, f: &Arc<dyn File>) -> io::Result<()> {
    match op {
        Op::Open => fs.open(p("d/f"), OpenMode::ReadOnly).map(drop),
        Op::Read => f.read_at(&mut [0u8; 4], 0).map(drop),
        Op::Write => f.write_all_at(b"ab", 2),
        Op::Sync => f.sync_data(),
        Op::SyncDir => fs.sync_dir(p("d")),
        Op::Rename => fs.rename(p("d/f"), p("d/f")),
        Op::Remove => {
            fs.inner().open(p("d/tmp"), OpenMode::CreateOrOpen)?;
            fs.remove_file(p("d/tmp"))
        }
        Op::List => fs.list_dir(p("d")).map(drop),
        Op::SetLen => f.set_len(8),
        Op::CreateDir => fs.create_dir_all(p("d/sub")),
        Op::Lock => fs.lock(p("d/LOCK")).map(drop),
        Op::FallocateRange => f.insert_range(0, 1).and_then(|()| f.collapse_range(0, 1)),
        Op::Stat => f.len().map(drop),
    }
}

#[test]
fn every_op_kind_fails_with_eio_and_enospc_typed() {
    for kind in [FaultKind::Eio, FaultKind::NoSpace] {
        for op in Op::ALL {
            let (fs, f) = setup();
            run(op, &fs, &f).unwrap_or_else(|e| panic!("{op:?} fails unarmed: {e}"));
            fs.inject(Fault::after(op, 0, kind));
            let e = run(op, &fs, &f).expect_err("armed fault did not fire");
            match kind {
                FaultKind::Eio => assert!(is_eio(&e) && !is_no_space(&e), "{op:?}: {e}"),
                FaultKind::NoSpace => assert!(is_no_space(&e) && !is_eio(&e), "{op:?}: {e}"),
            }
            assert_eq!(fs.injected_on(op), 1);
            assert_eq!(fs.injected(), 1);
            // A one-shot fault disarms after firing; no other kind was touched.
            assert!(!fs.is_armed(op));
            run(op, &fs, &f).unwrap_or_else(|e| panic!("{op:?} still failing: {e}"));
            assert_eq!(fs.injected(), 1);
        }
    }
}

#[test]
fn after_n_counts_from_arming_and_persistent_keeps_failing() {
    let (fs, f) = setup();
    f.write_all_at(b"x", 0).unwrap();
    fs.inject(Fault::after(Op::Write, 3, FaultKind::NoSpace).persistent());
    for _ in 0..3 {
        f.write_all_at(b"y", 0).unwrap();
    }
    for _ in 0..5 {
        assert!(is_no_space(&f.write_all_at(b"z", 0).unwrap_err()));
    }
    // A failed write has no effect: the last successful one is what reads see.
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, 0).unwrap();
    assert_eq!(&b, b"y");
    assert_eq!((fs.calls(Op::Write), fs.injected_on(Op::Write)), (9, 5));
    fs.clear(Op::Write);
    f.write_all_at(b"w", 0).unwrap();
    assert_eq!(fs.injected(), 5);
}

#[test]
fn probability_faults_are_seeded_and_near_their_rate() {
    let pattern = |seed| {
        let (fs, f) = setup();
        fs.inject(Fault::random(Op::Read, 0.25, seed, FaultKind::Eio));
        let fails: Vec<bool> = (0..2000).map(|_| f.read_at(&mut [0u8; 1], 0).is_err()).collect();
        assert_eq!(fs.injected_on(Op::Read), fails.iter().filter(|&&x| x).count() as u64);
        fails
    };
    let a = pattern(42);
    assert_eq!(a, pattern(42), "same seed, same faults");
    assert_ne!(a, pattern(43));
    let rate = a.iter().filter(|&&x| x).count() as f64 / a.len() as f64;
    assert!((0.2..0.3).contains(&rate), "rate {rate}");
    // A one-shot random fault fires once.
    let (fs, f) = setup();
    fs.inject(Fault::random(Op::Read, 0.5, 1, FaultKind::Eio).once());
    for _ in 0..100 {
        let _ = f.read_at(&mut [0u8; 1], 0);
    }
    assert_eq!(fs.injected(), 1);
}

#[test]
fn rules_change_at_runtime_for_files_already_open() {
    let (fs, f) = setup();
    fs.inject(Fault::after(Op::Sync, 0, FaultKind::Eio).persistent());
    assert!(is_eio(&f.sync_data().unwrap_err()));
    let clone = fs.clone();
    clone.clear_all();
    f.sync_data().unwrap();
    clone.inject(Fault::after(Op::Sync, 1, FaultKind::NoSpace));
    f.sync_data().unwrap();
    assert!(is_no_space(&f.sync_data().unwrap_err()));
    f.sync_data().unwrap();
    assert_eq!(fs.injected(), 2);
}

#[test]
fn write_atomic_under_each_fault_reports_it_and_keeps_the_old_file() {
    for op in [Op::Open, Op::Write, Op::Sync, Op::Rename, Op::SyncDir] {
        let mem = MemFs::new();
        write_atomic(&mem, p("CURRENT"), b"old").unwrap();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        fs.inject(Fault::after(op, 0, FaultKind::Eio));
        let e = write_atomic(&fs, p("CURRENT"), b"new").unwrap_err();
        assert!(is_eio(&e), "{op:?}: {e}");
        let expect: &[u8] = if op == Op::SyncDir { b"new" } else { b"old" };
        assert_eq!(read_all(&mem, p("CURRENT")).unwrap(), expect, "{op:?}");
    }
}

#[test]
fn a_failed_sync_makes_nothing_durable_under_crashfs() {
    let crash = CrashFs::new();
    let fs = FaultFs::new(Arc::new(crash.clone()));
    let f = fs.open(p("f"), OpenMode::CreateNew).unwrap();
    fs.sync_dir(p("")).unwrap();
    f.write_all_at(b"data", 0).unwrap();
    fs.inject(Fault::after(Op::Sync, 0, FaultKind::Eio));
    assert!(is_eio(&f.sync_data().unwrap_err()));
    assert_eq!(read_all(&crash.crash_drop_unsynced(), p("f")).unwrap(), b"");
    f.sync_data().unwrap();
    assert_eq!(read_all(&crash.crash_drop_unsynced(), p("f")).unwrap(), b"data");
}

#[test]
fn out_of_range_probability_is_clamped() {
    let (fs, f) = setup();
    fs.inject(Fault::random(Op::Stat, 7.0, 0, FaultKind::Eio));
    assert!(f.len().is_err() && f.len().is_err());
    fs.inject(Fault::random(Op::Stat, f64::NAN, 0, FaultKind::Eio));
    assert!(f.len().is_ok());
}

#[test]
fn path_filter_fails_only_matching_files_and_counts_only_them() {
    let fs = FaultFs::new(Arc::new(MemFs::new()));
    let wal = fs.open(p("000001.log"), OpenMode::CreateNew).unwrap();
    let manifest = fs.open(p("MANIFEST-000002"), OpenMode::CreateNew).unwrap();
    fs.inject(Fault::after(Op::Sync, 1, FaultKind::Eio).on_paths("MANIFEST").persistent());
    for _ in 0..3 {
        wal.sync_data().unwrap();
    }
    manifest.sync_data().unwrap();
    assert!(is_eio(&manifest.sync_data().unwrap_err()));
    wal.sync_data().unwrap();
    assert_eq!((fs.calls(Op::Sync), fs.injected_on(Op::Sync)), (6, 1));
    // A rename matches by either path.
    fs.inject(Fault::after(Op::Rename, 0, FaultKind::NoSpace).on_paths("CURRENT"));
    fs.rename(p("000001.log"), p("000003.log")).unwrap();
    assert!(is_no_space(&fs.rename(p("000003.log"), p("CURRENT")).unwrap_err()));
}

#[test]
fn partial_write_fault_leaves_a_short_write_behind() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let f = fs.open(p("f"), OpenMode::CreateNew).unwrap();
    fs.inject(Fault::after(Op::Write, 0, FaultKind::NoSpace).partial());
    assert!(is_no_space(&f.write_all_at(&[9u8; 100], 10).unwrap_err()));
    let mut want = vec![0u8; 10];
    want.extend([9u8; 50]);
    assert_eq!(read_all(&mem, p("f")).unwrap(), want);
}
