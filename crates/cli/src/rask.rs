//! `rangedb rask replay`: replays block I/O traces through RASK, one index per volume, and reports throughput,
//! latency and memory per volume and in total. Follows the `rask-replay` spec: writes become
//! `put([first, last], (write number, 0))` with writes numbered from 0 per volume, reads become `get`; `--dump`
//! writes the final mapping in the per-block model's format; malformed lines are counted and reported (the first
//! few with their line numbers), or with `--strict` end the replay with an error.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use bench::measure::Latencies;
use rask::{BlockRange, Options, Rask, WriteRef};
use workloads::traces::{
    BlockOp, DEFAULT_BLOCK_SIZE, TraceError, TraceFormat, TraceOptions, TraceSource, TryCompacted,
};

/// Arguments of `rangedb rask`.
#[derive(Debug, clap::Args)]
pub struct RaskArgs {
    #[command(subcommand)]
    command: RaskCommand,
}

#[derive(Debug, clap::Subcommand)]
enum RaskCommand {
    /// Replay block traces through RASK (one index per volume); print throughput, latency and memory.
    Replay(ReplayArgs),
}

#[derive(Debug, clap::Args)]
struct ReplayArgs {
    /// Trace format: alibaba, tencent, msr, or synthetic (the seeded generator, described by the flags below).
    #[arg(long)]
    format: String,
    /// Only this volume (device id / volume id / `hostname,disk` as the format names it).
    #[arg(long)]
    volume: Option<String>,
    /// Apply I/O compaction (§3.1) with this window in blocks before replaying (128 is the paper's).
    #[arg(long)]
    compact_io: Option<u64>,
    /// Block size for converting byte offsets and lengths to blocks.
    #[arg(long, default_value_t = DEFAULT_BLOCK_SIZE)]
    block_size: u64,
    /// Write each volume's final mapping to FILE: `volume first_block last_block write_number offset`.
    #[arg(long)]
    dump: Option<PathBuf>,
    /// Stop at the first malformed line with an error instead of counting it.
    #[arg(long)]
    strict: bool,
    /// RASK leaf capacity.
    #[arg(long, default_value_t = Options::default().leaf_capacity)]
    leaf_capacity: usize,
    #[command(flatten)]
    synthetic: crate::trace_cmd::SyntheticArgs,
    /// Trace files (plain or gzip); none for `--format synthetic`.
    traces: Vec<PathBuf>,
}

/// Runs `rangedb rask`.
pub fn run(args: RaskArgs) -> Result<ExitCode, bench::Error> {
    crate::signals::die_on_broken_pipe();
    match args.command {
        RaskCommand::Replay(a) => replay(a),
    }
}

/// One volume's index and measurements.
struct Volume {
    name: String,
    /// (source number, volume id within that source) of its first appearance: the dump lists volumes in this
    /// order, which is the per-block model's (volume ids in order of first appearance in the parsed trace).
    order: (usize, u32),
    index: Rask<WriteRef>,
    writes: u64,
    reads: u64,
    pieces: u64,
    lat: Latencies,
    nanos: u128,
}

/// Maps the volumes of the current source (dense ids per file) to replay volumes (by name, across files).
struct Replay {
    opts: Options,
    vols: Vec<Volume>,
    by_name: HashMap<String, usize>,
    /// Number of the source being replayed.
    source: usize,
}

impl Replay {
    fn volume(&mut self, name: &str, local: u32) -> Result<usize, bench::Error> {
        if let Some(&i) = self.by_name.get(name) {
            return Ok(i);
        }
        let index = Rask::new(self.opts.clone())?;
        self.vols.push(Volume {
            name: name.to_string(),
            order: (self.source, local),
            index,
            writes: 0,
            reads: 0,
            pieces: 0,
            lat: Latencies::new(),
            nanos: 0,
        });
        self.by_name.insert(name.to_string(), self.vols.len() - 1);
        Ok(self.vols.len() - 1)
    }

    fn apply(&mut self, v: usize, op: &BlockOp) -> Result<(), bench::Error> {
        let range = BlockRange::new(op.first_block, op.last_block)?;
        let vol = &mut self.vols[v];
        let t = Instant::now();
        if op.is_write() {
            vol.index.put(range, WriteRef::new(vol.writes, 0));
            vol.writes += 1;
        } else {
            let mut n = 0u64;
            vol.index.get_with(range, |_, _| n += 1);
            vol.pieces += n;
            vol.reads += 1;
        }
        let d = t.elapsed();
        vol.nanos += d.as_nanos();
        vol.lat.record_duration(d);
        Ok(())
    }
}

fn replay(a: ReplayArgs) -> Result<ExitCode, bench::Error> {
    let opts = Options { leaf_capacity: a.leaf_capacity, ..Options::with_capacity(a.leaf_capacity) };
    opts.validate()?;
    // Created before the replay, so a dump path that cannot be written fails at once, not after a long replay.
    let dump_file = match &a.dump {
        Some(path) => Some(File::create(path).map_err(|e| format!("--dump {}: {e}", path.display()))?),
        None => None,
    };
    let mut r = Replay { opts, vols: Vec::new(), by_name: HashMap::new(), source: 0 };
    let mut malformed_total = 0u64;
    if a.format == "synthetic" {
        if !a.traces.is_empty() {
            return Err("--format synthetic generates its trace: pass no trace files".into());
        }
        let syn = a.synthetic.options();
        let source = TraceSource::synthetic(syn, a.volume.as_deref())?;
        replay_source(&mut r, source, a.compact_io)?;
    } else {
        let format = TraceFormat::from_name(&a.format).ok_or_else(|| {
            format!("unknown trace format `{}` (alibaba, tencent, msr, synthetic)", a.format)
        })?;
        if a.traces.is_empty() {
            return Err("no trace files given".into());
        }
        for (i, path) in a.traces.iter().enumerate() {
            r.source = i;
            let mut topts = TraceOptions::new(format);
            topts.block_size = a.block_size;
            topts.strict = a.strict;
            topts.volume = a.volume.clone();
            let source = TraceSource::open(path, topts).map_err(|e| format!("{}: {e}", path.display()))?;
            let read = replay_source(&mut r, source, a.compact_io)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if let Some((malformed, first)) = read {
                malformed_total += malformed;
                if malformed > 0 {
                    println!("{}: {malformed} malformed lines skipped", path.display());
                    for (line, e) in first {
                        println!("  line {line}: {e}");
                    }
                }
            }
        }
    }
    report(&r, malformed_total);
    if let Some(v) = a.volume.as_deref().filter(|_| r.vols.is_empty()) {
        // A mistyped id would otherwise look like a trace with nothing in it.
        return Err(format!("--volume {v}: no operation of that volume in the trace").into());
    }
    if let (Some(path), Some(file)) = (&a.dump, dump_file) {
        let mut out = BufWriter::new(file);
        let written = dump(&r, &mut out).and_then(|()| out.flush());
        written.map_err(|e| format!("--dump {}: {e}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Malformed-line count and the first few (line, message) of a file source.
type Malformed = Option<(u64, Vec<(u64, String)>)>;

fn replay_source(
    r: &mut Replay,
    source: TraceSource,
    compact: Option<u64>,
) -> Result<Malformed, bench::Error> {
    // Local (per-source) volume ids to replay volumes.
    let mut local: Vec<Option<usize>> = Vec::new();
    let mut step =
        |r: &mut Replay, src: &TraceSource, item: Result<BlockOp, TraceError>| -> Result<(), bench::Error> {
            let op = item?;
            let id = op.volume as usize;
            if local.len() <= id {
                local.resize(id + 1, None);
            }
            let v = match local[id] {
                Some(v) => v,
                None => {
                    let name = src.volumes().name(op.volume);
                    let name = if name.is_empty() { op.volume.to_string() } else { name.to_string() };
                    let v = r.volume(&name, op.volume)?;
                    local[id] = Some(v);
                    v
                }
            };
            r.apply(v, &op)
        };
    let stats_of = |src: &TraceSource| -> Malformed {
        src.read_stats()
            .map(|s| (s.malformed, s.first_malformed.iter().map(|(l, e)| (*l, e.to_string())).collect()))
    };
    match compact {
        Some(window) if window > 0 => {
            let mut it = TryCompacted::new(source, window);
            while let Some(item) = it.next() {
                step(r, it.inner(), item)?;
            }
            Ok(stats_of(it.inner()))
        }
        _ => {
            let mut source = source;
            while let Some(item) = source.next() {
                step(r, &source, item)?;
            }
            Ok(stats_of(&source))
        }
    }
}

fn report(r: &Replay, malformed: u64) {
    println!(
        "{:<16} {:>10} {:>10} {:>12} {:>9} {:>9} {:>9} {:>9} {:>12} {:>9} {:>7}",
        "volume",
        "writes",
        "reads",
        "ops/s",
        "p50_ns",
        "p99_ns",
        "p999_ns",
        "p9999_ns",
        "memory_B",
        "entries",
        "leaves"
    );
    let mut all = Latencies::new();
    let (mut w, mut rd, mut nanos, mut mem, mut entries, mut leaves) =
        (0u64, 0u64, 0u128, 0usize, 0usize, 0usize);
    for v in &r.vols {
        let ops = v.writes + v.reads;
        let rate = if v.nanos > 0 { ops as f64 / (v.nanos as f64 / 1e9) } else { 0.0 };
        let m = v.index.memory_usage();
        println!(
            "{:<16} {:>10} {:>10} {:>12.0} {:>9} {:>9} {:>9} {:>9} {:>12} {:>9} {:>7}",
            v.name,
            v.writes,
            v.reads,
            rate,
            v.lat.p(0.5),
            v.lat.p(0.99),
            v.lat.p(0.999),
            v.lat.p(0.9999),
            m,
            v.index.entry_count(),
            v.index.leaf_count()
        );
        all.merge(&v.lat);
        w += v.writes;
        rd += v.reads;
        nanos += v.nanos;
        mem += m;
        entries += v.index.entry_count();
        leaves += v.index.leaf_count();
    }
    let rate = if nanos > 0 { (w + rd) as f64 / (nanos as f64 / 1e9) } else { 0.0 };
    println!(
        "{:<16} {:>10} {:>10} {:>12.0} {:>9} {:>9} {:>9} {:>9} {:>12} {:>9} {:>7}",
        "total",
        w,
        rd,
        rate,
        all.p(0.5),
        all.p(0.99),
        all.p(0.999),
        all.p(0.9999),
        mem,
        entries,
        leaves
    );
    println!("malformed lines: {malformed}");
}

/// The dump: per volume (in order of first appearance) the mapping in block order, consecutive blocks of one
/// write at consecutive offsets on one line.
fn dump(r: &Replay, out: &mut impl Write) -> std::io::Result<()> {
    let mut vols: Vec<&Volume> = r.vols.iter().collect();
    vols.sort_by_key(|v| v.order);
    for v in vols {
        let mut run: Option<(u64, u64, WriteRef)> = None;
        for (piece, val) in v.index.iter() {
            if let Some((first, last, v0)) = run {
                if piece.first() == last + 1
                    && val.write == v0.write
                    && val.offset == v0.offset + (piece.first() - first)
                {
                    run = Some((first, piece.last(), v0));
                    continue;
                }
                writeln!(out, "{} {first} {last} {} {}", v.name, v0.write, v0.offset)?;
            }
            run = Some((piece.first(), piece.last(), val));
        }
        if let Some((first, last, v0)) = run {
            writeln!(out, "{} {first} {last} {} {}", v.name, v0.write, v0.offset)?;
        }
    }
    Ok(())
}
