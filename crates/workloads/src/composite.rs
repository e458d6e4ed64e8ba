//! Zipfian-composite keys (FlexFile §6.3, after EvenDB, EuroSys'20): the key's prefix follows a zipfian and the rest
//! is uniform.
//!
//! FlexFile's datasets use decimal keys whose first three digits are the prefix: 1,000 prefix groups, chosen with the
//! default zipfian; the remaining digits are drawn uniformly. Over a key-number space of `capacity` keys this is:
//! the space is cut into `prefixes` contiguous groups of `ceil(capacity / prefixes)` keys, a group is chosen by a
//! zipfian over groups and a key uniformly inside the group. Keys that share a prefix are adjacent in key order, so
//! popular groups are hot *ranges* with weak locality inside them (the property the FlexDB GC experiment relies on).
//!
//! Which group is hot: the zipfian's ranks are mapped to groups through a fixed pseudo-random permutation (seeded by a
//! constant, so it is the same in every run), so the hottest groups are scattered over the key space as with YCSB's
//! scrambled zipfian, but unlike a hash modulo the group count every group keeps exactly one rank.

use crate::Error;
use crate::rng::Rng;
use crate::zipfian::Zipfian;

/// Default number of prefix groups: three decimal digits.
pub const DEFAULT_PREFIXES: u64 = 1000;

/// Prefix-zipfian, suffix-uniform chooser over `[0, capacity)`.
#[derive(Debug, Clone)]
pub struct ZipfianComposite {
    prefixes: u64,
    group_size: u64,
    capacity: u64,
    zipfian: Zipfian,
    /// `rank_to_group[rank]`: a permutation of the groups.
    rank_to_group: Vec<u32>,
}

/// Upper bound on prefix groups (the permutation table is kept in memory).
pub const MAX_PREFIXES: u64 = 1 << 24;

/// Seed of the rank-to-group permutation; part of the stream definition, never change it.
const PERMUTATION_SEED: u64 = 0x0C0F_FEE0_5EED;

impl ZipfianComposite {
    /// Over `capacity` key numbers in `prefixes` groups with zipfian constant `theta`.
    pub fn new(capacity: u64, prefixes: u64, theta: f64) -> Result<ZipfianComposite, Error> {
        if capacity == 0 || prefixes == 0 {
            return Err(Error::InvalidArgument(
                "zipfian-composite needs a non-empty key space and prefixes".into(),
            ));
        }
        if prefixes > MAX_PREFIXES {
            return Err(Error::InvalidArgument(format!(
                "zipfian-composite supports at most {MAX_PREFIXES} prefixes"
            )));
        }
        let prefixes = prefixes.min(capacity);
        let group_size = capacity.div_ceil(prefixes);
        // Groups actually present (the last may be short).
        let groups = capacity.div_ceil(group_size);
        let mut rank_to_group: Vec<u32> = (0..groups as u32).collect();
        Rng::new(PERMUTATION_SEED).shuffle(&mut rank_to_group);
        Ok(ZipfianComposite {
            rank_to_group,
            prefixes: groups,
            group_size,
            capacity,
            zipfian: Zipfian::new(0, groups - 1, theta)?,
        })
    }

    /// Number of prefix groups.
    pub fn prefixes(&self) -> u64 {
        self.prefixes
    }

    /// Keys per group (the last group may hold fewer).
    pub fn group_size(&self) -> u64 {
        self.group_size
    }

    /// The group that zipfian rank `rank` maps to.
    pub fn group_of_rank(&self, rank: u64) -> u64 {
        self.rank_to_group.get(rank as usize).map_or(0, |&g| g as u64)
    }

    /// A key number in `[0, capacity)`.
    pub fn sample(&mut self, rng: &mut Rng) -> u64 {
        let rank = self.zipfian.sample(rng);
        let group = self.group_of_rank(rank);
        let start = group * self.group_size;
        let len = self.group_size.min(self.capacity - start);
        start + rng.below(len)
    }
}
