use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::commit::{EDIT_BYTES, Edit, plan_edits};
use super::*;

fn rec(k: &str, v: &str) -> Rec {
    (k.as_bytes().into(), v.as_bytes().into())
}

fn encode_all<K: AsRef<[u8]>, V: AsRef<[u8]>>(recs: &[(K, V)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in recs {
        record::encode(&mut out, k.as_ref(), v.as_ref());
    }
    out
}

fn owned(recs: &[RecRef<'_>]) -> Vec<Rec> {
    recs.iter().map(|&(k, v)| (k.into(), v.into())).collect()
}

/// Applies `edits` to `bytes` the way `apply_group` applies them to the file.
fn apply(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    let mut delta = 0i64;
    for e in edits {
        let at = (e.old_off as i64 + delta) as usize;
        bytes.splice(at..at + e.old_len as usize, e.new.iter().copied());
        delta += e.new.len() as i64 - e.old_len as i64;
    }
    bytes
}

fn put(v: &str) -> MemValue {
    MemValue::Put(v.as_bytes().into())
}

#[test]
fn appended_keys_become_one_insert() {
    let old = vec![rec("a", "1"), rec("b", "2")];
    let (c, d, e) = (put("3"), put("4"), put("5"));
    let group: Vec<(&[u8], &MemValue)> = vec![(b"c", &c), (b"d", &d), (b"e", &e)];
    let before = encode_all(&old);
    let iv = Interval::from_recs(&old);
    let (recs, edits, removed) = plan_edits(&iv, &group);
    assert_eq!(edits.len(), 1);
    assert_eq!((edits[0].old_off, edits[0].old_len), (before.len() as u64, 0));
    assert!(!removed);
    assert_eq!(apply(before, &edits), encode_all(&recs));
    assert_eq!(recs.len(), 5);
}

#[test]
fn a_long_run_of_new_keys_is_cut_into_bounded_edits() {
    let old = vec![rec("a", "1")];
    let value = "v".repeat(1000);
    let vals: Vec<MemValue> = (0..200).map(|_| put(&value)).collect();
    let keys: Vec<String> = (0..200).map(|i| format!("k{i:04}")).collect();
    let group: Vec<(&[u8], &MemValue)> = keys.iter().map(|k| k.as_bytes()).zip(&vals).collect();
    let before = encode_all(&old);
    let iv = Interval::from_recs(&old);
    let (recs, edits, _) = plan_edits(&iv, &group);
    assert!(edits.len() >= 3, "200 KB of new records in {} edits", edits.len());
    assert!(edits.iter().all(|e| e.new.len() < EDIT_BYTES + 1100));
    assert_eq!(apply(before, &edits), encode_all(&recs));
}

#[test]
fn adjacent_updates_coalesce_and_gaps_split_edits() {
    let old = vec![rec("a", "1"), rec("b", "2"), rec("c", "3"), rec("d", "4")];
    let (x, same, del) = (put("xx"), put("3"), MemValue::Delete);
    // a and b change (one edit), c is rewritten with its own value (no edit), d is deleted (a second edit).
    let group: Vec<(&[u8], &MemValue)> = vec![(b"a", &x), (b"b", &x), (b"c", &same), (b"d", &del)];
    let before = encode_all(&old);
    let iv = Interval::from_recs(&old);
    let (recs, edits, removed) = plan_edits(&iv, &group);
    assert_eq!(edits.len(), 2);
    assert_eq!(edits[0].old_off, 0);
    assert!(edits[1].new.is_empty());
    assert!(removed);
    assert_eq!(owned(&recs), vec![rec("a", "xx"), rec("b", "xx"), rec("c", "3")]);
    assert_eq!(apply(before, &edits), encode_all(&recs));
}

#[test]
fn deleting_an_absent_key_changes_nothing() {
    let old = vec![rec("a", "1")];
    let del = MemValue::Delete;
    let group: Vec<(&[u8], &MemValue)> = vec![(b"b", &del)];
    let iv = Interval::from_recs(&old);
    let (recs, edits, removed) = plan_edits(&iv, &group);
    assert!(edits.is_empty());
    assert!(!removed);
    assert_eq!(owned(&recs), vec![rec("a", "1")]);
}

/// Random intervals and groups against a `BTreeMap` model: the edits turn the old bytes into the new records'
/// bytes, never overlap, and are never empty.
#[test]
fn edits_reproduce_the_merged_records() {
    let mut rng = SmallRng::seed_from_u64(7);
    for _ in 0..2000 {
        let mut model = std::collections::BTreeMap::new();
        for _ in 0..rng.random_range(0..10) {
            let k = format!("k{:02}", rng.random_range(0..30));
            model.insert(k, format!("v{}", rng.random_range(0..3)));
        }
        let old: Vec<Rec> = model.iter().map(|(k, v)| rec(k, v)).collect();
        let mut ops = std::collections::BTreeMap::new();
        for _ in 0..rng.random_range(0..10) {
            let k = format!("k{:02}", rng.random_range(0..30));
            let v = if rng.random_bool(0.3) {
                MemValue::Delete
            } else {
                MemValue::Put(format!("v{}", rng.random_range(0..3)).into_bytes().into())
            };
            ops.insert(k, v);
        }
        let group: Vec<(&[u8], &MemValue)> = ops.iter().map(|(k, v)| (k.as_bytes(), v)).collect();
        for (k, v) in &ops {
            match v {
                MemValue::Put(val) => model.insert(k.clone(), String::from_utf8(val.to_vec()).unwrap()),
                MemValue::Delete => model.remove(k),
            };
        }
        let before = encode_all(&old);
        let iv = Interval::from_recs(&old);
        let (recs, edits, _) = plan_edits(&iv, &group);
        let want: Vec<Rec> = model.iter().map(|(k, v)| rec(k, v)).collect();
        assert_eq!(owned(&recs), want);
        assert_eq!(apply(before, &edits), encode_all(&recs));
        for w in edits.windows(2) {
            let (end, next) = (w[0].old_off + w[0].old_len, w[1].old_off);
            assert!(end < next || (end == next && w[0].new.len() >= EDIT_BYTES), "edits overlap: {w:?}");
        }
        assert!(edits.iter().all(|e| e.old_len > 0 || !e.new.is_empty()));
    }
}
