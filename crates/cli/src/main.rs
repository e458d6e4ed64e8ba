//! `rangedb`: the command-line face of RangeDB.
//!
//! Each subcommand lives in its own module; this file only parses and dispatches.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench_cmd;
mod blockstore_inspect;
mod dirs;
mod flexdb;
mod flexfile;
mod inspect;
mod kv;
mod kv_args;
mod kv_engine;
mod kv_session;
mod lsm_engine;
mod nbd;
mod nbd_log;
mod rask;
mod signals;
mod tokens;
mod trace_cmd;

#[global_allocator]
static ALLOC: bench::alloc::CountingAlloc = bench::alloc::CountingAlloc;

/// RangeDB: storage engines that make ranges first-class.
#[derive(Debug, Parser)]
#[command(name = "rangedb", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a benchmark experiment: ours against named peers in one run, with ratios.
    Bench(bench_cmd::BenchArgs),
    /// Script (`exec`, the kv shell) or inspect a FlexDB store.
    Flexdb(flexdb::FlexdbArgs),
    /// Script (`exec`) or inspect a FlexFile.
    Flexfile(flexfile::FlexfileArgs),
    /// Script a key-value engine from standard input (`kv exec --engine lsm`).
    Kv(Box<kv::KvArgs>),
    /// Dump, lay out, check or scan engine files (wal, sst, manifest, db).
    Inspect(inspect::InspectArgs),
    /// Serve a block volume over NBD (`rangedb nbd serve --dir DIR ...`).
    Nbd(nbd::NbdArgs),
    /// Generate synthetic EBS block traces and measure traces (write lengths, consecutive writes, I/O compaction).
    Trace(trace_cmd::TraceArgs),
    /// RASK, the range-as-a-key index: replay block traces through it.
    Rask(rask::RaskArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench_cmd::run(args),
        Command::Flexdb(args) => flexdb::run(args),
        Command::Flexfile(args) => flexfile::run(args),
        Command::Kv(args) => kv::run(*args),
        Command::Inspect(args) => inspect::run(args),
        Command::Nbd(args) => nbd::run(args).map_err(Into::into),
        Command::Trace(args) => trace_cmd::run(args),
        Command::Rask(args) => rask::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rangedb: {e}");
            ExitCode::FAILURE
        }
    }
}
