//! `rangedb bench nbd`: the NBD server end to end under fio, against qemu-nbd on the same disk.
//!
//! The block store's targets are stated against `qemu-nbd-raw` (4 KiB random-write IOPS ≥ 1.0×, random-read
//! ≥ 0.8×, sequential within 0.8×). This experiment isolates the server's share of that budget: our server
//! (`crates/nbd`) serving a raw file through `nbd::FileDevice` (`nbd-file`) against qemu-nbd serving a raw file
//! (`qemu-nbd-raw`) and a qcow2 image (`qemu-nbd-qcow2`), all in the scratch directory, all over a Unix socket (the
//! same transport for everyone, without TCP noise), all with the page cache (qemu-nbd `--cache=writeback`, our
//! file device's buffered writes). The block store later joins as one more system on the same workloads.
//!
//! Workloads, run in this order per system on a fresh image: `seq-write-128k` (which also fills the image, so reads
//! hit data and qcow2 has allocated clusters), `rand-read-4k`, `rand-write-4k`, `seq-read-128k`; fio's `nbd` engine,
//! one job, queue depth 16, time-based. Metrics: `ops_per_sec`, `bytes_per_sec`, `p50_ns`, `p99_ns` (completion
//! latency). Settings: `--set size_mb=N runtime_s=N iodepth=N` (fio), `workers=N` (our server's
//! `workers_per_connection`), `only_ours=true` (skip the peers, for tuning).
//!
//! Needs `fio` with the nbd engine and `qemu-nbd`/`qemu-img` (Debian: fio, qemu-utils); a missing tool drops the
//! systems that need it, with a note.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{Ctx, Experiment, Report, Result};

/// The `nbd` experiment.
pub struct Nbd;

pub(super) const WORKLOADS: [(&str, &str, &str); 4] = [
    ("seq-write-128k", "write", "128k"),
    ("rand-read-4k", "randread", "4k"),
    ("rand-write-4k", "randwrite", "4k"),
    ("seq-read-128k", "read", "128k"),
];

impl Experiment for Nbd {
    fn name(&self) -> &'static str {
        "nbd"
    }

    fn settings(&self) -> &'static [&'static str] {
        &["iodepth", "only_ours", "runtime_s", "size_mb", "workers"]
    }

    fn about(&self) -> &'static str {
        "NBD server end to end under fio (4k random, 128k sequential) vs qemu-nbd raw and qcow2; \
         --set size_mb=N runtime_s=N iodepth=N workers=N only_ours=true"
    }

    fn run(&self, ctx: &Ctx) -> Result<Report> {
        let mut report = Report::new(self.name(), ctx.quick);
        let size_mb: u64 = ctx.setting_min("size_mb", ctx.scale(256, 1024), 1)?;
        let runtime_s: u64 = ctx.setting_min("runtime_s", ctx.scale(4, 20), 1)?;
        let iodepth: u32 = ctx.setting_min("iodepth", 16, 1)?;
        if size_mb == 0 || runtime_s == 0 || iodepth == 0 {
            return Err("size_mb, runtime_s and iodepth must be positive".into());
        }
        let Some(fio) = which("fio") else {
            report.note("fio is not installed (Debian package fio): nothing measured");
            return Ok(report);
        };
        for (name, rw, bs) in WORKLOADS {
            report.workload(
                name,
                json!({"rw": rw, "bs": bs, "size_mb": size_mb, "runtime_s": runtime_s, "iodepth": iodepth,
                       "jobs": 1, "transport": "unix socket", "engine": "fio nbd (libnbd)"}),
            );
        }
        let dir = ctx.scratch.join("nbd");
        std::fs::create_dir_all(&dir)?;
        let result = run_all(ctx, &fio, &dir, size_mb, runtime_s, iodepth, &mut report);
        let _ = std::fs::remove_dir_all(&dir);
        result?;
        report.note(
            "nbd-file is our server (crates/nbd) over nbd::FileDevice; peers are qemu-nbd over the same kind of file",
        );
        Ok(report)
    }
}

#[allow(clippy::too_many_arguments)]
fn run_all(
    ctx: &Ctx,
    fio: &Path,
    dir: &Path,
    size_mb: u64,
    runtime_s: u64,
    iodepth: u32,
    report: &mut Report,
) -> Result<()> {
    let size = size_mb << 20;
    let workers: usize =
        ctx.setting_min("workers", nbd::ServerOptions::default().workers_per_connection, 1)?;
    let only_ours: bool = ctx.setting("only_ours", false)?;
    let bar = ctx.progress(3 * WORKLOADS.len() as u64, "nbd systems");
    // Ours.
    {
        let fs = vfs::OsFs::new();
        let img = dir.join("ours.raw");
        let dev = nbd::FileDevice::create(&fs, &img, size)?;
        let mut ex = nbd::Exports::new();
        ex.add(nbd::Export::new("", Arc::new(dev))?)?;
        let sock = dir.join("ours.sock");
        let opts = nbd::ServerOptions { workers_per_connection: workers, ..Default::default() };
        let running = nbd::Server::new(ex, opts)?.listen_unix(&sock)?;
        let uri = running.uri("");
        measure(fio, dir, &uri, "nbd-file", size_mb, runtime_s, iodepth, report, &bar)?;
        running.shutdown();
        std::fs::remove_file(&img)?;
    }
    // Peers.
    if only_ours {
        bar.finish_and_clear();
        return Ok(());
    }
    match (which("qemu-nbd"), which("qemu-img")) {
        (Some(qemu_nbd), Some(qemu_img)) => {
            for (system, format) in [("qemu-nbd-raw", "raw"), ("qemu-nbd-qcow2", "qcow2")] {
                let img = dir.join(format!("peer.{format}"));
                let out = Command::new(&qemu_img)
                    .args(["create", "-q", "-f", format])
                    .arg(&img)
                    .arg(size.to_string())
                    .output()?;
                if !out.status.success() {
                    return Err(format!("qemu-img create: {}", String::from_utf8_lossy(&out.stderr)).into());
                }
                let sock = dir.join(format!("{format}.sock"));
                let mut child = QemuNbd::start(&qemu_nbd, format, &img, &sock)?;
                let uri = format!("nbd+unix:///?socket={}", sock.display());
                let r = measure(fio, dir, &uri, system, size_mb, runtime_s, iodepth, report, &bar);
                child.stop();
                r?;
                std::fs::remove_file(&img)?;
            }
        }
        _ => {
            report.note(
                "qemu-nbd or qemu-img is not installed (Debian package qemu-utils): peers not measured",
            );
        }
    }
    bar.finish_and_clear();
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) fn measure(
    fio: &Path,
    dir: &Path,
    uri: &str,
    system: &str,
    size_mb: u64,
    runtime_s: u64,
    iodepth: u32,
    report: &mut Report,
    bar: &indicatif::ProgressBar,
) -> Result<()> {
    for (name, rw, bs) in WORKLOADS {
        // fio may leave state files in its working directory: give it a throwaway one.
        let cwd = dir.join("fio-cwd");
        std::fs::create_dir_all(&cwd)?;
        let out = Command::new(fio)
            .current_dir(&cwd)
            .arg(format!("--name={name}"))
            .args(["--ioengine=nbd", &format!("--uri={uri}"), &format!("--rw={rw}"), &format!("--bs={bs}")])
            .arg(format!("--size={size_mb}m"))
            .arg(format!("--iodepth={iodepth}"))
            .arg(format!("--runtime={runtime_s}"))
            .args(["--time_based", "--numjobs=1", "--randseed=42", "--output-format=json"])
            .stdin(Stdio::null())
            .output()?;
        let _ = std::fs::remove_dir_all(&cwd);
        if !out.status.success() {
            return Err(format!("fio {name} on {system}: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        // The nbd engine prints "fio: connected to NBD server" on stdout before the JSON document.
        let text = String::from_utf8_lossy(&out.stdout);
        let json_start = text.find('{').ok_or_else(|| format!("fio {name} on {system}: no JSON output"))?;
        let v: Value = serde_json::from_str(&text[json_start..])?;
        let side = &v["jobs"][0][if rw.contains("read") { "read" } else { "write" }];
        let num = |p: &Value| p.as_f64().unwrap_or(f64::NAN);
        let pct = |q: &str| num(&side["clat_ns"]["percentile"][q]);
        report.row(
            name,
            system,
            [
                ("ops_per_sec", num(&side["iops"])),
                ("bytes_per_sec", num(&side["bw_bytes"])),
                ("p50_ns", pct("50.000000")),
                ("p99_ns", pct("99.000000")),
            ],
        );
        bar.inc(1);
    }
    Ok(())
}

/// A qemu-nbd child process, killed when stopped or dropped.
pub(super) struct QemuNbd(Option<Child>);

impl QemuNbd {
    pub(super) fn start(bin: &Path, format: &str, img: &Path, sock: &Path) -> Result<Self> {
        let child = Command::new(bin)
            .args(["-f", format, "-t", "-e", "4", "--cache=writeback", "-k"])
            .arg(sock)
            .arg(img)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let me = QemuNbd(Some(child));
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(sock).is_err() {
            if Instant::now() > deadline {
                return Err("qemu-nbd did not start listening within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(me)
    }

    pub(super) fn stop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for QemuNbd {
    fn drop(&mut self) {
        self.stop();
    }
}

pub(super) fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_run_measures_every_system_on_every_workload() {
        if which("fio").is_none() || which("qemu-nbd").is_none() {
            eprintln!("SKIP: fio or qemu-nbd is not installed (Debian packages fio, qemu-utils)");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = Ctx::for_tests(dir.path().join("scratch"));
        ctx.set.insert("size_mb".into(), "16".into());
        ctx.set.insert("runtime_s".into(), "1".into());
        let r = Nbd.run(&ctx).unwrap();
        for (w, _, _) in WORKLOADS {
            for s in ["nbd-file", "qemu-nbd-raw", "qemu-nbd-qcow2"] {
                let iops = r.get(w, s, "ops_per_sec").unwrap();
                assert!(iops > 0.0, "{w} {s}: {iops}");
            }
        }
        assert!(!dir.path().join("scratch/nbd").exists(), "scratch cleaned up");
    }
}
