//! The contents side of `CrashFs`: one file's current and durable bytes, and the ranges where they may differ.

use std::collections::BTreeMap;
use std::io;

use super::CrashMode;
use crate::Result;
use crate::rng::SplitMix64;

/// The unit in which unsynced writes tear.
pub const SECTOR_SIZE: u64 = 512;

/// A log's reserved space, as a crash may leave it: its length rounds up to a multiple of this, zeros past its
/// last write. (The OS file system reserves `LOG_RESERVATION`; readers cannot tell the sizes apart, and a small
/// one keeps crash tests cheap.)
const LOG_PAD: usize = 64 << 10;

/// Files longer than this skip the per-change invariant check.
#[cfg(any(test, feature = "invariants"))]
const INVARIANT_CHECK_MAX_LEN: usize = 64 << 10;

/// Byte ranges `start..end`, disjoint, non-adjacent, keyed by start.
#[derive(Debug, Default, Clone)]
pub(super) struct Ranges(BTreeMap<u64, u64>);

impl Ranges {
    fn insert(&mut self, mut start: u64, mut end: u64) {
        if start >= end {
            return;
        }
        let touching: Vec<(u64, u64)> =
            self.0.range(..=end).rev().take_while(|&(_, &e)| e >= start).map(|(&s, &e)| (s, e)).collect();
        for (s, e) in touching {
            self.0.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        self.0.insert(start, end);
    }

    /// The sectors the ranges touch, each once, ascending.
    fn sectors(&self) -> impl Iterator<Item = u64> + '_ {
        let mut next = 0u64;
        self.0.iter().flat_map(move |(&s, &e)| {
            let first = (s / SECTOR_SIZE).max(next);
            let last = (e - 1) / SECTOR_SIZE;
            next = last + 1;
            first..=last
        })
    }
}

/// One file's bytes, current and durable. Invariant: outside the dirty and lost ranges the current and the
/// durable bytes agree, in value and in whether the byte exists (see the `crash` module comment).
#[derive(Debug, Default)]
pub(super) struct Inode {
    pub(super) cur: Vec<u8>,
    pub(super) durable: Vec<u8>,
    dirty: Ranges,
    /// Ranges whose writeback failed: marked clean, never made durable by a later sync.
    lost: Ranges,
    /// Made by `create_log`: written to, it reserves space past its last write (zeros), which only a successful
    /// sync cuts.
    pub(super) log: bool,
    /// A log written to since its last successful sync: a crash may leave its reservation.
    reserved: bool,
}

impl Inode {
    pub(super) fn durable_only(bytes: Vec<u8>) -> Self {
        Inode { cur: bytes.clone(), durable: bytes, ..Inode::default() }
    }

    /// A failed sync: the dirty ranges are dropped from writeback, not written.
    pub(super) fn lose_writeback(&mut self) {
        for (s, e) in std::mem::take(&mut self.dirty.0) {
            self.lost.insert(s, e);
        }
        self.check();
    }

    /// Dirty and lost ranges together: where current and durable bytes may differ.
    fn unsettled(&self) -> Ranges {
        let mut all = self.dirty.clone();
        for (&s, &e) in &self.lost.0 {
            all.insert(s, e);
        }
        all
    }

    pub(super) fn write(&mut self, buf: &[u8], off: usize) -> Result<()> {
        let end = off.checked_add(buf.len()).ok_or_else(|| io::Error::other("write end overflows"))?;
        self.dirty.insert(off.min(self.cur.len()) as u64, end as u64);
        self.reserved |= self.log;
        if self.cur.len() < end {
            self.cur.resize(end, 0);
        }
        self.cur[off..end].copy_from_slice(buf);
        self.check();
        Ok(())
    }

    pub(super) fn set_len(&mut self, len: usize) {
        let old = self.cur.len();
        self.dirty.insert(old.min(len) as u64, old.max(len) as u64);
        self.cur.resize(len, 0);
        self.check();
    }

    /// Marks `from..` (up to the longer of the old and new length) dirty around a change that shifts bytes.
    pub(super) fn shift(&mut self, from: usize, change: impl FnOnce(&mut Vec<u8>)) {
        let old = self.cur.len();
        change(&mut self.cur);
        self.dirty.insert(from as u64, old.max(self.cur.len()) as u64);
        self.check();
    }

    pub(super) fn sync(&mut self) {
        self.durable.resize(self.cur.len(), 0);
        for (&s, &e) in &self.dirty.0 {
            let (s, e) = (s as usize, (e as usize).min(self.cur.len()));
            if s < e {
                self.durable[s..e].copy_from_slice(&self.cur[s..e]);
            }
        }
        self.dirty = Ranges::default();
        self.reserved = false;
        self.check();
    }

    /// Checks the invariant: outside the dirty and lost ranges, current and durable bytes agree in value and
    /// existence. Costs a pass over the file, so it runs only with the `invariants` feature, and only on files
    /// up to [`INVARIANT_CHECK_MAX_LEN`] (the feature unifies across a workspace test build, and engine crash
    /// tests must not turn quadratic).
    #[cfg(any(test, feature = "invariants"))]
    fn check(&self) {
        let end = self.cur.len().max(self.durable.len());
        if end > INVARIANT_CHECK_MAX_LEN {
            return;
        }
        let mut at = 0usize;
        let unsettled = self.unsettled();
        let gaps =
            unsettled.0.iter().map(|(&s, &e)| (s as usize, e as usize)).chain(std::iter::once((end, end)));
        for (s, e) in gaps {
            let gap = at..s.min(end);
            if !gap.is_empty() {
                assert!(
                    self.cur.get(gap.clone()) == self.durable.get(gap.clone()),
                    "CrashFs invariant: clean bytes {gap:?} differ between current and durable state"
                );
            }
            at = at.max(e);
        }
    }

    #[cfg(not(any(test, feature = "invariants")))]
    fn check(&self) {}

    /// The bytes a crash leaves.
    pub(super) fn after_crash(&self, mode: CrashMode, rng: &mut SplitMix64) -> Vec<u8> {
        let mut out = self.contents_after_crash(mode, rng);
        // A log's reservation is a change of length like any other: unsynced, it may or may not have reached the
        // media. A failed sync leaves it (the cut that sync made was not made durable either).
        if self.reserved && matches!(mode, CrashMode::Seeded(_)) && rng.coin() {
            out.resize((out.len() + 1).next_multiple_of(LOG_PAD), 0);
        }
        out
    }

    fn contents_after_crash(&self, mode: CrashMode, rng: &mut SplitMix64) -> Vec<u8> {
        let choice = match mode {
            CrashMode::DropUnsynced => 0,
            CrashMode::KeepUnsynced => 1,
            CrashMode::Seeded(_) => rng.below(3),
        };
        match choice {
            0 => self.durable.clone(),
            1 => self.cur.clone(),
            _ => {
                let len = if rng.coin() { self.durable.len() } else { self.cur.len() };
                let mut out = self.durable.clone();
                out.resize(len, 0);
                for sector in self.unsettled().sectors() {
                    let s = (sector * SECTOR_SIZE) as usize;
                    if s >= len {
                        break;
                    }
                    if rng.coin() {
                        let e = (s + SECTOR_SIZE as usize).min(len);
                        for (i, b) in out[s..e].iter_mut().enumerate() {
                            *b = self.cur.get(s + i).copied().unwrap_or(0);
                        }
                    }
                }
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_overlapping_and_adjacent() {
        let mut r = Ranges::default();
        r.insert(10, 20);
        r.insert(30, 40);
        r.insert(20, 30);
        assert_eq!(r.0.iter().map(|(&s, &e)| (s, e)).collect::<Vec<_>>(), vec![(10, 40)]);
        r.insert(100, 110);
        r.insert(5, 12);
        r.insert(7, 7);
        assert_eq!(r.0.iter().map(|(&s, &e)| (s, e)).collect::<Vec<_>>(), vec![(5, 40), (100, 110)]);
        r.insert(0, 1000);
        assert_eq!(r.0.len(), 1);
    }

    #[test]
    fn dirty_sectors_are_listed_once() {
        let mut r = Ranges::default();
        r.insert(0, 10);
        r.insert(100, 600);
        r.insert(1023, 1025);
        assert_eq!(r.sectors().collect::<Vec<_>>(), vec![0, 1, 2]);
    }

    #[test]
    fn sync_copies_only_what_changed_and_keeps_the_invariant() {
        let mut ino = Inode::default();
        ino.write(b"abc", 1000).unwrap();
        ino.sync();
        assert_eq!(ino.durable, ino.cur);
        ino.set_len(10);
        ino.write(b"z", 20).unwrap();
        assert_eq!(ino.cur.len(), 21);
        // Shrinking then re-extending must not resurrect old bytes on either side of the dirty set.
        let mut rng = SplitMix64::new(1);
        for _ in 0..50 {
            let out = ino.after_crash(CrashMode::Seeded(rng.next_u64()), &mut rng);
            assert!(out.len() == 21 || out.len() == 1003);
            if out.len() == 21 {
                assert!(out[10..20].iter().all(|&b| b == 0));
            }
        }
        ino.sync();
        assert_eq!(ino.durable, ino.cur);
    }
}
