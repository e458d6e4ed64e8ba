//! Structural changes of the concurrent index under leaf locks (§6.2): the two GC stages, splits, and
//! merge/resplit, each publishing new bodies or leaves under the version bits readers validate against.

use super::epoch::Guard;
use super::leaf::{Body, CLeaf, Version, is_deleted};
use super::sync::Ordering;
use super::{ConcurrentRask, LeafPtr, Locked, with_gc_buffers};
use crate::gc::{lightweight_marks, normal_gc_in};
use crate::internal::InternalIndex;
use crate::merge::merge_arrays;
use crate::split::{Entries, split_entries};
use crate::{RangeValue, Stats};

impl<V: RangeValue + Send + Sync> ConcurrentRask<V> {
    /// First GC stage under the leaf lock (new body swapped in under `V_GC`); whether it freed anything.
    pub(super) fn lightweight_gc(&self, l: &CLeaf<V>) -> bool {
        self.stats.local().gc_lightweight.fetch_add(1, Ordering::Relaxed);
        let (ranges, values) = self.body(l).entries();
        let body = with_gc_buffers(|b| {
            let freed = lightweight_marks(ranges, &mut b.lt, &mut b.dead);
            if freed == 0 {
                return None;
            }
            let local = self.stats.local();
            local.gc_reclaimed.fetch_add(freed as u64, Ordering::Relaxed);
            local.gc_lightweight_freed.fetch_add(1, Ordering::Relaxed);
            local.gc_reclaimed_lightweight.fetch_add(freed as u64, Ordering::Relaxed);
            let kept = ranges
                .iter()
                .zip(values)
                .zip(&b.dead)
                .filter(|(_, d)| !**d)
                .map(|((r, v), _)| (*r, v.clone()));
            Some(Body::from_iter(self.opts.leaf_capacity, ranges.len() - freed, kept))
        });
        let Some(body) = body else { return false };
        l.bump(Version::Gc);
        self.swap_body(l, body);
        l.bump(Version::Gc);
        true
    }

    /// Normal GC for merge/resplit: returns the surviving entries without touching the leaf.
    fn normal_gc_entries(&self, l: &CLeaf<V>) -> Entries<V> {
        self.stats.local().gc_normal.fetch_add(1, Ordering::Relaxed);
        let (ranges, values) = self.body(l).entries();
        let mut kept = Vec::with_capacity(ranges.len());
        let dropped =
            with_gc_buffers(|b| normal_gc_in(ranges, values, None, usize::MAX, &mut b.gc, &mut kept));
        self.stats.local().gc_reclaimed.fetch_add(dropped as u64, Ordering::Relaxed);
        kept
    }

    /// Splits `entries` (the new content of locked `leaf`'s range space) into leaves of at most the capacity:
    /// `leaf` keeps the first piece; new, locked leaves are linked after it and indexed. REQUIRES: the caller
    /// holds `leaf` locked with the relevant version odd. Returns all the leaves, still locked.
    fn split_into(&self, leaf: *mut CLeaf<V>, entries: Entries<V>, resplit: bool) -> Locked<V> {
        // SAFETY: locked by the caller.
        let l = unsafe { &*leaf };
        let cap = self.opts.leaf_capacity;
        let mut local = Stats::default();
        let mut pieces = Vec::with_capacity(2);
        split_entries(entries, l.anchor, cap, &mut local, &mut pieces);
        if resplit {
            local.splits = 0;
        }
        self.stats.add(&local);
        self.install_pieces(leaf, pieces)
    }

    /// Makes `pieces` (block order; the first keeps `leaf`'s anchor) the content of locked `leaf` and new
    /// leaves linked after it, indexed before return. REQUIRES: `leaf` locked, version odd. Returns all the
    /// leaves, still locked.
    pub(super) fn install_pieces(&self, leaf: *mut CLeaf<V>, pieces: Vec<(u64, Entries<V>)>) -> Locked<V> {
        // SAFETY: locked by the caller.
        let l = unsafe { &*leaf };
        let cap = self.opts.leaf_capacity;
        let mut pieces = pieces.into_iter();
        let first = pieces.next().map(|(_, e)| e).unwrap_or_default();
        // Build the new leaves (private until linked), chained among themselves.
        let mut new: Vec<*mut CLeaf<V>> = Vec::new();
        for (anchor, e) in pieces {
            let n = Box::into_raw(CLeaf::new(anchor, Body::new(cap, e), true));
            if let Some(&p) = new.last() {
                // SAFETY: private.
                unsafe {
                    (*n).prev.store(p, Ordering::Relaxed);
                    (*p).next.store(n, Ordering::Relaxed);
                }
            }
            new.push(n);
        }
        if let (Some(&firstnew), Some(&lastnew)) = (new.first(), new.last()) {
            let old_next = l.next.load(Ordering::Acquire);
            // SAFETY: private until the stores below publish them.
            unsafe {
                (*firstnew).prev.store(leaf, Ordering::Relaxed);
                (*lastnew).next.store(old_next, Ordering::Release);
            }
            if !old_next.is_null() {
                // The right neighbour's prev is protected by our lock on its left neighbour.
                unsafe { &*old_next }.prev.store(lastnew, Ordering::Release);
            }
            l.next.store(firstnew, Ordering::Release);
        }
        self.replace_body(l, first);
        l.set_n_frag(0);
        if !new.is_empty() {
            let mut index = self.index.write();
            for &n in &new {
                // SAFETY: locked by us.
                index.insert(unsafe { (*n).anchor }, LeafPtr(n));
            }
        }
        let mut all = Locked::one(leaf);
        for n in new {
            all.push(n);
        }
        all
    }

    /// Workload-aware merge/resplit of locked `leaf` with its left neighbour (§5.4). Returns the leaves left
    /// locked.
    pub(super) fn merge_resplit(&self, leaf: *mut CLeaf<V>, _guard: &Guard<'_>) -> Locked<V> {
        // SAFETY: locked by the caller.
        let me = unsafe { &*leaf };
        let prev = me.prev.load(Ordering::Acquire);
        let (left, right) = if !prev.is_null() {
            // Right-to-left: only try, or two writers could deadlock against a hand-over.
            // SAFETY: `prev` of a locked, live leaf is live (unlinking it needs our lock via its next pointer).
            let p = unsafe { &*prev };
            if !p.try_lock() {
                return Locked::one(leaf);
            }
            if is_deleted(p.header()) || p.next.load(Ordering::Acquire) != leaf {
                p.unlock();
                return Locked::one(leaf);
            }
            (prev, leaf)
        } else {
            let next = me.next.load(Ordering::Acquire);
            if next.is_null() {
                me.set_n_frag(0);
                return Locked::one(leaf);
            }
            // Left-to-right: a blocking lock is safe.
            unsafe { &*next }.lock();
            (leaf, next)
        };
        // SAFETY: both locked.
        let (lref, rref) = unsafe { (&*left, &*right) };
        let le = self.normal_gc_entries(lref);
        let re = self.normal_gc_entries(rref);
        let (merged, joined) = merge_arrays(le, re, rref.anchor);
        self.stats.local().ranges_merged.fetch_add(joined, Ordering::Relaxed);
        // The right leaf goes away either way: merged into the left one, or replaced by the resplit's new right
        // leaves (anchors never change in place).
        lref.bump(Version::Merge);
        rref.bump(Version::Merge);
        self.unlink_right(lref, rref);
        rref.mark_deleted();
        let locked = if merged.len() <= self.opts.leaf_capacity {
            self.stats.local().merges.fetch_add(1, Ordering::Relaxed);
            self.replace_body(lref, merged);
            lref.set_n_frag(0);
            Locked::one(left)
        } else {
            self.stats.local().resplits.fetch_add(1, Ordering::Relaxed);
            self.split_into(left, merged, true)
        };
        {
            let mut index = self.index.write();
            if index.get(rref.anchor).is_some_and(|p| p.0 == right) {
                index.remove(rref.anchor);
            }
        }
        lref.bump(Version::Merge);
        rref.bump(Version::Merge);
        rref.unlock();
        // SAFETY: `right` is unlinked from the list and the index, marked deleted, and retired once; pinned
        // readers or writers that still hold it keep it allocated until they unpin.
        unsafe { self.collector.retire(right) };
        locked
    }

    /// Unlinks `r`, the right neighbour of `l`. REQUIRES: both locked.
    fn unlink_right(&self, l: &CLeaf<V>, r: &CLeaf<V>) {
        let rn = r.next.load(Ordering::Acquire);
        if !rn.is_null() {
            // SAFETY: protected by our lock on `r`, its left neighbour.
            unsafe { &*rn }.prev.store(l as *const CLeaf<V> as *mut CLeaf<V>, Ordering::Release);
        }
        l.next.store(rn, Ordering::Release);
    }
}
