//! Version edits: the records of the MANIFEST. See docs/formats/manifest.md.
//!
//! An edit is a sequence of tagged fields (tag varint, then the field). Tags are permanent; an unknown tag is
//! corruption (a newer writer's MANIFEST is not silently misread).

use crate::coding::{Decoder, put_len_prefixed, put_varint};

/// The comparator name recorded in every MANIFEST; opening with another comparator is refused.
pub const COMPARATOR: &str = "rangedb.bytewise";

const TAG_COMPARATOR: u64 = 1;
const TAG_LOG_NUMBER: u64 = 2;
const TAG_NEXT_FILE: u64 = 3;
const TAG_LAST_SEQ: u64 = 4;
const TAG_COMPACT_POINTER: u64 = 5;
const TAG_DELETED_FILE: u64 = 6;
const TAG_NEW_FILE: u64 = 7;
const TAG_RANGE_INDEX: u64 = 8;

/// The persistent state of a range-delete strategy with its own files (GLORAN's LSM-DRtree): the DR-tree files
/// it relies on and its GC watermark. Each edit that carries it replaces the previous one whole.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RangeIndexState {
    /// (index level, file number) of every live index file.
    pub files: Vec<(u32, u64)>,
    /// GC watermark in force (0: none).
    pub watermark: u64,
}

/// What the MANIFEST records about a table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileInfo {
    /// File number.
    pub number: u64,
    /// Size in bytes.
    pub size: u64,
    /// Smallest internal key (points and range-tombstone starts).
    pub smallest: Vec<u8>,
    /// Largest internal key (a tombstone end appears as `(end, MAX_SEQ, RangeDelete)`).
    pub largest: Vec<u8>,
    /// Smallest sequence number.
    pub smallest_seq: u64,
    /// Largest sequence number.
    pub largest_seq: u64,
    /// Point entries.
    pub num_entries: u64,
    /// Point tombstones.
    pub num_deletions: u64,
    /// Range tombstones.
    pub num_range_dels: u64,
}

/// A change from one version to the next.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VersionEdit {
    /// The comparator name (first edit of a MANIFEST).
    pub comparator: Option<String>,
    /// WALs with numbers below this are fully flushed.
    pub log_number: Option<u64>,
    /// The next unused file number.
    pub next_file: Option<u64>,
    /// The last sequence number used.
    pub last_seq: Option<u64>,
    /// Where the next compaction of a level starts (internal key).
    pub compact_pointers: Vec<(u32, Vec<u8>)>,
    /// Files removed: (level, number).
    pub deleted: Vec<(u32, u64)>,
    /// Files added: (level, file).
    pub added: Vec<(u32, FileInfo)>,
    /// The range-delete strategy's index state, when it changed.
    pub range_index: Option<RangeIndexState>,
}

impl VersionEdit {
    /// Encodes the edit.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        if let Some(c) = &self.comparator {
            put_varint(&mut b, TAG_COMPARATOR);
            put_len_prefixed(&mut b, c.as_bytes());
        }
        for (tag, v) in [
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_FILE, self.next_file),
            (TAG_LAST_SEQ, self.last_seq),
        ] {
            if let Some(v) = v {
                put_varint(&mut b, tag);
                put_varint(&mut b, v);
            }
        }
        for (l, k) in &self.compact_pointers {
            put_varint(&mut b, TAG_COMPACT_POINTER);
            put_varint(&mut b, u64::from(*l));
            put_len_prefixed(&mut b, k);
        }
        for (l, n) in &self.deleted {
            put_varint(&mut b, TAG_DELETED_FILE);
            put_varint(&mut b, u64::from(*l));
            put_varint(&mut b, *n);
        }
        for (l, f) in &self.added {
            put_varint(&mut b, TAG_NEW_FILE);
            put_varint(&mut b, u64::from(*l));
            put_varint(&mut b, f.number);
            put_varint(&mut b, f.size);
            put_len_prefixed(&mut b, &f.smallest);
            put_len_prefixed(&mut b, &f.largest);
            for v in [f.smallest_seq, f.largest_seq, f.num_entries, f.num_deletions, f.num_range_dels] {
                put_varint(&mut b, v);
            }
        }
        if let Some(r) = &self.range_index {
            put_varint(&mut b, TAG_RANGE_INDEX);
            put_varint(&mut b, r.files.len() as u64);
            for (l, n) in &r.files {
                put_varint(&mut b, u64::from(*l));
                put_varint(&mut b, *n);
            }
            put_varint(&mut b, r.watermark);
        }
        b
    }

    /// Decodes an edit; the error says which field is malformed.
    pub fn decode(buf: &[u8]) -> Result<VersionEdit, String> {
        let mut e = VersionEdit::default();
        let mut d = Decoder::new(buf);
        let level = |d: &mut Decoder| d.varint32().filter(|&l| l < 64).ok_or("bad level");
        while !d.is_empty() {
            let tag = d.varint().ok_or("bad tag")?;
            match tag {
                TAG_COMPARATOR => {
                    let c = d.len_prefixed().ok_or("bad comparator")?;
                    e.comparator = Some(String::from_utf8(c.to_vec()).map_err(|_| "comparator not utf-8")?);
                }
                TAG_LOG_NUMBER => e.log_number = Some(d.varint().ok_or("bad log number")?),
                TAG_NEXT_FILE => e.next_file = Some(d.varint().ok_or("bad next file")?),
                TAG_LAST_SEQ => e.last_seq = Some(d.varint().ok_or("bad last sequence")?),
                TAG_COMPACT_POINTER => {
                    let l = level(&mut d)?;
                    e.compact_pointers.push((l, d.len_prefixed().ok_or("bad compact pointer")?.to_vec()));
                }
                TAG_DELETED_FILE => {
                    let l = level(&mut d)?;
                    e.deleted.push((l, d.varint().ok_or("bad deleted file")?));
                }
                TAG_NEW_FILE => {
                    let l = level(&mut d)?;
                    let mut f = FileInfo {
                        number: d.varint().ok_or("bad new file")?,
                        size: d.varint().ok_or("bad new file")?,
                        smallest: d.len_prefixed().ok_or("bad new file")?.to_vec(),
                        largest: d.len_prefixed().ok_or("bad new file")?.to_vec(),
                        ..FileInfo::default()
                    };
                    for v in [
                        &mut f.smallest_seq,
                        &mut f.largest_seq,
                        &mut f.num_entries,
                        &mut f.num_deletions,
                        &mut f.num_range_dels,
                    ] {
                        *v = d.varint().ok_or("bad new file")?;
                    }
                    if f.smallest.len() < 8 || f.largest.len() < 8 {
                        return Err("new file with malformed key range".into());
                    }
                    e.added.push((l, f));
                }
                TAG_RANGE_INDEX => {
                    let n = d.varint().ok_or("bad range index")?;
                    // Each file takes at least two bytes: a count beyond that is damage, not a reason to allocate.
                    if n > buf.len() as u64 {
                        return Err("bad range index file count".into());
                    }
                    let mut r = RangeIndexState::default();
                    for _ in 0..n {
                        let l = level(&mut d)?;
                        r.files.push((l, d.varint().ok_or("bad range index file")?));
                    }
                    r.watermark = d.varint().ok_or("bad range index watermark")?;
                    e.range_index = Some(r);
                }
                t => return Err(format!("unknown version edit tag {t}")),
            }
        }
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_roundtrip_and_truncation_detected() {
        let e = VersionEdit {
            comparator: Some(COMPARATOR.into()),
            log_number: Some(9),
            next_file: Some(12),
            last_seq: Some(1 << 40),
            compact_pointers: vec![(1, b"kkkkkkkkk".to_vec())],
            deleted: vec![(0, 3), (1, 4)],
            added: vec![(
                2,
                FileInfo {
                    number: 11,
                    size: 4096,
                    smallest: vec![1; 9],
                    largest: vec![2; 10],
                    smallest_seq: 1,
                    largest_seq: 50,
                    num_entries: 7,
                    num_deletions: 1,
                    num_range_dels: 2,
                },
            )],
            range_index: Some(RangeIndexState { files: vec![(0, 14), (2, 13)], watermark: 77 }),
        };
        let b = e.encode();
        assert_eq!(VersionEdit::decode(&b), Ok(e));
        for n in 0..b.len() {
            // Every strict prefix either fails or decodes to something different (never panics).
            if let Ok(p) = VersionEdit::decode(&b[..n]) {
                assert_ne!(p.encode(), b);
            }
        }
        assert!(VersionEdit::decode(&[99]).is_err());
    }
}
