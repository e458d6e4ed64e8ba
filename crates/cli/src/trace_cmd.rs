//! `rangedb trace`: generate synthetic EBS traces and measure traces the way the RASK paper does (§2–3).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use workloads::traces::{
    AnalysisOptions, Analyzer, DEFAULT_BLOCK_SIZE, DEFAULT_CW_WINDOW_WRITES, DEFAULT_WINDOW_BLOCKS,
    IoCompactor, SyntheticOptions, SyntheticTrace, TraceError, TraceFormat, TraceOptions, TraceReader,
    TraceStats, write_trace,
};

/// Arguments of `rangedb trace`.
#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(Debug, clap::Subcommand)]
enum TraceCommand {
    /// Write a seeded synthetic EBS trace in a public format (defaults: the RASK paper's statistics).
    Synth(SynthArgs),
    /// Measure traces: write length, long-CW ratio, read start within CWs, and the effect of I/O compaction.
    Stats(StatsArgs),
}

#[derive(Debug, clap::Args)]
struct SynthArgs {
    /// Output file (`-` for standard output).
    #[arg(long, short, default_value = "-")]
    out: PathBuf,
    /// Format to write: alibaba, tencent or msr.
    #[arg(long, default_value = "alibaba")]
    format: String,
    /// Block size used to turn blocks into byte offsets.
    #[arg(long, default_value_t = DEFAULT_BLOCK_SIZE)]
    block_size: u64,
    #[command(flatten)]
    synthetic: SyntheticArgs,
}

/// The synthetic EBS trace generator's parameters as flags (defaults: the RASK paper's statistics); shared by
/// `trace synth` and `rask replay --format synthetic`.
#[derive(Debug, Clone, clap::Args)]
pub struct SyntheticArgs {
    /// Operations to generate.
    #[arg(long, default_value_t = 1_000_000)]
    pub ops: u64,
    /// Volumes (virtual disks).
    #[arg(long, default_value_t = 4)]
    pub volumes: u32,
    /// Fraction of writes (0.9 write-heavy, 0.04 read-heavy).
    #[arg(long, default_value_t = 0.9)]
    pub write_ratio: f64,
    /// Mean write length in blocks.
    #[arg(long, default_value_t = 3.63)]
    pub avg_write_blocks: f64,
    /// Fraction of writes in long consecutive writes.
    #[arg(long, default_value_t = 0.73)]
    pub long_cw_ratio: f64,
    /// Fraction of reads starting at their consecutive write's first block.
    #[arg(long, default_value_t = 0.86)]
    pub read_at_cw_start: f64,
    /// Blocks per volume that writes land in.
    #[arg(long, default_value_t = 1 << 20)]
    pub working_set_blocks: u64,
    /// Fraction of single writes that rewrite an earlier single write in place (0.8 reproduces the paper's
    /// lightweight-GC effectiveness).
    #[arg(long, default_value_t = 0.0)]
    pub rewrite_fraction: f64,
    /// Seed of the trace.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

impl SyntheticArgs {
    /// The generator options these flags describe.
    pub fn options(&self) -> SyntheticOptions {
        SyntheticOptions {
            seed: self.seed,
            ops: self.ops,
            volumes: self.volumes,
            write_ratio: self.write_ratio,
            avg_write_blocks: self.avg_write_blocks,
            long_cw_ratio: self.long_cw_ratio,
            read_at_cw_start: self.read_at_cw_start,
            read_near_cw_start: self.read_at_cw_start.max(SyntheticOptions::default().read_near_cw_start),
            working_set_blocks: self.working_set_blocks,
            rewrite_fraction: self.rewrite_fraction,
            ..SyntheticOptions::default()
        }
    }
}

#[derive(Debug, clap::Args)]
struct StatsArgs {
    /// Trace format: alibaba, tencent, msr, or auto (guess from the first line that parses).
    #[arg(long, default_value = "auto")]
    format: String,
    /// Block size of the byte-to-block conversion.
    #[arg(long, default_value_t = DEFAULT_BLOCK_SIZE)]
    block_size: u64,
    /// I/O compaction window in blocks for the "after compaction" figures (0 disables).
    #[arg(long, default_value_t = DEFAULT_WINDOW_BLOCKS)]
    compact_io: u64,
    /// Observation window, in write requests, for consecutive writes.
    #[arg(long, default_value_t = DEFAULT_CW_WINDOW_WRITES)]
    cw_window: usize,
    /// Only this volume.
    #[arg(long)]
    volume: Option<String>,
    /// Stop at the first malformed line instead of counting and skipping it.
    #[arg(long)]
    strict: bool,
    /// Trace files (plain or gzip).
    #[arg(required = true)]
    traces: Vec<PathBuf>,
}

/// Runs `rangedb trace`.
pub fn run(args: TraceArgs) -> Result<ExitCode, bench::Error> {
    crate::signals::die_on_broken_pipe();
    match args.command {
        TraceCommand::Synth(a) => synth(a),
        TraceCommand::Stats(a) => stats(a),
    }
}

fn parse_format(name: &str) -> Result<TraceFormat, bench::Error> {
    TraceFormat::from_name(name)
        .ok_or_else(|| format!("unknown trace format `{name}` (alibaba, tencent, msr)").into())
}

fn synth(a: SynthArgs) -> Result<ExitCode, bench::Error> {
    let format = parse_format(&a.format)?;
    let opts = a.synthetic.options();
    let names = opts.volume_names();
    let trace = SyntheticTrace::new(opts)?;
    let mut out: Box<dyn Write> = if a.out.as_os_str() == "-" {
        Box::new(BufWriter::new(std::io::stdout().lock()))
    } else {
        let file = File::create(&a.out).map_err(|e| format!("--out {}: {e}", a.out.display()))?;
        Box::new(BufWriter::new(file))
    };
    // The writer's I/O errors say "reading the trace"; here they are about writing the output.
    let out_err = |e: std::io::Error| -> bench::Error { format!("--out {}: {e}", a.out.display()).into() };
    let n = match write_trace(&mut out, format, a.block_size, &names, trace) {
        Err(TraceError::Io(e)) => return Err(out_err(e)),
        r => r?,
    };
    out.flush().map_err(out_err)?;
    if a.out.as_os_str() != "-" {
        eprintln!("wrote {n} operations to {}", a.out.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Guesses the format from the first line of `path` that some format parses.
fn sniff(path: &Path, block_size: u64) -> Result<TraceFormat, bench::Error> {
    for format in TraceFormat::ALL {
        let mut opts = TraceOptions::new(format);
        opts.block_size = block_size;
        let mut reader = TraceReader::open(path, opts)?;
        // A format is right when the first parsed op comes before any malformed line.
        if let Some(Ok(_)) = reader.next()
            && reader.stats().malformed == 0
        {
            return Ok(format);
        }
    }
    Err(format!("{}: no format parses its first line; pass --format", path.display()).into())
}

fn print_stats(label: &str, s: &TraceStats) {
    println!(
        "  {label:<18} writes {:>10}  reads {:>10}  avg write {:>7.2} blocks  long-CW ratio {:>5.1} %",
        s.writes,
        s.reads,
        s.avg_write_blocks(),
        100.0 * s.long_cw_ratio()
    );
}

fn stats(a: StatsArgs) -> Result<ExitCode, bench::Error> {
    let mut failed = false;
    for path in &a.traces {
        if !path.exists() {
            return Err(format!("{}: no such file or directory", path.display()).into());
        }
        let format = if a.format == "auto" { sniff(path, a.block_size)? } else { parse_format(&a.format)? };
        let mut opts = TraceOptions::new(format);
        opts.block_size = a.block_size;
        opts.strict = a.strict;
        opts.volume = a.volume.clone();
        let mut reader = TraceReader::open(path, opts)?;
        let analysis = AnalysisOptions { cw_window_writes: a.cw_window };
        let mut before = Analyzer::new(&analysis);
        let mut after = Analyzer::new(&analysis);
        let mut compactor = IoCompactor::new(a.compact_io);
        let mut error: Option<TraceError> = None;
        for item in reader.by_ref() {
            match item {
                Ok(op) => {
                    before.push(op);
                    compactor.push(op);
                    drain(&mut compactor, &mut after);
                }
                Err(e) => error = Some(e),
            }
        }
        compactor.finish();
        drain(&mut compactor, &mut after);
        let (volumes, read) = reader.into_parts();
        let b = before.finish();
        let c = after.finish();
        println!(
            "{} ({}, {} volumes{})",
            path.display(),
            format.name(),
            volumes.len(),
            if read.gzip { ", gzip" } else { "" }
        );
        println!(
            "  lines {}  operations {}  blank {}  filtered {}  malformed {}",
            read.lines, read.ops, read.blank, read.filtered, read.malformed
        );
        for (line, e) in &read.first_malformed {
            println!("    line {line}: {e}");
        }
        print_stats("as traced", &b);
        if a.compact_io > 0 {
            print_stats(&format!("compacted ({})", a.compact_io), &c);
            if b.writes > 0 {
                println!(
                    "  I/O compaction removes {:.1} % of the writes",
                    100.0 * (1.0 - c.writes as f64 / b.writes as f64)
                );
            }
        }
        println!(
            "  reads at CW start {:.1} %, within 4 blocks {:.1} %, 10+ blocks in {:.1} % ({} of {} reads associated)",
            100.0 * b.read_at_cw_start_ratio(),
            100.0 * b.read_within_4_ratio(),
            100.0 * b.read_beyond_10_ratio(),
            b.reads_associated,
            b.reads
        );
        if let Some(e) = error {
            eprintln!("rangedb: {}: {e}", path.display());
            failed = true;
        }
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn drain(compactor: &mut IoCompactor, into: &mut Analyzer) {
    while let Some(op) = compactor.pop() {
        into.push(op);
    }
}
