//! Real NBD clients (qemu-io, nbdinfo, nbdcopy, fio, qemu-img) against block-store volumes served by the NBD
//! server. A test whose client is not installed prints `SKIP` with the Debian package and passes; CI installs
//! qemu-utils, libnbd-bin and fio.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blockstore::{Options, Store};
use nbd::{Export, Exports, Running, Server, ServerOptions};

const DEADLINE: Duration = Duration::from_secs(120);

fn tool(name: &str, package: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let found = std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file());
    if found.is_none() {
        eprintln!("SKIP: `{name}` is not installed (Debian package {package}); this test did not run");
    }
    found
}

/// Runs `cmd` to completion within the deadline; kills it and fails if it hangs.
fn run(cmd: &mut Command) -> Output {
    let desc = format!("{cmd:?}");
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > DEADLINE {
            child.kill().unwrap();
            panic!("{desc} did not finish within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn ok(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what} failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    stdout + &stderr
}

/// Serves volume `name` of the store in `dir` (creating it with `size` bytes when `size` is given).
fn serve(dir: &Path, name: &str, size: Option<u64>) -> Running {
    let store = Store::open(Arc::new(vfs::OsFs::new()), dir, Options::default()).unwrap();
    let vol = match size {
        Some(s) => store.create_volume(name, s).unwrap(),
        None => store.volume(name).unwrap(),
    };
    let mut ex = Exports::new();
    ex.add(Export::new("disk", vol).unwrap()).unwrap();
    Server::new(ex, ServerOptions::default())
        .unwrap()
        .with_log(|m| eprintln!("server: {m}"))
        .listen_tcp("127.0.0.1:0")
        .unwrap()
}

#[test]
fn qemu_io_patterns_zeroes_discard_and_restart() {
    let Some(qemu_io) = tool("qemu-io", "qemu-utils") else { return };
    let dir = tempfile::tempdir().unwrap();
    let r = serve(dir.path(), "vol", Some(64 << 20));
    let uri = r.uri("disk");
    let cmds = [
        "write -P 0xab 0 1M",
        "write -P 0xcd -f 1M 64k",
        "write -P 0x11 3M 4k",
        "write -P 0x22 3000k 8k",
        "read -P 0xab 0 1M",
        "read -P 0xcd 1M 64k",
        "write -z 512k 256k",
        "read -P 0 512k 256k",
        "read -P 0xab 768k 256k",
        "discard 3M 4k",
        "read -P 0 3M 4k",
        "write -P 0x33 5000 1000",
        "read -P 0x33 5000 1000",
        "flush",
    ];
    let mut cmd = Command::new(&qemu_io);
    cmd.args(["-f", "raw", &uri]);
    for c in cmds {
        cmd.args(["-c", c]);
    }
    let text = ok(&run(&mut cmd), "qemu-io");
    assert!(!text.contains("Pattern verification failed"), "{text}");
    let st = r.stats();
    assert_eq!(st.error_replies, 0, "{st:?}");
    r.shutdown();
    // Everything flushed survives a restart of the server on the same store.
    let r = serve(dir.path(), "vol", None);
    let uri = r.uri("disk");
    let text = ok(
        &run(Command::new(&qemu_io).args(["-f", "raw", &uri]).args([
            "-c",
            "read -P 0xab 0 4k",
            "-c",
            "read -P 0xab 8k 504k",
            "-c",
            "read -P 0 512k 256k",
            "-c",
            "read -P 0xcd 1M 64k",
            "-c",
            "read -P 0 3M 4k",
            "-c",
            "read -P 0x22 3000k 8k",
            "-c",
            "read -P 0x33 5000 1000",
        ])),
        "qemu-io after restart",
    );
    assert!(!text.contains("Pattern verification failed"), "{text}");
}

#[test]
fn nbdinfo_sees_size_and_flags() {
    let Some(nbdinfo) = tool("nbdinfo", "libnbd-bin") else { return };
    let dir = tempfile::tempdir().unwrap();
    let r = serve(dir.path(), "vol", Some(16 << 20));
    let text = ok(&run(Command::new(&nbdinfo).arg("--json").arg(r.uri("disk"))), "nbdinfo");
    assert!(text.contains("\"export-size\": 16777216"), "{text}");
    for flag in [
        "can_flush\": true",
        "can_fua\": true",
        "can_trim\": true",
        "can_zero\": true",
        "can_multi_conn\": true",
    ] {
        assert!(text.contains(flag), "missing {flag}: {text}");
    }
}

#[test]
fn nbdcopy_image_in_and_back_out() {
    let Some(nbdcopy) = tool("nbdcopy", "libnbd-bin") else { return };
    let dir = tempfile::tempdir().unwrap();
    let size = 8usize << 20;
    let r = serve(&dir.path().join("store"), "vol", Some(size as u64));
    let uri = r.uri("disk");
    // Compressible text, random bytes and holes.
    let mut img = vec![0u8; size];
    let mut x = 0x1234_5678_9abc_def0u64;
    for (i, b) in img.iter_mut().enumerate() {
        *b = match (i >> 16) % 4 {
            0 => b"rangedb block store "[i % 20],
            1 => {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            }
            _ => 0,
        };
    }
    let input = dir.path().join("in.img");
    let output = dir.path().join("out.img");
    std::fs::write(&input, &img).unwrap();
    ok(&run(Command::new(&nbdcopy).arg(&input).arg(&uri)), "nbdcopy in");
    ok(&run(Command::new(&nbdcopy).arg(&uri).arg(&output)), "nbdcopy out");
    assert!(std::fs::read(&output).unwrap() == img, "image differs after a round trip");
    if let Some(cmp) = tool("cmp", "diffutils") {
        ok(&run(Command::new(cmp).arg(&input).arg(&output)), "cmp");
    }
}

fn fio(uri: &str, rw: &str, bs: &str, extra: &[&str]) -> Option<String> {
    let fio = tool("fio", "fio")?;
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
fn fio_random_and_sequential_writes_verify_crc32c() {
    let dir = tempfile::tempdir().unwrap();
    let r = serve(dir.path(), "vol", Some(64 << 20));
    let uri = r.uri("disk");
    let Some(rand) = fio(&uri, "randwrite", "4k", &["--randseed=42"]) else { return };
    assert!(!rand.contains("verify:"), "{rand}");
    let Some(seq) = fio(&uri, "write", "128k", &[]) else { return };
    assert!(!seq.contains("verify:"), "{seq}");
    assert_eq!(r.stats().error_replies, 0);
}

#[test]
fn qemu_img_bench_reads_and_writes() {
    let Some(qemu_img) = tool("qemu-img", "qemu-utils") else { return };
    let dir = tempfile::tempdir().unwrap();
    let r = serve(dir.path(), "vol", Some(64 << 20));
    let uri = r.uri("disk");
    for mode in [&["-w"][..], &[][..]] {
        let out = run(Command::new(&qemu_img)
            .args(["bench", "-f", "raw", "-c", "4000", "-d", "16", "-s", "4k", "-S", "8k"])
            .args(mode)
            .arg(&uri));
        assert!(ok(&out, "qemu-img bench").contains("Run completed in"));
    }
    assert_eq!(r.stats().error_replies, 0);
}

/// `nbdinfo --map` (base:allocation) sees written ranges as data and never-written, discarded and zeroed ranges
/// as holes, answered from the index.
#[test]
fn nbdinfo_map_shows_holes_from_the_index() {
    let Some(qemu_io) = tool("qemu-io", "qemu-utils") else { return };
    let Some(nbdinfo) = tool("nbdinfo", "libnbd-bin") else { return };
    let dir = tempfile::tempdir().unwrap();
    let r = serve(dir.path(), "vol", Some(16 << 20));
    let uri = r.uri("disk");
    let cmds =
        ["write -P 0x5a 1M 1M", "write -P 0x6b 4M 64k", "discard 1536k 256k", "write -z 4M 32k", "flush"];
    let mut cmd = Command::new(&qemu_io);
    cmd.args(["-f", "raw"]);
    for c in cmds {
        cmd.args(["-c", c]);
    }
    ok(&run(cmd.arg(&uri)), "qemu-io");
    let text = ok(&run(Command::new(&nbdinfo).arg("--map").arg(&uri)), "nbdinfo --map");
    // Lines: "offset length type description"; collect (offset, length, is_hole).
    let mut extents = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 3
            && let (Ok(off), Ok(len), Ok(ty)) =
                (f[0].parse::<u64>(), f[1].parse::<u64>(), f[2].parse::<u32>())
        {
            extents.push((off, len, ty & 1 == 1));
        }
    }
    let k = 1u64 << 10;
    let m = 1u64 << 20;
    let want = vec![
        (0, m, true),
        (m, 512 * k, false),
        (1536 * k, 256 * k, true),
        (1792 * k, 256 * k, false),
        (2 * m, 2 * m, true),
        (4 * m, 32 * k, true),
        (4 * m + 32 * k, 32 * k, false),
        (4 * m + 64 * k, 12 * m - 64 * k, true),
    ];
    // Merge neighbours with equal status (the hole at 4M+32k joins the one before it).
    let merge = |v: Vec<(u64, u64, bool)>| {
        let mut out: Vec<(u64, u64, bool)> = Vec::new();
        for (o, l, h) in v {
            match out.last_mut() {
                Some(last) if last.2 == h && last.0 + last.1 == o => last.1 += l,
                _ => out.push((o, l, h)),
            }
        }
        out
    };
    assert_eq!(merge(extents), merge(want), "nbdinfo --map said:\n{text}");
}
