//! Sorted string tables: the builder that writes one (`table/builder.rs`), the reader that serves gets, and its
//! iterator (`table/iter.rs`).
//!
//! File layout (docs/formats/sst.md):
//! ```text
//! data block 0 | ... | data block n-1 | filter block | range-del block | properties block | metaindex | index | footer
//! ```
//! Every block is followed by its trailer (compression type, masked CRC32C). The index maps a separator key
//! of each data block (at or after its last internal key, before the next block's first; the last block's own
//! last key) to its handle. The metaindex maps `filter.bloom`, `rangedb.range_del` and
//! `rangedb.properties` to their handles. The filter is one Bloom filter over the table's distinct user keys.
//! The range-deletion block holds tombstones as `(start, seq, RangeDelete) -> end` in internal-key order; the
//! reader fragments them once at open and keeps them in memory, as RocksDB caches its fragmented list.

use std::sync::Arc;

use crate::block::{Block, BlockIter};
use crate::bloom;
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::format::{self, FOOTER_LEN, Footer, Handle, TRAILER_LEN};
use crate::ikey::{self, Kind};
use crate::props::TableProps;
use crate::readahead::ReadAhead;
use crate::tombstones::{Fragments, Tombstone};

mod builder;
mod iter;

pub use builder::{TableBuilder, TableOptions};
pub use iter::TableIter;

/// Counters a table lookup updates.
#[derive(Debug, Default, Clone, Copy)]
pub struct GetStats {
    /// Bloom filter consulted.
    pub bloom_checked: u64,
    /// Bloom filter ruled the key out.
    pub bloom_useful: u64,
}

/// An open table.
#[derive(Debug)]
pub struct Table {
    number: u64,
    name: String,
    file: Arc<dyn vfs::File>,
    size: u64,
    /// Where the data blocks end (read-ahead windows stop there).
    data_end: u64,
    index: Arc<Block>,
    filter: Option<Vec<u8>>,
    props: TableProps,
    tombstones: Arc<Fragments>,
    raw_tombstones: usize,
    cache: Arc<BlockCache>,
}

impl Table {
    /// Opens table `number` (file name `name`, `size` bytes), checking footer, index, metaindex, filter,
    /// properties and range-deletion block checksums.
    pub fn open(
        file: Arc<dyn vfs::File>,
        number: u64,
        name: &str,
        size: u64,
        cache: Arc<BlockCache>,
    ) -> Result<Table> {
        let corrupt = |m: String| Error::corruption(name, m);
        if size < FOOTER_LEN as u64 {
            return Err(corrupt("file shorter than a footer".into()));
        }
        let mut fb = [0u8; FOOTER_LEN];
        file.read_exact_at(&mut fb, size - FOOTER_LEN as u64)?;
        let footer = Footer::decode(&fb).map_err(corrupt)?;
        let read = |h: Handle| read_block(&*file, name, size, h);
        let index = Arc::new(read(footer.index)?);
        let meta = Arc::new(read(footer.metaindex)?);
        let mut filter = None;
        let mut props = None;
        let mut ts = Vec::new();
        let mut it = BlockIter::new(meta, |a, b| a.cmp(b));
        it.seek_to_first();
        while it.valid() {
            let h = Handle::decode(it.value()).ok_or_else(|| corrupt("bad metaindex handle".into()))?;
            match it.key() {
                b"filter.bloom" => {
                    filter = Some(read_raw(&*file, name, size, h)?);
                }
                b"rangedb.properties" => {
                    props = Some(TableProps::decode(Arc::new(read(h)?)).map_err(corrupt)?);
                }
                b"rangedb.range_del" => {
                    let mut ri = BlockIter::new(Arc::new(read(h)?), ikey::cmp);
                    ri.seek_to_first();
                    while ri.valid() {
                        let p = ikey::parse(ri.key())
                            .filter(|p| p.kind == Kind::RangeDelete)
                            .ok_or_else(|| corrupt("bad range tombstone key".into()))?;
                        ts.push(Tombstone {
                            start: p.user_key.to_vec(),
                            end: ri.value().to_vec(),
                            seq: p.seq,
                        });
                        ri.next();
                    }
                    if ri.corrupt() {
                        return Err(corrupt("malformed range-deletion block".into()));
                    }
                }
                _ => {}
            }
            it.next();
        }
        if it.corrupt() {
            return Err(corrupt("malformed metaindex block".into()));
        }
        let props = props.ok_or_else(|| corrupt("missing properties block".into()))?;
        if props.num_range_dels != ts.len() as u64 {
            return Err(corrupt("range tombstone count disagrees with properties".into()));
        }
        let mut last = BlockIter::new(index.clone(), ikey::cmp);
        last.seek_to_last();
        let data_end = match last.valid() {
            true => Handle::decode(last.value())
                .map(|h| h.offset.saturating_add(h.size).saturating_add(TRAILER_LEN as u64))
                .ok_or_else(|| corrupt("bad index handle".into()))?,
            false => 0,
        };
        Ok(Table {
            number,
            name: name.to_string(),
            file,
            size,
            data_end,
            index,
            filter,
            props,
            raw_tombstones: ts.len(),
            tombstones: Arc::new(Fragments::new(&ts)),
            cache,
        })
    }

    /// The table's properties.
    pub fn props(&self) -> &TableProps {
        &self.props
    }

    /// The file number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The file size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The fragmented range tombstones.
    pub fn tombstones(&self) -> &Arc<Fragments> {
        &self.tombstones
    }

    /// Number of range tombstones stored.
    pub fn num_raw_tombstones(&self) -> usize {
        self.raw_tombstones
    }

    fn data_block(&self, h: Handle) -> Result<Arc<Block>> {
        if let Some(b) = self.cache.get(self.number, h.offset) {
            return Ok(b);
        }
        let b = Arc::new(read_block(&*self.file, &self.name, self.size, h)?);
        self.cache.insert(self.number, h.offset, b.clone());
        Ok(b)
    }

    /// [`Table::data_block`] for a cursor: a miss reads through the cursor's read-ahead window, and is cached
    /// only when `fill_cache`.
    fn data_block_ahead(&self, h: Handle, ra: &mut ReadAhead, fill_cache: bool) -> Result<Arc<Block>> {
        let (off, len) = block_span(&self.name, self.size, h)?;
        if let Some(b) = self.cache.get(self.number, h.offset) {
            ra.note(off, len, false);
            return Ok(b);
        }
        ra.note(off, len, true);
        let raw = ra.read(&*self.file, off, len, self.data_end.max(off + len as u64))?;
        let b = Arc::new(finish_block(&self.name, h, raw)?);
        if fill_cache {
            self.cache.insert(self.number, h.offset, b.clone());
        }
        Ok(b)
    }

    /// Whether the Bloom filter allows `user_key`.
    pub fn may_contain(&self, user_key: &[u8], st: &mut GetStats) -> bool {
        match &self.filter {
            Some(f) => {
                st.bloom_checked += 1;
                let m = bloom::may_contain(f, bloom::hash(user_key));
                if !m {
                    st.bloom_useful += 1;
                }
                m
            }
            None => true,
        }
    }

    /// The first entry at or after `target` (an internal key) if it has the same user key, as its sequence
    /// number, kind and value (the key itself is the caller's; copying it would be an allocation per hit).
    pub fn get(&self, target: &[u8], st: &mut GetStats) -> Result<Option<(u64, Kind, Vec<u8>)>> {
        if !self.may_contain(ikey::user_key(target), st) {
            return Ok(None);
        }
        self.get_unfiltered(target)
    }

    /// [`Table::get`] without asking the filter (the caller has).
    pub fn get_unfiltered(&self, target: &[u8]) -> Result<Option<(u64, Kind, Vec<u8>)>> {
        let uk = ikey::user_key(target);
        let mut ii = BlockIter::new(self.index.clone(), ikey::cmp);
        ii.seek(target);
        if ii.corrupt() {
            return Err(Error::corruption(&self.name, "malformed index block"));
        }
        if !ii.valid() {
            return Ok(None);
        }
        let h =
            Handle::decode(ii.value()).ok_or_else(|| Error::corruption(&self.name, "bad index handle"))?;
        let mut bi = BlockIter::new(self.data_block(h)?, ikey::cmp);
        bi.seek(target);
        if bi.corrupt() {
            return Err(Error::corruption(&self.name, "malformed data block"));
        }
        if bi.valid() && ikey::user_key(bi.key()) == uk {
            let p = ikey::parse(bi.key()).ok_or_else(|| Error::corruption(&self.name, "bad internal key"))?;
            return Ok(Some((p.seq, p.kind, bi.value().to_vec())));
        }
        Ok(None)
    }

    /// How many data blocks may hold user keys in `[lo, hi)`, and how many there are, from the in-memory index
    /// alone (block `b` holds keys in `(index key of b-1, index key of b]`): a seek plus one step per block in range.
    /// RangeReduce's overlap estimate.
    pub fn blocks_in_range(&self, lo: &[u8], hi: &[u8]) -> (u64, u64) {
        let mut it = BlockIter::new(self.index.clone(), ikey::cmp);
        it.seek(&ikey::make(lo, ikey::MAX_SEQ, ikey::SEEK_KIND));
        let mut meeting = 0u64;
        while it.valid() {
            meeting += 1;
            if ikey::user_key(it.key()) >= hi {
                break;
            }
            it.next();
        }
        (meeting, self.props.num_data_blocks.max(meeting))
    }

    /// A cursor over the point entries.
    pub fn iter(self: &Arc<Self>) -> TableIter {
        self.iter_with(ReadAhead::default(), true)
    }

    /// A cursor over the point entries that continues a scan's read-ahead state (see `readahead.rs`) and adds
    /// the blocks it reads to the block cache only if `fill_cache`. Compactions read with `fill_cache` false,
    /// as RocksDB's do: their input files are deleted when they finish, so caching their blocks would only
    /// evict blocks that readers use.
    pub fn iter_with(self: &Arc<Self>, ra: ReadAhead, fill_cache: bool) -> TableIter {
        TableIter::new(self.clone(), ra, fill_cache)
    }
}

/// Where block `h` and its trailer lie: offset and length, checked against the table's size, which bounds what a
/// damaged handle can make a read allocate. (A cap of 64 MiB here once made a table holding one larger entry,
/// which the builder writes as one block, unreadable: `regression_a_value_over_64_mib_survives_a_flush`.)
fn block_span(name: &str, size: u64, h: Handle) -> Result<(u64, usize)> {
    let len = h.size.checked_add(TRAILER_LEN as u64);
    let end = len.and_then(|l| h.offset.checked_add(l));
    let (Some(len), Some(end)) = (len, end) else {
        return Err(Error::corruption(name, "block handle out of range"));
    };
    if end > size - FOOTER_LEN as u64 {
        return Err(Error::corruption(name, "block handle past the end of the table"));
    }
    let len = usize::try_from(len).map_err(|_| Error::corruption(name, "block handle out of range"))?;
    Ok((h.offset, len))
}

/// Block `h` and its trailer, as stored.
fn read_stored(file: &dyn vfs::File, name: &str, size: u64, h: Handle) -> Result<Vec<u8>> {
    let (off, len) = block_span(name, size, h)?;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, off)?;
    Ok(buf)
}

fn read_raw(file: &dyn vfs::File, name: &str, size: u64, h: Handle) -> Result<Vec<u8>> {
    unwrap_raw(name, h, read_stored(file, name, size, h)?)
}

fn unwrap_raw(name: &str, h: Handle, buf: Vec<u8>) -> Result<Vec<u8>> {
    format::unwrap_block(buf).map_err(|m| Error::corruption(name, format!("block at {}: {m}", h.offset)))
}

/// A block from its bytes as read (contents and trailer), checked.
fn finish_block(name: &str, h: Handle, buf: Vec<u8>) -> Result<Block> {
    let raw = unwrap_raw(name, h, buf)?;
    Block::new(raw).ok_or_else(|| Error::corruption(name, format!("malformed block at {}", h.offset)))
}

fn read_block(file: &dyn vfs::File, name: &str, size: u64, h: Handle) -> Result<Block> {
    finish_block(name, h, read_stored(file, name, size, h)?)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use vfs::Fs;

    use super::*;
    use crate::iter::InternalIter;
    use crate::readahead;

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    /// A table of `n` entries in 256-byte blocks, on a memory file.
    fn build(n: usize) -> (Arc<dyn vfs::File>, u64, Entries) {
        let fs = vfs::MemFs::new();
        let f = fs.open(Path::new("t"), vfs::OpenMode::CreateTruncate).unwrap();
        let mut b = TableBuilder::new(f.clone(), TableOptions { block_size: 256, ..TableOptions::default() });
        let entries: Vec<_> = (0..n)
            .map(|i| (ikey::make(format!("key{i:06}").as_bytes(), 1, Kind::Value), vec![i as u8; 40]))
            .collect();
        for (k, v) in &entries {
            b.add(k, v).unwrap();
        }
        b.finish().unwrap();
        let size = f.len().unwrap();
        (f, size, entries)
    }

    fn scan(t: &Arc<Table>) -> (Entries, Result<()>) {
        let mut it = t.iter();
        it.seek_to_first();
        let mut got = Vec::new();
        while it.valid() {
            got.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        (got, it.status())
    }

    /// Every block is a miss (no cache), so the scan reads through growing windows: it must see exactly the
    /// entries written, and a damaged block inside a window is still corruption.
    #[test]
    fn a_scan_through_read_ahead_windows_sees_every_entry_and_every_damaged_block() {
        let (f, size, entries) = build(3000);
        let t = Arc::new(Table::open(f.clone(), 1, "t", size, Arc::new(BlockCache::new(0))).unwrap());
        assert!(t.props().num_data_blocks > 100 * u64::from(readahead::TRIGGER));
        let (got, st) = scan(&t);
        st.unwrap();
        assert_eq!(got, entries);
        // Damage a byte of a block far past the first window.
        let mut it = BlockIter::new(t.index.clone(), ikey::cmp);
        it.seek_to_first();
        for _ in 0..60 {
            it.next();
        }
        let h = Handle::decode(it.value()).unwrap();
        let mut byte = [0u8; 1];
        f.read_exact_at(&mut byte, h.offset + 3).unwrap();
        f.write_all_at(&[byte[0] ^ 0x10], h.offset + 3).unwrap();
        let t = Arc::new(Table::open(f, 1, "t", size, Arc::new(BlockCache::new(0))).unwrap());
        let (got, st) = scan(&t);
        assert!(st.unwrap_err().is_corruption());
        assert!(got.len() < entries.len() && got[..] == entries[..got.len()]);
    }
}
