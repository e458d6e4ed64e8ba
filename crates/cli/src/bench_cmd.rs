//! `rangedb bench`: runs experiments from `crates/bench` and writes their results.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bench::{Ctx, Experiment, experiments};

/// Arguments of `rangedb bench`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Run `rangedb bench list` to see the experiments and what each compares.")]
pub struct BenchArgs {
    /// The experiment to run, `all` for every one in turn, or `list` to list them.
    experiment: String,
    /// Keep the experiment to a few minutes (smaller data, fewer repetitions).
    #[arg(long)]
    quick: bool,
    /// Write results as JSON (bench-json spec). With `all`, one file per experiment: FILE's stem gets
    /// `.<experiment>` inserted (m.json -> m.machine.json).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write a markdown report with PNG plots into DIR.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Thread counts for concurrent systems, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// A trace file for experiments that replay traces (repeatable).
    #[arg(long, value_name = "FILE")]
    trace: Vec<PathBuf>,
    /// Directory on the disk under test for systems that write files (created, and cleaned up after).
    #[arg(long, value_name = "DIR", default_value = "rangedb-bench-scratch")]
    scratch: PathBuf,
    /// Seed of every generator in the run.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// An experiment-specific setting `KEY=VALUE` (repeatable; each experiment documents its keys).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

/// Runs `rangedb bench`.
pub fn run(args: BenchArgs) -> Result<ExitCode, bench::Error> {
    if args.experiment == "list" {
        crate::signals::die_on_broken_pipe();
        for e in experiments::all() {
            println!("{:<14} {}", e.name(), e.about());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let chosen: Vec<&'static dyn Experiment> = if args.experiment == "all" {
        experiments::all()
    } else {
        match experiments::find(&args.experiment) {
            Some(e) => vec![e],
            None => {
                let names: Vec<&str> = experiments::all().iter().map(|e| e.name()).collect();
                return Err(
                    format!("unknown experiment `{}`; known: {}", args.experiment, names.join(", ")).into()
                );
            }
        }
    };
    if args.threads.contains(&0) {
        return Err("--threads: every thread count is at least 1".into());
    }
    let mut set = BTreeMap::new();
    for kv in &args.set {
        let (k, v) = kv.split_once('=').ok_or_else(|| format!("--set {kv}: expected KEY=VALUE"))?;
        set.insert(k.to_string(), v.to_string());
    }
    if !bench::alloc::installed() {
        return Err("the counting allocator is not installed; memory figures would be wrong".into());
    }
    let ctx = Ctx {
        quick: args.quick,
        threads: args.threads.clone(),
        traces: args.trace.clone(),
        scratch: args.scratch.clone(),
        seed: args.seed,
        set,
        progress: std::io::stderr().is_terminal(),
    };
    bench::check_settings(&chosen, &ctx)?;
    let many = chosen.len() > 1;
    check_outputs(&args, &chosen, many)?;
    std::fs::create_dir_all(&ctx.scratch).map_err(|e| format!("--scratch {}: {e}", ctx.scratch.display()))?;
    for e in chosen {
        eprintln!("running {} ({}) ...", e.name(), if ctx.quick { "quick" } else { "full" });
        let report = e.run(&ctx)?;
        println!("{}", report.table());
        if let Some(path) = &args.json {
            let path = if many { per_experiment(path, e.name()) } else { path.clone() };
            std::fs::write(&path, serde_json::to_string_pretty(&report.to_json())? + "\n")
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        if let Some(dir) = &args.report {
            report
                .write_markdown(dir)
                .map_err(|e| format!("writing a report into {}: {e}", dir.display()))?;
            eprintln!("wrote {}", dir.join(format!("{}.md", e.name())).display());
        }
    }
    // Only remove the scratch directory if it is empty: it may be a directory the user named.
    let _ = std::fs::remove_dir(&ctx.scratch);
    Ok(ExitCode::SUCCESS)
}

/// Refuses, before anything runs, outputs that could not be written when the run ends: a typo in a path would
/// otherwise cost a long run's results. Creates the report directory.
fn check_outputs(
    args: &BenchArgs,
    chosen: &[&'static dyn Experiment],
    many: bool,
) -> Result<(), bench::Error> {
    if let Some(path) = &args.json {
        let paths: Vec<PathBuf> = match many {
            true => chosen.iter().map(|e| per_experiment(path, e.name())).collect(),
            false => vec![path.clone()],
        };
        for p in paths {
            let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            if !parent.is_dir() {
                return Err(format!("--json {}: no directory {}", p.display(), parent.display()).into());
            }
            if p.is_dir() {
                return Err(format!("--json {}: is a directory", p.display()).into());
            }
        }
    }
    if let Some(dir) = &args.report {
        std::fs::create_dir_all(dir).map_err(|e| format!("--report {}: {e}", dir.display()))?;
    }
    Ok(())
}

fn per_experiment(path: &Path, name: &str) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = path.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    path.with_file_name(format!("{stem}.{name}{ext}"))
}
