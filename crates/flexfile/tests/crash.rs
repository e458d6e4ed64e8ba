//! Crash tests on `CrashFs`: run random operations with syncs, crash at a random mutating operation (inside
//! commits, checkpoints, GC, log resets alike), recover under a random power-loss outcome, and require the file
//! to hold the state of an operation boundary no earlier than the last completed `sync`, with every invariant.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use flexfile::{Error, FlexFile, Options};
use rand::Rng;
use vfs::CrashFs;

const DIR: &str = "/crash";

/// One trial: returns the number of mutating operations the workload performed, and whether the recovered state
/// was older than the last operation attempted (the crash lost unsynced work).
/// Odd seeds also delay checkpoints until the log is three times the tree (`checkpoint_tree_ratio`), so crashes
/// meet longer logs; even seeds checkpoint at the fixed threshold alone. Seeds divisible by 3 let the data file
/// grow to twice its live bytes before GC (`gc_start_utilization` 1/2), so crashes meet sparser segments.
fn trial(seed: u64, budget: Option<u64>, steps: usize) -> (u64, bool) {
    let opts = Options {
        checkpoint_tree_ratio: if seed % 2 == 1 { 3 } else { 0 },
        gc_start_utilization: if seed.is_multiple_of(3) { (1, 2) } else { (30, 32) },
        ..Options::tiny()
    };
    let mut rng = common::rng(seed);
    let fs = CrashFs::new();
    let dynfs: Arc<dyn vfs::Fs> = Arc::new(fs.clone());
    let mut f = FlexFile::create(dynfs, Path::new(DIR), opts.clone()).unwrap();
    let base = fs.ops();
    if let Some(b) = budget {
        fs.set_op_budget(b);
    }
    let mut m: Vec<u8> = Vec::new();
    // States the file may legally recover to: the last synced one and every later operation boundary.
    let mut allowed: Vec<Vec<u8>> = vec![Vec::new()];
    let mut crashed = false;
    for _ in 0..steps {
        let (next, r) = common::mutate(&mut rng, &mut f, &m);
        match r {
            Ok(()) => {
                m = next;
                allowed.push(m.clone());
            }
            Err(Error::InvalidArgument(e)) => panic!("seed {seed}: bad generated op: {e}"),
            Err(_) => {
                // Died inside the operation: it may or may not have become durable.
                allowed.push(next);
                crashed = true;
                break;
            }
        }
        if rng.random_range(0..8) == 0 {
            match f.sync() {
                Ok(()) => allowed = vec![m.clone()],
                Err(_) => {
                    crashed = true;
                    break;
                }
            }
        }
    }
    if budget.is_none() {
        return (fs.ops() - base, false);
    }
    let _ = crashed;
    drop(f);
    let mode = rng.random_range(0..4);
    let after = match mode {
        0 => fs.crash_drop_unsynced(),
        1 => fs.crash_keep_unsynced(),
        _ => fs.crash(seed ^ 0xc0ffee),
    };
    let afs: Arc<dyn vfs::Fs> = Arc::new(after);
    let mut f = FlexFile::open(afs.clone(), Path::new(DIR), opts.clone())
        .unwrap_or_else(|e| panic!("seed {seed} budget {budget:?} mode {mode}: reopen failed: {e}"));
    f.check(true).unwrap_or_else(|e| panic!("seed {seed} budget {budget:?} mode {mode}: check: {e}"));
    let got = common::contents(&mut f).unwrap();
    assert!(
        allowed.contains(&got),
        "seed {seed} budget {budget:?} mode {mode}: recovered {} bytes, matching no state since the last sync (last synced {} bytes)",
        got.len(),
        allowed[0].len()
    );
    let rolled_back = Some(&got) != allowed.last();
    // The recovered file keeps working and stays durable.
    let mut m = got;
    for _ in 0..30 {
        let (next, r) = common::mutate(&mut rng, &mut f, &m);
        r.unwrap();
        m = next;
    }
    f.sync().unwrap();
    drop(f);
    let mut f = FlexFile::open(afs, Path::new(DIR), opts).unwrap();
    assert_eq!(common::contents(&mut f).unwrap(), m, "seed {seed}: after recovery and more work");
    (0, rolled_back)
}

#[test]
fn crash_at_random_points() {
    let steps = 300 * testkit::scale();
    let (mut rolled_back, mut trials) = (0, 0);
    for seed in testkit::seeds(&[101, 102, 103, 104, 105, 106, 107, 108]) {
        let (total, _) = trial(seed, None, steps);
        let mut rng = common::rng(seed ^ 77);
        for i in 0..12 {
            let b = rng.random_range(0..total.max(1));
            rolled_back += usize::from(trial(seed * 1000 + i, Some(b), steps).1);
            trials += 1;
        }
    }
    eprintln!("{rolled_back} of {trials} crashes lost unsynced work");
    assert!(rolled_back > 0, "no crash ever lost anything: the crash points are not being reached");
}

struct Run {
    total: u64,
    /// (mutating operations done when a sync returned, index into `prefixes` of the state it made durable).
    syncs: Vec<(u64, usize)>,
    prefixes: Vec<Vec<u8>>,
    fs: CrashFs,
}

/// Inserts with a sync every few, a collapse that merges many nodes, an explicit checkpoint, more inserts, a
/// final sync and a closing checkpoint; with a budget, dies at that mutating operation.
fn short_run(budget: Option<u64>) -> Run {
    let fs = CrashFs::new();
    let dynfs: Arc<dyn vfs::Fs> = Arc::new(fs.clone());
    let mut f = FlexFile::create(dynfs, Path::new(DIR), Options::tiny()).unwrap();
    let base = fs.ops();
    if let Some(b) = budget {
        fs.set_op_budget(b);
    }
    let mut model: Vec<u8> = Vec::new();
    let mut prefixes = vec![Vec::new()];
    let mut syncs = Vec::new();
    let mut alive = true;
    // Every attempted operation's result is a state a crash may leave (it may or may not have become durable).
    let step = |next: Vec<u8>, r: flexfile::Result<()>, prefixes: &mut Vec<Vec<u8>>| {
        prefixes.push(next);
        r.is_ok()
    };
    for i in 0..90u8 {
        let d = vec![i; 40 + i as usize];
        let off = (i as usize * 37) % (model.len() + 1);
        let mut next = model.clone();
        next.splice(off..off, d.iter().copied());
        let r = f.insert(off as u64, &d);
        alive = step(next.clone(), r, &mut prefixes);
        if !alive {
            break;
        }
        model = next;
        if i % 5 == 4 {
            if f.sync().is_err() {
                alive = false;
                break;
            }
            syncs.push((fs.ops() - base, prefixes.len() - 1));
        }
    }
    // A large collapse merges nodes: the slots they free must not be reused before the next header is durable
    // (the reference implementation reused them at once, breaking copy-on-write across a crash).
    if alive {
        let mut next = model.clone();
        next.drain(50..model.len() - 50);
        let r = f.collapse(50, model.len() as u64 - 100);
        alive = step(next.clone(), r, &mut prefixes);
        model = next;
    }
    if alive && f.checkpoint().is_ok() {
        syncs.push((fs.ops() - base, prefixes.len() - 1));
        for i in 0..10u8 {
            let mut next = model.clone();
            next.splice(0..0, [i; 7]);
            let r = f.insert(0, &[i; 7]);
            if !step(next.clone(), r, &mut prefixes) {
                break;
            }
            model = next;
        }
        if f.sync().is_ok() {
            syncs.push((fs.ops() - base, prefixes.len() - 1));
        }
    }
    let _ = f.close();
    Run { total: fs.ops() - base, syncs, prefixes, fs }
}

/// Covers every mutating operation of the workload above, under three crash outcomes each. Includes the
/// regression for slots freed by merges being reused too early.
#[test]
fn crash_at_every_operation_of_syncs_and_checkpoints() {
    let reference = short_run(None);
    eprintln!("sweeping {} mutating operations, syncs at {:?}", reference.total, reference.syncs);
    assert!(reference.total > 100 && reference.syncs.len() >= 10, "the workload is too small to test much");
    for b in 0..reference.total {
        let run = short_run(Some(b));
        // The newest state a completed sync (or checkpoint) made durable.
        let min = reference.syncs.iter().filter(|(ops, _)| *ops <= b).map(|(_, i)| *i).max().unwrap_or(0);
        for mode in 0..3 {
            let after = match mode {
                0 => run.fs.crash_drop_unsynced(),
                1 => run.fs.crash_keep_unsynced(),
                _ => run.fs.crash(b),
            };
            let afs: Arc<dyn vfs::Fs> = Arc::new(after);
            let mut f = FlexFile::open(afs, Path::new(DIR), Options::tiny())
                .unwrap_or_else(|e| panic!("budget {b} mode {mode}: reopen: {e}"));
            f.check(true).unwrap_or_else(|e| panic!("budget {b} mode {mode}: check: {e}"));
            let got = common::contents(&mut f).unwrap();
            let at = run.prefixes.iter().rposition(|p| *p == got);
            assert!(at.is_some(), "budget {b} mode {mode}: not an operation boundary");
            assert!(
                run.prefixes[min..].contains(&got),
                "budget {b} mode {mode}: lost data acknowledged by a sync (state {at:?}, durable {min})"
            );
        }
    }
}

/// Regression guard: a segment emptied by an operation must not be reused before the log commit that records the
/// operation is durable, or a crash between the data sync and the log write leaves the durable tree pointing at
/// overwritten bytes (whose new checksums verify, so the damage would be silent).
#[test]
fn emptied_segments_are_not_reused_before_the_commit_is_durable() {
    let opts = Options::tiny();
    let cap = opts.segment_capacity() as usize;
    let run = |budget: Option<u64>| -> (u64, u64, Vec<Vec<u8>>, CrashFs) {
        let fs = CrashFs::new();
        let dynfs: Arc<dyn vfs::Fs> = Arc::new(fs.clone());
        let mut f = FlexFile::create(dynfs, Path::new(DIR), Options::tiny()).unwrap();
        let base = fs.ops();
        let first: Vec<u8> = (0..3 * cap).map(|i| (i % 251) as u8).collect();
        f.write(0, &first).unwrap();
        f.sync().unwrap();
        let synced_at = fs.ops() - base;
        if let Some(b) = budget {
            fs.set_op_budget(b.saturating_sub(synced_at));
        }
        let mut states = vec![first.clone()];
        let mut m = first;
        if f.collapse(0, 2 * cap as u64).is_ok() {
            m.drain(..2 * cap);
            states.push(m.clone());
            let more: Vec<u8> = (0..2 * cap).map(|i| (i % 13) as u8 + 100).collect();
            let mut next = m.clone();
            next.extend_from_slice(&more);
            states.push(next.clone());
            if f.write(m.len() as u64, &more).is_ok() {
                let _ = f.sync();
            }
        }
        let _ = f.close();
        (fs.ops() - base, synced_at, states, fs)
    };
    let (total, synced_at, _, _) = run(None);
    for b in synced_at..total {
        let (_, _, states, fs) = run(Some(b));
        for mode in 0..3 {
            let after = match mode {
                0 => fs.crash_drop_unsynced(),
                1 => fs.crash_keep_unsynced(),
                _ => fs.crash(b ^ 0x5eed),
            };
            let afs: Arc<dyn vfs::Fs> = Arc::new(after);
            let mut f = FlexFile::open(afs, Path::new(DIR), Options::tiny()).unwrap();
            f.check(true).unwrap_or_else(|e| panic!("budget {b} mode {mode}: {e}"));
            let got = common::contents(&mut f).unwrap();
            assert!(states.contains(&got), "budget {b} mode {mode}: recovered bytes match no state");
        }
    }
}

/// A failed `sync_data` (Linux marks the dirty pages clean without writing them) poisons the handle; reopening
/// in the same process and syncing again must make a state durable that survives a crash, never one that leans
/// on the lost writes.
#[test]
fn failed_sync_then_reopen_then_crash() {
    for seed in testkit::seeds(&[301, 302, 303, 304, 305, 306, 307, 308]) {
        let mut rng = common::rng(seed);
        for nth in 0..6u64 {
            let fs = CrashFs::new();
            let dynfs: Arc<dyn vfs::Fs> = Arc::new(fs.clone());
            let mut f = FlexFile::create(dynfs.clone(), Path::new(DIR), Options::tiny()).unwrap();
            let mut m = Vec::new();
            let mut failed_at = None;
            for step in 0..200 {
                if step == 20 + nth as usize * 7 {
                    fs.fail_next_syncs(1);
                }
                let (next, r) = common::mutate(&mut rng, &mut f, &m);
                let r = r.and_then(|()| if step % 5 == 4 { f.sync() } else { Ok(()) });
                if r.is_err() {
                    failed_at = Some(step);
                    break;
                }
                m = next;
            }
            drop(f);
            let Some(step) = failed_at else { continue };
            // Reopen in the same process: the page cache still shows the lost writes.
            let mut f = FlexFile::open(dynfs.clone(), Path::new(DIR), Options::tiny())
                .unwrap_or_else(|e| panic!("seed {seed} nth {nth} step {step}: reopen: {e}"));
            let mut m = common::contents(&mut f).unwrap();
            for _ in 0..20 {
                let (next, r) = common::mutate(&mut rng, &mut f, &m);
                r.unwrap();
                m = next;
            }
            f.sync().unwrap();
            drop(f);
            for mode in 0..2 {
                let after = if mode == 0 { fs.crash_drop_unsynced() } else { fs.crash(seed ^ nth) };
                let afs: Arc<dyn vfs::Fs> = Arc::new(after);
                let mut f = FlexFile::open(afs, Path::new(DIR), Options::tiny())
                    .unwrap_or_else(|e| panic!("seed {seed} nth {nth} mode {mode}: reopen after crash: {e}"));
                f.check(true).unwrap_or_else(|e| panic!("seed {seed} nth {nth} mode {mode}: check: {e}"));
                assert_eq!(common::contents(&mut f).unwrap(), m, "seed {seed} nth {nth} mode {mode}");
            }
        }
    }
}

/// FlexDB rewrote a fragmented interval with a collapse and then an insert; a crash between the two lost the
/// interval's records. `replace` is one operation: a crash anywhere in it (and the sync after it) recovers the
/// old bytes or the new ones, never the file with the range removed.
#[test]
fn regression_replace_is_atomic_across_crashes() {
    let mut rng = common::rng(77);
    let old: Vec<u8> = (0..3000).map(|_| rng.random()).collect();
    let new_part: Vec<u8> = (0..1200).map(|_| rng.random()).collect();
    let mut new = old.clone();
    new.splice(100..1600, new_part.iter().copied());
    // Every operation commits its log entries at its end (as FlexDB's long commits do once the buffer fills),
    // so two operations would be two commits a crash can fall between.
    let opts = Options { log_buffer_bytes: 1, ..Options::tiny() };
    // Builds the synced old file, then replaces and syncs with the crash budget counted from there.
    let run = |budget: Option<u64>| -> (CrashFs, u64) {
        let fs = CrashFs::new();
        let dynfs: Arc<dyn vfs::Fs> = Arc::new(fs.clone());
        let mut f = FlexFile::create(dynfs, Path::new(DIR), opts.clone()).unwrap();
        f.insert(0, &old).unwrap();
        f.sync().unwrap();
        let base = fs.ops();
        if let Some(b) = budget {
            fs.set_op_budget(b);
        }
        let _ = f.replace(100, 1500, &new_part).and_then(|()| f.sync());
        drop(f);
        let used = fs.ops() - base;
        (fs, used)
    };
    let (_, total) = run(None);
    assert!(total > 0);
    for budget in 0..=total {
        let (fs, _) = run(Some(budget));
        for (mode, crashed) in [
            ("seeded", fs.crash(budget)),
            ("drop", fs.crash_drop_unsynced()),
            ("keep", fs.crash_keep_unsynced()),
        ] {
            let afs: Arc<dyn vfs::Fs> = Arc::new(crashed);
            let mut f = FlexFile::open(afs, Path::new(DIR), opts.clone())
                .unwrap_or_else(|e| panic!("budget {budget} {mode}: reopen: {e}"));
            let got = common::contents(&mut f).unwrap();
            assert!(
                got == old || got == new,
                "budget {budget} {mode}: {} bytes, neither old nor new",
                got.len()
            );
        }
    }
}

/// Regression: `create` renamed the tree file into place without first syncing the directory, so a power loss
/// could keep the rename but drop the new log's directory entry (the two name no common path); the next open
/// found a tree file, hence a FlexFile, with no log, and failed with "invalid log header". Found by FlexDB's
/// crash test with failing syncs (seed 17), whose short runs crash inside `Db::open` often. A crash anywhere in
/// `create`, under many power-loss outcomes, must leave no FlexFile or a whole one.
#[test]
fn regression_a_crash_in_create_leaves_no_flexfile_or_a_whole_one() {
    let dry = CrashFs::new();
    FlexFile::create(Arc::new(dry.clone()), Path::new("/f"), Options::tiny()).unwrap();
    for budget in 0..dry.ops() {
        let fs = CrashFs::new();
        fs.set_op_budget(budget);
        let _ = FlexFile::create(Arc::new(fs.clone()), Path::new("/f"), Options::tiny());
        fs.clear_op_budget();
        for c in 0..64 {
            let crashed: Arc<dyn vfs::Fs> = Arc::new(fs.crash(c));
            match FlexFile::open(crashed, Path::new("/f"), Options::tiny()) {
                Ok(f) => assert_eq!(f.size(), 0, "budget {budget} crash {c}"),
                Err(Error::InvalidArgument(_)) => {}
                Err(e) => panic!("budget {budget} crash {c}: {e}"),
            }
        }
    }
}

/// Regression: a checkpoint cut the log to its header and wrote the new header with one sync for both, so a power
/// loss at that sync could keep the new header over the old length; the old entries after it then failed their
/// checksums and the open reported corruption (found through FlexDB's resume, which runs a recovery checkpoint
/// each time). A crash at every step of a checkpoint, under many power-loss outcomes, must open.
#[test]
fn regression_a_crash_at_the_end_of_a_checkpoint_is_no_corruption() {
    let mk = |budget: Option<u64>| {
        let fs = CrashFs::new();
        let mut f = FlexFile::create(Arc::new(fs.clone()), Path::new("/f"), Options::tiny()).unwrap();
        for i in 0..40u64 {
            f.insert(0, &[i as u8; 100]).unwrap();
            f.sync().unwrap();
        }
        let before = fs.ops();
        if let Some(b) = budget {
            fs.set_op_budget(b);
        }
        let _ = f.checkpoint();
        fs.clear_op_budget();
        let n = fs.ops() - before;
        (fs, n)
    };
    let (_, total) = mk(None);
    for b in 0..=total {
        let (fs, _) = mk(Some(b));
        for c in 0..64 {
            match FlexFile::open(Arc::new(fs.crash(c)), Path::new("/f"), Options::tiny()) {
                Ok(f) => assert_eq!(f.size(), 4000, "budget {b} of {total}, crash {c}"),
                Err(e) => panic!("budget {b} of {total}, crash {c}: {e}"),
            }
        }
    }
}
