//! `rangedb inspect`: dump, layout, check and scan of the LSM engine's files (our `ldb` / `sst_dump`).
//!
//! `rangedb inspect wal FILE`, `sst FILE`, `manifest FILE`, `db DIR`, each with `--action dump|layout|check|scan`;
//! `rangedb inspect blockstore DIR` is the block store's (in `blockstore_inspect.rs`), `rangedb inspect flexdb DIR`
//! FlexDB's (in `flexdb.rs`).
//! `check` verifies every checksum, key ordering and reference and exits non-zero on the first problem. The other
//! actions print what they can read and exit non-zero on corruption, but not on a WAL's or MANIFEST's torn tail.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use lsm::block::{Block, BlockIter};
use lsm::format::{FOOTER_LEN, Footer, Handle, TRAILER_LEN};
use lsm::{ikey, wal::LogReader};

use crate::tokens::show;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Arguments of `rangedb inspect`.
#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// What PATH is: `wal`, `sst`, `manifest`, `db` (an LSM database directory), `blockstore` (a block-store
    /// directory), `flexdb` (a FlexDB store) or `flexfile` (a FlexFile directory; `--action` is ignored: it dumps
    /// and checks).
    kind: String,
    /// The file or directory.
    path: PathBuf,
    /// `dump` (records/entries), `layout` (blocks and sizes), `check` (checksums, order, references), `scan`
    /// (live key-value pairs; `db` only).
    #[arg(long, default_value = "dump")]
    action: String,
}

fn show_ikey(k: &[u8]) -> String {
    match ikey::parse(k) {
        Some(p) => format!("{}@{}:{:?}", show(p.user_key), p.seq, p.kind),
        None => format!("<bad internal key {}>", show(k)),
    }
}

/// An index key: a block's last key, or a separator between two blocks (a user key that no entry has, with the
/// seek trailer; docs/formats/sst.md), shown as such.
fn show_index_key(k: &[u8]) -> String {
    match ikey::parse(k) {
        Some(p) if p.seq == ikey::MAX_SEQ && p.kind == ikey::SEEK_KIND => {
            format!("{} (separator)", show(p.user_key))
        }
        _ => show_ikey(k),
    }
}

fn split(path: &Path) -> (Arc<dyn vfs::Fs>, String) {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    (Arc::new(vfs::OsFs::new()), name)
}

fn wal(path: &Path, action: &str) -> Res<()> {
    let (fs, name) = split(path);
    let mut r = LogReader::open(&*fs, path, &name)?;
    let mut n = 0;
    while let Some(rec) = r.next_record() {
        let b = lsm::WriteBatch::from_data(rec, &name)?;
        n += 1;
        if action == "dump" {
            println!("batch seq={} count={}", b.seq(), b.count());
            for op in b.iter() {
                match op.map_err(|m| m.to_string())? {
                    lsm::batch::Op::Put(k, v) => println!("  put {} {}", show(k), show(v)),
                    lsm::batch::Op::Delete(k) => println!("  del {}", show(k)),
                    lsm::batch::Op::DeleteRange(a, z) => println!("  delrange {} {}", show(a), show(z)),
                }
            }
        }
    }
    println!("{n} records, {} bytes of complete records", r.offset());
    damaged_tail(&r, &name, action)
}

/// Reports where a log stopped early, and whether a later sync mark shows the damaged bytes had been synced
/// (corruption) rather than torn. `check` fails on either; the other actions fail only on corruption, because
/// a torn tail is what a crash normally leaves and recovery drops it, while damage to synced records is data
/// loss a script reading the dump must not miss.
fn damaged_tail(r: &LogReader, name: &str, action: &str) -> Res<()> {
    if let Some(why) = r.tail_dropped() {
        match r.check_durable() {
            Ok(()) => {
                println!("damaged tail: {why}");
                if action == "check" {
                    return Err(format!("{name}: {why}").into());
                }
            }
            Err(e) => {
                println!("damaged synced records: {e}");
                return Err(e.into());
            }
        }
    }
    Ok(())
}

/// Dumps or checks a MANIFEST; returns whether the database keeps its range deletes in a global index (the last
/// edit that names a range-index state says so).
fn manifest(path: &Path, action: &str) -> Res<bool> {
    let (fs, name) = split(path);
    let mut r = LogReader::open(&*fs, path, &name)?;
    let mut n = 0;
    let mut global = false;
    while let Some(rec) = r.next_record() {
        let e = lsm::edit::VersionEdit::decode(rec).map_err(|m| format!("{name}: {m}"))?;
        n += 1;
        if action == "dump" {
            println!(
                "edit {n}: log={:?} next_file={:?} last_seq={:?} comparator={:?}",
                e.log_number, e.next_file, e.last_seq, e.comparator
            );
            for (l, f) in &e.deleted {
                println!("  delete L{l} #{f}");
            }
            for (l, f) in &e.added {
                println!(
                    "  add L{l} #{} size={} [{} .. {}] seq {}..{} entries={} dels={} rangedels={}",
                    f.number,
                    f.size,
                    show_ikey(&f.smallest),
                    show_ikey(&f.largest),
                    f.smallest_seq,
                    f.largest_seq,
                    f.num_entries,
                    f.num_deletions,
                    f.num_range_dels
                );
            }
        }
        if let Some(ri) = &e.range_index {
            global = true;
            if action == "dump" {
                let files: Vec<String> = ri.files.iter().map(|(l, f)| format!("L{l} #{f}")).collect();
                println!("  range index: watermark {} files [{}]", ri.watermark, files.join(", "));
            }
        }
    }
    println!("{n} edits");
    damaged_tail(&r, &name, action)?;
    Ok(global)
}

fn read_block(f: &dyn vfs::File, h: Handle) -> Res<Block> {
    let mut buf = vec![0u8; (h.size + TRAILER_LEN as u64) as usize];
    f.read_exact_at(&mut buf, h.offset)?;
    let raw = lsm::format::unwrap_block(buf).map_err(|m| format!("block at {}: {m}", h.offset))?;
    Ok(Block::new(raw).ok_or("malformed block")?)
}

fn sst(path: &Path, action: &str) -> Res<()> {
    let (fs, _) = split(path);
    sst_on(fs, path, action)
}

/// `sst` on a table of `fs` (the overlay a `db` check recovered into, where a replayed WAL's table lives).
fn sst_on(fs: Arc<dyn vfs::Fs>, path: &Path, action: &str) -> Res<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let f = fs.open(path, vfs::OpenMode::ReadOnly)?;
    let size = f.len()?;
    let number = lsm::filename::parse(&name)
        .and_then(|k| if let lsm::filename::FileKind::Table(n) = k { Some(n) } else { None })
        .unwrap_or(0);
    let cache = Arc::new(lsm::cache::BlockCache::new(0));
    let t = Arc::new(lsm::table::Table::open(f.clone(), number, &name, size, cache)?);
    let p = t.props();
    match action {
        "layout" => {
            let mut fb = [0u8; FOOTER_LEN];
            f.read_exact_at(&mut fb, size - FOOTER_LEN as u64)?;
            let footer = Footer::decode(&fb)?;
            let index = read_block(&*f, footer.index)?;
            let mut it = BlockIter::new(Arc::new(index), ikey::cmp);
            it.seek_to_first();
            while it.valid() {
                let h = Handle::decode(it.value()).ok_or("bad handle")?;
                println!(
                    "data   offset={:<10} size={:<8} index_key={}",
                    h.offset,
                    h.size,
                    show_index_key(it.key())
                );
                it.next();
            }
            println!("meta   offset={:<10} size={}", footer.metaindex.offset, footer.metaindex.size);
            println!("index  offset={:<10} size={}", footer.index.offset, footer.index.size);
            println!(
                "footer offset={:<10} size={FOOTER_LEN} version={}",
                size - FOOTER_LEN as u64,
                footer.version
            );
        }
        "dump" | "check" | "scan" => {
            use lsm::iter::InternalIter;
            let mut it = t.iter();
            it.seek_to_first();
            let mut prev: Option<Vec<u8>> = None;
            let mut n = 0u64;
            while it.valid() {
                if ikey::parse(it.key()).is_none() {
                    return Err(format!("malformed internal key {}", show(it.key())).into());
                }
                if let Some(pk) = &prev
                    && ikey::cmp(pk, it.key()).is_ge()
                {
                    return Err(format!("keys out of order at {}", show_ikey(it.key())).into());
                }
                if action != "check" {
                    println!("{} => {}", show_ikey(it.key()), show(it.value()));
                }
                prev = Some(it.key().to_vec());
                n += 1;
                it.next();
            }
            it.status()?;
            if action != "check" {
                for fr in t.tombstones().iter() {
                    println!("rangedel [{} .. {}) seqs={:?}", show(&fr.start), show(&fr.end), fr.seqs);
                }
            }
            if n != p.num_entries {
                return Err(format!("{n} entries but properties say {}", p.num_entries).into());
            }
        }
        other => return Err(format!("unknown action {other}").into()),
    }
    println!("{p:?}");
    Ok(())
}

fn db(dir: &Path, action: &str) -> Res<()> {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    // `check` and `scan` open the database, and opening recovers by writing (the WAL replayed into a table, a new
    // MANIFEST, unreferenced files deleted). Through an overlay the recovered state is read while the directory
    // stays as it was: a damaged database keeps every byte for the next look.
    let view = || -> Arc<dyn vfs::Fs> { Arc::new(vfs::OverlayFs::new(fs.clone())) };
    let current = vfs::read_all(&*fs, &dir.join("CURRENT")).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{} holds no LSM database (no CURRENT file)", dir.display()),
        _ => format!("{}: {e}", dir.join("CURRENT").display()),
    })?;
    let mname = String::from_utf8_lossy(&current).trim().to_string();
    println!("CURRENT -> {mname}");
    // A database opens only with the range-delete strategy it was created with; the MANIFEST tells which.
    let options = |global: bool| -> Res<lsm::Options> {
        Ok(lsm::Options {
            create_if_missing: false,
            disable_auto_compactions: true,
            range_delete_strategy: lsm::strategy_by_name(if global { "global" } else { "local" })?,
            ..Default::default()
        })
    };
    match action {
        "dump" | "layout" => {
            manifest(&dir.join(&mname), "dump")?;
            let mut names = fs.list_dir(dir)?;
            // GLORAN's DR-tree files live in a subdirectory.
            if let Some(i) = names.iter().position(|n| n == lsm::rangedel_global::INDEX_DIR) {
                let sub = names.remove(i);
                names.extend(fs.list_dir(&dir.join(&sub))?.into_iter().map(|n| format!("{sub}/{n}")));
            }
            for n in names {
                let len = fs.open(&dir.join(&n), vfs::OpenMode::ReadOnly)?.len()?;
                println!("{n:<20} {len}");
            }
        }
        "check" => {
            let global = manifest(&dir.join(&mname), "check")?;
            // Opening replays the MANIFEST and WALs and checks references; then every table is read whole.
            let recovered = view();
            let d = lsm::Db::open(recovered.clone(), dir, options(global)?)?;
            for fe in d.files() {
                sst_on(recovered.clone(), &dir.join(lsm::filename::table_name(fe.info.number)), "check")?;
            }
            if d.check_range_deletes()? {
                let g = d.stats().range_delete_global.unwrap_or_default();
                let levels = g.level_areas.iter().filter(|&&a| a > 0).count();
                println!(
                    "global range index: ok, {} areas in {levels} levels",
                    g.level_areas.iter().sum::<u64>()
                );
            }
            let sa = d.space_amplification()?;
            println!("ok: {} live keys, {} stored entries", sa.live_entries, sa.total_entries);
            d.close()?;
        }
        "scan" => {
            let global = manifest_is_global(&dir.join(&mname))?;
            let d = lsm::Db::open(view(), dir, options(global)?)?;
            let mut it = d.iter(&lsm::ReadOptions::default())?;
            it.seek_to_first();
            while it.valid() {
                println!("{} {}", show(it.key()), show(it.value()));
                it.next();
            }
            it.status()?;
            d.close()?;
        }
        other => return Err(format!("unknown action {other}").into()),
    }
    Ok(())
}

/// Whether the MANIFEST at `path` says the database keeps a global range index, without printing its edits.
fn manifest_is_global(path: &Path) -> Res<bool> {
    let (fs, name) = split(path);
    let mut r = LogReader::open(&*fs, path, &name)?;
    let mut global = false;
    while let Some(rec) = r.next_record() {
        let e = lsm::edit::VersionEdit::decode(rec).map_err(|m| format!("{name}: {m}"))?;
        global |= e.range_index.is_some();
    }
    Ok(global)
}

/// Runs `rangedb inspect`.
pub fn run(a: InspectArgs) -> Res<ExitCode> {
    crate::signals::die_on_broken_pipe();
    // Named here: the engines' open errors do not say which path they could not find.
    if !a.path.exists() {
        return Err(format!("{}: no such file or directory", a.path.display()).into());
    }
    match a.kind.as_str() {
        "wal" => wal(&a.path, &a.action)?,
        "manifest" => {
            manifest(&a.path, &a.action)?;
        }
        "sst" => sst(&a.path, &a.action)?,
        "db" => {
            crate::dirs::existing(&a.path)?;
            db(&a.path, &a.action)?;
        }
        "blockstore" => {
            crate::dirs::existing(&a.path)?;
            crate::blockstore_inspect::run(&a.path, &a.action)?;
        }
        "flexdb" => return crate::flexdb::inspect_store(&a.path, &a.action),
        // A FlexFile directory: one report (headers, log, segments, extent map) that always checks.
        "flexfile" => return crate::flexfile::inspect(&a.path),
        other => {
            return Err(format!(
                "unknown kind {other} (wal, sst, manifest, db, blockstore, flexdb, flexfile)"
            )
            .into());
        }
    }
    Ok(ExitCode::SUCCESS)
}
