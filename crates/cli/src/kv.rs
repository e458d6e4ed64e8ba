//! `rangedb kv exec`: scripting a key-value engine over standard input (shared/specs/kv-shell.md).
//!
//! One command per line, one response per command, output flushed after each. Engines plug in through
//! [`KvEngine`]; `--engine lsm` is the leveled LSM engine and `--engine flexdb` FlexDB, each with its options as
//! flags.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

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
    engine: String,
    /// The database directory.
    #[arg(long)]
    dir: PathBuf,
    /// Create the database if the directory holds none.
    #[arg(long)]
    create: bool,
    /// Make every write durable before answering OK.
    #[arg(long)]
    sync: bool,
    /// lsm: memtable size in bytes.
    #[arg(long)]
    write_buffer_size: Option<usize>,
    /// lsm: memtables in memory (mutable + immutable).
    #[arg(long)]
    max_write_buffer_number: Option<usize>,
    /// lsm: L0 files that trigger compaction.
    #[arg(long)]
    level0_file_num_compaction_trigger: Option<usize>,
    /// lsm: L0 files that delay writes.
    #[arg(long)]
    level0_slowdown_writes_trigger: Option<usize>,
    /// lsm: L0 files that stop writes.
    #[arg(long)]
    level0_stop_writes_trigger: Option<usize>,
    /// lsm: target size of L1 in bytes.
    #[arg(long)]
    max_bytes_for_level_base: Option<u64>,
    /// lsm: size ratio between levels.
    #[arg(long)]
    max_bytes_for_level_multiplier: Option<u64>,
    /// lsm: compaction output file size in bytes.
    #[arg(long)]
    target_file_size_base: Option<u64>,
    /// lsm: data block size in bytes.
    #[arg(long)]
    block_size: Option<usize>,
    /// lsm: Bloom filter bits per key (0 disables).
    #[arg(long)]
    bloom_bits_per_key: Option<usize>,
    /// lsm: block compression, `none`, `lz4` or `zstd`.
    #[arg(long)]
    compression: Option<String>,
    /// lsm: block cache bytes.
    #[arg(long)]
    block_cache_size: Option<usize>,
    /// lsm: range-delete strategy, `local` (range tombstones in the tables, the default) or `global` (GLORAN's
    /// global index). A database keeps the strategy it was created with.
    #[arg(long)]
    range_delete_strategy: Option<String>,
    /// lsm: RangeReduce mode (query-driven compactions): `bounded-merge` (the default), `mos-blind`,
    /// `mos-file-size-aware` or `off`.
    #[arg(long)]
    range_reduce: Option<String>,
    /// lsm: disable automatic compactions.
    #[arg(long)]
    disable_auto_compactions: bool,
    #[command(flatten)]
    flexdb: crate::flexdb::FlexdbOpts,
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

    fn parse(msg: impl Into<String>) -> Self {
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

struct LsmEngine {
    db: lsm::Db,
    snaps: HashMap<u64, lsm::Snapshot>,
    next_snap: u64,
}

impl LsmEngine {
    fn read_opts(&self, snap: Option<u64>) -> KvResult<lsm::ReadOptions> {
        let snapshot = match snap {
            Some(id) => Some(
                self.snaps
                    .get(&id)
                    .ok_or_else(|| KvError { kind: "invalid", msg: format!("no snapshot {id}") })?
                    .seq(),
            ),
            None => None,
        };
        Ok(lsm::ReadOptions { snapshot, ..Default::default() })
    }
}

impl KvEngine for LsmEngine {
    fn write(&mut self, ups: Vec<Update>, sync: bool) -> KvResult<()> {
        let mut b = lsm::WriteBatch::new();
        for u in &ups {
            match u {
                Update::Put(k, v) => b.put(k, v),
                Update::Del(k) => b.delete(k),
                Update::DelRange(a, z) => b.delete_range(a, z),
            }
        }
        Ok(self.db.write(&lsm::WriteOptions { sync }, b)?)
    }
    fn get(&mut self, k: &[u8], snap: Option<u64>) -> KvResult<Option<Vec<u8>>> {
        let o = self.read_opts(snap)?;
        Ok(self.db.get_opt(&o, k)?)
    }
    fn scan(
        &mut self,
        a: &[u8],
        b: &[u8],
        limit: usize,
        rev: bool,
        snap: Option<u64>,
    ) -> KvResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let o = self.read_opts(snap)?;
        if a >= b {
            return Ok(Vec::new());
        }
        Ok(if rev { self.db.rscan(&o, a, b, limit)? } else { self.db.scan(&o, a, b, limit)? })
    }
    fn snapshot(&mut self) -> KvResult<u64> {
        self.next_snap += 1;
        self.snaps.insert(self.next_snap, self.db.snapshot());
        Ok(self.next_snap)
    }
    fn release(&mut self, id: u64) -> KvResult<()> {
        match self.snaps.remove(&id) {
            Some(_) => Ok(()),
            None => Err(KvError { kind: "invalid", msg: format!("no snapshot {id}") }),
        }
    }
    fn flush(&mut self) -> KvResult<()> {
        Ok(self.db.flush()?)
    }
    fn sync(&mut self) -> KvResult<()> {
        Ok(self.db.sync_wal()?)
    }
    fn compact(&mut self, range: Option<(Vec<u8>, Vec<u8>)>) -> KvResult<()> {
        match range {
            Some((a, b)) => Ok(self.db.compact_range(Some(&a), Some(&b))?),
            None => Ok(self.db.compact_range(None, None)?),
        }
    }
    fn stats(&mut self) -> KvResult<String> {
        Ok(self.db.stats().to_json())
    }
    fn close(self: Box<Self>) -> KvResult<()> {
        let LsmEngine { db, snaps, .. } = *self;
        drop(snaps);
        Ok(db.close()?)
    }
}

fn open_lsm(a: &ExecArgs) -> KvResult<Box<dyn KvEngine>> {
    let mut o = lsm::Options { create_if_missing: a.create, ..Default::default() };
    macro_rules! set {
        ($($f:ident),*) => { $( if let Some(v) = a.$f { o.$f = v; } )* };
    }
    set!(
        write_buffer_size,
        max_write_buffer_number,
        level0_file_num_compaction_trigger,
        level0_slowdown_writes_trigger,
        level0_stop_writes_trigger,
        max_bytes_for_level_base,
        max_bytes_for_level_multiplier,
        target_file_size_base,
        block_size,
        bloom_bits_per_key,
        block_cache_size
    );
    o.disable_auto_compactions = a.disable_auto_compactions;
    if let Some(c) = &a.compression {
        o.compression = match c.as_str() {
            "none" => lsm::Compression::None,
            "lz4" => lsm::Compression::Lz4,
            "zstd" => lsm::Compression::Zstd,
            other => return Err(KvError { kind: "invalid", msg: format!("unknown compression {other}") }),
        };
    }
    if let Some(s) = &a.range_delete_strategy {
        o.range_delete_strategy = lsm::strategy_by_name(s)?;
    }
    if let Some(m) = &a.range_reduce {
        o.range_reduce.mode = lsm::RangeReduceMode::from_name(m).ok_or_else(|| {
            let names: Vec<&str> = lsm::RangeReduceMode::NAMED.iter().map(|(n, _)| *n).collect();
            KvError::new("invalid", format!("unknown RangeReduce mode {m:?} ({})", names.join(" | ")))
        })?;
    }
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    let db = lsm::Db::open(fs, &a.dir, o)?;
    Ok(Box::new(LsmEngine { db, snaps: HashMap::new(), next_snap: 0 }))
}

/// Decodes a key or value token.
pub fn decode_token(t: &str) -> KvResult<Vec<u8>> {
    if let Some(hex) = t.strip_prefix("0x") {
        if hex.len() % 2 != 0 {
            return Err(KvError::parse(format!("odd-length hex token {t}")));
        }
        return decode_hex(hex).ok_or_else(|| KvError::parse(format!("bad hex token {t}")));
    }
    if t.starts_with('@') {
        return Err(KvError::parse(format!("token {t} may not start with @")));
    }
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(KvError::parse(format!("bad token {t:?}")));
    }
    Ok(t.as_bytes().to_vec())
}

/// The bytes of hex digits `h` (two per byte, either case), or `None` if `h` holds anything else or an odd count.
/// Works on bytes: slicing the text two bytes at a time would split a multi-byte character (a panic), and
/// `u8::from_str_radix` would take a `+` sign as a digit.
pub fn decode_hex(h: &str) -> Option<Vec<u8>> {
    let nibble = |c: u8| char::from(c).to_digit(16).map(|d| d as u8);
    let h = h.as_bytes();
    if !h.len().is_multiple_of(2) {
        return None;
    }
    h.chunks_exact(2).map(|p| Some(nibble(p[0])? << 4 | nibble(p[1])?)).collect()
}

/// Reads one command line without its line ending (`\n` or `\r\n`): `None` at the end of input, `Some(Err)`
/// for a line that is not UTF-8. Such a line is a malformed line, answered with `ERR parse` while the session
/// goes on, not a failure of the session.
pub fn read_line(input: &mut dyn BufRead) -> std::io::Result<Option<KvResult<String>>> {
    let mut buf = Vec::new();
    if input.read_until(b'\n', &mut buf)? == 0 {
        return Ok(None);
    }
    if buf.ends_with(b"\n") {
        buf.pop();
        if buf.ends_with(b"\r") {
            buf.pop();
        }
    }
    Ok(Some(String::from_utf8(buf).map_err(|_| KvError::parse("line is not valid UTF-8"))))
}

/// Encodes bytes as a token: plain when printable and unambiguous, else hex.
pub fn encode_token(b: &[u8]) -> String {
    let plain =
        !b.is_empty() && b.iter().all(|c| c.is_ascii_graphic()) && !b.starts_with(b"0x") && b[0] != b'@';
    if plain {
        String::from_utf8_lossy(b).into_owned()
    } else {
        let mut s = String::from("0x");
        for c in b {
            s.push_str(&format!("{c:02x}"));
        }
        s
    }
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

/// Runs `rangedb kv`.
pub fn run(args: KvArgs) -> Result<ExitCode, Box<dyn std::error::Error + Send + Sync>> {
    let KvCommand::Exec(a) = args.command;
    a.check_engine_flags()?;
    let mut engine = match a.engine.as_str() {
        "lsm" => open_lsm(&a).map_err(|e| format!("{} {}", e.kind, e.msg))?,
        "flexdb" => crate::flexdb::open_engine(&a.dir, a.create, &a.flexdb).map_err(|e| e.to_string())?,
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
    fn tokens_roundtrip() {
        for b in [&b"abc"[..], b"", b"0xab", b"@x", b"a b", &[0, 255]] {
            assert_eq!(decode_token(&encode_token(b)).unwrap(), b);
        }
        assert!(decode_token("0xabc").is_err());
        assert!(decode_token("@1").is_err());
        assert_eq!(decode_token("0xA0ff").unwrap(), [0xa0, 0xff]);
    }

    /// Hex digits are taken byte by byte: a multi-byte character among them is an error, not a panic from
    /// slicing inside it, and a `+` is not a digit (`u8::from_str_radix` took `+a` as 10).
    #[test]
    fn regression_hex_with_a_multibyte_character_or_a_sign_is_refused() {
        for bad in ["a\u{e9}0", "\u{e9}\u{e9}", "+a", "-1", "0g", " a"] {
            assert_eq!(decode_hex(bad), None, "{bad:?}");
            assert!(decode_token(&format!("0x{bad}")).is_err(), "{bad:?}");
        }
        assert_eq!(decode_hex(""), Some(vec![]));
        assert_eq!(decode_hex("00Ff7e"), Some(vec![0, 255, 0x7e]));
    }

    #[test]
    fn lines_end_at_lf_or_crlf_and_need_not_be_utf8() {
        let mut input: &[u8] = b"a b\r\nc\n\xff\r\n\nlast";
        let mut lines = Vec::new();
        while let Some(l) = read_line(&mut input).unwrap() {
            lines.push(l.map_err(|e| e.msg));
        }
        let want: Vec<Result<String, String>> = vec![
            Ok("a b".into()),
            Ok("c".into()),
            Err("line is not valid UTF-8".into()),
            Ok(String::new()),
            Ok("last".into()),
        ];
        assert_eq!(lines, want);
    }

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
            flexdb: Default::default(),
        };
        let mut e = open_lsm(&a).map_err(|e| e.msg).unwrap();
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
