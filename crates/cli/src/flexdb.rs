//! `rangedb flexdb exec` (the kv shell of the kv-shell spec on the FlexDB engine) and `rangedb flexdb inspect`
//! (open a store, check it deeply, print its counters).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use flexdb::wal::Op;
use flexdb::{Db, Options, WriteOptions};

use crate::kv_engine::{KvEngine, KvError, KvResult, Update};
use crate::kv_session::session;
use crate::tokens::show;

/// Arguments of `rangedb flexdb`.
#[derive(Debug, clap::Args)]
pub struct FlexdbArgs {
    #[command(subcommand)]
    cmd: FlexdbCmd,
}

/// Engine options as flags named after `flexdb::Options` fields.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FlexdbOpts {
    /// flexdb: memtable budget in bytes.
    #[arg(long)]
    memtable_bytes: Option<usize>,
    /// flexdb: most keys per interval.
    #[arg(long)]
    interval_max_keys: Option<usize>,
    /// flexdb: most bytes per interval.
    #[arg(long)]
    interval_max_bytes: Option<u64>,
    /// flexdb: interval cache budget in bytes.
    #[arg(long)]
    cache_bytes: Option<usize>,
    /// flexdb: distance between anchors read when the index is rebuilt at open.
    #[arg(long)]
    rebuild_interval: Option<u64>,
    /// flexdb: threads reading anchor keys when the index is rebuilt at open.
    #[arg(long)]
    rebuild_threads: Option<usize>,
    /// flexdb: utilisation of the table's data file below which its garbage collection starts, as N/D (default
    /// 1/2; 30/32, the cap, keeps the file smallest and collects the most).
    #[arg(long)]
    gc_start_utilization: Option<bench::Fraction>,
}

impl FlexdbOpts {
    /// The flags given, as typed on the command line.
    pub fn given(&self) -> Vec<&'static str> {
        [
            ("--memtable-bytes", self.memtable_bytes.is_some()),
            ("--interval-max-keys", self.interval_max_keys.is_some()),
            ("--interval-max-bytes", self.interval_max_bytes.is_some()),
            ("--cache-bytes", self.cache_bytes.is_some()),
            ("--rebuild-interval", self.rebuild_interval.is_some()),
            ("--rebuild-threads", self.rebuild_threads.is_some()),
            ("--gc-start-utilization", self.gc_start_utilization.is_some()),
        ]
        .into_iter()
        .filter_map(|(flag, set)| set.then_some(flag))
        .collect()
    }

    fn options(&self, create: bool) -> Options {
        let d = Options::default();
        let mut flexfile = d.flexfile.clone();
        if let Some(bench::Fraction(num, den)) = self.gc_start_utilization {
            flexfile.gc_start_utilization = (num, den);
        }
        Options {
            create_if_missing: create,
            memtable_bytes: self.memtable_bytes.unwrap_or(d.memtable_bytes),
            interval_max_keys: self.interval_max_keys.unwrap_or(d.interval_max_keys),
            interval_max_bytes: self.interval_max_bytes.unwrap_or(d.interval_max_bytes),
            cache_bytes: self.cache_bytes.unwrap_or(d.cache_bytes),
            rebuild_interval: self.rebuild_interval.unwrap_or(d.rebuild_interval),
            rebuild_threads: self.rebuild_threads.unwrap_or(d.rebuild_threads),
            flexfile,
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
    match args.cmd {
        FlexdbCmd::Exec { dir, create, sync, opts } => {
            crate::dirs::absent_or_dir(&dir)?;
            let mut engine = open_engine(&dir, create, &opts, vfs::torn::WalRecovery::Strict)
                .map_err(|e| e.to_string())?;
            let stdin = std::io::stdin();
            let stdout = std::io::stdout();
            session(&mut *engine, sync, &mut stdin.lock(), &mut stdout.lock())?;
            engine.close().map_err(|e| e.to_string())?;
            Ok(ExitCode::SUCCESS)
        }
        FlexdbCmd::Inspect { dir } => {
            crate::signals::die_on_broken_pipe();
            inspect_store(&dir, "check")
        }
    }
}

/// `rangedb inspect flexdb DIR --action A` and `rangedb flexdb inspect DIR` (action `check`).
///
/// Nothing on disk changes: `dump` reads the files without opening the store, and the other actions open it
/// through a copy-on-write view, so its recovery runs in memory.
///
/// - `dump`: the files of the store and every logged batch.
/// - `layout`: opens the store (replaying its logs into the table) and lists the sparse index: one line per
///   interval with its index key, file offset and size.
/// - `check`: opens the store, checks the index against the table and reads and verifies every interval; prints
///   the counters as JSON and `check: ok`, or `check: KIND message` and fails.
/// - `scan`: opens the store and prints every live pair in key order.
pub fn inspect_store(dir: &Path, action: &str) -> Result<ExitCode, bench::Error> {
    crate::dirs::existing(dir)?;
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    // Opening recovers by writing (logs replayed into the table, a checkpoint, old logs removed). Through an
    // overlay the recovered state is read while the directory stays exactly as it was.
    let view = || -> Arc<dyn vfs::Fs> { Arc::new(vfs::OverlayFs::new(fs.clone())) };
    if !fs.exists(&dir.join(flexdb::table::TABLE_DIR).join(flexfile::flexfile::TREE_FILE))? {
        return Err(format!("{} holds no FlexDB store", dir.display()).into());
    }
    match action {
        "dump" => {
            let mut names = fs.list_dir(dir)?;
            names.sort();
            let mut logs = Vec::new();
            for n in &names {
                let p = dir.join(n);
                if let Some(num) = flexdb::wal::parse_name(n) {
                    logs.push((num, p.clone()));
                }
                match fs.open(&p, vfs::OpenMode::ReadOnly) {
                    Ok(f) => println!("{n:<24} {}", f.len()?),
                    Err(_) => println!("{n:<24} (directory)"),
                }
            }
            logs.sort();
            for (i, (num, p)) in logs.iter().enumerate() {
                let newest = i + 1 == logs.len();
                let r = flexdb::wal::read_log(fs.as_ref(), p, newest)?;
                println!("log {num}: {} batches, {} bytes of torn tail", r.batches.len(), r.dropped_bytes);
                for b in r.batches {
                    println!("  batch of {}", b.len());
                    for op in b {
                        match op {
                            Op::Put(k, v) => println!("    put {} {}", show(&k), show(&v)),
                            Op::Delete(k) => println!("    del {}", show(&k)),
                            Op::DeleteRange(a, z) => println!("    delrange {} {}", show(&a), show(&z)),
                        }
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        "layout" => {
            let db = Db::open(view(), dir, Options::default())?;
            let l = db.layout()?;
            println!("{} intervals, {} table bytes", l.len(), db.stats().table_size);
            for (k, off, size) in l {
                println!("{off:>14} {size:>10} {}", show(&k));
            }
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        "check" => {
            let db = Db::open(view(), dir, Options::default())?;
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
        "scan" => {
            let db = Db::open(view(), dir, Options::default())?;
            let mut n = 0u64;
            for r in db.iter(b"", None, false) {
                let (k, v) = r?;
                println!("{} {}", show(&k), show(&v));
                n += 1;
            }
            println!("{n} pairs");
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        other => Err(format!("unknown action {other} (dump, layout, check, scan)").into()),
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

/// FlexDB behind the kv shell, with snapshots by shell id.
struct FlexdbEngine {
    db: Db,
    snaps: HashMap<u64, flexdb::Snapshot>,
}

impl FlexdbEngine {
    fn new(db: Db) -> FlexdbEngine {
        FlexdbEngine { db, snaps: HashMap::new() }
    }

    fn snap(&self, id: u64) -> KvResult<&flexdb::Snapshot> {
        self.snaps.get(&id).ok_or_else(|| KvError::new("invalid", format!("no snapshot {id}")))
    }
}

impl From<flexdb::Error> for KvError {
    fn from(e: flexdb::Error) -> Self {
        // As for the LSM engine: a background error answers with the kind of the failure inside it.
        let kind = match &e {
            flexdb::Error::Background(inner) if inner.is_corruption() => "corruption",
            flexdb::Error::Background(_) => "io",
            e => e.kind_name(),
        };
        KvError::new(kind, e.to_string())
    }
}

impl KvEngine for FlexdbEngine {
    fn write(&mut self, ups: Vec<Update>, sync: bool) -> KvResult<()> {
        let ops = ups
            .into_iter()
            .map(|u| match u {
                Update::Put(k, v) => Op::Put(k.into(), v.into()),
                Update::Del(k) => Op::Delete(k.into()),
                Update::DelRange(a, b) => Op::DeleteRange(a.into(), b.into()),
            })
            .collect();
        Ok(self.db.write(ops, WriteOptions { sync })?)
    }
    fn get(&mut self, k: &[u8], snap: Option<u64>) -> KvResult<Option<Vec<u8>>> {
        match snap {
            Some(id) => Ok(self.db.get_at(k, self.snap(id)?)?),
            None => Ok(self.db.get(k)?),
        }
    }
    fn scan(
        &mut self,
        a: &[u8],
        b: &[u8],
        limit: usize,
        rev: bool,
        snap: Option<u64>,
    ) -> KvResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let snap = snap.map(|id| self.snap(id)).transpose()?;
        if a >= b {
            return Ok(Vec::new());
        }
        match snap {
            Some(s) => Ok(self.db.scan_at(a, Some(b), limit, rev, s)?),
            None => Ok(self.db.scan(a, Some(b), limit, rev)?),
        }
    }
    fn snapshot(&mut self) -> KvResult<u64> {
        let s = self.db.snapshot();
        let id = s.id();
        self.snaps.insert(id, s);
        Ok(id)
    }
    fn release(&mut self, id: u64) -> KvResult<()> {
        match self.snaps.remove(&id) {
            Some(_) => Ok(()),
            None => Err(KvError::new("invalid", format!("no snapshot {id}"))),
        }
    }
    fn flush(&mut self) -> KvResult<()> {
        Ok(self.db.flush()?)
    }
    fn sync(&mut self) -> KvResult<()> {
        Ok(self.db.sync()?)
    }
    /// FlexDB has no compaction; the closest meaning is "everything committed into the table".
    fn compact(&mut self, _range: Option<(Vec<u8>, Vec<u8>)>) -> KvResult<()> {
        Ok(self.db.flush()?)
    }
    fn stats(&mut self) -> KvResult<String> {
        Ok(stats_json(&self.db))
    }
    fn close(self: Box<Self>) -> KvResult<()> {
        let FlexdbEngine { db, snaps } = *self;
        drop(snaps);
        Ok(db.close()?)
    }
}

/// Opens FlexDB at `dir` for `kv exec --engine flexdb` and `flexdb exec`.
pub fn open_engine(
    dir: &Path,
    create: bool,
    opts: &FlexdbOpts,
    recovery: vfs::torn::WalRecovery,
) -> KvResult<Box<dyn KvEngine>> {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    let db = Db::open(fs, dir, Options { wal_recovery: recovery, ..opts.options(create) })?;
    crate::kv_engine::report_salvage(db.salvaged(), db.stats().wal_tail_dropped_bytes);
    Ok(Box::new(FlexdbEngine::new(db)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_session_script() {
        let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
        let db =
            Db::open(fs, Path::new("db"), Options { create_if_missing: true, ..Options::tiny() }).unwrap();
        let mut engine: Box<dyn KvEngine> = Box::new(FlexdbEngine::new(db));
        let script = "put a 1\nput b 0x\nget b\nget zz\nbatch 2\nput c 3\ndel a\nscan a z\nrscan a z 1\n\
                      delrange a c\nscan 0x z\nflush\nbogus\n";
        let mut out = Vec::new();
        session(&mut *engine, false, &mut script.as_bytes(), &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            out,
            "OK\nOK\n0x\nNOT_FOUND\nOK\nb 0x\nc 3\nEND 2\nc 3\nEND 1\nOK\nc 3\nEND 1\nOK\nERR parse unknown command bogus\n"
        );
    }

    #[test]
    fn kv_session_snapshots() {
        let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
        let db =
            Db::open(fs, Path::new("db"), Options { create_if_missing: true, ..Options::tiny() }).unwrap();
        let mut engine: Box<dyn KvEngine> = Box::new(FlexdbEngine::new(db));
        let script = "put a 1\nput b 2\nsnapshot\nput a 3\nflush\ndelrange a z\nput c 4\nsnapshot\ndel c\n\
                      get a @1\nget a\nscan a z @1\nrscan a z 1 @1\nscan a z @2\nscan a z\nrelease 1\nget b @1\n\
                      get c @2\nrelease 1\nstats\nrelease 2\n";
        let mut out = Vec::new();
        session(&mut *engine, false, &mut script.as_bytes(), &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let (head, tail) = out.split_once("{").unwrap();
        assert_eq!(
            head,
            "OK\nOK\nSNAPSHOT 1\nOK\nOK\nOK\nOK\nSNAPSHOT 2\nOK\n\
             1\nNOT_FOUND\na 1\nb 2\nEND 2\nb 2\nEND 1\nc 4\nEND 1\nEND 0\nOK\nERR invalid no snapshot 1\n\
             4\nERR invalid no snapshot 1\n"
        );
        assert!(tail.contains("\"snapshots\":1,"), "{tail}");
        assert!(tail.ends_with("}\nOK\n"), "{tail}");
        engine.close().unwrap();
    }
}
