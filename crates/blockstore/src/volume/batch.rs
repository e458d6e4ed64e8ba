//! Batches: a segment cache turned into CWs and one batch in a data file, the index update that follows, the
//! journal reset and index checkpoint a batch may trigger, and the flusher thread that does this in the
//! background.

use std::sync::atomic::Ordering;

use crate::Result;
use crate::cache::SegmentCache;
use crate::format::{BatchOp, Checkpoint, Piece, SyncMark};

use super::{CHECKPOINT_FILE, SYNCED_FILE, Shared, State, apply_batch_op};

impl State {
    /// Writes the current cache to a data file now. REQUIRES: no frozen cache (see `Volume::drained`).
    pub(crate) fn flush_cache(&mut self) -> Result<()> {
        debug_assert!(self.frozen.is_none());
        if self.cache.is_empty() {
            return Ok(());
        }
        let (batch, cws_len) = encode_cache(&self.cache, u64::from(self.opts.max_unit_blocks));
        let cache = std::mem::take(&mut self.cache);
        self.journal_len_at_batch = self.journal.len();
        let r = self.install_batch(&cache, cws_len, batch, self.next_journal_seq - 1);
        if r.is_err() && self.cache.is_empty() {
            // The volume is poisoned but still serves reads: they must keep seeing these blocks, which the
            // index may lack.
            self.cache = cache;
        }
        r
    }

    /// Appends an encoded batch of `cache` (which held `cws` CWs) to the data files, applies it to the index and
    /// does what follows a batch. REQUIRES: `cache` is no longer the current cache nor the frozen one.
    fn install_batch(
        &mut self,
        cache: &SegmentCache,
        cws: u64,
        batch: crate::datafile::EncodedBatch,
        journal_seq: u64,
    ) -> Result<()> {
        let before = self.data_bytes();
        let (file, ops) = self.data.append_encoded(journal_seq, batch, self.opts.data_file_bytes)?;
        self.commit_batch(cache, cws, file, &ops, journal_seq, before)
    }

    /// Applies a batch written to `file` with `ops` to the index and does what follows a batch. `before` is the
    /// `data_bytes` reading from before it was placed.
    fn commit_batch(
        &mut self,
        cache: &SegmentCache,
        cws: u64,
        file: u32,
        ops: &[BatchOp],
        journal_seq: u64,
        before: u64,
    ) -> Result<()> {
        self.batch_journal_seq = journal_seq;
        for op in ops {
            if let BatchOp::Put { .. } = op {
                apply_batch_op(&mut self.index, Some(&mut self.live), file, op, u64::MAX)?;
            }
        }
        self.stats.cache_flushes += 1;
        self.stats.cws_written += cws;
        self.stats.writes_compacted += cache.writes();
        self.after_batch(before)
    }

    /// Makes every batch durable, then empties the journal (whose records are all in batches).
    /// REQUIRES: the segment cache is empty.
    fn sync_and_reset_journal(&mut self) -> Result<()> {
        debug_assert!(self.cache.is_empty() && self.frozen.is_none());
        self.data.sync()?;
        // Recovery must know these batches were durable before the journal stops holding their writes: it trusts
        // batches up to the mark (a damaged unit is corruption, reported when read) and verifies later ones,
        // dropping a torn one whose writes the journal still holds.
        let (file, len) = self.data.end();
        let mark = SyncMark { batch_seq: self.data.last_seq(), file, len };
        vfs::write_atomic(self.fs.as_ref(), &vfs::join(&self.dir, SYNCED_FILE), &mark.encode())?;
        self.synced = mark;
        self.journal.rewind();
        self.journal_len_at_batch = 0;
        self.stats.data_syncs += 1;
        Ok(())
    }

    /// Bookkeeping after a batch: a checkpoint when enough was appended since the last one, else a journal reset
    /// once the journal holds `journal_reset_bytes`; both first write the current cache, so the index is exactly
    /// the batches' state. Notes GC candidates. REQUIRES: no frozen cache.
    pub(crate) fn after_batch(&mut self, bytes_before: u64) -> Result<()> {
        self.bytes_since_checkpoint += self.data_bytes().saturating_sub(bytes_before);
        let checkpoint =
            self.bytes_since_checkpoint >= self.opts.checkpoint_bytes.max(4 * self.last_checkpoint_bytes);
        let reset = self.journal.len() >= self.opts.journal_reset_bytes;
        if (checkpoint || reset) && !self.cache.is_empty() {
            // Its own `after_batch` finds the cache empty and does the checkpoint or reset.
            return self.flush_cache();
        }
        if checkpoint {
            self.checkpoint(&[])?;
        } else if reset {
            self.sync_and_reset_journal()?;
        }
        self.gc_due = self.gc_wanted();
        Ok(())
    }

    /// Counts the batch bytes appended since `before` (a `DataFiles::appended` reading) towards the next
    /// checkpoint.
    pub(crate) fn add_appended(&mut self, before: u64) {
        self.bytes_since_checkpoint += self.data.appended().saturating_sub(before);
    }

    /// Bytes of batches appended since the volume was opened.
    fn data_bytes(&self) -> u64 {
        self.data.appended()
    }

    /// Writes the index checkpoint durably (write-temp, sync, rename, sync dir). Files in `dropping` (garbage
    /// collection victims the index no longer references) are left out of its file list.
    /// REQUIRES: the segment cache is empty, so the index holds exactly the effect of the batches so far.
    pub(crate) fn checkpoint(&mut self, dropping: &[u32]) -> Result<()> {
        debug_assert!(self.cache.is_empty() && self.frozen.is_none());
        let pieces: Vec<Piece> =
            self.index.iter().map(|(r, loc)| Piece { first: r.first(), blocks: r.len(), loc }).collect();
        let files = self.data.written().into_iter().filter(|(id, _)| !dropping.contains(id)).collect();
        let c = Checkpoint {
            batch_seq: self.data.last_seq(),
            journal_seq: self.batch_journal_seq,
            current_file: self.data.current(),
            files,
            pieces,
        };
        let bytes = c.encode();
        // The checkpoint stands for the batches: they must be durable first.
        self.data.sync()?;
        vfs::write_atomic(self.fs.as_ref(), &vfs::join(&self.dir, CHECKPOINT_FILE), &bytes)?;
        self.last_checkpoint_bytes = bytes.len() as u64;
        self.bytes_since_checkpoint = 0;
        self.checkpoint_seq = c.batch_seq;
        self.stats.checkpoints += 1;
        // Everything the journal holds is in synced batches now.
        self.sync_and_reset_journal()
    }

    pub(super) fn checkpoint_seq(&self) -> u64 {
        self.checkpoint_seq
    }
}

/// I/O compaction of `cache` into CWs of at most `max_unit` blocks and their batch: (batch, number of CWs).
fn encode_cache(cache: &SegmentCache, max_unit: u64) -> (crate::datafile::EncodedBatch, u64) {
    let cws = cache.compact(max_unit);
    (crate::datafile::encode_batch(cache.deletes(), &cws), cws.len() as u64)
}

/// The flusher thread: writes each frozen cache to a data file. Encoding (I/O compaction, the LZ4 probe and
/// pass, checksums) and the data-file write run without the lock; placing the batch in the file and the index
/// update hold it. Nothing else appends to, syncs or seals a data file meanwhile: every other appender (a sync
/// flush, a checkpoint, a collection install, a delete) first waits for the frozen cache to be gone
/// (`Volume::drained`), and it stays in place until the batch is in the index. A failure poisons the volume
/// (memory may be ahead of the files) and leaves the frozen cache readable; the journal still holds its
/// writes. Exits at shutdown once nothing is frozen.
pub(super) fn flusher(sh: &Shared) {
    loop {
        let (job, journal_seq, max_unit) = {
            let mut s = sh.lock();
            loop {
                if s.poisoned.is_none()
                    && !s.frozen_taken
                    && let Some(f) = &s.frozen
                {
                    let job = (f.clone(), s.frozen_journal_seq, u64::from(s.opts.max_unit_blocks));
                    s.frozen_taken = true;
                    s.flushing = true;
                    break job;
                }
                if sh.shutdown.load(Ordering::Acquire) {
                    return;
                }
                #[cfg(test)]
                std::thread::sleep(std::time::Duration::from_millis(
                    sh.pause_before_wait_ms.load(Ordering::Relaxed),
                ));
                s = sh.wait(s);
            }
        };
        let (batch, n_cws) = encode_cache(&job, max_unit);
        let mut s = sh.lock();
        let before = s.data_bytes();
        let data_file_bytes = s.opts.data_file_bytes;
        let placed = s.data.reserve(journal_seq, batch, data_file_bytes);
        drop(s);
        let written = placed.and_then(|p| p.write().map(|()| p));
        let mut s = sh.lock();
        // Installed first: `after_batch` may flush the current cache, whose batch must come after this one.
        s.frozen = None;
        s.frozen_taken = false;
        s.flushing = false;
        let r = written.and_then(|p| s.commit_batch(&job, n_cws, p.file, &p.ops, journal_seq, before));
        if r.is_err() {
            // Keep the frozen blocks readable: the index may lack them.
            s.frozen = Some(job);
            s.frozen_taken = true;
        }
        if s.poison_on_err(r).is_ok() && s.data.appended() - s.presynced >= s.opts.journal_reset_bytes / 4 {
            // Every quarter of a journal reset's worth of batches, write the data file back early on another
            // thread: the reset's sync under the lock then finds little left, where writers used to stall for
            // a whole 32 MiB (sequential writes 1.06 -> 1.3 GB/s, P99 15 -> 7 ms). Done here on the flusher
            // thread itself, the sync held up the next batch and cost 12 % instead.
            s.presynced = s.data.appended();
            s.data.early_sync();
        }
        drop(s);
        sh.cv.notify_all();
    }
}
