//! A seeded synthetic EBS trace with the statistics RASK §2–3 publishes as parameters.
//!
//! The public traces are large downloads; tests and quick benchmarks need a trace with the same shape that can be
//! generated anywhere. The shape that matters to a range index is:
//! - write lengths: average 3.63 blocks (Alibaba EBS), mostly short with a long tail;
//! - write-write correlation: 65.0–81.5 % of writes belong to *long CWs*, chains of ≥ 2 writes to consecutive blocks
//!   issued close together (within a 36-write observation window), not necessarily in block order;
//! - write-read correlation: > 85.4 % of reads start at the first block of the CW they read, > 95.7 % within 4
//!   blocks of it, < 1 % 10 or more blocks in;
//! - a read/write mix (write-heavy ≥ 90 % writes, read-heavy < 5 % in §7.4.2), a working set, several volumes.
//!
//! Generation, per volume, one observation window (`cw_window_writes` writes, default 36) at a time:
//! 1. The number of writes in long CWs is `long_cw_ratio · window`, rounded stochastically (a lone 1 becomes 0 or 2
//!    with equal probability, keeping the expectation), and split into CWs of `2 + Geometric` writes with mean
//!    `avg_cw_writes`. The rest are single writes.
//! 2. Every write's length is `min(1 + Geometric, max_write_blocks)` with mean `avg_write_blocks` (the geometric
//!    parameter is solved so that the capped mean is exact).
//! 3. A CW's writes cover consecutive blocks. It starts where one of the volume's sequential streams (a log, a
//!    journal) left off with probability `stream_continue` (each stream used at most once per window, so two CWs of
//!    one window never touch), otherwise at a random place, and then becomes that stream's tail. Random places are
//!    uniform over the working set, except that `hot_write_fraction` of them fall in the first `hot_set_fraction`
//!    of it, which makes later writes overwrite earlier ones (the range overlap RASK's GC exists for). A single
//!    write is, with probability `rewrite_fraction`, instead a repeat of one of the volume's last `read_history`
//!    newly placed single writes, block for block (an in-place update of a page: same first block, same length).
//! 4. The window's writes are interleaved randomly, each CW's writes keeping ascending order, and emitted one per
//!    write operation of the volume. When the window is complete its CWs become readable.
//! 5. A read picks one of the volume's last `read_history` readable CWs, the `i`-th newest with `i` geometric of
//!    mean `read_recency` (recent data is read most; old CWs are also likelier to have been partly overwritten, which
//!    would blur the association the paper measures). With probability `read_at_cw_start`
//!    it starts at the CW's first block; otherwise (within `read_near_cw_start`) 1–3 blocks in; with probability
//!    `read_far_cw_start` 10 or more blocks in; else 4–9 blocks in; each time choosing a CW long enough for the
//!    offset and a block that CW still owns. Read lengths are `1 + Geometric` with mean `avg_read_blocks`.
//!    A volume with nothing readable yet reads a random range.
//!
//! Each operation goes to a uniformly chosen volume and is a write with probability `write_ratio`.
//! [`crate::traces::analyze`] measures these statistics back from the stream; the tests check that they match the
//! parameters. The stream is a pure function of the options (seed included).

use std::collections::VecDeque;

use super::block_op::{BlockOp, IoKind};
use super::cw_map::{CwMap, chain_window};
use super::volumes::Volumes;
use crate::Error;
use crate::rng::Rng;

/// Parameters of the synthetic trace. Defaults are the paper's statistics (write-heavy mix).
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticOptions {
    /// Seed of the whole stream.
    pub seed: u64,
    /// Operations to generate. Default 1,000,000.
    pub ops: u64,
    /// Volumes (virtual disks). Default 4.
    pub volumes: u32,
    /// Fraction of operations that are writes. Default 0.9 (write-heavy, §7.4.2).
    pub write_ratio: f64,
    /// Blocks per volume that writes land in. Default 2^20 (4 GiB of 4 KiB blocks).
    pub working_set_blocks: u64,
    /// Mean write length in blocks. Default 3.63 (§3.1 footnote).
    pub avg_write_blocks: f64,
    /// Longest write in blocks. Default 256 (1 MiB).
    pub max_write_blocks: u64,
    /// Fraction of writes in long CWs. Default 0.73 (middle of the published 65.0–81.5 %).
    pub long_cw_ratio: f64,
    /// Mean writes per long CW (at least 2). Default 6 (not published; with it, 128-block I/O compaction removes
    /// about 52 % of the writes of a default trace, near the paper's 58.4–77.0 %).
    pub avg_cw_writes: f64,
    /// Observation window in writes. Default 36 (Fig. 3a).
    pub cw_window_writes: u32,
    /// Fraction of reads starting at their CW's first block. Default 0.86 (> 85.4 %).
    pub read_at_cw_start: f64,
    /// Fraction of reads starting within 4 blocks of their CW's start (includes the above). Default 0.96 (> 95.7 %).
    pub read_near_cw_start: f64,
    /// Fraction of reads starting 10 or more blocks into their CW (taken from the reads beyond 4 blocks).
    /// Default 0.008 (< 1 %, Fig. 4).
    pub read_far_cw_start: f64,
    /// Mean read length in blocks. Default 4.
    pub avg_read_blocks: f64,
    /// Reads target one of this many most recent CWs per volume. Default 4,096.
    pub read_history: usize,
    /// Mean age, in CWs, of the CW a read targets (geometric). Default 256.
    pub read_recency: f64,
    /// Sequential streams per volume. Default 4.
    pub streams: usize,
    /// Probability that a long CW continues a stream. Default 0.3.
    pub stream_continue: f64,
    /// Fraction of the working set that is hot. Default 0.1.
    pub hot_set_fraction: f64,
    /// Fraction of randomly placed writes that go to the hot set. Default 0.3.
    pub hot_write_fraction: f64,
    /// Fraction of single writes (those in no long CW) that rewrite, block for block, one of the volume's last
    /// `read_history` newly placed single writes: a database page or a file-system metadata block updated where it
    /// lives. Default 0 (the stream before this parameter existed). At 0.8 RASK's lightweight GC frees entries in
    /// 60 % of its runs on the quick write-heavy mix and 63 % at full size, the paper's 59.1 % on its traces
    /// (§7.5); at 0 in 15 % and 34 %.
    /// Must be below 1 (at 1 the first single write would be the only one placed).
    pub rewrite_fraction: f64,
}

impl Default for SyntheticOptions {
    fn default() -> SyntheticOptions {
        SyntheticOptions {
            seed: 0,
            ops: 1_000_000,
            volumes: 4,
            write_ratio: 0.9,
            working_set_blocks: 1 << 20,
            avg_write_blocks: 3.63,
            max_write_blocks: 256,
            long_cw_ratio: 0.73,
            avg_cw_writes: 6.0,
            cw_window_writes: 36,
            read_at_cw_start: 0.86,
            read_near_cw_start: 0.96,
            read_far_cw_start: 0.008,
            avg_read_blocks: 4.0,
            read_history: 4096,
            read_recency: 256.0,
            streams: 4,
            stream_continue: 0.3,
            hot_set_fraction: 0.1,
            hot_write_fraction: 0.3,
            rewrite_fraction: 0.0,
        }
    }
}

impl SyntheticOptions {
    /// Write-heavy mix (90 % writes), the default.
    pub fn write_heavy() -> SyntheticOptions {
        SyntheticOptions::default()
    }

    /// Read-heavy mix (4 % writes: "write ratio < 5 %" in §7.4.2).
    pub fn read_heavy() -> SyntheticOptions {
        SyntheticOptions { write_ratio: 0.04, ..SyntheticOptions::default() }
    }

    /// Checks every parameter.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        for (name, v) in [
            ("write_ratio", self.write_ratio),
            ("long_cw_ratio", self.long_cw_ratio),
            ("read_at_cw_start", self.read_at_cw_start),
            ("read_near_cw_start", self.read_near_cw_start),
            ("read_far_cw_start", self.read_far_cw_start),
            ("stream_continue", self.stream_continue),
            ("hot_set_fraction", self.hot_set_fraction),
            ("hot_write_fraction", self.hot_write_fraction),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return bad(format!("{name} = {v} must be in [0, 1]"));
            }
        }
        // 1 would leave the first single write the only one ever placed.
        if !(0.0..1.0).contains(&self.rewrite_fraction) {
            return bad(format!("rewrite_fraction = {} must be in [0, 1)", self.rewrite_fraction));
        }
        if self.read_near_cw_start < self.read_at_cw_start {
            return bad("read_near_cw_start must be at least read_at_cw_start".into());
        }
        if self.read_near_cw_start + self.read_far_cw_start > 1.0 {
            return bad("read_near_cw_start + read_far_cw_start exceed 1".into());
        }
        if self.volumes == 0 {
            return bad("at least one volume".into());
        }
        if self.max_write_blocks == 0 || !at_least(self.avg_write_blocks, 1.0) {
            return bad("writes are at least one block long on average".into());
        }
        if self.avg_write_blocks > self.max_write_blocks as f64 {
            return bad("avg_write_blocks exceeds max_write_blocks".into());
        }
        if !at_least(self.avg_read_blocks, 1.0) {
            return bad("avg_read_blocks must be at least 1".into());
        }
        if !at_least(self.avg_cw_writes, 2.0) {
            return bad("avg_cw_writes must be at least 2".into());
        }
        if self.cw_window_writes == 0 {
            return bad("cw_window_writes must be positive".into());
        }
        // The longest possible CW is a whole window of maximal writes; it must fit in the working set.
        if self.working_set_blocks
            < self.max_write_blocks.saturating_mul(self.cw_window_writes as u64).max(16)
        {
            return bad("working_set_blocks must hold a window of maximal writes (max_write_blocks · cw_window_writes)".into());
        }
        if !at_least(self.read_recency, 1.0) {
            return bad("read_recency must be at least 1".into());
        }
        if self.read_history == 0 {
            return bad("read_history must be positive".into());
        }
        Ok(())
    }

    /// The volume names of the generated trace: `0`, `1`, ...
    pub fn volume_names(&self) -> Volumes {
        Volumes::numbered(self.volumes)
    }
}

/// `v >= min` and finite (false for NaN).
fn at_least(v: f64, min: f64) -> bool {
    v.is_finite() && v >= min
}

/// The success probability `p` for which `min(1 + Geometric(p), cap)` has mean `mean`, so the cap on write lengths
/// does not lower the average (this matters for the long-range sweeps, where the mean approaches the cap).
/// E[min(1 + G, M)] = Σ_{k<M} (1 − p)^k = (1 − (1 − p)^M) / p, decreasing in p from M (p → 0) to 1 (p = 1).
/// REQUIRES: 1 <= mean <= cap.
fn capped_geometric_p(mean: f64, cap: u64) -> f64 {
    let m = cap as f64;
    let capped_mean = |p: f64| (1.0 - (1.0 - p).powf(m)) / p;
    if mean >= m {
        return f64::MIN_POSITIVE;
    }
    let (mut lo, mut hi) = (f64::MIN_POSITIVE, 1.0);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if capped_mean(mid) > mean {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// A CW as the generator placed it: inclusive block range.
type Range = (u64, u64);

#[derive(Debug)]
struct Volume {
    rng: Rng,
    /// The current window's writes, in emission order.
    pending: VecDeque<Range>,
    /// The current window's writes emitted so far.
    emitted: Vec<Range>,
    /// Readable CWs, newest last.
    history: VecDeque<Range>,
    /// Which readable CW last wrote each block (what a measurement of the trace will see).
    owner: CwMap,
    /// Sequential streams: next block of each.
    streams: Vec<u64>,
    /// The last `read_history` newly placed single writes, newest last (what a rewrite in place repeats).
    singles: VecDeque<Range>,
}

/// The generator: an iterator of [`BlockOp`]s.
#[derive(Debug)]
pub struct SyntheticTrace {
    opts: SyntheticOptions,
    rng: Rng,
    vols: Vec<Volume>,
    remaining: u64,
    /// Geometric success probabilities for the length distributions.
    p_write: f64,
    p_read: f64,
    p_cw_extra: f64,
}

impl SyntheticTrace {
    /// A generator for `opts`.
    pub fn new(opts: SyntheticOptions) -> Result<SyntheticTrace, Error> {
        opts.validate()?;
        let vols = (0..opts.volumes)
            .map(|v| {
                let mut rng = Rng::derive(opts.seed, 1 + v as u64);
                let streams = (0..opts.streams).map(|_| rng.below(opts.working_set_blocks)).collect();
                Volume {
                    rng,
                    pending: VecDeque::new(),
                    emitted: Vec::new(),
                    history: VecDeque::new(),
                    owner: CwMap::default(),
                    streams,
                    singles: VecDeque::new(),
                }
            })
            .collect();
        Ok(SyntheticTrace {
            rng: Rng::derive(opts.seed, 0),
            vols,
            remaining: opts.ops,
            p_write: capped_geometric_p(opts.avg_write_blocks, opts.max_write_blocks),
            p_read: 1.0 / opts.avg_read_blocks,
            // 2 + Geometric(p) has mean 2 + (1 - p)/p = 1 + 1/p.
            p_cw_extra: 1.0 / (opts.avg_cw_writes - 1.0),
            opts,
        })
    }

    /// The options.
    pub fn options(&self) -> &SyntheticOptions {
        &self.opts
    }

    fn write_len(&self, rng: &mut Rng) -> u64 {
        rng.geometric(self.p_write).saturating_add(1).min(self.opts.max_write_blocks)
    }

    /// A random start for `len` blocks inside the working set, honouring the hot set.
    fn random_start(&self, rng: &mut Rng, len: u64) -> u64 {
        let ws = self.opts.working_set_blocks;
        let hot = ((ws as f64 * self.opts.hot_set_fraction) as u64).min(ws);
        // REQUIRES: len <= ws (validate() guarantees it); saturate anyway rather than wrap.
        let span = if hot > len && rng.chance(self.opts.hot_write_fraction) {
            hot - len
        } else {
            ws.saturating_sub(len)
        };
        rng.below(span.saturating_add(1))
    }

    /// Builds volume `v`'s next window of writes.
    fn fill_window(&mut self, v: usize) {
        let window = self.opts.cw_window_writes as u64;
        let mut rng = std::mem::replace(&mut self.vols[v].rng, Rng::new(0));
        // 1. How many writes go to long CWs, and in which groups.
        let target = self.opts.long_cw_ratio * window as f64;
        let mut n_long = target.floor() as u64 + u64::from(rng.chance(target - target.floor()));
        if n_long == 1 {
            n_long = if rng.chance(0.5) { 2 } else { 0 };
        }
        n_long = n_long.min(window);
        if n_long < 2 {
            // Only possible with a one-write window: a long CW needs two writes.
            n_long = 0;
        }
        let mut groups: Vec<u64> = Vec::new();
        let mut left = n_long;
        while left > 0 {
            let mut k = (2 + rng.geometric(self.p_cw_extra)).min(left);
            if left - k == 1 {
                k += 1;
            }
            groups.push(k);
            left -= k;
        }
        let singles = window - n_long;
        // 2-3. Place each unit: a group is a run of consecutive writes, a single write stands alone.
        let mut units: Vec<Vec<Range>> = Vec::with_capacity(groups.len() + singles as usize);
        let mut used_streams = vec![false; self.vols[v].streams.len()];
        for &k in &groups {
            let lens: Vec<u64> = (0..k).map(|_| self.write_len(&mut rng)).collect();
            let total: u64 = lens.iter().sum();
            let ws = self.opts.working_set_blocks;
            let stream = if rng.chance(self.opts.stream_continue) && !used_streams.is_empty() {
                let s = rng.below(used_streams.len() as u64) as usize;
                (!used_streams[s]).then_some(s)
            } else {
                None
            };
            let start = match stream {
                Some(s) if self.vols[v].streams[s].checked_add(total).is_some_and(|end| end <= ws) => {
                    self.vols[v].streams[s]
                }
                _ => self.random_start(&mut rng, total),
            };
            // The CW becomes a stream's tail: the one it continued, or a random one it replaces.
            if !used_streams.is_empty() {
                let s = match stream {
                    Some(s) => s,
                    None => rng.below(used_streams.len() as u64) as usize,
                };
                if !used_streams[s] {
                    used_streams[s] = true;
                    self.vols[v].streams[s] = start + total;
                }
            }
            let mut at = start;
            let mut writes = Vec::with_capacity(k as usize);
            for len in lens {
                writes.push((at, at + len - 1));
                at += len;
            }
            units.push(writes);
        }
        for _ in 0..singles {
            let placed = &self.vols[v].singles;
            let rewrite = self.opts.rewrite_fraction > 0.0
                && !placed.is_empty()
                && rng.chance(self.opts.rewrite_fraction);
            let w = if rewrite {
                placed[rng.below(placed.len() as u64) as usize]
            } else {
                let len = self.write_len(&mut rng);
                let start = self.random_start(&mut rng, len);
                let w = (start, start + len - 1);
                let placed = &mut self.vols[v].singles;
                if placed.len() == self.opts.read_history {
                    placed.pop_front();
                }
                placed.push_back(w);
                w
            };
            units.push(vec![w]);
        }
        // 4. Interleave the units, keeping each unit's writes in order.
        let mut slots: Vec<usize> =
            units.iter().enumerate().flat_map(|(i, u)| std::iter::repeat_n(i, u.len())).collect();
        rng.shuffle(&mut slots);
        let mut next_of = vec![0usize; units.len()];
        for unit in slots {
            let w = units[unit][next_of[unit]];
            next_of[unit] += 1;
            self.vols[v].pending.push_back(w);
        }
        self.vols[v].rng = rng;
    }

    fn next_write(&mut self, v: usize) -> BlockOp {
        if self.vols[v].pending.is_empty() {
            self.fill_window(v);
        }
        let vol = &mut self.vols[v];
        let (first, last) = vol.pending.pop_front().unwrap_or((0, 0));
        vol.emitted.push((first, last));
        if vol.pending.is_empty() {
            // The window is complete: its CWs, chained exactly as a measurement chains them, become readable.
            for (f, l, _) in chain_window(&mut vol.emitted) {
                vol.owner.assign(f, l);
                if vol.history.len() == self.opts.read_history {
                    vol.history.pop_front();
                }
                vol.history.push_back((f, l));
            }
        }
        BlockOp { volume: v as u32, kind: IoKind::Write, first_block: first, last_block: last }
    }

    /// Where a read of volume `v` starts (see step 5 of the module comment).
    fn read_start(&self, rng: &mut Rng, v: usize) -> u64 {
        let vol = &self.vols[v];
        let n = vol.history.len() as u64;
        if n == 0 {
            return rng.below(self.opts.working_set_blocks);
        }
        let p_age = 1.0 / self.opts.read_recency;
        let u = rng.next_f64();
        // Offset class: 0 = the CW's first block, 1 = 1..=3 blocks in, 2 = 4..=9 blocks in, 3 = 10 or more.
        let class = if u < self.opts.read_at_cw_start {
            0
        } else if u < self.opts.read_near_cw_start {
            1
        } else if u < 1.0 - self.opts.read_far_cw_start {
            2
        } else {
            3
        };
        let mut fallback = None;
        for _ in 0..64 {
            let cw = vol.history[(n - 1 - rng.geometric(p_age).min(n - 1)) as usize];
            let len = cw.1 - cw.0 + 1;
            let start = match class {
                0 => cw.0,
                1 if len >= 2 => cw.0 + rng.range_inclusive(1, (len - 1).min(3)),
                2 if len >= 5 => cw.0 + rng.range_inclusive(4, (len - 1).min(9)),
                3 if len >= 11 => cw.0 + rng.range_inclusive(10, len - 1),
                _ => continue,
            };
            // Only a block the CW still owns is read "relative to that CW"; a newer write may have taken it.
            if vol.owner.cw_start(start) == Some(cw.0) {
                return start;
            }
            if fallback.is_none() && vol.owner.cw_start(cw.0) == Some(cw.0) {
                fallback = Some(cw.0);
            }
        }
        fallback.unwrap_or(vol.history[(n - 1) as usize].0)
    }

    fn next_read(&mut self, v: usize) -> BlockOp {
        let mut rng = std::mem::replace(&mut self.vols[v].rng, Rng::new(0));
        let len = rng.geometric(self.p_read).saturating_add(1);
        let first = self.read_start(&mut rng, v);
        self.vols[v].rng = rng;
        let last = first.saturating_add(len - 1);
        BlockOp { volume: v as u32, kind: IoKind::Read, first_block: first, last_block: last }
    }
}

impl Iterator for SyntheticTrace {
    type Item = BlockOp;

    fn next(&mut self) -> Option<BlockOp> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let v = self.rng.below(self.vols.len() as u64) as usize;
        Some(if self.rng.chance(self.opts.write_ratio) { self.next_write(v) } else { self.next_read(v) })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}
