//! The entry validity estimator, EVE (§4.3): a chain of range-aware estimators (RAEs).
//!
//! An RAE answers "might a range record cover this key?" with no false negatives. A linear scaling maps the key
//! universe (keys projected to their first 8 bytes past the keys' common prefix, big-endian, see
//! `area::project_after`) onto a *virtual bit array* of `virtual_bits` positions; a record `[start, end)`
//! occupies the positions from `scale(start)` to `scale(end)` inclusive, and those positions (not keys) are
//! inserted into a Bloom filter. A lookup scales its key and probes one position. Because the projection and the
//! scaling are monotone, every key of a record maps into the record's positions: no false negatives, by
//! construction (and by property test).
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
//! Stamps (our addition, `stamp_bits`, default 4): an RAE tells sequence numbers apart only by its smallest and
//! largest, and it holds tens of thousands of records. An entry rewritten after the delete that covered its key
//! is valid, but every older RAE it meets still answers "maybe": in the benchmark's balanced mix with 1 % range
//! deletes that was 52 % of the entries found, each then paying a walk of the buffer's R-tree and a DR-tree node
//! per level. So each Bloom slot is a small stamp instead of a bit. The RAE's records fall into `2^w - 1` arrival
//! epochs of equal count; a record raises its slots to its epoch (stamps only grow), and the RAE keeps each
//! epoch's largest upper sequence bound. A probe at `seq` asks for the first epoch whose bound exceeds `seq` and
//! answers "maybe" only if every slot is stamped at least that epoch. No false negatives: a record covering the
//! entry has an upper bound above `seq`, so its epoch is at least the one asked for, and its slots at least its
//! epoch, whatever order records arrive in (a rebuild at open adds areas in key order: the epochs then span
//! mixed sequences and the answers degrade towards the plain filter's, never below them). The wide-record list
//! keeps the largest upper bound per interval for the same test. With `stamp_bits = 1` there is one epoch and the
//! filter is the paper's.
//!
//! GC (§4.4) drops whole RAEs whose every record is below the garbage-collection watermark.

use crate::area::{Area, project_after};

/// Options of the estimator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EstimatorOptions {
    /// Bloom bits per range record (default 10, the paper's setting).
    pub bits_per_range: u32,
    /// Records the first RAE holds before a new one (of twice the capacity) takes over (default 4 Ki; the
    /// paper's is 0.8 M). Small, because an RAE's stamp epochs are a fifteenth of its capacity each: finer
    /// epochs tell more rewritten entries from the deletes before them (`docs/gloran.md`, session 44).
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
    /// Bits of each Bloom slot's sequence stamp: 1, 2, 4 or 8 (default 4). With 1 a slot is a plain bit, the
    /// paper's filter; with `w` bits an RAE's records fall into `2^w - 1` arrival epochs and each slot keeps the
    /// newest epoch that set it, so the filter's memory is `w` times the paper's (module docs, "Stamps").
    pub stamp_bits: u32,
}

impl Default for EstimatorOptions {
    fn default() -> Self {
        EstimatorOptions {
            bits_per_range: 10,
            first_capacity: 4 << 10,
            virtual_bits: 1 << 32,
            universe_min: 0,
            universe_max: u64::MAX,
            max_positions_per_range: 32,
            calibration_records: 256,
            stamp_bits: 4,
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
        if ![1, 2, 4, 8].contains(&self.stamp_bits) {
            return Err("estimator stamp_bits must be 1, 2, 4 or 8".into());
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
    /// The Bloom slots, `stamp_bits` each, packed little-end first into words. 0: never set.
    words: Vec<u64>,
    slots: u64,
    stamp_bits: u32,
    /// log2 of the slots a word holds.
    slot_shift: u32,
    hashes: u32,
    /// Records per arrival epoch: record `i` of the RAE stamps its slots with `1 + i / epoch_len`.
    epoch_len: u64,
    /// Per epoch (index `stamp - 1`), the largest exclusive upper sequence bound of its records; 0: none yet.
    epoch_max_seq: Vec<u64>,
    /// Exact position intervals of wide records and the largest upper sequence bound among the records each
    /// holds: a sorted union of disjoint intervals.
    wide: Vec<(u64, u64, u64)>,
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

/// `h` reduced to `0..n` by its high bits (no division; `h` is well mixed).
#[inline]
fn reduce(h: u64, n: u64) -> u64 {
    ((u128::from(h) * u128::from(n)) >> 64) as u64
}

impl Rae {
    /// An RAE of `capacity` records whose virtual array has `virtual_bits` positions and whose records are
    /// expected to set `positions_per_record` Bloom positions each (k = ln 2 · slots per position).
    fn new(capacity: u64, opts: &EstimatorOptions, virtual_bits: u64, positions_per_record: f64) -> Self {
        let w = opts.stamp_bits;
        let per_word = u64::from(64 / w);
        // Rounded to whole words of one-bit slots whatever the stamp width, so every width hashes a position to
        // the same slots (and a stamped filter's positives are a subset of the plain one's).
        let slots = (capacity * u64::from(opts.bits_per_range)).max(64).div_ceil(64) * 64;
        let per_position = f64::from(opts.bits_per_range) / positions_per_record.max(1.0);
        let hashes = ((per_position * std::f64::consts::LN_2).round() as u32).clamp(1, 16);
        let epochs = (1u64 << w) - 1;
        Rae {
            words: vec![0u64; (slots / per_word) as usize],
            slots,
            stamp_bits: w,
            slot_shift: per_word.trailing_zeros(),
            hashes,
            epoch_len: capacity.div_ceil(epochs).max(1),
            epoch_max_seq: vec![0; epochs as usize],
            wide: Vec::new(),
            capacity,
            records: 0,
            virtual_bits,
            positions: 0,
            min_vis: u64::MAX,
            max_seq: 0,
        }
    }

    /// The slots of position `pos`: word index and bit shift of each of the `hashes` slots. Borrows nothing
    /// of the RAE, so `set` can write words while iterating.
    #[inline]
    fn slots_of(&self, pos: u64) -> impl Iterator<Item = (usize, u32)> + use<> {
        let (slots, slot_shift, stamp_bits) = (self.slots, self.slot_shift, self.stamp_bits);
        let h1 = mix(pos);
        // The high bits pick the slot, so the step must reach them: a full-width odd step.
        let h2 = h1.rotate_left(32) | 1;
        (0..u64::from(self.hashes)).map(move |i| {
            let b = reduce(h1.wrapping_add(i.wrapping_mul(h2)), slots);
            let word = (b >> slot_shift) as usize;
            let shift = ((b & ((1 << slot_shift) - 1)) as u32) * stamp_bits;
            (word, shift)
        })
    }

    fn mask(&self) -> u64 {
        (1u64 << self.stamp_bits) - 1
    }

    /// Raises each slot of `pos` to at least `stamp`.
    fn set(&mut self, pos: u64, stamp: u64) {
        let mask = self.mask();
        for (word, shift) in self.slots_of(pos) {
            let w = &mut self.words[word];
            if (*w >> shift) & mask < stamp {
                *w = (*w & !(mask << shift)) | (stamp << shift);
            }
        }
    }

    /// Whether every slot of `pos` holds a stamp of at least `stamp`.
    fn get(&self, pos: u64, stamp: u64) -> bool {
        let mask = self.mask();
        self.slots_of(pos).all(|(word, shift)| (self.words[word] >> shift) & mask >= stamp)
    }

    /// The smallest stamp among records that can cover an entry at `seq`: 0 if none can.
    fn stamp_for(&self, seq: u64) -> u64 {
        self.epoch_max_seq.iter().position(|&m| m > seq).map_or(0, |e| e as u64 + 1)
    }

    /// Adds a record whose start and end project to `r.lo` and `r.hi`.
    fn insert(&mut self, r: &Projected, opts: &EstimatorOptions) {
        // An exclusive end projects to an inclusive upper bound: the projection is monotone.
        let (p0, p1) = (opts.scale(r.lo, self.virtual_bits), opts.scale(r.hi, self.virtual_bits));
        let epoch = (self.records / self.epoch_len).min(self.epoch_max_seq.len() as u64 - 1);
        if p1 - p0 < opts.max_positions_per_range {
            for p in p0..=p1 {
                self.set(p, epoch + 1);
            }
            self.positions += p1 - p0 + 1;
        } else {
            // Keep the side list a sorted union of disjoint intervals so a probe is one binary search.
            let i = self.wide.partition_point(|w| w.1.saturating_add(1) < p0);
            let mut j = i;
            let (mut lo, mut hi, mut max_seq) = (p0, p1, r.max_seq);
            while j < self.wide.len() && self.wide[j].0 <= hi.saturating_add(1) {
                lo = lo.min(self.wide[j].0);
                hi = hi.max(self.wide[j].1);
                max_seq = max_seq.max(self.wide[j].2);
                j += 1;
            }
            self.wide.splice(i..j, [(lo, hi, max_seq)]);
        }
        let m = &mut self.epoch_max_seq[epoch as usize];
        *m = (*m).max(r.max_seq);
        self.records += 1;
        self.min_vis = self.min_vis.min(r.seq);
        self.max_seq = self.max_seq.max(r.max_seq);
    }

    /// Whether a record of this RAE may cover `x` at `seq`.
    ///
    /// REQUIRES: `x` is the key's projection clamped to the universe.
    fn may_contain(&self, x: u64, seq: u64, opts: &EstimatorOptions) -> bool {
        let stamp = self.stamp_for(seq);
        if stamp == 0 {
            return false;
        }
        let p = opts.scale(x, self.virtual_bits);
        if self.get(p, stamp) {
            return true;
        }
        let i = self.wide.partition_point(|w| w.0 <= p);
        i > 0 && self.wide[i - 1].1 >= p && self.wide[i - 1].2 > seq
    }

    /// Memory held by the RAE.
    pub fn bytes(&self) -> usize {
        self.words.len() * 8 + self.wide.len() * 24 + self.epoch_max_seq.len() * 8
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
            if r.may_contain(x, seq, &self.opts) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64) -> Vec<u8> {
        format!("user{i:012}").into_bytes()
    }

    /// An estimator whose first RAE holds `capacity` records, projecting the digits after `user00000000`.
    fn estimator(capacity: u64, stamp_bits: u32, max_positions_per_range: u64) -> Eve {
        let opts = EstimatorOptions {
            first_capacity: capacity,
            calibration_records: 0,
            stamp_bits,
            max_positions_per_range,
            ..EstimatorOptions::default()
        };
        Eve::with_prefix(opts, b"user00000000".to_vec())
    }

    /// One RAE of 1,500 records: the first half deletes keys `0..100` (one key each, in a scattered order), the
    /// second half keys `1000..1100`. Entries of keys `0..100` written after the first half are valid.
    fn rewritten(stamp_bits: u32) -> Eve {
        let mut eve = estimator(1500, stamp_bits, 32);
        for seq in 1..=1500u64 {
            let k = (seq * 37) % 100 + if seq > 750 { 1000 } else { 0 };
            eve.insert(&Area::record(&key(k), &key(k + 1), 0, seq));
        }
        assert_eq!(eve.len(), 1);
        eve
    }

    #[test]
    fn stamps_clear_entries_rewritten_after_their_delete() {
        let (plain, stamped) = (rewritten(1), rewritten(4));
        for k in 0..100 {
            // An entry older than the key's last delete (at 651..=750) is covered: both answer "maybe".
            assert!(plain.probe(&key(k), 600, u64::MAX).positive, "key {k}");
            assert!(stamped.probe(&key(k), 600, u64::MAX).positive, "key {k}");
        }
        // Written two epochs (200 records) after the key's last delete, the entry is valid. The plain filter
        // cannot tell it from a covered one; stamps can, but for slots the second half's records share.
        let plain_maybe = (0..100).filter(|&k| plain.probe(&key(k), 950, u64::MAX).positive).count();
        let stamped_maybe = (0..100).filter(|&k| stamped.probe(&key(k), 950, u64::MAX).positive).count();
        assert_eq!(plain_maybe, 100);
        assert!(stamped_maybe <= 10, "stamps still said maybe for {stamped_maybe} of 100");
    }

    #[test]
    fn wide_records_keep_their_upper_sequence() {
        let mut eve = estimator(100, 4, 1);
        eve.insert(&Area::record(&key(0), &key(50), 0, 10));
        eve.insert(&Area::record(&key(40), &key(90), 0, 20));
        eve.insert(&Area::record(&key(200), &key(300), 0, 30));
        assert!(eve.probe(&key(10), 19, u64::MAX).positive, "merged interval keeps the newer bound");
        assert!(!eve.probe(&key(10), 20, u64::MAX).positive);
        assert!(eve.probe(&key(250), 29, u64::MAX).positive);
        assert!(!eve.probe(&key(250), 30, u64::MAX).positive);
    }

    #[test]
    fn stamp_bits_are_validated() {
        for (w, ok) in [(0, false), (1, true), (2, true), (3, false), (4, true), (8, true), (16, false)] {
            let opts = EstimatorOptions { stamp_bits: w, ..EstimatorOptions::default() };
            assert_eq!(opts.validate().is_ok(), ok, "stamp_bits {w}");
        }
    }
}
