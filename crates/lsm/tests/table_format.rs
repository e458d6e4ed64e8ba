//! Tables across format versions, and one table against a sorted model.
//!
//! `data/table-v1.sst` was written by the format-version-1 builder (index keys: each block's last key) from
//! `entries()` below, with 256-byte blocks. Version 2 keys the index by short separators between blocks; both
//! must read the same. Seed from `RANGEDB_SEED`; size from `RANGEDB_TEST_SCALE`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use lsm::block::{Block, BlockIter};
use lsm::cache::BlockCache;
use lsm::format::{self, FOOTER_LEN, Footer, Handle, TRAILER_LEN};
use lsm::ikey::{self, Kind};
use lsm::iter::InternalIter;
use lsm::table::{GetStats, Table, TableBuilder, TableOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use vfs::Fs;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// The fixture's entries: 120 user keys of 9 to 39 bytes, every tenth with a value over a point tombstone.
fn entries() -> Entries {
    let mut out = Vec::new();
    for i in 0..120u64 {
        let uk = format!("key-{i:04}-{}", "x".repeat((i % 7 * 5) as usize)).into_bytes();
        if i % 10 == 0 {
            out.push((ikey::make(&uk, 2000 + i, Kind::Value), format!("new {i}").into_bytes()));
            out.push((ikey::make(&uk, 1 + i, Kind::Delete), Vec::new()));
        } else {
            out.push((ikey::make(&uk, 1 + i, Kind::Value), format!("value {i} ").repeat(3).into_bytes()));
        }
    }
    out
}

fn build(fs: &vfs::MemFs, name: &str, entries: &Entries, block_size: usize) -> Arc<dyn vfs::File> {
    let f = fs.open(Path::new(name), vfs::OpenMode::CreateTruncate).unwrap();
    let mut b = TableBuilder::new(f.clone(), TableOptions { block_size, ..TableOptions::default() });
    for (k, v) in entries {
        b.add(k, v).unwrap();
    }
    b.finish().unwrap();
    f
}

fn open(f: Arc<dyn vfs::File>) -> Arc<Table> {
    let size = f.len().unwrap();
    Arc::new(Table::open(f, 1, "t", size, Arc::new(BlockCache::new(1 << 20))).unwrap())
}

fn footer(f: &dyn vfs::File) -> Footer {
    let size = f.len().unwrap();
    let mut b = [0u8; FOOTER_LEN];
    f.read_exact_at(&mut b, size - FOOTER_LEN as u64).unwrap();
    Footer::decode(&b).unwrap()
}

/// An index entry: its key, the last key of the block it points to, the first key of the next block.
type IndexEntry = (Vec<u8>, Vec<u8>, Option<Vec<u8>>);

/// The table's index entries, in order.
fn index_entries(f: &dyn vfs::File) -> Vec<IndexEntry> {
    let block = |h: Handle| {
        let mut buf = vec![0u8; h.size as usize + TRAILER_LEN];
        f.read_exact_at(&mut buf, h.offset).unwrap();
        BlockIter::new(Arc::new(Block::new(format::unwrap_block(buf).unwrap()).unwrap()), ikey::cmp)
    };
    let mut out = Vec::new();
    let mut it = block(footer(f).index);
    it.seek_to_first();
    while it.valid() {
        let mut data = block(Handle::decode(it.value()).unwrap());
        data.seek_to_last();
        out.push((it.key().to_vec(), data.key().to_vec(), None));
        data.seek_to_first();
        let first = data.key().to_vec();
        if let Some(prev) = out.len().checked_sub(2) {
            out[prev].2 = Some(first);
        }
        it.next();
    }
    out
}

/// Every entry in order, forwards and backwards.
fn scans(t: &Arc<Table>) -> (Entries, Entries) {
    let mut it = t.iter();
    let (mut fwd, mut back) = (Vec::new(), Vec::new());
    it.seek_to_first();
    while it.valid() {
        fwd.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.seek_to_last();
    while it.valid() {
        back.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().unwrap();
    back.reverse();
    (fwd, back)
}

/// What `Table::get` must answer for `target`: the first entry at or after it, if it has its user key.
fn expected_get(entries: &Entries, target: &[u8]) -> Option<(u64, Kind, Vec<u8>)> {
    let i = entries.partition_point(|(k, _)| ikey::cmp(k, target).is_lt());
    let (k, v) = entries.get(i)?;
    let p = ikey::parse(k).unwrap();
    (p.user_key == ikey::user_key(target)).then(|| (p.seq, p.kind, v.clone()))
}

/// Probes `t` at `target` with `get` and with a cursor seek (then a step back), against `entries`.
fn probe(t: &Arc<Table>, entries: &Entries, target: &[u8], ctx: &str) {
    let got = t.get(target, &mut GetStats::default()).unwrap();
    assert_eq!(got, expected_get(entries, target), "{ctx}: get {target:?}");
    let i = entries.partition_point(|(k, _)| ikey::cmp(k, target).is_lt());
    let mut it = t.iter();
    it.seek(target);
    assert_eq!(it.valid().then(|| it.key().to_vec()), entries.get(i).map(|e| e.0.clone()), "{ctx}: seek");
    if it.valid() {
        it.prev();
        let before = i.checked_sub(1).map(|j| entries[j].0.clone());
        assert_eq!(it.valid().then(|| it.key().to_vec()), before, "{ctx}: prev after seek");
    }
    it.status().unwrap();
}

/// The version-1 fixture, read-only.
fn fixture() -> Arc<dyn vfs::File> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/table-v1.sst");
    vfs::OsFs::new().open(&path, vfs::OpenMode::ReadOnly).unwrap()
}

#[test]
fn a_version_1_table_still_reads() {
    let f = fixture();
    assert_eq!(footer(&*f).version, 1);
    let index = index_entries(&*f);
    assert!(index.len() > 10);
    assert!(index.iter().all(|(k, last, _)| k == last), "version 1 keys the index by last keys");
    let t = open(f);
    let want = entries();
    let (fwd, back) = scans(&t);
    assert_eq!(fwd, want);
    assert_eq!(back, want);
    for (k, _) in &want {
        let uk = ikey::user_key(k);
        for seq in [ikey::MAX_SEQ, ikey::seq(k), ikey::seq(k).saturating_sub(1), 0] {
            probe(&t, &want, &ikey::make(uk, seq, ikey::SEEK_KIND), "v1");
        }
        let mut past = uk.to_vec();
        past.push(0);
        probe(&t, &want, &ikey::make(&past, ikey::MAX_SEQ, ikey::SEEK_KIND), "v1 gap");
    }
}

#[test]
fn tables_now_key_their_index_by_short_separators() {
    let fs = vfs::MemFs::new();
    let want = entries();
    let f = build(&fs, "t", &want, 256);
    let fixture = fixture();
    let (now, then) = (footer(&*f), footer(&*fixture));
    assert_eq!(now.version, format::FORMAT_VERSION);
    let index = index_entries(&*f);
    assert_eq!(index.len(), index_entries(&*fixture).len(), "same blocks as the version 1 builder");
    for (k, last, next) in &index {
        assert!(ikey::cmp(last, k).is_le(), "an index key is at or after its block's last key");
        match next {
            Some(next) => assert!(ikey::cmp(k, next).is_lt(), "and before the next block's first key"),
            None => assert_eq!(k, last, "the last block keeps its last key"),
        }
    }
    // Between two user keys, which differ in their digits, a separator is `key-NNNN` (a digit raised) or
    // `key-NNNN.` (consecutive digits: the dash is raised), and a trailer. Between two versions of one user key
    // it is the block's last key.
    for (k, last, next) in &index {
        let Some(next) = next else { continue };
        let short = ikey::user_key(k).len() <= 9;
        assert_eq!(
            short,
            ikey::user_key(last) != ikey::user_key(next),
            "{k:?} between {last:?} and {next:?}"
        );
    }
    assert!(
        now.index.size * 3 < then.index.size * 2,
        "index {} bytes against {}",
        now.index.size,
        then.index.size
    );
    let t = open(f);
    let (fwd, back) = scans(&t);
    assert_eq!((fwd, back), (want.clone(), want));
}

fn seeds() -> Vec<u64> {
    testkit::seeds(&[1, 2, 3])
}

/// A random user key over a few bytes at both ends of the range, so shared prefixes, prefixes of each other
/// and runs of 0xff (which a separator cannot raise) are common.
fn user_key(rng: &mut SmallRng) -> Vec<u8> {
    let len = rng.random_range(0..10);
    (0..len).map(|_| [0u8, 1, b'a', b'b', 0xfe, 0xff][rng.random_range(0..6)]).collect()
}

#[test]
fn a_table_answers_like_a_sorted_model() {
    for seed in seeds() {
        eprintln!("table model seed {seed} (set RANGEDB_SEED to reproduce)");
        let mut rng = SmallRng::seed_from_u64(seed);
        for round in 0..10 * testkit::scale() {
            let mut want: Entries = Vec::new();
            for _ in 0..rng.random_range(1..600) {
                let uk = user_key(&mut rng);
                for _ in 0..rng.random_range(1..4) {
                    let kind = if rng.random_bool(0.2) { Kind::Delete } else { Kind::Value };
                    let v =
                        if kind == Kind::Value { vec![b'v'; rng.random_range(0..40)] } else { Vec::new() };
                    want.push((ikey::make(&uk, rng.random_range(1..50), kind), v));
                }
            }
            want.sort_by(|a, b| ikey::cmp(&a.0, &b.0));
            want.dedup_by(|a, b| ikey::cmp(&a.0, &b.0).is_eq());
            let fs = vfs::MemFs::new();
            let block_size = rng.random_range(16..400);
            let t = open(build(&fs, "t", &want, block_size));
            let ctx = format!("seed {seed} round {round} block size {block_size}");
            let (fwd, back) = scans(&t);
            assert_eq!(fwd, want, "{ctx}");
            assert_eq!(back, want, "{ctx}");
            for _ in 0..300 {
                let target = ikey::make(&user_key(&mut rng), rng.random_range(0..=51), ikey::SEEK_KIND);
                probe(&t, &want, &target, &ctx);
            }
            for (k, _) in want.iter().step_by(7) {
                probe(&t, &want, k, &ctx);
            }
        }
    }
}
