//! Snapshots: reads of the store as it was at one moment, while writes go on.
//!
//! # Design
//!
//! FlexDB keeps one version of each key: the memtables overwrite in place and the committer rewrites the table
//! in place, so there is no older version to read later, as an LSM tree has until compaction drops it. A
//! snapshot therefore keeps *pre-images*: before a write changes what a key reads as, the key's value as it
//! reads just before the write (or its absence) is copied into the newest live snapshot, unless that snapshot
//! already holds the key. Snapshots form a chain, oldest first; snapshot `i` reads key `k` as
//!
//! ```text
//! V(i, k) = pre-image of k in snapshot i, if it holds one
//!         = V(i + 1, k) otherwise,           with V(newest + 1, k) = the store's current value of k
//! ```
//!
//! because a key written between snapshot `i` and snapshot `i + 1` got its pre-image in `i` (it was the newest
//! then), and a key not written in that span read the same at both. Releasing snapshot `i` merges its
//! pre-images into `i - 1` where that one holds none for the key (the older pre-image is the older value); the
//! oldest one's are dropped. Only writes pay: nothing changes for the committer, which never changes what a key
//! reads as, nor for reads without a snapshot.
//!
//! What must hold:
//! - Every change to what a key reads as is preceded by recording its pre-image, and the record and the change
//!   are atomic against taking a snapshot. Writers serialize on the WAL writer lock, so the current values a
//!   writer reads for its pre-images stay current until it applies its batch; it records them under the
//!   memtable write lock it applies under, and [`Db::snapshot`] registers under the memtable read lock. A writer
//!   that finds a snapshot was taken since it read its pre-images reads them again.
//! - A snapshot read reads the current value first and the chain after. A write it raced with recorded the
//!   pre-image before it changed the value, so when the read saw the new value it finds the pre-image.
//!
//! Costs: while a snapshot is live, each written key not yet held by the newest snapshot costs one point read
//! before the write, and a range delete reads every live key it covers; the pre-images stay in memory until
//! their snapshot and every older one are released (`Stats::snapshot_preimage_bytes`). Snapshots do not survive
//! a reopen, as in RocksDB.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::error::{Error, Result};
use crate::wal::Op;

use super::{Db, Inner, Pair};

/// A pre-image: the key's value when the snapshot was taken, or `None` when it had none.
type Preimage = Option<Vec<u8>>;

/// A live snapshot: its id and the pre-images it holds.
type Live = (u64, BTreeMap<Vec<u8>, Preimage>);

/// A handle on a snapshot, from [`Db::snapshot`]; pass it to [`Db::get_at`], [`Db::scan_at`] or
/// [`Db::iter_at`]. Dropping it releases the snapshot.
///
/// FlexDB updates in place, so a snapshot keeps the values it needs in memory: while one is live, every write
/// first copies the current value of each key it changes (one point read; a range delete reads every live key
/// it covers) unless the newest snapshot holds that key already, and the copies stay until their snapshot and
/// every older one are released (`Stats::snapshot_preimage_bytes`). Snapshots do not survive a reopen.
pub struct Snapshot {
    id: u64,
    /// Only the list, not the store: a handle dropped while the store closes must not hold the store itself
    /// (regression `regression_dropping_a_snapshot_beside_close_does_not_fail_the_close`).
    list: Arc<SnapshotList>,
}

impl Snapshot {
    /// The snapshot's number, increasing with each snapshot a store takes.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut s = self.list.state.write();
        s.release(self.id);
        self.list.word.store(s.word(), Ordering::SeqCst);
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("id", &self.id).finish()
    }
}

/// A store's snapshots, shared with their handles.
#[derive(Default)]
pub(super) struct SnapshotList {
    pub(super) state: RwLock<Snapshots>,
    /// `state.word()`, stored under the `state` write lock.
    word: AtomicU64,
}

/// The live snapshots of a store, oldest first, each with its pre-images.
#[derive(Default)]
pub(super) struct Snapshots {
    /// The id of the newest snapshot ever taken (0: none): writers compare it to see whether one was taken.
    last_id: u64,
    /// A deque: snapshots are mostly released oldest or newest first.
    live: VecDeque<Live>,
    /// Pre-images held, and their key and value bytes.
    pub(super) preimages: u64,
    pub(super) preimage_bytes: u64,
}

/// Pre-images read by a writer before its batch, with the snapshot generation they were read for.
pub(super) struct Capture {
    last_id: u64,
    pre: Vec<(Vec<u8>, Preimage)>,
}

/// Bits of [`Snapshots::word`] that count live snapshots.
const LIVE_BITS: u32 = 20;
const LIVE_MASK: u64 = (1 << LIVE_BITS) - 1;

impl Snapshots {
    pub(super) fn live(&self) -> usize {
        self.live.len()
    }

    /// `last_id` and the live count (saturated) in one word, which `SnapshotList::word` mirrors so that writers
    /// can see without a lock that no snapshot is live and none was taken since they last looked.
    pub(super) fn word(&self) -> u64 {
        self.last_id << LIVE_BITS | (self.live.len() as u64).min(LIVE_MASK)
    }

    /// Records `c` into the newest snapshot, keeping pre-images it already holds. Returns `false`, recording
    /// nothing, when a snapshot was taken after `c` was read: the writer must read its pre-images again.
    pub(super) fn record(&mut self, c: Capture) -> bool {
        if c.last_id != self.last_id {
            return false;
        }
        if let Some((_, newest)) = self.live.back_mut() {
            for (k, v) in c.pre {
                if let std::collections::btree_map::Entry::Vacant(e) = newest.entry(k) {
                    self.preimages += 1;
                    self.preimage_bytes += bytes(e.key(), &v);
                    e.insert(v);
                }
            }
        }
        true
    }

    fn release(&mut self, id: u64) {
        let Ok(i) = self.live.binary_search_by_key(&id, |s| s.0) else { return };
        let Some((_, mut gone)) = self.live.remove(i) else { return };
        if i == 0 {
            self.preimages -= gone.len() as u64;
            self.preimage_bytes -= gone.iter().map(|(k, v)| bytes(k, v)).sum::<u64>();
            return;
        }
        // The older snapshot's pre-images win; merge the smaller map into the larger one.
        let older = &mut self.live[i - 1].1;
        if older.len() < gone.len() {
            std::mem::swap(older, &mut gone);
            for (k, v) in gone {
                let key_len = k.len() as u64;
                if let Some(dropped) = older.insert(k, v) {
                    self.preimages -= 1;
                    self.preimage_bytes -= key_len + dropped.as_ref().map_or(0, |v| v.len() as u64);
                }
            }
        } else {
            for (k, v) in gone {
                match older.entry(k) {
                    std::collections::btree_map::Entry::Occupied(e) => {
                        self.preimages -= 1;
                        self.preimage_bytes -= bytes(e.key(), &v);
                    }
                    std::collections::btree_map::Entry::Vacant(e) => {
                        e.insert(v);
                    }
                }
            }
        }
    }

    /// The live snapshots from `id` to the newest. REQUIRES: `id` is live.
    fn chain(&self, id: u64) -> Result<impl Iterator<Item = &Live>> {
        match self.live.binary_search_by_key(&id, |s| s.0) {
            Ok(i) => Ok(self.live.range(i..)),
            Err(_) => Err(Error::invalid(format!("snapshot {id} is not live in this store"))),
        }
    }
}

fn bytes(k: &[u8], v: &Preimage) -> u64 {
    (k.len() + v.as_ref().map_or(0, Vec::len)) as u64
}

impl Db {
    /// Takes a snapshot of the store: reads through it see every write acknowledged before this call and none
    /// after, until it is dropped. [`Snapshot`] says what a live snapshot costs writers.
    pub fn snapshot(&self) -> Snapshot {
        // Under the memtable lock, so no writer is between recording its pre-images and applying its batch.
        let _m = self.inner.mem.read();
        let list = &self.inner.snaps;
        let mut s = list.state.write();
        s.last_id += 1;
        let id = s.last_id;
        s.live.push_back((id, BTreeMap::new()));
        list.word.store(s.word(), Ordering::SeqCst);
        Snapshot { id, list: list.clone() }
    }

    /// The value `key` had when `snap` was taken.
    pub fn get_at(&self, key: &[u8], snap: &Snapshot) -> Result<Option<Vec<u8>>> {
        self.check_owner(snap)?;
        let current = self.get(key)?;
        let s = self.inner.snaps.state.read();
        for (_, pre) in s.chain(snap.id)? {
            if let Some(v) = pre.get(key) {
                return Ok(v.clone());
            }
        }
        Ok(current)
    }

    /// [`Db::scan`] of the store as it was when `snap` was taken.
    pub fn scan_at(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        reverse: bool,
        snap: &Snapshot,
    ) -> Result<Vec<Pair>> {
        self.check_owner(snap)?;
        if limit == 0 || end.is_some_and(|e| e <= start) {
            return Ok(Vec::new());
        }
        // Each pre-image in the range hides or replaces at most one current pair, so reading `limit` plus
        // their number of current pairs is enough, unless writes add pre-images meanwhile.
        let bounds = (Bound::Included(start), end.map_or(Bound::Unbounded, Bound::Excluded));
        let mut extra: usize = {
            let s = self.inner.snaps.state.read();
            s.chain(snap.id)?.map(|(_, pre)| pre.range::<[u8], _>(bounds).count()).sum()
        };
        loop {
            let want = limit.saturating_add(extra);
            let current = self.scan(start, end, want, reverse)?;
            let overlay = self.overlay(start, end, snap)?;
            // When the current read stopped at `want`, it is known only up to its last key.
            let horizon = (current.len() >= want).then(|| current.last().map(|p| p.0.clone())).flatten();
            let out = merge(current, overlay.iter(), reverse, horizon.as_deref(), limit);
            if out.len() >= limit || horizon.is_none() {
                return Ok(out);
            }
            extra = overlay.len().max(extra.saturating_mul(2));
        }
    }

    /// An iterator over the store as it was when `snap` was taken; see [`Db::iter`]. Unlike that one, it sees
    /// one state of the store however long it runs.
    pub fn iter_at<'a>(
        &'a self,
        start: &[u8],
        end: Option<&[u8]>,
        reverse: bool,
        snap: &'a Snapshot,
    ) -> super::DbIter<'a> {
        let mut it = self.iter(start, end, reverse);
        it.snap = Some(snap);
        it
    }

    fn check_owner(&self, snap: &Snapshot) -> Result<()> {
        if Arc::ptr_eq(&snap.list, &self.inner.snaps) {
            Ok(())
        } else {
            Err(Error::invalid("the snapshot belongs to another store"))
        }
    }

    /// The pre-images in `[start, end)` that `snap` reads, oldest snapshot's first.
    fn overlay(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        snap: &Snapshot,
    ) -> Result<BTreeMap<Vec<u8>, Preimage>> {
        let bounds = (Bound::Included(start), end.map_or(Bound::Unbounded, Bound::Excluded));
        let s = self.inner.snaps.state.read();
        let mut out = BTreeMap::new();
        for (_, pre) in s.chain(snap.id)? {
            for (k, v) in pre.range::<[u8], _>(bounds) {
                out.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        Ok(out)
    }

    /// Reads the pre-images a batch needs (none when no snapshot is live). REQUIRES: the WAL writer lock is
    /// held, so what it reads stays current until the batch is applied.
    pub(super) fn capture(&self, ops: &[Op]) -> Result<Capture> {
        let word = self.inner.snaps.word.load(Ordering::SeqCst);
        if word & LIVE_MASK == 0 {
            return Ok(Capture { last_id: word >> LIVE_BITS, pre: Vec::new() });
        }
        let mut keys: Vec<&[u8]> = Vec::new();
        let mut ranges: Vec<(&[u8], &[u8])> = Vec::new();
        let last_id = {
            let s = self.inner.snaps.state.read();
            let Some((_, newest)) = s.live.back() else {
                return Ok(Capture { last_id: s.last_id, pre: Vec::new() });
            };
            for op in ops {
                match op {
                    Op::Put(k, _) | Op::Delete(k) if !newest.contains_key(&k[..]) => keys.push(k),
                    Op::Put(..) | Op::Delete(_) => {}
                    Op::DeleteRange(a, b) => ranges.push((a, b)),
                }
            }
            s.last_id
        };
        keys.sort_unstable();
        keys.dedup();
        let mut pre = Vec::with_capacity(keys.len());
        for k in keys {
            pre.push((k.to_vec(), self.read_current(k, false)?));
        }
        for (a, b) in ranges {
            self.scan_with(a, Some(b), usize::MAX, false, |k, v| pre.push((k.to_vec(), Some(v.to_vec()))))?;
        }
        Ok(Capture { last_id, pre })
    }
}

impl Inner {
    /// Records a writer's pre-images; see [`Snapshots::record`]. REQUIRES: the memtable write lock is held.
    pub(super) fn record(&self, c: Capture) -> bool {
        // No snapshot is live and none was taken since `c` was read: nothing to record, and no lock to take.
        if c.pre.is_empty() && self.snaps.word.load(Ordering::SeqCst) == c.last_id << LIVE_BITS {
            return true;
        }
        self.snaps.state.write().record(c)
    }
}

/// Merges the current pairs with the pre-images that override them, in scan order, up to `limit` pairs and
/// not past `horizon`.
fn merge<'a>(
    current: Vec<Pair>,
    overlay: impl DoubleEndedIterator<Item = (&'a Vec<u8>, &'a Preimage)>,
    reverse: bool,
    horizon: Option<&[u8]>,
    limit: usize,
) -> Vec<Pair> {
    use std::cmp::Ordering as O;
    let order = |a: &[u8], b: &[u8]| if reverse { b.cmp(a) } else { a.cmp(b) };
    let overlay: Box<dyn Iterator<Item = _>> =
        if reverse { Box::new(overlay.rev()) } else { Box::new(overlay) };
    let mut o = overlay.peekable();
    let mut c = current.into_iter().peekable();
    let mut out = Vec::new();
    while out.len() < limit {
        let which = match (c.peek(), o.peek()) {
            (None, None) => break,
            (Some(_), None) => O::Less,
            (None, Some(_)) => O::Greater,
            (Some(x), Some(y)) => order(&x.0, y.0),
        };
        let pair = match which {
            O::Less => c.next(),
            _ => {
                if which == O::Equal {
                    c.next();
                }
                let Some((k, v)) = o.next() else { break };
                if horizon.is_some_and(|h| order(k, h) == O::Greater) {
                    break;
                }
                v.as_ref().map(|v| (k.clone(), v.clone()))
            }
        };
        out.extend(pair);
    }
    out
}
