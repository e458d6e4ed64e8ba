//! `rangedb rask replay` end to end: the `--dump` of a generated trace equals the per-block model's dump, with and
//! without I/O compaction and for the synthetic source; malformed lines are counted, `--strict` fails on them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::process::Command;

use workloads::traces::{
    BlockModel, SyntheticOptions, SyntheticTrace, TraceFormat, TraceOptions, TraceSource, TryCompacted,
    write_trace,
};

fn rangedb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rangedb"))
}

fn synthetic(ops: u64) -> SyntheticOptions {
    SyntheticOptions { seed: 11, ops, volumes: 3, working_set_blocks: 1 << 14, ..SyntheticOptions::default() }
}

/// The per-block model's dump of `source`, compacted with `window` if given.
fn model_dump(source: TraceSource, window: Option<u64>) -> String {
    let mut model = BlockModel::new();
    let volumes = match window {
        Some(w) => {
            let mut it = TryCompacted::new(source, w);
            for op in it.by_ref() {
                model.apply(&op.unwrap());
            }
            it.inner().volumes().clone()
        }
        None => {
            let mut src = source;
            for op in src.by_ref() {
                model.apply(&op.unwrap());
            }
            src.volumes().clone()
        }
    };
    let mut out = Vec::new();
    model.dump(&volumes, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn write_file(path: &Path, format: TraceFormat, ops: u64) {
    let opts = synthetic(ops);
    let names = opts.volume_names();
    let mut out = BufWriter::new(File::create(path).unwrap());
    write_trace(&mut out, format, 4096, &names, SyntheticTrace::new(opts).unwrap()).unwrap();
}

#[test]
fn replay_dump_equals_per_block_model_dump() {
    let dir = tempfile::tempdir().unwrap();
    for format in [TraceFormat::Alibaba, TraceFormat::Tencent, TraceFormat::Msr] {
        let trace = dir.path().join(format!("t.{}", format.name()));
        write_file(&trace, format, 20_000);
        for window in [None, Some(128u64)] {
            let dump = dir.path().join("dump.txt");
            let mut cmd = rangedb();
            cmd.args(["rask", "replay", "--format", format.name(), "--leaf-capacity", "8", "--dump"])
                .arg(&dump);
            if let Some(w) = window {
                cmd.args(["--compact-io", &w.to_string()]);
            }
            let out = cmd.arg(&trace).output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let stdout = String::from_utf8(out.stdout).unwrap();
            assert!(stdout.contains("total") && stdout.contains("malformed lines: 0"), "{stdout}");
            let got = std::fs::read_to_string(&dump).unwrap();
            let source = TraceSource::open(&trace, TraceOptions::new(format)).unwrap();
            let want = model_dump(source, window);
            assert!(!want.is_empty());
            assert_eq!(got, want, "{} window {window:?}", format.name());
        }
    }
}

#[test]
fn synthetic_replay_dump_equals_model() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("dump.txt");
    let out = rangedb()
        .args(["rask", "replay", "--format", "synthetic", "--ops", "20000", "--volumes", "3", "--seed", "11"])
        .args(["--working-set-blocks", "16384", "--dump"])
        .arg(&dump)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let want = model_dump(TraceSource::synthetic(synthetic(20_000), None).unwrap(), None);
    assert_eq!(std::fs::read_to_string(&dump).unwrap(), want);
}

#[test]
fn malformed_lines_are_counted_and_strict_fails() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    write_file(&trace, TraceFormat::Alibaba, 1000);
    let mut text = std::fs::read_to_string(&trace).unwrap();
    text.push_str("garbage line\n0,W,notanumber,4096,1\n");
    std::fs::write(&trace, text).unwrap();
    let out = rangedb().args(["rask", "replay", "--format", "alibaba"]).arg(&trace).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("2 malformed lines skipped"), "{stdout}");
    assert!(stdout.contains("line 1001:") && stdout.contains("line 1002:"), "{stdout}");
    assert!(stdout.contains("malformed lines: 2"), "{stdout}");
    let out =
        rangedb().args(["rask", "replay", "--format", "alibaba", "--strict"]).arg(&trace).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 1001"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = rangedb().args(["rask", "replay", "--format", "nope"]).arg(&trace).output().unwrap();
    assert!(!out.status.success());
}

/// A `--dump` path that cannot be created fails before the replay, naming it; it failed after the whole replay
/// with "No such file or directory (os error 2)".
#[test]
fn regression_an_unwritable_dump_fails_first_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("missing").join("dump.txt");
    let out = rangedb()
        .args(["rask", "replay", "--format", "synthetic", "--ops", "1000", "--dump"])
        .arg(&dump)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("--dump {}: ", dump.display())), "{err}");
    assert!(out.stdout.is_empty(), "replayed before failing: {}", String::from_utf8_lossy(&out.stdout));
}

/// `--volume` with an id the trace never names printed an empty report and exited 0, as if the trace held no
/// operations; it fails now, naming the id. A volume the trace has still replays alone.
#[test]
fn regression_a_volume_the_trace_lacks_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    write_file(&trace, TraceFormat::Alibaba, 1000);
    let replay = |volume: &str| {
        rangedb()
            .args(["rask", "replay", "--format", "alibaba", "--volume", volume])
            .arg(&trace)
            .output()
            .unwrap()
    };
    let out = replay("nosuch");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--volume nosuch: no operation of that volume"), "{err}");
    let names = synthetic(1000).volume_names();
    let (first, second) = (names.name(0).to_string(), names.name(1).to_string());
    let out = replay(&first);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = stdout.lines().skip(1).map(|l| l.split_whitespace().next().unwrap_or("")).collect();
    assert_eq!(rows, [first.as_str(), "total", "malformed"], "{second} replayed too: {stdout}");
}
