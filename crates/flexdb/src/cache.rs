//! The interval cache (§5.3): decoded intervals kept in memory, replaced by CLOCK, written through by the
//! committer.
//!
//! # Design
//!
//! Entries are keyed by the interval's stable id from the sparse index and hold the interval's records as an
//! `Arc<Interval>` (one buffer, see `interval.rs`), so a lookup binary-searches it with no lock held. The cache is split into partitions
//! (by id) each with its own mutex, CLOCK hand and byte budget, so concurrent readers rarely contend; the
//! reference implementation uses 1,024 partitions. A partition must hold several intervals of the largest size
//! the store makes, or CLOCK degenerates and a large interval is never cached: with 1,024 partitions a cache
//! under 16 MiB gives each under 16 KiB, less than one full interval. So the cache uses fewer partitions than
//! asked when the budget is small ([`MIN_INTERVALS_PER_PARTITION`] full intervals each). Write-through: the committer installs the new array of every
//! interval it changes, so a cached interval is never stale; an interval that is removed is dropped.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::interval::Interval;

/// A decoded interval.
pub type IntervalData = Arc<Interval>;

struct Slot {
    id: u64,
    data: IntervalData,
    bytes: usize,
    referenced: bool,
}

/// Hashes an interval id (a counter the sparse index hands out) with one multiply. The std default, SipHash,
/// guards against keys an attacker picks; ids are ours. Cache lookups were 8 % of the committer's time in a
/// 512 MiB Zipfian load, and the cheaper hash made such loads about 4 % faster.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0.rotate_left(8) ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, x: u64) {
        let h = (x ^ (x >> 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 29);
    }
}

#[derive(Default)]
struct Part {
    map: HashMap<u64, usize, BuildHasherDefault<IdHasher>>,
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    hand: usize,
    bytes: usize,
}

/// The CLOCK interval cache. See the module comment.
pub struct IntervalCache {
    parts: Vec<Mutex<Part>>,
    cap_per_part: usize,
    /// Lookups served from the cache.
    pub hits: AtomicU64,
    /// Lookups that had to read the table file.
    pub misses: AtomicU64,
}

/// Intervals of the largest size every partition can hold at once (when the budget allows any partitioning).
pub const MIN_INTERVALS_PER_PARTITION: usize = 8;

impl IntervalCache {
    /// A cache of `bytes` total split into at most `partitions`, each holding at least
    /// [`MIN_INTERVALS_PER_PARTITION`] intervals charged `interval_charge` (fewer partitions when `bytes` is small;
    /// see [`Interval::charge`] and [`Interval::max_charge`]).
    pub fn new(bytes: usize, partitions: usize, interval_charge: usize) -> Self {
        let fit = bytes / MIN_INTERVALS_PER_PARTITION.saturating_mul(interval_charge.max(1)).max(1);
        let partitions = partitions.min(fit).max(1);
        IntervalCache {
            parts: (0..partitions).map(|_| Mutex::new(Part::default())).collect(),
            cap_per_part: bytes / partitions,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn part(&self, id: u64) -> &Mutex<Part> {
        let h = id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
        &self.parts[(h % self.parts.len() as u64) as usize]
    }

    /// The cached interval `id`, marking it recently used.
    pub fn get(&self, id: u64) -> Option<IntervalData> {
        let mut p = self.part(id).lock();
        let hit = p.map.get(&id).copied().and_then(|i| {
            let s = p.slots[i].as_mut()?;
            s.referenced = true;
            Some(s.data.clone())
        });
        drop(p);
        match &hit {
            Some(_) => self.hits.fetch_add(1, Ordering::Relaxed),
            None => self.misses.fetch_add(1, Ordering::Relaxed),
        };
        hit
    }

    /// Installs (or replaces) interval `id`, evicting by CLOCK to stay within the partition's budget. An interval
    /// larger than the whole partition is not cached.
    ///
    /// Evicted intervals are freed after the partition lock is released: they were usually allocated by another
    /// thread, and freeing them means taking that thread's allocator lock, which with the partition lock held made
    /// two readers queue behind each other (a two-thread GET benchmark scaled not at all).
    pub fn put(&self, id: u64, data: IntervalData) {
        let bytes = data.charge();
        let mut evicted: Vec<IntervalData> = Vec::new();
        let mut p = self.part(id).lock();
        if let Some(i) = p.map.remove(&id)
            && let Some(s) = p.slots[i].take()
        {
            p.bytes -= s.bytes;
            p.free.push(i);
            evicted.push(s.data);
        }
        if bytes > self.cap_per_part {
            drop(p);
            return;
        }
        while p.bytes + bytes > self.cap_per_part && !p.map.is_empty() {
            let n = p.slots.len();
            let h = p.hand % n;
            p.hand = (h + 1) % n;
            let evict = match p.slots[h].as_mut() {
                Some(s) if s.referenced => {
                    s.referenced = false;
                    false
                }
                Some(_) => true,
                None => false,
            };
            if evict && let Some(s) = p.slots[h].take() {
                p.map.remove(&s.id);
                p.bytes -= s.bytes;
                p.free.push(h);
                evicted.push(s.data);
            }
        }
        let slot = Slot { id, data, bytes, referenced: false };
        let i = match p.free.pop() {
            Some(i) => {
                p.slots[i] = Some(slot);
                i
            }
            None => {
                p.slots.push(Some(slot));
                p.slots.len() - 1
            }
        };
        p.map.insert(id, i);
        p.bytes += bytes;
        drop(p);
        drop(evicted);
    }

    /// Drops interval `id`.
    pub fn remove(&self, id: u64) {
        let mut p = self.part(id).lock();
        let mut gone = None;
        if let Some(i) = p.map.remove(&id)
            && let Some(s) = p.slots[i].take()
        {
            p.bytes -= s.bytes;
            p.free.push(i);
            gone = Some(s.data);
        }
        // Freed outside the lock, as in `put`.
        drop(p);
        drop(gone);
    }

    /// Partitions in use.
    pub fn partitions(&self) -> usize {
        self.parts.len()
    }

    /// Bytes currently charged.
    pub fn bytes(&self) -> usize {
        self.parts.iter().map(|p| p.lock().bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::record::Rec;

    fn data(n: usize) -> IntervalData {
        let recs: Vec<Rec> = (0..n)
            .map(|i| (vec![i as u8; 8].into_boxed_slice(), vec![0u8; 100].into_boxed_slice()))
            .collect();
        Arc::new(Interval::from_recs(&recs))
    }

    #[test]
    fn clock_keeps_referenced_and_respects_budget() {
        let c = IntervalCache::new(4 * data(4).charge(), 1, data(4).charge());
        for id in 0..4 {
            c.put(id, data(4));
        }
        assert!(c.get(0).is_some());
        c.put(10, data(4));
        // 0 was referenced, so the hand skipped it and evicted 1.
        assert!(c.get(0).is_some());
        assert!(c.get(1).is_none());
        assert!(c.bytes() <= 4 * data(4).charge());
        c.remove(0);
        assert!(c.get(0).is_none());
    }

    /// With the reference's 1,024 partitions, an 8 MiB cache gave each partition 8 KiB, so no interval of the
    /// default maximum size (16 KiB) was ever cached.
    #[test]
    fn regression_small_cache_still_holds_max_size_intervals() {
        let recs: Vec<Rec> =
            (0..16u8).map(|i| (vec![i; 16].into_boxed_slice(), vec![0u8; 1000].into_boxed_slice())).collect();
        let full: IntervalData = Arc::new(Interval::from_recs(&recs));
        let max = Interval::max_charge(16, 16 << 10);
        assert!(full.charge() <= max);
        let c = IntervalCache::new(8 << 20, 1024, max);
        assert!(c.partitions() >= 1 && c.partitions() <= (8 << 20) / (MIN_INTERVALS_PER_PARTITION * max));
        for id in 0..(8 << 20) / (2 * max) as u64 {
            c.put(id, full.clone());
        }
        // Half the budget in full intervals: each partition holds its share, so nearly all stay.
        let held = (0..(8 << 20) / (2 * max) as u64).filter(|&id| c.get(id).is_some()).count();
        assert!(held * 10 >= 9 * ((8 << 20) / (2 * max)), "only {held} intervals cached");
        // A large budget keeps the requested partitioning.
        assert_eq!(IntervalCache::new(1 << 30, 1024, max).partitions(), 1024);
    }
}
