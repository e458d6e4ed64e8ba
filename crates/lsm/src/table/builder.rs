//! Writing a table: data blocks as entries arrive, then filter, range-deletion, properties, metaindex, index
//! and footer at `finish`.

use std::sync::Arc;

use crate::block::BlockBuilder;
use crate::bloom;
use crate::error::Result;
use crate::format::{self, Compression, Footer, Handle, TRAILER_LEN};
use crate::ikey::{self, Kind};
use crate::props::TableProps;
use crate::tombstones::Tombstone;

/// How tables are built.
#[derive(Debug, Clone)]
pub struct TableOptions {
    /// Target uncompressed data block size (default 4 KiB, as RocksDB).
    pub block_size: usize,
    /// Keys between restart points (default 16).
    pub restart_interval: usize,
    /// Bloom filter bits per key; 0 disables the filter (default 10).
    pub bloom_bits_per_key: usize,
    /// Block compression (default none, as our RocksDB comparison runs).
    pub compression: Compression,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            restart_interval: 16,
            bloom_bits_per_key: 10,
            compression: Compression::None,
        }
    }
}

/// Writes one table. Entries must arrive in internal-key order.
#[derive(Debug)]
pub struct TableBuilder {
    file: Arc<dyn vfs::File>,
    opts: TableOptions,
    offset: u64,
    out: Vec<u8>,
    data: BlockBuilder,
    index: BlockBuilder,
    hashes: Vec<u64>,
    /// The last user key added; meaningful once `hashes` is not empty.
    last_user_key: Vec<u8>,
    /// The handle of the data block written last, whose index entry waits for the next block's first key: the
    /// entry's key is then a short separator between the two blocks (`ikey::separator`), not the block's last
    /// key, which may be long. The table's last block keeps its last key.
    pending: Option<Handle>,
    /// Scratch for an index entry's key and handle.
    index_key: Vec<u8>,
    index_value: Vec<u8>,
    props: TableProps,
    tombstones: Vec<Tombstone>,
    first_key: Option<Vec<u8>>,
    last_key: Vec<u8>,
}

impl TableBuilder {
    /// A builder writing to the (new, empty) `file`.
    pub fn new(file: Arc<dyn vfs::File>, opts: TableOptions) -> Self {
        let data = BlockBuilder::new(opts.restart_interval);
        TableBuilder {
            file,
            opts,
            offset: 0,
            out: Vec::new(),
            data,
            index: BlockBuilder::new(1),
            hashes: Vec::new(),
            last_user_key: Vec::new(),
            pending: None,
            index_key: Vec::new(),
            index_value: Vec::new(),
            props: TableProps { smallest_seq: u64::MAX, ..TableProps::default() },
            tombstones: Vec::new(),
            first_key: None,
            last_key: Vec::new(),
        }
    }

    /// Appends a point entry. REQUIRES: `ikey` sorts after the previous one.
    pub fn add(&mut self, ik: &[u8], value: &[u8]) -> Result<()> {
        let uk = ikey::user_key(ik);
        if self.hashes.is_empty() || self.last_user_key != uk {
            self.hashes.push(bloom::hash(uk));
            self.last_user_key.clear();
            self.last_user_key.extend_from_slice(uk);
        }
        let seq = ikey::seq(ik);
        self.props.smallest_seq = self.props.smallest_seq.min(seq);
        self.props.largest_seq = self.props.largest_seq.max(seq);
        self.props.num_entries += 1;
        if ikey::trailer(ik) & 0xff == Kind::Delete as u64 {
            self.props.num_deletions += 1;
        }
        self.props.raw_key_bytes += ik.len() as u64;
        self.props.raw_value_bytes += value.len() as u64;
        if self.first_key.is_none() {
            self.first_key = Some(ik.to_vec());
        }
        if let Some(h) = self.pending.take() {
            // `last_key` is still the flushed block's last key.
            ikey::separator(&self.last_key, ik, &mut self.index_key);
            self.add_index_entry(h);
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(ik);
        self.data.add(ik, value);
        if self.data.estimated_size() >= self.opts.block_size {
            self.flush_data()?;
        }
        Ok(())
    }

    /// Adds range tombstones to the range-deletion block (any order).
    pub fn add_tombstones(&mut self, ts: &[Tombstone]) {
        self.tombstones.extend_from_slice(ts);
    }

    /// Point entries added.
    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Bytes the file will have at least (written + buffered).
    pub fn file_size(&self) -> u64 {
        self.offset + self.out.len() as u64 + self.data.estimated_size() as u64
    }

    /// Appends a block and its trailer to the output. Returns the block's handle and its buffer (a plain
    /// block's own, for reuse).
    fn write_block(&mut self, raw: Vec<u8>, ty: Compression) -> Result<(Handle, Vec<u8>)> {
        let (contents, ty) = format::compress(raw, ty);
        let h = Handle { offset: self.offset + self.out.len() as u64, size: contents.len() as u64 };
        let trailer = format::block_trailer(&contents, ty);
        self.out.extend_from_slice(&contents);
        self.out.extend_from_slice(&trailer);
        if self.out.len() >= 256 * 1024 {
            self.file.write_all_at(&self.out, self.offset)?;
            self.offset += self.out.len() as u64;
            self.out.clear();
        }
        Ok((h, contents))
    }

    fn flush_data(&mut self) -> Result<()> {
        if self.data.is_empty() {
            return Ok(());
        }
        let raw = self.data.finish();
        let (h, buf) = self.write_block(raw, self.opts.compression)?;
        self.data.recycle(buf);
        self.props.data_bytes += h.size + TRAILER_LEN as u64;
        self.props.num_data_blocks += 1;
        self.pending = Some(h);
        Ok(())
    }

    /// Adds block `h` to the index under `index_key`.
    fn add_index_entry(&mut self, h: Handle) {
        self.index_value.clear();
        h.encode(&mut self.index_value);
        self.index.add(&self.index_key, &self.index_value);
    }

    /// Writes the remaining blocks and the footer and syncs the file. Returns the table's properties.
    pub fn finish(mut self) -> Result<(TableProps, u64)> {
        self.flush_data()?;
        if let Some(h) = self.pending.take() {
            self.index_key.clone_from(&self.last_key);
            self.add_index_entry(h);
        }
        let mut meta = Vec::<(&[u8], Handle)>::new();
        let filter_h = if self.opts.bloom_bits_per_key > 0 && !self.hashes.is_empty() {
            let f = bloom::build(&self.hashes, self.opts.bloom_bits_per_key);
            Some(self.write_block(f, Compression::None)?.0)
        } else {
            None
        };
        if let Some(h) = filter_h {
            meta.push((b"filter.bloom", h));
        }
        // Range tombstones, in internal-key order, and their effect on the key range.
        let mut ts = std::mem::take(&mut self.tombstones);
        ts.retain(|t| t.start < t.end);
        ts.sort_by(|a, b| a.cmp_ikey(b));
        ts.dedup();
        let mut smallest = self.first_key.clone();
        let mut largest = if self.first_key.is_some() { Some(self.last_key.clone()) } else { None };
        if !ts.is_empty() {
            let mut rb = BlockBuilder::new(1);
            for t in &ts {
                let k = ikey::make(&t.start, t.seq, Kind::RangeDelete);
                rb.add(&k, &t.end);
                self.props.smallest_seq = self.props.smallest_seq.min(t.seq);
                self.props.largest_seq = self.props.largest_seq.max(t.seq);
                if smallest.as_ref().is_none_or(|s| ikey::cmp(&k, s).is_lt()) {
                    smallest = Some(k);
                }
                let e = ikey::make(&t.end, ikey::MAX_SEQ, Kind::RangeDelete);
                if largest.as_ref().is_none_or(|l| ikey::cmp(&e, l).is_gt()) {
                    largest = Some(e);
                }
            }
            self.props.num_range_dels = ts.len() as u64;
            let (h, _) = self.write_block(rb.finish(), Compression::None)?;
            meta.push((b"rangedb.range_del", h));
        }
        if self.props.smallest_seq == u64::MAX {
            self.props.smallest_seq = 0;
        }
        self.props.smallest_key = smallest.unwrap_or_default();
        self.props.largest_key = largest.unwrap_or_default();
        self.props.compression = self.opts.compression as u64;
        let praw = self.props.encode();
        let (ph, _) = self.write_block(praw, Compression::None)?;
        meta.push((b"rangedb.properties", ph));
        meta.sort_by(|a, b| a.0.cmp(b.0));
        let mut mb = BlockBuilder::new(1);
        for (name, h) in &meta {
            let mut hv = Vec::new();
            h.encode(&mut hv);
            mb.add(name, &hv);
        }
        let (metaindex, _) = self.write_block(mb.finish(), Compression::None)?;
        let iraw = self.index.finish();
        let (index, _) = self.write_block(iraw, Compression::None)?;
        let footer = Footer { metaindex, index, version: format::FORMAT_VERSION }.encode();
        self.out.extend_from_slice(&footer);
        self.file.write_all_at(&self.out, self.offset)?;
        self.offset += self.out.len() as u64;
        self.out.clear();
        self.file.sync_data()?;
        Ok((self.props, self.offset))
    }
}
