//! `rangedb bench gloran_index`: GLORAN's global range-record index alone, before it is wired into the engine.
//!
//! - `point-coverage`: `R` range deletes (uniform starts over a universe of `U` 8-byte big-endian keys, lengths
//!   16–1,024) go into the index on the real disk (`lsm-gloran-index`, default options: 4 MiB buffer, T = 10,
//!   estimator on); then point checks of random `(key, seq)` entries, as an engine makes after finding a key.
//!   Peers answer the same checks from RocksDB-style fragmented tombstone lists held in memory: one global list
//!   (`fragmented-tombstones`, the best case of a local design) and one list per LSM level
//!   (`fragmented-tombstones-per-level`, 4 levels growing 10×, every level probed, as the LRR lookup does, §3).
//!   `lsm-gloran-index-noeve` is the index without the estimator (ablation).
//! - `estimator-fpr`: the entry validity estimator's false-positive rate against bits per range (paper Fig. 13c,
//!   ranges of length 100), against a Bloom filter given the same bits that stores every key of every range
//!   (`bloom-per-key`, the paper's naive solution); `lsm-gloran-eve` is the paper's filter, `lsm-gloran-eve-stamped`
//!   ours with 4-bit sequence stamps in the same slots (four times the memory, `EstimatorOptions::stamp_bits`).
//!
//! `--set records=N universe=N probes=N fpr_records=N fpr_queries=N fpr_density_pct=N`.

use std::path::Path;
use std::sync::Arc;

use gloran::estimator::Eve;
use gloran::{Area, EstimatorOptions, GlobalIndex, IndexOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use vfs::{Fs, OsFs};

use crate::measure::time_ops;
use crate::{Ctx, Experiment, Plot, Report, Result, alloc};

/// The `gloran_index` experiment.
pub struct GloranIndex;

impl Experiment for GloranIndex {
    fn name(&self) -> &'static str {
        "gloran_index"
    }

    fn settings(&self) -> &'static [&'static str] {
        &["fpr_density_pct", "fpr_queries", "fpr_records", "probes", "records", "universe"]
    }

    fn about(&self) -> &'static str {
        "GLORAN's global range-record index alone: point coverage checks vs fragmented tombstone lists (global and \
         per level), estimator FPR vs bits per range vs a per-key Bloom filter; --set records=N universe=N probes=N"
    }

    fn run(&self, ctx: &Ctx) -> Result<Report> {
        let mut report = Report::new(self.name(), ctx.quick);
        point_coverage(ctx, &mut report)?;
        estimator_fpr(ctx, &mut report)?;
        Ok(report)
    }
}

/// RocksDB's fragmented range tombstones: non-overlapping fragments, each with the sequence numbers of the
/// tombstones covering it (sorted descending, as RocksDB keeps them).
struct Fragments {
    starts: Vec<u64>,
    ends: Vec<u64>,
    seqs: Vec<Vec<u64>>,
}

impl Fragments {
    fn new(recs: &[(u64, u64, u64)]) -> Self {
        let mut bounds: Vec<u64> = recs.iter().flat_map(|r| [r.0, r.1]).collect();
        bounds.sort_unstable();
        bounds.dedup();
        let mut by_start: Vec<&(u64, u64, u64)> = recs.iter().collect();
        by_start.sort_unstable_by_key(|r| r.0);
        let (mut starts, mut ends, mut seqs) = (Vec::new(), Vec::new(), Vec::new());
        let mut active: Vec<(u64, u64)> = Vec::new(); // (end, seq)
        let mut next = 0;
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            while next < by_start.len() && by_start[next].0 <= lo {
                active.push((by_start[next].1, by_start[next].2));
                next += 1;
            }
            active.retain(|a| a.0 > lo);
            if !active.is_empty() {
                let mut s: Vec<u64> = active.iter().map(|a| a.1).collect();
                s.sort_unstable_by(|a, b| b.cmp(a));
                starts.push(lo);
                ends.push(hi);
                seqs.push(s);
            }
        }
        Fragments { starts, ends, seqs }
    }

    fn covered(&self, key: u64, seq: u64) -> bool {
        let i = self.starts.partition_point(|&s| s <= key);
        i > 0 && key < self.ends[i - 1] && self.seqs[i - 1].first().is_some_and(|&s| s > seq)
    }
}

fn records(rng: &mut SmallRng, n: usize, universe: u64, len: (u64, u64)) -> Vec<(u64, u64, u64)> {
    (0..n)
        .map(|i| {
            let s = rng.random_range(0..universe);
            (s, s + rng.random_range(len.0..=len.1), i as u64 + 1)
        })
        .collect()
}

fn point_coverage(ctx: &Ctx, report: &mut Report) -> Result<()> {
    let n: usize = ctx.setting_min("records", ctx.scale(100_000, 1_000_000), 1)?;
    let universe: u64 = ctx.setting_min("universe", ctx.scale(1_000_000_000, 10_000_000_000), 1)?;
    let probes: u64 = ctx.setting_min("probes", ctx.scale(200_000, 1_000_000), 1)?;
    let mut rng = SmallRng::seed_from_u64(ctx.seed);
    let recs = records(&mut rng, n, universe, (16, 1024));
    let last_seq = n as u64;
    let probe_set: Vec<(u64, u64)> =
        (0..probes).map(|_| (rng.random_range(0..universe), rng.random_range(0..=last_seq))).collect();
    report.workload(
        "point-coverage",
        json!({"records": n, "universe_keys": universe, "range_len": "16..=1024", "probes": probes,
               "key": "8-byte big-endian", "index": "4 MiB buffer, T=10, 4 KiB nodes, 10 bits/range estimator"}),
    );

    let fs: Arc<dyn Fs> = Arc::new(OsFs::new());
    let dir = ctx.scratch.join("gloran_index");
    let _ = std::fs::remove_dir_all(&dir);
    let result = index_runs(ctx, report, fs, &dir, &recs, &probe_set, universe);
    let _ = std::fs::remove_dir_all(&dir);
    let want = result?;

    // Peers.
    let (global, mem) = alloc::measure(|| Fragments::new(&recs));
    let mut wrong = 0u64;
    let st = time_ops(probes, |i| {
        let (k, e) = probe_set[i as usize];
        if global.covered(k, e) != want[i as usize] {
            wrong += 1;
        }
    });
    report.row("point-coverage", "fragmented-tombstones", st.metrics());
    report.row("point-coverage", "fragmented-tombstones", [("memory_bytes", mem as f64)]);
    drop(global);
    // LRR: records spread over 4 levels by age, sizes growing 10×, newest at the top; every level is probed.
    let total: usize = (0..4).map(|i| 10usize.pow(i)).sum();
    let mut levels = Vec::new();
    let mut from = recs.len();
    for i in 0..4u32 {
        let take = (recs.len() * 10usize.pow(i)).div_ceil(total).min(from);
        levels.push(Fragments::new(&recs[from - take..from]));
        from -= take;
    }
    let mut wrong_levels = 0u64;
    let st = time_ops(probes, |i| {
        let (k, e) = probe_set[i as usize];
        let hit = levels.iter().any(|l| l.covered(k, e));
        if hit != want[i as usize] {
            wrong_levels += 1;
        }
    });
    report.row("point-coverage", "fragmented-tombstones-per-level", st.metrics());
    if wrong + wrong_levels > 0 {
        return Err(format!(
            "answers differ from the index: {wrong} (global list), {wrong_levels} (per level)"
        )
        .into());
    }
    let covered = want.iter().filter(|&&c| c).count();
    report.note(format!(
        "point-coverage: {covered} of {probes} probes covered; all systems gave identical answers"
    ));
    Ok(())
}

fn index_runs(
    ctx: &Ctx,
    report: &mut Report,
    fs: Arc<dyn Fs>,
    dir: &Path,
    recs: &[(u64, u64, u64)],
    probe_set: &[(u64, u64)],
    universe: u64,
) -> Result<Vec<bool>> {
    let opts = IndexOptions {
        estimator: EstimatorOptions {
            universe_min: 0,
            universe_max: universe + 1024,
            // One position per average range length (520 keys): a record occupies about two positions.
            virtual_bits: (universe / 520).max(2),
            // The paper's setup: the integer key universe is known, so the scaling is set, not calibrated.
            calibration_records: 0,
            ..EstimatorOptions::default()
        },
        ..IndexOptions::default()
    };
    let bar = ctx.progress(recs.len() as u64, "gloran index build");
    let (built, mem) = alloc::measure(|| -> Result<(GlobalIndex, f64)> {
        let mut idx = GlobalIndex::open(fs, dir, opts, &[])?;
        let t = std::time::Instant::now();
        for (i, &(s, e, q)) in recs.iter().enumerate() {
            idx.insert(&s.to_be_bytes(), &e.to_be_bytes(), 0, q)?;
            if i % 4096 == 0 {
                bar.inc(4096);
            }
        }
        let secs = t.elapsed().as_secs_f64();
        Ok((idx, recs.len() as f64 / secs))
    });
    bar.finish_and_clear();
    let (idx, insert_rate) = built?;
    let mut want = Vec::with_capacity(probe_set.len());
    let mut err: Option<gloran::Error> = None;
    let before = idx.stats();
    let st = time_ops(probe_set.len() as u64, |i| {
        let (k, e) = probe_set[i as usize];
        match idx.check_entry(&k.to_be_bytes(), e, u64::MAX) {
            Ok(c) => want.push(c),
            Err(e) => err = Some(e),
        }
    });
    if let Some(e) = err {
        return Err(e.into());
    }
    let s = idx.stats();
    let probes = probe_set.len() as f64;
    report.row("point-coverage", "lsm-gloran-index", st.metrics());
    report.row(
        "point-coverage",
        "lsm-gloran-index",
        [
            ("memory_bytes", mem as f64),
            ("index_file_bytes", s.index_file_bytes as f64),
            ("range_deletes_per_sec", insert_rate),
            (
                "estimator_positive_ratio",
                (s.estimator_positives - before.estimator_positives) as f64 / probes,
            ),
            ("index_probes_per_lookup_ratio", (s.index_probes - before.index_probes) as f64 / probes),
            (
                "nodes_per_index_probe_ratio",
                (s.nodes_read - before.nodes_read) as f64
                    / (s.index_probes - before.index_probes).max(1) as f64,
            ),
        ],
    );
    let mut err: Option<gloran::Error> = None;
    let before = idx.stats();
    let mut mismatch = 0u64;
    let st = time_ops(probe_set.len() as u64, |i| {
        let (k, e) = probe_set[i as usize];
        match idx.covering(&k.to_be_bytes(), e, u64::MAX) {
            Ok(c) => mismatch += u64::from(c.is_some() != want[i as usize]),
            Err(e) => err = Some(e),
        }
    });
    if let Some(e) = err {
        return Err(e.into());
    }
    if mismatch > 0 {
        return Err(format!("{mismatch} answers differ with and without the estimator").into());
    }
    let s = idx.stats();
    report.row("point-coverage", "lsm-gloran-index-noeve", st.metrics());
    report.row(
        "point-coverage",
        "lsm-gloran-index-noeve",
        [("nodes_per_index_probe_ratio", (s.nodes_read - before.nodes_read) as f64 / probes)],
    );
    report.note(format!(
        "lsm-gloran-index: {} DR-tree levels, areas per level {:?}, {} flushes, {} compactions",
        idx.level_count(),
        s.level_areas,
        s.flushes,
        s.compactions
    ));
    Ok(want)
}

/// A plain Bloom filter of `bits` bits with `k` probes (the per-key baseline).
struct Bloom {
    words: Vec<u64>,
    bits: u64,
    k: u32,
}

impl Bloom {
    fn new(bits: u64, k: u32) -> Self {
        let bits = bits.max(64);
        Bloom { words: vec![0; bits.div_ceil(64) as usize], bits: bits.div_ceil(64) * 64, k }
    }
    fn hash(x: u64) -> u64 {
        let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn insert(&mut self, x: u64) {
        let h = Self::hash(x);
        for i in 0..u64::from(self.k) {
            let b = h.wrapping_add(i.wrapping_mul((h >> 32) | 1)) % self.bits;
            self.words[(b / 64) as usize] |= 1 << (b % 64);
        }
    }
    fn contains(&self, x: u64) -> bool {
        let h = Self::hash(x);
        (0..u64::from(self.k)).all(|i| {
            let b = h.wrapping_add(i.wrapping_mul((h >> 32) | 1)) % self.bits;
            self.words[(b / 64) as usize] & (1 << (b % 64)) != 0
        })
    }
}

fn estimator_fpr(ctx: &Ctx, report: &mut Report) -> Result<()> {
    let n: usize = ctx.setting_min("fpr_records", ctx.scale(50_000, 1_000_000), 1)?;
    let queries: usize = ctx.setting_min("fpr_queries", ctx.scale(50_000, 1_000_000), 1)?;
    // Ranges cover about 1 % of the universe (`--set fpr_density_pct=N`): deletes over a large key space.
    let density: u64 = ctx.setting("fpr_density_pct", 1)?;
    let universe = n as u64 * 100 * 100 / density.clamp(1, 100);
    let mut rng = SmallRng::seed_from_u64(ctx.seed ^ 0xF00D);
    let recs = records(&mut rng, n, universe, (100, 100));
    let frag = Fragments::new(&recs);
    let negatives: Vec<u64> = std::iter::repeat_with(|| rng.random_range(0..universe))
        .filter(|&k| !frag.covered(k, 0))
        .take(queries)
        .collect();
    let ages: Vec<u64> = (0..negatives.len()).map(|_| rng.random_range(0..=n as u64)).collect();
    report.workload(
        "estimator-fpr",
        json!({"records": n, "range_len": 100, "universe_keys": universe, "negative_queries": queries,
               "first_raes_capacity": n.div_ceil(7), "density_pct": density, "virtual_bit_keys": 100}),
    );
    let mut ours = Vec::new();
    let mut stamped = Vec::new();
    let mut naive = Vec::new();
    for bpr in [2u32, 4, 6, 8, 10, 12, 16] {
        let w = format!("estimator-fpr-{bpr}bits");
        report.workload(&w, json!({"bits_per_range": bpr}));
        // The paper's filter (one bit a slot), then ours with sequence stamps (`EstimatorOptions::stamp_bits`,
        // the same slots at four times the memory).
        for (system, stamp_bits, series) in
            [("lsm-gloran-eve", 1, &mut ours), ("lsm-gloran-eve-stamped", 4, &mut stamped)]
        {
            let opts = EstimatorOptions {
                bits_per_range: bpr,
                // The paper's proportion (2 M first capacity for 14 M ranges): the chain ends exactly full.
                first_capacity: (n as u64).div_ceil(7).max(1),
                universe_min: 0,
                universe_max: universe + 100,
                virtual_bits: (universe + 100) / 100,
                calibration_records: 0,
                stamp_bits,
                ..EstimatorOptions::default()
            };
            let mut eve = Eve::new(opts);
            for &(s, e, q) in &recs {
                eve.insert(&Area::record(&s.to_be_bytes(), &e.to_be_bytes(), 0, q));
            }
            // Entries of random age: RAEs whose records are all older than the entry are skipped (§4.3).
            let fp = negatives
                .iter()
                .zip(&ages)
                .filter(|&(&k, &age)| eve.probe(&k.to_be_bytes(), age, u64::MAX).positive)
                .count();
            let rate = fp as f64 / negatives.len() as f64;
            // The worst case: the oldest entries, for which every RAE of the chain is consulted.
            let fp_old =
                negatives.iter().filter(|&&k| eve.probe(&k.to_be_bytes(), 0, u64::MAX).positive).count();
            report.row(
                &w,
                system,
                [
                    ("fpr_ratio", rate),
                    ("fpr_oldest_entry_ratio", fp_old as f64 / negatives.len() as f64),
                    ("memory_bytes", eve.bytes() as f64),
                ],
            );
            series.push((f64::from(bpr), rate));
        }
        // Same bit budget, every key of every range inserted.
        let bits = n as u64 * u64::from(bpr);
        let k = ((f64::from(bpr) / 100.0 * std::f64::consts::LN_2).round() as u32).max(1);
        let mut bloom = Bloom::new(bits, k);
        for &(s, e, _) in &recs {
            for x in s..e {
                bloom.insert(x);
            }
        }
        let fp = negatives.iter().filter(|&&k| bloom.contains(k)).count();
        let fpr_naive = fp as f64 / negatives.len() as f64;
        report.row(
            &w,
            "bloom-per-key",
            [
                ("fpr_ratio", fpr_naive),
                ("fpr_oldest_entry_ratio", fpr_naive),
                ("memory_bytes", (bloom.words.len() * 8) as f64),
            ],
        );
        naive.push((f64::from(bpr), fpr_naive));
    }
    report.plot(
        Plot::new("Estimator false-positive rate vs bits per range", "bits per range", "false-positive rate")
            .series("lsm-gloran-eve", ours)
            .series("lsm-gloran-eve-stamped", stamped)
            .series("bloom-per-key", naive),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_at_a_tiny_size_with_identical_answers() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = Ctx::for_tests(dir.path().to_path_buf());
        for (k, v) in [
            ("records", "3000"),
            ("universe", "1000000"),
            ("probes", "3000"),
            ("fpr_records", "1400"),
            ("fpr_queries", "2000"),
        ] {
            ctx.set.insert(k.into(), v.into());
        }
        let r = GloranIndex.run(&ctx).unwrap();
        let systems: Vec<&str> = r.results.iter().map(|row| row.system.as_str()).collect();
        for s in [
            "lsm-gloran-index",
            "lsm-gloran-index-noeve",
            "fragmented-tombstones",
            "lsm-gloran-eve",
            "lsm-gloran-eve-stamped",
        ] {
            assert!(systems.contains(&s), "{s} missing");
        }
        // The estimator never answers worse than "maybe" for everything, and beats the per-key Bloom filter.
        let fpr = |sys: &str| {
            r.results
                .iter()
                .find(|row| row.workload == "estimator-fpr-16bits" && row.system == sys)
                .and_then(|row| row.metrics.get("fpr_ratio").copied())
                .unwrap()
        };
        assert!(fpr("lsm-gloran-eve") < fpr("bloom-per-key"));
        // Stamps only ever remove positives for entries newer than the records that set a slot.
        assert!(fpr("lsm-gloran-eve-stamped") <= fpr("lsm-gloran-eve"));
    }
}
