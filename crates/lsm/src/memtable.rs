//! The memtable: recent writes in memory, ordered, readable while being written.
//!
//! The engine sees only this module's API (`add`, `add_range_delete`, `get`, `iter`, `tombstones`, `freeze`), so
//! the ordered map inside can change without touching the engine. It maps each user key to its versions
//! (trailer ascending, i.e. oldest first, since writes arrive in sequence order), which is exactly the shape of a
//! byte-string-keyed ordered map: no internal-key escaping is needed and a seek by user key finds all versions.
//!
//! The map is `std::collections::BTreeMap` behind a `RwLock` until the BP-tree (`crates/bptree`) lands on main;
//! swapping it in changes only `Map` below (see docs/lsm.md, "Memtable").
//!
//! Range tombstones live beside the map (the "separate memtable structure" of RocksDB): the raw list plus a
//! fragmented copy rebuilt lazily after a new range delete, as RocksDB caches its fragmented memtable list.
//!
//! Iterators do not hold the lock: each step re-seeks from the last returned internal key under a short read lock,
//! so writers never wait for a slow scan. A frozen (immutable) memtable takes no more writes.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use crate::error::Result;
use crate::ikey::{self, Kind};
use crate::iter::InternalIter;
use crate::tombstones::{Fragments, Tombstone};

type Versions = Vec<(u64, Vec<u8>)>;
type Map = BTreeMap<Vec<u8>, Versions>;

/// Per-entry bookkeeping overhead charged to the memtable size (node and vector headers).
const ENTRY_OVERHEAD: usize = 48;

/// One memtable.
#[derive(Debug)]
pub struct MemTable {
    map: RwLock<Map>,
    tombs: RwLock<(Vec<Tombstone>, Option<Arc<Fragments>>)>,
    size: AtomicUsize,
    entries: AtomicUsize,
    frozen: AtomicBool,
    /// The WAL file that holds this memtable's writes.
    pub log_number: u64,
}

impl MemTable {
    /// An empty memtable whose writes are logged in WAL `log_number`.
    pub fn new(log_number: u64) -> Self {
        MemTable {
            map: RwLock::new(Map::new()),
            tombs: RwLock::new((Vec::new(), Some(Arc::new(Fragments::default())))),
            size: AtomicUsize::new(0),
            entries: AtomicUsize::new(0),
            frozen: AtomicBool::new(false),
            log_number,
        }
    }

    /// Adds a point entry. REQUIRES: not frozen; `seq` larger than any seq added before for `key`.
    pub fn add(&self, seq: u64, kind: Kind, key: &[u8], value: &[u8]) {
        debug_assert!(!self.frozen.load(Ordering::Relaxed));
        let mut m = self.map.write().unwrap_or_else(|p| p.into_inner());
        let t = ikey::pack(seq, kind);
        match m.get_mut(key) {
            Some(v) => v.push((t, value.to_vec())),
            None => {
                m.insert(key.to_vec(), vec![(t, value.to_vec())]);
            }
        }
        self.size.fetch_add(key.len() + value.len() + ENTRY_OVERHEAD, Ordering::Relaxed);
        self.entries.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds a range tombstone `[start, end) @ seq`.
    pub fn add_range_delete(&self, seq: u64, start: &[u8], end: &[u8]) {
        let mut t = self.tombs.write().unwrap_or_else(|p| p.into_inner());
        t.0.push(Tombstone { start: start.to_vec(), end: end.to_vec(), seq });
        t.1 = None;
        self.size.fetch_add(start.len() + end.len() + ENTRY_OVERHEAD, Ordering::Relaxed);
    }

    /// The fragmented range tombstones (cached until the next range delete).
    pub fn tombstones(&self) -> Arc<Fragments> {
        if let Some(f) = &self.tombs.read().unwrap_or_else(|p| p.into_inner()).1 {
            return f.clone();
        }
        let mut t = self.tombs.write().unwrap_or_else(|p| p.into_inner());
        if t.1.is_none() {
            t.1 = Some(Arc::new(Fragments::new(&t.0)));
        }
        t.1.clone().unwrap_or_default()
    }

    /// Number of raw range tombstones.
    pub fn num_tombstones(&self) -> usize {
        self.tombs.read().unwrap_or_else(|p| p.into_inner()).0.len()
    }

    /// The newest version of `key` with seq <= `snapshot`: `(seq, kind, value)`.
    pub fn get(&self, key: &[u8], snapshot: u64) -> Option<(u64, Kind, Vec<u8>)> {
        let m = self.map.read().unwrap_or_else(|p| p.into_inner());
        let v = m.get(key)?;
        let (t, val) = v.iter().rev().find(|(t, _)| t >> 8 <= snapshot)?;
        Some((t >> 8, Kind::from_u8((t & 0xff) as u8)?, val.clone()))
    }

    /// Approximate bytes used.
    pub fn approx_size(&self) -> usize {
        self.size.load(Ordering::Relaxed)
    }

    /// Whether nothing (no entry, no tombstone) was added.
    pub fn is_empty(&self) -> bool {
        self.entries.load(Ordering::Relaxed) == 0 && self.num_tombstones() == 0
    }

    /// Point entries added.
    pub fn num_entries(&self) -> usize {
        self.entries.load(Ordering::Relaxed)
    }

    /// Marks the memtable immutable.
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::Release);
    }

    /// A cursor over the point entries in internal-key order.
    pub fn iter(self: &Arc<Self>) -> MemIter {
        MemIter { mem: self.clone(), key: Vec::new(), value: Vec::new(), valid: false }
    }
}

/// A cursor over a memtable that re-seeks under a short read lock at every step.
#[derive(Debug)]
pub struct MemIter {
    mem: Arc<MemTable>,
    key: Vec<u8>,
    value: Vec<u8>,
    valid: bool,
}

impl MemIter {
    fn set(&mut self, uk: &[u8], t: u64, v: &[u8]) {
        self.key.clear();
        self.key.extend_from_slice(uk);
        self.key.extend_from_slice(&t.to_le_bytes());
        self.value.clear();
        self.value.extend_from_slice(v);
        self.valid = true;
    }

    /// Positions at the first entry with internal key > (uk, t) when `after`, else >= (uk, t).
    fn seek_from(&mut self, uk: &[u8], t: u64, after: bool) {
        let mem = self.mem.clone();
        let m = mem.map.read().unwrap_or_else(|p| p.into_inner());
        if let Some(vs) = m.get(uk) {
            // Versions are trailer-ascending; internal order is trailer-descending.
            let found = vs.iter().rev().find(|(vt, _)| if after { *vt < t } else { *vt <= t });
            if let Some((vt, v)) = found {
                self.set(uk, *vt, v);
                return;
            }
        }
        match m.range::<[u8], _>((Bound::Excluded(uk), Bound::Unbounded)).next() {
            Some((k, vs)) => match vs.last() {
                Some((vt, v)) => self.set(k, *vt, v),
                None => self.valid = false,
            },
            None => self.valid = false,
        }
    }
}

impl InternalIter for MemIter {
    fn valid(&self) -> bool {
        self.valid
    }

    fn seek_to_first(&mut self) {
        let mem = self.mem.clone();
        let m = mem.map.read().unwrap_or_else(|p| p.into_inner());
        match m.iter().next().and_then(|(k, vs)| vs.last().map(|x| (k, x))) {
            Some((k, (t, v))) => self.set(k, *t, v),
            None => self.valid = false,
        }
    }

    fn seek_to_last(&mut self) {
        let mem = self.mem.clone();
        let m = mem.map.read().unwrap_or_else(|p| p.into_inner());
        match m.iter().next_back().and_then(|(k, vs)| vs.first().map(|x| (k, x))) {
            Some((k, (t, v))) => self.set(k, *t, v),
            None => self.valid = false,
        }
    }

    fn seek(&mut self, target: &[u8]) {
        if target.len() < 8 {
            self.seek_to_first();
            return;
        }
        self.seek_from(ikey::user_key(target), ikey::trailer(target), false);
    }

    fn next(&mut self) {
        let k = std::mem::take(&mut self.key);
        self.seek_from(ikey::user_key(&k), ikey::trailer(&k), true);
    }

    fn prev(&mut self) {
        let k = std::mem::take(&mut self.key);
        let (uk, t) = (ikey::user_key(&k), ikey::trailer(&k));
        let mem = self.mem.clone();
        let m = mem.map.read().unwrap_or_else(|p| p.into_inner());
        if let Some(vs) = m.get(uk)
            && let Some((vt, v)) = vs.iter().find(|(vt, _)| *vt > t)
        {
            self.set(uk, *vt, v);
            return;
        }
        match m.range::<[u8], _>((Bound::Unbounded, Bound::Excluded(uk))).next_back() {
            Some((k, vs)) => match vs.first() {
                Some((vt, v)) => self.set(k, *vt, v),
                None => self.valid = false,
            },
            None => self.valid = false,
        }
    }

    fn key(&self) -> &[u8] {
        &self.key
    }

    fn value(&self) -> &[u8] {
        &self.value
    }

    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
