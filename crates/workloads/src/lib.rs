//! Deterministic, seeded workload generators shared by RangeDB's tests and benchmarks.
//!
//! - Key distributions ([`Distribution`], [`KeyChooser`], [`KeySampler`]): uniform, YCSB's zipfian (scrambled,
//!   θ = 0.99), plain zipfian, latest, zipfian-composite (FlexFile), hotspot, sequential.
//! - Key and value sizes ([`SizeDistribution`], [`KvSizes`] with FlexFile Table 3's presets) and key encodings
//!   ([`KeyOrder`], [`KeyEncoding`]).
//! - YCSB core workloads A–F and the BP-tree paper's X and Y ([`Workload`], [`Preset`], [`Op`]).
//! - Block traces ([`traces`]): Alibaba, Tencent CBS and MSR Cambridge parsers, RASK's I/O compaction, and a
//!   synthetic EBS trace generator with the statistics the RASK paper publishes.
//!
//! Every stream is a pure function of its parameters and seed, produced by this crate's own generator
//! ([`rng::Rng`], xoshiro256**), so a seed names the same operations in every build. `docs/workloads.md` describes
//! each generator with its paper references.

pub mod composite;
pub mod distribution;
mod error;
pub mod fnv;
pub mod keys;
pub mod latest;
pub mod op;
pub mod rng;
pub mod sizes;
pub mod traces;
pub mod ycsb;
pub mod zipfian;

pub use distribution::{Distribution, KeyChooser, KeySampler};
pub use error::Error;
pub use keys::{KeyEncoding, KeyOrder, fill_value};
pub use op::{Op, OpKind};
pub use rng::Rng;
pub use sizes::{KvSizes, SizeDistribution};
pub use ycsb::{LoadPhase, OpMix, Preset, RunPhase, Workload};
