//! The concurrent leaf: an 8-byte header of lock, version and fragmentation bits, immutable anchor, neighbour
//! links, and an append-only body swapped whole by GC and SMOs.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;

use super::sync::{AtomicPtr, AtomicU64, AtomicUsize, Ordering, backoff};
use crate::{BlockRange, RangeValue};

// Header layout (one u64). The paper gives 4 bits to each version; 8 here make a reader that sleeps through
// exactly a multiple of the wrap-around far less likely to miss a change, at no cost in size.
const V_GC: u32 = 0;
const V_SPLIT: u32 = 8;
const V_MERGE: u32 = 16;
const DELETED: u64 = 1 << 24;
const LOCKED: u64 = 1 << 25;
const NFRAG_SHIFT: u32 = 32;
/// The bits a reader compares before and after reading a leaf: the three versions and the deleted bit.
const VALIDATE_MASK: u64 = (1 << 25) - 1;

/// Which version a mutation bumps.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Version {
    Gc,
    Split,
    Merge,
}

impl Version {
    fn shift(self) -> u32 {
        match self {
            Version::Gc => V_GC,
            Version::Split => V_SPLIT,
            Version::Merge => V_MERGE,
        }
    }
}

/// A leaf's entries. Slots below `len` are initialized and never written again; the lock holder appends at
/// `len` and then publishes `len + 1` (Release). GC, split and merge build a new body and swap it in, retiring
/// the old one through the epoch collector, so a reader can always finish reading the body it loaded.
pub(crate) struct Body<V> {
    len: AtomicUsize,
    ranges: Box<[UnsafeCell<MaybeUninit<BlockRange>>]>,
    values: Box<[UnsafeCell<MaybeUninit<V>>]>,
}

// SAFETY: published slots are immutable and shared read-only (needs `V: Sync`); values move between threads
// when bodies are built and dropped (needs `V: Send`). Unpublished slots are written only by the leaf's lock
// holder.
unsafe impl<V: Send + Sync> Sync for Body<V> {}
// SAFETY: as above.
unsafe impl<V: Send + Sync> Send for Body<V> {}

impl<V: RangeValue> Body<V> {
    /// A body of `capacity` slots (at least `entries.len()`) holding `entries`.
    pub(crate) fn new(capacity: usize, entries: Vec<(BlockRange, V)>) -> Box<Body<V>> {
        let n = entries.len();
        Body::from_iter(capacity, n, entries)
    }

    /// A body of `capacity` slots (at least `n`) holding the `n` entries of `entries` (more are ignored, fewer
    /// leave the body shorter): GC builds a body straight from the surviving entries, without a vector between.
    pub(crate) fn from_iter(
        capacity: usize,
        n: usize,
        entries: impl IntoIterator<Item = (BlockRange, V)>,
    ) -> Box<Body<V>> {
        let cap = capacity.max(n);
        let ranges = uninit_slots(cap);
        let values = uninit_slots(cap);
        let mut len = 0;
        for (r, v) in entries.into_iter().take(cap) {
            // SAFETY: the body is not shared yet; `len < cap`.
            unsafe {
                (*ranges[len].get()).write(r);
                (*values[len].get()).write(v);
            }
            len += 1;
        }
        debug_assert_eq!(len, n);
        Box::new(Body { len: AtomicUsize::new(len), ranges, values })
    }

    pub(crate) fn capacity(&self) -> usize {
        self.ranges.len()
    }

    /// The published entries: a consistent prefix of the log.
    #[inline]
    pub(crate) fn entries(&self) -> (&[BlockRange], &[V]) {
        let n = self.len.load(Ordering::Acquire);
        // SAFETY: slots below the published length are initialized (written before the Release store of `len`
        // that the Acquire load above synchronizes with) and never written again; `UnsafeCell<MaybeUninit<T>>`
        // has `T`'s layout.
        unsafe {
            (
                std::slice::from_raw_parts(self.ranges.as_ptr().cast::<BlockRange>(), n),
                std::slice::from_raw_parts(self.values.as_ptr().cast::<V>(), n),
            )
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Appends one entry. REQUIRES: the caller holds the leaf's lock and `len() < capacity()`.
    pub(crate) fn append(&self, r: BlockRange, v: V) {
        let n = self.len.load(Ordering::Relaxed);
        debug_assert!(n < self.capacity());
        if n >= self.capacity() {
            return;
        }
        // SAFETY: slot `n` is unpublished, so no reader looks at it, and the lock holder is the only writer.
        unsafe {
            (*self.ranges[n].get()).write(r);
            (*self.values[n].get()).write(v);
        }
        self.len.store(n + 1, Ordering::Release);
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        let (_, vals) = self.entries();
        self.capacity() * (size_of::<BlockRange>() + size_of::<V>())
            + vals.iter().map(|v| v.heap_size()).sum::<usize>()
    }
}

/// `n` uninitialized slots in one allocation, without writing them (a body is built on every GC and SMO, and the
/// slots past the live entries are filled only by later appends).
fn uninit_slots<T>(n: usize) -> Box<[UnsafeCell<MaybeUninit<T>>]> {
    // SAFETY: `UnsafeCell<MaybeUninit<T>>` is valid in any state, uninitialized included, so the outer
    // `MaybeUninit` may be assumed initialized.
    unsafe { Box::<[UnsafeCell<MaybeUninit<T>>]>::new_uninit_slice(n).assume_init() }
}

impl<V> Drop for Body<V> {
    fn drop(&mut self) {
        let n = self.len.load(Ordering::Relaxed);
        for slot in &mut self.values[..n] {
            // SAFETY: the first `n` slots are initialized and dropped exactly once, here.
            unsafe { slot.get_mut().assume_init_drop() };
        }
    }
}

/// A leaf of the concurrent index. `anchor` never changes: a resplit that moves a boundary builds a new leaf.
pub(crate) struct CLeaf<V> {
    header: AtomicU64,
    pub(crate) anchor: u64,
    pub(crate) prev: AtomicPtr<CLeaf<V>>,
    pub(crate) next: AtomicPtr<CLeaf<V>>,
    pub(crate) body: AtomicPtr<Body<V>>,
}

impl<V> CLeaf<V> {
    /// A new leaf, locked if `locked` (a split's or resplit's new leaf stays locked until it is indexed).
    pub(crate) fn new(anchor: u64, body: Box<Body<V>>, locked: bool) -> Box<CLeaf<V>> {
        Box::new(CLeaf {
            header: AtomicU64::new(if locked { LOCKED } else { 0 }),
            anchor,
            prev: AtomicPtr::new(std::ptr::null_mut()),
            next: AtomicPtr::new(std::ptr::null_mut()),
            body: AtomicPtr::new(Box::into_raw(body)),
        })
    }

    #[inline]
    pub(crate) fn header(&self) -> u64 {
        self.header.load(Ordering::SeqCst)
    }

    pub(crate) fn lock(&self) {
        let mut spins = 0;
        loop {
            if self.try_lock() {
                return;
            }
            backoff(&mut spins);
        }
    }

    pub(crate) fn try_lock(&self) -> bool {
        let mut h = self.header.load(Ordering::Relaxed);
        while h & LOCKED == 0 {
            match self.header.compare_exchange_weak(h, h | LOCKED, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => h = now,
            }
        }
        false
    }

    pub(crate) fn unlock(&self) {
        self.header.fetch_and(!LOCKED, Ordering::SeqCst);
    }

    /// REQUIRES: the caller holds the lock (only the holder writes header bits other than the lock bit).
    fn update(&self, f: impl Fn(u64) -> u64) {
        let h = self.header.load(Ordering::SeqCst);
        self.header.store(f(h), Ordering::SeqCst);
    }

    /// Increments a version (wrapping within its 8 bits). Called before a mutation (version turns odd) and after
    /// it (even again). REQUIRES: lock held.
    pub(crate) fn bump(&self, v: Version) {
        let s = v.shift();
        self.update(|h| {
            let field = ((h >> s) + 1) & 0xFF;
            (h & !(0xFF << s)) | (field << s)
        });
    }

    /// REQUIRES: lock held.
    pub(crate) fn mark_deleted(&self) {
        self.update(|h| h | DELETED);
    }

    pub(crate) fn n_frag(&self) -> u32 {
        (self.header() >> NFRAG_SHIFT) as u32
    }

    /// REQUIRES: lock held.
    pub(crate) fn set_n_frag(&self, n: u32) {
        self.update(|h| (h & ((1 << NFRAG_SHIFT) - 1)) | (u64::from(n) << NFRAG_SHIFT));
    }
}

/// Whether a header snapshot shows a leaf mid-mutation (some version odd).
#[inline]
pub(crate) fn in_flux(h: u64) -> bool {
    ((h >> V_GC) | (h >> V_SPLIT) | (h >> V_MERGE)) & 1 == 1
}

#[inline]
pub(crate) fn is_deleted(h: u64) -> bool {
    h & DELETED != 0
}

/// Whether two header snapshots show the same versions and deleted bit (lock and `N_frag` ignored).
#[inline]
pub(crate) fn same_version(a: u64, b: u64) -> bool {
    a & VALIDATE_MASK == b & VALIDATE_MASK
}

/// Whether the merge version differs between two snapshots (data may have moved to the left neighbour).
#[inline]
pub(crate) fn merge_changed(a: u64, b: u64) -> bool {
    (a >> V_MERGE) & 0xFF != (b >> V_MERGE) & 0xFF
}

impl<V> Drop for CLeaf<V> {
    fn drop(&mut self) {
        let b = self.body.load(Ordering::Relaxed);
        if !b.is_null() {
            // SAFETY: the leaf owns its current body (retired bodies were swapped out before retirement).
            drop(unsafe { Box::from_raw(b) });
        }
    }
}
