//! Trace statistics as RASK §2–3 defines them, for checking a trace (or the synthetic generator) against the paper.
//!
//! - *Average write length*: blocks per write request (3.63 at Alibaba's EBS).
//! - *Long-CW ratio* (§3.1, Fig. 3a): writes are cut, per volume, into consecutive observation windows of
//!   `cw_window_writes` write requests (36 in Fig. 3a). Within a window, writes whose block ranges overlap or touch
//!   chain into a consecutive write (CW); a CW of two or more requests is *long*. The ratio is the fraction of
//!   write requests that belong to long CWs (65.0–81.5 % across Alibaba's workloads). The paper's example, a window of
//!   four writes [1,4], [11,12], [5,6], [7,8], has one long CW [1,8] of three requests: 75 %.
//! - *Read start relative to its CW* (§3.2, Fig. 4): a read is associated with the newest CW that covers its first
//!   block, among the CWs of completed windows; the offset is `read.first_block − cw.first_block`. More than 85.4 % of
//!   reads start at offset 0, over 95.7 % within 4 blocks (the compression unit), under 1 % 10 or more blocks away.
//!   Reads of blocks no completed CW covers are not associated and do not count.

use super::block_op::{BlockOp, IoKind};
use super::cw_map::{CwMap, chain_window};

/// The observation window of Fig. 3a, in write requests.
pub const DEFAULT_CW_WINDOW_WRITES: usize = 36;

/// Parameters of [`analyze`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnalysisOptions {
    /// Observation window in write requests (default 36, as Fig. 3a).
    pub cw_window_writes: usize,
}

impl Default for AnalysisOptions {
    fn default() -> AnalysisOptions {
        AnalysisOptions { cw_window_writes: DEFAULT_CW_WINDOW_WRITES }
    }
}

/// What [`analyze`] measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceStats {
    /// Reads.
    pub reads: u64,
    /// Writes.
    pub writes: u64,
    /// Blocks read.
    pub read_blocks: u64,
    /// Blocks written.
    pub write_blocks: u64,
    /// Volumes with at least one operation.
    pub volumes: u64,
    /// CWs found (including single-request ones).
    pub cws: u64,
    /// CWs of two or more requests.
    pub long_cws: u64,
    /// Write requests that belong to long CWs.
    pub writes_in_long_cws: u64,
    /// Reads whose first block a completed CW covers.
    pub reads_associated: u64,
    /// Associated reads starting at their CW's first block.
    pub reads_at_cw_start: u64,
    /// Associated reads starting fewer than 4 blocks after their CW's first block.
    pub reads_within_4: u64,
    /// Associated reads starting 10 or more blocks after their CW's first block.
    pub reads_beyond_10: u64,
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

impl TraceStats {
    /// Blocks per write.
    pub fn avg_write_blocks(&self) -> f64 {
        ratio(self.write_blocks, self.writes)
    }
    /// Blocks per read.
    pub fn avg_read_blocks(&self) -> f64 {
        ratio(self.read_blocks, self.reads)
    }
    /// Writes among all operations.
    pub fn write_ratio(&self) -> f64 {
        ratio(self.writes, self.writes + self.reads)
    }
    /// Fraction of writes in long CWs.
    pub fn long_cw_ratio(&self) -> f64 {
        ratio(self.writes_in_long_cws, self.writes)
    }
    /// Fraction of associated reads starting at their CW's first block.
    pub fn read_at_cw_start_ratio(&self) -> f64 {
        ratio(self.reads_at_cw_start, self.reads_associated)
    }
    /// Fraction of associated reads starting within 4 blocks of their CW's first block.
    pub fn read_within_4_ratio(&self) -> f64 {
        ratio(self.reads_within_4, self.reads_associated)
    }
    /// Fraction of associated reads starting 10 or more blocks into their CW.
    pub fn read_beyond_10_ratio(&self) -> f64 {
        ratio(self.reads_beyond_10, self.reads_associated)
    }
}

/// Per-volume state: the current window and the newest CW covering each block.
#[derive(Debug, Default)]
struct VolumeState {
    window: Vec<(u64, u64)>,
    cws: CwMap,
    seen: bool,
}

impl VolumeState {
    fn close_window(&mut self, stats: &mut TraceStats) {
        for (first, last, members) in chain_window(&mut self.window) {
            stats.cws += 1;
            if members >= 2 {
                stats.long_cws += 1;
                stats.writes_in_long_cws += members;
            }
            self.cws.assign(first, last);
        }
    }
}

/// Incremental form of [`analyze`]: [`push`](Analyzer::push) operations in trace order, then
/// [`finish`](Analyzer::finish).
#[derive(Debug, Default)]
pub struct Analyzer {
    window: usize,
    stats: TraceStats,
    vols: Vec<VolumeState>,
}

impl Analyzer {
    /// An analyzer with `opts`.
    pub fn new(opts: &AnalysisOptions) -> Analyzer {
        Analyzer { window: opts.cw_window_writes.max(1), stats: TraceStats::default(), vols: Vec::new() }
    }

    /// Feeds the next operation.
    pub fn push(&mut self, op: BlockOp) {
        let v = op.volume as usize;
        if self.vols.len() <= v {
            self.vols.resize_with(v + 1, VolumeState::default);
        }
        let stats = &mut self.stats;
        let vol = &mut self.vols[v];
        vol.seen = true;
        match op.kind {
            IoKind::Write => {
                stats.writes += 1;
                stats.write_blocks += op.blocks();
                vol.window.push((op.first_block, op.last_block));
                if vol.window.len() >= self.window {
                    vol.close_window(stats);
                }
            }
            IoKind::Read => {
                stats.reads += 1;
                stats.read_blocks += op.blocks();
                if let Some(cw) = vol.cws.cw_start(op.first_block) {
                    let offset = op.first_block - cw;
                    stats.reads_associated += 1;
                    if offset == 0 {
                        stats.reads_at_cw_start += 1;
                    }
                    if offset < 4 {
                        stats.reads_within_4 += 1;
                    }
                    if offset >= 10 {
                        stats.reads_beyond_10 += 1;
                    }
                }
            }
        }
    }

    /// Closes every volume's last (partial) window and returns the statistics.
    pub fn finish(mut self) -> TraceStats {
        for vol in &mut self.vols {
            vol.close_window(&mut self.stats);
            if vol.seen {
                self.stats.volumes += 1;
            }
        }
        self.stats
    }
}

/// Measures a trace (operations in trace order, any number of volumes).
pub fn analyze(ops: impl IntoIterator<Item = BlockOp>, opts: &AnalysisOptions) -> TraceStats {
    let mut a = Analyzer::new(opts);
    for op in ops {
        a.push(op);
    }
    a.finish()
}
