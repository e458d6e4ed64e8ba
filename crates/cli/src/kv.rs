//! `rangedb kv exec`: scripting a key-value engine over standard input (shared/specs/kv-shell.md).
//!
//! One command per line, one response per command, output flushed after each. Engines plug in through
//! [`KvEngine`]; `--engine lsm` is the leveled LSM engine and `--engine flexdb` FlexDB, each with its options as
//! flags.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::lsm_engine::open_lsm;
use crate::tokens::{decode_token, encode_token, read_line};

/// Arguments of `rangedb kv`.
#[derive(Debug, clap::Args)]
pub struct KvArgs {
    #[command(subcommand)]
    command: KvCommand,
}

#[derive(Debug, clap::Subcommand)]
enum KvCommand {
    /// Open a database and run commands from standard input.
    Exec(ExecArgs),
}

/// Arguments of `rangedb kv exec`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The engine: `lsm` or `flexdb`.
    #[arg(long)]
    pub(crate) engine: String,
    /// The database directory.
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// Create the database if the directory holds none.
    #[arg(long)]
    pub(crate) create: bool,
    /// Make every write durable before answering OK.
    #[arg(long)]
    pub(crate) sync: bool,
    /// lsm: memtable size in bytes.
    #[arg(long)]
    pub(crate) write_buffer_size: Option<usize>,
    /// lsm: memtables in memory (mutable + immutable).
    #[arg(long)]
    pub(crate) max_write_buffer_number: Option<usize>,
    /// lsm: L0 files that trigger compaction.
    #[arg(long)]
    pub(crate) level0_file_num_compaction_trigger: Option<usize>,
    /// lsm: L0 files that delay writes.
    #[arg(long)]
    pub(crate) level0_slowdown_writes_trigger: Option<usize>,
    /// lsm: L0 files that stop writes.
    #[arg(long)]
    pub(crate) level0_stop_writes_trigger: Option<usize>,
    /// lsm: target size of L1 in bytes.
    #[arg(long)]
    pub(crate) max_bytes_for_level_base: Option<u64>,
    /// lsm: size ratio between levels.
    #[arg(long)]
    pub(crate) max_bytes_for_level_multiplier: Option<u64>,
    /// lsm: compaction output file size in bytes.
    #[arg(long)]
    pub(crate) target_file_size_base: Option<u64>,
    /// lsm: data block size in bytes.
    #[arg(long)]
    pub(crate) block_size: Option<usize>,
    /// lsm: Bloom filter bits per key (0 disables).
    #[arg(long)]
    pub(crate) bloom_bits_per_key: Option<usize>,
    /// lsm: block compression, `none`, `lz4` or `zstd`.
    #[arg(long)]
    pub(crate) compression: Option<String>,
    /// lsm: block cache bytes.
    #[arg(long)]
    pub(crate) block_cache_size: Option<usize>,
    /// lsm: range-delete strategy, `local` (range tombstones in the tables, the default) or `global` (GLORAN's
    /// global index). A database keeps the strategy it was created with.
    #[arg(long)]
    pub(crate) range_delete_strategy: Option<String>,
    /// lsm: RangeReduce mode (query-driven compactions): `bounded-merge` (the default), `mos-blind`,
    /// `mos-file-size-aware` or `off`.
    #[arg(long)]
    pub(crate) range_reduce: Option<String>,
    /// lsm: disable automatic compactions.
    #[arg(long)]
    pub(crate) disable_auto_compactions: bool,
    /// What opening does with log damage a crash cannot explain: `strict` (the default: refuse to open, naming
    /// the file and offset) or `point-in-time` (salvage: keep the writes before the damage, drop the rest, and
    /// say on standard error what was dropped).
    #[arg(long, default_value = "strict")]
    pub(crate) wal_recovery: String,
    #[command(flatten)]
    pub(crate) flexdb: crate::flexdb::FlexdbOpts,
}

/// A failure answered as `ERR <kind> <message>`.
#[derive(Debug)]
pub struct KvError {
    pub(crate) kind: &'static str,
    pub(crate) msg: String,
}

impl std::fmt::Display for KvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.msg)
    }
}

/// The message of an `ERR <kind> <message>` line: on one line, and without the engines' own "invalid argument: "
/// prefix, which would repeat the kind (`ERR invalid invalid argument: ...`).
pub fn err_message(kind: &str, text: &str) -> String {
    let text = match kind {
        "invalid" => text.strip_prefix("invalid argument: ").unwrap_or(text),
        // "corruption in FILE: ..." reads "ERR corruption in FILE: ...".
        "corruption" => text.strip_prefix("corruption ").unwrap_or(text),
        _ => text,
    };
    text.replace('\n', " ")
}

impl KvError {
    /// An error answered as `ERR <kind> <msg>`.
    pub fn new(kind: &'static str, msg: impl Into<String>) -> Self {
        KvError { kind, msg: err_message(kind, &msg.into()) }
    }

    pub(crate) fn parse(msg: impl Into<String>) -> Self {
        KvError { kind: "parse", msg: msg.into() }
    }
}

impl From<lsm::Error> for KvError {
    fn from(e: lsm::Error) -> Self {
        let kind = match &e {
            lsm::Error::Background(inner) => match inner.kind() {
                "corruption" => "corruption",
                _ => "io",
            },
            e => e.kind(),
        };
        KvError { kind, msg: err_message(kind, &e.to_string()) }
    }
}

/// The result of an engine call in a session.
pub type KvResult<T> = Result<T, KvError>;

/// One update of a batch.
#[derive(Debug, Clone)]
pub enum Update {
    /// `put K V`.
    Put(Vec<u8>, Vec<u8>),
    /// `del K`.
    Del(Vec<u8>),
    /// `delrange A B`.
    DelRange(Vec<u8>, Vec<u8>),
}

/// What `kv exec` needs of an engine.
pub trait KvEngine {
    /// Applies updates atomically.
    fn write(&mut self, ups: Vec<Update>, sync: bool) -> KvResult<()>;
    /// Reads a key, at snapshot `snap` if given.
    fn get(&mut self, k: &[u8], snap: Option<u64>) -> KvResult<Option<Vec<u8>>>;
    /// Live pairs in `[a, b)`, up to `limit`, ascending or descending.
    fn scan(
        &mut self,
        a: &[u8],
        b: &[u8],
        limit: usize,
        rev: bool,
        snap: Option<u64>,
    ) -> KvResult<Vec<(Vec<u8>, Vec<u8>)>>;
    /// Takes a snapshot; returns its id.
    fn snapshot(&mut self) -> KvResult<u64>;
    /// Releases a snapshot.
    fn release(&mut self, id: u64) -> KvResult<()>;
    /// Flushes the memtable to disk.
    fn flush(&mut self) -> KvResult<()>;
    /// Makes every acknowledged write durable.
    fn sync(&mut self) -> KvResult<()>;
    /// Compacts `[a, b]` or everything.
    fn compact(&mut self, range: Option<(Vec<u8>, Vec<u8>)>) -> KvResult<()>;
    /// Counters as one JSON line.
    fn stats(&mut self) -> KvResult<String>;
    /// Closes cleanly.
    fn close(self: Box<Self>) -> KvResult<()>;
}

fn parse_update(words: &[&str]) -> KvResult<Update> {
    match words {
        ["put", k, v] => Ok(Update::Put(decode_token(k)?, decode_token(v)?)),
        ["del", k] => Ok(Update::Del(decode_token(k)?)),
        ["delrange", a, b] => {
            let (a, b) = (decode_token(a)?, decode_token(b)?);
            if a > b {
                return Err(KvError { kind: "invalid", msg: "delrange start is after end".into() });
            }
            Ok(Update::DelRange(a, b))
        }
        ["put", ..] => Err(KvError::parse("usage: put K V")),
        ["del", ..] => Err(KvError::parse("usage: del K")),
        ["delrange", ..] => Err(KvError::parse("usage: delrange A B")),
        _ => Err(KvError::parse(format!("expected put/del/delrange, got {:?}", words.join(" ")))),
    }
}

/// Splits a trailing `@id` off a read command.
fn split_snap<'a>(words: &'a [&'a str]) -> KvResult<(&'a [&'a str], Option<u64>)> {
    match words.last() {
        Some(w) if w.starts_with('@') => {
            let id = w[1..].parse().map_err(|_| KvError::parse(format!("bad snapshot {w}")))?;
            Ok((&words[..words.len() - 1], Some(id)))
        }
        _ => Ok((words, None)),
    }
}

/// Runs the command loop of one session; `out` gets one response per command.
pub fn session(
    engine: &mut dyn KvEngine,
    sync: bool,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    while let Some(line) = read_line(input)? {
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                writeln!(out, "ERR {} {}", e.kind, e.msg)?;
                out.flush()?;
                continue;
            }
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let resp: KvResult<String> = (|| match words[0] {
            "put" | "del" | "delrange" => {
                let u = parse_update(&words)?;
                engine.write(vec![u], sync)?;
                Ok("OK".to_string())
            }
            "get" => {
                let (w, snap) = split_snap(&words)?;
                let [_, k] = w else { return Err(KvError::parse("usage: get K [@id]")) };
                Ok(match engine.get(&decode_token(k)?, snap)? {
                    Some(v) => encode_token(&v),
                    None => "NOT_FOUND".to_string(),
                })
            }
            "scan" | "rscan" => {
                let (w, snap) = split_snap(&words)?;
                let (a, b, limit) = match w {
                    [_, a, b] => (a, b, usize::MAX),
                    [_, a, b, l] => (a, b, l.parse().map_err(|_| KvError::parse(format!("bad limit {l}")))?),
                    _ => return Err(KvError::parse("usage: scan A B [LIMIT] [@id]")),
                };
                let rows =
                    engine.scan(&decode_token(a)?, &decode_token(b)?, limit, words[0] == "rscan", snap)?;
                let mut s = String::new();
                for (k, v) in &rows {
                    s.push_str(&format!("{} {}\n", encode_token(k), encode_token(v)));
                }
                s.push_str(&format!("END {}", rows.len()));
                Ok(s)
            }
            "batch" => {
                let [_, n] = words.as_slice() else { return Err(KvError::parse("usage: batch N")) };
                let n: usize = n.parse().map_err(|_| KvError::parse(format!("bad count {n}")))?;
                // N comes from the input: reserve for a few lines only, or `batch 18446744073709551615` would
                // abort the process before reading one.
                let mut ups = Vec::with_capacity(n.min(1024));
                let mut err = None;
                for _ in 0..n {
                    let l = read_line(input).map_err(|e| KvError { kind: "io", msg: e.to_string() })?;
                    let Some(l) = l else {
                        return Err(KvError::parse("batch ended early"));
                    };
                    let l = match l {
                        Ok(l) => l,
                        Err(e) => {
                            err = err.or(Some(e));
                            continue;
                        }
                    };
                    let w: Vec<&str> = l.split_whitespace().collect();
                    match parse_update(&w) {
                        Ok(u) => ups.push(u),
                        Err(e) => err = err.or(Some(e)),
                    }
                }
                if let Some(e) = err {
                    return Err(e);
                }
                engine.write(ups, sync)?;
                Ok("OK".to_string())
            }
            "snapshot" => Ok(format!("SNAPSHOT {}", engine.snapshot()?)),
            "release" => {
                let [_, id] = words.as_slice() else { return Err(KvError::parse("usage: release ID")) };
                engine.release(id.parse().map_err(|_| KvError::parse(format!("bad id {id}")))?)?;
                Ok("OK".to_string())
            }
            "flush" => engine.flush().map(|_| "OK".to_string()),
            "sync" => engine.sync().map(|_| "OK".to_string()),
            "compact" => {
                let range = match words.as_slice() {
                    [_] => None,
                    [_, a, b] => Some((decode_token(a)?, decode_token(b)?)),
                    _ => return Err(KvError::parse("usage: compact [A B]")),
                };
                engine.compact(range).map(|_| "OK".to_string())
            }
            "stats" => engine.stats(),
            other => Err(KvError::parse(format!("unknown command {other}"))),
        })();
        match resp {
            Ok(s) => writeln!(out, "{s}")?,
            Err(e) => writeln!(out, "ERR {} {}", e.kind, e.msg)?,
        }
        out.flush()?;
    }
    Ok(())
}

impl ExecArgs {
    /// The LSM engine's option flags given, as typed on the command line.
    fn lsm_flags_given(&self) -> Vec<&'static str> {
        [
            ("--write-buffer-size", self.write_buffer_size.is_some()),
            ("--max-write-buffer-number", self.max_write_buffer_number.is_some()),
            ("--level0-file-num-compaction-trigger", self.level0_file_num_compaction_trigger.is_some()),
            ("--level0-slowdown-writes-trigger", self.level0_slowdown_writes_trigger.is_some()),
            ("--level0-stop-writes-trigger", self.level0_stop_writes_trigger.is_some()),
            ("--max-bytes-for-level-base", self.max_bytes_for_level_base.is_some()),
            ("--max-bytes-for-level-multiplier", self.max_bytes_for_level_multiplier.is_some()),
            ("--target-file-size-base", self.target_file_size_base.is_some()),
            ("--block-size", self.block_size.is_some()),
            ("--bloom-bits-per-key", self.bloom_bits_per_key.is_some()),
            ("--compression", self.compression.is_some()),
            ("--block-cache-size", self.block_cache_size.is_some()),
            ("--range-delete-strategy", self.range_delete_strategy.is_some()),
            ("--range-reduce", self.range_reduce.is_some()),
            ("--disable-auto-compactions", self.disable_auto_compactions),
        ]
        .into_iter()
        .filter_map(|(flag, set)| set.then_some(flag))
        .collect()
    }

    /// Refuses option flags of the other engine: ignoring them would run with settings the caller did not ask for.
    fn check_engine_flags(&self) -> Result<(), String> {
        let (other, foreign) = match self.engine.as_str() {
            "lsm" => ("flexdb", self.flexdb.given()),
            "flexdb" => ("lsm", self.lsm_flags_given()),
            _ => return Ok(()),
        };
        match foreign.as_slice() {
            [] => Ok(()),
            flags => Err(format!(
                "{} {} only with --engine {other}",
                flags.join(", "),
                if flags.len() == 1 { "applies" } else { "apply" }
            )),
        }
    }
}

/// The `--wal-recovery` mode called `name`.
fn wal_recovery(name: &str) -> Result<vfs::torn::WalRecovery, String> {
    vfs::torn::WalRecovery::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = vfs::torn::WalRecovery::NAMED.iter().map(|(n, _)| *n).collect();
        format!("unknown --wal-recovery {name:?} ({})", names.join(" | "))
    })
}

/// Tells the operator on standard error what a point-in-time open dropped (`salvaged`: the corruption a strict
/// open reports; `dropped`: bytes of log not replayed).
pub(crate) fn report_salvage(salvaged: Option<&str>, dropped: u64) {
    if let Some(why) = salvaged {
        eprintln!("rangedb: point-in-time recovery dropped {dropped} bytes of log from the damage on: {why}");
    }
}

/// Runs `rangedb kv`.
pub fn run(args: KvArgs) -> Result<ExitCode, Box<dyn std::error::Error + Send + Sync>> {
    let KvCommand::Exec(a) = args.command;
    a.check_engine_flags()?;
    let recovery = wal_recovery(&a.wal_recovery)?;
    let mut engine = match a.engine.as_str() {
        "lsm" => open_lsm(&a, recovery).map_err(|e| format!("{} {}", e.kind, e.msg))?,
        "flexdb" => {
            crate::flexdb::open_engine(&a.dir, a.create, &a.flexdb, recovery).map_err(|e| e.to_string())?
        }
        other => return Err(format!("unknown engine {other} (known: lsm, flexdb)").into()),
    };
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    session(&mut *engine, a.sync, &mut stdin.lock(), &mut stdout.lock())?;
    engine.close().map_err(|e| format!("{} {}", e.kind, e.msg))?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_do_not_repeat_their_kind() {
        let e = KvError::new("invalid", "invalid argument: memtable_bytes must be at least 1 KiB\nreally");
        assert_eq!(e.to_string(), "invalid memtable_bytes must be at least 1 KiB really");
        // Only the kind's own prefix goes.
        assert_eq!(err_message("io", "invalid argument: x"), "invalid argument: x");
        assert_eq!(
            err_message("corruption", "corruption in 000007.log: at offset 9"),
            "in 000007.log: at offset 9"
        );
    }

    #[test]
    fn a_write_with_the_wrong_arity_names_its_usage() {
        let msg = |line: &str| parse_update(&line.split(' ').collect::<Vec<_>>()).err().unwrap().msg;
        assert_eq!(msg("put a"), "usage: put K V");
        assert_eq!(msg("put a 1 2"), "usage: put K V");
        assert_eq!(msg("del"), "usage: del K");
        assert_eq!(msg("delrange a"), "usage: delrange A B");
        assert!(msg("get a").starts_with("expected put/del/delrange"));
    }

    #[test]
    fn session_runs_the_spec_commands() {
        let dir = tempfile::tempdir().unwrap();
        let a = ExecArgs {
            engine: "lsm".into(),
            dir: dir.path().join("db"),
            create: true,
            sync: false,
            write_buffer_size: Some(4096),
            max_write_buffer_number: None,
            level0_file_num_compaction_trigger: None,
            level0_slowdown_writes_trigger: None,
            level0_stop_writes_trigger: None,
            max_bytes_for_level_base: None,
            max_bytes_for_level_multiplier: None,
            target_file_size_base: None,
            block_size: None,
            bloom_bits_per_key: None,
            compression: None,
            block_cache_size: None,
            range_delete_strategy: None,
            range_reduce: None,
            disable_auto_compactions: false,
            wal_recovery: "strict".into(),
            flexdb: Default::default(),
        };
        let mut e = open_lsm(&a, vfs::torn::WalRecovery::Strict).map_err(|e| e.msg).unwrap();
        let script = "put a 1\nput b 2\nsnapshot\ndelrange a b\nget a\nget a @1\nbatch 2\nput c 3\ndel b\n\
                      scan a z\nrscan a z 1\nflush\ncompact\nsync\nbogus\nget 0x\nrelease 1\nget a @1\n";
        let mut out = Vec::new();
        session(&mut *e, false, &mut script.as_bytes(), &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let want = "OK\nOK\nSNAPSHOT 1\nOK\nNOT_FOUND\n1\nOK\nc 3\nEND 1\nc 3\nEND 1\nOK\nOK\nOK\n";
        assert!(out.starts_with(want), "{out}");
        assert!(out.contains("ERR parse unknown command bogus"), "{out}");
        assert!(out.ends_with("NOT_FOUND\nOK\nERR invalid no snapshot 1\n"), "{out}");
        e.close().map_err(|e| e.msg).unwrap();
    }
}
