//! `rangedb bench flexfile`: Table 2 and Fig. 11 of the FlexFile paper on the scratch disk.
//!
//! Write phase, building a file of `size_mib` MiB from 4 KiB blocks:
//! - random-insert: each block inserted at a random 4 KiB-aligned offset of the file so far. `flexfile` uses
//!   `FlexFile::insert`; `ext4-insert-range` uses `fallocate(FALLOC_FL_INSERT_RANGE)` (through
//!   `vfs::File::insert_range`) then writes the block; `ext4-rewrite` shifts the tail by rewriting it and is stopped
//!   after `rewrite_secs` seconds, as the paper stopped its REWRITE test.
//! - random-write: every block written once, in random order (`flexfile` vs `ext4-pwrite`).
//! - seq-write: blocks appended in order.
//!
//! Sync policy (the same for every system): no sync per operation, one sync at the end of each write phase, timed
//! separately (`final_sync_ns`); `durable_ops_per_sec` charges it to the build. Reported: ops/s of the writes (overall and
//! per sixteenth of the build, plotted), the write
//! amplification as bytes written to the underlying files per user byte (`file_wa_ratio`, FlexFile's own counters;
//! 1.0 for the plain files, whose metadata writes are invisible to the process) and as sectors written by the
//! device per user byte (`device_wa_ratio`, from /proc/diskstats; includes anything else writing to that device).
//! Read phase, once every system has built its file: sequential and random (each block once, shuffled) 4 KiB
//! reads, a first pass (`cold` with `--set cold=1`, which drops the machine's clean page cache, else `first`), then
//! warm passes alternating between the systems, the best of three reported (`warm`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flexfile::{FlexFile, Options};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::json;
use vfs::{Fs, OpenMode, OsFs};

use crate::measure::Latencies;
use crate::{Ctx, Experiment, Plot, Report, Result};

/// The `flexfile` experiment.
pub struct FlexFileBench;

const BLOCK: usize = 4096;

impl Experiment for FlexFileBench {
    fn name(&self) -> &'static str {
        "flexfile"
    }

    fn settings(&self) -> &'static [&'static str] {
        &[
            "at_size_ops",
            "at_size_secs",
            "cold",
            "insert_range_secs",
            "patterns",
            "peers",
            "prefault",
            "rewrite_secs",
            "size_mib",
        ]
    }

    fn about(&self) -> &'static str {
        "FlexFile Table 2 / Fig. 11: 4 KiB random insert, random write, sequential write building a file, then \
         sequential and random 4 KiB reads; FlexFile vs ext4 insert-range, rewrite and pwrite; --set size_mib=N \
         rewrite_secs=N insert_range_secs=N (0: none) at_size_ops=N at_size_secs=N cold=0|1 prefault=0|1 patterns=random-insert,random-write,seq-write peers=ext4-insert-range,ext4-rewrite,ext4-pwrite"
    }

    fn run(&self, ctx: &Ctx) -> Result<Report> {
        let mut report = Report::new(self.name(), ctx.quick);
        let size_mib: u64 = ctx.setting_min("size_mib", ctx.scale(256, 1024), 1)?;
        let rewrite_secs: u64 = ctx.setting("rewrite_secs", ctx.scale(5, 30))?;
        // 0: no budget. ext4 insert-range slows as the file grows, so stopping it early flatters it: its ops/s over
        // the part it finished is an upper bound on its ops/s over the whole build.
        let insert_range_secs: u64 = ctx.setting("insert_range_secs", 0)?;
        let all_patterns = ["random-insert", "random-write", "seq-write"];
        let patterns = ctx.list("patterns", &all_patterns, &all_patterns, false)?;
        let cold: u8 = ctx.setting("cold", 0)?;
        // See `prefault_page_cache`: 1 gives every build the same starting point on a virtual machine.
        let prefault: u8 = ctx.setting("prefault", 1)?;
        // The at-size phase (see `at_size_phase`): random inserts into a file already of `size_mib`, at most
        // `at_size_ops` of them and at most `at_size_secs` seconds per system; 0 ops skips the phase.
        let at_size_ops: u64 = ctx.setting("at_size_ops", ctx.scale(1000, 2000))?;
        let at_size_secs: u64 = ctx.setting("at_size_secs", 60)?;
        // `peers=` (empty) runs FlexFile alone, e.g. to check that inserts stay flat at 1 GiB without waiting
        // for ext4 insert-range, whose cost grows with the file.
        let all_peers = ["ext4-insert-range", "ext4-rewrite", "ext4-pwrite"];
        let wanted = ctx.list("peers", &all_peers, &all_peers, false)?;
        let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
        let root = ctx.scratch.join("flexfile-bench");
        let fs: Arc<dyn Fs> = Arc::new(OsFs::new());
        let _ = std::fs::remove_dir_all(&root);
        fs.create_dir_all(&root)?;
        let nblocks = size_mib * (1 << 20) / BLOCK as u64;
        let mut plot = Plot::new("Random 4 KiB inserts (Fig. 11a)", "MiB written", "ops per second");
        plot.log_y = true;
        for pattern in patterns.iter().map(String::as_str) {
            let ops = gen_offsets(pattern, nblocks, ctx.seed)?;
            report.workload(pattern, json!({ "size_mib": size_mib, "block": BLOCK, "ops": ops.len() }));
            // FlexFile.
            let dir = root.join(format!("flex-{pattern}"));
            if prefault != 0 {
                prefault_page_cache(&*fs, &root, size_mib)?;
            }
            let (series, path) = flex_write(&mut report, ctx, fs.clone(), &dir, pattern, &ops)?;
            if pattern == "random-insert" {
                plot = plot.series("flexfile", series);
            }
            // Every built file is read back after all systems are built, in alternating passes (see `read_phase`).
            let mut readers: Vec<(&str, Box<dyn BlockReader>)> =
                vec![("flexfile", Box::new(FlexReader::open(fs.clone(), &path)?))];
            let mut built = Vec::new();
            // The plain-file peers.
            let peers: &[&str] = if pattern == "random-insert" {
                &["ext4-insert-range", "ext4-rewrite"]
            } else {
                &["ext4-pwrite"]
            };
            for &peer in peers.iter().filter(|p| wanted.contains(p)) {
                let path = root.join(format!("{peer}-{pattern}"));
                let secs = match peer {
                    "ext4-rewrite" => Some(Duration::from_secs(rewrite_secs)),
                    "ext4-insert-range" if insert_range_secs > 0 => {
                        Some(Duration::from_secs(insert_range_secs))
                    }
                    _ => None,
                };
                if prefault != 0 {
                    prefault_page_cache(&*fs, &root, size_mib)?;
                }
                match plain_write(&mut report, ctx, fs.clone(), &path, pattern, peer, &ops, secs)? {
                    Some(series) => {
                        if pattern == "random-insert" {
                            plot = plot.series(peer, series);
                        }
                        // A peer stopped by its budget built only part of the file: nothing to read back.
                        if secs.is_none() {
                            readers.push((peer, Box::new(PlainReader::open(fs.clone(), &path)?)));
                        }
                    }
                    None => {
                        report.note(format!(
                            "{peer}: the scratch file system does not support insert-range; skipped"
                        ));
                    }
                }
                built.push(path);
            }
            read_phase(&mut report, pattern, nblocks, ctx.seed, cold != 0, &mut readers)?;
            drop(readers);
            if pattern == "random-insert" && at_size_ops > 0 {
                let budget = Duration::from_secs(at_size_secs);
                at_size_phase(
                    &mut report,
                    ctx,
                    fs.clone(),
                    &root,
                    &dir,
                    nblocks,
                    at_size_ops,
                    budget,
                    &wanted,
                )?;
            }
            let _ = std::fs::remove_dir_all(&dir);
            for path in built {
                let _ = std::fs::remove_file(&path);
            }
        }
        report.plot(plot);
        report.note("Sync policy, the same on every side: no sync per operation; one sync at the end of each write phase (FlexFile::sync: data file then log; sync_data for the plain files), timed as final_sync_ns. durable_ops_per_sec charges that sync to the build. ext4 insert-range itself writes back and drops the cached pages after the insert offset on every call (the kernel's requirement for shifting extents), so its page cache is not warm after the build.");
        report.note("Write amplification: file_wa_ratio counts bytes FlexFile writes to its data, log and tree files per user byte; device_wa_ratio counts sectors the scratch device wrote (shared machine: includes other writers).");
        let _ = std::fs::remove_dir_all(&root);
        Ok(report)
    }
}

/// The block index of each operation: for inserts, the position (in blocks) in the file so far.
fn gen_offsets(pattern: &str, n: u64, seed: u64) -> Result<Vec<u64>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    Ok(match pattern {
        "random-insert" => (0..n).map(|i| rng.random_range(0..=i)).collect(),
        "random-write" => {
            let mut v: Vec<u64> = (0..n).collect();
            v.shuffle(&mut rng);
            v
        }
        "seq-write" => (0..n).collect(),
        p => return Err(format!("unknown pattern {p}").into()),
    })
}

/// Fills `b` with block `i`'s contents (in place: the generator must not cost an allocation per operation, which
/// would be charged to every system alike but weigh most on the fastest).
fn fill_block(i: u64, b: &mut [u8]) {
    // `chunks_exact_mut`: with a known chunk length each copy is one store; `chunks_mut` made it a `memcpy` call
    // per 8 bytes, a third of FlexFile's measured insert time.
    for (j, x) in b.chunks_exact_mut(8).enumerate() {
        x.copy_from_slice(&(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ j as u64).to_le_bytes());
    }
}

/// Sectors written by the block device holding `path` (from /proc/diskstats), if it can be found.
fn device_sectors_written(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (((dev >> 8) & 0xfff) as u64, ((dev & 0xff) | ((dev >> 12) & 0xfff00)) as u64);
    let stats = std::fs::read_to_string("/proc/diskstats").ok()?;
    stats.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 9 && f[0].parse::<u64>().ok()? == major && f[1].parse::<u64>().ok()? == minor)
            .then(|| f[9].parse().ok())
            .flatten()
    })
}

/// Windows of the build: (MiB written at the end of the window, ops/s in the window).
struct Windows {
    every: u64,
    last: Instant,
    points: Vec<(f64, f64)>,
}

impl Windows {
    fn new(n: u64) -> Self {
        Windows { every: (n / 16).max(1), last: Instant::now(), points: Vec::new() }
    }

    fn tick(&mut self, i: u64) {
        if (i + 1).is_multiple_of(self.every) {
            let dt = self.last.elapsed().as_secs_f64();
            self.points
                .push(((i + 1) as f64 * BLOCK as f64 / (1 << 20) as f64, self.every as f64 / dt.max(1e-9)));
            self.last = Instant::now();
        }
    }
}

/// Writes and deletes a `size_mib` file without syncing it, so the build that follows writes into page-cache
/// memory the kernel has just released. On a virtual machine, memory the guest has not touched for a while costs
/// the host a fault per page on first write: on the development VM a 256 MiB build ran at 0.5 GB/s into such
/// memory and at 6.5 GB/s into recently freed memory, which made a build's ops/s swing by 3x between runs
/// depending on what ran before. Every system gets the same treatment before its build.
fn prefault_page_cache(fs: &dyn Fs, root: &Path, size_mib: u64) -> Result<()> {
    let path = root.join("prefault");
    let f = fs.open(&path, OpenMode::CreateTruncate)?;
    let chunk = vec![0x5au8; 4 << 20];
    for i in 0..size_mib.div_ceil(4) {
        f.write_all_at(&chunk, i * chunk.len() as u64)?;
    }
    drop(f);
    fs.remove_file(&path)?;
    Ok(())
}

fn flex_write(
    report: &mut Report,
    ctx: &Ctx,
    fs: Arc<dyn Fs>,
    dir: &Path,
    pattern: &str,
    ops: &[u64],
) -> Result<(Vec<(f64, f64)>, PathBuf)> {
    let _ = std::fs::remove_dir_all(dir);
    let mut f = FlexFile::create(fs, dir, Options::default())?;
    let dev0 = device_sectors_written(&ctx.scratch);
    let mut lat = Latencies::new();
    let mut win = Windows::new(ops.len() as u64);
    let bar = ctx.progress(ops.len() as u64, format!("flexfile {pattern}"));
    let mut data = vec![0u8; BLOCK];
    let start = Instant::now();
    for (i, &b) in ops.iter().enumerate() {
        fill_block(i as u64, &mut data);
        let t = Instant::now();
        if pattern == "random-insert" {
            f.insert(b * BLOCK as u64, &data)?;
        } else {
            f.write(b * BLOCK as u64, &data)?;
        }
        lat.record_duration(t.elapsed());
        win.tick(i as u64);
        if i.is_multiple_of(4096) {
            bar.set_position(i as u64);
        }
    }
    let elapsed = start.elapsed();
    let t = Instant::now();
    f.sync()?;
    let sync_ns = t.elapsed().as_nanos() as f64;
    bar.finish_and_clear();
    let user = (ops.len() * BLOCK) as f64;
    let st = f.stats();
    let mut m = vec![
        ("ops_per_sec", ops.len() as f64 / elapsed.as_secs_f64()),
        ("p50_ns", lat.p(0.5) as f64),
        ("p99_ns", lat.p(0.99) as f64),
        ("file_wa_ratio", st.write_amplification()),
        ("final_sync_ns", sync_ns),
        ("durable_ops_per_sec", ops.len() as f64 / (elapsed.as_secs_f64() + sync_ns / 1e9)),
        ("extents_count", st.extents as f64),
    ];
    if let (Some(a), Some(b)) = (dev0, device_sectors_written(&ctx.scratch)) {
        m.push(("device_wa_ratio", (b - a) as f64 * 512.0 / user));
    }
    report.row(pattern, "flexfile", m);
    f.close()?;
    Ok((win.points, dir.to_path_buf()))
}

#[allow(clippy::too_many_arguments)]
fn plain_write(
    report: &mut Report,
    ctx: &Ctx,
    fs: Arc<dyn Fs>,
    path: &Path,
    pattern: &str,
    peer: &str,
    ops: &[u64],
    budget: Option<Duration>,
) -> Result<Option<Vec<(f64, f64)>>> {
    let f = fs.open(path, OpenMode::CreateTruncate)?;
    let dev0 = device_sectors_written(&ctx.scratch);
    let mut lat = Latencies::new();
    let mut win = Windows::new(ops.len() as u64);
    let bar = ctx.progress(ops.len() as u64, format!("{peer} {pattern}"));
    let start = Instant::now();
    let mut size = 0u64;
    let mut done = 0u64;
    let mut tail = Vec::new();
    let mut data = vec![0u8; BLOCK];
    for (i, &b) in ops.iter().enumerate() {
        if budget.is_some_and(|d| start.elapsed() > d) {
            break;
        }
        fill_block(i as u64, &mut data);
        let off = b * BLOCK as u64;
        let t = Instant::now();
        if pattern == "random-insert" && off < size {
            if peer == "ext4-insert-range" {
                match f.insert_range(off, BLOCK as u64) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Unsupported || e.raw_os_error() == Some(95) => {
                        return Ok(None);
                    }
                    Err(e) => return Err(e.into()),
                }
            } else {
                tail.resize((size - off) as usize, 0);
                f.read_exact_at(&mut tail, off)?;
                f.write_all_at(&tail, off + BLOCK as u64)?;
            }
        }
        f.write_all_at(&data, off)?;
        size = if pattern == "random-insert" { size + BLOCK as u64 } else { size.max(off + BLOCK as u64) };
        lat.record_duration(t.elapsed());
        win.tick(i as u64);
        done += 1;
        if i.is_multiple_of(4096) {
            bar.set_position(i as u64);
        }
    }
    let elapsed = start.elapsed();
    let t = Instant::now();
    f.sync_data()?;
    let sync_ns = t.elapsed().as_nanos() as f64;
    bar.finish_and_clear();
    let user = (done as usize * BLOCK) as f64;
    let mut m = vec![
        ("ops_per_sec", done as f64 / elapsed.as_secs_f64()),
        ("p50_ns", lat.p(0.5) as f64),
        ("p99_ns", lat.p(0.99) as f64),
        ("file_wa_ratio", 1.0),
        ("final_sync_ns", sync_ns),
        ("durable_ops_per_sec", done as f64 / (elapsed.as_secs_f64() + sync_ns / 1e9)),
    ];
    if let (Some(a), Some(b)) = (dev0, device_sectors_written(&ctx.scratch)) {
        m.push(("device_wa_ratio", (b - a) as f64 * 512.0 / user.max(1.0)));
    }
    report.row(pattern, peer, m);
    if done < ops.len() as u64 {
        report.note(format!(
            "{peer} on {pattern}: stopped after {done} of {} operations (time budget), at {} MiB",
            ops.len(),
            size >> 20
        ));
    }
    Ok(Some(win.points))
}

/// Random 4 KiB inserts into a file that is already `n` blocks long, the same `k` offsets for every system, each
/// system stopped after `budget` (what it finished is reported, nothing is extrapolated). This is how the build's
/// target size is compared when ext4 insert-range cannot finish the whole build in reasonable time: a budget on the
/// build itself stops ext4 while its file is still small, where its inserts are cheapest.
///
/// FlexFile continues on the file its random-insert build produced. The plain files are first written sequentially
/// to `n` blocks and synced (untimed), so they hold few, large extents: ext4 shifts fewer extents per insert than on
/// a file built by random inserts, which favours ext4 in this comparison.
#[allow(clippy::too_many_arguments)]
fn at_size_phase(
    report: &mut Report,
    ctx: &Ctx,
    fs: Arc<dyn Fs>,
    root: &Path,
    flex_dir: &Path,
    n: u64,
    k: u64,
    budget: Duration,
    wanted: &[&str],
) -> Result<()> {
    let mut rng = SmallRng::seed_from_u64(ctx.seed ^ 0xa75e);
    let ops: Vec<u64> = (0..k).map(|i| rng.random_range(0..=n + i)).collect();
    let row = format!("random-insert-at-size ({} MiB)", (n * BLOCK as u64) >> 20);
    let mut data = vec![0u8; BLOCK];
    let rate_row = |report: &mut Report, system: &str, done: u64, elapsed: Duration, sync_ns: f64| {
        report.row(
            &row,
            system,
            [
                ("ops", done as f64),
                ("ops_per_sec", done as f64 / elapsed.as_secs_f64()),
                ("final_sync_ns", sync_ns),
                ("durable_ops_per_sec", done as f64 / (elapsed.as_secs_f64() + sync_ns / 1e9)),
            ],
        );
    };
    // FlexFile, reopened on its build.
    {
        let mut f = FlexFile::open(fs.clone(), flex_dir, Options::default())?;
        let start = Instant::now();
        let mut done = 0u64;
        for (i, &b) in ops.iter().enumerate() {
            if start.elapsed() > budget {
                break;
            }
            fill_block(n + i as u64, &mut data);
            f.insert(b * BLOCK as u64, &data)?;
            done += 1;
        }
        let elapsed = start.elapsed();
        let t = Instant::now();
        f.sync()?;
        let sync_ns = t.elapsed().as_nanos() as f64;
        rate_row(report, "flexfile", done, elapsed, sync_ns);
        let st = f.stats();
        report.note(format!(
            "{row}: flexfile file_wa_ratio over its whole life (build + at-size inserts) {:.3}",
            st.write_amplification()
        ));
        f.close()?;
    }
    for peer in ["ext4-insert-range", "ext4-rewrite"].into_iter().filter(|p| wanted.contains(p)) {
        let path = root.join(format!("{peer}-at-size"));
        let f = fs.open(&path, OpenMode::CreateTruncate)?;
        for i in 0..n {
            fill_block(i, &mut data);
            f.write_all_at(&data, i * BLOCK as u64)?;
        }
        f.sync_data()?;
        let mut size = n * BLOCK as u64;
        let mut tail = Vec::new();
        let start = Instant::now();
        let mut done = 0u64;
        let mut unsupported = false;
        for (i, &b) in ops.iter().enumerate() {
            if start.elapsed() > budget {
                break;
            }
            fill_block(n + i as u64, &mut data);
            let off = b * BLOCK as u64;
            if off < size {
                if peer == "ext4-insert-range" {
                    match f.insert_range(off, BLOCK as u64) {
                        Ok(()) => {}
                        Err(e)
                            if e.kind() == std::io::ErrorKind::Unsupported
                                || e.raw_os_error() == Some(95) =>
                        {
                            unsupported = true;
                            break;
                        }
                        Err(e) => return Err(e.into()),
                    }
                } else {
                    tail.resize((size - off) as usize, 0);
                    f.read_exact_at(&mut tail, off)?;
                    f.write_all_at(&tail, off + BLOCK as u64)?;
                }
            }
            f.write_all_at(&data, off)?;
            size += BLOCK as u64;
            done += 1;
        }
        let elapsed = start.elapsed();
        let t = Instant::now();
        f.sync_data()?;
        let sync_ns = t.elapsed().as_nanos() as f64;
        drop(f);
        let _ = std::fs::remove_file(&path);
        if unsupported {
            report.note(format!("{row}: {peer} unsupported by the scratch file system; skipped"));
            continue;
        }
        rate_row(report, peer, done, elapsed, sync_ns);
        if done < k {
            report.note(format!(
                "{row}: {peer} stopped by the {}s budget after {done} of {k} inserts",
                budget.as_secs()
            ));
        }
    }
    Ok(())
}

trait BlockReader {
    fn read_block(&mut self, off: u64, buf: &mut [u8]) -> Result<()>;
}

struct FlexReader {
    f: FlexFile,
}

impl FlexReader {
    fn open(fs: Arc<dyn Fs>, dir: &Path) -> Result<Self> {
        Ok(FlexReader { f: FlexFile::open(fs, dir, Options::default())? })
    }
}

impl BlockReader for FlexReader {
    fn read_block(&mut self, off: u64, buf: &mut [u8]) -> Result<()> {
        Ok(self.f.read(off, buf)?)
    }
}

struct PlainReader {
    f: Arc<dyn vfs::File>,
}

impl PlainReader {
    fn open(fs: Arc<dyn Fs>, path: &Path) -> Result<Self> {
        Ok(PlainReader { f: fs.open(path, OpenMode::ReadOnly)? })
    }
}

impl BlockReader for PlainReader {
    fn read_block(&mut self, off: u64, buf: &mut [u8]) -> Result<()> {
        Ok(self.f.read_exact_at(buf, off)?)
    }
}

fn drop_page_cache() -> bool {
    // Only clean pages are dropped; the files were synced at the end of their write phase.
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// Read passes over every built file: for sequential then random order, a first pass over each system in turn
/// (cold with `cold`), then `WARM_ROUNDS` rounds of one warm pass per system, alternating systems, each system's
/// best warm pass reported. Alternating and taking the best treats every system alike on a shared machine, where
/// another tenant's burst would otherwise land on whichever system happened to be measured at the time.
fn read_phase(
    report: &mut Report,
    pattern: &str,
    n: u64,
    seed: u64,
    cold: bool,
    readers: &mut [(&str, Box<dyn BlockReader>)],
) -> Result<()> {
    const WARM_ROUNDS: usize = 3;
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xfeed);
    let mut shuffled: Vec<u64> = (0..n).collect();
    shuffled.shuffle(&mut rng);
    let seq: Vec<u64> = (0..n).collect();
    let mut buf = vec![0u8; BLOCK];
    let mut pass = |r: &mut dyn BlockReader, order: &[u64]| -> Result<f64> {
        let start = Instant::now();
        for &b in order {
            r.read_block(b * BLOCK as u64, &mut buf)?;
        }
        Ok(n as f64 / start.elapsed().as_secs_f64())
    };
    for (kind, order) in [("seq", &seq), ("rand", &shuffled)] {
        let cold = cold && drop_page_cache();
        let first = if cold { "cold" } else { "first" };
        for (system, r) in readers.iter_mut() {
            let rate = pass(r.as_mut(), order)?;
            report.row(&format!("{kind}-read-{first} ({pattern} build)"), system, [("ops_per_sec", rate)]);
        }
        let mut best = vec![0f64; readers.len()];
        for _ in 0..WARM_ROUNDS {
            for (i, (_, r)) in readers.iter_mut().enumerate() {
                best[i] = best[i].max(pass(r.as_mut(), order)?);
            }
        }
        for ((system, _), rate) in readers.iter().zip(best) {
            report.row(&format!("{kind}-read-warm ({pattern} build)"), system, [("ops_per_sec", rate)]);
        }
    }
    Ok(())
}
