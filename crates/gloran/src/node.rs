//! DR-tree node encoding (see `docs/formats/drtree.md`).
//!
//! ```text
//! node   := header payload crc32c(u32 LE, over header and payload)
//! header := kind u8 (1 leaf, 2 inner) | height u8 (0 for leaves) | reserved u16 = 0 | count u32 | payload_len u32
//! payload:= count × offset u32 (from the start of the entries) | entries
//! leaf entry  := start_len u32 | start | end_len u32 | end | min_seq u64 | max_seq u64 | seq u64
//! inner entry := first_len u32 | first start key | end_len u32 | largest end key | min_seq u64 | max_seq u64
//!                | min_vis u64 | child_offset u64 | child_len u32
//! ```
//! All integers little-endian. The offset array lets a lookup binary-search a node without decoding it; every
//! access is bounds-checked, so a damaged node yields [`Error::Corruption`], never a panic. Nodes are built by
//! [`NodeBuilder`] and read through [`NodeView`]; [`decode_node`] fully validates one (the fuzz target's entry).

use crate::area::Area;
use crate::error::{Error, Result};

/// Header bytes before the payload.
pub const HEADER_LEN: usize = 12;
/// Checksum bytes after the payload.
pub const TRAILER_LEN: usize = 4;
/// Node kind tag of a leaf.
pub const KIND_LEAF: u8 = 1;
/// Node kind tag of an inner node.
pub const KIND_INNER: u8 = 2;
/// Largest node accepted when reading (a length field beyond it is corruption, not an allocation).
pub const MAX_NODE_LEN: usize = 64 << 20;
/// Bytes of a leaf entry after its two length-prefixed keys: `min_seq`, `max_seq`, `seq`.
const LEAF_FIXED: usize = 3 * 8;
/// Bytes of an inner entry after its two length-prefixed keys: `min_seq`, `max_seq`, `min_vis`, offset, length.
const INNER_FIXED: usize = 4 * 8 + 4;

/// A child pointer of an inner node: the child's key and sequence bounds and where it lies in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildRef {
    /// Start key of the child's first area.
    pub first: Vec<u8>,
    /// Largest end key below the child.
    pub end: Vec<u8>,
    /// Smallest `min_seq` below.
    pub min_seq: u64,
    /// Largest `max_seq` below.
    pub max_seq: u64,
    /// Smallest reported delete sequence below.
    pub min_vis: u64,
    /// File offset of the child node.
    pub offset: u64,
    /// Encoded length of the child node.
    pub len: u32,
}

impl ChildRef {
    /// Whether the subtree may hold an area covering `(key, seq)` visible at `snapshot`.
    pub fn may_cover(&self, key: &[u8], seq: u64, snapshot: u64) -> bool {
        self.min_seq <= seq && seq < self.max_seq && self.min_vis <= snapshot && key < self.end.as_slice()
    }
}

/// Accumulates one node's entries.
#[derive(Debug)]
pub struct NodeBuilder {
    kind: u8,
    height: u8,
    offsets: Vec<u32>,
    entries: Vec<u8>,
}

fn put_key(buf: &mut Vec<u8>, k: &[u8]) {
    buf.extend_from_slice(&(k.len() as u32).to_le_bytes());
    buf.extend_from_slice(k);
}

impl NodeBuilder {
    /// A leaf builder.
    pub fn leaf() -> Self {
        NodeBuilder { kind: KIND_LEAF, height: 0, offsets: Vec::new(), entries: Vec::new() }
    }

    /// An inner-node builder at `height` (1 = parents of leaves).
    pub fn inner(height: u8) -> Self {
        NodeBuilder { kind: KIND_INNER, height, offsets: Vec::new(), entries: Vec::new() }
    }

    /// Entries added so far.
    pub fn count(&self) -> usize {
        self.offsets.len()
    }

    /// The encoded size if finished now.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + 4 * self.offsets.len() + self.entries.len() + TRAILER_LEN
    }

    /// Adds a leaf entry. REQUIRES: a leaf builder; key lengths below 4 GiB.
    pub fn push_area(&mut self, a: &Area) {
        self.offsets.push(self.entries.len() as u32);
        put_key(&mut self.entries, &a.start);
        put_key(&mut self.entries, &a.end);
        for v in [a.min_seq, a.max_seq, a.seq] {
            self.entries.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// Adds an inner entry. REQUIRES: an inner builder.
    pub fn push_child(&mut self, c: &ChildRef) {
        self.offsets.push(self.entries.len() as u32);
        put_key(&mut self.entries, &c.first);
        put_key(&mut self.entries, &c.end);
        for v in [c.min_seq, c.max_seq, c.min_vis, c.offset] {
            self.entries.extend_from_slice(&v.to_le_bytes());
        }
        self.entries.extend_from_slice(&c.len.to_le_bytes());
    }

    /// The encoded node.
    pub fn finish(self) -> Vec<u8> {
        let payload_len = 4 * self.offsets.len() + self.entries.len();
        let mut out = Vec::with_capacity(HEADER_LEN + payload_len + TRAILER_LEN);
        out.push(self.kind);
        out.push(self.height);
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&(self.offsets.len() as u32).to_le_bytes());
        out.extend_from_slice(&(payload_len as u32).to_le_bytes());
        for o in &self.offsets {
            out.extend_from_slice(&o.to_le_bytes());
        }
        out.extend_from_slice(&self.entries);
        let crc = vfs::crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }
}

fn u32_at(b: &[u8], at: usize) -> Result<u32> {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| Error::corrupt("node entry truncated"))
}

fn u64_at(b: &[u8], at: usize) -> Result<u64> {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| Error::corrupt("node entry truncated"))
}

fn key_at(b: &[u8], at: usize) -> Result<(&[u8], usize)> {
    let n = u32_at(b, at)? as usize;
    let k = b.get(at + 4..at + 4 + n).ok_or_else(|| Error::corrupt("node key truncated"))?;
    Ok((k, at + 4 + n))
}

/// The parsed header of a node: what the node's first bytes promise.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    /// [`KIND_LEAF`] or [`KIND_INNER`].
    pub kind: u8,
    /// 0 for leaves.
    pub height: u8,
    /// Entries in the node.
    pub count: u32,
    /// Bytes of offsets and entries.
    pub payload_len: u32,
}

impl Header {
    /// Parses the fixed header. Checks only what can be checked without the payload.
    pub fn parse(b: &[u8]) -> Result<Header> {
        if b.len() < HEADER_LEN {
            return Err(Error::corrupt("node header truncated"));
        }
        let h = Header { kind: b[0], height: b[1], count: u32_at(b, 4)?, payload_len: u32_at(b, 8)? };
        if !matches!((h.kind, h.height), (KIND_LEAF, 0) | (KIND_INNER, 1..)) {
            return Err(Error::corrupt(format!("bad node kind {} at height {}", h.kind, h.height)));
        }
        if b[2] != 0 || b[3] != 0 {
            return Err(Error::corrupt("node reserved bytes not zero"));
        }
        if h.payload_len as usize > MAX_NODE_LEN
            || (h.count as usize).saturating_mul(4) > h.payload_len as usize
        {
            return Err(Error::corrupt("node lengths impossible"));
        }
        Ok(h)
    }

    /// Length of the whole encoded node.
    pub fn node_len(&self) -> usize {
        HEADER_LEN + self.payload_len as usize + TRAILER_LEN
    }
}

/// A checksummed node, read in place.
#[derive(Debug, Clone, Copy)]
pub struct NodeView<'a> {
    /// The node's header.
    pub header: Header,
    offsets: &'a [u8],
    entries: &'a [u8],
}

/// A leaf entry read in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AreaRef<'a> {
    /// Start key.
    pub start: &'a [u8],
    /// End key (exclusive).
    pub end: &'a [u8],
    /// Lowest covered sequence.
    pub min_seq: u64,
    /// First uncovered sequence.
    pub max_seq: u64,
    /// Reported delete sequence.
    pub seq: u64,
}

impl AreaRef<'_> {
    /// Whether `(key, seq)` lies inside.
    pub fn covers(&self, key: &[u8], seq: u64) -> bool {
        self.min_seq <= seq && seq < self.max_seq && self.start <= key && key < self.end
    }

    /// An owned copy.
    pub fn to_area(&self) -> Area {
        Area {
            start: self.start.to_vec(),
            end: self.end.to_vec(),
            min_seq: self.min_seq,
            max_seq: self.max_seq,
            seq: self.seq,
        }
    }
}

impl<'a> NodeView<'a> {
    /// Checks length and checksum of a whole encoded node; the entries are checked as they are read.
    pub fn parse(b: &'a [u8]) -> Result<NodeView<'a>> {
        Self::parse_with(b, true)
    }

    /// As [`NodeView::parse`]; `verify_crc = false` skips the checksum of a node verified when it was cached.
    pub fn parse_with(b: &'a [u8], verify_crc: bool) -> Result<NodeView<'a>> {
        let header = Header::parse(b)?;
        if b.len() != header.node_len() {
            return Err(Error::corrupt(format!(
                "node length {} but header says {}",
                b.len(),
                header.node_len()
            )));
        }
        let body_end = HEADER_LEN + header.payload_len as usize;
        let stored = u32_at(b, body_end)?;
        if verify_crc && vfs::crc32c::crc32c(&b[..body_end]) != stored {
            return Err(Error::corrupt("node checksum mismatch"));
        }
        let off_end = HEADER_LEN + 4 * header.count as usize;
        Ok(NodeView { header, offsets: &b[HEADER_LEN..off_end], entries: &b[off_end..body_end] })
    }

    /// Entries in the node.
    pub fn len(&self) -> usize {
        self.header.count as usize
    }

    /// Whether the node has no entries.
    pub fn is_empty(&self) -> bool {
        self.header.count == 0
    }

    /// Whether this is a leaf.
    pub fn is_leaf(&self) -> bool {
        self.header.kind == KIND_LEAF
    }

    fn entry_off(&self, i: usize) -> Result<usize> {
        Ok(u32_at(self.offsets, 4 * i)? as usize)
    }

    /// The start key of entry `i` (leaf: the area's start; inner: the child's first start).
    pub fn first_key(&self, i: usize) -> Result<&'a [u8]> {
        Ok(key_at(self.entries, self.entry_off(i)?)?.0)
    }

    /// Leaf entry `i`.
    pub fn area(&self, i: usize) -> Result<AreaRef<'a>> {
        if !self.is_leaf() {
            return Err(Error::corrupt("area read from an inner node"));
        }
        let (start, at) = key_at(self.entries, self.entry_off(i)?)?;
        let (end, at) = key_at(self.entries, at)?;
        Ok(AreaRef {
            start,
            end,
            min_seq: u64_at(self.entries, at)?,
            max_seq: u64_at(self.entries, at + 8)?,
            seq: u64_at(self.entries, at + 16)?,
        })
    }

    /// Inner entry `i`.
    pub fn child(&self, i: usize) -> Result<ChildRef> {
        if self.is_leaf() {
            return Err(Error::corrupt("child read from a leaf"));
        }
        let (first, at) = key_at(self.entries, self.entry_off(i)?)?;
        let (end, at) = key_at(self.entries, at)?;
        Ok(ChildRef {
            first: first.to_vec(),
            end: end.to_vec(),
            min_seq: u64_at(self.entries, at)?,
            max_seq: u64_at(self.entries, at + 8)?,
            min_vis: u64_at(self.entries, at + 16)?,
            offset: u64_at(self.entries, at + 24)?,
            len: u32_at(self.entries, at + 32)?,
        })
    }

    /// The index of the last entry whose start key is `<= key`, if any (entries are sorted by start key).
    pub fn last_le(&self, key: &[u8]) -> Result<Option<usize>> {
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.first_key(mid)? <= key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo.checked_sub(1))
    }
}

/// A fully decoded node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// Areas in DR-tree order.
    Leaf(Vec<Area>),
    /// Children in key order, with the node's height.
    Inner(u8, Vec<ChildRef>),
}

/// Decodes and validates a whole node: checksum, lengths, every entry, key order and area sanity.
pub fn decode_node(b: &[u8]) -> Result<Node> {
    decode_node_view(&NodeView::parse(b)?)
}

/// Decodes and validates every entry of a parsed node, including that the entries lie back to back in offset
/// order and fill the payload (the builder's layout), so no byte of a node that decodes goes unread.
pub fn decode_node_view(v: &NodeView<'_>) -> Result<Node> {
    // Where entry `i` must start: right after entry `i - 1`.
    let mut next = 0usize;
    let mut laid_out = |i: usize, keys: usize, fixed: usize| -> Result<()> {
        if v.entry_off(i)? != next {
            return Err(Error::corrupt("node entries not back to back"));
        }
        next += 8 + keys + fixed;
        Ok(())
    };
    let node = if v.is_leaf() {
        let mut out: Vec<Area> = Vec::with_capacity(v.len().min(4096));
        for i in 0..v.len() {
            let r = v.area(i)?;
            laid_out(i, r.start.len() + r.end.len(), LEAF_FIXED)?;
            let a = r.to_area();
            if a.is_empty() || a.seq < a.max_seq {
                return Err(Error::corrupt("malformed area in leaf"));
            }
            if out.last().is_some_and(|p| Area::order(p, &a) != std::cmp::Ordering::Less) {
                return Err(Error::corrupt("leaf areas out of order"));
            }
            out.push(a);
        }
        Node::Leaf(out)
    } else {
        let mut out: Vec<ChildRef> = Vec::with_capacity(v.len().min(4096));
        for i in 0..v.len() {
            let c = v.child(i)?;
            laid_out(i, c.first.len() + c.end.len(), INNER_FIXED)?;
            if c.first >= c.end || c.min_seq >= c.max_seq {
                return Err(Error::corrupt("malformed child bounds"));
            }
            if out.last().is_some_and(|p| p.first > c.first) {
                return Err(Error::corrupt("children out of order"));
            }
            out.push(c);
        }
        Node::Inner(v.header.height, out)
    };
    if next != v.entries.len() {
        return Err(Error::corrupt("node payload holds bytes no entry uses"));
    }
    Ok(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_round_trip_and_bit_flips_are_corruption() {
        let mut b = NodeBuilder::leaf();
        let areas = vec![Area::record(b"a", b"c", 0, 5), Area::record(b"d", b"f", 1, 9)];
        for a in &areas {
            b.push_area(a);
        }
        let enc = b.finish();
        assert_eq!(decode_node(&enc).unwrap(), Node::Leaf(areas));
        for i in 0..enc.len() {
            for bit in 0..8 {
                let mut bad = enc.clone();
                bad[i] ^= 1 << bit;
                assert!(decode_node(&bad).unwrap_err().is_corruption(), "flip at {i}:{bit} went unnoticed");
            }
        }
        for n in 0..enc.len() {
            assert!(decode_node(&enc[..n]).is_err());
        }
    }

    /// Found by the `drtree_node` fuzz target: a node whose payload held bytes that no entry used (here a leaf
    /// with no entries and a 13-byte payload) decoded, so what decoded did not re-encode to the stored bytes.
    #[test]
    fn regression_payload_bytes_no_entry_uses_are_corruption() {
        let mut b = NodeBuilder::leaf();
        b.push_area(&Area::record(b"a", b"c", 0, 5));
        let enc = b.finish();
        let entry_len = enc.len() - HEADER_LEN - TRAILER_LEN - 4;
        // Rebuild the same node with `extra` bytes after its entry, or with its entry moved by `shift`.
        let with = |extra: usize, shift: u32| {
            let payload = 4 + entry_len + extra;
            let mut n = vec![KIND_LEAF, 0, 0, 0];
            n.extend_from_slice(&1u32.to_le_bytes());
            n.extend_from_slice(&(payload as u32).to_le_bytes());
            n.extend_from_slice(&shift.to_le_bytes());
            n.extend(std::iter::repeat_n(0xAB, shift as usize));
            n.extend_from_slice(&enc[HEADER_LEN + 4..HEADER_LEN + 4 + entry_len]);
            n.extend(std::iter::repeat_n(0xCD, extra - shift as usize));
            let c = vfs::crc32c::crc32c(&n);
            n.extend_from_slice(&c.to_le_bytes());
            n
        };
        assert_eq!(with(0, 0), enc);
        assert!(decode_node(&with(13, 0)).unwrap_err().is_corruption(), "trailing bytes");
        assert!(decode_node(&with(3, 3)).unwrap_err().is_corruption(), "a gap before the entry");
        let mut empty = vec![KIND_LEAF, 0, 0, 0, 0, 0, 0, 0, 13, 0, 0, 0];
        empty.extend_from_slice(&[0; 13]);
        let c = vfs::crc32c::crc32c(&empty);
        empty.extend_from_slice(&c.to_le_bytes());
        assert!(decode_node(&empty).unwrap_err().is_corruption(), "an empty leaf with a payload");
    }

    #[test]
    fn inner_round_trip() {
        let mut b = NodeBuilder::inner(1);
        let c = ChildRef {
            first: b"a".to_vec(),
            end: b"z".to_vec(),
            min_seq: 0,
            max_seq: 7,
            min_vis: 7,
            offset: 0,
            len: 40,
        };
        b.push_child(&c);
        let enc = b.finish();
        assert_eq!(decode_node(&enc).unwrap(), Node::Inner(1, vec![c]));
    }
}
