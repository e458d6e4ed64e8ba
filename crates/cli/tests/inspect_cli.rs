//! `rangedb inspect` on a real LSM database: every kind and action reads what the engine wrote, and `check`
//! fails (non-zero exit, the damage named) on a flipped byte in a table, the MANIFEST and the WAL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

fn rangedb(args: &[&str], path: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rangedb")).args(args).arg(path).output().unwrap()
}

fn ok(args: &[&str], path: &Path) -> String {
    let out = rangedb(args, path);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A database with one flushed table (puts and a range delete) and a WAL holding later writes.
fn make_db(dir: &Path) {
    make_db_with(dir, &[]);
}

/// [`make_db`] with extra `kv exec` flags.
fn make_db_with(dir: &Path, flags: &[&str]) {
    let script = "put a 1\nput b 2\nput c 3\nput d 4\ndelrange b c\nflush\nput e 5\ndel a\n";
    let flags: Vec<&str> = ["--sync"].iter().chain(flags).copied().collect();
    let out = common::kv_exec("lsm", &flags, dir, script.as_bytes());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn files_with(dir: &Path, pred: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| pred(&p.file_name().unwrap().to_string_lossy()))
        .collect();
    v.sort();
    v
}

fn flip(path: &Path, at_from_end: u64) {
    let mut b = std::fs::read(path).unwrap();
    let i = b.len() - at_from_end as usize;
    b[i] ^= 0x40;
    std::fs::write(path, b).unwrap();
}

#[test]
fn every_kind_and_action_reads_what_the_engine_wrote() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    make_db(&dir);

    let listing = |d: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        files_with(d, |_| true).into_iter().map(|p| (p.clone(), std::fs::read(&p).unwrap())).collect()
    };
    let before = listing(&dir);
    let scan = ok(&["inspect", "db", "--action", "scan"], &dir);
    let (head, rows) = scan.split_once('\n').unwrap();
    assert!(head.starts_with("CURRENT -> MANIFEST-"), "{head}");
    assert_eq!(rows, "c 3\nd 4\ne 5\n");
    let check = ok(&["inspect", "db", "--action", "check"], &dir);
    assert!(check.contains("ok: 3 live keys"), "{check}");
    // Inspection recovers in memory: the directory is byte for byte what the engine left.
    assert!(listing(&dir) == before, "inspect db changed the database directory");

    let tables = files_with(&dir, |n| n.ends_with(".sst"));
    assert!(!tables.is_empty());
    let dump = ok(&["inspect", "sst", "--action", "dump"], &tables[0]);
    assert!(dump.contains("a@1:Value => 1"), "{dump}");
    assert!(dump.contains("rangedel [b .. c) seqs=[5]"), "{dump}");
    let layout = ok(&["inspect", "sst", "--action", "layout"], &tables[0]);
    assert!(layout.contains("data   offset=0") && layout.contains("footer offset="), "{layout}");
    ok(&["inspect", "sst", "--action", "check"], &tables[0]);

    let manifests = files_with(&dir, |n| n.starts_with("MANIFEST-"));
    let m = ok(&["inspect", "manifest", "--action", "dump"], manifests.last().unwrap());
    assert!(m.contains("add L0 #"), "{m}");

    // Reopening by `check` and `scan` recovered the WAL's writes; the newest WAL holds whatever came after.
    for w in files_with(&dir, |n| n.ends_with(".log")) {
        let out = ok(&["inspect", "wal", "--action", "check"], &w);
        assert!(out.contains("records"), "{out}");
    }
}

#[test]
fn wal_dump_shows_every_operation_kind() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    make_db(&dir);
    let wals = files_with(&dir, |n| n.ends_with(".log"));
    let all: String = wals.iter().map(|w| ok(&["inspect", "wal", "--action", "dump"], w)).collect();
    for want in ["put e 5", "del a"] {
        assert!(all.contains(want), "{want} missing from {all}");
    }
}

#[test]
fn check_reports_a_flipped_byte_in_each_file_kind() {
    for (kind, pick) in [("sst", ".sst"), ("manifest", "MANIFEST-"), ("wal", ".log")] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("db");
        make_db(&dir);
        let target = files_with(&dir, |n| n.contains(pick)).pop().unwrap();
        // Inside the first block / record, well before any trailer.
        let len = std::fs::metadata(&target).unwrap().len();
        flip(&target, len - 12);
        let out = rangedb(&["inspect", kind, "--action", "check"], &target);
        let err = String::from_utf8_lossy(&out.stderr).to_lowercase() + &String::from_utf8_lossy(&out.stdout);
        let failed = !out.status.success() || err.contains("damaged");
        assert!(failed, "{kind}: a flipped byte went unnoticed: {err}");
        assert!(
            err.contains("checksum") || err.contains("corrupt") || err.contains("damaged"),
            "{kind}: {err}"
        );
        let out = rangedb(&["inspect", "db", "--action", "check"], &dir);
        assert!(!out.status.success(), "{kind}: db check passed over a damaged file");
    }
}

#[test]
fn regression_a_dump_over_damaged_synced_records_fails() {
    // `dump` printed "damaged synced records" and exited 0, so a script reading the dump missed the loss of
    // acknowledged writes. A torn tail, which a crash leaves and recovery drops, still dumps successfully.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    make_db(&dir);
    let wal = files_with(&dir, |n| n.ends_with(".log")).pop().unwrap();
    let whole = std::fs::read(&wal).unwrap();

    std::fs::write(&wal, &whole[..whole.len() - 3]).unwrap();
    let dump = ok(&["inspect", "wal", "--action", "dump"], &wal);
    assert!(dump.contains("put e 5") && dump.contains("damaged tail"), "{dump}");
    let out = rangedb(&["inspect", "wal", "--action", "check"], &wal);
    assert!(!out.status.success(), "check passed over a torn tail");

    std::fs::write(&wal, &whole).unwrap();
    flip(&wal, whole.len() as u64 - 12);
    for action in ["dump", "check", "scan"] {
        let out = rangedb(&["inspect", "wal", "--action", action], &wal);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{action} passed over damaged synced records");
        assert!(err.contains("corruption in"), "{action}: {err}");
    }
}

#[test]
fn a_missing_path_or_database_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = rangedb(&["inspect", "db"], dir.path());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("holds no LSM database (no CURRENT file)")
            && err.contains(&*dir.path().to_string_lossy()),
        "{err}"
    );
}

/// A file given where a store directory belongs: every store kind said only "Not a directory (os error 20)",
/// and `kv exec --create` on it "io I/O error: File exists", naming neither the path nor what was wrong.
#[test]
fn regression_a_file_given_as_a_store_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-store");
    std::fs::write(&file, b"junk").unwrap();
    let want = format!("{}: not a directory", file.display());
    let mut outs: Vec<Output> = ["db", "flexdb", "blockstore", "flexfile"]
        .iter()
        .map(|kind| rangedb(&["inspect", kind], &file))
        .collect();
    outs.push(rangedb(&["flexdb", "inspect"], &file));
    for engine in ["lsm", "flexdb"] {
        outs.push(common::run(&["kv", "exec", "--engine", engine, "--create", "--dir"], &file, b"put a b\n"));
    }
    outs.push(common::run(&["flexdb", "exec", "--create", "--dir"], &file, b"put a b\n"));
    outs.push(common::run(&["flexfile", "exec", "--create", "--dir"], &file, b""));
    for out in outs {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(&want) && out.stdout.is_empty(), "{err}");
    }
}

/// A database with GLORAN's global range index: `dump` and `layout` failed on its index directory ("is a
/// directory"), and `check` and `scan` opened it with local tombstones, which the engine refuses.
#[test]
fn every_action_reads_a_database_with_a_global_range_index() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    make_db_with(&dir, &["--range-delete-strategy", "global"]);
    let listing = |d: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        let mut v: Vec<(PathBuf, Vec<u8>)> = files_with(d, |_| true)
            .into_iter()
            .filter(|p| p.is_file())
            .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
            .collect();
        v.extend(
            files_with(&d.join("gloran"), |_| true)
                .into_iter()
                .map(|p| (p.clone(), std::fs::read(&p).unwrap())),
        );
        v
    };
    let before = listing(&dir);
    let scan = ok(&["inspect", "db", "--action", "scan"], &dir);
    assert_eq!(scan.split_once('\n').unwrap().1, "c 3\nd 4\ne 5\n");
    let check = ok(&["inspect", "db", "--action", "check"], &dir);
    assert!(
        check.contains("global range index: ok, 1 areas") && check.contains("ok: 3 live keys"),
        "{check}"
    );
    for action in ["dump", "layout"] {
        let out = ok(&["inspect", "db", "--action", action], &dir);
        assert!(out.contains("range index: watermark") && out.contains("gloran/"), "{action}: {out}");
    }
    assert!(listing(&dir) == before, "inspect db changed the database directory");

    // A flipped byte in a DR-tree file's nodes (written before its footer) is reported.
    let drt = files_with(&dir.join("gloran"), |n| n.ends_with(".drt")).pop().expect("a DR-tree file");
    flip(&drt, std::fs::metadata(&drt).unwrap().len() / 2);
    let out = rangedb(&["inspect", "db", "--action", "check"], &dir);
    assert!(!out.status.success(), "check passed over a damaged DR-tree file");
    let err = String::from_utf8_lossy(&out.stderr).to_lowercase();
    assert!(err.contains("corrupt") || err.contains("checksum"), "{err}");
}

/// `rangedb inspect ... | head`: the dump used to panic ("failed printing to stdout: Broken pipe") once the
/// reader had gone; it now ends as `cat` does, by SIGPIPE, with nothing on standard error. The layout of the same
/// table names its index separators.
#[test]
fn regression_a_reader_that_goes_away_ends_inspect_quietly() {
    use std::io::BufRead as _;
    use std::os::unix::process::ExitStatusExt as _;
    use std::process::Stdio;

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    // About 200 KB of dump, more than a pipe holds, so the dump is still writing when the reader goes.
    let mut script: String =
        (0..3000).map(|i| format!("put user{i:012}-with-a-longer-tail value{i}\n")).collect();
    script.push_str("flush\n");
    let out = common::kv_exec("lsm", &[], &dir, script.as_bytes());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = files_with(&dir, |n| n.ends_with(".sst")).pop().expect("a table");

    let layout = ok(&["inspect", "sst", "--action", "layout"], &table);
    assert!(layout.contains("index_key=user000000000") && layout.contains(". (separator)"), "{layout}");

    let mut child = Command::new(env!("CARGO_BIN_EXE_rangedb"))
        .args(["inspect", "sst", "--action", "dump"])
        .arg(&table)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("user000000000000-with-a-longer-tail@"), "{first}");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}
