//! The segment cache and I/O compaction (§2.1 step 4, §3.1).
//!
//! The cache holds the newest uncompressed bytes of every block written since the last flush, keyed by block, plus
//! the deletes (TRIM, WRITE_ZEROES) issued since then. A delete removes the cached blocks it covers, so every cached
//! block is newer than anything the index says about it: a read overlays the cache on the index.
//!
//! I/O compaction happens at flush: walking the cached blocks in address order reorders the writes of the window
//! by LBA and merges consecutive ones (and overwrites of the same block) into consecutive writes (CWs), the
//! maximal runs of consecutive cached blocks. Only metadata moves here: a CW borrows the cached blocks, whose bytes
//! are copied once, into the units.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::BLOCK_SIZE;

/// A consecutive write produced by I/O compaction: `blocks` blocks from `first`, whose bytes are `parts` in order
/// (each a whole number of blocks, borrowed from where they are held: the cache, or a collection round's copies).
#[derive(Debug, PartialEq, Eq)]
pub struct Cw<'a> {
    /// First block.
    pub first: u64,
    /// The blocks' bytes, in order.
    pub parts: Vec<&'a [u8]>,
    /// Every part is known not to compress (it was stored raw before): its unit skips LZ4.
    pub incompressible: bool,
    blocks: u64,
}

impl<'a> Cw<'a> {
    /// A CW of the whole blocks in `data` from `first`. REQUIRES: `data.len()` is a multiple of `BLOCK_SIZE`.
    pub fn new(first: u64, data: &'a [u8]) -> Self {
        Cw { first, parts: vec![data], incompressible: false, blocks: (data.len() / BLOCK_SIZE) as u64 }
    }

    /// Appends the blocks in `data`. REQUIRES: `data.len()` is a multiple of `BLOCK_SIZE`.
    pub fn push(&mut self, data: &'a [u8]) {
        self.parts.push(data);
        self.blocks += (data.len() / BLOCK_SIZE) as u64;
    }

    /// Number of blocks.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// The block after the last one.
    pub fn end(&self) -> u64 {
        self.first + self.blocks
    }
}

/// Merges block runs `(first block, bytes, incompressible)` given in address order into CWs of at most
/// `max_blocks` blocks (consecutive runs join; a CW is incompressible if all its runs are).
pub fn merge_runs<'a>(runs: impl IntoIterator<Item = (u64, &'a [u8], bool)>, max_blocks: u64) -> Vec<Cw<'a>> {
    let mut out: Vec<Cw<'a>> = Vec::new();
    for (b, d, incompressible) in runs {
        match out.last_mut() {
            Some(cw) if cw.end() == b && cw.blocks() < max_blocks => {
                cw.push(d);
                cw.incompressible &= incompressible;
            }
            _ => out.push(Cw { incompressible, ..Cw::new(b, d) }),
        }
    }
    out
}

/// The per-volume write-back cache.
///
/// A write is copied once into one shared buffer and each of its blocks refers to it (buffer, block index):
/// one allocation per write instead of one per block. A buffer lives until its last block is overwritten,
/// deleted or flushed, so the cache can hold more memory than `bytes` counts, at most the sizes of the writes it
/// absorbed since the last flush.
#[derive(Debug, Default)]
pub struct SegmentCache {
    blocks: BTreeMap<u64, (Arc<[u8]>, u32)>,
    deletes: Vec<(u64, u64)>,
    writes: u64,
}

fn block_of(buf: &(Arc<[u8]>, u32)) -> &[u8] {
    let at = buf.1 as usize * BLOCK_SIZE;
    &buf.0[at..at + BLOCK_SIZE]
}

impl SegmentCache {
    /// Caches whole blocks `data` from block `first`. REQUIRES: `data.len()` is a multiple of `BLOCK_SIZE` and
    /// at most `u32::MAX` blocks.
    pub fn write(&mut self, first: u64, data: &[u8]) {
        let buf: Arc<[u8]> = Arc::from(data);
        for i in 0..data.len() / BLOCK_SIZE {
            self.blocks.insert(first + i as u64, (buf.clone(), i as u32));
        }
        self.writes += 1;
    }

    /// Records a delete of `first..first+blocks` and drops the cached blocks it covers.
    pub fn delete(&mut self, first: u64, blocks: u64) {
        let doomed: Vec<u64> = self.blocks.range(first..first + blocks).map(|(b, _)| *b).collect();
        for b in doomed {
            self.blocks.remove(&b);
        }
        self.deletes.push((first, blocks));
    }

    /// The cached bytes of `block`, if any.
    pub fn get(&self, block: u64) -> Option<&[u8]> {
        self.blocks.get(&block).map(block_of)
    }

    /// Cached blocks in `first..end`, in order.
    pub fn range(&self, first: u64, end: u64) -> impl Iterator<Item = (u64, &[u8])> {
        self.blocks.range(first..end).map(|(b, d)| (*b, block_of(d)))
    }

    /// Bytes of cached block data.
    pub fn bytes(&self) -> usize {
        self.blocks.len() * BLOCK_SIZE
    }

    /// Whether nothing is cached and no delete is pending.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty() && self.deletes.is_empty()
    }

    /// Write requests absorbed since the last flush.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// The pending deletes in issue order.
    pub fn deletes(&self) -> &[(u64, u64)] {
        &self.deletes
    }

    /// I/O compaction: the cached blocks as CWs in address order, each at most `max_blocks` long.
    pub fn compact(&self, max_blocks: u64) -> Vec<Cw<'_>> {
        merge_runs(self.blocks.iter().map(|(&b, d)| (b, block_of(d), false)), max_blocks)
    }

    /// Empties the cache after its contents reached a data file.
    pub fn clear(&mut self) {
        self.blocks.clear();
        self.deletes.clear();
        self.writes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blk(v: u8, n: usize) -> Vec<u8> {
        vec![v; n * BLOCK_SIZE]
    }

    /// The paper's §3.1 example: A=[1,4], B=[11,12], C=[5,6], D=[7,8] compact into [1,8] and [11,12].
    #[test]
    fn golden_section_3_1_example_merges_a_c_d() {
        let mut c = SegmentCache::default();
        c.write(1, &blk(1, 4));
        c.write(11, &blk(2, 2));
        c.write(5, &blk(3, 2));
        c.write(7, &blk(4, 2));
        let cws = c.compact(256);
        assert_eq!(cws.len(), 2);
        assert_eq!((cws[0].first, cws[0].blocks()), (1, 8));
        assert_eq!((cws[1].first, cws[1].blocks()), (11, 2));
        assert_eq!(cws[0].parts[4][0], 3);
    }

    #[test]
    fn deletes_drop_cached_blocks_and_overwrites_keep_the_newest() {
        let mut c = SegmentCache::default();
        c.write(0, &blk(1, 4));
        c.write(2, &blk(2, 1));
        c.delete(1, 1);
        let cws = c.compact(2);
        let got: Vec<(u64, u64, u8)> = cws.iter().map(|w| (w.first, w.blocks(), w.parts[0][0])).collect();
        assert_eq!(got, vec![(0, 1, 1), (2, 2, 2)]);
        assert_eq!(cws[1].parts[1][0], 1);
        assert_eq!(c.deletes(), &[(1, 1)]);
    }
}
