//! Leveled compaction: picking (scores, L0 file count, round-robin within a level), the merge that drops
//! shadowed and covered entries and carries range tombstones down, trivial moves, and RocksDB's estimate of
//! pending compaction bytes.
//!
//! Level targets are static (`level_compaction_dynamic_level_bytes = false`, RocksDB 7.x's default): L1 holds
//! `max_bytes_for_level_base`, each next level `T` times more. Which files a compaction takes is `picker.rs`.

use std::sync::Arc;

use crate::edit::{FileInfo, VersionEdit};
use crate::error::{Error, Result};
use crate::ikey::{self, Kind};
use crate::iter::{InternalIter, MergingIter};
use crate::level_iter::LevelIter;
use crate::options::Options;
use crate::output_cut::OutputCut;
use crate::rangedel::RangeCover;
use crate::table::{TableBuilder, TableOptions};
use crate::table_cache::TableCache;
use crate::tombstones::{Fragments, Tombstone};
use crate::version::{FileMeta, NUM_LEVELS, Version};

/// The target size of level `level` (>= 1).
pub fn level_target(opts: &Options, level: usize) -> u64 {
    let mut t = opts.max_bytes_for_level_base;
    for _ in 1..level {
        t = t.saturating_mul(opts.max_bytes_for_level_multiplier);
    }
    t
}

pub use crate::picker::{pick, scores};

/// RocksDB's `EstimateCompactionBytesNeeded` (VersionStorageInfo, static level targets): bytes that compactions
/// must rewrite to bring every level under its target, counting the fan-out into the next level.
pub fn pending_compaction_bytes(v: &Version, opts: &Options) -> u64 {
    let mut needed: u64 = 0;
    let mut to_next: u64 = 0;
    let l0: u64 = v.level_bytes(0);
    let l0_triggered =
        v.levels[0].len() >= opts.level0_file_num_compaction_trigger || l0 >= opts.max_bytes_for_level_base;
    if l0_triggered {
        needed = l0;
        to_next = l0;
    }
    let mut bytes_next_level: u64 = 0;
    for level in 1..NUM_LEVELS - 1 {
        let mut level_size = if bytes_next_level > 0 { bytes_next_level } else { v.level_bytes(level) };
        bytes_next_level = 0;
        if level == 1 && l0_triggered {
            needed += level_size;
        }
        level_size += to_next;
        to_next = 0;
        let target = level_target(opts, level);
        if level_size > target {
            to_next = level_size - target;
            bytes_next_level = v.level_bytes(level + 1);
            if bytes_next_level > 0 {
                needed += (to_next as f64 * (bytes_next_level as f64 / level_size as f64 + 1.0)) as u64;
            }
        }
    }
    needed
}

/// A chosen compaction.
#[derive(Debug)]
pub struct Compaction {
    /// Input level.
    pub level: usize,
    /// Files from `level`.
    pub inputs: Vec<Arc<FileMeta>>,
    /// Overlapping files from `level + 1`.
    pub next: Vec<Arc<FileMeta>>,
    /// Whether no level below `level + 1` overlaps the key range (tombstones may then be dropped).
    pub bottommost: bool,
    /// Files of `level + 2` overlapping the compaction's key range (where outputs are cut; see `output_cut`).
    pub grandparents: Vec<Arc<FileMeta>>,
    /// The version the compaction was picked from (pins the inputs).
    pub version: Arc<Version>,
}

impl Compaction {
    /// The output level.
    pub fn output_level(&self) -> usize {
        self.level + 1
    }

    /// Whether the inputs can move down without rewriting: nothing in the next level overlaps them, and they
    /// do not overlap each other (always true above L0; for L0, RocksDB's L0 trivial move of disjoint files).
    pub fn is_trivial_move(&self) -> bool {
        if !self.next.is_empty() {
            return false;
        }
        if self.level > 0 || self.inputs.len() == 1 {
            return true;
        }
        let mut files: Vec<_> = self.inputs.iter().collect();
        files.sort_by(|a, b| a.smallest_user().cmp(b.smallest_user()));
        files.windows(2).all(|w| w[0].largest_user() < w[1].smallest_user())
    }

    /// Total input bytes.
    pub fn input_bytes(&self) -> u64 {
        self.inputs.iter().chain(&self.next).map(|f| f.info.size).sum()
    }

    /// Builds a compaction of `inputs` at `level` into `level + 1`.
    pub fn new(v: Arc<Version>, level: usize, inputs: Vec<Arc<FileMeta>>) -> Compaction {
        let lo = inputs.iter().map(|f| f.smallest_user().to_vec()).min().unwrap_or_default();
        let hi = inputs.iter().map(|f| f.largest_user().to_vec()).max().unwrap_or_default();
        let next = v.overlapping(level + 1, Some(&lo), Some(&hi));
        let lo2 = next.iter().map(|f| f.smallest_user().to_vec()).chain([lo]).min().unwrap_or_default();
        let hi2 = next.iter().map(|f| f.largest_user().to_vec()).chain([hi]).max().unwrap_or_default();
        let bottommost =
            ((level + 2)..NUM_LEVELS).all(|l| v.overlapping(l, Some(&lo2), Some(&hi2)).is_empty());
        let grandparents = if level + 2 < NUM_LEVELS {
            v.overlapping(level + 2, Some(&lo2), Some(&hi2))
        } else {
            Vec::new()
        };
        Compaction { level, inputs, next, bottommost, grandparents, version: v }
    }

    /// Whether `uk` has no entries in levels below the output level (a point tombstone may then be dropped).
    fn is_base_level_for(&self, uk: &[u8]) -> bool {
        ((self.level + 2)..NUM_LEVELS)
            .all(|l| self.version.levels[l].iter().all(|f| !f.overlaps(Some(uk), Some(uk))))
    }
}

/// Keeps the tombstone sequence numbers some reader may still need. Below the oldest snapshot only the newest
/// covering tombstone of each fragment matters; at the bottom level even that can go (everything it covered in
/// this key range is being dropped by the same compaction, and nothing lies below).
pub fn compact_tombstones(f: &Fragments, smallest_snapshot: u64, bottommost: bool) -> Fragments {
    let mut out = Vec::new();
    for frag in f.iter() {
        let mut kept_old = false;
        for &seq in &frag.seqs {
            if seq > smallest_snapshot {
                out.push(Tombstone { start: frag.start.clone(), end: frag.end.clone(), seq });
            } else if !kept_old && !bottommost {
                kept_old = true;
                out.push(Tombstone { start: frag.start.clone(), end: frag.end.clone(), seq });
            }
        }
    }
    Fragments::new(&out)
}

/// What a compaction or flush produced.
#[derive(Debug, Default)]
pub struct Outputs {
    /// The new tables.
    pub files: Vec<FileInfo>,
    /// Bytes written.
    pub bytes: u64,
    /// Entries dropped because a range tombstone covered them.
    pub range_covered: u64,
}

/// Where outputs go and how they are built.
pub struct OutputSink<'a> {
    /// File system.
    pub fs: &'a dyn vfs::Fs,
    /// Database directory.
    pub dir: &'a std::path::Path,
    /// Allocates file numbers.
    pub new_number: &'a mut dyn FnMut() -> u64,
    /// Table options.
    pub table: TableOptions,
    /// Where output files are cut (always at user-key boundaries).
    pub cut: OutputCut,
}

impl std::fmt::Debug for OutputSink<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSink").field("dir", &self.dir).finish_non_exhaustive()
    }
}

/// An output whose entries are all added: (number, clip start, clip end, builder).
type Done = (u64, Option<Vec<u8>>, Option<Vec<u8>>, TableBuilder);

/// Adds the range tombstones clipped to the output's bounds, finishes the table and records it in `out`.
fn finish_output(out: &mut Outputs, write_tombstones: Option<&Fragments>, d: Done) -> Result<()> {
    let (n, lo, hi, mut b) = d;
    if let Some(t) = write_tombstones {
        b.add_tombstones(&t.clipped(lo.as_deref(), hi.as_deref()));
    }
    let (props, size) = b.finish()?;
    out.bytes += size;
    out.files.push(FileInfo {
        number: n,
        size,
        smallest: props.smallest_key.clone(),
        largest: props.largest_key.clone(),
        smallest_seq: props.smallest_seq,
        largest_seq: props.largest_seq,
        num_entries: props.num_entries,
        num_deletions: props.num_deletions,
        num_range_dels: props.num_range_dels,
    });
    Ok(())
}

/// Writes the entries of `input` that survive into tables. Used by flush (one output, memtable input, nothing
/// dropped but shadowed versions) and compaction.
///
/// `smallest_snapshot`: entries hidden from every snapshot are dropped. `drop_point_tombstone(uk)` says when a
/// point tombstone at or below the oldest snapshot may go. `tombstones` are the input range tombstones (already
/// compacted); they drop covered entries and are written, clipped, into the output files. `global` is the cover of a
/// range-delete strategy that keeps records outside the tables (GLORAN), positioned for `smallest_snapshot`: an
/// entry it covers is covered for every reader and is dropped too.
pub fn write_outputs(
    sink: &mut OutputSink<'_>,
    input: &mut dyn InternalIter,
    smallest_snapshot: u64,
    drop_point_tombstone: &dyn Fn(&[u8]) -> bool,
    covering: &Fragments,
    write_tombstones: Option<&Fragments>,
    mut global: Option<&mut (dyn RangeCover + '_)>,
) -> Result<Outputs> {
    let mut out = Outputs::default();
    let mut builder: Option<(TableBuilder, u64, Option<Vec<u8>>)> = None;
    // The current user key (reused, not reallocated per key), once `have_key`.
    let mut cur_key: Vec<u8> = Vec::new();
    let mut have_key = false;
    let mut last_seq_for_key = u64::MAX;
    // Cut outputs not yet finished: (number, clip start, clip end, builder). An output's clip end may still
    // become open-ended until the next output starts, so it is finished then; at most one waits, and a
    // compaction holds at most two output files open, however many it writes.
    let mut done: Vec<Done> = Vec::new();
    let mut created: Vec<u64> = Vec::new();
    // The lower clip bound of the next output: the key where the previous output was cut.
    let mut next_lo: Option<Vec<u8>> = None;
    let result = (|| -> Result<()> {
        input.seek_to_first();
        while input.valid() {
            let ik = input.key();
            let p = ikey::parse(ik)
                .ok_or_else(|| Error::corruption("compaction input", "malformed internal key"))?;
            let new_key = !have_key || cur_key != p.user_key;
            if new_key {
                have_key = true;
                cur_key.clear();
                cur_key.extend_from_slice(p.user_key);
                last_seq_for_key = u64::MAX;
                // Every new user key moves the cutter over the grandparents, even when no output is open.
                if sink.cut.should_cut_before(p.user_key, builder.as_ref().map(|(b, _, _)| b.file_size()))
                    && let Some((b, n, lo)) = builder.take()
                {
                    done.push((n, lo, Some(p.user_key.to_vec()), b));
                    next_lo = Some(p.user_key.to_vec());
                }
            }
            // Hidden by a newer version every snapshot sees, or a point tombstone with nothing left below it.
            let drop = if last_seq_for_key <= smallest_snapshot
                || (p.kind == Kind::Delete && p.seq <= smallest_snapshot && drop_point_tombstone(p.user_key))
            {
                true
            } else if covering.max_covering_seq(p.user_key, smallest_snapshot) > p.seq {
                out.range_covered += 1;
                true
            } else if p.seq <= smallest_snapshot
                && let Some(g) = global.as_deref_mut()
                && g.covered(p.user_key, p.seq)?
            {
                out.range_covered += 1;
                true
            } else {
                false
            };
            last_seq_for_key = p.seq;
            if !drop {
                if builder.is_none() {
                    // Before the next file is opened, so its descriptor is free.
                    for d in done.drain(..) {
                        finish_output(&mut out, write_tombstones, d)?;
                    }
                    let n = (sink.new_number)();
                    created.push(n);
                    let f = sink
                        .fs
                        .open(&sink.dir.join(crate::filename::table_name(n)), vfs::OpenMode::CreateNew)?;
                    let lo = next_lo.take();
                    builder = Some((TableBuilder::new(f, sink.table.clone()), n, lo));
                }
                if let Some((b, _, _)) = &mut builder {
                    b.add(input.key(), input.value())?;
                }
            }
            input.next();
        }
        input.status()?;
        if let Some((b, n, lo)) = builder.take() {
            done.push((n, lo, None, b));
        } else if next_lo.is_some()
            && let Some(last) = done.last_mut()
        {
            // Cut, but nothing followed: the last output owns the rest of the key space.
            last.2 = None;
        }
        let has_tombstones = write_tombstones.is_some_and(|t| !t.is_empty());
        if done.is_empty() && has_tombstones {
            let n = (sink.new_number)();
            created.push(n);
            let f = sink.fs.open(&sink.dir.join(crate::filename::table_name(n)), vfs::OpenMode::CreateNew)?;
            done.push((n, None, None, TableBuilder::new(f, sink.table.clone())));
        }
        for d in done.drain(..) {
            finish_output(&mut out, write_tombstones, d)?;
        }
        Ok(())
    })();
    if let Err(e) = result {
        for n in created {
            let _ = sink.fs.remove_file(&sink.dir.join(crate::filename::table_name(n)));
        }
        return Err(e);
    }
    Ok(out)
}

/// Runs compaction `c`: merges its inputs and returns the edit that installs the outputs.
pub fn run(
    c: &Compaction,
    cache: &Arc<TableCache>,
    sink: &mut OutputSink<'_>,
    smallest_snapshot: u64,
    keep_tombstones: bool,
    global: Option<&mut (dyn RangeCover + '_)>,
) -> Result<(VersionEdit, Outputs)> {
    let mut children: Vec<Box<dyn InternalIter>> = Vec::new();
    let mut ts: Vec<Tombstone> = Vec::new();
    for f in c.inputs.iter().chain(&c.next) {
        if f.info.num_range_dels > 0 {
            let t = cache.table(f)?;
            ts.extend(t.tombstones().to_tombstones());
        }
    }
    if c.level == 0 {
        for f in &c.inputs {
            children.push(Box::new(cache.table(f)?.iter_with(Default::default(), false)));
        }
    } else {
        children.push(Box::new(LevelIter::for_compaction(c.inputs.clone(), cache.clone())));
    }
    children.push(Box::new(LevelIter::for_compaction(c.next.clone(), cache.clone())));
    let mut merged = MergingIter::new(children);
    let all = Fragments::new(&ts);
    let kept = compact_tombstones(&all, smallest_snapshot, c.bottommost);
    let outputs = write_outputs(
        sink,
        &mut merged,
        smallest_snapshot,
        &|uk| c.is_base_level_for(uk),
        &all,
        if keep_tombstones { Some(&kept) } else { None },
        global,
    )?;
    let mut e = VersionEdit::default();
    for f in &c.inputs {
        e.deleted.push((c.level as u32, f.number()));
    }
    for f in &c.next {
        e.deleted.push(((c.level + 1) as u32, f.number()));
    }
    for f in &outputs.files {
        e.added.push(((c.level + 1) as u32, f.clone()));
    }
    if c.level > 0
        && let Some(last) = c.inputs.iter().map(|f| &f.info.largest).max_by(|a, b| ikey::cmp(a, b))
    {
        e.compact_pointers.push((c.level as u32, last.clone()));
    }
    Ok((e, outputs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_bytes_zero_when_within_targets_and_grows_with_l0() {
        let v = Version::new(vec![Vec::new(); NUM_LEVELS]);
        let o = Options::default();
        assert_eq!(pending_compaction_bytes(&v, &o), 0);
        assert_eq!(level_target(&o, 1), 256 << 20);
        assert_eq!(level_target(&o, 3), (256 << 20) * 100);
    }

    #[test]
    fn tombstone_compaction_keeps_what_snapshots_need() {
        let t = |s: &str, e: &str, seq| Tombstone { start: s.into(), end: e.into(), seq };
        let f = Fragments::new(&[t("a", "c", 5), t("a", "c", 3), t("a", "c", 9)]);
        let k = compact_tombstones(&f, 6, false);
        assert_eq!(k.iter().next().map(|f| f.seqs.clone()), Some(vec![9, 5]));
        let k = compact_tombstones(&f, 6, true);
        assert_eq!(k.iter().next().map(|f| f.seqs.clone()), Some(vec![9]));
        let k = compact_tombstones(&f, 100, true);
        assert!(k.is_empty());
    }
}
