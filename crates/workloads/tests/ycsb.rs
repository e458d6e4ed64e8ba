//! YCSB workload streams: operation mixes, key validity, scan lengths, determinism.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, HashSet};

use common::{for_each_seed, scale};
use workloads::{Distribution, KeyOrder, Op, OpKind, Preset, SizeDistribution, Workload};

fn mix_of(w: &Workload) -> BTreeMap<OpKind, f64> {
    let ops: Vec<Op> = w.run().unwrap().collect();
    assert_eq!(ops.len() as u64, w.operation_count);
    let mut m = BTreeMap::new();
    for op in &ops {
        *m.entry(op.kind()).or_insert(0.0) += 1.0;
    }
    for v in m.values_mut() {
        *v /= ops.len() as f64;
    }
    m
}

#[test]
fn preset_mixes_match_within_one_percent() {
    for_each_seed(|seed| {
        for p in Preset::ALL {
            let mut w = Workload::preset(p);
            w.seed = seed;
            w.record_count = 10_000;
            w.operation_count = 100_000 * scale();
            let mix = mix_of(&w);
            for kind in OpKind::ALL {
                let want = w.mix.get(kind);
                let got = mix.get(&kind).copied().unwrap_or(0.0);
                assert!((got - want).abs() <= 0.01, "workload {}: {kind:?} {got} vs {want}", p.name());
            }
        }
    });
}

#[test]
fn presets_have_the_published_parameters() {
    let e = Workload::preset(Preset::E);
    assert_eq!(e.scan_length, SizeDistribution::Uniform { min: 1, max: 100 });
    assert_eq!(e.request_distribution, Distribution::YCSB_ZIPFIAN);
    for p in [Preset::X, Preset::Y] {
        assert_eq!(Workload::preset(p).scan_length, SizeDistribution::Uniform { min: 1, max: 10_000 });
    }
    assert_eq!(Workload::preset(Preset::D).request_distribution, Distribution::LATEST);
    assert_eq!(Workload::preset(Preset::F).mix.read_modify_write, 0.5);
    assert_eq!(Preset::from_name("YCSB-e").unwrap(), Preset::E);
    assert!(Preset::from_name("g").is_err());
}

#[test]
fn scan_lengths_are_uniform_in_range() {
    for_each_seed(|seed| {
        for (p, max) in [(Preset::E, 100u32), (Preset::X, 10_000), (Preset::Y, 10_000)] {
            let mut w = Workload::preset(p);
            w.seed = seed;
            w.record_count = 1000;
            w.operation_count = 50_000 * scale();
            let mut sum = 0f64;
            let mut n = 0f64;
            let (mut lo, mut hi) = (u32::MAX, 0);
            for op in w.run().unwrap() {
                if let Op::Scan { len, .. } | Op::MapRange { len, .. } = op {
                    assert!((1..=max).contains(&len));
                    lo = lo.min(len);
                    hi = hi.max(len);
                    sum += len as f64;
                    n += 1.0;
                }
            }
            let mean = sum / n;
            let want = (1.0 + max as f64) / 2.0;
            assert!((mean - want).abs() < want * 0.02, "{}: mean scan length {mean}", p.name());
            assert!(lo <= 1 + max / 100 && hi >= max - max / 100, "{}: [{lo}, {hi}]", p.name());
            if p == Preset::Y {
                assert!(w.run().unwrap().all(|op| matches!(op, Op::MapRange { .. })));
            }
        }
    });
}

/// Every operation that needs an existing key gets one, including right after inserts (D, E).
#[test]
fn targeted_keys_always_exist() {
    for_each_seed(|seed| {
        for p in Preset::ALL {
            for dist in [
                Distribution::Uniform,
                Distribution::YCSB_ZIPFIAN,
                Distribution::LATEST,
                Distribution::HOTSPOT,
            ] {
                let mut w = Workload::preset(p);
                w.seed = seed;
                w.record_count = 2000;
                w.operation_count = 20_000;
                w.request_distribution = dist;
                let mut keys: HashSet<u64> = w.load().unwrap().map(|op| op.key()).collect();
                assert_eq!(keys.len(), 2000, "load keys must be distinct");
                for op in w.run().unwrap() {
                    match op {
                        Op::Insert { key, .. } => assert!(keys.insert(key), "insert of an existing key"),
                        other => assert!(
                            keys.contains(&other.key()),
                            "{}: {other:?} targets a missing key",
                            p.name()
                        ),
                    }
                }
            }
        }
    });
}

/// Workload D reads what was inserted recently: with ordered keys, the newest 1 % of keys take most reads.
#[test]
fn workload_d_reads_recent_inserts() {
    let mut w = Workload::preset(Preset::D);
    w.key_order = KeyOrder::Ordered;
    w.record_count = 100_000;
    w.operation_count = 100_000;
    let mut newest = w.record_count - 1;
    let (mut recent, mut reads) = (0u64, 0u64);
    for op in w.run().unwrap() {
        match op {
            Op::Insert { key, .. } => {
                assert_eq!(key, newest + 1, "inserts take the next key number");
                newest = key;
            }
            Op::Read { key } => {
                reads += 1;
                if key + 1000 > newest {
                    recent += 1;
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let share = recent as f64 / reads as f64;
    assert!(share > 0.5, "only {share} of reads hit the newest 1 %");
}

/// Zipfian workloads concentrate on few keys: YCSB's top key gets ~1/ζ(10^10) ≈ 3.8 % of the requests.
#[test]
fn workload_c_is_skewed() {
    let mut w = Workload::preset(Preset::C);
    w.record_count = 100_000;
    w.operation_count = 200_000;
    let mut counts = std::collections::HashMap::new();
    for op in w.run().unwrap() {
        *counts.entry(op.key()).or_insert(0u64) += 1;
    }
    let top = *counts.values().max().unwrap() as f64 / w.operation_count as f64;
    assert!((0.035..0.041).contains(&top), "top key share {top}");
    w.request_distribution = Distribution::Uniform;
    let mut counts = std::collections::HashMap::new();
    for op in w.run().unwrap() {
        *counts.entry(op.key()).or_insert(0u64) += 1;
    }
    let top_uniform = *counts.values().max().unwrap() as f64 / w.operation_count as f64;
    assert!(top_uniform < 0.001, "uniform top key share {top_uniform}");
}

#[test]
fn same_seed_same_stream() {
    for p in Preset::ALL {
        let mut w = Workload::preset(p);
        w.record_count = 1000;
        w.operation_count = 5000;
        w.value_size = SizeDistribution::Uniform { min: 10, max: 100 };
        let a: Vec<Op> = w.load().unwrap().chain(w.run().unwrap()).collect();
        let b: Vec<Op> = w.load().unwrap().chain(w.run().unwrap()).collect();
        assert_eq!(a, b);
        w.seed = 1;
        let c: Vec<Op> = w.run().unwrap().collect();
        assert_ne!(a[1000..], c[..], "{}: seed ignored", p.name());
    }
}

/// The stream of a seed is part of the crate's contract: this pins workload A's first operations so an accidental
/// change to any generator fails here rather than silently changing every benchmark.
#[test]
fn stream_fingerprint_is_stable() {
    let mut w = Workload::preset(Preset::A);
    w.record_count = 1000;
    w.operation_count = 1000;
    let mut h: u64 = 0;
    for op in w.load().unwrap().chain(w.run().unwrap()) {
        let (tag, a, b) = match op {
            Op::Insert { key, value_len } => (1, key, value_len as u64),
            Op::Update { key, value_len } => (2, key, value_len as u64),
            Op::Read { key } => (3, key, 0),
            other => panic!("unexpected {other:?}"),
        };
        h = workloads::rng::mix64(h ^ tag ^ a.rotate_left(7) ^ b.rotate_left(31));
    }
    assert_eq!(h, FINGERPRINT_A, "workload A's stream changed: {h:#x}");
}

const FINGERPRINT_A: u64 = 0x2812_4f73_2043_36fa;

#[test]
fn validation_rejects_nonsense() {
    let mut w = Workload::preset(Preset::A);
    w.mix.read = -1.0;
    assert!(w.run().is_err());
    let mut w = Workload::preset(Preset::C);
    w.record_count = 0;
    assert!(w.run().is_err());
    let mut w = Workload::preset(Preset::E);
    w.scan_length = SizeDistribution::Uniform { min: 0, max: 5 };
    assert!(w.run().is_err());
    let w = Workload { mix: Default::default(), ..Workload::default() };
    assert!(w.run().is_err());
}

#[test]
fn settings_apply() {
    let mut w = Workload::preset(Preset::E);
    w.apply_setting("records", "1_000").unwrap();
    w.apply_setting("distribution", "uniform").unwrap();
    w.apply_setting("scan_max", "50").unwrap();
    w.apply_setting("key_order", "ordered").unwrap();
    assert_eq!(w.record_count, 1000);
    assert_eq!(w.request_distribution, Distribution::Uniform);
    assert_eq!(w.scan_length, SizeDistribution::Uniform { min: 1, max: 50 });
    assert!(w.apply_setting("theta", "0.5").is_err());
    assert!(w.apply_setting("nope", "1").is_err());
    assert!(w.apply_setting("records", "x").is_err());
}

#[test]
fn range_deletes_cover_about_len_keys() {
    for order in [KeyOrder::Ordered, KeyOrder::Hashed] {
        let w = Workload {
            key_order: order,
            record_count: 100_000,
            operation_count: 2000,
            mix: workloads::OpMix { delete_range: 1.0, ..Default::default() },
            delete_range_length: SizeDistribution::Fixed(100),
            ..Workload::default()
        };
        let mut sorted: Vec<u64> = w.load().unwrap().map(|op| op.key()).collect();
        sorted.sort_unstable();
        let mut covered = 0usize;
        let mut n = 0usize;
        for op in w.run().unwrap() {
            let Op::DeleteRange { start, end } = op else { panic!("{op:?}") };
            assert!(start < end);
            covered += sorted.partition_point(|&k| k < end) - sorted.partition_point(|&k| k < start);
            n += 1;
        }
        let mean = covered as f64 / n as f64;
        assert!((90.0..110.0).contains(&mean), "{order:?}: {mean} keys per range delete");
    }
}
