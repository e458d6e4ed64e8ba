//! The write path (docs/lsm.md §2): group commit into the WAL, memtable insert, write delays and stops,
//! memtable and WAL switch, and the WAL hold that makes a global range-delete index flush safe.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, MutexGuard};
use std::time::{Duration, Instant};

use crate::batch::{Op, WriteBatch};
use crate::edit::VersionEdit;
use crate::error::{Error, Result};
use crate::filename;
use crate::memtable::MemTable;
use crate::wal::LogWriter;

use super::{Inner, Wal, apply_batch, lock};

#[derive(Default)]
pub(super) struct WriteQueue {
    pending: VecDeque<Pending>,
    results: std::collections::HashMap<u64, Result<()>>,
    next_id: u64,
    leader_active: bool,
    /// Writers blocked on `writers_cv`. The std condition variable makes a futex call on every notify, waiter or
    /// not; a lone writer skipping it saved that system call on every write.
    waiting: usize,
    /// The last leader's group vector, empty, kept so a leader does not allocate one per write.
    spare_group: Vec<Pending>,
}

impl WriteQueue {
    /// Waits on `cv` with `q` counted in `waiting`.
    fn wait<'a>(cv: &Condvar, mut q: MutexGuard<'a, WriteQueue>) -> MutexGuard<'a, WriteQueue> {
        q.waiting += 1;
        let mut q = cv.wait(q).unwrap_or_else(|p| p.into_inner());
        q.waiting -= 1;
        q
    }
}

pub(super) struct Pending {
    id: u64,
    batch: Option<WriteBatch>,
    sync: bool,
    /// Work that runs alone as the leader (`lead`: a forced memtable switch, a resume) when it reaches the
    /// front, so a leader must never take it into its group (it would wait for its entry forever).
    switch: bool,
}

impl Inner {
    /// Runs `f` (an index flush of a strategy keeping range records outside the memtables) with the WAL synced and
    /// held: every record the index holds is then durable in the WAL too, so the index never makes a delete
    /// durable whose preceding writes a crash could still lose (recovery must give a prefix of the writes). While
    /// the WAL is held no record can be appended; one appended before is covered by the sync. The strategy
    /// releases the WAL early (the callback `f` receives) once its index takes no further record, so writers do
    /// not wait for the index's file writes and syncs; records appended after that wait for the index.
    pub(super) fn with_wal_synced<T>(&self, f: impl FnOnce(&mut dyn FnMut()) -> Result<T>) -> Result<T> {
        if self.range_deletes.keeps_local_tombstones() {
            return f(&mut || {});
        }
        let mut w = Some(lock(&self.wal));
        if let Some(wal) = w.as_mut().and_then(|g| g.as_mut()) {
            wal.writer.sync()?;
            self.counters.wal_syncs.fetch_add(1, Ordering::Relaxed);
        }
        // `f` may release the WAL once it has stopped new records (writers append to the WAL before they record);
        // otherwise it is released when `f` returns.
        f(&mut || drop(w.take()))
    }

    /// Background work of the range-delete strategy (index flush, GC), recorded in its own MANIFEST edit.
    /// REQUIRES: `work` held.
    pub(super) fn maintain_range_deletes(&self) -> Result<()> {
        let (snaps, published) = self.snapshot_list();
        let state = self.with_wal_synced(|frozen| self.range_deletes.maintain(&snaps, published, frozen))?;
        let Some(state) = state else { return Ok(()) };
        let edit = VersionEdit { range_index: Some(state), ..VersionEdit::default() };
        lock(&self.versions).log_and_apply(edit)?;
        self.range_deletes.state_recorded()
    }

    /// Group commit. `batch == None` with `sync` just syncs the WAL; with neither it is a barrier.
    pub(super) fn write(&self, batch: Option<WriteBatch>, sync: bool) -> Result<()> {
        let mut q = lock(&self.writers);
        let id = q.next_id;
        q.next_id += 1;
        q.pending.push_back(Pending { id, batch, sync, switch: false });
        loop {
            // A lone writer's map is always empty: no hashing then.
            if !q.results.is_empty()
                && let Some(r) = q.results.remove(&id)
            {
                return r;
            }
            if !q.leader_active && q.pending.front().is_some_and(|p| p.id == id) {
                break;
            }
            q = WriteQueue::wait(&self.writers_cv, q);
        }
        // Leader: take a group of consecutive writers (a sync writer never joins a non-sync leader's group; a
        // memtable switch ends the group).
        q.leader_active = true;
        let mut group = std::mem::take(&mut q.spare_group);
        let mut bytes = 0;
        let lead_sync = q.pending.front().is_some_and(|p| p.sync);
        while let Some(p) = q.pending.front() {
            if !group.is_empty()
                && (p.switch || (p.sync && !lead_sync) || bytes > self.opts.max_write_group_bytes)
            {
                break;
            }
            bytes += p.batch.as_ref().map_or(0, |b| b.size());
            if let Some(p) = q.pending.pop_front() {
                group.push(p);
            }
        }
        drop(q);
        let r = self.write_group(&mut group);
        // The batches are freed before the lock is taken again, not under it.
        for p in &mut group {
            p.batch = None;
        }
        let mut q = lock(&self.writers);
        for p in &group {
            if p.id != id {
                q.results.insert(p.id, r.clone());
            }
        }
        group.clear();
        q.spare_group = group;
        q.leader_active = false;
        let wake = q.waiting > 0;
        drop(q);
        if wake {
            self.writers_cv.notify_all();
        }
        r
    }

    fn write_group(&self, group: &mut [Pending]) -> Result<()> {
        let has_data = group.iter().any(|p| p.batch.is_some());
        let sync = group.iter().any(|p| p.sync);
        if has_data {
            self.make_room_for_write(false)?;
        } else if let Some(e) = lock(&self.state).bg_error.clone() {
            if sync {
                return Err(Error::Background(Box::new(e)));
            }
            return Ok(());
        }
        let writes = group.iter().filter(|p| p.batch.is_some()).count() as u64;
        let mut user_bytes = 0u64;
        for p in group.iter() {
            if let Some(b) = &p.batch {
                for op in b.iter().flatten() {
                    user_bytes += match op {
                        Op::Put(k, v) => (k.len() + v.len()) as u64,
                        Op::Delete(k) => k.len() as u64,
                        Op::DeleteRange(s, e) => (s.len() + e.len()) as u64,
                    };
                }
            }
        }
        // A lone batch is written and applied as it is; a group is copied into one batch.
        let mut group_batch = None;
        let merged: &mut WriteBatch = match group {
            [Pending { batch: Some(b), .. }] => b,
            _ => {
                let batches = || group.iter().filter_map(|p| p.batch.as_ref());
                let merged =
                    group_batch.insert(WriteBatch::with_capacity(batches().map(WriteBatch::size).sum()));
                for b in batches() {
                    merged.append(b);
                }
                merged
            }
        };
        let first = self.last_seq.load(Ordering::Acquire) + 1;
        let mem = lock(&self.state).mem.clone();
        {
            let mut w = lock(&self.wal);
            let Some(wal) = w.as_mut() else { return Err(Error::Closed) };
            let res = (|| -> Result<()> {
                if !merged.is_empty() {
                    merged.set_seq(first);
                    wal.writer.add_record(merged.data())?;
                    self.counters.wal_bytes.fetch_add(merged.size() as u64, Ordering::Relaxed);
                }
                if sync {
                    wal.writer.sync()?;
                    self.counters.wal_syncs.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })();
            if let Err(e) = res {
                // The WAL's tail is now unknown: later records could follow a torn one and be lost at recovery.
                self.set_bg_error(e.clone());
                return Err(e);
            }
        }
        if !merged.is_empty() {
            // Only a range delete fills the strategy's buffer; a GC plan that becomes ready wakes the flush thread
            // itself (the read epochs' waker), so a group of plain writes need not ask.
            let ranged = apply_batch(&mem, &*self.range_deletes, merged)?;
            if ranged && self.range_deletes.maintenance_due() {
                // Under the state lock, which the flush thread holds from its check to its wait: notified
                // between the two, it would sleep through its next timeout with the index buffer full.
                let _s = lock(&self.state);
                self.bg_cv.notify_all();
            }
            self.last_seq.store(first + u64::from(merged.count()) - 1, Ordering::Release);
            self.counters.user_bytes_written.fetch_add(user_bytes, Ordering::Relaxed);
            self.counters.write_groups.fetch_add(1, Ordering::Relaxed);
            self.counters.writes.fetch_add(writes, Ordering::Relaxed);
        }
        Ok(())
    }

    pub(super) fn set_bg_error(&self, e: Error) {
        let mut s = lock(&self.state);
        if s.bg_error.is_none() {
            s.bg_error = Some(e);
        }
        drop(s);
        self.done_cv.notify_all();
    }

    /// Switches the memtable even if not full (used by `flush`). Runs as a write-queue leader so no write races.
    pub(super) fn force_switch(&self) -> Result<()> {
        self.lead(|| self.make_room_for_write(true))
    }

    /// Runs `f` as the write-queue leader, alone: queued writes wait until it returns.
    pub(super) fn lead<T>(&self, f: impl FnOnce() -> T) -> T {
        let mut q = lock(&self.writers);
        let id = q.next_id;
        q.next_id += 1;
        q.pending.push_back(Pending { id, batch: None, sync: false, switch: true });
        while q.leader_active || q.pending.front().is_none_or(|p| p.id != id) {
            q = WriteQueue::wait(&self.writers_cv, q);
        }
        q.pending.pop_front();
        q.leader_active = true;
        drop(q);
        let r = f();
        let mut q = lock(&self.writers);
        q.leader_active = false;
        let wake = q.waiting > 0;
        drop(q);
        if wake {
            self.writers_cv.notify_all();
        }
        r
    }

    /// REQUIRES: called by the write leader. Delays or stops writes as the thresholds say, and switches to a new
    /// memtable and WAL when the current memtable is full (or `force`).
    fn make_room_for_write(&self, mut force: bool) -> Result<()> {
        let mut allow_delay = !force;
        // One resume per call at most: with a zero interval, a job failing again at once must not keep this
        // writer resuming forever.
        let mut may_resume = true;
        let mut s = lock(&self.state);
        loop {
            if let Some(e) = &s.bg_error {
                let e = e.clone();
                drop(s);
                if may_resume && self.auto_resume_due(&e) && self.resume_led().is_ok() {
                    may_resume = false;
                    s = lock(&self.state);
                    continue;
                }
                return Err(Error::Background(Box::new(e)));
            }
            if s.shutting_down {
                return Err(Error::Closed);
            }
            let l0 = s.current.levels[0].len();
            // Without automatic compactions nothing would ever lower the L0 count or the pending bytes, so they
            // neither delay nor stop writes (RocksDB's rule); the caller compacts by hand. A stop here waited
            // forever (`regression_writes_never_stop_without_automatic_compactions`).
            let compacting = !self.opts.disable_auto_compactions;
            if allow_delay
                && compacting
                && (l0 >= self.opts.level0_slowdown_writes_trigger
                    || s.pending_compaction_bytes >= self.opts.soft_pending_compaction_bytes_limit)
            {
                // Delay this write by 1 ms once, rather than stalling it for seconds at the stop threshold.
                drop(s);
                let t = Instant::now();
                std::thread::sleep(Duration::from_millis(1));
                self.counters.stall_micros.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                allow_delay = false;
                s = lock(&self.state);
                continue;
            }
            if !force && s.mem.approx_size() < self.opts.write_buffer_size {
                return Ok(());
            }
            if force && s.mem.is_empty() && !self.range_deletes.has_unflushed_records() {
                return Ok(());
            }
            if s.imm.len() + 1 >= self.opts.max_write_buffer_number
                || compacting
                    && (l0 >= self.opts.level0_stop_writes_trigger
                        || s.pending_compaction_bytes >= self.opts.hard_pending_compaction_bytes_limit)
            {
                let t = Instant::now();
                self.bg_cv.notify_all();
                s = self
                    .done_cv
                    .wait_timeout(s, Duration::from_millis(100))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                self.counters.stall_micros.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                continue;
            }
            // Switch: sync the old WAL (so only the newest WAL can have a torn tail), start a new one. Not under
            // the state lock: the syncs can take milliseconds, and every read takes that lock. Only this leader
            // switches, so the memtable is still the one found full.
            drop(s);
            let number = lock(&self.versions).new_file_number();
            let res = (|| -> Result<Wal> {
                let mut w = lock(&self.wal);
                if let Some(old) = w.as_mut() {
                    old.writer.sync()?;
                }
                let f = self
                    .fs
                    .create_log(&self.dir.join(filename::log_name(number)), vfs::OpenMode::CreateNew)?;
                self.fs.sync_dir(&self.dir)?;
                Ok(Wal { writer: LogWriter::new(f, 0) })
            })();
            let new_wal = match res {
                Ok(w) => w,
                Err(e) => {
                    self.set_bg_error(e.clone());
                    return Err(e);
                }
            };
            *lock(&self.wal) = Some(new_wal);
            s = lock(&self.state);
            let old = std::mem::replace(&mut s.mem, Arc::new(MemTable::new(number)));
            old.freeze();
            s.imm.push(old);
            force = false;
            self.bg_cv.notify_all();
        }
    }
}
