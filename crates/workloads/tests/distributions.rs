//! Statistical checks of the key distributions: skew, top-item frequencies and determinism.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;

use common::{for_each_seed, scale};
use workloads::zipfian::{SCRAMBLED_ZETAN, ScrambledZipfian, Zipfian, zeta};
use workloads::{Distribution, KeyChooser, KeySampler, Rng};

fn counts(samples: impl Iterator<Item = u64>) -> HashMap<u64, u64> {
    let mut m = HashMap::new();
    for s in samples {
        *m.entry(s).or_insert(0) += 1;
    }
    m
}

/// |observed − expected| within `rel` of expected.
fn close(observed: f64, expected: f64, rel: f64) -> bool {
    (observed - expected).abs() <= rel * expected
}

/// P(rank < k) under Gray et al.'s generator (what YCSB's ZipfianGenerator draws): ranks 0 and 1 follow the zipfian
/// law exactly, higher ranks the method's continuous approximation of it.
fn gray_cdf(k: u64, n: u64, theta: f64) -> f64 {
    let zn = zeta(n, theta);
    if k == 0 {
        return 0.0;
    }
    if k == 1 {
        return 1.0 / zn;
    }
    let p01 = (1.0 + 0.5f64.powf(theta)) / zn;
    if k == 2 {
        return p01;
    }
    let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta(2, theta) / zn);
    // rank < k  <=>  n (eta u - eta + 1)^(1/(1-theta)) < k  <=>  u < ((k/n)^(1-theta) - 1 + eta) / eta
    let uk = (((k as f64 / n as f64).powf(1.0 - theta) - 1.0 + eta) / eta).min(1.0);
    uk.max(p01)
}

#[test]
fn zipfian_rank_frequencies_follow_the_law() {
    for_each_seed(|seed| {
        let n = 1000u64;
        let samples = 400_000 * scale();
        let mut rng = Rng::new(seed);
        let mut z = Zipfian::new(0, n - 1, 0.99).unwrap();
        let c = counts((0..samples).map(|_| z.sample(&mut rng)));
        let zn = zeta(n, 0.99);
        // The two hottest ranks follow the zipfian law exactly.
        for rank in [0u64, 1] {
            let expected = samples as f64 / ((rank + 1) as f64).powf(0.99) / zn;
            let observed = *c.get(&rank).unwrap_or(&0) as f64;
            assert!(close(observed, expected, 0.03), "rank {rank}: observed {observed}, expected {expected}");
        }
        // Cumulative mass matches Gray's method, and stays near the exact law (within its approximation error).
        for k in [5u64, 10, 100, 500] {
            let observed =
                c.iter().filter(|&(&r, _)| r < k).map(|(_, &n)| n).sum::<u64>() as f64 / samples as f64;
            assert!(close(observed, gray_cdf(k, n, 0.99), 0.02), "P(rank < {k}) = {observed}");
            let exact = zeta(k, 0.99) / zn;
            assert!(close(observed, exact, 0.10), "P(rank < {k}) = {observed}, zipfian law {exact}");
        }
        assert!(c.keys().all(|&k| k < n));
    });
}

#[test]
fn scrambled_zipfian_top_item_has_ycsb_frequency() {
    for_each_seed(|seed| {
        let n = 100_000u64;
        let samples = 400_000 * scale();
        let mut rng = Rng::new(seed);
        let mut z = ScrambledZipfian::new(0, n - 1, 0.99).unwrap();
        let c = counts((0..samples).map(|_| z.sample(&mut rng)));
        let top = z.item_of_rank(0);
        let freq = c[&top] as f64 / samples as f64;
        // 1/ζ(10^10) = 3.78 %, plus the tail ranks that hash onto the same item (~1/n of the rest).
        let expected = 1.0 / SCRAMBLED_ZETAN;
        assert!(close(freq, expected, 0.05), "top frequency {freq}, expected {expected}");
        // The top item is the most frequent one, and hot items are scattered, not clustered at the start.
        let max = c.values().copied().max().unwrap();
        assert_eq!(c[&top], max);
        let hot: Vec<u64> = (0..10).map(|r| z.item_of_rank(r)).collect();
        assert!(hot.iter().any(|&k| k > n / 2), "hot items {hot:?} all in the lower half");
        assert!(c.keys().all(|&k| k < n));
    });
}

#[test]
fn latest_prefers_the_newest_keys() {
    for_each_seed(|seed| {
        let samples = 200_000 * scale();
        let mut rng = Rng::new(seed);
        let mut chooser = KeyChooser::new(Distribution::LATEST, 10_000).unwrap();
        let mut inserted = 10_000u64;
        let mut newest_hits = 0u64;
        let mut recent_hits = 0u64;
        for i in 0..samples {
            // Inserts interleave with reads as in workload D; one per 20 * scale samples, so the key space grows
            // the same way at every scale (the expected values below are those of the final key space, which
            // drifted away from the average one when larger scales inserted more).
            if i % (20 * scale()) == 0 {
                inserted += 1;
            }
            let k = chooser.next(&mut rng, inserted);
            assert!(k < inserted);
            if k == inserted - 1 {
                newest_hits += 1;
            }
            if k + 100 >= inserted {
                recent_hits += 1;
            }
        }
        let zn = zeta(inserted, 0.99);
        let newest = newest_hits as f64 / samples as f64;
        assert!(close(newest, 1.0 / zn, 0.05), "newest {newest} vs {}", 1.0 / zn);
        let recent = recent_hits as f64 / samples as f64;
        let expected_recent = gray_cdf(100, inserted, 0.99);
        assert!(close(recent, expected_recent, 0.05), "recent {recent} vs {expected_recent}");
    });
}

#[test]
fn uniform_is_flat() {
    for_each_seed(|seed| {
        let n = 100u64;
        let samples = 200_000 * scale();
        let c = counts(KeySampler::new(Distribution::Uniform, n, seed).unwrap().take(samples as usize));
        let expected = samples as f64 / n as f64;
        for k in 0..n {
            assert!(close(c[&k] as f64, expected, 0.10), "key {k}: {}", c[&k]);
        }
    });
}

#[test]
fn zipfian_composite_has_zipfian_prefixes_and_uniform_suffixes() {
    for_each_seed(|seed| {
        let n = 1_000_000u64;
        let samples = 400_000 * scale();
        let dist = Distribution::ZIPFIAN_COMPOSITE;
        let sampler = KeySampler::new(dist, n, seed).unwrap();
        let group_size = n / 1000;
        let mut group_counts: HashMap<u64, u64> = HashMap::new();
        let mut offsets_in_top = vec![0u64; 10];
        let probe = workloads::composite::ZipfianComposite::new(n, 1000, 0.99).unwrap();
        let top_group = probe.group_of_rank(0);
        for k in sampler.take(samples as usize) {
            assert!(k < n);
            let g = k / group_size;
            *group_counts.entry(g).or_insert(0) += 1;
            if g == top_group {
                offsets_in_top[((k % group_size) * 10 / group_size) as usize] += 1;
            }
        }
        let zn = zeta(1000, 0.99);
        let top = group_counts[&top_group] as f64 / samples as f64;
        assert!(close(top, 1.0 / zn, 0.03), "top group share {top}, expected {}", 1.0 / zn);
        // Within the hot group, keys are uniform: each tenth of the group gets about a tenth.
        let in_top: u64 = offsets_in_top.iter().sum();
        for c in offsets_in_top {
            assert!(close(c as f64, in_top as f64 / 10.0, 0.06), "suffix not uniform: {c} of {in_top}");
        }
        // Every group is reachable (a permutation, not a hash with collisions).
        assert!(group_counts.len() > 990, "only {} groups seen", group_counts.len());
    });
}

#[test]
fn hotspot_sends_the_hot_fraction_to_the_hot_set() {
    for_each_seed(|seed| {
        let n = 10_000u64;
        let samples = 200_000 * scale();
        let hot = KeySampler::new(Distribution::HOTSPOT, n, seed)
            .unwrap()
            .take(samples as usize)
            .filter(|&k| k < n / 5)
            .count();
        let share = hot as f64 / samples as f64;
        assert!((share - 0.8).abs() < 0.01, "hot share {share}");
    });
}

#[test]
fn sequential_cycles() {
    let keys: Vec<u64> = KeySampler::new(Distribution::Sequential, 3, 0).unwrap().take(7).collect();
    assert_eq!(keys, vec![0, 1, 2, 0, 1, 2, 0]);
}

#[test]
fn same_seed_same_stream_for_every_distribution() {
    let dists = [
        Distribution::Uniform,
        Distribution::ZIPFIAN,
        Distribution::YCSB_ZIPFIAN,
        Distribution::LATEST,
        Distribution::ZIPFIAN_COMPOSITE,
        Distribution::HOTSPOT,
        Distribution::Sequential,
    ];
    for d in dists {
        let a: Vec<u64> = KeySampler::new(d, 1 << 20, 9).unwrap().take(1000).collect();
        let b: Vec<u64> = KeySampler::new(d, 1 << 20, 9).unwrap().take(1000).collect();
        assert_eq!(a, b, "{}", d.name());
        if d != Distribution::Sequential {
            let c: Vec<u64> = KeySampler::new(d, 1 << 20, 10).unwrap().take(1000).collect();
            assert_ne!(a, c, "{}: seed ignored", d.name());
        }
        assert_eq!(Distribution::from_name(d.name()).unwrap().name(), d.name());
    }
}

#[test]
fn bad_parameters_are_rejected() {
    assert!(KeySampler::new(Distribution::Uniform, 0, 0).is_err());
    assert!(KeyChooser::new(Distribution::Zipfian { theta: 1.5 }, 10).is_err());
    assert!(
        KeyChooser::new(Distribution::Hotspot { hot_set_fraction: 2.0, hot_op_fraction: 0.5 }, 10).is_err()
    );
    assert!(KeyChooser::new(Distribution::ZipfianComposite { prefixes: 0, theta: 0.99 }, 10).is_err());
    assert!(Distribution::from_name("pareto").is_err());
}
