//! Per-level compaction statistics, RocksDB's "Compaction Stats" table: for each output level, how many
//! compactions wrote into it, the bytes they read from the input level (`Rn`) and from the output level itself
//! (`Rnp1`), the bytes they wrote, and what trivial moves carried there without rewriting. Level 0's row holds
//! the flushes. This is where write amplification is attributed to a level.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::version::NUM_LEVELS;

/// Live counters of one output level.
#[derive(Debug, Default)]
pub struct LevelCounters {
    compactions: AtomicU64,
    read_input_bytes: AtomicU64,
    read_output_bytes: AtomicU64,
    write_bytes: AtomicU64,
    input_files: AtomicU64,
    output_files: AtomicU64,
    trivial_moves: AtomicU64,
    moved_files: AtomicU64,
    moved_bytes: AtomicU64,
    micros: AtomicU64,
}

/// The counters of every output level.
#[derive(Debug)]
pub struct PerLevel([LevelCounters; NUM_LEVELS]);

impl Default for PerLevel {
    fn default() -> Self {
        PerLevel(std::array::from_fn(|_| LevelCounters::default()))
    }
}

/// What one compaction, flush or move did, for [`PerLevel::record`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Job {
    /// The level written.
    pub output_level: usize,
    /// Bytes read from the input level (the memtable's table bytes for a flush: 0).
    pub read_input_bytes: u64,
    /// Bytes read from the output level.
    pub read_output_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Input files (both levels).
    pub input_files: u64,
    /// Output files.
    pub output_files: u64,
    /// A trivial move (nothing read or written; `moved_*` count what moved).
    pub trivial_move: bool,
    /// Wall-clock time of the job.
    pub micros: u64,
}

impl PerLevel {
    /// Adds one job to its output level's row.
    pub fn record(&self, j: &Job) {
        let Some(c) = self.0.get(j.output_level) else { return };
        let add = |a: &AtomicU64, v: u64| {
            a.fetch_add(v, Ordering::Relaxed);
        };
        if j.trivial_move {
            add(&c.trivial_moves, 1);
            add(&c.moved_files, j.input_files);
            add(&c.moved_bytes, j.read_input_bytes);
            return;
        }
        add(&c.compactions, 1);
        add(&c.read_input_bytes, j.read_input_bytes);
        add(&c.read_output_bytes, j.read_output_bytes);
        add(&c.write_bytes, j.write_bytes);
        add(&c.input_files, j.input_files);
        add(&c.output_files, j.output_files);
        add(&c.micros, j.micros);
    }

    /// A snapshot of every row.
    pub fn snapshot(&self) -> Vec<CompactionLevelStats> {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        self.0
            .iter()
            .map(|c| CompactionLevelStats {
                compactions: l(&c.compactions),
                read_input_bytes: l(&c.read_input_bytes),
                read_output_bytes: l(&c.read_output_bytes),
                write_bytes: l(&c.write_bytes),
                input_files: l(&c.input_files),
                output_files: l(&c.output_files),
                trivial_moves: l(&c.trivial_moves),
                moved_files: l(&c.moved_files),
                moved_bytes: l(&c.moved_bytes),
                micros: l(&c.micros),
            })
            .collect()
    }
}

/// One row of the per-level compaction table (indexed by output level; row 0 is flushes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionLevelStats {
    /// Compactions (flushes for level 0) that wrote into this level, trivial moves excluded.
    pub compactions: u64,
    /// Bytes they read from the level above (`Rn`).
    pub read_input_bytes: u64,
    /// Bytes they read from this level (`Rnp1`).
    pub read_output_bytes: u64,
    /// Bytes they wrote.
    pub write_bytes: u64,
    /// Files they read.
    pub input_files: u64,
    /// Files they wrote.
    pub output_files: u64,
    /// Trivial moves into this level.
    pub trivial_moves: u64,
    /// Files those moves carried.
    pub moved_files: u64,
    /// Bytes those moves carried.
    pub moved_bytes: u64,
    /// Time spent in the compactions, microseconds.
    pub micros: u64,
}

impl CompactionLevelStats {
    /// RocksDB's per-level `W-Amp`: bytes written over bytes read from the level above.
    pub fn write_amp(&self) -> f64 {
        if self.read_input_bytes == 0 { 0.0 } else { self.write_bytes as f64 / self.read_input_bytes as f64 }
    }

    /// A JSON object.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"compactions\":{},\"read_input_bytes\":{},\"read_output_bytes\":{},\"write_bytes\":{},\
             \"input_files\":{},\"output_files\":{},\"trivial_moves\":{},\"moved_files\":{},\"moved_bytes\":{},\
             \"micros\":{}}}",
            self.compactions,
            self.read_input_bytes,
            self.read_output_bytes,
            self.write_bytes,
            self.input_files,
            self.output_files,
            self.trivial_moves,
            self.moved_files,
            self.moved_bytes,
            self.micros
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_split_rewrites_from_moves() {
        let p = PerLevel::default();
        p.record(&Job {
            output_level: 1,
            read_input_bytes: 10,
            read_output_bytes: 5,
            write_bytes: 12,
            ..Job::default()
        });
        p.record(&Job {
            output_level: 2,
            read_input_bytes: 7,
            input_files: 2,
            trivial_move: true,
            ..Job::default()
        });
        let s = p.snapshot();
        assert_eq!(
            (s[1].compactions, s[1].read_input_bytes, s[1].read_output_bytes, s[1].write_bytes),
            (1, 10, 5, 12)
        );
        assert!((s[1].write_amp() - 1.2).abs() < 1e-9);
        assert_eq!((s[2].compactions, s[2].trivial_moves, s[2].moved_files, s[2].moved_bytes), (0, 1, 2, 7));
        p.record(&Job { output_level: NUM_LEVELS, ..Job::default() });
    }
}
