//! `rangedb kv exec --engine lsm` killed with SIGKILL mid-stream: every write answered OK under `--sync` is there
//! after reopening, and a range delete answered OK stays applied.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

fn spawn(dir: &std::path::Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_rangedb"))
        .args([
            "kv",
            "exec",
            "--engine",
            "lsm",
            "--create",
            "--sync",
            "--write-buffer-size",
            "16384",
            "--dir",
        ])
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
        let mut line = String::new();
        for i in 0..600u32 {
            writeln!(stdin, "put key{i:05} value{i}").unwrap();
            stdin.flush().unwrap();
            line.clear();
            out.read_line(&mut line).unwrap();
            assert_eq!(line.trim(), "OK");
            acked = i + 1;
            if i == 300 {
                writeln!(stdin, "delrange key00100 key00200").unwrap();
                stdin.flush().unwrap();
                line.clear();
                out.read_line(&mut line).unwrap();
                assert_eq!(line.trim(), "OK");
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
