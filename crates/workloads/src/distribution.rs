//! Request distributions: which existing key an operation targets.
//!
//! A [`Distribution`] is a description (plain data, `Copy`); a [`KeyChooser`] is its running state. Choosers pick a
//! *key number* in `[0, inserted)`, where `inserted` is the number of keys that exist when the draw happens and may
//! grow between draws (inserts in YCSB D and E). Key numbers become keys through [`crate::KeyOrder`].
//!
//! | distribution | source | over |
//! |---|---|---|
//! | `Uniform` | YCSB `UniformLongGenerator` | every key inserted so far (YCSB: the initial records only) |
//! | `Zipfian` | YCSB `ZipfianGenerator`, unscrambled | key number = rank: key 0 hottest |
//! | `ScrambledZipfian` | YCSB `ScrambledZipfianGenerator` (the YCSB "zipfian") | `capacity` keys, rejecting keys not yet inserted |
//! | `Latest` | YCSB `SkewedLatestGenerator` | newest key hottest |
//! | `ZipfianComposite` | FlexFile §6.3 / EvenDB | zipfian prefix groups, uniform suffix |
//! | `Hotspot` | YCSB `HotspotIntegerGenerator` | a hot fraction of the keys gets a hot fraction of the ops |
//! | `Sequential` | YCSB `SequentialGenerator` | key numbers in order, wrapping |
//!
//! `capacity` is the largest key count the workload can reach (records plus expected inserts). YCSB sizes its
//! scrambled zipfian the same way (`recordcount + 2 · operationcount · insertproportion`) and rejects draws beyond
//! the keys inserted so far; this crate does the same for the scrambled and composite choosers.

use crate::Error;
use crate::composite::{DEFAULT_PREFIXES, ZipfianComposite};
use crate::latest::SkewedLatest;
use crate::rng::Rng;
use crate::zipfian::{ScrambledZipfian, YCSB_ZIPFIAN_CONSTANT, Zipfian};

/// A request distribution over key numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Distribution {
    /// Every existing key equally likely.
    Uniform,
    /// Zipfian with key number = rank (key 0 the most popular).
    Zipfian {
        /// Zipfian constant θ in (0, 1).
        theta: f64,
    },
    /// YCSB's zipfian: ranks scattered over the key space by FNV hashing.
    ScrambledZipfian {
        /// Zipfian constant θ in (0, 1).
        theta: f64,
    },
    /// The newest keys are the most popular (YCSB workload D).
    Latest {
        /// Zipfian constant θ in (0, 1).
        theta: f64,
    },
    /// Zipfian over contiguous prefix groups, uniform within a group (FlexFile §6.3).
    ZipfianComposite {
        /// Number of prefix groups (FlexFile: 1,000, three decimal digits).
        prefixes: u64,
        /// Zipfian constant θ in (0, 1).
        theta: f64,
    },
    /// `hot_op_fraction` of the draws go uniformly to the first `hot_set_fraction` of the keys.
    Hotspot {
        /// Fraction of the key space that is hot, in [0, 1].
        hot_set_fraction: f64,
        /// Fraction of draws that go to the hot set, in [0, 1].
        hot_op_fraction: f64,
    },
    /// 0, 1, 2, ... wrapping at the number of existing keys.
    Sequential,
}

impl Distribution {
    /// YCSB's default zipfian (scrambled, θ = 0.99).
    pub const YCSB_ZIPFIAN: Distribution = Distribution::ScrambledZipfian { theta: YCSB_ZIPFIAN_CONSTANT };
    /// Unscrambled zipfian with θ = 0.99.
    pub const ZIPFIAN: Distribution = Distribution::Zipfian { theta: YCSB_ZIPFIAN_CONSTANT };
    /// YCSB's latest distribution (θ = 0.99).
    pub const LATEST: Distribution = Distribution::Latest { theta: YCSB_ZIPFIAN_CONSTANT };
    /// FlexFile's zipfian-composite: 1,000 prefixes, θ = 0.99.
    pub const ZIPFIAN_COMPOSITE: Distribution =
        Distribution::ZipfianComposite { prefixes: DEFAULT_PREFIXES, theta: YCSB_ZIPFIAN_CONSTANT };
    /// YCSB's hotspot defaults: 20 % of the keys get 80 % of the draws.
    pub const HOTSPOT: Distribution = Distribution::Hotspot { hot_set_fraction: 0.2, hot_op_fraction: 0.8 };

    /// A short stable name (`uniform`, `zipfian`, `scrambled-zipfian`, `latest`, `zipfian-composite`, `hotspot`,
    /// `sequential`) for reports and command lines.
    pub fn name(&self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Zipfian { .. } => "zipfian",
            Distribution::ScrambledZipfian { .. } => "scrambled-zipfian",
            Distribution::Latest { .. } => "latest",
            Distribution::ZipfianComposite { .. } => "zipfian-composite",
            Distribution::Hotspot { .. } => "hotspot",
            Distribution::Sequential => "sequential",
        }
    }

    /// Parses [`Distribution::name`] (with the default parameters); `ycsb-zipfian` is an alias of
    /// `scrambled-zipfian`.
    pub fn from_name(name: &str) -> Result<Distribution, Error> {
        Ok(match name {
            "uniform" => Distribution::Uniform,
            "zipfian" => Distribution::ZIPFIAN,
            "scrambled-zipfian" | "ycsb-zipfian" => Distribution::YCSB_ZIPFIAN,
            "latest" => Distribution::LATEST,
            "zipfian-composite" => Distribution::ZIPFIAN_COMPOSITE,
            "hotspot" => Distribution::HOTSPOT,
            "sequential" => Distribution::Sequential,
            other => return Err(Error::InvalidArgument(format!("unknown distribution `{other}`"))),
        })
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), Error> {
        let theta_ok = |t: f64| {
            if t > 0.0 && t < 1.0 {
                Ok(())
            } else {
                Err(Error::InvalidArgument(format!("zipfian constant {t} must be in (0, 1)")))
            }
        };
        let fraction_ok = |name: &str, f: f64| {
            if (0.0..=1.0).contains(&f) {
                Ok(())
            } else {
                Err(Error::InvalidArgument(format!("{name} {f} must be in [0, 1]")))
            }
        };
        match *self {
            Distribution::Uniform | Distribution::Sequential => Ok(()),
            Distribution::Zipfian { theta }
            | Distribution::ScrambledZipfian { theta }
            | Distribution::Latest { theta } => theta_ok(theta),
            Distribution::ZipfianComposite { prefixes, theta } => {
                if prefixes == 0 {
                    return Err(Error::InvalidArgument("zipfian-composite needs at least one prefix".into()));
                }
                theta_ok(theta)
            }
            Distribution::Hotspot { hot_set_fraction, hot_op_fraction } => {
                fraction_ok("hot_set_fraction", hot_set_fraction)?;
                fraction_ok("hot_op_fraction", hot_op_fraction)
            }
        }
    }
}

/// The running state of a [`Distribution`].
#[derive(Debug, Clone)]
pub struct KeyChooser {
    inner: Inner,
}

#[derive(Debug, Clone)]
enum Inner {
    Uniform,
    Zipfian(Zipfian),
    Scrambled(ScrambledZipfian),
    Latest(SkewedLatest),
    Composite(ZipfianComposite),
    Hotspot { hot_set_fraction: f64, hot_op_fraction: f64 },
    Sequential { next: u64 },
}

/// Draws beyond the inserted keys are retried at most this often before falling back to a uniform key; with YCSB's
/// sizing the acceptance probability is above 1/3, so the fallback essentially never happens.
const MAX_REJECTIONS: u32 = 1000;

impl KeyChooser {
    /// A chooser for `dist` over a key space that may grow to `capacity` keys.
    pub fn new(dist: Distribution, capacity: u64) -> Result<KeyChooser, Error> {
        dist.validate()?;
        let capacity = capacity.max(1);
        let inner = match dist {
            Distribution::Uniform => Inner::Uniform,
            Distribution::Zipfian { theta } => Inner::Zipfian(Zipfian::new(0, capacity - 1, theta)?),
            Distribution::ScrambledZipfian { theta } => {
                Inner::Scrambled(ScrambledZipfian::new(0, capacity - 1, theta)?)
            }
            Distribution::Latest { theta } => Inner::Latest(SkewedLatest::new(capacity, theta)?),
            Distribution::ZipfianComposite { prefixes, theta } => {
                Inner::Composite(ZipfianComposite::new(capacity, prefixes, theta)?)
            }
            Distribution::Hotspot { hot_set_fraction, hot_op_fraction } => {
                Inner::Hotspot { hot_set_fraction, hot_op_fraction }
            }
            Distribution::Sequential => Inner::Sequential { next: 0 },
        };
        Ok(KeyChooser { inner })
    }

    /// A key number in `[0, inserted)`. REQUIRES: `inserted >= 1` (0 is treated as 1).
    pub fn next(&mut self, rng: &mut Rng, inserted: u64) -> u64 {
        let inserted = inserted.max(1);
        match &mut self.inner {
            Inner::Uniform => rng.below(inserted),
            Inner::Zipfian(z) => z.sample_n(rng, inserted),
            Inner::Latest(l) => l.sample(rng, inserted),
            Inner::Scrambled(z) => {
                for _ in 0..MAX_REJECTIONS {
                    let k = z.sample(rng);
                    if k < inserted {
                        return k;
                    }
                }
                rng.below(inserted)
            }
            Inner::Composite(c) => {
                for _ in 0..MAX_REJECTIONS {
                    let k = c.sample(rng);
                    if k < inserted {
                        return k;
                    }
                }
                rng.below(inserted)
            }
            Inner::Hotspot { hot_set_fraction, hot_op_fraction } => {
                let hot = ((inserted as f64 * *hot_set_fraction) as u64).min(inserted);
                let cold = inserted - hot;
                if hot > 0 && (cold == 0 || rng.chance(*hot_op_fraction)) {
                    rng.below(hot)
                } else {
                    hot + rng.below(cold)
                }
            }
            Inner::Sequential { next } => {
                let k = *next % inserted;
                *next = k + 1;
                k
            }
        }
    }
}

/// A self-contained key sampler over a fixed key space `[0, n)`: a distribution, its state and its random stream.
/// Convenient for benchmarks that want "n keys, zipfian" without a YCSB workload around it.
#[derive(Debug, Clone)]
pub struct KeySampler {
    chooser: KeyChooser,
    rng: Rng,
    n: u64,
}

impl KeySampler {
    /// Keys in `[0, n)` drawn from `dist`, seeded by `seed`.
    pub fn new(dist: Distribution, n: u64, seed: u64) -> Result<KeySampler, Error> {
        if n == 0 {
            return Err(Error::InvalidArgument("key space must not be empty".into()));
        }
        Ok(KeySampler { chooser: KeyChooser::new(dist, n)?, rng: Rng::new(seed), n })
    }

    /// The next key number.
    pub fn next_key(&mut self) -> u64 {
        self.chooser.next(&mut self.rng, self.n)
    }
}

impl Iterator for KeySampler {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        Some(self.next_key())
    }
}
