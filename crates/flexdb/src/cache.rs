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
//!
//! The paper keeps a cache pointer in each sparse-index entry so a hit needs no lookup; the reference
//! implementation follows it under the partition's lock and clears it on eviction through a back-pointer to the
//! entry. Our entries move within their leaves, so nothing can point back at them. Instead each entry holds a
//! [`CacheSlot`]: the index of the slot where its interval was last installed or found in its partition. A lookup
//! takes the partition lock, as the reference does, and trusts the hint only if that slot still holds the same
//! id; otherwise it falls back to the partition's map and refreshes the hint. A stale hint is never wrong, only
//! slower, because the map stays the authority: an id occupies at most one slot.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::interval::Interval;

/// A decoded interval.
pub type IntervalData = Arc<Interval>;

/// A sparse-index entry's cache pointer: the slot its interval last occupied in its partition, or none. See the
/// module comment.
#[derive(Debug)]
pub struct CacheSlot(AtomicU32);

const NO_SLOT: u32 = u32::MAX;

impl Default for CacheSlot {
    fn default() -> Self {
        CacheSlot(AtomicU32::new(NO_SLOT))
    }
}

impl CacheSlot {
    fn load(&self) -> usize {
        self.0.load(Ordering::Relaxed) as usize
    }

    #[cfg(test)]
    fn slot(&self) -> Option<usize> {
        (self.0.load(Ordering::Relaxed) != NO_SLOT).then(|| self.load())
    }

    fn store(&self, i: usize) {
        // Relaxed: the hint is only read under the partition lock and checked against the slot it names.
        self.0.store(u32::try_from(i).unwrap_or(NO_SLOT), Ordering::Relaxed);
    }
}

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

impl std::fmt::Debug for IntervalCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntervalCache")
            .field("partitions", &self.parts.len())
            .field("hits", &self.hits)
            .field("misses", &self.misses)
            .finish_non_exhaustive()
    }
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

    /// The cached interval `id`, marking it recently used. `hint` is the interval's cache pointer: followed when
    /// it still names `id`'s slot, refreshed otherwise.
    pub fn get(&self, id: u64, hint: &CacheSlot) -> Option<IntervalData> {
        let mut p = self.part(id).lock();
        let h = hint.load();
        let at = match p.slots.get(h) {
            Some(Some(s)) if s.id == id => Some(h),
            _ => {
                let at = p.map.get(&id).copied();
                if let Some(i) = at {
                    hint.store(i);
                }
                at
            }
        };
        let hit = at.and_then(|i| {
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

    /// Installs (or replaces) interval `id`, evicting by CLOCK to stay within the partition's budget, and points
    /// `hint` (if given) at its slot. An interval larger than the whole partition is not cached.
    ///
    /// Evicted intervals are freed after the partition lock is released: they were usually allocated by another
    /// thread, and freeing them means taking that thread's allocator lock, which with the partition lock held made
    /// two readers queue behind each other (a two-thread GET benchmark scaled not at all).
    pub fn put(&self, id: u64, data: IntervalData, hint: Option<&CacheSlot>) {
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
        if let Some(hint) = hint {
            hint.store(i);
        }
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

    /// Drops every interval (the hit and miss counts stay).
    pub fn clear(&self) {
        for part in &self.parts {
            // Freed outside the lock, as in `put`.
            let gone = std::mem::take(&mut *part.lock());
            drop(gone);
        }
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
            c.put(id, data(4), None);
        }
        assert!(c.get(0, &CacheSlot::default()).is_some());
        c.put(10, data(4), None);
        // 0 was referenced, so the hand skipped it and evicted 1.
        assert!(c.get(0, &CacheSlot::default()).is_some());
        assert!(c.get(1, &CacheSlot::default()).is_none());
        assert!(c.bytes() <= 4 * data(4).charge());
        c.remove(0);
        assert!(c.get(0, &CacheSlot::default()).is_none());
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
            c.put(id, full.clone(), None);
        }
        // Half the budget in full intervals: each partition holds its share, so nearly all stay.
        let held = (0..(8 << 20) / (2 * max) as u64)
            .filter(|&id| c.get(id, &CacheSlot::default()).is_some())
            .count();
        assert!(held * 10 >= 9 * ((8 << 20) / (2 * max)), "only {held} intervals cached");
        // A large budget keeps the requested partitioning.
        assert_eq!(IntervalCache::new(1 << 30, 1024, max).partitions(), 1024);
    }

    /// An interval tagged `tag` in its one value, so a test can tell versions apart.
    fn tagged(tag: u32) -> IntervalData {
        Arc::new(Interval::from_recs(&[(b"k".to_vec(), tag.to_le_bytes().to_vec())]))
    }

    fn tag(d: &IntervalData) -> u32 {
        u32::from_le_bytes(d.rec(0).1.try_into().unwrap())
    }

    #[test]
    fn cache_pointer_is_set_on_install_and_refreshed_by_lookup() {
        let c = IntervalCache::new(8 * data(4).charge(), 1, data(4).charge());
        let h = CacheSlot::default();
        c.put(7, data(4), Some(&h));
        let at = h.slot().expect("an install sets the pointer");
        assert_eq!(c.get(7, &h).map(|d| d.len()), Some(4));
        let fresh = CacheSlot::default();
        assert_eq!(c.get(7, &fresh).map(|d| d.len()), Some(4));
        assert_eq!(fresh.slot(), Some(at), "a lookup through the map refreshes the pointer");
    }

    /// A pointer left behind when its interval moved to another slot, or when its slot went to another interval,
    /// must lead to the right interval or to none.
    #[test]
    fn stale_cache_pointer_never_yields_another_interval() {
        let c = IntervalCache::new(8 * tagged(0).charge(), 1, tagged(0).charge());
        let (h2, h3) = (CacheSlot::default(), CacheSlot::default());
        c.put(2, tagged(20), Some(&h2));
        c.put(3, tagged(30), Some(&h3));
        let (s2, s3) = (h2.slot().unwrap(), h3.slot().unwrap());
        assert_ne!(s2, s3);
        c.remove(2);
        c.remove(3);
        // Interval 2 comes back in interval 3's old slot, without touching its pointer.
        c.put(2, tagged(21), None);
        c.put(4, tagged(40), None);
        assert!(c.get(3, &h3).is_none(), "slot {s3} now holds interval 2");
        assert_eq!(c.get(2, &h2).map(|d| tag(&d)), Some(21));
        assert_eq!(h2.slot(), Some(s3), "the lookup followed the map and refreshed the pointer");
        // A pointer naming a slot that holds another interval.
        let wrong = CacheSlot::default();
        wrong.store(s2);
        assert_eq!(c.get(2, &wrong).map(|d| tag(&d)), Some(21));
        assert_eq!(c.get(4, &h2).map(|d| tag(&d)), Some(40));
    }

    /// Random installs, replacements, removals and lookups with pointers that go stale: a lookup returns the
    /// latest version of its interval or nothing, never an older version or another interval.
    #[test]
    fn cache_with_stale_pointers_matches_a_model() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        use std::collections::HashMap as Model;

        let seed = testkit::seeds(&[5])[0];
        let mut rng = SmallRng::seed_from_u64(seed);
        let c = IntervalCache::new(6 * tagged(0).charge(), 1, tagged(0).charge());
        let hints: Vec<CacheSlot> = (0..12).map(|_| CacheSlot::default()).collect();
        let mut model: Model<u64, u32> = Model::new();
        let mut version = 0u32;
        for _ in 0..20_000 {
            let id = rng.random_range(0..12u64);
            // Most calls use the interval's own pointer; some another's, as after an index entry moved.
            let h = &hints[if rng.random_bool(0.8) { id as usize } else { rng.random_range(0..12) }];
            match rng.random_range(0..10) {
                0..=2 => {
                    version += 1;
                    c.put(id, tagged(version), rng.random_bool(0.5).then_some(h));
                    model.insert(id, version);
                }
                3 => {
                    c.remove(id);
                    model.remove(&id);
                }
                _ => {
                    if let Some(d) = c.get(id, h) {
                        assert_eq!(Some(tag(&d)), model.get(&id).copied(), "interval {id}");
                    }
                }
            }
        }
        assert!(c.bytes() <= 6 * tagged(0).charge());
    }
}
