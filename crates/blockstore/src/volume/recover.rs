//! Recovering a stopped (poisoned) volume in place: its state is rebuilt from its files exactly as a reopen
//! would, while the volume stays open and keeps its lock, so NBD clients keep their connections.
//!
//! Why this is sound: a stopped volume acknowledges nothing after the failure, and everything it acknowledged
//! before is in its files as the kernel's page cache shows them (the journal holds every write since the last data
//! sync). Recovery reads exactly that and cuts off a torn tail the failed append left, as after a crash.
//!
//! What it cannot see is the disk below the page cache. After a failed *sync* the kernel may have dropped the
//! pages it could not write while reads still return them, and a later sync then succeeds over data the disk
//! lacks. A restart has the same blind spot, so the volume recovers by itself only after the file system ran out
//! of space or quota with no failed sync: then nothing was lost below the page cache, and clients (QEMU pauses
//! a guest on ENOSPC until the operator frees space, then retries) see writes succeed again once space is back.
//! A device error, corruption or a failed sync leaves the volume stopped until [`Volume::recover`] or a reopen.

use std::time::{Duration, Instant};

use crate::stats::Stats;
use crate::{Result, Volume};

use super::{PoisonKind, State};

/// How often a write to a volume stopped for lack of space tries to recover it: each try replays the volume's
/// files under its lock.
pub(super) const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// Whether a volume takes writes: what a server shows its operator (`rangedb nbd serve` logs every change).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    /// Writes are taken.
    Writable,
    /// A write-path failure stopped the volume: reads go on, writes fail until it recovers.
    Stopped {
        /// The failure that stopped it.
        reason: String,
        /// Whether a write will recover it once the file system has room again (it ran out of space or quota
        /// and no sync failed); otherwise only [`Volume::recover`] or a reopen does.
        recovers_by_itself: bool,
    },
    /// Opened read-only for inspection.
    ReadOnly,
}

impl Volume {
    /// Whether the volume takes writes, and if not why.
    pub fn health(&self) -> Health {
        let s = self.lock();
        match &s.poisoned {
            None => Health::Writable,
            Some(p) if p.kind == PoisonKind::ReadOnly => Health::ReadOnly,
            Some(p) => {
                Health::Stopped { reason: p.message.clone(), recovers_by_itself: s.recovers_by_itself() }
            }
        }
    }

    /// Recovers a volume that a write-path I/O failure stopped, rebuilding its index and cache from its files as a
    /// reopen would (every write acknowledged before the failure survives; see `volume/recover.rs` for what a
    /// failed sync may have lost below the page cache, as with a restart). Returns at once if the volume is not
    /// stopped. Fails with [`Error::Poisoned`](crate::Error::Poisoned) for a volume stopped by corruption or opened
    /// read-only, and with what recovery met if it fails (the volume stays stopped).
    pub fn recover(&self) -> Result<()> {
        self.recover_with(false)
    }

    /// Called by a write to a stopped volume that [may recover by itself](State::recovers_by_itself): recovers it,
    /// at most once per [`RETRY_INTERVAL`]. The write then runs (or fails) on whatever state that left.
    pub(super) fn recover_if_space_is_back(&self) {
        {
            let mut last = self.shared.last_recovery.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|t| t.elapsed() < RETRY_INTERVAL) {
                return;
            }
            *last = Some(Instant::now());
        }
        let _ = self.recover_with(true);
    }

    fn recover_with(&self, by_itself: bool) -> Result<()> {
        // A collection round's lock order: the round, then the state. Holding the round lock keeps rounds out
        // (their plans and copies belong to the old state); a background round's thread has finished its round or
        // finds the lock taken and returns.
        let _round = self.shared.gc_lock.lock().unwrap_or_else(|p| p.into_inner());
        let gc = self.gc_thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = gc {
            let _ = h.join();
        }
        let (fs, dir, opts) = {
            let mut s = self.lock();
            // A batch the flusher is writing belongs to this state: wait until it is installed or failed.
            while s.flushing {
                s = self.shared.wait(s);
            }
            let Some(p) = &s.poisoned else { return Ok(()) };
            let allowed = if by_itself {
                s.recovers_by_itself()
            } else {
                matches!(p.kind, PoisonKind::NoSpace | PoisonKind::Io)
            };
            if !allowed {
                return Err(p.error());
            }
            (s.fs.clone(), s.dir.clone(), s.opts.clone())
        };
        // Replayed without the lock, so reads go on meanwhile from the old state: while the volume is stopped,
        // nothing appends to, syncs or removes its files (writes, flushes and checkpoints are refused, the flusher
        // takes no work, collection rounds wait for the round lock held here, and so does a second recovery).
        // What recovery changes in the files (a torn tail cut, files a collection was removing) is nothing the
        // old state's index refers to.
        let (mut fresh, _) = State::recover(fs, &dir, &self.name, opts, false)?;
        let mut s = self.lock();
        debug_assert!(s.poisoned.is_some() && !s.flushing, "a stopped volume changed during its recovery");
        let before = s.current_stats();
        fresh.stats = Stats {
            recovered_batches: fresh.stats.recovered_batches,
            recovered_journal_records: fresh.stats.recovered_journal_records,
            recovered_checkpoint_pieces: fresh.stats.recovered_checkpoint_pieces,
            recoveries: before.recoveries + 1,
            ..before
        };
        // The old state's file handles close here; readers holding a plan keep their own.
        *s = fresh;
        drop(s);
        self.shared.cv.notify_all();
        Ok(())
    }
}

impl State {
    /// Whether this stopped state may recover without being asked: it ran out of space or quota and no sync of
    /// the journal or a data file failed (see the module comment).
    pub(super) fn recovers_by_itself(&self) -> bool {
        self.poisoned.as_ref().is_some_and(|p| p.kind == PoisonKind::NoSpace)
            && !(self.journal.sync_failed() || self.data.sync_failed())
    }
}
