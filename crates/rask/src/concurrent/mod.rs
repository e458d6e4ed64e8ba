//! The thread-safe RASK index (§6.2).

mod epoch;
mod leaf;
mod stats;
mod structure;
mod sync;

use std::cell::RefCell;
use std::ptr;

use self::epoch::{Collector, Guard};
use self::leaf::{Body, CLeaf, Version, in_flux, is_deleted, merge_changed, same_version};
use self::stats::ShardedStats;
use self::sync::{Ordering, ShardedRwLock, backoff};
use crate::gc::{GcScratch, LtMap, normal_gc_in};
use crate::internal::{Art, InternalIndex};
use crate::search::{ReadScratch, ablation_search_idx};
use crate::split::{Entries, split_gced};
use crate::{BlockRange, Error, Options, RangeValue, Stats};

/// A leaf pointer as stored in the internal index.
pub struct LeafPtr<V>(*mut CLeaf<V>);

impl<V> Clone for LeafPtr<V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V> Copy for LeafPtr<V> {}
// SAFETY: a `LeafPtr` is only dereferenced under an epoch guard (see `ConcurrentRask`); the leaves it points at
// are `Send + Sync` for `V: Send + Sync`.
unsafe impl<V: Send + Sync> Send for LeafPtr<V> {}
// SAFETY: as above.
unsafe impl<V: Send + Sync> Sync for LeafPtr<V> {}

/// The thread-safe RASK index: the same leaves, GC, split and merge/resplit as [`Rask`](crate::Rask), with the
/// concurrency control of §6.2.
///
/// - **Writers** lock the leaves they change (a lock bit in each leaf's 8-byte header). A put spanning leaves
///   hands its lock over left to right: lock the next leaf, then unlock the current one, so concurrent cross-leaf
///   puts cannot interleave out of order. A merge/resplit takes its left neighbour with `try_lock` (a blocking
///   right-to-left acquisition could deadlock against a hand-over) and simply waits for a later trigger when it
///   fails; the leftmost leaf pairs with its right neighbour, locked left to right.
/// - **Readers** take no locks. Each leaf is read optimistically: header snapshot, body and next pointer, search,
///   header again; a change in `V_GC`, `V_split`, `V_merge` or the deleted bit means retry (after `V_merge` the
///   search restarts from the internal index, since the data may now live in the left neighbour). Appends never
///   cause a retry: a body's published prefix never changes, so a reader sees a snapshot of the log.
/// - **Bodies are copy-on-write for GC and SMOs**: GC, split and merge build a new body and swap the pointer,
///   instead of shifting entries under a reader. This keeps every read of shared memory race-free in Rust's
///   memory model; the versions still tell a reader its view of the leaf's range space is stale.
/// - **Retired leaves and bodies** go to an epoch-based collector and are freed once no pinned reader can hold
///   them.
/// - **Internal nodes** are an [`Art`] behind a reader-writer lock, updated while the leaf locks of the SMO are
///   still held (so index updates for one anchor happen in lock order). Traversal may still return a leaf that
///   an SMO has just changed; as in the paper, the target is then corrected through the leaf list: deleted leaves
///   are left through their `prev` link, and the walk goes right while the next anchor is `<=` the key.
///
/// As the paper notes, a get spanning leaves reads each leaf consistently but not all leaves at one instant.
pub struct ConcurrentRask<V: RangeValue + Send + Sync> {
    opts: Options,
    head: *mut CLeaf<V>,
    index: ShardedRwLock<Art<LeafPtr<V>>>,
    collector: Collector,
    stats: ShardedStats,
}

/// A summary, not the mappings.
impl<V: RangeValue + Send + Sync> std::fmt::Debug for ConcurrentRask<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConcurrentRask").field("stats", &self.stats()).finish_non_exhaustive()
    }
}

// SAFETY: all shared state is reached through atomics, locks, and leaves whose lifetime the collector manages.
unsafe impl<V: RangeValue + Send + Sync> Send for ConcurrentRask<V> {}
// SAFETY: as above.
unsafe impl<V: RangeValue + Send + Sync> Sync for ConcurrentRask<V> {}

/// Leaves an insert left locked that must be released together: nearly always one (two or three after a split or
/// resplit), so they are kept inline and a put does not allocate; more spill to a vector.
struct Locked<V> {
    inline: [*mut CLeaf<V>; 3],
    n: usize,
    spill: Vec<*mut CLeaf<V>>,
}

impl<V> Locked<V> {
    fn one(p: *mut CLeaf<V>) -> Self {
        Locked { inline: [p, ptr::null_mut(), ptr::null_mut()], n: 1, spill: Vec::new() }
    }

    fn push(&mut self, p: *mut CLeaf<V>) {
        if self.spill.is_empty() && self.n < self.inline.len() {
            self.inline[self.n] = p;
            self.n += 1;
        } else {
            if self.spill.is_empty() {
                self.spill.extend_from_slice(&self.inline[..self.n]);
            }
            self.spill.push(p);
        }
    }

    fn as_slice(&self) -> &[*mut CLeaf<V>] {
        if self.spill.is_empty() { &self.inline[..self.n] } else { &self.spill }
    }

    fn swap_remove(&mut self, i: usize) -> *mut CLeaf<V> {
        if self.spill.is_empty() {
            let p = self.inline[i];
            self.n -= 1;
            self.inline[i] = self.inline[self.n];
            p
        } else {
            self.spill.swap_remove(i)
        }
    }
}

/// A thread's GC buffers. GC runs under a leaf lock on the thread whose put found the leaf full, so the lists it
/// builds are per thread and reused, as the single-threaded index keeps them in the index.
#[derive(Default)]
struct GcBuffers {
    lt: LtMap,
    dead: Vec<bool>,
    gc: GcScratch,
}

/// Runs `f` with this thread's GC buffers (fresh ones if they are in use further up the stack: a value's
/// `divide` or `merge` that calls back into an index).
fn with_gc_buffers<R>(f: impl FnOnce(&mut GcBuffers) -> R) -> R {
    thread_local!(static GC: RefCell<GcBuffers> = RefCell::new(GcBuffers::default()));
    GC.with(|cell| match cell.try_borrow_mut() {
        Ok(mut b) => f(&mut b),
        Err(_) => f(&mut GcBuffers::default()),
    })
}

impl<V: RangeValue + Send + Sync> ConcurrentRask<V> {
    /// An empty index. Fails if `opts` does not validate.
    pub fn new(opts: Options) -> Result<Self, Error> {
        opts.validate()?;
        let head = Box::into_raw(CLeaf::new(0, Body::new(opts.leaf_capacity, Vec::new()), false));
        let mut index = Art::default();
        index.insert(0, LeafPtr(head));
        Ok(ConcurrentRask {
            opts,
            head,
            index: ShardedRwLock::new(index),
            collector: Collector::new(),
            stats: ShardedStats::default(),
        })
    }

    /// The options the index was built with.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// See [`Rask::put`](crate::Rask::put).
    pub fn put(&self, range: BlockRange, value: V) {
        if value.is_tombstone() {
            self.stats.local().deletes.fetch_add(1, Ordering::Relaxed);
        } else {
            self.stats.local().puts.fetch_add(1, Ordering::Relaxed);
        }
        self.insert(range, value);
    }

    /// See [`Rask::delete`](crate::Rask::delete).
    pub fn delete(&self, range: BlockRange) {
        self.stats.local().deletes.fetch_add(1, Ordering::Relaxed);
        self.insert(range, V::tombstone());
    }

    /// See [`Rask::get_with`](crate::Rask::get_with). Each leaf is read consistently; see the type comment.
    pub fn get_with(&self, range: BlockRange, visit: impl FnMut(BlockRange, &V)) {
        thread_local!(static READ: RefCell<ReadScratch> = RefCell::new(ReadScratch::default()));
        self.stats.local().gets.fetch_add(1, Ordering::Relaxed);
        let mut visit = visit;
        READ.with(|cell| match cell.try_borrow_mut() {
            Ok(mut s) => self.get_in(range, &mut visit, &mut s),
            // A get from inside a visitor on this thread: the outer get holds the buffers.
            Err(_) => self.get_in(range, &mut visit, &mut ReadScratch::default()),
        });
    }

    fn get_in(&self, range: BlockRange, visit: &mut impl FnMut(BlockRange, &V), s: &mut ReadScratch) {
        let guard = self.collector.pin();
        let mut pos = range.first();
        let mut leaf = self.locate(pos, &guard);
        loop {
            // SAFETY (all derefs below): `leaf` and its body were reachable after we pinned, so the collector
            // keeps them allocated until `guard` drops.
            let l = unsafe { &*leaf };
            let h1 = l.header();
            if is_deleted(h1) {
                leaf = self.locate(pos, &guard);
                continue;
            }
            if in_flux(h1) {
                let mut spins = 0;
                backoff(&mut spins);
                continue;
            }
            let next = l.next.load(Ordering::Acquire);
            let body = unsafe { &*l.body.load(Ordering::Acquire) };
            if !next.is_null() && unsafe { (*next).anchor } <= pos {
                // The leaf split (or our start was stale): move right.
                leaf = next;
                continue;
            }
            if l.anchor > pos {
                leaf = self.locate(pos, &guard);
                continue;
            }
            let end = space_end(next);
            let space = BlockRange::raw(pos, range.last().min(end));
            s.unfound.reset(space);
            s.found.clear();
            let (ranges, values) = body.entries();
            ablation_search_idx(
                ranges.len(),
                |i| ranges[i],
                |i| values[i].is_tombstone(),
                &mut s.unfound,
                &mut s.found,
            );
            let h2 = l.header();
            if !same_version(h1, h2) {
                self.stats.local().read_retries.fetch_add(1, Ordering::Relaxed);
                if merge_changed(h1, h2) || is_deleted(h2) {
                    leaf = self.locate(pos, &guard);
                }
                continue;
            }
            // The body we searched stays allocated under the guard and its published prefix never changes, so
            // the recorded entries are still the ones the validated snapshot saw.
            s.found.sort_unstable_by_key(|(r, _)| r.first());
            for &(x, i) in &s.found {
                let (r, v) = (ranges[i as usize], &values[i as usize]);
                if x == r {
                    visit(x, v);
                } else {
                    visit(x, &v.divide(r, x));
                }
            }
            if end >= range.last() || next.is_null() {
                return;
            }
            pos = end + 1;
            leaf = next;
        }
    }

    /// The collecting form of [`get_with`](Self::get_with).
    pub fn get(&self, range: BlockRange) -> Vec<(BlockRange, V)> {
        let mut out = Vec::new();
        self.get_with(range, |r, v| out.push((r, v.clone())));
        out
    }

    /// Every live mapping piece in block order (a get over the whole space).
    pub fn to_vec(&self) -> Vec<(BlockRange, V)> {
        self.get(BlockRange::FULL)
    }

    /// Number of live mapping pieces. O(entries).
    pub fn len(&self) -> usize {
        let mut n = 0;
        self.get_with(BlockRange::FULL, |_, _| n += 1);
        n
    }

    /// Whether no block is mapped. O(entries).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counters since creation.
    pub fn stats(&self) -> Stats {
        self.stats.snapshot()
    }

    /// Number of leaves.
    pub fn leaf_count(&self) -> usize {
        self.index.read().len()
    }

    /// Bytes held by leaves, bodies, internal nodes and not-yet-freed garbage headers. Exact when no operation
    /// runs concurrently.
    pub fn memory_usage(&self) -> usize {
        let guard = self.collector.pin();
        let mut total = size_of::<Self>() + self.index.read().memory_usage();
        let mut leaf = self.head;
        while !leaf.is_null() {
            // SAFETY: reachable under `guard`.
            let l = unsafe { &*leaf };
            let body = unsafe { &*l.body.load(Ordering::Acquire) };
            total += size_of::<CLeaf<V>>() + size_of::<Body<V>>() + body.heap_bytes();
            leaf = l.next.load(Ordering::Acquire);
        }
        drop(guard);
        total + self.collector.pending() * 2 * size_of::<usize>()
    }

    // ---- locating leaves -------------------------------------------------------------------------------------

    /// The leaf whose range space holds `key`, as of some moment during the call: internal index, then the leaf
    /// list (out of deleted leaves through `prev`, then right while the next anchor is `<= key`).
    fn locate(&self, key: u64, _guard: &Guard<'_>) -> *mut CLeaf<V> {
        let mut leaf = {
            let index = self.index.read();
            index.predecessor(key).map_or(self.head, |(_, p)| p.0)
        };
        loop {
            // SAFETY: reachable under the caller's guard.
            let l = unsafe { &*leaf };
            if is_deleted(l.header()) {
                let prev = l.prev.load(Ordering::Acquire);
                leaf = if prev.is_null() { self.head } else { prev };
                continue;
            }
            let next = l.next.load(Ordering::Acquire);
            if !next.is_null() && unsafe { (*next).anchor } <= key {
                leaf = next;
                continue;
            }
            return leaf;
        }
    }

    /// Locks and returns the leaf whose range space holds `key`.
    fn lock_target(&self, key: u64, guard: &Guard<'_>) -> *mut CLeaf<V> {
        loop {
            let leaf = self.locate(key, guard);
            // SAFETY: reachable under `guard`.
            let l = unsafe { &*leaf };
            l.lock();
            let next = l.next.load(Ordering::Acquire);
            if !is_deleted(l.header())
                && l.anchor <= key
                && (next.is_null() || unsafe { (*next).anchor } > key)
            {
                return leaf;
            }
            l.unlock();
        }
    }

    // ---- writes ----------------------------------------------------------------------------------------------

    fn insert(&self, range: BlockRange, value: V) {
        let guard = self.collector.pin();
        let tomb = value.is_tombstone();
        let mut leaf = self.lock_target(range.first(), &guard);
        let mut range = range;
        let mut value = value;
        let mut fragmented = false;
        loop {
            // SAFETY: locked leaves cannot be retired.
            let l = unsafe { &*leaf };
            let next = l.next.load(Ordering::Acquire);
            let end = space_end(next);
            if range.last() <= end {
                let locked = self.insert_locked(leaf, range, value, fragmented, tomb, &guard);
                unlock_all(locked.as_slice());
                return;
            }
            let part = BlockRange::raw(range.first(), end);
            let rest = BlockRange::raw(end + 1, range.last());
            let (pv, rv) = if tomb {
                (value.clone(), value)
            } else {
                (value.divide(range, part), value.divide(range, rest))
            };
            let mut locked = self.insert_locked(leaf, part, pv, fragmented, tomb, &guard);
            // A resplit may have moved a boundary past `part`: continue in a locked leaf holding `rest.first()` if
            // there is one; otherwise hand over from the leaf holding `part.last()` to its next leaf: lock the
            // next leaf before releasing the current ones.
            let next = match locked.as_slice().iter().position(|&p| holds(p, rest.first())) {
                Some(i) => locked.swap_remove(i),
                None => {
                    let holder =
                        locked.as_slice().iter().copied().find(|&p| holds(p, part.last())).unwrap_or(leaf);
                    // SAFETY: locked; its next leaf is live (unlinking it needs the holder's lock).
                    let next = unsafe { &*holder }.next.load(Ordering::Acquire);
                    unsafe { &*next }.lock();
                    next
                }
            };
            unlock_all(locked.as_slice());
            leaf = next;
            range = rest;
            value = rv;
            fragmented = true;
        }
    }

    /// Inserts `part` into locked leaf `leaf` (whose space holds it): GC, split or append, then merge/resplit if
    /// `N_frag` passed the threshold. Returns every leaf left locked (including `leaf`); one of them holds
    /// `part.last()`.
    fn insert_locked(
        &self,
        leaf: *mut CLeaf<V>,
        part: BlockRange,
        v: V,
        fragmented: bool,
        tomb: bool,
        guard: &Guard<'_>,
    ) -> Locked<V> {
        let cap = self.opts.leaf_capacity;
        // SAFETY: locked by the caller.
        let l = unsafe { &*leaf };
        if fragmented {
            self.stats.local().fragmented_inserts.fetch_add(1, Ordering::Relaxed);
        }
        if fragmented || tomb {
            l.set_n_frag(l.n_frag().saturating_add(1));
        }
        if self.body(l).len() >= cap && !(self.opts.two_stage_gc && self.lightweight_gc(l)) {
            // Second stage with the incoming entry included; its result fits or feeds the split directly.
            self.stats.local().gc_normal.fetch_add(1, Ordering::Relaxed);
            let (ranges, values) = self.body(l).entries();
            let mut kept = Vec::with_capacity(ranges.len() + 1);
            let split = with_gc_buffers(|b| {
                let dropped = normal_gc_in(ranges, values, Some((part, v)), cap, &mut b.gc, &mut kept);
                #[cfg(feature = "invariants")]
                crate::invariants::check_no_covered(&kept);
                self.stats.local().gc_reclaimed.fetch_add(dropped as u64, Ordering::Relaxed);
                if kept.len() <= cap {
                    return None;
                }
                let mut local = Stats::default();
                let mut pieces = Vec::with_capacity(2);
                split_gced(
                    std::mem::take(&mut kept),
                    &b.gc.nonoverlap,
                    l.anchor,
                    cap,
                    &mut local,
                    &mut pieces,
                );
                self.stats.add(&local);
                Some(pieces)
            });
            match split {
                None => {
                    l.bump(Version::Gc);
                    self.replace_body(l, kept);
                    l.bump(Version::Gc);
                }
                Some(pieces) => {
                    l.bump(Version::Split);
                    let locked = self.install_pieces(leaf, pieces);
                    l.bump(Version::Split);
                    return locked;
                }
            }
        } else {
            self.body(l).append(part, v);
        }
        if l.n_frag() as usize > self.opts.merge_threshold {
            return self.merge_resplit(leaf, guard);
        }
        Locked::one(leaf)
    }

    fn body<'a>(&self, l: &'a CLeaf<V>) -> &'a Body<V> {
        // SAFETY: a leaf's current body is freed only after being swapped out and retired; callers hold the
        // leaf's lock (no swap can happen) or a guard.
        unsafe { &*l.body.load(Ordering::Acquire) }
    }

    /// Swaps in a new body built from `entries` and retires the old one. REQUIRES: lock held, version odd.
    fn replace_body(&self, l: &CLeaf<V>, entries: Entries<V>) {
        self.swap_body(l, Body::new(self.opts.leaf_capacity, entries));
    }

    /// Swaps in `body` and retires the old one. REQUIRES: lock held, version odd.
    fn swap_body(&self, l: &CLeaf<V>, body: Box<Body<V>>) {
        let old = l.body.swap(Box::into_raw(body), Ordering::AcqRel);
        // SAFETY: `old` came from `Box::into_raw`, is now unreachable from the leaf, and is retired once.
        unsafe { self.collector.retire(old) };
    }

    /// Checks the structure when no operation runs: links, anchors, index and capacity, as
    /// [`Rask::check_invariants`](crate::Rask::check_invariants).
    pub fn check_invariants(&self) -> Result<(), String> {
        let guard = self.collector.pin();
        let index = self.index.read();
        let mut leaf = self.head;
        let mut prev: *mut CLeaf<V> = ptr::null_mut();
        let mut count = 0;
        while !leaf.is_null() {
            // SAFETY: reachable under `guard`.
            let l = unsafe { &*leaf };
            count += 1;
            if l.prev.load(Ordering::Acquire) != prev {
                return Err(format!("leaf at {} has a stale prev link", l.anchor));
            }
            if index.get(l.anchor).map(|p| p.0) != Some(leaf) {
                return Err(format!("anchor {} not indexed", l.anchor));
            }
            let h = l.header();
            if is_deleted(h) || in_flux(h) || h & (1 << 25) != 0 {
                return Err(format!("leaf at {} deleted, locked or mid-change: {h:#x}", l.anchor));
            }
            let next = l.next.load(Ordering::Acquire);
            let end = space_end(next);
            if !next.is_null() && unsafe { (*next).anchor } <= l.anchor {
                return Err(format!("anchors out of order after {}", l.anchor));
            }
            let (ranges, _) = self.body(l).entries();
            if ranges.len() > self.opts.leaf_capacity {
                return Err(format!("leaf at {} over capacity", l.anchor));
            }
            if let Some(r) = ranges.iter().find(|r| r.first() < l.anchor || r.last() > end) {
                return Err(format!("entry {r:?} outside [{}, {end}]", l.anchor));
            }
            prev = leaf;
            leaf = next;
        }
        if count != index.len() {
            return Err(format!("{count} linked leaves, {} indexed", index.len()));
        }
        drop(guard);
        Ok(())
    }
}

/// Last block of the range space of the leaf whose next leaf is `next`.
#[inline]
fn space_end<V>(next: *mut CLeaf<V>) -> u64 {
    if next.is_null() {
        u64::MAX
    } else {
        // SAFETY: callers pass the next pointer of a leaf they hold a guard or lock for; it is live.
        unsafe { (*next).anchor - 1 }
    }
}

/// Whether `key` lies in the range space of `leaf`.
#[inline]
fn holds<V>(leaf: *mut CLeaf<V>, key: u64) -> bool {
    // SAFETY: callers hold the leaf locked.
    let l = unsafe { &*leaf };
    l.anchor <= key && key <= space_end(l.next.load(Ordering::Acquire))
}

fn unlock_all<V>(locked: &[*mut CLeaf<V>]) {
    for &p in locked {
        // SAFETY: the caller locked these leaves and they stay allocated while locked.
        unsafe { &*p }.unlock();
    }
}

impl<V: RangeValue + Send + Sync> Drop for ConcurrentRask<V> {
    fn drop(&mut self) {
        let mut leaf = self.head;
        while !leaf.is_null() {
            // SAFETY: `&mut self`: no reader or writer exists; each linked leaf is freed once (retired ones are
            // unlinked and belong to the collector).
            let b = unsafe { Box::from_raw(leaf) };
            leaf = b.next.load(Ordering::Relaxed);
        }
    }
}
