//! Resuming after a background error (`Db::resume`): the store rebuilds its table from its files in place, as a
//! reopen would, and goes on taking writes.
//!
//! A failed change may have stopped part-way in the table (updated in place, so nothing older to fall back on),
//! and a failed log append or sync leaves the log's tail unknown. Everything the store acknowledged is in its
//! logs (a log is removed only once its memtable is durable in the table), except, after a failed log *sync*,
//! the writes past the last good sync, which only the active memtable still holds reliably. So, with writers
//! held (the writer lock), the committer stopped, and readers held (the memtable write lock, `table_epoch` odd
//! for those already past it):
//! 1. The table reloads from its files (`Table::reload`: the FlexFile as an open reads it, the index rebuilt
//!    from anchors). Not after a failed sync of the table: Linux marks the pages it could not write clean, so
//!    the files may read back what the media no longer holds, and the store stays stopped (see `Db::resume`).
//! 2. A failed log is cut back to the records it can vouch for (`WalWriter::cut_failed_tail`), so a newer log may
//!    follow it; a healthy one is synced.
//! 3. Every log is replayed into the table (strictly: damage is corruption) and the table synced.
//! 4. The active memtable, which still holds every write past the cut, is logged afresh as one synced batch in
//!    a new log and stays the active memtable; the old logs are removed, the immutable memtable dropped (the
//!    replay committed it), the error cleared and the committer restarted. Committing the memtable to the table
//!    instead would not do: a crash part-way through would keep a part of it in key order, no prefix of the
//!    writes, with its log already cut.
//!
//! A failed step leaves the error in place and loses nothing; every step is safe to repeat. Corruption is never
//! resumed: the damaged bytes are still there.
//!
//! After a full disk or quota the store resumes by itself (`Options::auto_resume_interval`): a write that meets
//! the error tries, and so does the [`Resumer`] thread, so a store nobody writes to picks up again too. Both go
//! through the writer lock, as a caller's `resume` does; `Db::close` stops the resumer before the committer.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use crate::WalRecovery;
use crate::error::{Error, Result};
use crate::memtable::MemValue;
use crate::wal::{self, Op, WalWriter};

use super::{Counters, Db, Inner, Mem, replay};

impl Db {
    /// The failure that stopped writes, if they are stopped (what [`resume`](Self::resume) clears): an I/O error
    /// or corruption.
    pub fn background_error(&self) -> Option<Error> {
        self.inner.bg_error.lock().as_ref().map(|e| e.cause_copy())
    }

    /// Clears the background error and lets writes (and reads the failure stopped) go on, without a reopen: the
    /// table is rebuilt from its files and the logs are replayed into it, as at an open. Call it once the cause
    /// has passed (space freed, a device back). Returns `Ok` at once if nothing stopped the store.
    ///
    /// If a step fails again, the store stays stopped with its first error, loses nothing acknowledged, and
    /// `resume` may be called again (that error is returned). Two stops never resume, and return
    /// [`Error::Background`]: corruption (the damaged bytes are still there), and a failed sync of the table
    /// (Linux marks the pages it could not write clean, so they may be gone from the media while the page cache
    /// still serves them; a reload would build on them). A failed sync of a log does resume: its unsynced tail
    /// is cut and rewritten from the memtable.
    pub fn resume(&self) -> Result<()> {
        Inner::resume(&self.inner, &self.committer)
    }

    /// `Ok` unless writes are stopped; after a full disk or an exceeded quota, first tries a resume, at most once
    /// per `Options::auto_resume_interval` (a write on a full disk must not rebuild the table each time).
    pub(super) fn writable(&self) -> Result<()> {
        let Err(stopped) = self.inner.check_bg() else { return Ok(()) };
        if self.inner.auto_resume_due() && self.resume().is_ok() {
            return Ok(());
        }
        Err(stopped)
    }
}

/// The thread that tries a resume after a full disk or quota at most once per `Options::auto_resume_interval`,
/// so a store nobody writes to takes writes again once space is freed (as the LSM engine's flush thread does,
/// and RocksDB in the background). Writes try too; the interval is shared.
pub(super) struct Resumer {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: JoinHandle<()>,
}

impl Resumer {
    pub(super) fn start(
        inner: &Arc<Inner>,
        committer: &Arc<Mutex<Option<JoinHandle<()>>>>,
    ) -> Result<Resumer> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let (s, i, c) = (stop.clone(), inner.clone(), committer.clone());
        let thread = std::thread::Builder::new()
            .name("flexdb-resumer".into())
            .spawn(move || {
                let (flag, cv) = &*s;
                let mut stopped = flag.lock();
                while !*stopped {
                    cv.wait_for(&mut stopped, std::time::Duration::from_millis(500));
                    if !*stopped && i.auto_resume_due() {
                        // Not under the flag's lock: a stop waits at most for this resume.
                        drop(stopped);
                        let _ = Inner::resume(&i, &c);
                        stopped = flag.lock();
                    }
                }
            })
            .map_err(Error::Io)?;
        Ok(Resumer { stop, thread })
    }

    /// Stops the thread (after the resume it is running, if any) and waits for it.
    pub(super) fn stop(self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        let _ = self.thread.join();
    }
}

impl Inner {
    /// [`Db::resume`], for the store's handle and its resumer thread.
    fn resume(inner: &Arc<Inner>, committer: &Mutex<Option<JoinHandle<()>>>) -> Result<()> {
        let mut w = inner.writer.lock();
        let Some(e) = inner.bg_error.lock().clone() else { return Ok(()) };
        if e.is_corruption() {
            return Err(Error::Background(e));
        }
        if inner.table.sync_failed() {
            return Err(Error::Background(Arc::new(Error::Io(std::io::Error::other(format!(
                "cannot resume: a sync of the table failed, so pages it wrote may be lost on the media while \
                 memory still shows them; reopen the store once nothing caches its files (after a restart), so \
                 recovery reads what the media holds (stopped by: {e})"
            ))))));
        }
        inner.stop_committer(committer);
        inner.rebuild(&mut w)?;
        match Inner::start_committer(inner) {
            Ok(h) => {
                *committer.lock() = Some(h);
                inner.c.resumes.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                // Without a committer a frozen memtable would never be committed: stopped again.
                inner.set_bg(&e);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Stops the committer thread (after the commit it is running, if any) and waits for it.
    fn stop_committer(&self, committer: &Mutex<Option<JoinHandle<()>>>) {
        *self.state.lock() = true;
        self.cv.notify_all();
        if let Some(h) = committer.lock().take() {
            let _ = h.join();
        }
        *self.state.lock() = false;
    }

    /// Whether the error that stopped writes is a full disk or quota and the last automatic try was at least
    /// `Options::auto_resume_interval` ago. Records the try.
    fn auto_resume_due(&self) -> bool {
        let Some(interval) = self.opts.auto_resume_interval else { return false };
        let out_of_space =
            matches!(self.bg_error.lock().as_deref(), Some(Error::Io(e)) if vfs::is_out_of_space(e));
        if !out_of_space {
            return false;
        }
        let mut last = self.last_auto_resume.lock();
        if last.is_some_and(|t| t.elapsed() < interval) {
            return false;
        }
        *last = Some(std::time::Instant::now());
        true
    }

    /// Steps 1-4 of the module comment but the committer's restart.
    /// REQUIRES: the writer lock is held (`w`) and the committer is stopped.
    fn rebuild(&self, w: &mut WalWriter) -> Result<()> {
        let mut m = self.mem.write();
        // Odd while the table is rebuilt: readers that read it after leaving the memtable lock read again.
        self.table_epoch.fetch_add(1, Ordering::SeqCst);
        let r = self.rebuild_locked(&mut m, w);
        self.table_epoch.fetch_add(1, Ordering::SeqCst);
        r
    }

    fn rebuild_locked(&self, m: &mut Mem, w: &mut WalWriter) -> Result<()> {
        self.table.reload(&self.opts)?;
        if w.failed() {
            w.cut_failed_tail()?;
        } else {
            w.sync()?;
        }
        let (fs, dir) = (self.fs.as_ref(), self.dir.as_path());
        let logs = replay::list_logs(fs, dir)?;
        // Not counted as an open's replay.
        replay::replay_logs(fs, dir, &self.table, &logs, WalRecovery::Strict, &Counters::default())?;
        self.table.sync()?;
        // The active memtable goes on, logged afresh as one batch in a new log: the cut may have dropped its
        // writes past the last good sync. One batch, so a crash keeps all of it or none (committing it to the
        // table instead could leave a part in key order, which is no prefix of the writes).
        let next = logs.last().map_or(w.number, |&n| n.max(w.number)) + 1;
        let mut fresh = WalWriter::create(fs, dir, next)?;
        let ops: Vec<Op> = m
            .active
            .iter()
            .map(|(k, v)| match v {
                MemValue::Put(v) => Op::Put(k.as_bytes().into(), v.clone()),
                MemValue::Delete => Op::Delete(k.as_bytes().into()),
            })
            .collect();
        if !ops.is_empty() {
            self.wal_bytes.fetch_add(fresh.append_batch(&ops, true)?, Ordering::Relaxed);
        }
        // The new log before the old ones go: a crash in between replays them (each ends cleanly) and then it.
        for &n in &logs {
            fs.remove_file(&dir.join(wal::file_name(n)))?;
        }
        fs.sync_dir(dir)?;
        *w = fresh;
        // The immutable memtable's log was replayed into the table.
        m.imm = None;
        drop(self.retired.lock().take());
        self.reads_stopped.store(false, Ordering::SeqCst);
        *self.bg_error.lock() = None;
        Ok(())
    }
}
