//! `rangedb inspect flexdb DIR`: every action on a store written through the kv shell.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;

mod common;

fn rangedb(args: &[&str], dir: &Path, stdin: &str) -> Output {
    common::run(args, dir, stdin.as_bytes())
}

/// Every file under `dir` with its bytes.
fn files(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.insert(p.clone(), std::fs::read(&p).unwrap());
        }
    }
    out
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn inspect_flexdb_actions() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut script = String::new();
    for i in 0..300 {
        script.push_str(&format!("put key{i:04} value{i}\n"));
    }
    script.push_str("flush\nput late 1\ndel key0007\n");
    let o = rangedb(&["kv", "exec", "--engine", "flexdb", "--create", "--sync", "--dir"], &dir, &script);
    stdout(&o);
    // dump reads the log without opening the store: the two unflushed writes are there.
    let dump = stdout(&rangedb(&["inspect", "flexdb"], &dir, ""));
    assert!(dump.contains("put late 1"), "{dump}");
    assert!(dump.contains("del key0007"), "{dump}");
    // The actions that open the store recover in memory: the directory keeps every byte (regression: they
    // used to open the store for real, replaying and removing its logs).
    let before = files(&dir);
    let check = stdout(&rangedb(&["inspect", "flexdb", "--action", "check"], &dir, ""));
    assert!(check.contains("check: ok"), "{check}");
    let layout = stdout(&rangedb(&["inspect", "flexdb", "--action", "layout"], &dir, ""));
    let first = layout.lines().next().unwrap();
    assert!(first.ends_with("table bytes") && !first.starts_with("1 intervals"), "{layout}");
    let scan = stdout(&rangedb(&["inspect", "flexdb", "--action", "scan"], &dir, ""));
    assert!(scan.contains("key0006 value6\nkey0008 value8\n"), "{scan}");
    assert!(scan.ends_with("late 1\n300 pairs\n"), "{scan}");
    assert!(files(&dir) == before, "inspect changed the store's files");
    // The old subcommand is the same check.
    assert!(stdout(&rangedb(&["flexdb", "inspect"], &dir, "")).contains("check: ok"));
    let o = rangedb(&["inspect", "flexdb", "--action", "bogus"], &dir, "");
    assert!(!o.status.success());
}
