//! `rangedb flexdb exec` (the kv shell of the kv-shell spec on the FlexDB engine) and `rangedb flexdb inspect`
//! (open a store, check it deeply, print its counters).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use flexdb::wal::Op;
use flexdb::{Db, Options, WriteOptions};

/// Arguments of `rangedb flexdb`.
#[derive(Debug, clap::Args)]
pub struct FlexdbArgs {
    #[command(subcommand)]
    cmd: FlexdbCmd,
}

/// Engine options as flags named after `flexdb::Options` fields.
#[derive(Debug, Clone, clap::Args)]
pub struct FlexdbOpts {
    /// Memtable budget in bytes.
    #[arg(long)]
    memtable_bytes: Option<usize>,
    /// Most keys per interval.
    #[arg(long)]
    interval_max_keys: Option<usize>,
    /// Most bytes per interval.
    #[arg(long)]
    interval_max_bytes: Option<u64>,
    /// Interval cache budget in bytes.
    #[arg(long)]
    cache_bytes: Option<usize>,
    /// Distance between anchors read when the index is rebuilt at open.
    #[arg(long)]
    rebuild_interval: Option<u64>,
}

impl FlexdbOpts {
    fn options(&self, create: bool) -> Options {
        let d = Options::default();
        Options {
            create_if_missing: create,
            memtable_bytes: self.memtable_bytes.unwrap_or(d.memtable_bytes),
            interval_max_keys: self.interval_max_keys.unwrap_or(d.interval_max_keys),
            interval_max_bytes: self.interval_max_bytes.unwrap_or(d.interval_max_bytes),
            cache_bytes: self.cache_bytes.unwrap_or(d.cache_bytes),
            rebuild_interval: self.rebuild_interval.unwrap_or(d.rebuild_interval),
            ..d
        }
    }
}

#[derive(Debug, clap::Subcommand)]
enum FlexdbCmd {
    /// Read kv-shell commands from standard input, one per line, and answer each on one line.
    Exec {
        /// The store directory.
        #[arg(long)]
        dir: PathBuf,
        /// Create the store if DIR holds none.
        #[arg(long)]
        create: bool,
        /// Make every write durable before its OK.
        #[arg(long)]
        sync: bool,
        #[command(flatten)]
        opts: FlexdbOpts,
    },
    /// Open the store, check the index and every interval, and print its counters as JSON.
    Inspect {
        /// The store directory.
        dir: PathBuf,
    },
}

/// Runs `rangedb flexdb`.
pub fn run(args: FlexdbArgs) -> Result<ExitCode, bench::Error> {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    match args.cmd {
        FlexdbCmd::Exec { dir, create, sync, opts } => {
            let db = Db::open(fs, &dir, opts.options(create))?;
            let stdin = std::io::stdin();
            let stdout = std::io::stdout();
            session(&db, sync, stdin.lock(), stdout.lock())?;
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        FlexdbCmd::Inspect { dir } => inspect(fs, &dir),
    }
}

fn inspect(fs: Arc<dyn vfs::Fs>, dir: &Path) -> Result<ExitCode, bench::Error> {
    let db = Db::open(fs, dir, Options::default())?;
    let r = db.check(true);
    println!("{}", stats_json(&db));
    match r {
        Ok(()) => {
            println!("check: ok");
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            println!("check: {} {e}", e.kind_name());
            Ok(ExitCode::FAILURE)
        }
    }
}

fn stats_json(db: &Db) -> String {
    // Debug formatting of the plain-number struct, turned into JSON field by field.
    let s = db.stats();
    let dbg = format!("{s:?}");
    let body = dbg.trim_start_matches("Stats {").trim_end_matches('}').trim();
    let fields: Vec<String> = body
        .split(", ")
        .filter_map(|kv| kv.split_once(": "))
        .map(|(k, v)| format!("\"{}\":{}", k.trim(), v.trim()))
        .collect();
    format!("{{{}}}", fields.join(","))
}

fn token(t: &str) -> Result<Vec<u8>, String> {
    if let Some(h) = t.strip_prefix("0x") {
        if h.len() % 2 != 0 {
            return Err(format!("odd number of hex digits: {t}"));
        }
        return (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).map_err(|_| format!("bad hex: {t}")))
            .collect();
    }
    if t.starts_with('@') {
        return Err(format!("snapshots are not supported: {t}"));
    }
    Ok(t.as_bytes().to_vec())
}

fn show(b: &[u8]) -> String {
    let plain = !b.is_empty()
        && b.iter().all(|c| c.is_ascii_graphic())
        && !b.starts_with(b"0x")
        && !b.starts_with(b"@");
    if plain {
        String::from_utf8_lossy(b).into_owned()
    } else {
        let mut s = String::from("0x");
        for x in b {
            s.push_str(&format!("{x:02x}"));
        }
        s
    }
}

fn err_line(e: &flexdb::Error) -> String {
    format!("ERR {} {}", e.kind_name(), e.to_string().replace('\n', " "))
}

/// One parsed write command.
fn parse_write(words: &[&str]) -> Result<Op, String> {
    match words {
        ["put", k, v] => Ok(Op::Put(token(k)?.into(), token(v)?.into())),
        ["del", k] => Ok(Op::Delete(token(k)?.into())),
        ["delrange", a, b] => Ok(Op::DeleteRange(token(a)?.into(), token(b)?.into())),
        _ => Err(format!("not a write command: {}", words.join(" "))),
    }
}

fn apply(db: &Db, op: Op, wo: WriteOptions) -> flexdb::Result<()> {
    match op {
        Op::DeleteRange(a, b) => db.delete_range(&a, &b, wo),
        other => db.write(vec![other], wo),
    }
}

/// Runs a kv-shell session over `input`, answering on `out`.
pub fn session(db: &Db, sync: bool, input: impl BufRead, mut out: impl Write) -> std::io::Result<()> {
    let wo = WriteOptions { sync };
    let mut lines = input.lines();
    while let Some(line) = lines.next() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let reply = match words.as_slice() {
            ["put", ..] | ["del", ..] | ["delrange", ..] => match parse_write(&words) {
                Ok(op) => apply(db, op, wo).map_or_else(|e| err_line(&e), |_| "OK".into()),
                Err(m) => format!("ERR parse {m}"),
            },
            ["get", k] => match token(k) {
                Ok(k) => match db.get(&k) {
                    Ok(Some(v)) => {
                        if v.is_empty() {
                            "0x".into()
                        } else {
                            show(&v)
                        }
                    }
                    Ok(None) => "NOT_FOUND".into(),
                    Err(e) => err_line(&e),
                },
                Err(m) => format!("ERR parse {m}"),
            },
            [cmd @ ("scan" | "rscan"), a, b, rest @ ..] if rest.len() <= 1 => {
                let limit = match rest.first().map(|l| l.parse::<usize>()) {
                    None => Ok(usize::MAX),
                    Some(Ok(n)) => Ok(n),
                    Some(Err(_)) => Err("bad limit".to_string()),
                };
                match (token(a), token(b), limit) {
                    (Ok(a), Ok(b), Ok(limit)) => match db.scan(&a, Some(&b), limit, *cmd == "rscan") {
                        Ok(rows) => {
                            let mut s = String::new();
                            for (k, v) in &rows {
                                let v = if v.is_empty() { "0x".to_string() } else { show(v) };
                                s.push_str(&format!("{} {v}\n", show(k)));
                            }
                            s.push_str(&format!("END {}", rows.len()));
                            s
                        }
                        Err(e) => err_line(&e),
                    },
                    (Err(m), _, _) | (_, Err(m), _) | (_, _, Err(m)) => format!("ERR parse {m}"),
                }
            }
            ["batch", n] => match n.parse::<usize>() {
                Ok(n) => {
                    let mut ops = Vec::new();
                    let mut bad = None;
                    for _ in 0..n {
                        let Some(l) = lines.next() else { break };
                        let l = l?;
                        let w: Vec<&str> = l.split_whitespace().collect();
                        match parse_write(&w) {
                            Ok(Op::DeleteRange(..)) => {
                                bad.get_or_insert(
                                    "delrange in a batch is not supported by flexdb".to_string(),
                                );
                            }
                            Ok(op) => ops.push(op),
                            Err(m) => {
                                bad.get_or_insert(m);
                            }
                        }
                    }
                    match bad {
                        Some(m) => format!("ERR invalid {m}"),
                        None => db.write(ops, wo).map_or_else(|e| err_line(&e), |_| "OK".into()),
                    }
                }
                Err(_) => format!("ERR parse bad batch size: {n}"),
            },
            ["flush"] | ["compact", ..] => db.flush().map_or_else(|e| err_line(&e), |_| "OK".into()),
            ["sync"] => db.sync().map_or_else(|e| err_line(&e), |_| "OK".into()),
            ["stats"] => stats_json(db),
            ["snapshot"] | ["release", ..] => "ERR unsupported snapshots are not supported by flexdb".into(),
            _ => format!("ERR parse unknown command: {line}"),
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_session_script() {
        let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
        let db =
            Db::open(fs, Path::new("db"), Options { create_if_missing: true, ..Options::tiny() }).unwrap();
        let script = "put a 1\nput b 0x\nget b\nget zz\nbatch 2\nput c 3\ndel a\nscan a z\nrscan a z 1\n\
                      delrange a c\nscan 0x z\nflush\nbogus\n";
        let mut out = Vec::new();
        session(&db, false, script.as_bytes(), &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            out,
            "OK\nOK\n0x\nNOT_FOUND\nOK\nb 0x\nc 3\nEND 2\nc 3\nEND 1\nOK\nc 3\nEND 1\nOK\nERR parse unknown command: bogus\n"
        );
    }
}
