//! YCSB core workloads A–F, the BP-tree paper's X and Y, and the operation stream they generate.
//!
//! A [`Workload`] is a description: record and operation counts, an operation mix, a request distribution, scan
//! lengths, value sizes, key order and a seed. [`Workload::load`] streams the load phase (one insert per record, key
//! numbers `0..record_count` in order, as YCSB's load), [`Workload::run`] streams the run phase. Both are plain
//! iterators of [`Op`], so a benchmark can replay exactly the same operations against every system in one run, and
//! the same seed gives the same stream in every build (see [`crate::rng`]).
//!
//! The run phase follows YCSB's `CoreWorkload`:
//! - the operation is drawn from the mix by a discrete distribution (YCSB's `DiscreteGenerator`; proportions are
//!   normalised, so they need not sum to 1);
//! - reads, updates, scans and read-modify-writes target an existing key chosen by the request distribution;
//! - inserts take the next key number (`record_count`, `record_count + 1`, ...), so workload D's latest distribution
//!   reads what was just inserted;
//! - the scrambled zipfian is sized for `record_count + 2 · operation_count · insert_proportion` keys and redraws
//!   keys not inserted yet (YCSB's `expectednewkeys` and `nextKeynum` loop);
//! - scan lengths are uniform in `[1, max]` (YCSB `scanlengthdistribution=uniform`, `minscanlength=1`).
//!
//! Presets ([`Preset`]), with YCSB's workload files and BP-tree Table 3:
//!
//! | | mix | distribution | ranges |
//! |---|---|---|---|
//! | A | 50 % read, 50 % update | zipfian | |
//! | B | 95 % read, 5 % update | zipfian | |
//! | C | 100 % read | zipfian | |
//! | D | 95 % read, 5 % insert | latest | |
//! | E | 95 % scan, 5 % insert | zipfian | length uniform 1..=100 |
//! | F | 50 % read, 50 % read-modify-write | zipfian | |
//! | X | 100 % range iteration | zipfian | length uniform 1..=10,000 |
//! | Y | 100 % range map | zipfian | length uniform 1..=10,000 |
//!
//! "zipfian" is YCSB's scrambled zipfian with θ = 0.99; BP-tree runs every workload with uniform keys too
//! (set [`Workload::request_distribution`]). BP-tree's X and Y draw lengths in `[0, max_len]`; a zero-length range
//! does no work, so this crate draws `[1, max_len]` like YCSB's E. Range maps ([`Op::MapRange`]) visit the same
//! records as a scan but in any order (BP-tree §2: `map_range`).
//!
//! Beyond YCSB, the mix can contain point deletes and range deletes (for the range-delete experiments): a range delete
//! starts at an existing key and covers about `len` keys (`[key, key + len)` with ordered keys; with hashed keys the
//! span that holds `len` keys on average).

use crate::Error;
use crate::distribution::{Distribution, KeyChooser};
use crate::keys::KeyOrder;
use crate::op::{Op, OpKind};
use crate::rng::Rng;
use crate::sizes::SizeDistribution;

/// Operation proportions; normalised by their sum when the stream is built.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct OpMix {
    /// Point reads.
    pub read: f64,
    /// Updates of existing keys.
    pub update: f64,
    /// Inserts of new keys.
    pub insert: f64,
    /// Ordered range iterations.
    pub scan: f64,
    /// Read-modify-writes.
    pub read_modify_write: f64,
    /// Unordered range maps.
    pub map_range: f64,
    /// Point deletes.
    pub delete: f64,
    /// Range deletes.
    pub delete_range: f64,
}

impl OpMix {
    /// The proportion of `kind`.
    pub fn get(&self, kind: OpKind) -> f64 {
        match kind {
            OpKind::Read => self.read,
            OpKind::Update => self.update,
            OpKind::Insert => self.insert,
            OpKind::Scan => self.scan,
            OpKind::ReadModifyWrite => self.read_modify_write,
            OpKind::MapRange => self.map_range,
            OpKind::Delete => self.delete,
            OpKind::DeleteRange => self.delete_range,
        }
    }

    fn total(&self) -> f64 {
        OpKind::ALL.iter().map(|&k| self.get(k)).sum()
    }

    /// Whether any operation needs an existing key.
    fn needs_existing(&self) -> bool {
        OpKind::ALL.iter().any(|&k| k != OpKind::Insert && self.get(k) > 0.0)
    }
}

/// The named workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Preset {
    /// Update heavy: 50 % reads, 50 % updates, zipfian.
    A,
    /// Read mostly: 95 % reads, 5 % updates, zipfian.
    B,
    /// Read only, zipfian.
    C,
    /// Read latest: 95 % reads, 5 % inserts, latest.
    D,
    /// Short ranges: 95 % scans (1..=100), 5 % inserts, zipfian.
    E,
    /// Read-modify-write: 50 % reads, 50 % read-modify-writes, zipfian.
    F,
    /// BP-tree X: 100 % range iterations (1..=10,000), zipfian.
    X,
    /// BP-tree Y: 100 % range maps (1..=10,000), zipfian.
    Y,
}

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 8] =
        [Preset::A, Preset::B, Preset::C, Preset::D, Preset::E, Preset::F, Preset::X, Preset::Y];

    /// The one-letter name.
    pub fn name(&self) -> &'static str {
        match self {
            Preset::A => "a",
            Preset::B => "b",
            Preset::C => "c",
            Preset::D => "d",
            Preset::E => "e",
            Preset::F => "f",
            Preset::X => "x",
            Preset::Y => "y",
        }
    }

    /// Parses `a`..`f`, `x`, `y` (case-insensitive, optional `ycsb-` prefix).
    pub fn from_name(name: &str) -> Result<Preset, Error> {
        let lower = name.to_ascii_lowercase();
        let short = lower.strip_prefix("ycsb-").unwrap_or(&lower);
        Preset::ALL.into_iter().find(|p| p.name() == short).ok_or_else(|| {
            Error::InvalidArgument(format!("unknown workload `{name}` (expected a-f, x or y)"))
        })
    }
}

/// A YCSB-style workload description.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Name used in reports (`a`..`f`, `x`, `y`, or anything).
    pub name: String,
    /// Records inserted by the load phase. Default 100,000.
    pub record_count: u64,
    /// Operations in the run phase. Default 100,000.
    pub operation_count: u64,
    /// Operation proportions.
    pub mix: OpMix,
    /// Which existing key an operation targets. Default: YCSB's scrambled zipfian, θ = 0.99.
    pub request_distribution: Distribution,
    /// Scan and range-map lengths in records. Default uniform 1..=100 (YCSB); X and Y: 1..=10,000.
    pub scan_length: SizeDistribution,
    /// Range-delete lengths in keys. Default uniform 16..=1,024.
    pub delete_range_length: SizeDistribution,
    /// Value sizes. Default 1,000 bytes (YCSB's 10 fields of 100 bytes).
    pub value_size: SizeDistribution,
    /// Key-number-to-key mapping. Default hashed (YCSB's default).
    pub key_order: KeyOrder,
    /// Seed of every random stream of the workload.
    pub seed: u64,
}

impl Default for Workload {
    fn default() -> Workload {
        Workload {
            name: "custom".into(),
            record_count: 100_000,
            operation_count: 100_000,
            mix: OpMix { read: 1.0, ..OpMix::default() },
            request_distribution: Distribution::YCSB_ZIPFIAN,
            scan_length: SizeDistribution::Uniform { min: 1, max: 100 },
            delete_range_length: SizeDistribution::Uniform { min: 16, max: 1024 },
            value_size: SizeDistribution::Fixed(1000),
            key_order: KeyOrder::Hashed,
            seed: 0,
        }
    }
}

/// BP-tree's long-range maximum length.
pub const LONG_RANGE_MAX: u32 = 10_000;

impl Workload {
    /// The preset workload with default counts and seed 0.
    pub fn preset(p: Preset) -> Workload {
        let mix = match p {
            Preset::A => OpMix { read: 0.5, update: 0.5, ..OpMix::default() },
            Preset::B => OpMix { read: 0.95, update: 0.05, ..OpMix::default() },
            Preset::C => OpMix { read: 1.0, ..OpMix::default() },
            Preset::D => OpMix { read: 0.95, insert: 0.05, ..OpMix::default() },
            Preset::E => OpMix { scan: 0.95, insert: 0.05, ..OpMix::default() },
            Preset::F => OpMix { read: 0.5, read_modify_write: 0.5, ..OpMix::default() },
            Preset::X => OpMix { scan: 1.0, ..OpMix::default() },
            Preset::Y => OpMix { map_range: 1.0, ..OpMix::default() },
        };
        let mut w = Workload { name: p.name().into(), mix, ..Workload::default() };
        match p {
            Preset::D => w.request_distribution = Distribution::LATEST,
            Preset::X | Preset::Y => {
                w.scan_length = SizeDistribution::Uniform { min: 1, max: LONG_RANGE_MAX }
            }
            _ => {}
        }
        w
    }

    /// Checks every parameter.
    pub fn validate(&self) -> Result<(), Error> {
        for kind in OpKind::ALL {
            let p = self.mix.get(kind);
            if !(p >= 0.0 && p.is_finite()) {
                return Err(Error::InvalidArgument(format!("proportion of {kind:?} is {p}")));
            }
        }
        if self.mix.total() <= 0.0 {
            return Err(Error::InvalidArgument("operation proportions sum to zero".into()));
        }
        if self.record_count == 0 && self.mix.needs_existing() {
            return Err(Error::InvalidArgument("record_count is 0 but the mix targets existing keys".into()));
        }
        self.request_distribution.validate()?;
        self.scan_length.validate()?;
        self.delete_range_length.validate()?;
        self.value_size.validate()?;
        if self.mix.scan + self.mix.map_range > 0.0 && self.scan_length.min() == 0 {
            return Err(Error::InvalidArgument("scan lengths must be at least 1".into()));
        }
        Ok(())
    }

    /// Applies a `key=value` setting, as given to a benchmark with `--set`: `records`, `operations`,
    /// `distribution` (see [`Distribution::from_name`]), `theta`, `scan_min`, `scan_max`, `value_size`,
    /// `value_min`/`value_max`, `key_order` (`hashed`|`ordered`), `seed`, and proportions `read`, `update`,
    /// `insert`, `scan`, `rmw`, `map_range`, `delete`, `delete_range`.
    pub fn apply_setting(&mut self, key: &str, value: &str) -> Result<(), Error> {
        let bad = || Error::InvalidArgument(format!("bad value `{value}` for `{key}`"));
        let int = || value.replace('_', "").parse::<u64>().map_err(|_| bad());
        let float = || value.parse::<f64>().map_err(|_| bad());
        let u32v = || int().and_then(|v| u32::try_from(v).map_err(|_| bad()));
        match key {
            "records" | "record_count" | "recordcount" => self.record_count = int()?,
            "operations" | "operation_count" | "operationcount" => self.operation_count = int()?,
            "distribution" | "requestdistribution" => {
                self.request_distribution = Distribution::from_name(value)?
            }
            "theta" => {
                let t = float()?;
                self.request_distribution = match self.request_distribution {
                    Distribution::Zipfian { .. } => Distribution::Zipfian { theta: t },
                    Distribution::ScrambledZipfian { .. } => Distribution::ScrambledZipfian { theta: t },
                    Distribution::Latest { .. } => Distribution::Latest { theta: t },
                    Distribution::ZipfianComposite { prefixes, .. } => {
                        Distribution::ZipfianComposite { prefixes, theta: t }
                    }
                    _ => {
                        return Err(Error::InvalidArgument(
                            "theta needs a zipfian-family distribution".into(),
                        ));
                    }
                }
            }
            "scan_min" => {
                self.scan_length = SizeDistribution::Uniform { min: u32v()?, max: self.scan_length.max() }
            }
            "scan_max" | "maxscanlength" => {
                self.scan_length = SizeDistribution::Uniform { min: self.scan_length.min(), max: u32v()? }
            }
            "value_size" => self.value_size = SizeDistribution::Fixed(u32v()?),
            "value_min" => {
                self.value_size = SizeDistribution::Uniform { min: u32v()?, max: self.value_size.max() }
            }
            "value_max" => {
                self.value_size = SizeDistribution::Uniform { min: self.value_size.min(), max: u32v()? }
            }
            "key_order" | "insertorder" => {
                self.key_order = match value {
                    "hashed" => KeyOrder::Hashed,
                    "ordered" => KeyOrder::Ordered,
                    _ => return Err(bad()),
                }
            }
            "seed" => self.seed = int()?,
            "read" => self.mix.read = float()?,
            "update" => self.mix.update = float()?,
            "insert" => self.mix.insert = float()?,
            "scan" => self.mix.scan = float()?,
            "rmw" | "read_modify_write" => self.mix.read_modify_write = float()?,
            "map_range" => self.mix.map_range = float()?,
            "delete" => self.mix.delete = float()?,
            "delete_range" => self.mix.delete_range = float()?,
            _ => return Err(Error::InvalidArgument(format!("unknown workload setting `{key}`"))),
        }
        Ok(())
    }

    /// The load phase: `record_count` inserts of key numbers `0..record_count`.
    pub fn load(&self) -> Result<LoadPhase, Error> {
        self.value_size.validate()?;
        Ok(LoadPhase {
            next: 0,
            end: self.record_count,
            key_order: self.key_order,
            value_size: self.value_size,
            rng: Rng::derive(self.seed, STREAM_LOAD),
        })
    }

    /// The run phase: `operation_count` operations.
    pub fn run(&self) -> Result<RunPhase, Error> {
        self.validate()?;
        let total = self.mix.total();
        let mut cumulative = Vec::new();
        let mut acc = 0.0;
        for kind in OpKind::ALL {
            let p = self.mix.get(kind);
            if p > 0.0 {
                acc += p / total;
                cumulative.push((acc, kind));
            }
        }
        let expected_new = (self.operation_count as f64 * (self.mix.insert / total) * 2.0).ceil() as u64;
        let capacity = self.record_count.saturating_add(expected_new).max(1);
        Ok(RunPhase {
            remaining: self.operation_count,
            inserted: self.record_count,
            cumulative,
            chooser: KeyChooser::new(self.request_distribution, capacity)?,
            key_order: self.key_order,
            scan_length: self.scan_length,
            delete_range_length: self.delete_range_length,
            value_size: self.value_size,
            op_rng: Rng::derive(self.seed, STREAM_OP),
            key_rng: Rng::derive(self.seed, STREAM_KEY),
            len_rng: Rng::derive(self.seed, STREAM_LEN),
            value_rng: Rng::derive(self.seed, STREAM_VALUE),
        })
    }
}

const STREAM_LOAD: u64 = 1;
const STREAM_OP: u64 = 2;
const STREAM_KEY: u64 = 3;
const STREAM_LEN: u64 = 4;
const STREAM_VALUE: u64 = 5;

/// The load phase's inserts.
#[derive(Debug, Clone)]
pub struct LoadPhase {
    next: u64,
    end: u64,
    key_order: KeyOrder,
    value_size: SizeDistribution,
    rng: Rng,
}

impl Iterator for LoadPhase {
    type Item = Op;
    fn next(&mut self) -> Option<Op> {
        if self.next >= self.end {
            return None;
        }
        let key = self.key_order.key(self.next);
        self.next += 1;
        Some(Op::Insert { key, value_len: self.value_size.sample(&mut self.rng) })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.end - self.next).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

/// The run phase's operations.
#[derive(Debug, Clone)]
pub struct RunPhase {
    remaining: u64,
    /// Keys that exist: key numbers `[0, inserted)`.
    inserted: u64,
    /// `(cumulative probability, kind)`, ascending; the last entry is ~1.0.
    cumulative: Vec<(f64, OpKind)>,
    chooser: KeyChooser,
    key_order: KeyOrder,
    scan_length: SizeDistribution,
    delete_range_length: SizeDistribution,
    value_size: SizeDistribution,
    op_rng: Rng,
    key_rng: Rng,
    len_rng: Rng,
    value_rng: Rng,
}

impl RunPhase {
    /// How many key numbers exist now (records plus run-phase inserts so far).
    pub fn inserted(&self) -> u64 {
        self.inserted
    }

    fn choose_kind(&mut self) -> OpKind {
        let u = self.op_rng.next_f64();
        for &(c, kind) in &self.cumulative {
            if u < c {
                return kind;
            }
        }
        // Rounding left the last threshold just below 1.
        self.cumulative.last().map_or(OpKind::Read, |&(_, k)| k)
    }

    fn existing_key(&mut self) -> u64 {
        let n = self.chooser.next(&mut self.key_rng, self.inserted);
        self.key_order.key(n)
    }
}

impl Iterator for RunPhase {
    type Item = Op;
    fn next(&mut self) -> Option<Op> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let op = match self.choose_kind() {
            OpKind::Read => Op::Read { key: self.existing_key() },
            OpKind::Update => Op::Update {
                key: self.existing_key(),
                value_len: self.value_size.sample(&mut self.value_rng),
            },
            OpKind::Insert => {
                let key = self.key_order.key(self.inserted);
                self.inserted += 1;
                Op::Insert { key, value_len: self.value_size.sample(&mut self.value_rng) }
            }
            OpKind::Scan => {
                Op::Scan { start: self.existing_key(), len: self.scan_length.sample(&mut self.len_rng) }
            }
            OpKind::MapRange => {
                Op::MapRange { start: self.existing_key(), len: self.scan_length.sample(&mut self.len_rng) }
            }
            OpKind::ReadModifyWrite => Op::ReadModifyWrite {
                key: self.existing_key(),
                value_len: self.value_size.sample(&mut self.value_rng),
            },
            OpKind::Delete => Op::Delete { key: self.existing_key() },
            OpKind::DeleteRange => {
                let start = self.existing_key();
                let len = self.delete_range_length.sample(&mut self.len_rng) as u64;
                let span = match self.key_order {
                    KeyOrder::Ordered => len,
                    // Hashed keys are spread uniformly: `len` of them occupy len · 2^64 / inserted on average.
                    KeyOrder::Hashed => ((len as u128) << 64)
                        .checked_div(self.inserted as u128)
                        .unwrap_or(u128::MAX)
                        .min(u64::MAX as u128) as u64,
                };
                Op::DeleteRange { start, end: start.saturating_add(span.max(1)) }
            }
        };
        Some(op)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}
