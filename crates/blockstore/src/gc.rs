//! Data-file garbage collection: reclaiming the space of overwritten and trimmed data.
//!
//! Data files are append-only, so an overwrite or a trim leaves the old bytes behind. Every index update keeps
//! `live[file]` (blocks the index maps to the file) exact by first looking up what it overrides, and each file
//! knows the blocks written into it; their ratio is the file's live ratio. A round of collection:
//!
//! 1. *Plan* (volume lock held): choose the sealed files with the lowest live ratio at or below the threshold
//!    (the emptiest first, up to about one data file of live data to copy) and list the index pieces that map to
//!    them, with their locations.
//! 2. *Copy* (lock released; reads and writes proceed): read and decompress each unit those pieces use, once.
//!    Data files are append-only and only collection removes one (rounds are serialised by `gc_lock`), so this
//!    needs no lock.
//! 3. *Install* (lock held): a conditional replace. For each piece, look at what the index maps the range to
//!    *now* and keep only the sub-ranges still pointing at exactly the old location (same file, unit and offset);
//!    anything a newer write or trim replaced in the meantime is dropped, so the racing newer write wins. Blocks
//!    the segment cache holds are skipped too: they are newer than the index and will replace it at the next
//!    flush. The kept blocks are merged into CWs by address (I/O compaction of the relocated data) and appended as
//!    an ordinary batch to the current data file; its `journal_seq` is the previous batch's, because it takes
//!    nothing from the journal. Replay applies the batch in sequence order, so recovery reproduces exactly the
//!    index this step produced.
//! 4. *Delete*: once no index piece maps to a victim, the segment cache is flushed (so the index is exactly the
//!    batches' state), an index checkpoint that no longer lists the victims is written durably, and only then
//!    are the files removed and the directory synced. A crash before the checkpoint replays the relocation batch
//!    on top of the old checkpoint, with the victims still present; a crash after it finds files the checkpoint
//!    does not list (older than its current file) and removes them at open.
//!
//! The write cost of collection is the relocated blocks (`Stats::gc_blocks_relocated`); the choice of the
//! emptiest files keeps it at most `gc_live_percent` % of the space reclaimed. Automatic rounds (after a flush)
//! copy nothing until the sealed files' dead blocks reach `gc_garbage_percent` % of the live data: until then they
//! only delete files that emptied completely. Collecting a file the moment it crosses `gc_live_percent` would copy
//! data a sequential rewrite was about to kill (a sequential rewrite of the disk used to relocate half of every
//! file); waiting lets the files empty further, at the price of disk space bounded by that percentage.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rask::BlockRange;
use vfs::File;

use crate::cache::merge_runs;
use crate::datafile::read_unit_from;
use crate::format::BatchOp;
use crate::location::Location;
use crate::volume::{Shared, State, apply_batch_op};
use crate::{BLOCK_SIZE, Error, Result, Volume};

/// What one collection round did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Data files removed.
    pub files_removed: u64,
    /// Bytes of those files.
    pub bytes_removed: u64,
    /// Blocks copied to the current data file.
    pub blocks_relocated: u64,
    /// Blocks read but not copied: a newer write or delete replaced them during the round.
    pub blocks_superseded: u64,
}

/// Phase 1's result: the victims and the pieces that still map to them.
struct Plan {
    victims: Vec<u32>,
    pieces: Vec<(BlockRange, Location)>,
    handles: HashMap<u32, Arc<dyn File>>,
}

impl Volume {
    /// Runs one garbage-collection round over sealed data files whose live blocks are at most `max_live_percent`
    /// % of the blocks written into them (100: every sealed file). Reads and writes proceed while live data is
    /// copied.
    pub fn collect_garbage(&self, max_live_percent: u32) -> Result<GcReport> {
        self.collect_garbage_with(max_live_percent, || {})
    }

    /// [`collect_garbage`](Self::collect_garbage) calling `between` after the copy phase, before the install:
    /// where a concurrent write lands in a real race. For tests.
    #[doc(hidden)]
    pub fn collect_garbage_with(&self, max_live_percent: u32, between: impl FnOnce()) -> Result<GcReport> {
        if max_live_percent > 100 {
            return Err(Error::InvalidArgument(format!("max_live_percent {max_live_percent} is above 100")));
        }
        let _round = self.shared.gc_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.shared.gc_round(max_live_percent, false, between)
    }

    /// The automatic round after a flush left a candidate: on a background thread (`Options::gc_in_background`,
    /// one at a time) or here. Skipped if a round is already running. Its errors are not the triggering write's:
    /// a write-path failure poisons the volume, a read failure ends the round.
    pub(crate) fn background_gc(&self) {
        let sh = &self.shared;
        if !self.gc_in_background {
            return sh.auto_gc_round();
        }
        if sh.gc_running.swap(true, Ordering::AcqRel) {
            return;
        }
        // The thread holds the shared state, not the volume, so the volume's drop can stop and join it.
        let mut slot = self.gc_thread.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(done) = slot.take() {
            // `gc_running` was clear, so that thread is past its round (at most returning).
            let _ = done.join();
        }
        let bg = sh.clone();
        let spawned = std::thread::Builder::new().name("blockstore-gc".into()).spawn(move || {
            bg.auto_gc_round();
            bg.gc_running.store(false, Ordering::Release);
        });
        match spawned {
            Ok(h) => *slot = Some(h),
            Err(_) => {
                drop(slot);
                sh.gc_running.store(false, Ordering::Release);
                sh.auto_gc_round();
            }
        }
    }

    /// Waits until no background collection round is running (tests and benchmarks).
    #[doc(hidden)]
    pub fn wait_for_background_gc(&self) {
        while self.shared.gc_running.load(Ordering::Acquire) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

impl Shared {
    fn auto_gc_round(&self) {
        let Ok(_round) = self.gc_lock.try_lock() else { return };
        let pct = self.lock().opts.gc_live_percent;
        let _ = self.gc_round(pct, true, || {});
    }

    /// One round over candidates at `pct`; `auto` applies the garbage threshold (`Options::gc_garbage_percent`).
    /// A round whose volume is dropped during its copy phase gives up before changing anything.
    fn gc_round(&self, pct: u32, auto: bool, between: impl FnOnce()) -> Result<GcReport> {
        let plan = {
            let mut s = self.lock();
            s.usable()?;
            s.gc_due = false;
            match s.plan_gc(pct, auto)? {
                Some(p) => p,
                None => return Ok(GcReport::default()),
            }
        };
        let copies = read_pieces(&plan)?;
        between();
        if self.shutdown.load(Ordering::Acquire) {
            return Ok(GcReport::default());
        }
        let mut s = self.drained();
        s.usable()?;
        let r = s.install_gc(&plan, copies);
        let r = self.stop_on_err(s, r);
        // The plan holds the last handles of the removed (already unlinked) files: closing them makes the kernel
        // drop their pages and free their blocks, ~5 % of a sequential write stream's time when it ran on the
        // writing thread. A short-lived thread does it instead; if it cannot be started, this thread does.
        if r.as_ref().is_ok_and(|g| g.files_removed > 0) {
            let handles = plan.handles;
            // On failure to spawn, the closure and with it the handles are dropped here.
            let _ = std::thread::Builder::new().name("blockstore-close".into()).spawn(move || drop(handles));
        }
        r
    }
}

/// Reads the blocks of every planned piece, decompressing each unit once.
fn read_pieces(plan: &Plan) -> Result<Vec<(BlockRange, Location, Vec<u8>)>> {
    let mut units: HashMap<(u32, u64), Vec<u8>> = HashMap::new();
    let mut out = Vec::with_capacity(plan.pieces.len());
    for &(r, loc) in &plan.pieces {
        let unit = match units.entry((loc.file, loc.unit_offset)) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let f = plan.handles.get(&loc.file).ok_or_else(|| {
                    Error::Corruption(format!("garbage collection lost data file {}", loc.file))
                })?;
                e.insert(read_unit_from(f.as_ref(), &loc)?)
            }
        };
        let at = loc.block_in_unit as usize * BLOCK_SIZE;
        let len = r.len() as usize * BLOCK_SIZE;
        let bytes = unit.get(at..at + len).ok_or_else(|| {
            Error::Corruption(format!(
                "index piece {r:?} runs past its unit at {}:{}",
                loc.file, loc.unit_offset
            ))
        })?;
        out.push((r, loc, bytes.to_vec()));
    }
    Ok(out)
}

impl State {
    fn plan_gc(&mut self, pct: u32, auto: bool) -> Result<Option<Plan>> {
        let budget = (self.opts.data_file_bytes / BLOCK_SIZE as u64).max(1);
        // A round holds a handle on every victim it copies from, so it copies from no more files than the data
        // files' handle cache keeps open; emptied files need no handle, and any number of them go at once.
        let max_read = self.data.max_open();
        let mut victims = Vec::new();
        let (mut copy, mut read) = (0u64, 0usize);
        for (id, live, _) in self.gc_candidates(pct, auto) {
            if !victims.is_empty() && (copy + live > budget || (live > 0 && read == max_read)) {
                break;
            }
            victims.push(id);
            copy += live;
            read += usize::from(live > 0);
        }
        if victims.is_empty() {
            return Ok(None);
        }
        let pieces: Vec<(BlockRange, Location)> =
            self.index.iter().filter(|(_, loc)| victims.contains(&loc.file)).collect();
        let mut handles = HashMap::new();
        for &(_, loc) in &pieces {
            if let std::collections::hash_map::Entry::Vacant(e) = handles.entry(loc.file) {
                e.insert(self.data.handle(loc.file)?);
            }
        }
        Ok(Some(Plan { victims, pieces, handles }))
    }

    fn install_gc(&mut self, plan: &Plan, copies: Vec<(BlockRange, Location, Vec<u8>)>) -> Result<GcReport> {
        let mut report = GcReport::default();
        // The conditional replace: keep only what still maps to exactly the copied location.
        let mut runs: Vec<(u64, &[u8], bool)> = Vec::new();
        for (range, loc, bytes) in &copies {
            let mut still = Vec::new();
            self.index.get_with(*range, |r, now| {
                let shift = r.first() - range.first();
                if now.file == loc.file
                    && now.unit_offset == loc.unit_offset
                    && u64::from(now.block_in_unit) == u64::from(loc.block_in_unit) + shift
                {
                    still.push(r);
                }
            });
            let mut kept = 0;
            for r in still {
                for b in r.first()..=r.last() {
                    if self.cache_holds(b) {
                        continue;
                    }
                    let at = (b - range.first()) as usize * BLOCK_SIZE;
                    runs.push((b, &bytes[at..at + BLOCK_SIZE], loc.is_raw()));
                    kept += 1;
                }
            }
            report.blocks_relocated += kept;
            report.blocks_superseded += range.len() - kept;
        }
        runs.sort_unstable_by_key(|&(b, _, _)| b);
        let cws = merge_runs(runs, u64::from(self.opts.max_unit_blocks));
        if !cws.is_empty() {
            let before = self.data.appended();
            let (file, ops) =
                self.data.append_batch(self.batch_journal_seq, &[], &cws, self.opts.data_file_bytes)?;
            for op in &ops {
                if let BatchOp::Put { .. } = op {
                    apply_batch_op(&mut self.index, Some(&mut self.live), file, op, u64::MAX)?;
                }
            }
            self.add_appended(before);
        }
        // Cached overwrites of victim blocks replace them in the index now.
        self.flush_cache()?;
        let victims: Vec<u32> =
            plan.victims.iter().copied().filter(|v| self.live.get(v).copied().unwrap_or(0) == 0).collect();
        if !victims.is_empty() {
            self.checkpoint(&victims)?;
            for &v in &victims {
                report.bytes_removed += self.data.file_bytes(v)?;
                self.data.remove(v)?;
                self.live.remove(&v);
                report.files_removed += 1;
            }
            self.fs.sync_dir(&self.dir)?;
        }
        self.stats.gc_blocks_relocated += report.blocks_relocated;
        self.stats.gc_blocks_superseded += report.blocks_superseded;
        self.stats.gc_files_removed += report.files_removed;
        self.stats.gc_bytes_removed += report.bytes_removed;
        if report != GcReport::default() {
            self.stats.gc_runs += 1;
        }
        self.gc_due = self.gc_wanted();
        Ok(report)
    }
}
