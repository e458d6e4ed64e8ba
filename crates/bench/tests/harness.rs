//! The harness measured against known answers: exact allocation counts, the JSON shape of the bench-json spec, and
//! a full run of the `machine` experiment at its smallest size.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use bench::alloc::{self, CountingAlloc};
use bench::{Ctx, Report, experiments};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[test]
fn allocator_counts_a_known_allocation_exactly() {
    assert!(alloc::installed());
    // Other test threads may allocate concurrently, so retry until a clean window is observed.
    let mut exact = false;
    for _ in 0..100 {
        let (v, bytes) = alloc::measure(|| std::hint::black_box(Vec::<u8>::with_capacity(1 << 20)));
        if bytes == 1 << 20 {
            exact = true;
            let before = alloc::live_bytes();
            drop(v);
            assert!(alloc::live_bytes() <= before - (1 << 20) + 4096);
            break;
        }
    }
    assert!(exact, "never measured exactly 1 MiB for a 1 MiB allocation");
}

#[test]
fn json_matches_the_spec() {
    let mut r = Report::new("rask", true);
    r.workload("ebs-write-heavy", serde_json::json!({"ops": 1000}));
    r.row("ebs-write-heavy", "rask", [("ops_per_sec", 1.9e6), ("p99_ns", 900.0), ("memory_bytes", 5e7)]);
    r.row("ebs-write-heavy", "btreemap-per-block", [("ops_per_sec", 4.1e5)]);
    let text = serde_json::to_string(&r.to_json()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["experiment"], "rask");
    assert_eq!(v["quick"], true);
    assert!(v["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(v["machine"]["memory_bytes"].as_u64().unwrap() > 0);
    assert!(v["machine"]["rustc"].as_str().unwrap().starts_with("1."));
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["workload"], "ebs-write-heavy");
    assert_eq!(results[0]["system"], "rask");
    assert_eq!(results[0]["metrics"]["ops_per_sec"], 1.9e6);
    for row in results {
        for key in row["metrics"].as_object().unwrap().keys() {
            assert!(key.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'), "{key}");
        }
    }
    assert_eq!(v["workloads"]["ebs-write-heavy"]["ops"], 1000);
    let ratio = &v["ratios"][0];
    assert_eq!(
        (ratio["system"].as_str(), ratio["peer"].as_str()),
        (Some("rask"), Some("btreemap-per-block"))
    );
    assert!((ratio["ratio"].as_f64().unwrap() - 1.9e6 / 4.1e5).abs() < 1e-9);
}

#[test]
fn machine_experiment_reports_the_four_limits() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctx = Ctx::for_tests(dir.path().join("scratch"));
    for (k, v) in
        [("scan_log2_bytes", "22"), ("scan_trials", "1"), ("disk_bytes", "4194304"), ("fsyncs", "5")]
    {
        ctx.set.insert(k.into(), v.into());
    }
    let report = experiments::find("machine").unwrap().run(&ctx).unwrap();
    for (w, m) in [
        ("scan-test", "seq_read_bytes_per_sec"),
        ("scan-test", "random_line_ns"),
        ("scan-test", "affine_alpha_ratio"),
        ("pointer-chase", "random_line_latency_ns"),
        ("disk-seq-write", "write_bytes_per_sec"),
        ("fsync", "p99_ns"),
    ] {
        let v = report.get(w, "machine", m).unwrap_or_else(|| panic!("{w}/{m} missing"));
        assert!(v.is_finite() && v > 0.0, "{w}/{m} = {v}");
    }
    let out = dir.path().join("report");
    report.write_markdown(&out).unwrap();
    let md = std::fs::read_to_string(out.join("machine.md")).unwrap();
    assert!(md.contains("machine-1.png"));
    let png = std::fs::read(out.join("machine-1.png")).unwrap();
    assert_eq!(&png[..4], b"\x89PNG");
}

/// `gloran` with `--set reps=2`: the systems take turns, each metric is reported once per workload and system (the
/// median of the turns), and the notes give the targets' ratios per turn.
#[test]
fn gloran_reports_medians_and_per_turn_ratios_over_turns() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctx = Ctx::for_tests(dir.path().join("scratch"));
    for (k, v) in
        [("n", "3000"), ("ops", "2000"), ("kv", "false"), ("systems", "lsm-gloran,lsm-local"), ("reps", "2")]
    {
        ctx.set.insert(k.into(), v.into());
    }
    let report = experiments::find("gloran").unwrap().run(&ctx).unwrap();
    for w in ["balanced-rd0", "balanced-rd10", "scan-100", "space"] {
        for s in ["lsm-gloran", "lsm-local"] {
            let m = if w == "space" { "disk_bytes" } else { "ops_per_sec" };
            let v = report.get(w, s, m).unwrap_or_else(|| panic!("{w}/{s}/{m} missing"));
            assert!(v.is_finite() && v > 0.0, "{w}/{s}/{m} = {v}");
        }
    }
    let json = report.to_json();
    let rows = json["results"].as_array().unwrap();
    let n = |w: &str, s: &str| rows.iter().filter(|r| r["workload"] == w && r["system"] == s).count();
    assert_eq!(n("balanced-rd10", "lsm-gloran"), 1, "one row per workload and system, not one per turn");
    let notes = json["notes"].as_array().unwrap();
    let turn = |prefix: &str| notes.iter().filter_map(|x| x.as_str()).any(|x| x.starts_with(prefix));
    assert!(turn("per turn, balanced-rd10: lsm-gloran / lsm-local throughput"), "{notes:?}");
    assert!(turn("per turn, lsm-gloran lookup latency with 1% range deletes against 0%"), "{notes:?}");
}
