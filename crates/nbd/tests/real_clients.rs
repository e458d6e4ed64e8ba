//! Interoperability with real NBD clients: qemu-io, qemu-img, nbdinfo, nbdcopy (libnbd) and fio's nbd engine.
//!
//! Each test starts a server on an ephemeral TCP port or a Unix socket in a temporary directory, runs the client
//! with a deadline, and checks what it did. A test whose client binary is not installed prints `SKIP` with the
//! package to install and passes; CI installs them (qemu-utils, libnbd-bin, fio).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use nbd::{BlockDevice, Export, Exports, FileDevice, MemDevice, Running, Server, ServerOptions};

const DEADLINE: Duration = Duration::from_secs(60);

fn tool(name: &str, package: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let found = std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file());
    if found.is_none() {
        eprintln!(
            "SKIP: `{name}` is not installed (Debian package {package}); this interoperability test did not run"
        );
    }
    found
}

/// Runs `cmd` to completion within the deadline; kills it and fails the test if it hangs.
fn run(cmd: &mut Command) -> Output {
    let desc = format!("{cmd:?}");
    let child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: kill(2) only sends a signal to the child process we spawned.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("{desc} did not finish within {DEADLINE:?}");
        }
    }
}

fn ok(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what} failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    stdout + &stderr
}

fn mem_export(size: u64) -> (Server, Arc<MemDevice>) {
    let dev = Arc::new(MemDevice::new(size));
    let mut ex = Exports::new();
    ex.add(Export::new("disk", dev.clone()).unwrap().with_description("memory disk").unwrap()).unwrap();
    (Server::new(ex, ServerOptions::default()).unwrap().with_log(|m| eprintln!("server: {m}")), dev)
}

fn tcp(s: Server) -> Running {
    s.listen_tcp("127.0.0.1:0").unwrap()
}

#[test]
fn qemu_io_patterns_write_zeroes_and_discard() {
    let Some(qemu_io) = tool("qemu-io", "qemu-utils") else { return };
    let (s, dev) = mem_export(64 << 20);
    let r = tcp(s);
    let uri = r.uri("disk");
    let out = run(Command::new(&qemu_io).args(["-f", "raw", &uri]).args([
        "-c",
        "write -P 0xab 0 1M",
        "-c",
        "write -P 0xcd -f 1M 64k",
        "-c",
        "read -P 0xab 0 1M",
        "-c",
        "read -P 0xcd 1M 64k",
        "-c",
        "write -z 512k 128k",
        "-c",
        "read -P 0 512k 128k",
        "-c",
        "read -P 0xab 0 512k",
        "-c",
        "aio_write -P 0x11 8M 256k",
        "-c",
        "aio_write -P 0x22 9M 256k",
        "-c",
        "aio_flush",
        "-c",
        "read -P 0x11 8M 256k",
        "-c",
        "read -P 0x22 9M 256k",
        "-c",
        "discard 8M 256k",
        "-c",
        "flush",
        "-c",
        "read -P 0 60M 4M",
    ]));
    let text = ok(&out, "qemu-io");
    assert!(!text.contains("verification failed"), "{text}");
    assert!(!text.to_lowercase().contains("error"), "{text}");
    assert_eq!(text.matches("read ").count(), 7, "every read reported: {text}");
    // The device holds what qemu wrote.
    let mut b = vec![0u8; 4096];
    dev.read_at(&mut b, 9 << 20).unwrap();
    assert!(b.iter().all(|&x| x == 0x22));
    dev.read_at(&mut b, 512 << 10).unwrap();
    assert!(b.iter().all(|&x| x == 0));
    let st = r.stats();
    assert!(st.write_zeroes >= 1 && st.trims >= 1 && st.flushes >= 1, "{st:?}");
    assert_eq!(st.error_replies, 0, "{st:?}");
    assert_eq!(st.protocol_violations, 0, "{st:?}");
}

#[test]
fn nbdinfo_reports_size_flags_block_sizes_and_lists_exports() {
    let Some(nbdinfo) = tool("nbdinfo", "libnbd-bin") else { return };
    let (s, _) = mem_export(64 << 20);
    let r = tcp(s);
    let text = ok(&run(Command::new(&nbdinfo).arg("--json").arg(r.uri("disk"))), "nbdinfo");
    for needle in [
        "\"export-size\": 67108864",
        "\"block_size_minimum\": 1",
        "\"block_size_preferred\": 4096",
        "\"block_size_maximum\": 33554432",
        "\"can_flush\": true",
        "\"can_fua\": true",
        "\"can_trim\": true",
        "\"can_zero\": true",
        "\"can_fast_zero\": true",
        "\"can_cache\": true",
        "\"can_multi_conn\": true",
        "\"can_df\": true",
        "\"is_read_only\": false",
        "\"description\": \"memory disk\"",
    ] {
        assert!(text.contains(needle), "missing {needle} in:\n{text}");
    }
    let list = ok(&run(Command::new(&nbdinfo).arg("--list").arg(r.uri(""))), "nbdinfo --list");
    assert!(list.contains("export=\"disk\""), "{list}");
    // An unknown export is refused with an error, not a hang.
    let out = run(Command::new(&nbdinfo).arg(r.uri("nope")));
    assert!(!out.status.success());
}

fn nbdcopy_round_trip(r: &Running, uri: &str, dir: &Path, size: usize) {
    let Some(nbdcopy) = tool("nbdcopy", "libnbd-bin") else { return };
    let input = dir.join("in.img");
    let output = dir.join("out.img");
    // Data with holes: nbdcopy must copy both, and zeros must come back as zeros.
    let mut img = vec![0u8; size];
    let mut x = 0x1234_5678u64;
    for (i, chunk) in img.chunks_mut(1 << 20).enumerate() {
        if i % 3 != 2 {
            for b in chunk.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
        }
    }
    std::fs::write(&input, &img).unwrap();
    ok(&run(Command::new(&nbdcopy).arg(&input).arg(uri)), "nbdcopy in");
    ok(&run(Command::new(&nbdcopy).arg(uri).arg(&output)), "nbdcopy out");
    let back = std::fs::read(&output).unwrap();
    assert_eq!(back.len(), img.len());
    assert!(back == img, "image differs after the round trip");
    if let Some(cmp) = tool("cmp", "diffutils") {
        ok(&run(Command::new(cmp).arg(&input).arg(&output)), "cmp");
    }
    assert_eq!(r.stats().error_replies, 0);
}

#[test]
fn nbdcopy_round_trip_over_tcp_to_a_file_device_compares_equal() {
    let dir = tempfile::tempdir().unwrap();
    let fs = vfs::OsFs::new();
    let dev = Arc::new(FileDevice::create(&fs, &dir.path().join("disk.img"), 24 << 20).unwrap());
    let mut ex = Exports::new();
    ex.add(Export::new("", dev).unwrap()).unwrap();
    let r = tcp(Server::new(ex, ServerOptions::default()).unwrap());
    nbdcopy_round_trip(&r, &r.uri(""), dir.path(), 24 << 20);
}

#[test]
fn nbdcopy_round_trip_over_a_unix_socket_compares_equal() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = mem_export(24 << 20);
    let r = s.listen_unix(&dir.path().join("nbd.sock")).unwrap();
    nbdcopy_round_trip(&r, &r.uri("disk"), dir.path(), 24 << 20);
}

fn fio(uri: &str, rw: &str, bs: &str, extra: &[&str]) -> Option<String> {
    let fio = tool("fio", "fio")?;
    // fio may leave state files in its working directory: keep them out of the source tree.
    let cwd = tempfile::tempdir().unwrap();
    let out = run(Command::new(fio)
        .current_dir(cwd.path())
        .arg(format!("--name=nbd-{rw}"))
        .args(["--ioengine=nbd", &format!("--uri={uri}"), &format!("--rw={rw}"), &format!("--bs={bs}")])
        .args(["--size=16m", "--iodepth=8", "--numjobs=1", "--verify=crc32c", "--do_verify=1"])
        .args(["--verify_fatal=1", "--verify_state_save=0", "--output-format=terse", "--terse-version=3"])
        .args(extra));
    Some(ok(&out, "fio"))
}

#[test]
fn fio_nbd_engine_random_and_sequential_writes_verify_crc32c() {
    let (s, _) = mem_export(64 << 20);
    let r = tcp(s);
    let uri = r.uri("disk");
    let Some(rand) = fio(&uri, "randwrite", "4k", &["--randseed=42"]) else { return };
    assert!(!rand.contains("verify:"), "{rand}");
    let Some(seq) = fio(&uri, "write", "128k", &[]) else { return };
    assert!(!seq.contains("verify:"), "{seq}");
    let st = r.stats();
    assert!(st.writes >= 4096 + 128, "{st:?}");
    assert!(st.reads >= 4096 + 128, "the verify pass read everything back: {st:?}");
    assert_eq!(st.error_replies, 0);
}

#[test]
fn qemu_img_bench_reads_and_writes() {
    let Some(qemu_img) = tool("qemu-img", "qemu-utils") else { return };
    let (s, _) = mem_export(64 << 20);
    let r = tcp(s);
    let uri = r.uri("disk");
    for mode in [&["-w"][..], &[][..]] {
        let out = run(Command::new(&qemu_img)
            .args(["bench", "-f", "raw", "-c", "4000", "-d", "16", "-s", "4k", "-S", "8k"])
            .args(mode)
            .arg(&uri));
        let text = ok(&out, "qemu-img bench");
        assert!(text.contains("Run completed in"), "{text}");
    }
    let st = r.stats();
    assert!(st.writes >= 4000 && st.reads >= 4000, "{st:?}");
    assert_eq!(st.error_replies, 0);
}

#[test]
fn nbdinfo_map_and_qemu_img_map_see_holes_through_base_allocation() {
    let Some(qemu_io) = tool("qemu-io", "qemu-utils") else { return };
    let Some(nbdinfo) = tool("nbdinfo", "libnbd-bin") else { return };
    let Some(qemu_img) = tool("qemu-img", "qemu-utils") else { return };
    let (s, _) = mem_export(8 << 20);
    let r = tcp(s);
    let uri = r.uri("disk");
    ok(&run(Command::new(&qemu_io).args(["-f", "raw", &uri, "-c", "write -P 0x77 1M 1M"])), "qemu-io");
    let map = ok(&run(Command::new(&nbdinfo).arg("--map").arg(&uri)), "nbdinfo --map");
    let lines: Vec<Vec<&str>> = map.lines().map(|l| l.split_whitespace().collect()).collect();
    // offset, length, type, description
    assert_eq!(lines[0][..3], ["0", "1048576", "3"], "{map}");
    assert_eq!(lines[1][..3], ["1048576", "1048576", "0"], "{map}");
    assert_eq!(lines[2][..3], ["2097152", "6291456", "3"], "{map}");
    let json =
        ok(&run(Command::new(&qemu_img).args(["map", "--output=json", "-f", "raw", &uri])), "qemu-img map");
    assert!(
        json.contains("\"start\": 1048576, \"length\": 1048576") && json.contains("\"data\": true"),
        "{json}"
    );
    assert!(json.contains("\"data\": false"), "{json}");
    assert!(r.stats().block_status >= 2);
}
