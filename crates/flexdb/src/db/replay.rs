//! Log replay (§5.4), shared by `Db::open` and `Db::resume`: every log, oldest first (by number, never by size
//! or timestamp), into a memtable that is committed to the table before each logged range delete and at the end.
//! Replay is idempotent: logs hold blind writes, and a log is removed only after its memtable's effects are
//! durable in the table, so replaying a log whose effects are already (partly) in the table yields the same state.

use std::path::Path;
use std::sync::atomic::Ordering;

use bptree::ByteKey;

use crate::WalRecovery;
use crate::error::Result;
use crate::memtable::{MemValue, Memtable};
use crate::table::Table;
use crate::wal::{self, Op};

use super::Counters;

/// The numbers of the logs in `dir`, oldest first.
pub(super) fn list_logs(fs: &dyn vfs::Fs, dir: &Path) -> Result<Vec<u64>> {
    let mut logs: Vec<u64> = fs.list_dir(dir)?.iter().filter_map(|n| wal::parse_name(n)).collect();
    logs.sort_unstable();
    Ok(logs)
}

/// Replays `logs` (oldest first) into `table`, without syncing it. A damaged tail is accepted only in the newest
/// log that holds anything; with `PointInTime`, damage elsewhere ends replay instead, and the returned text says
/// where (every later log is dropped with it). Counts replayed batches and dropped bytes in `c`.
pub(super) fn replay_logs(
    fs: &dyn vfs::Fs,
    dir: &Path,
    table: &Table,
    logs: &[u64],
    recovery: WalRecovery,
    c: &Counters,
) -> Result<Option<String>> {
    let mut mem = Memtable::new();
    let mut salvaged: Option<String> = None;
    // The newest log that holds anything is the one a crash may have torn: the store syncs a log whole before
    // it writes to a newer one, and an open (or resume) creates the next log empty after replaying the torn one,
    // so a crash before the directory sync may leave the torn log followed by an empty one
    // (`regression_a_crash_while_recovering_a_torn_log_reopens`).
    let mut last_written = 0;
    for (i, &n) in logs.iter().enumerate() {
        if fs.open(&dir.join(wal::file_name(n)), vfs::OpenMode::ReadOnly)?.len()? > 0 {
            last_written = i;
        }
    }
    for (i, &n) in logs.iter().enumerate() {
        let path = dir.join(wal::file_name(n));
        let newest = i >= last_written;
        if let Some(damage) = &salvaged {
            // Salvaged: this log is newer than the damage, so it is dropped with it.
            wal::check_droppable(fs, &path, damage)?;
            c.wal_tail_dropped_bytes
                .fetch_add(fs.open(&path, vfs::OpenMode::ReadOnly)?.len()?, Ordering::Relaxed);
            continue;
        }
        let r = match recovery {
            WalRecovery::Strict => wal::read_log(fs, &path, newest)?,
            WalRecovery::PointInTime => wal::read_log_salvaging(fs, &path, newest)?,
        };
        salvaged = r.salvaged;
        c.wal_tail_dropped_bytes.fetch_add(r.dropped_bytes, Ordering::Relaxed);
        for batch in r.batches {
            c.wal_batches_replayed.fetch_add(1, Ordering::Relaxed);
            for op in batch {
                match op {
                    Op::Put(k, v) => {
                        mem.insert(ByteKey::new(&k), MemValue::Put(v));
                    }
                    Op::Delete(k) => {
                        mem.insert(ByteKey::new(&k), MemValue::Delete);
                    }
                    Op::DeleteRange(s, e) => {
                        table.commit(mem.iter().map(|(k, v)| (k.as_bytes(), v)))?;
                        mem = Memtable::new();
                        table.delete_range(&s, &e)?;
                    }
                }
            }
        }
    }
    table.commit(mem.iter().map(|(k, v)| (k.as_bytes(), v)))?;
    Ok(salvaged)
}
