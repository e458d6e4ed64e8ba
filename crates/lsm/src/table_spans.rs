//! What a version's tables can still hold, for whole-area GC of the global range-delete index (§4.4).
//!
//! GLORAN drops a range record once "all entries it matches have been removed". An area of the index (keys
//! `[start, end)` × entry sequence numbers `[min_seq, max_seq)`) can only match entries in tables whose key range
//! meets its keys and whose sequence numbers meet its band, or in memtables. Memtable entries are newer than
//! every table's (memtables flush in order), so a band that ends at or below one past the newest table entry
//! meets none of them. [`TableSpans`] keeps each table's key range and sequence range from one version and
//! answers [`TableSpans::dead`] from them alone: no table data is read.
//!
//! Sound only for what that version (and what came after it) can show readers: entries compactions copy keep
//! their sequence numbers and come from the version's tables, and new entries are newer than every band. Readers
//! of older versions are waited for by the caller (the strategy's GC epochs).

use gloran::Area;

use crate::ikey;
use crate::version::Version;

/// One table's bounds.
#[derive(Debug)]
struct Span {
    smallest: Vec<u8>,
    largest: Vec<u8>,
    smallest_seq: u64,
    largest_seq: u64,
}

/// The key and sequence bounds of every table of one version.
#[derive(Debug)]
pub(crate) struct TableSpans {
    /// Per level; levels after the first are sorted by key and do not overlap.
    levels: Vec<Vec<Span>>,
    /// Every memtable entry's sequence number is at or above it.
    mem_floor: u64,
}

impl TableSpans {
    /// The bounds of `v`'s tables; `mem_floor` bounds every memtable entry's sequence number from below (see
    /// `Inner::gc_view`).
    pub(crate) fn of(v: &Version, mem_floor: u64) -> TableSpans {
        let levels = v
            .levels
            .iter()
            .map(|files| {
                files
                    .iter()
                    .map(|f| Span {
                        smallest: ikey::user_key(&f.info.smallest).to_vec(),
                        largest: ikey::user_key(&f.info.largest).to_vec(),
                        smallest_seq: f.info.smallest_seq,
                        largest_seq: f.info.largest_seq,
                    })
                    .collect()
            })
            .collect();
        TableSpans { levels, mem_floor }
    }

    /// Whether no entry of the version, nor any newer one, lies inside `a`.
    pub(crate) fn dead(&self, a: &Area) -> bool {
        if a.max_seq > self.mem_floor {
            return false;
        }
        let meets = |t: &Span| {
            t.smallest.as_slice() < a.end.as_slice()
                && t.largest.as_slice() >= a.start.as_slice()
                && t.smallest_seq < a.max_seq
                && t.largest_seq >= a.min_seq
        };
        self.levels.iter().enumerate().all(|(level, files)| {
            if level == 0 {
                return !files.iter().any(meets);
            }
            let from = files.partition_point(|t| t.largest.as_slice() < a.start.as_slice());
            !files[from..].iter().take_while(|t| t.smallest.as_slice() < a.end.as_slice()).any(meets)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(a: &str, b: &str, lo: u64, hi: u64) -> Span {
        Span { smallest: a.into(), largest: b.into(), smallest_seq: lo, largest_seq: hi }
    }

    fn area(a: &str, b: &str, lo: u64, hi: u64) -> Area {
        Area { start: a.into(), end: b.into(), min_seq: lo, max_seq: hi, seq: hi }
    }

    #[test]
    fn an_area_is_dead_only_where_no_table_and_no_memtable_can_hold_its_entries() {
        let s = TableSpans {
            levels: vec![
                vec![span("m", "p", 90, 99)],
                vec![span("a", "c", 10, 20), span("e", "g", 30, 40), span("x", "z", 1, 5)],
            ],
            mem_floor: 100,
        };
        // Keys no table holds.
        assert!(s.dead(&area("c0", "e", 0, 50)));
        assert!(s.dead(&area("h", "m", 0, 100)));
        // The end key is exclusive, a table's largest key inclusive.
        assert!(!s.dead(&area("c", "d", 0, 50)));
        assert!(!s.dead(&area("d", "e0", 0, 50)));
        // Keys a table holds, but not the band's sequence numbers.
        assert!(s.dead(&area("a", "d", 21, 30)));
        assert!(s.dead(&area("a", "d", 0, 10)));
        assert!(!s.dead(&area("a", "d", 0, 11)));
        assert!(!s.dead(&area("a", "d", 20, 21)));
        // Level 0 is searched whole.
        assert!(!s.dead(&area("n", "o", 95, 96)));
        // A band reaching the memtables' sequence numbers is never dead.
        assert!(!s.dead(&area("h", "m", 0, 101)));
    }
}
