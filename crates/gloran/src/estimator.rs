//! The entry validity estimator, EVE (§4.3): a chain of range-aware estimators (RAEs).
//!
//! An RAE answers "might a range record cover this key?" with no false negatives. A linear scaling maps the key
//! universe (keys projected to their first 8 bytes, big-endian, see `area::project_after`: the bytes after the keys' common prefix) onto a *virtual bit
//! array* of `virtual_bits` positions; a record `[start, end)` occupies the positions from `scale(start)` to
//! `scale(end)` inclusive, and those positions (not keys) are inserted into a Bloom filter. A lookup scales its key
//! and probes one position. Because the projection and the scaling are monotone, every key of a record maps into
//! the record's positions: no false negatives, by construction (and by property test).
//!
//! Records so wide that they would occupy more than `max_positions_per_range` positions are not spread into the
//! Bloom filter; the RAE keeps them as exact position intervals in a small sorted side list instead (checked by
//! binary search). A wide record covers a large share of the universe anyway, and hashing thousands of positions
//! would make both inserts and the filter's false-positive rate worse. (Deviation: the paper does not say how long
//! ranges are bounded.)
//!
//! The chain: records go into the *active* RAE; when it holds `capacity` records a new active RAE with twice the
//! capacity (and Bloom bits) starts and the old one becomes static. Each RAE keeps the smallest and largest sequence
//! numbers of its records. A query for entry `(key, seq)` at `snapshot` asks the newest RAE first and walks back,
//! skipping an RAE whose records are all too old to cover the entry (`seq >= max_seq`) or too new for the reader
//! (`min_vis > snapshot`), and stops at the first positive. All negative: the entry is valid, the index is not read.
//!
//! Calibration (our addition): the first RAE's scaling must fit the keys, and nothing is known about them
//! before the first record. With the default universe (all 2^64 projections) and a fixed `virtual_bits`, a
//! position spans whatever 2^64 / `virtual_bits` projected units are, which for decimal-string keys can be
//! thousands of keys: every probe near a record is then a positive. So the estimator first keeps the projected
//! intervals of `calibration_records` records exactly (probes over them are exact), then creates the first RAE
//! with the scaling later RAEs use (a position per median record width) and moves them in. Set
//! `calibration_records = 0` to use `virtual_bits` for the first RAE, as the paper does when the integer key
//! universe is known.
//!
//! GC (§4.4) drops whole RAEs whose every record is below the garbage-collection watermark.

use crate::area::{Area, project_after};

/// Options of the estimator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EstimatorOptions {
    /// Bloom bits per range record (default 10, the paper's setting).
    pub bits_per_range: u32,
    /// Records the first RAE holds before a new one (of twice the capacity) takes over. The paper's default is
    /// 0.8 M; ours is 64 Ki so a small database does not allocate a megabyte up front.
    pub first_capacity: u64,
    /// Positions of the first RAE's virtual bit array when `calibration_records` is 0 (default 2^32).
    pub virtual_bits: u64,
    /// Smallest projected key of the universe (default 0). Keys below map to position 0.
    pub universe_min: u64,
    /// Largest projected key of the universe (default `u64::MAX`). Keys above map to the last position.
    pub universe_max: u64,
    /// Widest record (in positions) spread into the Bloom filter; wider ones go to the exact side list (default 32).
    pub max_positions_per_range: u64,
    /// Records kept exactly before the first RAE is created with a scaling fitted to them (default 256; 0: the
    /// first RAE starts at once with `virtual_bits` positions).
    pub calibration_records: u64,
}

impl Default for EstimatorOptions {
    fn default() -> Self {
        EstimatorOptions {
            bits_per_range: 10,
            first_capacity: 64 << 10,
            virtual_bits: 1 << 32,
            universe_min: 0,
            universe_max: u64::MAX,
            max_positions_per_range: 32,
            calibration_records: 256,
        }
    }
}

impl EstimatorOptions {
    /// Checks the options.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=64).contains(&self.bits_per_range) {
            return Err("estimator bits_per_range must be 1..=64".into());
        }
        if self.first_capacity == 0 || self.first_capacity > 1 << 32 {
            return Err("estimator first_capacity must be 1..=2^32".into());
        }
        if self.virtual_bits < 2 {
            return Err("estimator virtual_bits must be at least 2".into());
        }
        if self.universe_min >= self.universe_max {
            return Err("estimator universe_min must be below universe_max".into());
        }
        if self.max_positions_per_range == 0 {
            return Err("estimator max_positions_per_range must be positive".into());
        }
        if self.calibration_records > 1 << 20 {
            return Err("estimator calibration_records must be at most 2^20".into());
        }
        Ok(())
    }

    /// The virtual-bit position of a projected key: linear scaling of `[universe_min, universe_max]` onto
    /// `virtual_bits` positions.
    #[inline]
    fn scale(&self, x: u64, virtual_bits: u64) -> u64 {
        let x = x.clamp(self.universe_min, self.universe_max);
        let span = u128::from(self.universe_max - self.universe_min) + 1;
        ((u128::from(x - self.universe_min) * u128::from(virtual_bits)) / span) as u64
    }

    fn universe_span(&self) -> f64 {
        (self.universe_max - self.universe_min) as f64 + 1.0
    }
}

#[inline]
fn mix(mut z: u64) -> u64 {
    // SplitMix64 finalizer: positions are dense small integers and must spread over the filter.
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One range-aware estimator.
#[derive(Debug, Clone)]
pub struct Rae {
    words: Vec<u64>,
    bits: u64,
    hashes: u32,
    /// Exact position intervals of wide records: a sorted union of disjoint intervals.
    wide: Vec<(u64, u64)>,
    capacity: u64,
    records: u64,
    /// This RAE's virtual bit array size (its linear scaling).
    virtual_bits: u64,
    /// Bloom positions set so far (ranges spread into the filter).
    positions: u64,
    /// Smallest reported delete sequence of the records (readers at older snapshots skip the RAE).
    pub min_vis: u64,
    /// Largest exclusive upper sequence bound of the records (entries at or above are never covered by them).
    pub max_seq: u64,
}

impl Rae {
    /// An RAE of `capacity` records whose virtual array has `virtual_bits` positions and whose records are
    /// expected to set `positions_per_record` Bloom positions each (k = ln 2 · bits per position).
    fn new(capacity: u64, opts: &EstimatorOptions, virtual_bits: u64, positions_per_record: f64) -> Self {
        let bits = (capacity * u64::from(opts.bits_per_range)).max(64);
        let words = vec![0u64; bits.div_ceil(64) as usize];
        let per_position = f64::from(opts.bits_per_range) / positions_per_record.max(1.0);
        let hashes = ((per_position * std::f64::consts::LN_2).round() as u32).clamp(1, 16);
        Rae {
            words,
            bits: bits.div_ceil(64) * 64,
            hashes,
            wide: Vec::new(),
            capacity,
            records: 0,
            virtual_bits,
            positions: 0,
            min_vis: u64::MAX,
            max_seq: 0,
        }
    }

    fn set(&mut self, pos: u64) {
        let h = mix(pos);
        let (h1, h2) = (h, (h >> 32) | 1);
        for i in 0..u64::from(self.hashes) {
            let b = h1.wrapping_add(i.wrapping_mul(h2)) % self.bits;
            self.words[(b / 64) as usize] |= 1 << (b % 64);
        }
    }

    fn get(&self, pos: u64) -> bool {
        let h = mix(pos);
        let (h1, h2) = (h, (h >> 32) | 1);
        (0..u64::from(self.hashes)).all(|i| {
            let b = h1.wrapping_add(i.wrapping_mul(h2)) % self.bits;
            self.words[(b / 64) as usize] & (1 << (b % 64)) != 0
        })
    }

    /// Adds a record whose start and end project to `r.lo` and `r.hi`.
    fn insert(&mut self, r: &Projected, opts: &EstimatorOptions) {
        // An exclusive end projects to an inclusive upper bound: the projection is monotone.
        let (p0, p1) = (opts.scale(r.lo, self.virtual_bits), opts.scale(r.hi, self.virtual_bits));
        if p1 - p0 < opts.max_positions_per_range {
            for p in p0..=p1 {
                self.set(p);
            }
            self.positions += p1 - p0 + 1;
        } else {
            // Keep the side list a sorted union of disjoint intervals so a probe is one binary search.
            let i = self.wide.partition_point(|w| w.1.saturating_add(1) < p0);
            let mut j = i;
            let (mut lo, mut hi) = (p0, p1);
            while j < self.wide.len() && self.wide[j].0 <= hi.saturating_add(1) {
                lo = lo.min(self.wide[j].0);
                hi = hi.max(self.wide[j].1);
                j += 1;
            }
            self.wide.splice(i..j, [(lo, hi)]);
        }
        self.records += 1;
        self.min_vis = self.min_vis.min(r.seq);
        self.max_seq = self.max_seq.max(r.max_seq);
    }

    /// REQUIRES: `x` is the key's projection clamped to the universe.
    fn may_contain(&self, x: u64, opts: &EstimatorOptions) -> bool {
        let p = opts.scale(x, self.virtual_bits);
        if self.get(p) {
            return true;
        }
        let i = self.wide.partition_point(|w| w.0 <= p);
        i > 0 && self.wide[i - 1].1 >= p
    }

    /// Memory held by the RAE.
    pub fn bytes(&self) -> usize {
        self.words.len() * 8 + self.wide.len() * 16
    }
}

/// Records whose projected widths size the next RAE's positions.
const WIDTH_SAMPLE: usize = 256;

/// A record reduced to what an RAE needs: its projected key bounds (clamped to the universe) and sequences.
#[derive(Debug, Clone, Copy)]
struct Projected {
    lo: u64,
    hi: u64,
    /// The record's delete sequence (readers below it do not see it).
    seq: u64,
    /// Exclusive upper bound of the sequences it covers.
    max_seq: u64,
}

impl Projected {
    fn may_cover(&self, x: u64, seq: u64, snapshot: u64) -> bool {
        seq < self.max_seq && self.seq <= snapshot && self.lo <= x && x <= self.hi
    }
}

/// The chained entry validity estimator.
#[derive(Debug, Clone)]
pub struct Eve {
    opts: EstimatorOptions,
    /// Records held exactly until `calibration_records` have arrived; empty once the chain has started.
    pending: Vec<Projected>,
    /// Oldest first; the last is active. Empty while calibrating.
    chain: Vec<Rae>,
    /// Projected widths (in universe units) of the last [`WIDTH_SAMPLE`] records, a ring: the next RAE's scaling.
    widths: Vec<u64>,
    /// Records inserted (the ring's write position is `inserted % WIDTH_SAMPLE`).
    inserted: u64,
    /// Keys are projected after this prefix (`area::project_after`), fixed for the estimator's life: the common
    /// prefix of the keys the index has seen, so the projection's bits go where keys differ.
    prefix: Vec<u8>,
}

/// The answer of one estimator query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// Whether some RAE said "maybe covered".
    pub positive: bool,
    /// RAEs consulted.
    pub raes_checked: u32,
}

impl Eve {
    /// An empty estimator with one active RAE.
    pub fn new(opts: EstimatorOptions) -> Self {
        Self::with_prefix(opts, Vec::new())
    }

    /// An empty estimator projecting keys after `prefix` (any prefix is correct: keys that do not extend it
    /// project to the ends of the universe; a prefix every key shares gives the best precision).
    pub fn with_prefix(opts: EstimatorOptions, prefix: Vec<u8>) -> Self {
        let mut chain = Vec::new();
        if opts.calibration_records == 0 {
            chain.push(Rae::new(opts.first_capacity, &opts, opts.virtual_bits, 2.0));
        }
        Eve { opts, pending: Vec::new(), chain, widths: Vec::new(), inserted: 0, prefix }
    }

    /// The prefix keys are projected after.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// The scaling of the next RAE. Each RAE fixes its own linear scaling when it is created: the first uses
    /// `virtual_bits` (unless calibrated); later ones size a position to the *median* projected width of the
    /// last [`WIDTH_SAMPLE`] records, so a typical record occupies about two positions (one, plus a boundary) and
    /// `k` is chosen for that. The median, not the mean: the projection is monotone but not linear in the key
    /// count (decimal-string keys jump at every carry), so a few records crossing a high digit have projected
    /// widths hundreds of times the typical one, and a mean would size positions for them (measured: 40 % of
    /// uncovered lookups positive in `rangedb bench gloran --quick`). Queries scale the key per RAE, so no RAE can
    /// give a false negative whatever its scaling.
    fn next_scaling(&self) -> (u64, f64) {
        if self.widths.is_empty() {
            return (self.opts.virtual_bits, 2.0);
        }
        let mut w = self.widths.clone();
        let mid = w.len() / 2;
        let width = (*w.select_nth_unstable(mid).1).max(1) as f64;
        let bits = (self.opts.universe_span() / width).clamp(2.0, 1.8e19) as u64;
        (bits.max(2), 2.0)
    }

    /// The options.
    pub fn options(&self) -> &EstimatorOptions {
        &self.opts
    }

    /// The key's projection, clamped to the universe.
    fn project(&self, key: &[u8]) -> u64 {
        project_after(key, &self.prefix).clamp(self.opts.universe_min, self.opts.universe_max)
    }

    /// Adds a range record (or a disjointized area when rebuilding at open).
    pub fn insert(&mut self, a: &Area) {
        let r = Projected {
            lo: self.project(&a.start),
            hi: self.project(&a.end),
            seq: a.seq,
            max_seq: a.max_seq,
        };
        let w = r.hi - r.lo;
        if self.widths.len() < WIDTH_SAMPLE {
            self.widths.push(w);
        } else {
            self.widths[(self.inserted % WIDTH_SAMPLE as u64) as usize] = w;
        }
        self.inserted += 1;
        if self.chain.is_empty() && (self.pending.len() as u64) < self.opts.calibration_records {
            self.pending.push(r);
            if self.pending.len() as u64 == self.opts.calibration_records {
                // Calibrated: the first RAE takes its scaling from the records seen, then holds them.
                for p in std::mem::take(&mut self.pending) {
                    self.push_record(&p);
                }
            }
            return;
        }
        self.push_record(&r);
    }

    /// Adds `r` to the active RAE, starting a new one when it is full (or there is none yet).
    fn push_record(&mut self, r: &Projected) {
        let full = self.chain.last().is_none_or(|x| x.records >= x.capacity);
        if full {
            let cap = self.chain.last().map_or(self.opts.first_capacity, |x| x.capacity.saturating_mul(2));
            let (vbits, per_record) = self.next_scaling();
            self.chain.push(Rae::new(cap.min(1 << 34), &self.opts, vbits, per_record));
        }
        if let Some(x) = self.chain.last_mut() {
            x.insert(r, &self.opts);
        }
    }

    /// Whether `(key, seq)` may be covered by a record a reader at `snapshot` sees. `false` is certain.
    pub fn probe(&self, key: &[u8], seq: u64, snapshot: u64) -> Probe {
        let x = self.project(key);
        if self.pending.iter().any(|p| p.may_cover(x, seq, snapshot)) {
            return Probe { positive: true, raes_checked: 0 };
        }
        let mut checked = 0;
        for r in self.chain.iter().rev() {
            if r.records == 0 || seq >= r.max_seq || r.min_vis > snapshot {
                continue;
            }
            checked += 1;
            if r.may_contain(x, &self.opts) {
                return Probe { positive: true, raes_checked: checked };
            }
        }
        Probe { positive: false, raes_checked: checked }
    }

    /// Drops RAEs whose records cannot cover any entry at or above `watermark`. Returns how many were dropped.
    pub fn gc(&mut self, watermark: u64) -> usize {
        self.pending.retain(|p| p.max_seq > watermark);
        let before = self.chain.len();
        let last = self.chain.len().saturating_sub(1);
        let mut i = 0;
        self.chain.retain(|r| {
            let keep = i == last || (r.records > 0 && r.max_seq > watermark);
            i += 1;
            keep
        });
        before - self.chain.len()
    }

    /// RAEs in the chain.
    pub fn len(&self) -> usize {
        self.chain.len()
    }

    /// Whether the chain has no RAE (only while calibrating).
    pub fn is_empty(&self) -> bool {
        self.chain.is_empty()
    }

    /// Memory held by all RAEs, the records awaiting calibration and the width sample.
    pub fn bytes(&self) -> usize {
        self.chain.iter().map(Rae::bytes).sum::<usize>()
            + self.pending.len() * std::mem::size_of::<Projected>()
            + self.widths.len() * std::mem::size_of::<u64>()
    }
}
