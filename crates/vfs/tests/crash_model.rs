//! Randomized check of `CrashFs` against a plain model of what POSIX promises is durable.
//!
//! The model tracks, per file, its current bytes and its bytes at the last `sync_data`, and per directory its
//! entries at the last `sync_dir` and whether any entry changed since. After a seeded crash:
//! - a directory with no change since its sync has exactly its synced entries, each naming the same file;
//! - a file with no change since its sync has exactly its synced bytes;
//! - any other file is a sector-wise mix of its synced and current bytes, at the synced or the current length;
//! - every surviving path once held one of the files whose image it is.
//!
//! `RANGEDB_SEED` picks the seed (default: a fixed one plus a few); `RANGEDB_TEST_SCALE` multiplies the rounds.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests may panic on failure.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use vfs::{CrashFs, File, Fs, OpenMode, SECTOR_SIZE, is_crash_point, read_all};

const DIRS: [&str; 3] = ["", "a", "b"];
const NAMES: [&str; 3] = ["x", "y", "z"];
const S: usize = SECTOR_SIZE as usize;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct MFile {
    cur: Vec<u8>,
    synced: Vec<u8>,
    clean: bool,
    handle: Arc<dyn File>,
}

struct Model {
    files: Vec<MFile>,
    names: BTreeMap<PathBuf, usize>,
    synced_dirs: HashMap<&'static str, BTreeMap<PathBuf, usize>>,
    dir_clean: HashMap<&'static str, bool>,
    /// Every file id each path has named since the last crash (or the durable one before it).
    history: HashMap<PathBuf, Vec<usize>>,
}

fn dir_of(path: &Path) -> &'static str {
    let parent = path.parent().map(|d| d.to_string_lossy().into_owned()).unwrap_or_default();
    DIRS.into_iter().find(|d| *d == parent).unwrap_or_else(|| panic!("no dir {parent}"))
}

impl Model {
    /// The model of a freshly crashed (hence wholly durable) file system.
    fn of(fs: &CrashFs) -> Model {
        let mut m = Model {
            files: Vec::new(),
            names: BTreeMap::new(),
            synced_dirs: DIRS.iter().map(|d| (*d, BTreeMap::new())).collect(),
            dir_clean: DIRS.iter().map(|d| (*d, true)).collect(),
            history: HashMap::new(),
        };
        for (path, bytes) in fs.snapshot() {
            let handle = fs.open(&path, OpenMode::ReadWrite).unwrap();
            let id = m.files.len();
            m.files.push(MFile { cur: bytes.clone(), synced: bytes, clean: true, handle });
            m.synced_dirs.get_mut(dir_of(&path)).unwrap().insert(path.clone(), id);
            m.history.entry(path.clone()).or_default().push(id);
            m.names.insert(path, id);
        }
        m
    }

    fn touch_dir(&mut self, path: &Path) {
        self.dir_clean.insert(dir_of(path), false);
    }
}

fn random_path(rng: &mut Rng) -> PathBuf {
    Path::new(DIRS[rng.below(3) as usize]).join(NAMES[rng.below(3) as usize])
}

/// Runs one random operation; returns false once the crash point refuses it (the model is then not updated).
fn step(fs: &CrashFs, m: &mut Model, rng: &mut Rng) -> bool {
    let existing: Vec<PathBuf> = m.names.keys().cloned().collect();
    let pick = |rng: &mut Rng| existing.get(rng.below(existing.len().max(1) as u64) as usize).cloned();
    let res = match rng.below(12) {
        0 | 1 => {
            let path = random_path(rng);
            if m.names.contains_key(&path) {
                return true;
            }
            fs.open(&path, OpenMode::CreateNew).map(|handle| {
                let id = m.files.len();
                m.files.push(MFile { cur: Vec::new(), synced: Vec::new(), clean: true, handle });
                m.names.insert(path.clone(), id);
                m.history.entry(path.clone()).or_default().push(id);
                m.touch_dir(&path);
            })
        }
        2 | 3 => {
            let Some(path) = pick(rng) else { return true };
            let f = &mut m.files[m.names[&path]];
            let off = rng.below(4 * S as u64) as usize;
            let len = 1 + rng.below(2 * S as u64) as usize;
            let byte = rng.below(255) as u8 + 1;
            f.handle.write_all_at(&vec![byte; len], off as u64).map(|()| {
                if f.cur.len() < off + len {
                    f.cur.resize(off + len, 0);
                }
                f.cur[off..off + len].fill(byte);
                f.clean = false;
            })
        }
        4 => {
            let Some(path) = pick(rng) else { return true };
            let f = &mut m.files[m.names[&path]];
            let len = rng.below(5 * S as u64) as usize;
            f.handle.set_len(len as u64).map(|()| {
                f.cur.resize(len, 0);
                f.clean = false;
            })
        }
        5 => {
            let Some(path) = pick(rng) else { return true };
            let f = &mut m.files[m.names[&path]];
            f.handle.sync_data().map(|()| {
                f.synced = f.cur.clone();
                f.clean = true;
            })
        }
        6 => {
            let Some(from) = pick(rng) else { return true };
            let to = random_path(rng);
            if from == to {
                return true;
            }
            fs.rename(&from, &to).map(|()| {
                let id = m.names.remove(&from).unwrap();
                m.names.insert(to.clone(), id);
                m.history.entry(to.clone()).or_default().push(id);
                m.touch_dir(&from);
                m.touch_dir(&to);
            })
        }
        7 => {
            let Some(path) = pick(rng) else { return true };
            fs.remove_file(&path).map(|()| {
                m.names.remove(&path);
                m.touch_dir(&path);
            })
        }
        8 => {
            let Some(path) = pick(rng) else { return true };
            fs.open(&path, OpenMode::CreateTruncate).map(|_| {
                let f = &mut m.files[m.names[&path]];
                f.cur.clear();
                f.clean = false;
            })
        }
        9 => {
            let Some(path) = pick(rng) else { return true };
            let f = &mut m.files[m.names[&path]];
            let (off, len) = (rng.below(4 * S as u64) as usize, 1 + rng.below(S as u64) as usize);
            if rng.below(2) == 0 {
                if off >= f.cur.len() {
                    return true;
                }
                f.handle.insert_range(off as u64, len as u64).map(|()| {
                    f.cur.splice(off..off, std::iter::repeat_n(0, len));
                    f.clean = false;
                })
            } else {
                if off + len >= f.cur.len() {
                    return true;
                }
                f.handle.collapse_range(off as u64, len as u64).map(|()| {
                    f.cur.drain(off..off + len);
                    f.clean = false;
                })
            }
        }
        _ => {
            let dir = DIRS[rng.below(3) as usize];
            fs.sync_dir(Path::new(dir)).map(|()| {
                let entries =
                    m.names.iter().filter(|(p, _)| dir_of(p) == dir).map(|(p, &id)| (p.clone(), id));
                m.synced_dirs.insert(dir, entries.collect());
                m.dir_clean.insert(dir, true);
            })
        }
    };
    match res {
        Ok(()) => true,
        Err(e) if is_crash_point(&e) => false,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

/// Whether `got` is a state a crash may leave of a file with these synced and current bytes.
fn is_crash_image(got: &[u8], synced: &[u8], cur: &[u8]) -> bool {
    if got.len() != synced.len() && got.len() != cur.len() {
        return false;
    }
    let at = |v: &[u8], i: usize| v.get(i).copied().unwrap_or(0);
    got.chunks(S).enumerate().all(|(k, sector)| {
        let base = k * S;
        let old = sector.iter().enumerate().all(|(i, &b)| b == at(synced, base + i));
        let new = sector.iter().enumerate().all(|(i, &b)| b == at(cur, base + i));
        old || new
    })
}

fn check(crashed: &CrashFs, m: &Model, ctx: &str) {
    let state = crashed.snapshot();
    for (path, got) in &state {
        let ids = m.history.get(path).unwrap_or_else(|| panic!("{ctx}: {} never existed", path.display()));
        assert!(
            ids.iter().any(|&id| is_crash_image(got, &m.files[id].synced, &m.files[id].cur)),
            "{ctx}: {} is no crash image of any file it named",
            path.display()
        );
    }
    for dir in DIRS {
        if !m.dir_clean[dir] {
            continue;
        }
        let want = &m.synced_dirs[dir];
        let got: Vec<&PathBuf> = state.keys().filter(|p| dir_of(p) == dir).collect();
        assert_eq!(got, want.keys().collect::<Vec<_>>(), "{ctx}: synced directory {dir:?} changed");
        for (path, &id) in want {
            let f = &m.files[id];
            let bytes = &state[path];
            if f.clean {
                assert_eq!(bytes, &f.synced, "{ctx}: synced file {} changed", path.display());
            } else {
                assert!(
                    is_crash_image(bytes, &f.synced, &f.cur),
                    "{ctx}: {} is not its own image",
                    path.display()
                );
            }
        }
    }
}

fn run(seed: u64, rounds: u64) {
    let mut rng = Rng(seed);
    let mut fs = CrashFs::new();
    fs.create_dir_all(Path::new("a")).unwrap();
    fs.create_dir_all(Path::new("b")).unwrap();
    fs.sync_dir(Path::new("")).unwrap();
    for round in 0..rounds {
        let mut m = Model::of(&fs);
        let steps = 20 + rng.below(60);
        // Half the rounds die at a random crash point inside the run.
        if rng.below(2) == 0 {
            fs.set_op_budget(rng.below(steps));
        }
        for _ in 0..steps {
            if !step(&fs, &mut m, &mut rng) {
                break;
            }
        }
        let ctx = format!("seed {seed} round {round}");
        // A process crash keeps everything.
        let kept = fs.crash_keep_unsynced().snapshot();
        let want: BTreeMap<PathBuf, Vec<u8>> =
            m.names.iter().map(|(p, &id)| (p.clone(), m.files[id].cur.clone())).collect();
        assert_eq!(kept, want, "{ctx}: process crash lost data");
        check(&fs.crash_drop_unsynced(), &m, &format!("{ctx} drop-unsynced"));
        for k in 0..4 {
            check(&fs.crash(rng.next()), &m, &format!("{ctx} crash {k}"));
        }
        fs = fs.crash(rng.next());
        let listed: Vec<String> = fs.list_dir(Path::new("a")).unwrap();
        for name in listed {
            read_all(&fs, &Path::new("a").join(name)).unwrap();
        }
    }
}

#[test]
fn crashfs_matches_the_durability_model() {
    let scale = testkit::scale() as u64;
    let seeds = testkit::seeds(&[0x5EED, 1, 2, 3, 4, 5, 6, 7]);
    for seed in seeds {
        eprintln!("crash model seed {seed} (rerun with RANGEDB_SEED={seed})");
        run(seed, 100 * scale);
    }
}
