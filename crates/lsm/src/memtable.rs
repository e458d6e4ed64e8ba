//! The memtable: recent writes in memory, ordered, readable while being written.
//!
//! The engine sees only this module's API (`add`, `add_range_delete`, `get`, `iter`, `tombstones`, `freeze`). The
//! map is the BP-tree (`crates/bptree`): user key ([`ByteKey`]) -> its versions (`Versions`, newest first;
//! writes arrive in sequence order). That is exactly a byte-string-keyed ordered map: no
//! internal-key escaping is needed and one lookup finds every version of a key. The map is the concurrent BP-tree
//! ([`ConcurrentBpTree`], per-node reader-writer locks): the one writer (the write-group leader) locks only the
//! leaf it inserts into, so readers never wait for a whole insert, nor for a writer the scheduler preempted
//! inside one (with a tree-wide lock, every lookup stalled behind a preempted writer for a scheduling quantum,
//! milliseconds on a busy machine: the readwhilewriting tail). [`MemTable::freeze`] marks the memtable
//! immutable; the flush's scan sorts each leaf once, under that leaf's lock.
//!
//! Range tombstones live beside the map (the "separate memtable structure" of RocksDB): the raw list plus the
//! fragmented list, updated in place by each range delete (`Fragments::insert`) so lookups never refragment.
//!
//! Iterators never hold the lock between calls: each refill takes a short read lock, copies the next
//! [`ITER_BATCH`] keys' versions from a BP-tree range, and serves `next`/`prev` from that buffer. Buffered entries
//! cannot go stale for the iterator's snapshot: anything inserted later has a larger sequence number.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use bptree::{ByteKey, ConcurrentBpTree};

use crate::error::Result;
use crate::ikey::{self, Kind};
use crate::iter::InternalIter;
use crate::tombstones::{Fragments, Tombstone};

mod versions;
pub(crate) use versions::Versions;
#[cfg(test)]
use versions::{Chain, SEGMENT_MAX, VERSION_HEADER};

/// User keys an iterator copies per refill.
pub const ITER_BATCH: usize = 64;

/// Per range tombstone, the vector slots of its raw copy and of about one fragment.
const TOMBSTONE_SLOTS: usize = 2 * std::mem::size_of::<Tombstone>();

/// The concurrent BP-tree with a `Debug` that prints its size (the tree's own has none).
struct Map(ConcurrentBpTree<ByteKey, Versions>);

impl std::ops::Deref for Map {
    type Target = ConcurrentBpTree<ByteKey, Versions>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::fmt::Debug for Map {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConcurrentBpTree({} keys)", self.0.len())
    }
}

/// One memtable.
#[derive(Debug)]
pub struct MemTable {
    map: Map,
    /// Raw tombstones (for counting) and the fragmented list, kept current incrementally (copy-on-write when an
    /// iterator still holds the previous list).
    tombs: RwLock<(Vec<Tombstone>, Arc<Fragments>)>,
    /// Approximate bytes of the range tombstones (raw and fragmented).
    tomb_bytes: AtomicUsize,
    /// The empty tree's `memory_usage`, not charged (see `approx_size`).
    empty_bytes: usize,
    entries: AtomicUsize,
    /// The sequence number of the first entry or range tombstone added (`u64::MAX` while empty): entries arrive
    /// in sequence order, so it is the smallest this memtable holds.
    first_seq: AtomicU64,
    frozen: AtomicBool,
    /// The WAL file that holds this memtable's writes.
    pub log_number: u64,
}

impl MemTable {
    /// An empty memtable whose writes are logged in WAL `log_number`.
    pub fn new(log_number: u64) -> Self {
        let map = Map(ConcurrentBpTree::new());
        MemTable {
            empty_bytes: map.memory_usage(),
            map,
            tombs: RwLock::new((Vec::new(), Arc::new(Fragments::default()))),
            tomb_bytes: AtomicUsize::new(0),
            entries: AtomicUsize::new(0),
            first_seq: AtomicU64::new(u64::MAX),
            frozen: AtomicBool::new(false),
            log_number,
        }
    }

    /// Adds a point entry: one tree operation (`upsert`) puts the new version in front of the key's list.
    /// REQUIRES: not frozen; `seq` larger than any seq added before for `key` (entries are added in sequence
    /// order: by the write-group leader, or by recovery).
    pub fn add(&self, seq: u64, kind: Kind, key: &[u8], value: &[u8]) {
        debug_assert!(!self.frozen.load(Ordering::Acquire), "write to a frozen memtable");
        self.note_seq(seq);
        let t = ikey::pack(seq, kind);
        self.map.upsert(
            &ByteKey::probe(key),
            |vs| vs.push(t, value),
            || (ByteKey::new(key), Versions::first(t, value)),
        );
        self.entries.fetch_add(1, Ordering::Relaxed);
    }

    /// Records `seq` as the first if nothing was added before (one writer adds, in sequence order).
    #[inline]
    fn note_seq(&self, seq: u64) {
        if self.first_seq.load(Ordering::Relaxed) == u64::MAX {
            self.first_seq.store(seq, Ordering::Release);
        }
    }

    /// The smallest sequence number added, if any was.
    pub fn first_seq(&self) -> Option<u64> {
        Some(self.first_seq.load(Ordering::Acquire)).filter(|&s| s != u64::MAX)
    }

    /// Adds a range tombstone `[start, end) @ seq`.
    pub fn add_range_delete(&self, seq: u64, start: &[u8], end: &[u8]) {
        self.note_seq(seq);
        let mut t = self.tombs.write().unwrap_or_else(|p| p.into_inner());
        t.0.push(Tombstone { start: start.to_vec(), end: end.to_vec(), seq });
        Arc::make_mut(&mut t.1).insert(start, end, seq);
        // The raw copy plus about as much again in fragments (a fragment holds a start, an end and its
        // sequences), with the vector slots of both.
        self.tomb_bytes.fetch_add(2 * (start.len() + end.len()) + TOMBSTONE_SLOTS, Ordering::Relaxed);
    }

    /// The fragmented range tombstones.
    pub fn tombstones(&self) -> Arc<Fragments> {
        self.tombs.read().unwrap_or_else(|p| p.into_inner()).1.clone()
    }

    /// Number of raw range tombstones.
    pub fn num_tombstones(&self) -> usize {
        self.tombs.read().unwrap_or_else(|p| p.into_inner()).0.len()
    }

    /// The newest version of `key` with seq <= `snapshot`: `(seq, kind, value)`.
    pub fn get(&self, key: &[u8], snapshot: u64) -> Option<(u64, Kind, Vec<u8>)> {
        self.map
            .get_with(&ByteKey::probe(key), |v| {
                let (t, val) = v.iter().find(|(t, _)| t >> 8 <= snapshot)?;
                Some((t >> 8, Kind::from_u8((t & 0xff) as u8)?, val.to_vec()))
            })
            .flatten()
    }

    /// Bytes used by what was added: the BP-tree's own count of its nodes and of every key's and version list's
    /// allocation (kept incrementally by the tree) above the empty tree's, plus the range tombstones. This is what
    /// is compared with `write_buffer_size`, as RocksDB compares its arena's allocated bytes. The empty tree (its
    /// root leaf) is left out: with a budget of a few KiB it alone would reach the limit, and every write would
    /// switch to another empty memtable. An empty memtable is therefore 0.
    pub fn approx_size(&self) -> usize {
        self.map.memory_usage().saturating_sub(self.empty_bytes) + self.tomb_bytes.load(Ordering::Relaxed)
    }

    /// Whether nothing (no entry, no tombstone) was added.
    pub fn is_empty(&self) -> bool {
        self.entries.load(Ordering::Relaxed) == 0 && self.num_tombstones() == 0
    }

    /// Point entries added.
    pub fn num_entries(&self) -> usize {
        self.entries.load(Ordering::Relaxed)
    }

    /// Makes the memtable immutable (no structural change: readers are never blocked by a freeze; the first
    /// full scan, the flush, leaves every leaf sorted).
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::Release);
    }

    /// A cursor over the point entries in internal-key order.
    pub fn iter(self: &Arc<Self>) -> MemIter {
        MemIter { mem: self.clone(), visible: None, buf: Vec::new(), pos: 0 }
    }

    /// A cursor over, for each user key, only its newest entry at or below sequence `snapshot`, in internal-key
    /// order: what a reader at `snapshot` can see of this memtable. Every older entry of the key is hidden by
    /// that one (tables and older memtables hold only older entries of it), and newer ones are invisible, so a
    /// user iterator loses nothing; a key with thousands of versions here costs its scans one entry, not all.
    pub fn iter_visible(self: &Arc<Self>, snapshot: u64) -> MemIter {
        MemIter { mem: self.clone(), visible: Some(snapshot), buf: Vec::new(), pos: 0 }
    }
}

/// A cursor over a memtable that copies a batch of entries per short read lock.
#[derive(Debug)]
pub struct MemIter {
    mem: Arc<MemTable>,
    /// `Some(s)`: only each key's newest entry at or below sequence `s` ([`MemTable::iter_visible`]).
    visible: Option<u64>,
    /// Encoded internal keys and values, ascending; current = `buf[pos]`.
    buf: Vec<(Vec<u8>, Box<[u8]>)>,
    pos: usize,
}

fn ik(uk: &[u8], t: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(uk.len() + 8);
    k.extend_from_slice(uk);
    k.extend_from_slice(&t.to_le_bytes());
    k
}

/// The entries of a key a cursor shows, newest first: all, or the newest at or below the snapshot.
fn shown(vs: &Versions, visible: Option<u64>) -> impl Iterator<Item = (u64, &[u8])> {
    let (s, n) = visible.map_or((u64::MAX, usize::MAX), |s| (s, 1));
    vs.iter().filter(move |(t, _)| t >> 8 <= s).take(n)
}

impl MemIter {
    /// Fills with the entries at or after (`after` = strictly after) `(uk, t)`; `None` = from the start.
    fn fill_forward(&mut self, from: Option<(&[u8], u64)>, after: bool) {
        self.buf.clear();
        self.pos = 0;
        let mem = self.mem.clone();
        let (buf, visible) = (&mut self.buf, self.visible);
        // A batch of keys may show nothing at the snapshot: then the next batch, until an entry or the end.
        let mut last: Vec<u8> = Vec::new();
        let mut first_batch = true;
        loop {
            let lo = match from {
                _ if !first_batch => Bound::Excluded(last.as_slice()),
                Some((uk, _)) => Bound::Included(uk),
                None => Bound::Unbounded,
            };
            let mut seen = Vec::new();
            let n = mem.map.iterate_range(lo, ITER_BATCH, |k, vs| {
                let kb = k.as_bytes();
                if visible.is_some() {
                    // Only a filtered batch can come back empty and need its last key (a flush's never does).
                    seen.clear();
                    seen.extend_from_slice(kb);
                }
                for (vt, v) in shown(vs, visible) {
                    if let Some((uk, t)) = from
                        && kb == uk
                        && (if after { vt >= t } else { vt > t })
                    {
                        continue;
                    }
                    buf.push((ik(kb, vt), Box::from(v)));
                }
            });
            if !buf.is_empty() || n < ITER_BATCH || visible.is_none() {
                return;
            }
            last = seen;
            first_batch = false;
        }
    }

    /// Fills with the entries strictly before `(uk, t)` (`None` = from the end); positions at the last.
    fn fill_backward(&mut self, before: Option<(&[u8], u64)>) {
        self.buf.clear();
        let mem = self.mem.clone();
        let mut hi = match before {
            Some((uk, _)) => Bound::Included(ByteKey::new(uk)),
            None => Bound::Unbounded,
        };
        // Collected in descending internal order, reversed at the end. A batch of keys may show nothing at the
        // snapshot: then the batch before it, until an entry or the start.
        loop {
            let mut n = 0;
            let mut lowest = None;
            for (k, vs) in mem.map.range((Bound::Unbounded, hi.clone())).rev().take(ITER_BATCH) {
                n += 1;
                let kb = k.as_bytes();
                // Oldest first: the whole buffer is reversed at the end.
                let start = self.buf.len();
                for (vt, v) in shown(&vs, self.visible) {
                    if let Some((uk, t)) = before
                        && kb == uk
                        && vt <= t
                    {
                        continue;
                    }
                    self.buf.push((ik(kb, vt), Box::from(v)));
                }
                self.buf[start..].reverse();
                lowest = Some(k);
            }
            match lowest {
                Some(k) if self.buf.is_empty() && n == ITER_BATCH => hi = Bound::Excluded(k),
                _ => break,
            }
        }
        self.buf.reverse();
        self.pos = self.buf.len().saturating_sub(1);
    }
}

impl InternalIter for MemIter {
    fn valid(&self) -> bool {
        self.pos < self.buf.len()
    }

    fn seek_to_first(&mut self) {
        self.fill_forward(None, false);
    }

    fn seek_to_last(&mut self) {
        self.fill_backward(None);
    }

    fn seek(&mut self, target: &[u8]) {
        if target.len() < 8 {
            self.seek_to_first();
            return;
        }
        self.fill_forward(Some((ikey::user_key(target), ikey::trailer(target))), false);
    }

    fn next(&mut self) {
        self.pos += 1;
        if self.pos >= self.buf.len()
            && let Some((k, _)) = self.buf.last()
        {
            let k = k.clone();
            self.fill_forward(Some((ikey::user_key(&k), ikey::trailer(&k))), true);
        }
    }

    fn prev(&mut self) {
        if self.pos > 0 && self.pos < self.buf.len() {
            self.pos -= 1;
            return;
        }
        if let Some((k, _)) = self.buf.get(self.pos).or(self.buf.first()) {
            let k = k.clone();
            self.fill_backward(Some((ikey::user_key(&k), ikey::trailer(&k))));
            if self.buf.is_empty() {
                self.pos = 0;
            }
        }
    }

    fn key(&self) -> &[u8] {
        &self.buf[self.pos].0
    }

    fn value(&self) -> &[u8] {
        &self.buf[self.pos].1
    }

    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bptree::HeapSize;
    use rand::Rng;

    /// Every key from the first on.
    fn collect_forward(it: &mut MemIter) -> Vec<Vec<u8>> {
        it.seek_to_first();
        let mut got = Vec::new();
        while it.valid() {
            got.push(it.key().to_vec());
            it.next();
        }
        got
    }

    /// `steps` random `next`/`prev` steps from `want[pos]`, checking the key at each.
    fn random_walk(it: &mut MemIter, want: &[Vec<u8>], mut pos: usize, steps: usize, rng: &mut impl Rng) {
        for _ in 0..steps {
            assert_eq!(it.key(), &want[pos][..]);
            if rng.random_bool(0.5) && pos + 1 < want.len() {
                it.next();
                pos += 1;
            } else if pos > 0 {
                it.prev();
                pos -= 1;
            }
        }
    }

    #[test]
    fn versions_iterate_in_internal_order_both_ways() {
        let m = Arc::new(MemTable::new(1));
        m.add(1, Kind::Value, b"b", b"b1");
        m.add(2, Kind::Value, b"a", b"a2");
        m.add(3, Kind::Delete, b"b", b"");
        m.add(4, Kind::Value, b"c", b"c4");
        let mut it = m.iter();
        it.seek_to_first();
        let mut fwd = Vec::new();
        while it.valid() {
            fwd.push(it.key().to_vec());
            it.next();
        }
        let want = vec![
            ikey::make(b"a", 2, Kind::Value),
            ikey::make(b"b", 3, Kind::Delete),
            ikey::make(b"b", 1, Kind::Value),
            ikey::make(b"c", 4, Kind::Value),
        ];
        assert_eq!(fwd, want);
        it.seek_to_last();
        let mut rev = Vec::new();
        while it.valid() {
            rev.push(it.key().to_vec());
            it.prev();
        }
        rev.reverse();
        assert_eq!(rev, want);
        it.seek(&ikey::make(b"b", 2, ikey::SEEK_KIND));
        assert_eq!(it.key(), &want[2][..]);
        assert_eq!(m.get(b"b", 2).map(|x| x.2), Some(b"b1".to_vec()));
        assert_eq!(m.get(b"b", 3).map(|x| x.1), Some(Kind::Delete));
        assert_eq!(m.get(b"a", 1), None);
    }

    /// Regression: charging the empty tree's root leaf made a memtable with a few-KiB budget full before its first
    /// write, and the write path switched memtables forever.
    #[test]
    fn empty_memtable_is_charged_nothing() {
        let m = MemTable::new(1);
        assert_eq!(m.approx_size(), 0);
        m.add(1, Kind::Value, b"0123456789abcdef", &[1u8; 100]);
        let one = m.approx_size();
        // At least the value and its 8-byte trailer (a 16-byte key lives inside the leaf's slot, no heap).
        assert!((108..1024).contains(&one), "one 16+100-byte entry charged {one} bytes");
        m.add_range_delete(2, b"a", b"b");
        assert!(m.approx_size() > one);
    }

    /// Regression: each new version of a key copied the key's whole version list, so a key updated `n` times in
    /// one memtable cost `O(n^2)` bytes copied (32,000 updates of one key took 37 s). Every version stays
    /// readable at its sequence number, in order both ways, and the list's charged size stays its real one.
    #[test]
    fn regression_hot_key_updates_copy_a_bounded_segment() {
        let m = Arc::new(MemTable::new(1));
        let value = |i: u64| format!("value-{i}").repeat(1 + (i % 7) as usize).into_bytes();
        let n = 5_000u64;
        let mut sizes = 0;
        for i in 1..=n {
            m.add(i, Kind::Value, b"hot", &value(i));
            sizes += VERSION_HEADER + value(i).len();
        }
        m.add(n + 1, Kind::Value, b"cold", b"c");
        m.map.get_with(&ByteKey::probe(b"hot"), |vs| {
            let Versions::Chain(c) = vs else { panic!("5,000 versions in one segment") };
            assert!(
                c.newest.len() <= SEGMENT_MAX + VERSION_HEADER + value(n).len(),
                "{} bytes",
                c.newest.len()
            );
            // Every segment's bytes and a node per segment in front of the last: the charged size is the real one.
            let mut chains = 1;
            let mut at = &c.older;
            while let Versions::Chain(c) = at {
                chains += 1;
                at = &c.older;
            }
            assert_eq!(vs.heap_size(), sizes + chains * std::mem::size_of::<Chain>());
            assert!(chains > 100, "{chains} segments");
            let got: Vec<u64> = vs.iter().map(|(t, _)| t >> 8).collect();
            assert_eq!(got, (1..=n).rev().collect::<Vec<_>>());
            let copy = vs.clone();
            assert!(matches!(copy, Versions::Flat(_)));
            assert!(copy.iter().eq(vs.iter()));
        });
        for i in [1, 2, 777, n / 2, n - 1, n] {
            assert_eq!(m.get(b"hot", i).map(|x| (x.0, x.2)), Some((i, value(i))), "at {i}");
        }
        let mut it = m.iter();
        it.seek_to_last();
        let mut back = Vec::new();
        while it.valid() {
            back.push(ikey::parse(it.key()).map(|p| p.seq).unwrap_or(0));
            it.prev();
        }
        // `cold` sorts first; `hot`'s versions newest first.
        let want: Vec<u64> = std::iter::once(n + 1).chain((1..=n).rev()).collect();
        back.reverse();
        assert!(back == want, "backward iteration over a chained list: {} entries", back.len());
    }

    #[test]
    fn visible_cursor_shows_each_keys_newest_entry_at_its_snapshot() {
        use rand::SeedableRng;
        let m = Arc::new(MemTable::new(1));
        let mut rng = rand::rngs::SmallRng::seed_from_u64(8);
        let mut all = Vec::new();
        for seq in 1..4000u64 {
            // A few hot keys among many cold ones: lists long enough to be chained, and keys with one version.
            let k = if rng.random_bool(0.3) {
                format!("k{:04}", 10 * rng.random_range(0..5)).into_bytes()
            } else {
                format!("k{:04}", rng.random_range(0..300)).into_bytes()
            };
            let kind = if seq % 7 == 0 { Kind::Delete } else { Kind::Value };
            m.add(seq, kind, &k, &seq.to_be_bytes().repeat(8));
            all.push(ikey::make(&k, seq, kind));
        }
        all.sort_by(|a, b| ikey::cmp(a, b));
        for snapshot in [0, 1, 700, 2500, 3999, u64::MAX >> 8] {
            // Per user key, its first (newest) entry at or below the snapshot.
            let mut want: Vec<Vec<u8>> = Vec::new();
            for e in all.iter().filter(|e| ikey::parse(e).is_some_and(|p| p.seq <= snapshot)) {
                if want.last().is_none_or(|w| ikey::user_key(w) != ikey::user_key(e)) {
                    want.push(e.clone());
                }
            }
            let mut it = m.iter_visible(snapshot);
            let got = collect_forward(&mut it);
            assert!(got == want, "forward at {snapshot}: {} entries, {} wanted", got.len(), want.len());
            if want.is_empty() {
                continue;
            }
            // Seeks to any internal key land on the first shown entry at or after it; then a random walk.
            for _ in 0..200 {
                let target = &all[rng.random_range(0..all.len())];
                let pos = want.partition_point(|w| ikey::cmp(w, target) == std::cmp::Ordering::Less);
                it.seek(target);
                if pos == want.len() {
                    assert!(!it.valid());
                    continue;
                }
                random_walk(&mut it, &want, pos, 20, &mut rng);
            }
            it.seek_to_last();
            assert_eq!(it.key(), &want[want.len() - 1][..]);
        }
    }

    #[test]
    fn buffered_cursor_matches_sorted_reference_across_refills() {
        use rand::SeedableRng;
        let m = Arc::new(MemTable::new(1));
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut all = Vec::new();
        for seq in 1..3000u64 {
            let k = format!("k{:04}", rng.random_range(0..700)).into_bytes();
            let kind = if seq % 5 == 0 { Kind::Delete } else { Kind::Value };
            m.add(seq, kind, &k, &seq.to_le_bytes());
            all.push(ikey::make(&k, seq, kind));
        }
        all.sort_by(|a, b| ikey::cmp(a, b));
        for frozen in [false, true] {
            if frozen {
                m.freeze();
            }
            let mut it = m.iter();
            assert_eq!(collect_forward(&mut it), all);
            it.seek(&all[1234]);
            random_walk(&mut it, &all, 1234, 5000, &mut rng);
            it.seek_to_last();
            assert_eq!(it.key(), &all[all.len() - 1][..]);
            it.seek_to_first();
            it.prev();
            assert!(!it.valid());
        }
    }
}
