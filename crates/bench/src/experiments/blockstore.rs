//! `rangedb bench blockstore`: the block store (RASK index, journal, segment cache, CW-aligned LZ4 units, GC)
//! against a per-block index, a qcow2-style two-level table, a plain file and qemu-nbd.
//!
//! Parts (workload names are stable):
//! - `ebs-write-heavy`, `ebs-read-heavy` (store): the workloads crate's synthetic EBS trace (one volume, *not*
//!   pre-compacted: the store's segment cache does the §3.1 I/O compaction) replayed through a volume (`blockstore`)
//!   and through `pread`/`pwrite` on a plain sparse file (`plain-file`). Metrics: `ops_per_sec`; for the store
//!   also `write_amp` (journal + data-file bytes per client byte) and `index_memory_bytes`.
//! - `ebs-write-heavy/index`, `ebs-read-heavy/index`: the index operations the store actually made (its data-file
//!   batches' puts and deletes, in order; then a get per trace read) replayed into RASK (`rask`), a per-block
//!   `BTreeMap<u64, Location>` (`btreemap-per-block`) and a qcow2-style two-level table with 8-byte entries,
//!   512-entry L2 tables allocated on first touch (`qcow2-two-level`). Metrics: `memory_bytes` (live heap after the
//!   replay, counting allocator), `update_ops_per_sec`, `get_ops_per_sec`. Target: RASK ≤ 20 % of the per-block
//!   index's memory.
//! - `overwrite-gc`: random 4 KiB overwrites of a small volume many times over, with small data files so garbage
//!   collection runs continuously. Metrics: `ops_per_sec`, `write_amp`, `gc_copy_per_write` (blocks relocated
//!   per block written), `space_amp` (data-file bytes per live byte at the end).
//! - `local-rand-write-4k`, `local-rand-read-4k`, `local-seq-write-128k`, `local-seq-read-128k`: fio-like patterns
//!   in process against `blockstore` and `plain-file` (no NBD): `ops_per_sec`, `bytes_per_sec`.
//! - `seq-write-128k`, `rand-read-4k`, `rand-write-4k`, `seq-read-128k`: end to end over NBD with fio's nbd engine,
//!   the store served by our server (`blockstore`) against `qemu-nbd-raw` and `qemu-nbd-qcow2` (same method as
//!   `rangedb bench nbd`). Targets: random write ≥ 1.0× `qemu-nbd-raw`, random read ≥ 0.8×, sequential ≥ 0.8×.
//!
//! Settings: `--set ops=N` (trace operations), `volume_mb=N` (local patterns), `size_mb=N runtime_s=N iodepth=N unit_blocks=N`
//! (fio), `parts=store,index,gc,local,nbd` (subset).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use blockstore::format::{BatchOp, FOOTER_LEN, Footer};
use blockstore::{BLOCK_SIZE, Location, Options, Store, Volume};
use rask::{BlockRange, RangeValue, Rask};
use serde_json::json;
use vfs::{File, Fs, OpenMode, OsFs};

use super::nbd::{QemuNbd, WORKLOADS, measure, which};
use crate::measure::time_ops;
use crate::{Ctx, Experiment, Report, Result, alloc};

/// The `blockstore` experiment.
pub struct BlockStoreBench;

impl Experiment for BlockStoreBench {
    fn name(&self) -> &'static str {
        "blockstore"
    }

    fn settings(&self) -> &'static [&'static str] {
        &["iodepth", "ops", "parts", "runtime_s", "size_mb", "unit_blocks", "volume_mb"]
    }

    fn about(&self) -> &'static str {
        "block store vs per-block index, qcow2-style table, plain file and qemu-nbd: EBS traces, GC, fio; \
         --set ops=N volume_mb=N size_mb=N runtime_s=N iodepth=N unit_blocks=N parts=store,index,gc,local,nbd"
    }

    fn run(&self, ctx: &Ctx) -> Result<Report> {
        let mut report = Report::new(self.name(), ctx.quick);
        let all_parts = ["store", "index", "gc", "local", "nbd"];
        let parts = ctx.list("parts", &all_parts, &all_parts, false)?;
        let on = |p: &str| parts.iter().any(|x| x == p);
        let dir = ctx.scratch.join("blockstore");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let r = (|| -> Result<()> {
            let ops: u64 = ctx.setting_min("ops", ctx.scale(30_000, 300_000), 1)?;
            for (name, opts) in [
                ("ebs-write-heavy", workloads::traces::SyntheticOptions::write_heavy()),
                ("ebs-read-heavy", workloads::traces::SyntheticOptions::read_heavy()),
            ] {
                if on("store") || on("index") {
                    trace_part(ctx, &dir, name, opts, ops, on("store"), on("index"), &mut report)?;
                }
            }
            if on("gc") {
                gc_part(ctx, &dir, &mut report)?;
            }
            if on("local") {
                local_part(ctx, &dir, &mut report)?;
            }
            if on("nbd") {
                nbd_part(ctx, &dir, &mut report)?;
            }
            Ok(())
        })();
        let _ = std::fs::remove_dir_all(&dir);
        r?;
        Ok(report)
    }
}

/// Block bytes for a write: a header naming the write and a half-compressible body (about 2:1 under LZ4, like
/// typical disk contents).
fn fill(buf: &mut [u8], tag: u64) {
    let mut x = tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for (i, blk) in buf.chunks_mut(BLOCK_SIZE).enumerate() {
        blk[..8].copy_from_slice(&(tag + i as u64).to_le_bytes());
        let half = BLOCK_SIZE / 2;
        blk[8..half].fill((tag % 251) as u8);
        for b in &mut blk[half..] {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
    }
}

/// Keeps the first error of a timed loop (the loop body cannot return one).
fn keep<E: Into<Box<dyn std::error::Error + Send + Sync>>>(
    first: &mut Option<crate::Error>,
    r: std::result::Result<(), E>,
) {
    if let Err(e) = r
        && first.is_none()
    {
        *first = Some(e.into());
    }
}

fn open_volume(dir: &Path, name: &str, size: u64, opts: Options) -> Result<Arc<Volume>> {
    let store = Store::open(Arc::new(OsFs::new()), &dir.join(name), opts)?;
    Ok(store.create_volume("v", size)?)
}

fn plain_file(dir: &Path, name: &str, size: u64) -> Result<Arc<dyn File>> {
    let f = OsFs::new().open(&dir.join(name), OpenMode::CreateTruncate)?;
    f.set_len(size)?;
    Ok(f)
}

fn write_amp(v: &Volume) -> f64 {
    let s = v.stats();
    let client = (s.blocks_written * BLOCK_SIZE as u64) as f64;
    (s.journal_bytes_written + s.data_bytes_written) as f64 / client.max(1.0)
}

#[allow(clippy::too_many_arguments)]
fn trace_part(
    ctx: &Ctx,
    dir: &Path,
    name: &str,
    opts: workloads::traces::SyntheticOptions,
    ops: u64,
    store_part: bool,
    index_part: bool,
    report: &mut Report,
) -> Result<()> {
    let space: u64 = 1 << 18; // 1 GiB of 4 KiB blocks
    let opts = workloads::traces::SyntheticOptions {
        seed: ctx.seed,
        ops,
        volumes: 1,
        working_set_blocks: space,
        ..opts
    };
    let trace: Vec<workloads::traces::BlockOp> = workloads::traces::SyntheticTrace::new(opts.clone())?
        .filter(|op| op.last_block < space && op.blocks() <= 256)
        .collect();
    report.workload(
        name,
        json!({"ops": trace.len(), "write_ratio": opts.write_ratio, "avg_write_blocks": opts.avg_write_blocks,
               "long_cw_ratio": opts.long_cw_ratio, "volume_blocks": space, "compaction": "the store's segment cache"}),
    );
    let size = space * BLOCK_SIZE as u64;
    // Ours; GC off so every batch stays on disk for the index replay below.
    let vdir = dir.join(format!("{name}-store"));
    let v = open_volume(&vdir, "s", size, Options { gc_live_percent: 0, ..Options::default() })?;
    let mut buf = vec![0u8; 256 * BLOCK_SIZE];
    let mut err: Option<crate::Error> = None;
    let st = time_ops(trace.len() as u64, |i| {
        let op = &trace[i as usize];
        let b = &mut buf[..op.blocks() as usize * BLOCK_SIZE];
        let off = op.first_block * BLOCK_SIZE as u64;
        if op.is_write() {
            fill(b, i);
            keep(&mut err, v.write(b, off, false));
        } else {
            keep(&mut err, v.read(b, off));
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    v.flush_cache()?;
    v.flush()?;
    let info = v.info()?;
    if store_part {
        report.row(
            name,
            "blockstore",
            [
                ("ops_per_sec", st.ops_per_sec()),
                ("write_amp", write_amp(&v)),
                ("index_memory_bytes", info.index_memory as f64),
            ],
        );
        let f = plain_file(dir, &format!("{name}.raw"), size)?;
        let mut err: Option<crate::Error> = None;
        let st = time_ops(trace.len() as u64, |i| {
            let op = &trace[i as usize];
            let b = &mut buf[..op.blocks() as usize * BLOCK_SIZE];
            let off = op.first_block * BLOCK_SIZE as u64;
            if op.is_write() {
                fill(b, i);
                keep(&mut err, f.write_all_at(b, off));
            } else {
                keep(&mut err, f.read_exact_at(b, off));
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        report.row(name, "plain-file", [("ops_per_sec", st.ops_per_sec()), ("write_amp", 1.0)]);
        drop(f);
        std::fs::remove_file(dir.join(format!("{name}.raw")))?;
    }
    drop(v);
    if index_part {
        let updates = index_ops(&vdir.join("s").join("v"))?;
        let gets: Vec<BlockRange> = trace
            .iter()
            .filter(|op| !op.is_write())
            .filter_map(|op| BlockRange::new(op.first_block, op.last_block).ok())
            .collect();
        let iname = format!("{name}/index");
        report.workload(
            &iname,
            json!({"updates": updates.len(), "gets": gets.len(), "source": "the store's batches"}),
        );
        index_row(&iname, "rask", &updates, &gets, report, || {
            Rask::<Location>::new(rask::Options::default())
                .unwrap_or_else(|_| unreachable!("default options validate"))
        });
        index_row(&iname, "btreemap-per-block", &updates, &gets, report, PerBlock::default);
        index_row(&iname, "qcow2-two-level", &updates, &gets, report, TwoLevel::default);
    }
    std::fs::remove_dir_all(&vdir)?;
    Ok(())
}

/// The index operations in a volume's data files, in batch order.
fn index_ops(vol: &Path) -> Result<Vec<(BlockRange, Option<Location>)>> {
    let fs = OsFs::new();
    let mut ids: Vec<u32> =
        fs.list_dir(vol)?.iter().filter_map(|n| blockstore::datafile::parse_data_file_name(n)).collect();
    ids.sort_unstable();
    let mut out = Vec::new();
    for id in ids {
        let f = fs.open(&vol.join(blockstore::datafile::data_file_name(id)), OpenMode::ReadOnly)?;
        let len = f.len()?;
        let mut end = len;
        if len >= FOOTER_LEN as u64 {
            let mut b = [0u8; FOOTER_LEN];
            f.read_exact_at(&mut b, len - FOOTER_LEN as u64)?;
            if let Some(ft) = Footer::decode(&b, len) {
                end = ft.data_len;
            }
        }
        let mut pos = 0;
        while let Some((_, ops, next)) = blockstore::datafile::read_batch(f.as_ref(), pos, end)? {
            for op in ops {
                match op {
                    BatchOp::Put { first, blocks, unit_offset, stored_len, unit_blocks, block_in_unit } => {
                        let loc = Location { file: id, unit_offset, stored_len, unit_blocks, block_in_unit };
                        out.push((BlockRange::with_len(first, blocks)?, Some(loc)));
                    }
                    BatchOp::Delete { first, blocks } => {
                        out.push((BlockRange::with_len(first, blocks)?, None))
                    }
                }
            }
            pos = next;
        }
    }
    Ok(out)
}

/// An index of the store's locations, as the three systems implement it.
trait LocIndex {
    fn put(&mut self, r: BlockRange, loc: Option<Location>);
    /// Number of mapped blocks in `r` (touches every piece).
    fn get(&self, r: BlockRange) -> u64;
}

impl LocIndex for Rask<Location> {
    fn put(&mut self, r: BlockRange, loc: Option<Location>) {
        match loc {
            Some(l) => Rask::put(self, r, l),
            None => self.delete(r),
        }
    }
    fn get(&self, r: BlockRange) -> u64 {
        let mut n = 0;
        self.get_with(r, |p, _| n += p.len());
        n
    }
}

/// The per-block index: one `BTreeMap` entry per mapped block.
#[derive(Default)]
struct PerBlock(BTreeMap<u64, Location>);

impl LocIndex for PerBlock {
    fn put(&mut self, r: BlockRange, loc: Option<Location>) {
        for b in r.first()..=r.last() {
            match loc {
                Some(l) => {
                    self.0.insert(b, l.divide(r, BlockRange::block(b)));
                }
                None => {
                    self.0.remove(&b);
                }
            }
        }
    }
    fn get(&self, r: BlockRange) -> u64 {
        self.0.range(r.first()..=r.last()).count() as u64
    }
}

/// A qcow2-style two-level table: an L1 array of lazily allocated 512-entry L2 tables of 8-byte descriptors
/// (0: unallocated), as qcow2 maps guest clusters; here one entry per 4 KiB block.
#[derive(Default)]
struct TwoLevel(Vec<Option<Box<[u64; 512]>>>);

impl LocIndex for TwoLevel {
    fn put(&mut self, r: BlockRange, loc: Option<Location>) {
        for b in r.first()..=r.last() {
            let (l1, l2) = ((b / 512) as usize, (b % 512) as usize);
            if self.0.len() <= l1 {
                self.0.resize_with(l1 + 1, || None);
            }
            let d = loc.map_or(0, |l| {
                let l = l.divide(r, BlockRange::block(b));
                (u64::from(l.file) << 48) ^ (l.unit_offset << 8) ^ u64::from(l.block_in_unit) | 1
            });
            if d == 0 && self.0[l1].is_none() {
                continue;
            }
            self.0[l1].get_or_insert_with(|| Box::new([0; 512]))[l2] = d;
        }
    }
    fn get(&self, r: BlockRange) -> u64 {
        (r.first()..=r.last())
            .filter(|&b| {
                self.0
                    .get((b / 512) as usize)
                    .and_then(|t| t.as_ref())
                    .is_some_and(|t| t[(b % 512) as usize] != 0)
            })
            .count() as u64
    }
}

fn index_row<I: LocIndex>(
    workload: &str,
    system: &str,
    updates: &[(BlockRange, Option<Location>)],
    gets: &[BlockRange],
    report: &mut Report,
    make: impl FnOnce() -> I,
) {
    let before = alloc::live_bytes();
    let mut idx = make();
    let start = Instant::now();
    for &(r, loc) in updates {
        idx.put(r, loc);
    }
    let up = updates.len() as f64 / start.elapsed().as_secs_f64().max(1e-9);
    let memory = alloc::live_bytes().saturating_sub(before);
    let start = Instant::now();
    let mut sink = 0;
    for &r in gets {
        sink += idx.get(r);
    }
    let gp = gets.len() as f64 / start.elapsed().as_secs_f64().max(1e-9);
    std::hint::black_box(sink);
    report.row(
        workload,
        system,
        [("memory_bytes", memory as f64), ("update_ops_per_sec", up), ("get_ops_per_sec", gp)],
    );
}

fn rng_next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn gc_part(ctx: &Ctx, dir: &Path, report: &mut Report) -> Result<()> {
    let blocks: u64 = ctx.scale(8192, 65536);
    let writes = 4 * blocks;
    let opts = Options { data_file_bytes: 4 << 20, checkpoint_bytes: 16 << 20, ..Options::default() };
    report.workload(
        "overwrite-gc",
        json!({"volume_blocks": blocks, "writes": writes, "write_blocks": 1, "data_file_bytes": opts.data_file_bytes,
               "gc_live_percent": opts.gc_live_percent}),
    );
    let size = blocks * BLOCK_SIZE as u64;
    let v = open_volume(dir, "gc", size, opts)?;
    let mut buf = vec![0u8; BLOCK_SIZE];
    let mut x = ctx.seed | 1;
    let mut err: Option<crate::Error> = None;
    let st = time_ops(writes, |i| {
        let b = rng_next(&mut x) % blocks;
        fill(&mut buf, i);
        keep(&mut err, v.write(&buf, b * BLOCK_SIZE as u64, false));
    });
    if let Some(e) = err {
        return Err(e);
    }
    v.flush_cache()?;
    let s = v.stats();
    let info = v.info()?;
    let files: u64 = info.data_files.iter().map(|f| f.bytes).sum();
    let live: u64 = info.data_files.iter().map(|f| f.live_blocks).sum::<u64>() * BLOCK_SIZE as u64;
    report.row(
        "overwrite-gc",
        "blockstore",
        [
            ("ops_per_sec", st.ops_per_sec()),
            ("write_amp", write_amp(&v)),
            ("gc_copy_per_write", s.gc_blocks_relocated as f64 / s.blocks_written.max(1) as f64),
            ("space_amp", files as f64 / live.max(1) as f64),
        ],
    );
    report.note(format!(
        "overwrite-gc: {} GC rounds removed {} files ({} MiB), relocating {} blocks",
        s.gc_runs,
        s.gc_files_removed,
        s.gc_bytes_removed >> 20,
        s.gc_blocks_relocated
    ));
    drop(v);
    let f = plain_file(dir, "gc.raw", size)?;
    let mut x = ctx.seed | 1;
    let mut err: Option<crate::Error> = None;
    let st = time_ops(writes, |i| {
        let b = rng_next(&mut x) % blocks;
        fill(&mut buf, i);
        keep(&mut err, f.write_all_at(&buf, b * BLOCK_SIZE as u64));
    });
    if let Some(e) = err {
        return Err(e);
    }
    report.row(
        "overwrite-gc",
        "plain-file",
        [("ops_per_sec", st.ops_per_sec()), ("write_amp", 1.0), ("space_amp", 1.0)],
    );
    Ok(())
}

fn local_part(ctx: &Ctx, dir: &Path, report: &mut Report) -> Result<()> {
    let mb: u64 = ctx.setting_min("volume_mb", ctx.scale(64, 512), 1)?;
    let size = mb << 20;
    let patterns: [(&str, bool, bool, usize); 4] = [
        ("local-seq-write-128k", true, false, 128 << 10),
        ("local-rand-write-4k", true, true, 4 << 10),
        ("local-rand-read-4k", false, true, 4 << 10),
        ("local-seq-read-128k", false, false, 128 << 10),
    ];
    for (name, _, _, bs) in patterns {
        report.workload(name, json!({"volume_mb": mb, "bs": bs, "bytes": size}));
    }
    let v = open_volume(dir, "local", size, Options::default())?;
    let f = plain_file(dir, "local.raw", size)?;
    let mut buf = vec![0u8; 128 << 10];
    for (name, write, random, bs) in patterns {
        let n = size / bs as u64;
        for system in ["blockstore", "plain-file"] {
            let mut x = ctx.seed | 1;
            let mut err: Option<crate::Error> = None;
            let st = time_ops(n, |i| {
                let slot = if random { rng_next(&mut x) % n } else { i };
                let off = slot * bs as u64;
                let b = &mut buf[..bs];
                match (system, write) {
                    ("blockstore", true) => {
                        fill(b, i);
                        keep(&mut err, v.write(b, off, false));
                    }
                    ("blockstore", false) => keep(&mut err, v.read(b, off)),
                    (_, true) => {
                        fill(b, i);
                        keep(&mut err, f.write_all_at(b, off));
                    }
                    (_, false) => keep(&mut err, f.read_exact_at(b, off)),
                }
            });
            if let Some(e) = err {
                return Err(e);
            }
            if write && system == "blockstore" {
                v.flush()?;
            }
            report.row(
                name,
                system,
                [("ops_per_sec", st.ops_per_sec()), ("bytes_per_sec", st.ops_per_sec() * bs as f64)],
            );
        }
    }
    Ok(())
}

fn nbd_part(ctx: &Ctx, dir: &Path, report: &mut Report) -> Result<()> {
    let size_mb: u64 = ctx.setting_min("size_mb", ctx.scale(128, 1024), 1)?;
    let runtime_s: u64 = ctx.setting_min("runtime_s", ctx.scale(3, 20), 1)?;
    let iodepth: u32 = ctx.setting_min("iodepth", 16, 1)?;
    let unit_blocks: u32 = ctx.setting_min("unit_blocks", Options::default().max_unit_blocks, 1)?;
    let Some(fio) = which("fio") else {
        report.note("fio is not installed (Debian package fio): NBD part not measured");
        return Ok(());
    };
    for (name, rw, bs) in WORKLOADS {
        report.workload(
            name,
            json!({"rw": rw, "bs": bs, "size_mb": size_mb, "runtime_s": runtime_s, "iodepth": iodepth,
                   "jobs": 1, "transport": "unix socket", "engine": "fio nbd (libnbd)",
                   "blockstore_max_unit_blocks": unit_blocks}),
        );
    }
    let bar = ctx.progress(3 * WORKLOADS.len() as u64, "blockstore over nbd");
    {
        let opts = Options { max_unit_blocks: unit_blocks, ..Options::default() };
        let v = open_volume(dir, "nbd", size_mb << 20, opts)?;
        let mut ex = nbd::Exports::new();
        ex.add(nbd::Export::new("", v)?)?;
        let sock = dir.join("bs.sock");
        let running = nbd::Server::new(ex, nbd::ServerOptions::default())?.listen_unix(&sock)?;
        let uri = running.uri("");
        let r = measure(&fio, dir, &uri, "blockstore", size_mb, runtime_s, iodepth, report, &bar);
        running.shutdown();
        r?;
    }
    match (which("qemu-nbd"), which("qemu-img")) {
        (Some(qemu_nbd), Some(qemu_img)) => {
            for (system, format) in [("qemu-nbd-raw", "raw"), ("qemu-nbd-qcow2", "qcow2")] {
                let img = dir.join(format!("peer.{format}"));
                let out = std::process::Command::new(&qemu_img)
                    .args(["create", "-q", "-f", format])
                    .arg(&img)
                    .arg((size_mb << 20).to_string())
                    .output()?;
                if !out.status.success() {
                    return Err(format!("qemu-img create: {}", String::from_utf8_lossy(&out.stderr)).into());
                }
                let sock = dir.join(format!("{format}.sock"));
                let mut child = QemuNbd::start(&qemu_nbd, format, &img, &sock)?;
                let uri = format!("nbd+unix:///?socket={}", sock.display());
                let r = measure(&fio, dir, &uri, system, size_mb, runtime_s, iodepth, report, &bar);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_peers_agree_with_rask_on_mapped_blocks() {
        let loc = Location { file: 1, unit_offset: 40, stored_len: 10, unit_blocks: 8, block_in_unit: 0 };
        let ops = [
            (BlockRange::new(0, 7).unwrap(), Some(loc)),
            (BlockRange::new(3, 4).unwrap(), None),
            (BlockRange::new(600, 1100).unwrap(), Some(Location { unit_blocks: 501, ..loc })),
        ];
        let mut a = Rask::<Location>::new(rask::Options::default()).unwrap();
        let mut b = PerBlock::default();
        let mut c = TwoLevel::default();
        for &(r, l) in &ops {
            LocIndex::put(&mut a, r, l);
            b.put(r, l);
            c.put(r, l);
        }
        for r in [BlockRange::new(0, 2000).unwrap(), BlockRange::new(2, 5).unwrap()] {
            assert_eq!(LocIndex::get(&a, r), b.get(r));
            assert_eq!(b.get(r), c.get(r));
        }
    }
}
