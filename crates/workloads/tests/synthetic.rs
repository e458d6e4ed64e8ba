//! The synthetic EBS trace generator: its measured statistics match its parameters, it is deterministic, and its
//! traces survive a round trip through every public format.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Cursor;

use common::{for_each_seed, scale};
use workloads::traces::{
    AnalysisOptions, BlockOp, SyntheticOptions, SyntheticTrace, TraceFormat, TraceOptions, TraceReader,
    TraceStats, analyze, split_by_volume, write_trace,
};

fn measure(opts: &SyntheticOptions) -> (Vec<BlockOp>, TraceStats) {
    let ops: Vec<BlockOp> = SyntheticTrace::new(opts.clone()).unwrap().collect();
    let stats =
        analyze(ops.iter().copied(), &AnalysisOptions { cw_window_writes: opts.cw_window_writes as usize });
    (ops, stats)
}

fn check(opts: &SyntheticOptions) {
    let (ops, s) = measure(opts);
    assert_eq!(ops.len() as u64, opts.ops);
    let ctx = format!("{opts:?}\n{s:?}");
    assert!((s.write_ratio() - opts.write_ratio).abs() < 0.01, "write ratio {}\n{ctx}", s.write_ratio());
    assert!(
        (s.avg_write_blocks() - opts.avg_write_blocks).abs() < 0.05 * opts.avg_write_blocks,
        "avg write {}\n{ctx}",
        s.avg_write_blocks()
    );
    assert!(
        (s.long_cw_ratio() - opts.long_cw_ratio).abs() < 0.02,
        "long-CW ratio {}\n{ctx}",
        s.long_cw_ratio()
    );
    if s.reads_associated > 2000 {
        assert!(
            (s.read_at_cw_start_ratio() - opts.read_at_cw_start).abs() < 0.02,
            "reads at CW start {}\n{ctx}",
            s.read_at_cw_start_ratio()
        );
        assert!(
            (s.read_within_4_ratio() - opts.read_near_cw_start).abs() < 0.02,
            "reads within 4 blocks {}\n{ctx}",
            s.read_within_4_ratio()
        );
        assert!(
            (s.read_beyond_10_ratio() - opts.read_far_cw_start).abs() < 0.005,
            "reads 10+ blocks in {}\n{ctx}",
            s.read_beyond_10_ratio()
        );
        // Reads are of written data: nearly every read is associated with a CW.
        assert!(s.reads_associated as f64 > 0.9 * s.reads as f64, "{ctx}");
    }
    assert_eq!(s.volumes, opts.volumes as u64);
    let max_block = ops.iter().filter(|o| o.is_write()).map(|o| o.last_block).max().unwrap();
    assert!(max_block < opts.working_set_blocks);
    assert!(
        ops.iter().all(|o| o.first_block <= o.last_block && o.blocks() <= opts.max_write_blocks.max(1 << 20))
    );
}

#[test]
fn default_statistics_match_the_paper() {
    for_each_seed(|seed| {
        check(&SyntheticOptions {
            seed,
            ops: 200_000 * scale(),
            write_ratio: 0.7,
            ..SyntheticOptions::default()
        })
    });
}

#[test]
fn published_long_cw_range_is_reachable() {
    for_each_seed(|seed| {
        for long_cw_ratio in [0.65, 0.815] {
            check(&SyntheticOptions {
                seed,
                ops: 100_000 * scale(),
                long_cw_ratio,
                write_ratio: 0.6,
                ..SyntheticOptions::default()
            });
        }
    });
}

#[test]
fn other_parameters_are_honoured() {
    for_each_seed(|seed| {
        check(&SyntheticOptions {
            seed,
            ops: 100_000 * scale(),
            volumes: 2,
            write_ratio: 0.5,
            avg_write_blocks: 8.0,
            long_cw_ratio: 0.4,
            avg_cw_writes: 3.0,
            cw_window_writes: 20,
            read_at_cw_start: 0.7,
            read_near_cw_start: 0.9,
            read_far_cw_start: 0.05,
            working_set_blocks: 1 << 16,
            ..SyntheticOptions::default()
        });
    });
}

#[test]
fn write_and_read_heavy_presets() {
    let (_, s) = measure(&SyntheticOptions { ops: 50_000, ..SyntheticOptions::write_heavy() });
    assert!((s.write_ratio() - 0.9).abs() < 0.01);
    let (_, s) = measure(&SyntheticOptions { ops: 50_000, ..SyntheticOptions::read_heavy() });
    assert!((s.write_ratio() - 0.04).abs() < 0.01);
}

#[test]
fn writes_overlap_so_indexes_see_overwrites() {
    let (ops, _) = measure(&SyntheticOptions { ops: 100_000, ..SyntheticOptions::default() });
    for vol in split_by_volume(ops) {
        let mut seen = std::collections::HashSet::new();
        let mut overwritten = 0u64;
        let mut written = 0u64;
        for op in vol.iter().filter(|o| o.is_write()) {
            for b in op.first_block..=op.last_block {
                written += 1;
                if !seen.insert(b) {
                    overwritten += 1;
                }
            }
        }
        assert!(overwritten * 100 > written, "only {overwritten} of {written} block writes overwrite");
    }
}

/// Share of a trace's writes that repeat an earlier write of their volume block for block.
fn exact_repeat_share(ops: &[BlockOp]) -> f64 {
    let mut seen = std::collections::HashSet::new();
    let (mut writes, mut repeats) = (0u64, 0u64);
    for op in ops.iter().filter(|o| o.is_write()) {
        writes += 1;
        if !seen.insert((op.volume, op.first_block, op.last_block)) {
            repeats += 1;
        }
    }
    repeats as f64 / writes as f64
}

/// Rewrites in place: `rewrite_fraction` of the single writes repeat an earlier single write exactly, and the
/// published statistics still hold (a rewrite repeats a length drawn from the same distribution, and it stays a
/// single write).
#[test]
fn rewrites_in_place_repeat_earlier_single_writes() {
    for_each_seed(|seed| {
        let base = SyntheticOptions {
            seed,
            ops: 100_000 * scale(),
            write_ratio: 0.9,
            ..SyntheticOptions::default()
        };
        let (ops, _) = measure(&base);
        let none = exact_repeat_share(&ops);
        assert!(none < 0.01, "{none} of the writes repeat one without rewrites");
        for f in [0.3, 0.8] {
            let opts = SyntheticOptions { rewrite_fraction: f, ..base.clone() };
            check(&opts);
            let (ops, _) = measure(&opts);
            let want = (1.0 - opts.long_cw_ratio) * f;
            let got = exact_repeat_share(&ops) - none;
            assert!(
                (got - want).abs() < 0.015,
                "rewrite_fraction {f}: {got} of the writes repeat, want {want}"
            );
        }
    });
}

/// The range-length sweep: averages up to the write cap are met exactly, the cap notwithstanding.
#[test]
fn long_average_writes_under_a_cap() {
    for (avg, cap) in [(100.0, 128u64), (1000.0, 1024), (50.0, 4096)] {
        let opts = SyntheticOptions {
            ops: 40_000,
            write_ratio: 1.0,
            avg_write_blocks: avg,
            max_write_blocks: cap,
            working_set_blocks: cap * 36 * 4,
            ..SyntheticOptions::default()
        };
        let (_, s) = measure(&opts);
        assert!(
            (s.avg_write_blocks() - avg).abs() < 0.03 * avg,
            "avg {avg} cap {cap}: {}",
            s.avg_write_blocks()
        );
    }
}

/// Regression: a long CW of maximal writes in a small working set must not underflow the placement range.
#[test]
fn long_writes_in_the_smallest_working_set() {
    let opts = SyntheticOptions {
        ops: 20_000,
        avg_write_blocks: 200.0,
        max_write_blocks: 256,
        avg_cw_writes: 30.0,
        long_cw_ratio: 1.0,
        working_set_blocks: 256 * 36,
        ..SyntheticOptions::default()
    };
    for op in SyntheticTrace::new(opts.clone()).unwrap() {
        assert!(op.first_block <= op.last_block);
        if op.is_write() {
            assert!(op.last_block < opts.working_set_blocks, "{op:?}");
        }
    }
}

#[test]
fn same_seed_same_trace() {
    let opts = SyntheticOptions { ops: 20_000, seed: 11, ..SyntheticOptions::default() };
    let a: Vec<BlockOp> = SyntheticTrace::new(opts.clone()).unwrap().collect();
    let b: Vec<BlockOp> = SyntheticTrace::new(opts.clone()).unwrap().collect();
    assert_eq!(a, b);
    let c: Vec<BlockOp> = SyntheticTrace::new(SyntheticOptions { seed: 12, ..opts }).unwrap().collect();
    assert_ne!(a, c);
}

#[test]
fn round_trip_through_every_format() {
    let opts = SyntheticOptions { ops: 5_000, seed: 3, ..SyntheticOptions::default() };
    let names = opts.volume_names();
    let ops: Vec<BlockOp> = SyntheticTrace::new(opts).unwrap().collect();
    for format in TraceFormat::ALL {
        for block_size in [4096u64, 512] {
            let mut buf = Vec::new();
            let n = write_trace(&mut buf, format, block_size, &names, ops.iter().copied()).unwrap();
            assert_eq!(n as usize, ops.len());
            let mut ropts = TraceOptions::new(format);
            ropts.block_size = block_size;
            ropts.strict = true;
            let mut r = TraceReader::from_reader(Cursor::new(buf), ropts).unwrap();
            let back: Vec<BlockOp> = r.by_ref().map(|o| o.unwrap()).collect();
            assert_eq!(back.len(), ops.len());
            for (a, b) in ops.iter().zip(&back) {
                assert_eq!((a.kind, a.first_block, a.last_block), (b.kind, b.first_block, b.last_block));
                let name_back = r.volumes().name(b.volume);
                let name = names.name(a.volume);
                match format {
                    TraceFormat::Msr => assert_eq!(name_back, format!("{name}_0")),
                    _ => assert_eq!(name_back, name),
                }
            }
        }
    }
    let mut sink = Vec::new();
    assert!(write_trace(&mut sink, TraceFormat::Tencent, 1000, &names, ops.iter().copied()).is_err());
}

#[test]
fn invalid_options_are_rejected() {
    let bad = [
        SyntheticOptions { volumes: 0, ..SyntheticOptions::default() },
        SyntheticOptions { write_ratio: 1.5, ..SyntheticOptions::default() },
        SyntheticOptions { avg_write_blocks: 0.5, ..SyntheticOptions::default() },
        SyntheticOptions { avg_cw_writes: 1.0, ..SyntheticOptions::default() },
        SyntheticOptions { read_at_cw_start: 0.9, read_near_cw_start: 0.8, ..SyntheticOptions::default() },
        SyntheticOptions { working_set_blocks: 100, ..SyntheticOptions::default() },
        SyntheticOptions { working_set_blocks: 256 * 36 - 1, ..SyntheticOptions::default() },
        SyntheticOptions { cw_window_writes: 0, ..SyntheticOptions::default() },
        SyntheticOptions { read_near_cw_start: 0.99, read_far_cw_start: 0.02, ..SyntheticOptions::default() },
        SyntheticOptions { avg_write_blocks: f64::NAN, ..SyntheticOptions::default() },
        SyntheticOptions { rewrite_fraction: 1.0, ..SyntheticOptions::default() },
        SyntheticOptions { rewrite_fraction: -0.1, ..SyntheticOptions::default() },
    ];
    for opts in bad {
        assert!(SyntheticTrace::new(opts.clone()).is_err(), "{opts:?}");
    }
}

#[test]
fn trace_source_reads_files_and_synthetic_traces_alike() {
    use workloads::traces::TraceSource;
    let opts = SyntheticOptions { ops: 3000, seed: 5, ..SyntheticOptions::default() };
    let direct: Vec<BlockOp> = SyntheticTrace::new(opts.clone()).unwrap().collect();
    let src = TraceSource::synthetic(opts.clone(), None).unwrap();
    assert_eq!(src.volumes().len(), 4);
    assert!(src.read_stats().is_none());
    let via: Vec<BlockOp> = src.map(|o| o.unwrap()).collect();
    assert_eq!(via, direct);
    let only: Vec<BlockOp> =
        TraceSource::synthetic(opts.clone(), Some("2")).unwrap().map(|o| o.unwrap()).collect();
    assert_eq!(only, direct.iter().filter(|o| o.volume == 2).copied().collect::<Vec<_>>());
    assert!(TraceSource::synthetic(opts.clone(), Some("9")).is_err());
    // The same trace through a file.
    let dir = std::env::temp_dir().join(format!("rangedb-source-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.csv");
    let mut f = std::fs::File::create(&path).unwrap();
    write_trace(&mut f, TraceFormat::Alibaba, 4096, &opts.volume_names(), direct.iter().copied()).unwrap();
    drop(f);
    let src = TraceSource::open(&path, TraceOptions::new(TraceFormat::Alibaba)).unwrap();
    let from_file: Vec<BlockOp> = src.map(|o| o.unwrap()).collect();
    assert_eq!(from_file.len(), direct.len());
    assert!(
        from_file
            .iter()
            .zip(&direct)
            .all(|(a, b)| (a.kind, a.first_block, a.last_block) == (b.kind, b.first_block, b.last_block))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The synthetic trace of a seed is part of the crate's contract (benchmarks name traces by seed): pin it.
#[test]
fn synthetic_fingerprint_is_stable() {
    let opts = SyntheticOptions { ops: 2000, ..SyntheticOptions::default() };
    let mut h = 0u64;
    for op in SyntheticTrace::new(opts).unwrap() {
        let kind = u64::from(op.is_write());
        h = workloads::rng::mix64(
            h ^ kind ^ (op.volume as u64).rotate_left(9) ^ op.first_block.rotate_left(17),
        ) ^ op.last_block;
    }
    assert_eq!(h, SYNTHETIC_FINGERPRINT, "the default synthetic trace changed: {h:#x}");
}

const SYNTHETIC_FINGERPRINT: u64 = 0x3847_6321_928b_1dfc;
