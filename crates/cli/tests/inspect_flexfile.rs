//! `rangedb inspect flexfile DIR` (and its older name `rangedb flexfile inspect DIR`) on a FlexFile the shell
//! wrote: a clean file checks OK; damage to the newest tree header fails the check with a non-zero exit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn rangedb(args: &[&str], path: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rangedb")).args(args).arg(path).output().unwrap()
}

fn make(dir: &Path) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rangedb"))
        .args(["flexfile", "exec", "--create", "--dir"])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"insert 0 0x68656c6c6f\nwrite 10 0x21\nsync\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn inspect_flexfile_checks_and_reports_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ff");
    make(&dir);
    for args in [&["inspect", "flexfile"][..], &["flexfile", "inspect"][..]] {
        let out = rangedb(args, &dir);
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(out.status.success(), "{args:?}: {text}");
        assert!(text.contains("size 11 extents 3"), "{text}");
        assert!(text.contains("check: OK"), "{text}");
    }
    // Create writes version 1 and the shell's close version 2, in header slot 0: damage its version field.
    let tree = dir.join("flexfile.tree");
    let mut b = std::fs::read(&tree).unwrap();
    b[16] ^= 0xff;
    std::fs::write(&tree, b).unwrap();
    let out = rangedb(&["inspect", "flexfile"], &dir);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("check: log: extends version 2"), "{text}");
}

#[test]
fn regression_a_directory_without_a_flexfile_is_named() {
    // Both commands answered a bare "No such file or directory (os error 2)", naming no path; `exec` without
    // `--create` also left a LOCK file in the directory it refused.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("empty");
    std::fs::create_dir(&dir).unwrap();
    let out = rangedb(&["inspect", "flexfile"], &dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("empty holds no FlexFile"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_rangedb"))
        .args(["flexfile", "exec", "--dir"])
        .arg(tmp.path().join("missing"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("missing does not exist"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_rangedb"))
        .args(["flexfile", "exec", "--dir"])
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "the refused exec wrote into the directory");
}
