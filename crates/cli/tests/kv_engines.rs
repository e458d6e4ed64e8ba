//! `rangedb kv exec` answers the same script the same way on both engines, and the data survives a reopen.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Output;

mod common;

/// Runs `rangedb kv exec --engine ENGINE --create EXTRA.. --dir DIR` on `script`.
fn run(engine: &str, extra: &[&str], dir: &std::path::Path, script: impl AsRef<[u8]>) -> Output {
    common::kv_exec(engine, extra, dir, script.as_ref())
}

fn exec(engine: &str, dir: &std::path::Path, script: impl AsRef<[u8]>) -> String {
    let out = run(engine, &["--sync"], dir, script);
    assert!(out.status.success(), "{engine}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn both_engines_answer_the_spec_commands_alike() {
    let script = "put a 1\nput b 0x\nput 0x00ff v\nget b\nget nope\nbatch 2\nput c 3\ndel a\n\
                  delrange 0x00 0x01\nscan 0x z\nrscan 0x z 1\nflush\nsync\nbogus\nb\x01gus\nsync now\nstats x\n\
                  batch 3\nput d 4\ndelrange c e\nput dd 5\nscan 0x z\ndelrange z a\ncompact z a\ncompact a z\n";
    let want = "OK\nOK\nOK\n0x\nNOT_FOUND\nOK\nOK\nb 0x\nc 3\nEND 2\nc 3\nEND 1\nOK\nOK\nERR parse unknown command bogus\nERR parse unknown command b\\u{1}gus\n\
                ERR parse usage: sync (takes no argument)\nERR parse usage: stats (takes no argument)\nOK\nb 0x\ndd 5\nEND 2\n\
                ERR invalid delrange start is after end\nERR invalid compact start is after end\nOK\n";
    for engine in ["lsm", "flexdb"] {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(exec(engine, &dir.path().join("db"), script), want, "{engine}");
        assert_eq!(
            exec(engine, &dir.path().join("db"), "get c\nget a\nscan 0x z\n"),
            "NOT_FOUND\nNOT_FOUND\nb 0x\ndd 5\nEND 2\n"
        );
    }
}

/// Snapshots (the spec's `snapshot`, `@id` reads and `release`) answer alike on both engines, through writes,
/// range deletes and a flush; FlexDB answered `ERR unsupported` until it kept pre-images.
#[test]
fn both_engines_read_at_snapshots_alike() {
    let script = "put a 1\nput b 2\nsnapshot\nput a 3\ndelrange b c\nput c 4\nflush\nsnapshot\ndel c\n\
                  get a @1\nget b @1\nget c @1\nscan a z @1\nrscan a z 1 @2\nscan a z\nrelease 1\n\
                  get a @1\nget a @2\nrelease 2\nrelease 2\n";
    let want = "OK\nOK\nSNAPSHOT 1\nOK\nOK\nOK\nOK\nSNAPSHOT 2\nOK\n\
                1\n2\nNOT_FOUND\na 1\nb 2\nEND 2\nc 4\nEND 1\na 3\nEND 1\nOK\n\
                ERR invalid no snapshot 1\n3\nOK\nERR invalid no snapshot 2\n";
    for engine in ["lsm", "flexdb"] {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(exec(engine, &dir.path().join("db"), script), want, "{engine}");
    }
}

/// A line that is not UTF-8, a hex token with a multi-byte character inside, and a batch count no memory could
/// hold are malformed lines: each gets `ERR parse` and the session goes on (the spec). The first ended the session
/// with exit status 1; the other two panicked (a `&str` sliced inside a character, a `Vec` reserving the count).
#[test]
fn regression_malformed_bytes_and_counts_are_parse_errors_and_the_session_goes_on() {
    let script: &[u8] = b"put \xff\xfe v\nput 0xa\xc3\xa90 v\nput 0x+a v\nbatch 2\nput \xff x\nput y 1\n\
                          put a 1\r\nget a\nget y\nbatch 18446744073709551615\nput b 2\n";
    let want = "ERR parse line is not valid UTF-8\nERR parse bad hex token 0xa\u{e9}0\nERR parse bad hex token 0x+a\n\
                ERR parse line is not valid UTF-8\nOK\n1\nNOT_FOUND\nERR parse batch ended early\n";
    for engine in ["lsm", "flexdb"] {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(exec(engine, &dir.path().join("db"), script), want, "{engine}");
        // The store was closed cleanly: the acknowledged put is there, neither rejected batch is.
        assert_eq!(
            exec(engine, &dir.path().join("db"), "get a\nget y\nget b\n"),
            "1\nNOT_FOUND\nNOT_FOUND\n"
        );
    }
}

#[test]
fn flexdb_gc_start_utilization_flag() {
    let flex = |g: &str, dir: &std::path::Path| {
        run("flexdb", &["--gc-start-utilization", g], dir, "put a 1\nget a\n")
    };
    let tmp = tempfile::tempdir().unwrap();
    let ok = flex("30/32", &tmp.path().join("a"));
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    assert_eq!(String::from_utf8_lossy(&ok.stdout), "OK\n1\n");
    // Above the utilisation cap: the engine refuses it at open, as an error, not a panic.
    let above = flex("31/32", &tmp.path().join("b"));
    assert!(!above.status.success());
    let err = String::from_utf8_lossy(&above.stderr);
    assert!(err.contains("gc_start_utilization") && !err.contains("panicked"), "{err}");
    // Not a fraction: the argument parser refuses it.
    let garbled = flex("half", &tmp.path().join("c"));
    assert!(!garbled.status.success());
    assert!(String::from_utf8_lossy(&garbled.stderr).contains("expected N/D"));
}

#[test]
fn options_of_the_other_engine_are_refused_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, flags, want) in [
        (
            "flexdb",
            &["--write-buffer-size", "4096"][..],
            "--write-buffer-size applies only with --engine lsm",
        ),
        (
            "lsm",
            &["--memtable-bytes", "4096", "--cache-bytes", "8192"][..],
            "--memtable-bytes, --cache-bytes apply only with --engine flexdb",
        ),
    ] {
        let out = run(engine, flags, &dir.path().join(engine), "put a 1\n");
        assert!(!out.status.success(), "{engine} {flags:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(want),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty(), "nothing may run");
    }
}

/// The spec's engine flags include the range-delete mode and RangeReduce: `--range-delete-strategy global` was
/// refused as unknown, and RangeReduce had no flag.
#[test]
fn lsm_runs_with_global_range_deletes_and_every_range_reduce_mode() {
    let script =
        "put a 1\nput b 2\nput c 3\nflush\ndelrange a c\nput d 4\nscan 0x z\nflush\ncompact\nget b\nstats\n";
    for mode in ["off", "bounded-merge", "mos-blind", "mos-file-size-aware"] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let flags =
            ["--range-delete-strategy", "global", "--range-reduce", mode, "--write-buffer-size", "4096"];
        let out = run("lsm", &flags, &db, script);
        assert!(out.status.success(), "{mode}: {}", String::from_utf8_lossy(&out.stderr));
        let out = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(&lines[..10], ["OK", "OK", "OK", "OK", "OK", "OK", "c 3", "d 4", "END 2", "OK"], "{mode}");
        assert_eq!(&lines[10..12], ["OK", "NOT_FOUND"], "{mode}");
        // The global index's counters are in the stats line.
        assert!(lines[12].contains("\"range_delete_global\":{\"lookups\":"), "{mode}: {}", lines[12]);
        // The database keeps its strategy: opening it with local tombstones is refused, with the reason.
        let local = run("lsm", &[], &db, "get c\n");
        assert!(!local.status.success(), "{mode}");
        assert!(String::from_utf8_lossy(&local.stderr).contains("global index"), "{mode}");
        let again = run("lsm", &["--range-delete-strategy", "global"], &db, "get c\nget a\n");
        assert_eq!(String::from_utf8_lossy(&again.stdout), "3\nNOT_FOUND\n", "{mode}");
    }
    let dir = tempfile::tempdir().unwrap();
    for (flag, value, want) in [
        ("--range-reduce", "sometimes", "unknown RangeReduce mode \"sometimes\""),
        ("--range-delete-strategy", "nowhere", "unknown range-delete strategy \"nowhere\""),
    ] {
        let out = run("lsm", &[flag, value], &dir.path().join(value), "put a 1\n");
        assert!(!out.status.success(), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want) && !err.contains("invalid argument: "), "{err}");
        assert!(out.stdout.is_empty());
    }
}
