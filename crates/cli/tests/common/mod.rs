//! What the command-line tests share: running `rangedb` with a script on its standard input. Each test crate
//! includes this module and uses part of it.
#![allow(dead_code)]

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs `rangedb ARGS.. PATH` with `input` on its standard input.
pub fn run(args: &[&str], path: &Path, input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rangedb"))
        .args(args)
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rangedb runs");
    // From another thread: a long script's answers fill the output pipe while the script is still being written.
    let mut stdin = child.stdin.take().expect("piped");
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("rangedb ends");
    // A process that exits before reading everything closes the pipe; its status tells what happened.
    let _ = feeder.join().expect("the feeder ends");
    out
}

/// Runs `rangedb kv exec --engine ENGINE --create FLAGS.. --dir DIR` with `script` on its standard input.
pub fn kv_exec(engine: &str, flags: &[&str], dir: &Path, script: &[u8]) -> Output {
    let mut args = vec!["kv", "exec", "--engine", engine, "--create"];
    args.extend(flags);
    args.push("--dir");
    run(&args, dir, script)
}
