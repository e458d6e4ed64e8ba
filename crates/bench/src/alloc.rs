//! A counting global allocator: the source of every `memory_bytes` metric.
//!
//! The `rangedb` binary (and tests that want exact numbers) install [`CountingAlloc`] as `#[global_allocator]`.
//! It forwards to the system allocator and keeps the live byte count in relaxed atomics sharded by thread, which
//! costs one uncontended atomic add per allocation. Sizes are the sizes requested, so a structure's figure
//! excludes allocator slack and is the same on every allocator; that is what "bytes the structure holds" means in
//! our reports.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};

/// Counter shards. Engines allocate from several threads at once (a writer and a committer, compaction threads):
/// one shared counter made every allocation a cross-core cache-line transfer (FlexDB's writes ran 5-10 % faster
/// once sharded), a cost RocksDB never paid: its C++ allocations do not pass through this allocator.
const SHARDS: usize = 16;

/// One shard per cache-line pair, so neighbouring shards never share a line (nor an adjacent-line prefetch).
#[repr(align(128))]
struct Shard(AtomicIsize);

/// Net bytes allocated through each shard. A shard may go negative (a thread frees what another allocated); the
/// sum is the live count.
static SHARD: [Shard; SHARDS] = [const { Shard(AtomicIsize::new(0)) }; SHARDS];
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);
static USED: AtomicBool = AtomicBool::new(false);

thread_local! {
    // Const-initialised without a destructor, so reading it never allocates (this runs inside the allocator).
    static MY_SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The counting allocator. Install with `#[global_allocator] static A: bench::alloc::CountingAlloc = CountingAlloc;`.
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingAlloc;

fn shard() -> &'static AtomicIsize {
    let i = MY_SHARD
        .try_with(|c| {
            let mut i = c.get();
            if i == usize::MAX {
                i = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
                c.set(i);
            }
            i
        })
        .unwrap_or(0);
    &SHARD[i].0
}

fn add(n: usize) {
    shard().fetch_add(n as isize, Ordering::Relaxed);
    if !USED.load(Ordering::Relaxed) {
        USED.store(true, Ordering::Relaxed);
    }
}

fn sub(n: usize) {
    shard().fetch_sub(n as isize, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so `System`'s guarantees are
// ours; the counters only observe sizes and never touch the memory.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which `System.alloc` shares.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by this allocator (hence by `System`) with `layout`, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) };
        sub(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract, which `System.realloc` shares.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            shard().fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
}

/// Heap bytes live now (0 if the counting allocator is not installed). Exact when no other thread is allocating.
pub fn live_bytes() -> usize {
    let net: isize = SHARD.iter().map(|s| s.0.load(Ordering::Relaxed)).fold(0, isize::wrapping_add);
    net.max(0) as usize
}

/// Whether the counting allocator is the global allocator of this process.
pub fn installed() -> bool {
    drop(std::hint::black_box(Box::new(0u64)));
    USED.load(Ordering::Relaxed)
}

/// Runs `build` and returns its result with the heap bytes it left live (what it allocated and did not free).
/// REQUIRES: no other thread allocates meanwhile, or its bytes are counted too.
pub fn measure<T>(build: impl FnOnce() -> T) -> (T, usize) {
    let before = live_bytes();
    let value = build();
    (value, live_bytes().saturating_sub(before))
}
