//! `rangedb kv exec` killed with SIGKILL mid-stream: every write answered OK under `--sync` is there after
//! reopening, and a range delete answered OK stays applied; damage to the log found after the kill is refused, or
//! salvaged on request (`--wal-recovery point-in-time`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

fn spawn(dir: &std::path::Path) -> std::process::Child {
    spawn_engine("lsm", dir, &["--write-buffer-size", "16384"])
}

/// `rangedb kv exec --engine ENGINE --create --sync` on `dir` with `extra` flags, its standard input and output
/// piped.
fn spawn_engine(engine: &str, dir: &std::path::Path, extra: &[&str]) -> std::process::Child {
    spawn_with(engine, dir, &[&["--sync"], extra].concat())
}

/// `rangedb kv exec --engine ENGINE --create` on `dir` with `args`, its standard input and output piped.
fn spawn_with(engine: &str, dir: &std::path::Path, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_rangedb"))
        .args(["kv", "exec", "--engine", engine, "--create"])
        .args(args)
        .arg("--dir")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

#[test]
fn kill_dash_nine_loses_no_acknowledged_write() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut acked = 0u32;
    {
        let mut child = spawn(&dir);
        let mut stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        for i in 0..600u32 {
            ask_ok(&mut stdin, &mut out, &format!("put key{i:05} value{i}"));
            acked = i + 1;
            if i == 300 {
                ask_ok(&mut stdin, &mut out, "delrange key00100 key00200");
            }
        }
        // More writes in flight, then SIGKILL without waiting for their answers.
        for i in 600..700u32 {
            let _ = writeln!(stdin, "put key{i:05} value{i}");
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let mut child = spawn(&dir);
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "scan key00000 key99999").unwrap();
    writeln!(stdin, "get key00150").unwrap();
    writeln!(stdin, "get key00599").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let end = lines.iter().position(|l| l.starts_with("END ")).unwrap();
    let keys: Vec<&str> = lines[..end].iter().map(|l| l.split(' ').next().unwrap()).collect();
    for i in 0..acked {
        let k = format!("key{i:05}");
        let present = keys.contains(&k.as_str());
        assert_eq!(present, !(100..200).contains(&i), "{k}");
    }
    assert_eq!(lines[end + 1], "NOT_FOUND");
    assert_eq!(lines[end + 2], "value599");
}

/// Without `--sync` a write is answered once it is in the WAL's page cache pages, which a killed process leaves
/// to the kernel: every answered write is there after the kill. WALs on real files are appended through a
/// mapping with space reserved ahead (`docs/vfs.md`), so the killed process also leaves the newest WAL with
/// zeros past its records, which recovery takes as the log's end.
#[test]
fn kill_dash_nine_without_sync_keeps_every_answered_write() {
    // Enough for more than 64 KiB of WAL, past which unsynced appends go through the mapping.
    const N: u32 = 3000;
    for engine in ["lsm", "flexdb"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("db");
        put_then_kill(spawn_with(engine, &dir, &[]), N);
        let zero_tailed = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .any(|p| std::fs::read(&p).unwrap().ends_with(&[0u8; 4096]));
        assert!(zero_tailed, "{engine}: no WAL kept its reservation");
        let (ok, text, err) = exec(engine, &dir, &[], "scan key key~\n");
        assert!(ok && err.is_empty(), "{engine}: {err}");
        let keys: Vec<&str> = text.lines().filter(|l| !l.starts_with("END")).collect();
        let want: Vec<String> = (0..N).map(|i| format!("key{i:05} value{i}")).collect();
        assert_eq!(keys, want, "{engine}");
    }
}

/// Puts `key{i:05} -> value{i}` for `i` in `0..n` through `child`, waiting for each `OK`, then kills it.
fn put_then_kill(mut child: std::process::Child, n: u32) {
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    for i in 0..n {
        ask_ok(&mut stdin, &mut out, &format!("put key{i:05} value{i}"));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Sends `cmd` and waits for its answer, which must be `OK`.
fn ask_ok(stdin: &mut impl Write, out: &mut impl BufRead, cmd: &str) {
    writeln!(stdin, "{cmd}").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "OK", "{cmd}");
}

/// Runs `rangedb kv exec` on `dir` with `args`, feeding `input`; returns (success, stdout, stderr).
fn exec(engine: &str, dir: &std::path::Path, args: &[&str], input: &str) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rangedb"))
        .args(["kv", "exec", "--engine", engine, "--dir"])
        .arg(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

/// A bit flip in the WAL of a store killed after synced writes: a strict open refuses it, naming the file;
/// `--wal-recovery point-in-time` opens the writes before the damage, says on standard error what it dropped,
/// and leaves a store that opens strictly again.
#[test]
fn wal_damage_is_refused_or_salvaged_on_request() {
    for engine in ["lsm", "flexdb"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("db");
        put_then_kill(spawn_engine(engine, &dir, &[]), 200);
        let wal = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "log") && std::fs::metadata(p).unwrap().len() > 0)
            .max()
            .expect("a WAL");
        let mut bytes = std::fs::read(&wal).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0x20;
        std::fs::write(&wal, &bytes).unwrap();
        let name = wal.file_name().unwrap().to_str().unwrap().to_string();
        let (ok, _, err) = exec(engine, &dir, &[], "get key00000\n");
        assert!(!ok && err.contains("corruption") && err.contains(&name), "{engine}: {err}");
        let (ok, text, err) = exec(engine, &dir, &["--wal-recovery", "point-in-time"], "scan key key~\n");
        assert!(ok, "{engine}: {err}");
        assert!(err.contains("point-in-time recovery dropped"), "{engine}: {err}");
        let keys: Vec<&str> = text.lines().take_while(|l| !l.starts_with("END")).map(|l| &l[..8]).collect();
        assert!(!keys.is_empty() && keys.len() < 200, "{engine}: {} keys", keys.len());
        let want: Vec<String> = (0..keys.len()).map(|i| format!("key{i:05}")).collect();
        assert_eq!(keys, want, "{engine}");
        let (ok, text, err) = exec(engine, &dir, &[], "scan key key~\n");
        assert!(ok && err.is_empty(), "{engine}: {err}");
        assert_eq!(text.lines().count(), keys.len() + 1, "{engine}");
        let (ok, _, err) = exec(engine, &dir, &["--wal-recovery", "sometimes"], "");
        assert!(!ok && err.contains("point-in-time"), "{engine}: {err}");
    }
}
