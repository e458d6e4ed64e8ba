//! A model test of reads that stop between capturing what they read and reading it, against a `BTreeMap`.
//!
//! Random writes, range deletes, flushes, compactions (each bottommost, so each plans a GC of the global index)
//! and snapshots run here while up to a dozen reads wait, paused right after their capture, and long-lived
//! iterators stay open; each read is let go at a random later step and must return what the model held at its
//! snapshot. A read without a registered snapshot may start over at a later state (the engine retries it when
//! the range index changed under it), so any state from its start to its release is accepted. This is where GC
//! bookkeeping bugs show: a GC that runs while a read still holds a version it cannot see past returns deleted
//! values (`regression_gc_waits_for_*` in `tests.rs`); the threaded tests find them only under heavy load.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::tests::start_paused;
use super::*;
use crate::db_iter::DbIter;
use crate::rangedel_global::GlobalRangeDeletes;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// What a read returned, or must return: one key's value, or every entry.
#[derive(Debug, PartialEq)]
enum Got {
    Value(Option<Vec<u8>>),
    All(Vec<(Vec<u8>, Vec<u8>)>),
}

/// What `model` makes a read of `key` (or a scan, for `None`) return.
fn expect(model: &Model, key: &Option<Vec<u8>>) -> Got {
    match key {
        Some(k) => Got::Value(model.get(k).cloned()),
        None => Got::All(model.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
    }
}

/// A read stopped after its capture.
struct Paused {
    go: Sender<()>,
    handle: JoinHandle<Got>,
    key: Option<Vec<u8>>,
    /// The states it may return: its snapshot's, or with no registered snapshot every state since it began.
    states: Vec<Model>,
    implicit: bool,
    what: String,
}

fn key(rng: &mut SmallRng) -> Vec<u8> {
    format!("k{:02}", rng.random_range(0..24)).into_bytes()
}

fn run(seed: u64, global: bool, steps: usize) {
    let mut rng = SmallRng::seed_from_u64(seed ^ u64::from(global));
    // Query-driven rewrites too: a paused scan with both bounds may plan one.
    let mode = [
        crate::RangeReduceMode::Off,
        crate::RangeReduceMode::BlindMergeOnScan,
        crate::RangeReduceMode::FileSizeAwareMergeOnScan,
        crate::RangeReduceMode::BoundedMerge,
    ][rng.random_range(0..4)];
    let strategy: Arc<dyn crate::rangedel::RangeDeleteStrategy> = if global {
        Arc::new(GlobalRangeDeletes::with_options(gloran::IndexOptions {
            buffer_bytes: rng.random_range(128..1024),
            node_size: 256,
            ..Default::default()
        }))
    } else {
        Arc::new(crate::rangedel::LocalTombstones)
    };
    let mut opts = Options {
        create_if_missing: true,
        write_buffer_size: rng.random_range(1024..4096),
        max_bytes_for_level_base: 8192,
        target_file_size_base: 2048,
        level0_file_num_compaction_trigger: 2,
        range_delete_strategy: strategy,
        ..Options::default()
    };
    opts.range_reduce.mode = mode;
    let db = Arc::new(Db::open(Arc::new(vfs::MemFs::new()), "/db", opts).unwrap());
    let w = WriteOptions::default();
    let mut model = Model::new();
    let mut snaps: Vec<(Arc<Snapshot>, Model)> = Vec::new();
    let mut paused: Vec<Paused> = Vec::new();
    let mut iters: Vec<(DbIter, Model)> = Vec::new();
    let ctx = |step: usize| format!("seed {seed}, global {global}, {mode:?}, step {step}");
    for step in 0..steps {
        match rng.random_range(0..100) {
            0..30 => {
                let (k, v) = (key(&mut rng), format!("v{step}").into_bytes());
                db.put(&w, &k, &v).unwrap();
                model.insert(k, v);
            }
            30..38 => {
                let (a, b) = (key(&mut rng), key(&mut rng));
                let (a, b) = if a <= b { (a, b) } else { (b, a) };
                db.delete_range(&w, &a, &b).unwrap();
                let gone: Vec<_> = model.range(a.clone()..b.clone()).map(|(k, _)| k.clone()).collect();
                for k in gone {
                    model.remove(&k);
                }
            }
            38..42 => {
                let k = key(&mut rng);
                db.delete(&w, &k).unwrap();
                model.remove(&k);
            }
            42..48 => {
                db.flush().unwrap();
            }
            48..55 => {
                db.compact_range(None, None).unwrap();
            }
            55..60 => {
                if snaps.len() >= 4 {
                    snaps.swap_remove(rng.random_range(0..snaps.len()));
                }
                snaps.push((Arc::new(db.snapshot()), model.clone()));
            }
            60..78 if paused.len() < 12 => {
                let key = rng.random_bool(0.7).then(|| key(&mut rng));
                let snap =
                    (rng.random_bool(0.6) && !snaps.is_empty()).then(|| rng.random_range(0..snaps.len()));
                let (states, at) = match snap {
                    Some(i) => (vec![snaps[i].1.clone()], Some(snaps[i].0.clone())),
                    None => (vec![model.clone()], None),
                };
                let k = key.clone();
                let (go, handle) = start_paused(&db, move |db| {
                    let ro = ReadOptions { snapshot: at.as_deref(), ..Default::default() };
                    match &k {
                        Some(k) => Got::Value(db.get_opt(&ro, k).unwrap()),
                        None => Got::All(db.scan(&ro, b"", b"l", usize::MAX).unwrap()),
                    }
                });
                paused.push(Paused { go, handle, key, states, implicit: snap.is_none(), what: ctx(step) });
            }
            78..92 if !paused.is_empty() => {
                let p = paused.swap_remove(rng.random_range(0..paused.len()));
                finish(p);
            }
            92..96 if iters.len() < 3 => {
                iters.push((db.iter(&ReadOptions::default()).unwrap(), model.clone()));
            }
            96..100 if !iters.is_empty() => {
                let (mut it, want) = iters.swap_remove(rng.random_range(0..iters.len()));
                it.seek_to_first();
                let mut got = Vec::new();
                while it.valid() {
                    got.push((it.key().to_vec(), it.value().to_vec()));
                    it.next();
                }
                it.status().unwrap();
                assert_eq!(Got::All(got), expect(&want, &None), "{}: a long-lived iterator", ctx(step));
            }
            _ => {}
        }
        for p in paused.iter_mut().filter(|p| p.implicit) {
            if p.states.last() != Some(&model) {
                p.states.push(model.clone());
            }
        }
    }
    for p in paused {
        finish(p);
    }
    assert_eq!(db.check_range_deletes().unwrap(), global);
    assert_eq!(
        expect(&model, &None),
        Got::All(db.scan(&ReadOptions::default(), b"", b"l", usize::MAX).unwrap())
    );
}

/// Lets `p` read on and checks what it returned.
fn finish(p: Paused) {
    p.go.send(()).unwrap();
    let got = p.handle.join().unwrap();
    assert!(
        p.states.iter().any(|m| expect(m, &p.key) == got),
        "{}: a read of {:?} returned {got:?}; its states: {:?}",
        p.what,
        p.key.as_deref().map(String::from_utf8_lossy),
        p.states.iter().map(|m| expect(m, &p.key)).collect::<Vec<_>>()
    );
}

#[test]
fn paused_reads_return_their_snapshots_state() {
    let steps = 1500 * testkit::scale();
    for seed in testkit::seeds(&[1, 2, 3]) {
        for global in [true, false] {
            run(seed, global, steps);
        }
    }
}
