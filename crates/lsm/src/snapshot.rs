//! Snapshots: a read view at one sequence number, kept by the store until its handle drops.
//!
//! The store counts its live snapshots by sequence number; compactions keep, for every live snapshot, the newest
//! version of each key at or below it (`docs/lsm.md` §5). A handle holds the count list, not the store, so
//! releasing one never keeps a closing store alive (regression
//! `regression_a_snapshot_dropped_beside_close_does_not_keep_the_store_locked`). A read names its snapshot by
//! handle ([`ReadOptions::snapshot`](crate::ReadOptions::snapshot)), never by bare number: a number no live
//! snapshot protects could name versions a compaction has already dropped, and the read would return a
//! silently wrong answer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Live snapshots of one open store: sequence -> count. Lock order: the store's state lock before this one.
pub(crate) type SnapshotList = Arc<Mutex<BTreeMap<u64, usize>>>;

/// A consistent read view; released when dropped.
#[derive(Debug)]
pub struct Snapshot {
    seq: u64,
    list: SnapshotList,
}

impl Snapshot {
    /// Registers a snapshot at `seq` in `list`.
    ///
    /// REQUIRES: the caller holds the store's state lock, so a compaction computing the oldest snapshot either
    /// sees this one or used a sequence no larger than `seq`.
    pub(crate) fn register(list: &SnapshotList, seq: u64) -> Snapshot {
        *list.lock().unwrap_or_else(|p| p.into_inner()).entry(seq).or_default() += 1;
        Snapshot { seq, list: list.clone() }
    }

    /// The snapshot's sequence number: a read at this snapshot sees every write numbered at or below it.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Whether the snapshot was taken from the store that owns `list`.
    pub(crate) fn belongs_to(&self, list: &SnapshotList) -> bool {
        Arc::ptr_eq(&self.list, list)
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        // Released without the state lock: a compaction that read the list before this only keeps more.
        let mut l = self.list.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = l.get_mut(&self.seq) {
            *c -= 1;
            if *c == 0 {
                l.remove(&self.seq);
            }
        }
    }
}
