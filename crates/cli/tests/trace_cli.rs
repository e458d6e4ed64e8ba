//! `rangedb trace` end to end: a synthetic trace written in each format measures back to its parameters.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn rangedb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rangedb"))
}

#[test]
fn synth_then_stats_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    for format in ["alibaba", "tencent", "msr"] {
        let path = dir.path().join(format!("t.{format}.csv"));
        let out = rangedb()
            .args(["trace", "synth", "--ops", "50000", "--seed", "7", "--format", format, "--out"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        // One malformed line at the end: counted and reported with its number, not fatal.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("not,a,trace,line\n");
        std::fs::write(&path, text).unwrap();
        let out = rangedb().args(["trace", "stats"]).arg(&path).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report = String::from_utf8(out.stdout).unwrap();
        assert!(report.contains(&format!("({format}, 4 volumes)")), "{report}");
        assert!(report.contains("malformed 1") && report.contains("line 50001:"), "{report}");
        assert!(report.contains("long-CW ratio  73."), "{report}");
        assert!(report.contains("I/O compaction removes"), "{report}");
        // Strict mode turns the malformed line into a failure.
        let out =
            rangedb().args(["trace", "stats", "--strict", "--format", format]).arg(&path).output().unwrap();
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("line 50001"));
    }
    let out = rangedb().args(["trace", "synth", "--format", "nope"]).output().unwrap();
    assert!(!out.status.success());
}

/// An output that cannot be written is named: the error read "No such file or directory (os error 2)", and a
/// failed write "I/O error reading the trace".
#[test]
fn regression_an_unwritable_output_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("missing").join("t.csv");
    let out = rangedb().args(["trace", "synth", "--ops", "10", "--out"]).arg(&out_path).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("--out {}: ", out_path.display())), "{err}");
    if std::path::Path::new("/dev/full").exists() {
        let out =
            rangedb().args(["trace", "synth", "--ops", "100000", "--out", "/dev/full"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("--out /dev/full: ") && !err.contains("reading"),
            "{err}"
        );
    }
}
