//! Tests of the R-tree buffer: random inserts against brute force, kept rectangles, probes outside the prefix.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;

#[test]
fn random_inserts_keep_the_tree_valid_and_queries_exact() {
    let mut rng = SmallRng::seed_from_u64(5);
    let mut t = RTree::new();
    let mut all = Vec::new();
    for i in 0..2000u64 {
        let a: u32 = rng.random_range(0..10_000);
        let len: u32 = rng.random_range(1..300);
        // Long shared prefixes: the heuristics see equal projections, answers must stay exact.
        let key = |x: u32| {
            let mut k = b"tenant-7/".to_vec();
            k.extend_from_slice(&x.to_be_bytes());
            k
        };
        let min = if rng.random_bool(0.3) { rng.random_range(0..i + 1) } else { 0 };
        let area = Area::record(&key(a), &key(a + len), min, i + 1);
        t.insert(area.clone());
        all.push(area);
        if i % 97 == 0 {
            t.check().unwrap();
        }
    }
    t.check().unwrap();
    assert!(t.height() >= 3, "2000 entries with fan-out 16 need at least three levels");
    assert_eq!(t.len(), all.len());
    for _ in 0..2000 {
        let mut k = b"tenant-7/".to_vec();
        k.extend_from_slice(&rng.random_range(0u32..10_400).to_be_bytes());
        let e = rng.random_range(0..2001);
        let s = rng.random_range(0..2100);
        let want = all.iter().any(|a| a.covers(&k, e) && a.seq <= s);
        let mut v = 0;
        let got = t.covering(&k, e, s, &mut v);
        assert_eq!(got.is_some(), want);
        if let Some(d) = got {
            assert!(d <= s && d > e);
        }
        // The span query agrees with a brute-force search for one area covering the whole band.
        let (lo, hi) = (e.saturating_sub(rng.random_range(0..400)), e);
        let want = all.iter().any(|a| a.seq <= s && a.covers(&k, lo) && a.covers(&k, hi));
        let got = t.covering_span(&k, lo, hi, s, &mut v);
        assert_eq!(got.is_some(), want, "span [{lo}, {hi}] at {s}");
        if let Some(d) = got {
            assert!(d <= s && d > hi);
        }
        assert_eq!(t.covering_span(&k, hi + 1, hi, s, &mut v), None, "an empty band is never covered");
    }
    let mut taken = t.take();
    taken.sort_by(Area::order);
    all.sort_by(Area::order);
    assert_eq!(taken, all);
    assert!(t.is_empty());
}

#[test]
fn kept_rectangles_follow_inserts_splits_and_a_new_skip() {
    let mut rng = SmallRng::seed_from_u64(9);
    let key = |x: u32| format!("tenant-7/{x:08}").into_bytes();
    let mut t = RTree::new();
    let mut all = Vec::new();
    for i in 0..1500u64 {
        let a: u32 = rng.random_range(0..1_000_000);
        let area = Area::record(&key(a), &key(a + rng.random_range(1..500)), 0, i + 1);
        t.insert(area.clone());
        all.push(area);
    }
    t.check().unwrap();
    // The common prefix learned later: every rectangle is projected again past it.
    t.reskip(b"tenant-7/".len());
    t.check().unwrap();
    assert_eq!(t.len(), all.len());
    let check_probes = |t: &RTree, all: &[Area], rng: &mut SmallRng| {
        for i in 0..600 {
            // Keys outside the common prefix, shorter than it, and at the bounds themselves as well.
            let k = match i % 6 {
                0 => b"tenant-".to_vec(),
                1 => format!("tenant-8/{:08}", rng.random_range(0..1_000_500)).into_bytes(),
                2 => all[rng.random_range(0..all.len())].start.clone(),
                3 => all[rng.random_range(0..all.len())].end.clone(),
                _ => key(rng.random_range(0..1_000_500)),
            };
            let e = rng.random_range(0..1502);
            let mut v = 0;
            let want = all.iter().any(|a| a.covers(&k, e));
            assert_eq!(t.covering(&k, e, u64::MAX, &mut v).is_some(), want, "{k:?} at {e}");
            let lo = e.saturating_sub(rng.random_range(0..100));
            let want = all.iter().any(|a| a.covers(&k, lo) && a.covers(&k, e));
            assert_eq!(t.covering_span(&k, lo, e, u64::MAX, &mut v).is_some(), want, "{k:?} [{lo}, {e}]");
        }
    };
    check_probes(&t, &all, &mut rng);
    // An area outside the prefix: the projected filter no longer applies, answers stay exact.
    let odd = Area::record(b"tenant-8/", b"tenant-8/00000500", 0, 1501);
    t.insert(odd.clone());
    all.push(odd);
    t.check().unwrap();
    check_probes(&t, &all, &mut rng);
}

#[test]
fn split_keeps_parallel_arrays_parallel_and_both_groups_filled() {
    let mut rng = SmallRng::seed_from_u64(11);
    for _ in 0..200 {
        let n = MAX_ENTRIES + 1;
        let rects: Vec<Rect> = (0..n)
            .map(|_| {
                let x0 = rng.random_range(0.0..1e6);
                let y0 = rng.random_range(0.0..1e3);
                Rect { x0, x1: x0 + rng.random_range(1.0..1e4), y0, y1: y0 + rng.random_range(1.0..1e2) }
            })
            .collect();
        let second = quadratic_split(&rects);
        let moved = second[..n].iter().filter(|m| **m).count();
        assert!(moved >= MIN_ENTRIES && n - moved >= MIN_ENTRIES, "{moved} of {n} moved");
        assert!(second[n..].iter().all(|m| !m));
        // Element i of every array is (i, rects[i]): after the split each array must hold the same pairs.
        let mut ids: Vec<usize> = (0..n).collect();
        let mut rs = rects.clone();
        let (ids2, rs2) = (split_off_marked(&mut ids, &second), split_off_marked(&mut rs, &second));
        for (id, r) in ids.iter().zip(&rs).chain(ids2.iter().zip(&rs2)) {
            assert_eq!(rects[*id], *r);
        }
        assert!(ids2.iter().all(|i| second[*i]) && ids.iter().all(|i| !second[*i]));
        assert_eq!(ids.len() + ids2.len(), n);
        assert!(ids2.capacity() > MAX_ENTRIES, "the new node has room for its overflow entry");
    }
}
