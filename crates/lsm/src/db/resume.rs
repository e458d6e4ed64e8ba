//! Resuming after a background error (docs/lsm.md §6), RocksDB's `DB::Resume`: the database leaves the
//! write-stopped state in place, without a reopen, once the cause has passed (space freed, a device back).
//!
//! A background error means some file's tail is unknown: a WAL append or sync, a table, a MANIFEST edit or an
//! index file failed part-way. Everything acknowledged is still in memory (memtables, the current version, the
//! range-delete index), so a resume makes that memory durable again through files written afresh:
//! 1. With the write queue led, `work` held exclusively and `flush_work` held, nothing else writes a file.
//! 2. A failed WAL is cut back to the records it can vouch for (`LogWriter::cut_failed_tail`), so it ends at a
//!    record boundary and may be followed by a newer WAL: recovery refuses a damaged tail in any WAL but the
//!    newest. Then a new WAL starts with a new memtable, and the old memtable joins the immutable ones.
//! 3. The next MANIFEST edit starts a new MANIFEST (`VersionSet::roll_manifest`), so a failed edit that the old
//!    one may hold stops mattering; every immutable memtable is flushed (the cut WAL's records past the cut live
//!    only in them), and a last edit records the range-delete index's state. Once that edit is durable, the
//!    tables of failed edits are deleted, as are index files no recorded state names.
//! 4. The error is cleared, and writes and background work go on.
//!
//! Any step may fail again (the disk is still full): the error stays, nothing durable was lost, and the resume
//! may be retried; every step is safe to repeat. Corruption is never resumed: the damaged bytes are still there.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::edit::VersionEdit;
use crate::error::{Error, Result};
use crate::filename::{self, table_name};
use crate::memtable::MemTable;
use crate::wal::LogWriter;

use super::{Inner, Wal, lock};

impl Inner {
    /// See [`crate::Db::resume`].
    pub(super) fn resume(&self) -> Result<()> {
        self.lead(|| self.resume_led())
    }

    /// Whether a write that found `e` should try a resume itself: `e` is a full disk or quota, and the last try
    /// was at least `Options::auto_resume_interval` ago (a write on a full disk must not rewrite files each
    /// time). Records the try.
    pub(super) fn auto_resume_due(&self, e: &Error) -> bool {
        let Some(interval) = self.opts.auto_resume_interval else { return false };
        if !matches!(e, Error::Io(io) if vfs::is_out_of_space(io)) {
            return false;
        }
        let mut last = lock(&self.last_auto_resume);
        if last.is_some_and(|t| t.elapsed() < interval) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }

    /// REQUIRES: the caller leads the write queue (`lead`, or a leader's `make_room_for_write`).
    pub(super) fn resume_led(&self) -> Result<()> {
        let Some(e) = lock(&self.state).bg_error.clone() else { return Ok(()) };
        if e.is_corruption() {
            return Err(Error::Background(Box::new(e)));
        }
        let _w = self.work.write().unwrap_or_else(|p| p.into_inner());
        let _f = lock(&self.flush_work);
        if lock(&self.state).shutting_down {
            return Err(Error::Closed);
        }
        self.retire_failed_wal()?;
        lock(&self.versions).roll_manifest();
        loop {
            // Not in the `while let` scrutinee: its temporaries, the state guard among them, live through the body.
            let oldest = lock(&self.state).imm.first().cloned();
            let Some(m) = oldest else { break };
            self.flush_memtable(&m)?;
        }
        let (snaps, published) = self.snapshot_list();
        let range_index =
            self.with_wal_synced(|frozen| self.range_deletes.flush(&snaps, published, frozen))?;
        let recorded = range_index.is_some();
        let edit = VersionEdit {
            last_seq: Some(self.last_seq.load(Ordering::Acquire)),
            range_index,
            ..VersionEdit::default()
        };
        let mut vs = lock(&self.versions);
        vs.log_and_apply(edit)?;
        let unapplied = vs.take_unapplied();
        self.install(vs, |_| {});
        if recorded {
            self.range_deletes.state_recorded()?;
        }
        self.range_deletes.remove_unreferenced()?;
        for n in unapplied {
            self.table_cache.evict(n);
            let _ = self.fs.remove_file(&self.dir.join(table_name(n)));
        }
        {
            let mut s = lock(&self.state);
            s.bg_error = None;
            s.bg_epoch += 1;
        }
        self.counters.resumes.fetch_add(1, Ordering::Relaxed);
        self.done_cv.notify_all();
        self.bg_cv.notify_all();
        Ok(())
    }

    /// Step 2: if the WAL's writer failed, cuts its tail and moves writes to a new WAL and memtable.
    /// REQUIRES: the caller leads the write queue and holds `flush_work` (nothing else touches the WAL).
    fn retire_failed_wal(&self) -> Result<()> {
        {
            let mut w = lock(&self.wal);
            let Some(wal) = w.as_mut() else { return Err(Error::Closed) };
            if !wal.writer.failed() {
                return Ok(());
            }
            wal.writer.cut_failed_tail()?;
        }
        let number = lock(&self.versions).new_file_number();
        let f = self.fs.create_log(&self.dir.join(filename::log_name(number)), vfs::OpenMode::CreateNew)?;
        self.fs.sync_dir(&self.dir)?;
        *lock(&self.wal) = Some(Wal { writer: LogWriter::new(f, 0) });
        let mut s = lock(&self.state);
        let old = std::mem::replace(&mut s.mem, Arc::new(MemTable::new(number)));
        old.freeze();
        s.imm.push(old);
        Ok(())
    }
}
