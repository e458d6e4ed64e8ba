//! The memtable's size accounting against the memory it really allocates: the memtable is switched when its
//! accounted size passes `write_buffer_size`, so an accounting below the real use lets a memtable hold more than
//! its budget (and compares unfairly with RocksDB, whose arena accounting counts every byte it allocates).
//!
//! A counting global allocator measures the bytes the memtable's allocations request (this file is its own test
//! binary, so the allocator sees only this test).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use lsm::ikey::Kind;
use lsm::memtable::MemTable;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts the requested sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's layout contract is passed through.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n as isize - l.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(b"user0000");
    k[8..].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
    k
}

/// Loads `n` random 16-byte keys with 100-byte values (`dups` of them written twice) and returns
/// (real bytes, accounted bytes) per entry.
fn measure(n: u64, dups: u64) -> (f64, f64) {
    let before = LIVE.load(Ordering::Relaxed);
    let m = MemTable::new(1);
    let v = [7u8; 100];
    let mut seq = 1;
    for i in 0..n {
        m.add(seq, Kind::Value, &key(i), &v);
        seq += 1;
    }
    for i in 0..dups {
        m.add(seq, Kind::Value, &key(i * 3), &v);
        seq += 1;
    }
    let real = (LIVE.load(Ordering::Relaxed) - before) as f64;
    let entries = (n + dups) as f64;
    let r = (real / entries, m.approx_size() as f64 / entries);
    drop(m);
    r
}

#[test]
fn accounting_covers_the_real_memory_of_the_memtable() {
    for (n, dups) in [(30_000u64, 0u64), (30_000, 10_000)] {
        let (real, charged) = measure(n, dups);
        eprintln!("{n} keys + {dups} overwrites: real {real:.1} B/entry, charged {charged:.1} B/entry");
        assert!(charged >= real * 0.97, "the memtable charges {charged:.1} B/entry but uses {real:.1}");
        assert!(charged <= real * 1.10, "the memtable charges {charged:.1} B/entry but uses only {real:.1}");
    }
}
