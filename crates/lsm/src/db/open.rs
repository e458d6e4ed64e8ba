//! Opening a database (docs/lsm.md §6, recovery): directories made durable, the MANIFEST recovered, WALs
//! replayed into L0 tables, a fresh WAL named by a new MANIFEST edit, unreferenced files removed.

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::WalRecovery;
use crate::batch::WriteBatch;
use crate::cache::BlockCache;
use crate::compaction::{self, OutputSink};
use crate::edit::VersionEdit;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::ikey;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::output_cut::OutputCut;
use crate::rangedel::{self, RangeDelCounters};
use crate::stats::Counters;
use crate::table::TableOptions;
use crate::table_cache::{self, TableCache};
use crate::tombstones::Fragments;
use crate::version::{Obsolete, VersionSet};
use crate::wal::{LogReader, LogWriter};

use super::{
    Db, Inner, Recovery, SnapshotList, State, Wal, WriteQueue, apply_batch, background, lock, range_reduce,
    table_options,
};

impl Db {
    /// Opens (or with `create_if_missing` creates) the database in `dir`.
    pub fn open(fs: Arc<dyn vfs::Fs>, dir: impl AsRef<Path>, opts: Options) -> Result<Db> {
        opts.validate()?;
        let dir = dir.as_ref().to_path_buf();
        // Without `create_if_missing` a mistyped path must fail without leaving a directory or a LOCK file
        // behind (LevelDB creates both first). The check is repeated under the lock below.
        if !opts.create_if_missing && !fs.exists(&dir.join("CURRENT"))? {
            return Err(Error::InvalidArgument(format!("database {} does not exist", dir.display())));
        }
        // Create missing directories and make their entries durable: a new directory whose parent was never synced
        // may vanish, with everything in it, at a power loss.
        let mut created = Vec::new();
        let mut d = Some(dir.as_path());
        while let Some(p) = d {
            if p.as_os_str().is_empty() || fs.exists(p)? {
                break;
            }
            created.push(p.to_path_buf());
            d = p.parent();
        }
        fs.create_dir_all(&dir)?;
        for c in created.iter().rev() {
            if let Some(parent) = c.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs.sync_dir(parent)?;
            }
        }
        let lock_file = fs.lock(&dir.join("LOCK")).map_err(|e| {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                Error::InvalidArgument(format!("database {} is in use", dir.display()))
            } else {
                e.into()
            }
        })?;
        let obsolete: Obsolete = Arc::new(Mutex::new(Vec::new()));
        let blocks = Arc::new(BlockCache::new(opts.block_cache_size));
        let tables = table_cache::capacity(opts.max_open_files, vfs::open_file_limit());
        let table_cache = Arc::new(TableCache::new(fs.clone(), dir.clone(), blocks, tables));
        let mut vs = VersionSet::new(fs.clone(), dir.clone(), obsolete.clone());
        vs.max_manifest_size = opts.max_manifest_file_size;
        let exists = fs.exists(&dir.join("CURRENT"))?;
        if exists {
            if opts.error_if_exists {
                return Err(Error::InvalidArgument(format!("database {} exists", dir.display())));
            }
            vs.recover()?;
        } else if !opts.create_if_missing {
            return Err(Error::InvalidArgument(format!("database {} does not exist", dir.display())));
        }
        let range_deletes = open_range_deletes(&fs, &dir, &opts, &vs)?;
        let names = fs.list_dir(&dir)?;
        let mut logs: Vec<u64> = names
            .iter()
            .filter_map(|n| match filename::parse(n) {
                Some(FileKind::Log(x)) if x >= vs.log_number => Some(x),
                _ => None,
            })
            .collect();
        logs.sort_unstable();
        if exists && vs.log_number != 0 && !logs.contains(&vs.log_number) {
            return Err(Error::corruption(
                filename::log_name(vs.log_number),
                "WAL named by the MANIFEST is missing (the MANIFEST may have lost an edit)",
            ));
        }
        // Files written after the last MANIFEST edit (a crash mid-flush) may carry numbers the MANIFEST never
        // recorded: never reuse a number that exists on disk.
        for n in &names {
            if let Some(FileKind::Log(x) | FileKind::Table(x) | FileKind::Manifest(x)) = filename::parse(n) {
                vs.next_file = vs.next_file.max(x + 1);
            }
        }
        // Replay WALs in order into memtables, flushing to L0 whenever one fills.
        let topts = table_options(&opts);
        let mut edit = VersionEdit::default();
        let mut last_seq = vs.last_seq;
        let mut mem = Arc::new(MemTable::new(0));
        let (mut bytes_flushed, mut flushes) = (0, 0);
        let mut recovery = Recovery::default();
        let persisted = range_deletes.persisted_seq();
        // Only the newest WAL that holds anything may end in a torn append. The engine syncs a WAL whole before it
        // writes to a newer one; an open that recovered a torn WAL creates the next one empty and writes nothing
        // to it before the MANIFEST edit that retires the torn one is durable, so a crash in between leaves the
        // torn WAL followed by an empty one (`regression_a_crash_while_recovering_a_torn_wal_reopens`).
        let mut last_written = 0;
        for (i, &l) in logs.iter().enumerate() {
            if fs.open(&dir.join(filename::log_name(l)), vfs::OpenMode::ReadOnly)?.len()? > 0 {
                last_written = i;
            }
        }
        for (i, &l) in logs.iter().enumerate() {
            let name = filename::log_name(l);
            let mut r = LogReader::open(&*fs, &dir.join(&name), &name)?;
            // A record whose checksum holds but whose batch does not decode (a writer's bug, or damage the
            // CRC missed): strict opens refuse it; point-in-time recovery stops before it.
            let mut undecodable = None;
            let mut start = r.offset();
            while let Some(rec) = r.next_record() {
                let b = match WriteBatch::from_data(rec, &name) {
                    Ok(b) => b,
                    Err(e) if opts.wal_recovery == WalRecovery::PointInTime => {
                        undecodable = Some(e);
                        break;
                    }
                    Err(e) => return Err(e),
                };
                recovery.records += 1;
                start = r.offset();
                apply_batch(&mem, &*range_deletes, &b)?;
                last_seq = last_seq.max(b.seq() + u64::from(b.count()).saturating_sub(1));
                if mem.approx_size() >= opts.write_buffer_size {
                    bytes_flushed += flush_to_l0(&fs, &dir, &mut vs, &topts, &opts, &mem, &mut edit)?;
                    flushes += 1;
                    mem = Arc::new(MemTable::new(0));
                }
            }
            // In the newest written WAL (see above), damage that a later sync mark shows had been synced is
            // corruption too; in an older one any damage is.
            let checked = if let Some(e) = undecodable {
                recovery.dropped_bytes += (r.offset() + r.unread_bytes() - start) as u64;
                recovery.stopped_at = Some(format!(
                    "{name}: the record at or after offset {start} holds a write batch that does not decode"
                ));
                Err(e)
            } else if i < last_written {
                r.check_complete()
            } else {
                r.check_durable()
            };
            if let Some(why) = r.tail_dropped() {
                recovery.dropped_bytes += r.unread_bytes() as u64;
                recovery.stopped_at = Some(format!("{name}: {why}"));
            }
            match checked {
                Ok(()) => {}
                Err(e) if opts.wal_recovery == WalRecovery::PointInTime => {
                    if persisted > last_seq {
                        // An index flush wrote range records logged after the damage: dropping their WAL
                        // records would keep the deletes without the writes logged before them.
                        return Err(Error::corruption(
                            name,
                            format!(
                                "{}; point-in-time recovery cannot drop the records after it: the range-delete \
                                 index already holds records up to sequence {persisted}",
                                r.tail_dropped().unwrap_or("damage")
                            ),
                        ));
                    }
                    // Salvage: the state before the damage; every later record and WAL is newer, so dropped.
                    recovery.salvaged = Some(e.to_string());
                    for &later in &logs[i + 1..] {
                        recovery.dropped_bytes +=
                            fs.open(&dir.join(filename::log_name(later)), vfs::OpenMode::ReadOnly)?.len()?;
                    }
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        if !mem.is_empty() {
            bytes_flushed += flush_to_l0(&fs, &dir, &mut vs, &topts, &opts, &mem, &mut edit)?;
            flushes += 1;
        }
        // A fresh WAL, then the MANIFEST that names it: the named WAL always exists.
        let wal_number = vs.new_file_number();
        let wal_file = fs.create_log(&dir.join(filename::log_name(wal_number)), vfs::OpenMode::CreateNew)?;
        fs.sync_dir(&dir)?;
        edit.log_number = Some(wal_number);
        edit.last_seq = Some(last_seq);
        // Replayed range records go to synced index files before the edit that lets their WALs be deleted.
        edit.range_index = range_deletes.flush(&[], last_seq, &mut || {})?;
        vs.log_and_apply(edit)?;
        let current = vs.current();
        let pending = compaction::pending_compaction_bytes(&current, &opts);
        let inner = Arc::new(Inner {
            fs: fs.clone(),
            dir: dir.clone(),
            recovery,
            _lock: lock_file,
            state: Mutex::new(State {
                mem: Arc::new(MemTable::new(wal_number)),
                imm: Vec::new(),
                current,
                pending_compaction_bytes: pending,
                bg_error: None,
                shutting_down: false,
                bg_epoch: 0,
                version_number: 0,
            }),
            snapshots: SnapshotList::default(),
            bg_cv: Condvar::new(),
            done_cv: Condvar::new(),
            writers: Mutex::new(WriteQueue::default()),
            writers_cv: Condvar::new(),
            wal: Mutex::new(Some(Wal { writer: LogWriter::new(wal_file, 0) })),
            work: std::sync::RwLock::new(()),
            flush_work: Mutex::new(()),
            running: Mutex::new(Vec::new()),
            version_counter: AtomicU64::new(0),
            versions: Mutex::new(vs),
            table_cache,
            last_seq: AtomicU64::new(last_seq),
            counters: Counters::default(),
            rd: RangeDelCounters::default(),
            obsolete,
            retired_mems: Default::default(),
            purging: AtomicUsize::new(0),
            logs_obsolete_below: AtomicU64::new(0),
            logs_purged_below: AtomicU64::new(0),
            rr: range_reduce::Shared::default(),
            last_auto_resume: Mutex::new(None),
            opts,
            range_deletes,
        });
        inner.rr.set_owner(&inner);
        let weak = Arc::downgrade(&inner);
        inner.range_deletes.set_maintenance_waker(Arc::new(move || {
            if let Some(inner) = weak.upgrade() {
                // Under the state lock, which the flush thread holds from its check to its wait.
                let _s = inner.state.lock().unwrap_or_else(|p| p.into_inner());
                inner.bg_cv.notify_all();
            }
        }));
        inner.counters.bytes_flushed.fetch_add(bytes_flushed, Ordering::Relaxed);
        inner.counters.flushes.fetch_add(flushes, Ordering::Relaxed);
        inner.delete_unreferenced_files()?;
        inner.range_deletes.state_recorded()?;
        inner.range_deletes.remove_unreferenced()?;
        let handles = background::spawn(&inner)?;
        Ok(Db { inner, bg: Mutex::new(handles) })
    }
}

/// kind of strategy (range records of one are invisible to the other).
fn open_range_deletes(
    fs: &Arc<dyn vfs::Fs>,
    dir: &Path,
    opts: &Options,
    vs: &VersionSet,
) -> Result<Arc<dyn rangedel::RangeDeleteStrategy>> {
    let st = &opts.range_delete_strategy;
    if st.keeps_local_tombstones() {
        if vs.range_index.is_some() {
            return Err(Error::InvalidArgument(
                "the database keeps range deletes in a global index: open it with that strategy".into(),
            ));
        }
    } else if vs.range_index.is_none()
        && vs.current().levels.iter().flatten().any(|f| f.info.num_range_dels > 0)
    {
        return Err(Error::InvalidArgument(
            "the database keeps range tombstones in its tables: open it with the local strategy".into(),
        ));
    }
    Ok(st.open(fs, dir, vs.range_index.as_ref())?.unwrap_or_else(|| st.clone()))
}

/// Writes `mem` as an L0 table during recovery; returns its size.
fn flush_to_l0(
    fs: &Arc<dyn vfs::Fs>,
    dir: &Path,
    vs: &mut VersionSet,
    topts: &TableOptions,
    opts: &Options,
    mem: &Arc<MemTable>,
    edit: &mut VersionEdit,
) -> Result<u64> {
    let mut next = || vs.new_file_number();
    let mut sink =
        OutputSink { fs: &**fs, dir, new_number: &mut next, table: topts.clone(), cut: OutputCut::never() };
    let tombs = mem.tombstones();
    let keep = opts.range_delete_strategy.keeps_local_tombstones();
    let out = compaction::write_outputs(
        &mut sink,
        &mut mem.iter(),
        ikey::MAX_SEQ,
        &|_| false,
        &Fragments::default(),
        if keep { Some(&tombs) } else { None },
        None,
    )?;
    for f in &out.files {
        edit.added.push((0, f.clone()));
    }
    Ok(out.bytes)
}

impl Inner {
    /// At open: removes every file that the recovered state does not need.
    fn delete_unreferenced_files(&self) -> Result<()> {
        let vs = lock(&self.versions);
        let live: std::collections::HashSet<u64> = vs.current().live_files().into_iter().collect();
        let (log_number, manifest) = (vs.log_number, vs.manifest_number());
        drop(vs);
        for name in self.fs.list_dir(&self.dir)? {
            let remove = match filename::parse(&name) {
                Some(FileKind::Log(n)) => n < log_number,
                Some(FileKind::Table(n)) => !live.contains(&n),
                Some(FileKind::Manifest(n)) => n != manifest,
                Some(FileKind::Temp) => true,
                _ => false,
            };
            if remove {
                self.fs.remove_file(&self.dir.join(&name))?;
            }
        }
        self.fs.sync_dir(&self.dir)?;
        Ok(())
    }
}
