//! Telling a torn append from damage, for append-only logs.
//!
//! A log appended past its durable end can be left by a crash with some of its unsynced sectors never written
//! (`docs/vfs.md`, assumption 1). Such bytes have no old value, so they read as zeros: a record torn by the crash
//! has, under the bytes that fail its check, a *zero sector piece*, the part of a 512-byte sector (at absolute
//! file offsets) inside the unsynced region that is entirely zero. A bit flip in bytes that were synced leaves no
//! such piece (unless the record happens to hold a zero run a sector long), so a log reader that finds damage with
//! none under it knows the damage is not a torn append. This holds only for bytes appended where the file had
//! none: a file whose old contents are overwritten in place (a rewound journal) tears into old bytes instead.

use crate::SECTOR_SIZE;

/// What a store's recovery does with log damage that a crash cannot explain (RocksDB's `WALRecoveryMode`, two of
/// its four modes). The engines that replay logs (the LSM engine, FlexDB) take it as an option.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WalRecovery {
    /// A torn append at the end of the newest log is dropped, as a crash may leave one; any other damage (a bit
    /// flip in synced records, damage in an older log) fails the open with a corruption error naming the file and
    /// offset. Nothing acknowledged as durable is dropped without an error.
    #[default]
    Strict,
    /// Salvage: replay stops at the first damaged record of any log and drops it, every later record and every
    /// later log, so the store opens at the last consistent point before the damage (RocksDB's
    /// `kPointInTimeRecovery`). Writes acknowledged after that point are lost; the engine reports how many bytes
    /// it dropped and where. An engine refuses (corruption) a salvage whose result would not be the state after a
    /// prefix of the writes: when a record it would drop already took effect outside the log (a GLORAN index
    /// file holding a range record, a FlexDB range delete applied to the table).
    PointInTime,
}

impl WalRecovery {
    /// Every mode with its name: `strict`, `point-in-time`.
    pub const NAMED: [(&'static str, WalRecovery); 2] =
        [("strict", WalRecovery::Strict), ("point-in-time", WalRecovery::PointInTime)];

    /// The mode called `name` (see [`WalRecovery::NAMED`]).
    pub fn from_name(name: &str) -> Option<WalRecovery> {
        Self::NAMED.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
    }
}

/// Whether a sector touching `[from, to)` has its piece inside `[tail, bytes.len())` entirely zero: the damage in
/// `[from, to)` can be explained by sectors of an unsynced append that never reached the media. `tail` is where
/// the unsynced region may start (no later than `from`); bytes before it are not looked at.
///
/// REQUIRES: `tail <= from <= to`.
pub fn overlaps_unwritten_sector(bytes: &[u8], tail: usize, from: usize, to: usize) -> bool {
    let sector = SECTOR_SIZE as usize;
    let to = to.min(bytes.len());
    if from >= to {
        return false;
    }
    let mut s = from / sector * sector;
    while s < to {
        let e = (s + sector).min(bytes.len());
        if bytes[s.max(tail)..e].iter().all(|&b| b == 0) {
            return true;
        }
        s += sector;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_sector_piece_under_the_range_is_found() {
        let mut b = vec![7u8; 2048];
        // Nothing zero: a flip in written bytes.
        assert!(!overlaps_unwritten_sector(&b, 0, 100, 1500));
        // Sector 2 never written.
        b[1024..1536].fill(0);
        assert!(overlaps_unwritten_sector(&b, 0, 1000, 1100));
        assert!(overlaps_unwritten_sector(&b, 0, 1535, 1536));
        assert!(!overlaps_unwritten_sector(&b, 0, 0, 1024));
        assert!(!overlaps_unwritten_sector(&b, 0, 1536, 2048));
        // Only the part of a sector at or after `tail` has to be zero (the synced bytes before it are old data).
        let mut c = vec![7u8; 1024];
        c[300..].fill(0);
        assert!(overlaps_unwritten_sector(&c, 300, 300, 310));
        assert!(!overlaps_unwritten_sector(&c, 200, 300, 310));
        // The file's last, partial sector counts as far as it goes.
        let mut d = vec![7u8; 1100];
        d[1024..].fill(0);
        assert!(overlaps_unwritten_sector(&d, 0, 1050, 5000));
        assert!(!overlaps_unwritten_sector(&d, 0, 1100, 5000));
    }
}
