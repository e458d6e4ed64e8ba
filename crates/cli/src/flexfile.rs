//! `rangedb flexfile exec` (the FlexFile shell, per the flexfile-shell spec) and `rangedb inspect flexfile DIR`
//! (a read-only dump of a FlexFile directory: headers, log, segment usage, extent map summary, checks;
//! `rangedb flexfile inspect DIR` is the same command under its older name).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use flexfile::flexfile::{DATA_FILE, LOG_FILE, TREE_FILE};
use flexfile::treefile::{Header, TreeFile};
use flexfile::{Error, FlexFile, Options};
use serde_json::json;
use vfs::OpenMode;

use crate::tokens::hex;

/// Arguments of `rangedb flexfile`.
#[derive(Debug, clap::Args)]
pub struct FlexfileArgs {
    #[command(subcommand)]
    cmd: FlexCmd,
}

#[derive(Debug, clap::Subcommand)]
enum FlexCmd {
    /// Read commands from standard input, one per line, and answer each on one line.
    Exec {
        /// The FlexFile directory.
        #[arg(long)]
        dir: PathBuf,
        /// Create the FlexFile if DIR holds none.
        #[arg(long)]
        create: bool,
    },
    /// Same as `rangedb inspect flexfile DIR`: dump headers, log entries, segment usage and the extent map
    /// summary, and check everything (read-only).
    Inspect {
        /// The FlexFile directory.
        dir: PathBuf,
    },
}

/// Runs `rangedb flexfile`.
pub fn run(args: FlexfileArgs) -> Result<ExitCode, bench::Error> {
    match args.cmd {
        FlexCmd::Exec { dir, create } => {
            crate::dirs::absent_or_dir(&dir)?;
            let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
            let mut f = open_or_create(fs, &dir, create)?;
            let stdin = std::io::stdin();
            let stdout = std::io::stdout();
            session(&mut f, stdin.lock(), stdout.lock())?;
            f.close()?;
            Ok(ExitCode::SUCCESS)
        }
        FlexCmd::Inspect { dir } => {
            crate::signals::die_on_broken_pipe();
            inspect(&dir)
        }
    }
}

fn open_or_create(fs: Arc<dyn vfs::Fs>, dir: &Path, create: bool) -> flexfile::Result<FlexFile> {
    if create && !fs.exists(&dir.join(TREE_FILE))? {
        FlexFile::create(fs, dir, Options::default())
    } else {
        FlexFile::open(fs, dir, Options::default())
    }
}

fn unhex(t: &str) -> Result<Vec<u8>, String> {
    let h = t.strip_prefix("0x").ok_or_else(|| format!("data must be 0x-hex: {t}"))?;
    if h.len() % 2 != 0 {
        return Err(format!("odd number of hex digits: {t}"));
    }
    crate::tokens::decode_hex(h).ok_or_else(|| format!("bad hex: {t}"))
}

fn num(t: Option<&str>) -> Result<u64, String> {
    let t = t.ok_or("missing number")?;
    t.parse().map_err(|_| format!("not a decimal number: {t}"))
}

enum Reply {
    Line(String),
    Err(&'static str, String),
}

fn err(e: Error) -> Reply {
    let kind = e.kind_name();
    Reply::Err(kind, crate::kv_engine::err_message(kind, &e.to_string()))
}

/// Runs one shell session: a reply line per command line.
pub fn session(f: &mut FlexFile, mut input: impl BufRead, mut out: impl Write) -> std::io::Result<()> {
    while let Some(line) = crate::tokens::read_line(&mut input)? {
        let reply = match &line {
            Ok(line) if line.trim().is_empty() => continue,
            Ok(line) => command(f, line.trim()),
            Err(e) => Reply::Err(e.kind, e.msg.clone()),
        };
        match reply {
            Reply::Line(s) => writeln!(out, "{s}")?,
            Reply::Err(kind, msg) => writeln!(out, "ERR {kind} {msg}")?,
        }
        out.flush()?;
    }
    Ok(())
}

fn command(f: &mut FlexFile, line: &str) -> Reply {
    let mut it = line.split_whitespace();
    let cmd = it.next().unwrap_or("");
    let args: Vec<&str> = it.collect();
    let parse = |r: Result<Reply, String>| r.unwrap_or_else(|m| Reply::Err("parse", m));
    let ok = |r: flexfile::Result<()>| match r {
        Ok(()) => Reply::Line("OK".into()),
        Err(e) => err(e),
    };
    let arity = |n: usize| if args.len() == n { Ok(()) } else { Err(format!("{cmd} takes {n} argument(s)")) };
    match cmd {
        "size" => parse(arity(0).map(|_| Reply::Line(f.size().to_string()))),
        "read" => parse((|| {
            arity(2)?;
            let (off, len) = (num(args.first().copied())?, num(args.get(1).copied())?);
            if off.checked_add(len).is_none_or(|e| e > f.size()) {
                return Ok(Reply::Err("invalid", format!("read {off}+{len} past the end ({})", f.size())));
            }
            let len = usize::try_from(len).map_err(|_| "length too large".to_string())?;
            let mut buf = vec![0u8; len];
            Ok(match f.read(off, &mut buf) {
                Ok(()) => Reply::Line(hex(&buf)),
                Err(e) => err(e),
            })
        })()),
        "write" | "insert" => parse((|| {
            arity(2)?;
            let off = num(args.first().copied())?;
            let data = unhex(args.get(1).copied().unwrap_or(""))?;
            Ok(ok(if cmd == "write" { f.write(off, &data) } else { f.insert(off, &data) }))
        })()),
        "collapse" => parse((|| {
            arity(2)?;
            Ok(ok(f.collapse(num(args.first().copied())?, num(args.get(1).copied())?)))
        })()),
        "truncate" => parse((|| {
            arity(1)?;
            Ok(ok(f.truncate(num(args.first().copied())?)))
        })()),
        "sync" => parse(arity(0).map(|_| ok(f.sync()))),
        "tag" => parse((|| {
            arity(1)?;
            Ok(match f.get_tag(num(args.first().copied())?) {
                Ok(t) => Reply::Line(t.to_string()),
                Err(e) => err(e),
            })
        })()),
        "settag" => parse((|| {
            arity(2)?;
            let off = num(args.first().copied())?;
            let tag = u16::try_from(num(args.get(1).copied())?).map_err(|_| "tag must fit 16 bits".to_string())?;
            Ok(ok(f.set_tag(off, tag)))
        })()),
        "stats" => parse(arity(0).map(|_| {
            let s = f.stats();
            Reply::Line(
                json!({
                    "size": s.size, "extents": s.extents, "tree_nodes": s.tree_nodes, "segments": s.segments,
                    "free_segments": s.free_segments, "used_segments": s.used_segments, "live_bytes": s.live_bytes,
                    "avg_extent_bytes": s.avg_extent_bytes, "fragmentation": s.fragmentation,
                    "gc_rounds": s.gc_rounds, "gc_segments": s.gc_segments, "gc_bytes": s.gc_bytes,
                    "user_bytes": s.user_bytes, "data_bytes_written": s.data_bytes_written,
                    "log_bytes_written": s.log_bytes_written, "tree_bytes_written": s.tree_bytes_written,
                    "write_amplification": s.write_amplification(), "commits": s.commits,
                    "checkpoints": s.checkpoints, "splits": s.splits, "merges": s.merges, "rebases": s.rebases,
                })
                .to_string(),
            )
        })),
        _ => Reply::Err("parse", format!("unknown command `{}`", cmd.escape_debug())),
    }
}

/// `rangedb inspect flexfile DIR` (alias `rangedb flexfile inspect DIR`): read-only; exits non-zero when a check
/// fails.
pub fn inspect(dir: &Path) -> Result<ExitCode, bench::Error> {
    crate::dirs::existing(dir)?;
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    if !fs.exists(&dir.join(TREE_FILE))? {
        return Err(format!("{} holds no FlexFile (no {TREE_FILE} file)", dir.display()).into());
    }
    let tfile = fs.open(&dir.join(TREE_FILE), OpenMode::ReadOnly)?;
    let mut problems = Vec::new();
    // Both header slots.
    let h = TreeFile::read_header(tfile.as_ref())?;
    for slot in 0..2u64 {
        let mut b = vec![0u8; flexfile::treefile::HEADER_LEN];
        let off = slot * h.node_size as u64;
        let r = tfile.read_exact_at(&mut b, off).ok().and_then(|_| Header::decode(&b));
        match r {
            Some(x) => println!(
                "header[{slot}]: version {} root slot {} slots {} size {} extents {}{}",
                x.version,
                x.root_slot,
                x.slot_count,
                x.size,
                x.extents,
                if x.version == h.version { " (current)" } else { "" }
            ),
            None => println!("header[{slot}]: invalid or unwritten"),
        }
    }
    println!(
        "format: node_size {} leaf_cap {} internal_cap {} segment_size {} max_extent {} block_size {}",
        h.node_size, h.leaf_cap, h.internal_cap, h.segment_size, h.max_extent, h.block_size
    );
    let opts = Options {
        segment_size: h.segment_size,
        max_extent: h.max_extent,
        block_size: h.block_size,
        leaf_cap: h.leaf_cap as usize,
        internal_cap: h.internal_cap as usize,
        node_size: h.node_size,
        ..Options::default()
    };
    // The log.
    let log = vfs::read_all(fs.as_ref(), &dir.join(LOG_FILE)).unwrap_or_default();
    match flexfile::log::parse(&log, h.version) {
        Ok(p) => {
            println!(
                "log: {} bytes, header version {:?}, {} batches, {} ops{}, {} torn bytes",
                log.len(),
                p.version,
                p.batches,
                p.ops.len(),
                if p.version == Some(h.version) { "" } else { " (ignored: other version)" },
                p.torn_bytes
            );
            // The log header is rewritten only after a newer tree header is durable (see recovery in the format
            // page), so an invalid one, or one newer than the newest valid tree header, is damage.
            match p.version {
                None => problems.push("log: invalid log header".to_string()),
                Some(v) if v > h.version => problems.push(format!(
                    "log: extends version {v} but the newest valid tree header is {}",
                    h.version
                )),
                _ => {}
            }
            for op in p.ops.iter().take(20) {
                println!("  {op:?}");
            }
            if p.ops.len() > 20 {
                println!("  ... {} more", p.ops.len() - 20);
            }
        }
        Err(e) => problems.push(format!("log: {e}")),
    }
    // The tree as of the header (without the log) and its segment usage.
    match TreeFile::open(tfile, opts.tree_config()) {
        Ok((_, tree)) => {
            let mut data_extents = 0u64;
            let mut holes = 0u64;
            let mut usage = std::collections::BTreeMap::<u64, u64>::new();
            tree.for_each_extent(|_, e| {
                if e.is_hole() {
                    holes += 1;
                } else {
                    data_extents += 1;
                    *usage.entry(e.addr / opts.segment_size).or_default() += e.len as u64;
                }
            })?;
            println!(
                "tree: size {} extents {} (data {data_extents}, holes {holes}) nodes {}",
                tree.size(),
                tree.extent_count(),
                tree.node_count()
            );
            let cap = opts.segment_capacity();
            println!("segments with live data: {}", usage.len());
            for (s, v) in usage.iter().take(64) {
                println!("  segment {s}: {v} live bytes ({:.1}%)", 100.0 * *v as f64 / cap as f64);
            }
            // Verify every mapped block.
            let dfile = fs.open(&dir.join(DATA_FILE), OpenMode::ReadOnly)?;
            let mut segs = flexfile::segments::Segments::new(dfile, &opts)?;
            let mut bad = 0u64;
            let mut buf = Vec::new();
            let mut extents = Vec::new();
            tree.for_each_extent(|off, e| {
                if !e.is_hole() {
                    extents.push((off, e.len, e.addr));
                }
            })?;
            for (off, len, addr) in extents {
                buf.resize(len as usize, 0);
                if let Err(e) = segs.read(addr, &mut buf) {
                    bad += 1;
                    if bad <= 5 {
                        problems.push(format!("extent at {off}: {e}"));
                    }
                }
            }
            if bad > 5 {
                problems.push(format!("... {bad} damaged extents in all"));
            }
        }
        Err(e) => problems.push(format!("tree: {e}")),
    }
    if problems.is_empty() {
        println!("check: OK");
        Ok(ExitCode::SUCCESS)
    } else {
        for p in &problems {
            println!("check: {p}");
        }
        Ok(ExitCode::FAILURE)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Data with a multi-byte character among its hex digits panicked (a `&str` sliced inside the character);
    /// a line that is not UTF-8 ended the session.
    #[test]
    fn regression_malformed_bytes_are_parse_errors_and_the_session_goes_on() {
        let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
        let mut f = FlexFile::create(fs, Path::new("/s"), Options::default()).unwrap();
        let script: &[u8] = b"write 0 0xa\xc3\xa90\nwrite 0 0x+a\n\xff\ninsert 0 0xab\r\nsize\n";
        let mut out = Vec::new();
        session(&mut f, script, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "ERR parse bad hex: 0xa\u{e9}0\nERR parse bad hex: 0x+a\nERR parse line is not valid UTF-8\nOK\n1\n"
        );
    }

    #[test]
    fn shell_session_follows_the_spec() {
        let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
        let mut f = FlexFile::create(fs, Path::new("/s"), Options::default()).unwrap();
        let script = "size\nwrite 0 0x616263\ninsert 1 0x5858\nread 0 5\ncollapse 0 1\nread 0 4\nwrite 6 0x01\n\
                      read 0 7\ntruncate 2\nsize\nsettag 1 7\ntag 1\ntag 0\nsync\nread 0 9\nbogus\nwrite 0 0x1\nstats\n";
        let mut out = Vec::new();
        session(&mut f, script.as_bytes(), &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            &lines[..17],
            &[
                "0",
                "OK",
                "OK",
                "0x6158586263",
                "OK",
                "0x58586263",
                "OK",
                "0x58586263000001",
                "OK",
                "2",
                "OK",
                "7",
                "0",
                "OK",
                "ERR invalid read 0+9 past the end (2)",
                "ERR parse unknown command `bogus`",
                "ERR parse odd number of hex digits: 0x1",
            ]
        );
        assert!(lines[17].starts_with('{') && lines[17].contains("\"extents\""));
    }
}
