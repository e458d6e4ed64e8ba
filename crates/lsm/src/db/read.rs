//! The read path (docs/lsm.md §3): point lookups level by level, iterators over every source, and the
//! statistics and space-amplification scan (§9) that read the same sources.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::db_iter::DbIter;
use crate::error::{Error, Result};
use crate::ikey::{self, Kind};
use crate::iter::{InternalIter, MergingIter};
use crate::memtable::MemTable;
use crate::options::ReadOptions;
use crate::rangedel;
use crate::stats::{LevelStats, SpaceAmp, Stats, load};
use crate::table::GetStats;
use crate::tombstones::Fragments;
use crate::version::{NUM_LEVELS, Version};

use super::{Inner, lock};

/// What a read captures at its start: the memtables, the version and the sequence number it reads at.
struct Sources {
    mem: Arc<MemTable>,
    imm: Vec<Arc<MemTable>>,
    v: Arc<Version>,
    snapshot: u64,
}

impl Inner {
    /// Refuses a snapshot taken from another store (or another open of this one): its sequence number means
    /// nothing here, and no live snapshot keeps the versions it would read.
    fn check_snapshot(&self, opts: &ReadOptions) -> Result<()> {
        match opts.snapshot {
            Some(s) if !s.belongs_to(&self.snapshots) => Err(Error::InvalidArgument(format!(
                "snapshot at sequence {} belongs to another database instance",
                s.seq()
            ))),
            _ => Ok(()),
        }
    }

    pub(super) fn get(&self, opts: &ReadOptions, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_snapshot(opts)?;
        self.counters.gets.fetch_add(1, Ordering::Relaxed);
        // A registered snapshot is kept apart by every merge of the range records; an implicit one only by those
        // before it was read (see `RangeDeleteStrategy::generation`), so only an implicit one needs the check.
        let implicit = opts.snapshot.is_none();
        loop {
            let generation = implicit.then(|| self.range_deletes.generation());
            let r = self.get_once(opts, key)?;
            if generation.is_none_or(|g| self.range_deletes.generation() == g) {
                return Ok(r);
            }
        }
    }

    /// The sources a read sees and its snapshot. The implicit snapshot is read with the sources under the state
    /// lock: every compaction installed in the captured version used an oldest-snapshot no larger than it, and
    /// no memtable switch splits the pair.
    fn capture(&self, opts: &ReadOptions) -> Sources {
        let sources = {
            let s = lock(&self.state);
            let snapshot = opts.snapshot.map_or_else(|| self.last_seq.load(Ordering::Acquire), |s| s.seq());
            Sources { mem: s.mem.clone(), imm: s.imm.clone(), v: s.current.clone(), snapshot }
        };
        #[cfg(test)]
        super::tests::after_capture();
        sources
    }

    fn get_once(&self, opts: &ReadOptions, key: &[u8]) -> Result<Option<Vec<u8>>> {
        // Pinned before the sources are captured: GC of the global index waits for reads older than its decision.
        let _pin = self.range_deletes.pin();
        let Sources { mem, imm, v, snapshot } = self.capture(opts);
        let strategy = &*self.range_deletes;
        let local = strategy.keeps_local_tombstones();
        let mut examined = 0u64;
        let mut cover = strategy.global_cover(key, snapshot, &mut examined);
        let finish = |examined: u64, covered: bool| rangedel::count(&self.rd, examined, covered);
        // Memtables, newest first.
        for m in std::iter::once(&mem).chain(imm.iter().rev()) {
            if local {
                cover = cover.max(strategy.probe_source(&m.tombstones(), key, snapshot, &mut examined));
            }
            if let Some((seq, kind, val)) = m.get(key, snapshot) {
                // A global index is asked only now, for an entry that exists (§4.3).
                let covered = cover > seq
                    || (!local && kind == Kind::Value && strategy.entry_deleted(key, seq, snapshot)?);
                finish(examined, covered);
                return Ok(if covered || kind != Kind::Value { None } else { Some(val) });
            }
            if cover > 0 {
                finish(examined, true);
                return Ok(None);
            }
        }
        let target = ikey::make(key, snapshot, ikey::SEEK_KIND);
        let mut gs = GetStats::default();
        // Without local tombstones nothing above stops the search at a recent range delete. Before the first
        // block read (so an absent key still never reaches the index) the strategy is asked whether a record
        // deletes every version the tables can hold, their whole sequence band, as a memtable tombstone would
        // tell a local lookup.
        let mut ask_strategy = !local;
        let result = (|| -> Result<Option<Option<Vec<u8>>>> {
            for (level, files) in v.levels.iter().enumerate() {
                let candidates: &[Arc<crate::version::FileMeta>] = if level == 0 {
                    files
                } else {
                    let i = v.find_file(level, &target);
                    files.get(i).filter(|f| f.smallest_user() <= key).map_or(&[], std::slice::from_ref)
                };
                for f in candidates {
                    if level == 0 && !f.overlaps(Some(key), Some(key)) {
                        continue;
                    }
                    let t = self.table_cache.table(f)?;
                    if local && f.info.num_range_dels > 0 {
                        cover =
                            cover.max(strategy.probe_source(t.tombstones(), key, snapshot, &mut examined));
                    }
                    if t.may_contain(key, &mut gs) {
                        if std::mem::take(&mut ask_strategy)
                            && let Some((lo, hi)) = v.seq_bounds()
                            && strategy.covers_tables(key, lo, hi.min(snapshot), snapshot)
                        {
                            finish(examined, true);
                            return Ok(Some(None));
                        }
                        if let Some((seq, kind, val)) = t.get_unfiltered(&target)? {
                            let covered = cover > seq
                                || (!local
                                    && kind == Kind::Value
                                    && strategy.entry_deleted(key, seq, snapshot)?);
                            finish(examined, covered);
                            return Ok(Some(if covered || kind != Kind::Value { None } else { Some(val) }));
                        }
                    }
                    if cover > 0 {
                        finish(examined, true);
                        return Ok(Some(None));
                    }
                }
            }
            Ok(None)
        })();
        self.counters.bloom_checked.fetch_add(gs.bloom_checked, Ordering::Relaxed);
        self.counters.bloom_useful.fetch_add(gs.bloom_useful, Ordering::Relaxed);
        match result? {
            Some(r) => Ok(r),
            None => {
                finish(examined, false);
                Ok(None)
            }
        }
    }

    pub(super) fn iter(&self, opts: &ReadOptions) -> Result<DbIter> {
        self.check_snapshot(opts)?;
        let pin = self.range_deletes.pin();
        let lo = opts.lower_bound.as_deref();
        let hi = opts.upper_bound.as_deref();
        let implicit = opts.snapshot.is_none();
        let (mem, imm, v, snapshot, global) = loop {
            let generation = implicit.then(|| self.range_deletes.generation());
            let Sources { mem, imm, v, snapshot } = self.capture(opts);
            // The cursor holds the range records as they are now, so only a merge before it is taken matters
            // (see `get`).
            let global = self.range_deletes.cover(lo.unwrap_or_default(), hi, snapshot)?;
            if generation.is_none_or(|g| self.range_deletes.generation() == g) {
                break (mem, imm, v, snapshot, global);
            }
        };
        let mut children: Vec<Box<dyn InternalIter>> = Vec::new();
        let mut frags: Vec<Arc<Fragments>> = Vec::new();
        for m in std::iter::once(&mem).chain(imm.iter().rev()) {
            children.push(Box::new(m.iter_visible(snapshot)));
            frags.push(m.tombstones());
        }
        for f in &v.levels[0] {
            if f.overlaps(lo, hi) {
                let t = self.table_cache.table(f)?;
                if f.info.num_range_dels > 0 {
                    frags.push(t.tombstones().clone());
                }
                children.push(Box::new(t.iter()));
            }
        }
        for files in v.levels.iter().skip(1) {
            let files: Vec<_> = files.iter().filter(|f| f.overlaps(lo, hi)).cloned().collect();
            if files.is_empty() {
                continue;
            }
            for f in files.iter().filter(|f| f.info.num_range_dels > 0) {
                frags.push(self.table_cache.table(f)?.tombstones().clone());
            }
            children.push(Box::new(crate::level_iter::LevelIter::new(files, self.table_cache.clone())));
        }
        let (children, read_sink) = self.range_reduce_children(children, 1 + imm.len(), &v, opts);
        let tombstones = self.range_deletes.iterator_tombstones(frags, snapshot);
        let mut it = DbIter::new(
            MergingIter::new(children),
            snapshot,
            tombstones,
            opts.lower_bound.clone(),
            opts.upper_bound.clone(),
            v,
        );
        it.set_global(global, pin);
        if let Some(sink) = read_sink {
            it.set_read_sink(sink);
        }
        Ok(it)
    }

    pub(super) fn stats(&self) -> Stats {
        let (v, pending, mem_bytes, imms) = {
            let s = lock(&self.state);
            let mb = s.mem.approx_size() + s.imm.iter().map(|m| m.approx_size()).sum::<usize>();
            (s.current.clone(), s.pending_compaction_bytes, mb, s.imm.len())
        };
        let c = &self.counters;
        let (hits, misses) = self.table_cache.blocks().hit_miss();
        Stats {
            levels: (0..NUM_LEVELS)
                .map(|l| LevelStats { files: v.levels[l].len() as u64, bytes: v.level_bytes(l) })
                .collect(),
            user_bytes_written: load(&c.user_bytes_written),
            wal_bytes: load(&c.wal_bytes),
            wal_syncs: load(&c.wal_syncs),
            write_groups: load(&c.write_groups),
            writes: load(&c.writes),
            bytes_flushed: load(&c.bytes_flushed),
            flushes: load(&c.flushes),
            compact_read_bytes: load(&c.compact_read_bytes),
            compact_write_bytes: load(&c.compact_write_bytes),
            compactions: load(&c.compactions),
            trivial_moves: load(&c.trivial_moves),
            pending_compaction_bytes: pending,
            stall_micros: load(&c.stall_micros),
            gets: load(&c.gets),
            bloom_checked: load(&c.bloom_checked),
            bloom_useful: load(&c.bloom_useful),
            range_tombstones_consulted: load(&self.rd.consulted),
            lookups_with_tombstones: load(&self.rd.lookups_with_tombstones),
            range_covered_lookups: load(&self.rd.covered_hits),
            compaction_range_covered: load(&c.compaction_range_covered),
            table_opens: self.table_cache.opens(),
            block_cache_usage: self.table_cache.blocks().usage() as u64,
            block_cache_hits: hits,
            block_cache_misses: misses,
            memtable_bytes: mem_bytes as u64,
            immutable_memtables: imms as u64,
            table_range_tombstones: v.levels.iter().flatten().map(|f| f.info.num_range_dels).sum(),
            last_sequence: self.last_seq.load(Ordering::Acquire),
            resumes: load(&c.resumes),
            range_delete_global: self.range_deletes.global_stats(),
            range_reduce: self.range_reduce_stats(&v),
            compaction_levels: c.per_level.snapshot(),
        }
    }

    pub(super) fn space_amplification(&self) -> Result<SpaceAmp> {
        let (mem, imm, v) = {
            let s = lock(&self.state);
            (s.mem.clone(), s.imm.clone(), s.current.clone())
        };
        let mut sa = SpaceAmp::default();
        for m in std::iter::once(&mem).chain(imm.iter()) {
            sa.total_entries += (m.num_entries() + m.num_tombstones()) as u64;
            sa.total_bytes += m.approx_size() as u64;
        }
        for f in v.levels.iter().flatten() {
            sa.total_entries += f.info.num_entries + f.info.num_range_dels;
            sa.total_bytes += f.info.size;
        }
        let mut it = self.iter(&ReadOptions::default())?;
        it.seek_to_first();
        while it.valid() {
            sa.live_entries += 1;
            sa.live_bytes += (it.key().len() + it.value().len()) as u64;
            it.next();
        }
        it.status()?;
        Ok(sa)
    }
}
