//! Key and value size distributions, with the FlexFile paper's production presets.
//!
//! FlexFile Table 3 gives the average key and value sizes of three Facebook production datasets (ZippyDB and UDB
//! from Cao et al., FAST'20; SYS from Atikoglu et al., SIGMETRICS'12). The presets use those averages as fixed
//! sizes, which is how the FlexDB evaluation generates its synthetic datasets ("using the representative KV sizes").

use crate::Error;
use crate::rng::Rng;

/// A distribution of byte lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SizeDistribution {
    /// Always this many bytes.
    Fixed(u32),
    /// Uniform in `[min, max]`.
    Uniform {
        /// Smallest length.
        min: u32,
        /// Largest length (inclusive).
        max: u32,
    },
}

impl SizeDistribution {
    /// Checks the parameters (`min <= max`).
    pub fn validate(&self) -> Result<(), Error> {
        match *self {
            SizeDistribution::Fixed(_) => Ok(()),
            SizeDistribution::Uniform { min, max } if min <= max => Ok(()),
            SizeDistribution::Uniform { min, max } => {
                Err(Error::InvalidArgument(format!("size range [{min}, {max}] is empty")))
            }
        }
    }

    /// Draws a length. A fixed size consumes no randomness.
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> u32 {
        match *self {
            SizeDistribution::Fixed(n) => n,
            SizeDistribution::Uniform { min, max } => rng.range_inclusive(min as u64, max as u64) as u32,
        }
    }

    /// The expected length.
    pub fn mean(&self) -> f64 {
        match *self {
            SizeDistribution::Fixed(n) => n as f64,
            SizeDistribution::Uniform { min, max } => (min as f64 + max as f64) / 2.0,
        }
    }

    /// The smallest length this distribution can produce.
    pub fn min(&self) -> u32 {
        match *self {
            SizeDistribution::Fixed(n) => n,
            SizeDistribution::Uniform { min, .. } => min,
        }
    }

    /// The largest length this distribution can produce.
    pub fn max(&self) -> u32 {
        match *self {
            SizeDistribution::Fixed(n) => n,
            SizeDistribution::Uniform { max, .. } => max,
        }
    }
}

/// A key size and a value size together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvSizes {
    /// Key length in bytes.
    pub key: SizeDistribution,
    /// Value length in bytes.
    pub value: SizeDistribution,
}

impl KvSizes {
    /// ZippyDB (FlexFile Table 3): 48-byte keys, 43-byte values.
    pub const ZIPPYDB: KvSizes =
        KvSizes { key: SizeDistribution::Fixed(48), value: SizeDistribution::Fixed(43) };
    /// UDB (FlexFile Table 3): 27-byte keys, 127-byte values.
    pub const UDB: KvSizes =
        KvSizes { key: SizeDistribution::Fixed(27), value: SizeDistribution::Fixed(127) };
    /// SYS (FlexFile Table 3): 28-byte keys, 396-byte values.
    pub const SYS: KvSizes =
        KvSizes { key: SizeDistribution::Fixed(28), value: SizeDistribution::Fixed(396) };
    /// The BP-tree paper's elements: 8-byte keys and 8-byte values.
    pub const BPTREE: KvSizes =
        KvSizes { key: SizeDistribution::Fixed(8), value: SizeDistribution::Fixed(8) };

    /// A preset by name: `zippydb`, `udb`, `sys`, `bptree` (case-insensitive).
    pub fn preset(name: &str) -> Result<KvSizes, Error> {
        match name.to_ascii_lowercase().as_str() {
            "zippydb" => Ok(KvSizes::ZIPPYDB),
            "udb" => Ok(KvSizes::UDB),
            "sys" => Ok(KvSizes::SYS),
            "bptree" => Ok(KvSizes::BPTREE),
            other => Err(Error::InvalidArgument(format!("unknown size preset `{other}`"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_covers_its_range() {
        let d = SizeDistribution::Uniform { min: 16, max: 64 };
        let mut rng = Rng::new(1);
        let mut seen = [false; 65];
        for _ in 0..10_000 {
            let n = d.sample(&mut rng);
            assert!((16..=64).contains(&n));
            seen[n as usize] = true;
        }
        assert!(seen[16..=64].iter().all(|&s| s));
        assert!(SizeDistribution::Uniform { min: 2, max: 1 }.validate().is_err());
    }

    #[test]
    fn presets_match_table_3() {
        assert_eq!(KvSizes::preset("ZippyDB").unwrap().key.mean(), 48.0);
        assert_eq!(KvSizes::preset("udb").unwrap().value.mean(), 127.0);
        assert_eq!(KvSizes::preset("sys").unwrap().value.mean(), 396.0);
        assert!(KvSizes::preset("nope").is_err());
    }
}
