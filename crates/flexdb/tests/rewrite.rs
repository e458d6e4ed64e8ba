//! Defragmentation (`Options::defrag`): in-place updates split an interval into one FlexFile extent per updated
//! record; the committer rewrites such an interval as one run when its rule says so, and the data stays exact.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use flexdb::{Db, Defrag, Options, WriteOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Loads 2,000 keys in order, then updates random ones over many commits; returns the store's extents per
/// interval after checking every pair against the model.
fn extents_per_interval(defrag: Defrag) -> f64 {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let opts = Options {
        create_if_missing: true,
        memtable_bytes: 8 << 10,
        interval_max_keys: 8,
        defrag,
        ..Options::default()
    };
    let db = Db::open(fs, Path::new("db"), opts).unwrap();
    let mut model = BTreeMap::new();
    let mut rng = SmallRng::seed_from_u64(5);
    let w = WriteOptions::default();
    for i in 0..2000u32 {
        let (k, v) = (format!("k{i:06}").into_bytes(), vec![i as u8; 40]);
        db.put(&k, &v, w).unwrap();
        model.insert(k, v);
    }
    for j in 0..6000u32 {
        let k = format!("k{:06}", rng.random_range(0..2000u32)).into_bytes();
        let v = vec![j as u8; rng.random_range(20..60)];
        db.put(&k, &v, w).unwrap();
        model.insert(k, v);
    }
    db.flush().unwrap();
    db.check(true).unwrap();
    let got: BTreeMap<Vec<u8>, Vec<u8>> =
        db.scan(b"", None, usize::MAX, false).unwrap().into_iter().collect();
    assert_eq!(got, model);
    let s = db.stats();
    s.table_extents as f64 / s.intervals as f64
}

#[test]
fn rewriting_fragmented_intervals_keeps_them_contiguous_and_exact() {
    let in_place = extents_per_interval(Defrag::Never);
    let bounded = extents_per_interval(Defrag::Extents(2));
    let half = extents_per_interval(Defrag::HalfRecords);
    // Three updates per key on average leave most intervals in pieces when updated in place.
    assert!(in_place > 4.0, "in-place updates left {in_place:.2} extents per interval");
    assert!(bounded <= 2.5, "a bound of 2 left {bounded:.2} extents per interval");
    // Intervals hold at most 8 records, so the reference's rule keeps them at about 4 extents or fewer.
    assert!(half <= 4.5 && half < in_place, "the reference's rule left {half:.2} extents per interval");
}
