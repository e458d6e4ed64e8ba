//! Table properties: counts and ranges a reader or a compaction picker wants without scanning the table.
//! Stored as a block of `name -> value` (bytewise-sorted names; integers as u64 LE).

use crate::block::{Block, BlockBuilder, BlockIter};
use crate::coding::le_u64;
use std::sync::Arc;

/// What a table holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableProps {
    /// Point entries (values and point tombstones).
    pub num_entries: u64,
    /// Point tombstones.
    pub num_deletions: u64,
    /// Range tombstones in the range-deletion block.
    pub num_range_dels: u64,
    /// Data blocks.
    pub num_data_blocks: u64,
    /// Sum of internal key lengths.
    pub raw_key_bytes: u64,
    /// Sum of value lengths.
    pub raw_value_bytes: u64,
    /// Bytes of data blocks on disk (after compression, with trailers).
    pub data_bytes: u64,
    /// Smallest sequence number of any entry or tombstone (0 if empty).
    pub smallest_seq: u64,
    /// Largest sequence number.
    pub largest_seq: u64,
    /// Smallest internal key (point or range-tombstone bound).
    pub smallest_key: Vec<u8>,
    /// Largest internal key (a range tombstone end is recorded as `(end, MAX_SEQ, RangeDelete)`).
    pub largest_key: Vec<u8>,
    /// Compression asked for (0 none, 1 lz4).
    pub compression: u64,
}

const NAMES: [&str; 12] = [
    "rangedb.compression",
    "rangedb.data.bytes",
    "rangedb.largest.key",
    "rangedb.largest.seq",
    "rangedb.num.data.blocks",
    "rangedb.num.deletions",
    "rangedb.num.entries",
    "rangedb.num.range.dels",
    "rangedb.raw.key.bytes",
    "rangedb.raw.value.bytes",
    "rangedb.smallest.key",
    "rangedb.smallest.seq",
];

impl TableProps {
    /// Encodes as a block.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = BlockBuilder::new(1);
        for name in NAMES {
            let v: Vec<u8> = match name {
                "rangedb.compression" => self.compression.to_le_bytes().to_vec(),
                "rangedb.data.bytes" => self.data_bytes.to_le_bytes().to_vec(),
                "rangedb.largest.key" => self.largest_key.clone(),
                "rangedb.largest.seq" => self.largest_seq.to_le_bytes().to_vec(),
                "rangedb.num.data.blocks" => self.num_data_blocks.to_le_bytes().to_vec(),
                "rangedb.num.deletions" => self.num_deletions.to_le_bytes().to_vec(),
                "rangedb.num.entries" => self.num_entries.to_le_bytes().to_vec(),
                "rangedb.num.range.dels" => self.num_range_dels.to_le_bytes().to_vec(),
                "rangedb.raw.key.bytes" => self.raw_key_bytes.to_le_bytes().to_vec(),
                "rangedb.raw.value.bytes" => self.raw_value_bytes.to_le_bytes().to_vec(),
                "rangedb.smallest.key" => self.smallest_key.clone(),
                _ => self.smallest_seq.to_le_bytes().to_vec(),
            };
            b.add(name.as_bytes(), &v);
        }
        b.finish()
    }

    /// Decodes; unknown names are ignored (forward compatible), malformed integers are an error.
    pub fn decode(block: Arc<Block>) -> Result<TableProps, String> {
        let mut p = TableProps::default();
        let mut it = BlockIter::new(block, |a, b| a.cmp(b));
        it.seek_to_first();
        while it.valid() {
            let v = it.value();
            let int = || le_u64(v, 0).filter(|_| v.len() == 8).ok_or("malformed property");
            match it.key() {
                b"rangedb.compression" => p.compression = int()?,
                b"rangedb.data.bytes" => p.data_bytes = int()?,
                b"rangedb.largest.key" => p.largest_key = v.to_vec(),
                b"rangedb.largest.seq" => p.largest_seq = int()?,
                b"rangedb.num.data.blocks" => p.num_data_blocks = int()?,
                b"rangedb.num.deletions" => p.num_deletions = int()?,
                b"rangedb.num.entries" => p.num_entries = int()?,
                b"rangedb.num.range.dels" => p.num_range_dels = int()?,
                b"rangedb.raw.key.bytes" => p.raw_key_bytes = int()?,
                b"rangedb.raw.value.bytes" => p.raw_value_bytes = int()?,
                b"rangedb.smallest.key" => p.smallest_key = v.to_vec(),
                b"rangedb.smallest.seq" => p.smallest_seq = int()?,
                _ => {}
            }
            it.next();
        }
        if it.corrupt() {
            return Err("malformed properties block".into());
        }
        Ok(p)
    }
}
