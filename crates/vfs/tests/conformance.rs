//! The three file systems agree: the same random operations on `OsFs` (in a temporary directory), `MemFs` and
//! `CrashFs` give the same results, the same error kinds and the same final files. Engines are tested on the
//! simulators and run on the OS, so a divergence here is a bug in a simulator.
//!
//! `RANGEDB_SEED` picks the seed (default: a fixed one plus a few); `RANGEDB_TEST_SCALE` multiplies the steps.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests may panic on failure.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use vfs::{CrashFs, File, Fs, MemFs, OpenMode, OsFs};

const DIRS: [&str; 3] = ["", "a", "a/b"];
const FILES: [&str; 3] = ["f0", "f1", "f2"];

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

/// One file system under test, with paths relative to its root and the read-write handles opened so far.
struct Subject {
    fs: Arc<dyn Fs>,
    root: PathBuf,
    handles: HashMap<PathBuf, Arc<dyn File>>,
}

impl Subject {
    fn at(&self, rel: &Path) -> PathBuf {
        self.root.join(rel)
    }
}

type Outcome = Result<String, std::io::ErrorKind>;

fn apply(s: &mut Subject, op: u64, path: &Path, other: &Path, dir: &Path, n: u64) -> Outcome {
    let r: std::io::Result<String> = match op {
        0 => s.fs.open(&s.at(path), OpenMode::CreateNew).map(|f| {
            s.handles.insert(path.to_path_buf(), f);
            String::new()
        }),
        1 => s.fs.open(&s.at(path), OpenMode::CreateOrOpen).map(|f| {
            s.handles.insert(path.to_path_buf(), f);
            String::new()
        }),
        2 => s.fs.open(&s.at(path), OpenMode::CreateTruncate).map(|_| String::new()),
        3 => s.fs.open(&s.at(path), OpenMode::ReadOnly).and_then(|f| f.len()).map(|l| l.to_string()),
        4 => match s.handles.get(path) {
            Some(f) => f.write_all_at(&[n as u8 | 1; 300], n * 97).map(|()| String::new()),
            None => return Ok("no handle".into()),
        },
        5 => match s.handles.get(path) {
            Some(f) => f.set_len(n * 61).map(|()| String::new()),
            None => return Ok("no handle".into()),
        },
        6 => match s.handles.get(path) {
            Some(f) => {
                let mut buf = vec![0u8; 200];
                f.read_at(&mut buf, n * 50).map(|k| format!("{:?}", &buf[..k]))
            }
            None => return Ok("no handle".into()),
        },
        7 => s.fs.rename(&s.at(path), &s.at(other)).map(|()| String::new()),
        8 => s.fs.remove_file(&s.at(path)).map(|()| String::new()),
        9 => s.fs.list_dir(&s.at(dir)).map(|names| names.join(",")),
        10 => s.fs.create_dir_all(&s.at(dir)).map(|()| String::new()),
        11 => s.fs.sync_dir(&s.at(dir)).map(|()| String::new()),
        12 => s.fs.exists(&s.at(path)).map(|e| e.to_string()),
        _ => match s.handles.get(path) {
            Some(f) => f.sync_data().map(|()| String::new()),
            None => return Ok("no handle".into()),
        },
    };
    r.map_err(|e| e.kind())
}

fn contents(s: &Subject) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for dir in DIRS {
        let Ok(names) = s.fs.list_dir(&s.at(Path::new(dir))) else { continue };
        for name in names {
            let rel = Path::new(dir).join(&name);
            if FILES.contains(&name.as_str()) {
                out.push((rel.display().to_string(), vfs::read_all(s.fs.as_ref(), &s.at(&rel)).unwrap()));
            }
        }
    }
    out
}

fn run(seed: u64, steps: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let mut subjects = [
        Subject { fs: Arc::new(OsFs::new()), root: tmp.path().to_path_buf(), handles: HashMap::new() },
        Subject { fs: Arc::new(MemFs::new()), root: PathBuf::new(), handles: HashMap::new() },
        Subject { fs: Arc::new(CrashFs::new()), root: PathBuf::new(), handles: HashMap::new() },
    ];
    let mut rng = Rng(seed);
    let (mut ok, mut failed) = (0, 0);
    let pick = |rng: &mut Rng| Path::new(DIRS[rng.below(3) as usize]).join(FILES[rng.below(3) as usize]);
    for step in 0..steps {
        let op = rng.below(14);
        let (path, other) = (pick(&mut rng), pick(&mut rng));
        let dir = PathBuf::from(DIRS[rng.below(3) as usize]);
        let n = rng.below(20);
        let outcomes: Vec<Outcome> =
            subjects.iter_mut().map(|s| apply(s, op, &path, &other, &dir, n)).collect();
        assert!(
            outcomes.iter().all(|o| *o == outcomes[0]),
            "seed {seed} step {step}: op {op} on {path:?} / {other:?} / {dir:?}: os {:?}, mem {:?}, crash {:?}",
            outcomes[0],
            outcomes[1],
            outcomes[2]
        );
        if outcomes[0].is_ok() { ok += 1 } else { failed += 1 }
    }
    assert!(
        ok > steps / 4 && failed > steps / 20,
        "seed {seed}: {ok} ok, {failed} failed: too little exercised"
    );
    let os = contents(&subjects[0]);
    assert!(!os.is_empty(), "seed {seed}: no file survived");
    assert_eq!(os, contents(&subjects[1]), "seed {seed}: MemFs final state differs");
    assert_eq!(os, contents(&subjects[2]), "seed {seed}: CrashFs final state differs");
}

/// A store directory can hold files beside what an engine looks for in its subdirectories (`rangedb inspect
/// blockstore` on an LSM directory asked for `CURRENT/meta`): a path below a file names nothing everywhere. The
/// OS answered ENOTDIR, the simulators `false`.
#[test]
fn regression_a_path_below_a_file_does_not_exist_anywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let systems: [(Arc<dyn Fs>, PathBuf); 3] = [
        (Arc::new(OsFs::new()), tmp.path().to_path_buf()),
        (Arc::new(MemFs::new()), PathBuf::new()),
        (Arc::new(CrashFs::new()), PathBuf::new()),
    ];
    for (fs, root) in systems {
        fs.open(&root.join("f"), OpenMode::CreateNew).unwrap();
        assert!(fs.exists(&root.join("f")).unwrap());
        assert!(!fs.exists(&root.join("f/meta")).unwrap(), "{fs:?}");
        assert!(!fs.exists(&root.join("f/a/b")).unwrap(), "{fs:?}");
    }
}

#[test]
fn os_mem_and_crash_file_systems_agree() {
    let scale = testkit::scale() as u64;
    let seeds = testkit::seeds(&[0xC0F0, 1, 2, 3]);
    for seed in seeds {
        eprintln!("conformance seed {seed} (rerun with RANGEDB_SEED={seed})");
        run(seed, 600 * scale);
    }
}
