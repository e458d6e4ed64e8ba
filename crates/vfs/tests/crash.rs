//! Power-loss semantics of `CrashFs`: what survives, what may vanish, what may tear.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests may panic on failure.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use vfs::{CrashFs, File, Fs, OpenMode, SECTOR_SIZE, is_crash_point, read_all, write_atomic};

const SEEDS: u64 = 64;
const S: usize = SECTOR_SIZE as usize;

fn p(s: &str) -> &Path {
    Path::new(s)
}

/// A durable file of `data` at `path` (contents synced and the entry synced).
fn durable_file(fs: &CrashFs, path: &str, data: &[u8]) -> Arc<dyn File> {
    let f = fs.open(p(path), OpenMode::CreateNew).unwrap();
    f.write_all_at(data, 0).unwrap();
    f.sync_data().unwrap();
    fs.sync_dir(p(path).parent().unwrap()).unwrap();
    f
}

#[test]
fn unsynced_write_is_lost_kept_or_torn_at_sectors_and_synced_survives() {
    let fs = CrashFs::new();
    let old = vec![b'o'; 8 * S];
    let f = durable_file(&fs, "data", &old);
    let other = durable_file(&fs, "synced", b"durable bytes");
    f.write_all_at(&vec![b'n'; 8 * S], 0).unwrap();
    other.write_all_at(b"DURABLE", 0).unwrap();
    other.sync_data().unwrap();

    let mut seen = BTreeSet::new();
    for seed in 0..SEEDS {
        let c = fs.crash(seed);
        assert_eq!(read_all(&c, p("synced")).unwrap(), b"DURABLE bytes", "seed {seed}");
        let got = read_all(&c, p("data")).unwrap();
        assert_eq!(got.len(), 8 * S, "seed {seed}");
        let mut new_sectors = 0;
        for sector in got.chunks(S) {
            assert!(sector.iter().all(|&b| b == sector[0]), "seed {seed}: a sector mixes old and new");
            new_sectors += usize::from(sector[0] == b'n');
        }
        seen.insert(match new_sectors {
            0 => "lost",
            8 => "kept",
            _ => "torn",
        });
    }
    assert_eq!(seen, BTreeSet::from(["kept", "lost", "torn"]), "64 seeds should show every outcome");
    assert_eq!(read_all(&fs.crash_drop_unsynced(), p("data")).unwrap(), old);
    assert_eq!(read_all(&fs.crash_keep_unsynced(), p("data")).unwrap(), vec![b'n'; 8 * S]);
}

#[test]
fn unsynced_append_tears_only_within_old_or_new_length() {
    let fs = CrashFs::new();
    let f = durable_file(&fs, "log", &[1u8; 100]);
    f.write_all_at(&[2u8; 3 * S], 100).unwrap();
    for seed in 0..SEEDS {
        let got = read_all(&fs.crash(seed), p("log")).unwrap();
        assert!(got.len() == 100 || got.len() == 100 + 3 * S, "seed {seed}: length {}", got.len());
        assert_eq!(&got[..100], &[1u8; 100][..], "seed {seed}: synced prefix damaged");
        // A torn tail holds the new bytes or zeros (never-written space), sector by sector.
        for (i, sector) in got.chunks(S).enumerate() {
            let lo = if i == 0 { 100 } else { 0 };
            let tail = &sector[lo..];
            assert!(tail.iter().all(|&b| b == 2) || tail.iter().all(|&b| b == 0), "seed {seed} sector {i}");
        }
    }
}

#[test]
fn set_len_unsynced_is_undone_or_kept() {
    let fs = CrashFs::new();
    let f = durable_file(&fs, "f", &[7u8; 2 * S]);
    f.set_len(10).unwrap();
    let mut lens = BTreeSet::new();
    for seed in 0..SEEDS {
        let got = read_all(&fs.crash(seed), p("f")).unwrap();
        lens.insert(got.len());
        // Bytes past the new length may read as old or as zeros (the truncated tail of a sector), nothing else.
        assert_eq!(&got[..10], &[7u8; 10][..], "seed {seed}");
        assert!(got.iter().all(|&b| b == 7 || b == 0), "seed {seed}: truncation crash invents bytes");
    }
    assert_eq!(lens, BTreeSet::from([10, 2 * S]));
    f.sync_data().unwrap();
    assert_eq!(read_all(&fs.crash(1), p("f")).unwrap().len(), 10);
}

#[test]
fn rename_is_durable_only_after_dir_sync_and_always_atomic() {
    let fs = CrashFs::new();
    fs.create_dir_all(p("db")).unwrap();
    fs.sync_dir(p("")).unwrap();
    durable_file(&fs, "db/a", b"contents");
    fs.rename(p("db/a"), p("db/b")).unwrap();

    let mut names = BTreeSet::new();
    for seed in 0..SEEDS {
        let c = fs.crash(seed);
        let listing = c.list_dir(p("db")).unwrap();
        assert_eq!(listing.len(), 1, "seed {seed}: rename not atomic: {listing:?}");
        assert_eq!(read_all(&c, &Path::new("db").join(&listing[0])).unwrap(), b"contents");
        names.insert(listing[0].clone());
    }
    assert_eq!(names, BTreeSet::from(["a".to_string(), "b".to_string()]));
    // A synced file renamed without a directory sync comes back under its old name, contents intact.
    assert_eq!(fs.crash_drop_unsynced().list_dir(p("db")).unwrap(), vec!["a"]);

    fs.sync_dir(p("db")).unwrap();
    for seed in 0..SEEDS {
        assert_eq!(fs.crash(seed).list_dir(p("db")).unwrap(), vec!["b"], "seed {seed}");
    }
}

#[test]
fn rename_over_an_existing_file_keeps_one_of_the_two_versions() {
    let fs = CrashFs::new();
    durable_file(&fs, "CURRENT", b"old");
    durable_file(&fs, "CURRENT.tmp", b"new");
    fs.rename(p("CURRENT.tmp"), p("CURRENT")).unwrap();
    let mut seen = BTreeSet::new();
    for seed in 0..SEEDS {
        let c = fs.crash(seed);
        let cur = read_all(&c, p("CURRENT")).unwrap();
        let tmp_exists = c.exists(p("CURRENT.tmp")).unwrap();
        assert_eq!(tmp_exists, cur == b"old", "seed {seed}: rename half applied");
        seen.insert(cur);
    }
    assert_eq!(seen.len(), 2);
}

#[test]
fn file_created_without_dir_sync_can_vanish() {
    let fs = CrashFs::new();
    let f = fs.open(p("new"), OpenMode::CreateNew).unwrap();
    f.write_all_at(b"synced but unnamed", 0).unwrap();
    f.sync_data().unwrap();
    let (mut present, mut absent) = (0, 0);
    for seed in 0..SEEDS {
        let c = fs.crash(seed);
        if c.exists(p("new")).unwrap() {
            present += 1;
            assert_eq!(read_all(&c, p("new")).unwrap(), b"synced but unnamed");
        } else {
            absent += 1;
        }
    }
    assert!(present > 0 && absent > 0, "present {present} absent {absent}");
    assert!(!fs.crash_drop_unsynced().exists(p("new")).unwrap());
    fs.sync_dir(p("")).unwrap();
    assert!((0..SEEDS).all(|seed| fs.crash(seed).exists(p("new")).unwrap()));
}

#[test]
fn unsynced_remove_may_be_undone() {
    let fs = CrashFs::new();
    durable_file(&fs, "f", b"still here");
    fs.remove_file(p("f")).unwrap();
    let outcomes: BTreeSet<bool> = (0..SEEDS).map(|s| fs.crash(s).exists(p("f")).unwrap()).collect();
    assert_eq!(outcomes, BTreeSet::from([false, true]));
    assert_eq!(read_all(&fs.crash_drop_unsynced(), p("f")).unwrap(), b"still here");
    fs.sync_dir(p("")).unwrap();
    assert!((0..SEEDS).all(|s| !fs.crash(s).exists(p("f")).unwrap()));
}

#[test]
fn directory_needs_its_parent_synced() {
    let fs = CrashFs::new();
    fs.create_dir_all(p("db/wal")).unwrap();
    durable_file(&fs, "db/wal/000001.log", b"x");
    // `db/wal` is synced (so the file is its durable entry) but neither `db` nor the root is.
    let c = fs.crash_drop_unsynced();
    assert!(!c.exists(p("db")).unwrap() && !c.exists(p("db/wal/000001.log")).unwrap());
    fs.sync_dir(p("")).unwrap();
    fs.sync_dir(p("db")).unwrap();
    for seed in 0..SEEDS {
        assert_eq!(read_all(&fs.crash(seed), p("db/wal/000001.log")).unwrap(), b"x");
    }
}

fn busy_state() -> CrashFs {
    let fs = CrashFs::new();
    fs.create_dir_all(p("d")).unwrap();
    fs.sync_dir(p("")).unwrap();
    for i in 0..6u8 {
        let name = format!("d/f{i}");
        let f = fs.open(p(&name), OpenMode::CreateNew).unwrap();
        f.write_all_at(&vec![i; 3 * S + 17], 0).unwrap();
        if i % 2 == 0 {
            f.sync_data().unwrap();
        }
        f.write_all_at(&[0xEE; 700], (i as u64) * 300).unwrap();
        if i == 3 {
            fs.sync_dir(p("d")).unwrap();
        }
    }
    fs.rename(p("d/f0"), p("d/g0")).unwrap();
    fs.remove_file(p("d/f1")).unwrap();
    fs
}

#[test]
fn same_seed_same_crash_state() {
    let fs = busy_state();
    let mut distinct = BTreeSet::new();
    for seed in 0..16 {
        let a = fs.crash(seed).snapshot();
        let b = fs.crash(seed).snapshot();
        assert_eq!(a, b, "seed {seed}");
        // Rebuilding the same history gives the same crash too.
        assert_eq!(busy_state().crash(seed).snapshot(), a, "seed {seed}");
        distinct.insert(format!("{a:?}"));
    }
    assert!(distinct.len() > 8, "seeds should differ: {} distinct states", distinct.len());
}

#[test]
fn crash_leaves_the_crashed_fs_alone_and_can_repeat() {
    let fs = busy_state();
    let before = fs.snapshot();
    let c1 = fs.crash(3);
    assert_eq!(fs.snapshot(), before);
    // Everything in a crashed state is durable: crashing it again changes nothing.
    let snap = c1.snapshot();
    assert_eq!(c1.crash(99).snapshot(), snap);
    assert_eq!(c1.pending_dir_ops(), 0);
}

#[test]
fn crash_point_refuses_every_later_mutation() {
    let fs = CrashFs::new();
    let f = fs.open(p("f"), OpenMode::CreateNew).unwrap();
    assert_eq!(fs.ops(), 1);
    fs.set_op_budget(2);
    f.write_all_at(b"one", 0).unwrap();
    f.sync_data().unwrap();
    let e = f.write_all_at(b"two", 0).unwrap_err();
    assert!(is_crash_point(&e), "{e}");
    assert!(fs.reached_crash_point());
    assert!(is_crash_point(&fs.sync_dir(p("")).unwrap_err()));
    assert!(is_crash_point(&fs.open(p("g"), OpenMode::CreateNew).unwrap_err()));
    assert!(is_crash_point(&f.set_len(0).unwrap_err()));
    // Reads still work; the refused operations had no effect.
    assert_eq!(read_all(&fs, p("f")).unwrap(), b"one");
    assert!(!fs.exists(p("g")).unwrap());
    let st = fs.stats();
    assert_eq!((st.ops, st.writes, st.syncs, st.refused), (3, 1, 1, 4));
    // The file's entry was never synced: the crash may drop it, and can only show the synced contents.
    for seed in 0..SEEDS {
        let c = fs.crash(seed);
        if c.exists(p("f")).unwrap() {
            assert_eq!(read_all(&c, p("f")).unwrap(), b"one");
        }
    }
    fs.clear_op_budget();
    f.write_all_at(b"two", 0).unwrap();
}

#[test]
fn write_atomic_gives_old_or_new_never_a_mix_at_every_crash_point() {
    let old = vec![b'o'; 5 * S + 3];
    let new = vec![b'n'; 4 * S + 100];
    let setup = || {
        let fs = CrashFs::new();
        fs.create_dir_all(p("db")).unwrap();
        fs.sync_dir(p("")).unwrap();
        write_atomic(&fs, p("db/MANIFEST"), &old).unwrap();
        fs
    };
    let probe = setup();
    let start = probe.ops();
    write_atomic(&probe, p("db/MANIFEST"), &new).unwrap();
    let total = probe.ops() - start;
    assert!(total >= 5, "write_atomic takes open, write, sync, rename, sync_dir");
    for point in 0..=total {
        let fs = setup();
        fs.set_op_budget(point);
        let done = write_atomic(&fs, p("db/MANIFEST"), &new);
        assert_eq!(done.is_ok(), point == total, "crash point {point}");
        for seed in 0..32 {
            let got = read_all(&fs.crash(seed), p("db/MANIFEST")).unwrap();
            assert!(
                got == old || got == new,
                "crash point {point} seed {seed}: mixed file of {} bytes",
                got.len()
            );
            if done.is_ok() {
                assert_eq!(got, new, "crash point {point} seed {seed}: acknowledged write lost");
            }
        }
    }
}

#[test]
fn insert_and_collapse_range_are_undone_or_kept_by_sector() {
    let fs = CrashFs::new();
    let data: Vec<u8> = (0..4 * S).map(|i| (i / S) as u8 + 1).collect();
    let f = durable_file(&fs, "f", &data);
    f.insert_range(S as u64, S as u64).unwrap();
    let cur = read_all(&fs, p("f")).unwrap();
    assert_eq!(cur.len(), 5 * S);
    for seed in 0..SEEDS {
        let got = read_all(&fs.crash(seed), p("f")).unwrap();
        assert!(got.len() == 4 * S || got.len() == 5 * S);
        for (i, sector) in got.chunks(S).enumerate() {
            let old = data.get(i * S..(i + 1) * S).unwrap_or(&[0; S][..]);
            assert!(sector == old || sector == &cur[i * S..(i + 1) * S], "seed {seed} sector {i}");
        }
    }
    f.collapse_range(S as u64, S as u64).unwrap();
    f.sync_data().unwrap();
    assert_eq!(read_all(&fs.crash(5), p("f")).unwrap(), data);
}

#[test]
fn truncating_open_is_an_unsynced_set_len() {
    let fs = CrashFs::new();
    durable_file(&fs, "f", b"durable");
    fs.open(p("f"), OpenMode::CreateTruncate).unwrap();
    assert_eq!(read_all(&fs, p("f")).unwrap(), b"");
    assert_eq!(read_all(&fs.crash_drop_unsynced(), p("f")).unwrap(), b"durable");
}

#[test]
fn handles_are_send_sync_and_cheap_to_share() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<CrashFs>();
    let fs = CrashFs::new();
    let shared: Arc<dyn Fs> = Arc::new(fs.clone());
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let shared = shared.clone();
            s.spawn(move || {
                let f = shared.open(&Path::new("").join(format!("t{t}")), OpenMode::CreateNew).unwrap();
                for i in 0..100u64 {
                    f.write_all_at(&[t], i).unwrap();
                }
                f.sync_data().unwrap();
            });
        }
    });
    assert_eq!(fs.stats().writes, 400);
    assert_eq!(fs.list_dir(p("")).unwrap(), vec!["t0", "t1", "t2", "t3"]);
}

#[test]
fn failed_sync_loses_writeback_and_a_retry_does_not_bring_it_back() {
    let fs = CrashFs::new();
    let f = durable_file(&fs, "wal", &[1u8; S]);
    f.write_all_at(&[2u8; 2 * S], S as u64).unwrap();
    fs.fail_next_syncs(1);
    assert!(vfs::is_eio(&f.sync_data().unwrap_err()));
    // The retry "succeeds", as on Linux after a writeback error, but the pages were already marked clean.
    f.sync_data().unwrap();
    assert_eq!(fs.stats().failed_syncs, 1);
    assert_eq!(read_all(&fs, p("wal")).unwrap().len(), 3 * S, "the page cache still shows the data");
    let after = read_all(&fs.crash_drop_unsynced(), p("wal")).unwrap();
    assert_eq!(&after[..S], &[1u8; S][..]);
    assert!(after[S..].iter().all(|&b| b == 0), "lost writeback must not become durable");
    // Data written after the failure is durable after its own sync; the lost sectors stay at risk.
    f.write_all_at(&[3u8; S], 3 * S as u64).unwrap();
    f.sync_data().unwrap();
    let mut lost_seen = false;
    for seed in 0..SEEDS {
        let got = read_all(&fs.crash(seed), p("wal")).unwrap();
        assert_eq!(got.len(), 4 * S, "seed {seed}");
        assert_eq!(&got[3 * S..], &[3u8; S][..], "seed {seed}");
        for sector in got[S..3 * S].chunks(S) {
            assert!(sector == [0u8; S] || sector == [2u8; S], "seed {seed}");
            lost_seen |= sector == [0u8; S];
        }
    }
    assert!(lost_seen);
}
