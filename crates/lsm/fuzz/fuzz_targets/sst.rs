//! Opening and reading a table from arbitrary bytes: a typed error or entries, never a panic.
#![no_main]
use std::path::Path;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use lsm::iter::InternalIter;
use vfs::{Fs, OpenMode};

fuzz_target!(|data: &[u8]| {
    let fs = vfs::MemFs::new();
    let Ok(f) = fs.open(Path::new("000001.sst"), OpenMode::CreateNew) else { return };
    if f.write_all_at(data, 0).is_err() {
        return;
    }
    let cache = Arc::new(lsm::cache::BlockCache::new(1 << 20));
    let Ok(t) = lsm::table::Table::open(f, 1, "000001.sst", data.len() as u64, cache) else { return };
    let t = Arc::new(t);
    let mut it = t.iter();
    it.seek_to_first();
    let mut n = 0;
    while it.valid() && n < 100_000 {
        it.next();
        n += 1;
    }
    it.seek_to_last();
    while it.valid() && n < 200_000 {
        it.prev();
        n += 1;
    }
    let mut st = lsm::table::GetStats::default();
    let _ = t.get(&lsm::ikey::make(b"k", 5, lsm::ikey::Kind::Value), &mut st);
    let _ = t.tombstones().max_covering_seq(b"k", 10);
});
