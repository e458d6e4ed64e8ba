//! The tree file: a copy-on-write image of the FlexTree with two checksummed header slots.
//!
//! # Design
//!
//! The file is an array of `node_size` slots. Slots 0 and 1 hold headers; node slot `k` lives at
//! `(2 + k) * node_size`. A checkpoint writes every dirty node to a slot that no durable version uses, syncs, then
//! writes a header with the next version into header slot `version % 2` and syncs again. At open the valid header
//! with the highest version wins, so a torn header write falls back to the previous version.
//!
//! Slot reuse: slots of nodes rewritten or freed by merges since the last durable header are *pending*; they are
//! still part of the durable version and join the free list only after the next header is durable. (The reference
//! implementation reused them at once, which broke copy-on-write across a crash.)

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::flextree::{Body, Child, Extent, FlexTree, HOLE, Node, TreeConfig};
use crate::options::Options;

const MAGIC: &[u8; 8] = b"RDBFLXT\0";
const FORMAT: u32 = 1;
/// Bytes of a header that carry data (the checksum covers `[0, 76)`, stored at `[76, 80)`).
pub const HEADER_LEN: usize = 80;
const KIND_LEAF: u8 = 1;
const KIND_INTERNAL: u8 = 2;

/// A decoded tree-file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Node slot size.
    pub node_size: u32,
    /// Tree version; the log extends the tree only when its header carries the same version.
    pub version: u64,
    /// Slot of the root node.
    pub root_slot: u32,
    /// Node slots in use up to here (high-water mark).
    pub slot_count: u32,
    /// Logical size of the file.
    pub size: u64,
    /// Extents in the tree.
    pub extents: u64,
    /// Data-file segment size.
    pub segment_size: u64,
    /// Leaf capacity.
    pub leaf_cap: u16,
    /// Internal-node capacity.
    pub internal_cap: u16,
    /// Largest extent.
    pub max_extent: u32,
    /// Checksum block size of the data file.
    pub block_size: u32,
}

impl Header {
    /// Encodes to `HEADER_LEN` bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&FORMAT.to_le_bytes());
        b[12..16].copy_from_slice(&self.node_size.to_le_bytes());
        b[16..24].copy_from_slice(&self.version.to_le_bytes());
        b[24..28].copy_from_slice(&self.root_slot.to_le_bytes());
        b[28..32].copy_from_slice(&self.slot_count.to_le_bytes());
        b[32..40].copy_from_slice(&self.size.to_le_bytes());
        b[40..48].copy_from_slice(&self.extents.to_le_bytes());
        b[48..56].copy_from_slice(&self.segment_size.to_le_bytes());
        b[56..58].copy_from_slice(&self.leaf_cap.to_le_bytes());
        b[58..60].copy_from_slice(&self.internal_cap.to_le_bytes());
        b[60..64].copy_from_slice(&self.max_extent.to_le_bytes());
        b[64..68].copy_from_slice(&self.block_size.to_le_bytes());
        let crc = vfs::crc32c::crc32c(&b[0..76]);
        b[76..80].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes; `None` when the magic, format or checksum is wrong (an unwritten or torn slot).
    pub fn decode(b: &[u8]) -> Option<Header> {
        if b.len() < HEADER_LEN || &b[0..8] != MAGIC || u32_at(b, 8) != FORMAT {
            return None;
        }
        if vfs::crc32c::crc32c(&b[0..76]) != u32_at(b, 76) {
            return None;
        }
        Some(Header {
            node_size: u32_at(b, 12),
            version: u64_at(b, 16),
            root_slot: u32_at(b, 24),
            slot_count: u32_at(b, 28),
            size: u64_at(b, 32),
            extents: u64_at(b, 40),
            segment_size: u64_at(b, 48),
            leaf_cap: u16::from_le_bytes([b[56], b[57]]),
            internal_cap: u16::from_le_bytes([b[58], b[59]]),
            max_extent: u32_at(b, 60),
            block_size: u32_at(b, 64),
        })
    }
}

pub(crate) fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

pub(crate) fn u64_at(b: &[u8], i: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(x)
}

fn u48_at(b: &[u8], i: usize) -> u64 {
    let mut x = [0u8; 8];
    x[..6].copy_from_slice(&b[i..i + 6]);
    u64::from_le_bytes(x)
}

fn corrupt(msg: impl Into<String>) -> Error {
    Error::corruption("tree", msg)
}

/// A node as stored: children are slots, not arena ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiskNode {
    /// Leaf extents.
    Leaf(Vec<Extent>),
    /// Child slots with shifts, and pivots.
    Internal(Vec<(u32, i64)>, Vec<i64>),
}

/// Encodes a node for `slot` into `node_size` bytes.
pub fn encode_node(node: &DiskNode, slot: u32, node_size: usize) -> Vec<u8> {
    let mut b = vec![0u8; node_size];
    match node {
        DiskNode::Leaf(ext) => {
            b[4] = KIND_LEAF;
            b[6..8].copy_from_slice(&(ext.len() as u16).to_le_bytes());
            for (i, e) in ext.iter().enumerate() {
                let o = 16 + i * 16;
                b[o..o + 4].copy_from_slice(&e.poff.to_le_bytes());
                b[o + 4..o + 8].copy_from_slice(&e.len.to_le_bytes());
                b[o + 8..o + 10].copy_from_slice(&e.tag.to_le_bytes());
                b[o + 10..o + 16].copy_from_slice(&e.addr.to_le_bytes()[..6]);
            }
        }
        DiskNode::Internal(children, pivots) => {
            b[4] = KIND_INTERNAL;
            b[6..8].copy_from_slice(&(children.len() as u16).to_le_bytes());
            let mut o = 16;
            for (s, sh) in children {
                b[o..o + 4].copy_from_slice(&s.to_le_bytes());
                b[o + 4..o + 12].copy_from_slice(&sh.to_le_bytes());
                o += 12;
            }
            for p in pivots {
                b[o..o + 8].copy_from_slice(&p.to_le_bytes());
                o += 8;
            }
        }
    }
    let crc = vfs::crc32c::crc32c_append(vfs::crc32c::crc32c(&slot.to_le_bytes()), &b[4..]);
    b[0..4].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes the node stored in `slot`; any inconsistency is `Corruption`.
pub fn decode_node(b: &[u8], slot: u32, cfg: &TreeConfig) -> Result<DiskNode> {
    if b.len() < 16 {
        return Err(corrupt(format!("node slot {slot} too short")));
    }
    let crc = vfs::crc32c::crc32c_append(vfs::crc32c::crc32c(&slot.to_le_bytes()), &b[4..]);
    if crc != u32_at(b, 0) {
        return Err(corrupt(format!("node slot {slot}: checksum mismatch")));
    }
    let n = u16::from_le_bytes([b[6], b[7]]) as usize;
    match b[4] {
        KIND_LEAF => {
            if n > cfg.leaf_cap || 16 + n * 16 > b.len() {
                return Err(corrupt(format!("node slot {slot}: bad leaf count {n}")));
            }
            let ext = (0..n)
                .map(|i| {
                    let o = 16 + i * 16;
                    Extent {
                        poff: u32_at(b, o),
                        len: u32_at(b, o + 4),
                        tag: u16::from_le_bytes([b[o + 8], b[o + 9]]),
                        addr: u48_at(b, o + 10),
                    }
                })
                .collect();
            Ok(DiskNode::Leaf(ext))
        }
        KIND_INTERNAL => {
            if n == 0 || n > cfg.internal_cap || 8 + n * 20 > b.len() {
                return Err(corrupt(format!("node slot {slot}: bad child count {n}")));
            }
            let mut o = 16;
            let mut ch = Vec::with_capacity(n);
            for _ in 0..n {
                ch.push((u32_at(b, o), u64_at(b, o + 4) as i64));
                o += 12;
            }
            let mut pv = Vec::with_capacity(n - 1);
            for _ in 0..n - 1 {
                pv.push(u64_at(b, o) as i64);
                o += 8;
            }
            Ok(DiskNode::Internal(ch, pv))
        }
        k => Err(corrupt(format!("node slot {slot}: unknown kind {k}"))),
    }
}

/// Tree-file counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeFileStats {
    /// Bytes written (nodes and headers).
    pub bytes_written: u64,
    /// Completed checkpoints.
    pub checkpoints: u64,
    /// Nodes written.
    pub nodes_written: u64,
}

/// The persistent tree.
#[derive(Debug)]
pub struct TreeFile {
    file: Arc<dyn vfs::File>,
    node_size: u32,
    header: Header,
    free: BTreeSet<u32>,
    pending: Vec<u32>,
    slot_count: u32,
    pub(crate) stats: TreeFileStats,
}

impl TreeFile {
    /// Writes an empty tree (version 1) to a new file and syncs it.
    pub fn create(file: Arc<dyn vfs::File>, opts: &Options, tree: &mut FlexTree) -> Result<TreeFile> {
        let header = Header {
            node_size: opts.node_size,
            version: 0,
            root_slot: 0,
            slot_count: 0,
            size: 0,
            extents: 0,
            segment_size: opts.segment_size,
            leaf_cap: opts.leaf_cap as u16,
            internal_cap: opts.internal_cap as u16,
            max_extent: opts.max_extent_len(),
            block_size: opts.block_size,
        };
        let mut tf = TreeFile {
            file,
            node_size: opts.node_size,
            header,
            free: BTreeSet::new(),
            pending: Vec::new(),
            slot_count: 0,
            stats: TreeFileStats::default(),
        };
        tf.checkpoint(tree)?;
        Ok(tf)
    }

    /// Reads both header slots and returns the newest valid header.
    pub fn read_header(file: &dyn vfs::File) -> Result<Header> {
        let len = file.len()?;
        let mut best: Option<Header> = None;
        let mut probe = [0u8; HEADER_LEN];
        // The node size is in the header; slot 1 starts at node_size, so read slot 0 first.
        let mut slots = vec![0u64];
        if len >= HEADER_LEN as u64 {
            file.read_exact_at(&mut probe, 0)?;
            if let Some(h) = Header::decode(&probe) {
                best = Some(h);
                slots.push(h.node_size as u64);
            }
        }
        if best.is_none() {
            // Slot 0 unreadable: try slot 1 at every legal node size.
            let mut ns = 128u64;
            while ns <= 1 << 20 {
                slots.push(ns);
                ns *= 2;
            }
        }
        for &off in &slots[1..] {
            if off + HEADER_LEN as u64 <= len {
                file.read_exact_at(&mut probe, off)?;
                if let Some(h) = Header::decode(&probe)
                    && h.node_size as u64 == off
                    && best.is_none_or(|b| h.version > b.version)
                {
                    best = Some(h);
                }
            }
        }
        best.ok_or_else(|| corrupt("no valid header in the tree file"))
    }

    /// Opens an existing tree file and loads the tree of its newest header.
    pub fn open(file: Arc<dyn vfs::File>, cfg: TreeConfig) -> Result<(TreeFile, FlexTree)> {
        let header = Self::read_header(file.as_ref())?;
        let ns = header.node_size as usize;
        let flen = file.len()?;
        if (2 + header.slot_count as u64) * ns as u64 > flen {
            return Err(corrupt(format!(
                "header claims {} node slots, more than the file holds",
                header.slot_count
            )));
        }
        let mut nodes: Vec<Node> = Vec::new();
        let mut used = vec![false; header.slot_count as usize];
        let mut buf = vec![0u8; ns];
        // Depth-first load; arena ids are assigned in visiting order.
        let root = load(&file, &header, &cfg, header.root_slot, &mut nodes, &mut used, &mut buf, flen, 0)?;
        let tree = FlexTree::from_nodes(cfg, nodes, root)?;
        if tree.size() != header.size || tree.extent_count() != header.extents {
            return Err(corrupt("header counts disagree with the tree"));
        }
        let free = (0..header.slot_count).filter(|s| !used[*s as usize]).collect();
        let tf = TreeFile {
            file,
            node_size: header.node_size,
            header,
            free,
            pending: Vec::new(),
            slot_count: header.slot_count,
            stats: TreeFileStats::default(),
        };
        Ok((tf, tree))
    }

    /// The durable header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The durable version.
    pub fn version(&self) -> u64 {
        self.header.version
    }

    fn alloc_slot(&mut self) -> u32 {
        match self.free.pop_first() {
            Some(s) => s,
            None => {
                self.slot_count += 1;
                self.slot_count - 1
            }
        }
    }

    fn write_dirty(&mut self, tree: &mut FlexTree, id: u32, depth: usize) -> Result<u32> {
        if depth > 64 {
            return Err(corrupt("tree deeper than 64 levels"));
        }
        let node = tree.node(id);
        if let (false, Some(s)) = (node.dirty, node.slot) {
            return Ok(s);
        }
        let disk = match node.body.clone() {
            Body::Leaf(e) => DiskNode::Leaf(e),
            Body::Internal { children, pivots } => {
                let mut ch = Vec::with_capacity(children.len());
                for Child { id: c, shift } in children {
                    ch.push((self.write_dirty(tree, c, depth + 1)?, shift));
                }
                DiskNode::Internal(ch, pivots)
            }
        };
        let slot = self.alloc_slot();
        let bytes = encode_node(&disk, slot, self.node_size as usize);
        self.file.write_all_at(&bytes, (2 + slot as u64) * self.node_size as u64)?;
        self.stats.bytes_written += bytes.len() as u64;
        self.stats.nodes_written += 1;
        let n = tree.node_mut(id).ok_or_else(|| corrupt("dangling node id"))?;
        if let Some(old) = n.slot.replace(slot) {
            self.pending.push(old);
        }
        n.dirty = false;
        Ok(slot)
    }

    /// Writes the dirty nodes copy-on-write, syncs, then makes the new version durable with a header flip.
    /// REQUIRES: every data byte the tree maps is durable.
    pub fn checkpoint(&mut self, tree: &mut FlexTree) -> Result<()> {
        self.pending.extend(tree.take_released_slots());
        let root = self.write_dirty(tree, tree.root(), 0)?;
        self.file.sync_data()?;
        let h = Header {
            version: self.header.version + 1,
            root_slot: root,
            slot_count: self.slot_count,
            size: tree.size(),
            extents: tree.extent_count(),
            ..self.header
        };
        let off = (h.version % 2) * self.node_size as u64;
        self.file.write_all_at(&h.encode(), off)?;
        self.file.sync_data()?;
        self.stats.bytes_written += HEADER_LEN as u64;
        self.stats.checkpoints += 1;
        self.header = h;
        // The new version is durable: slots only the old version used are free now.
        self.free.extend(self.pending.drain(..));
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
fn load(
    file: &Arc<dyn vfs::File>,
    h: &Header,
    cfg: &TreeConfig,
    slot: u32,
    nodes: &mut Vec<Node>,
    used: &mut [bool],
    buf: &mut [u8],
    flen: u64,
    depth: usize,
) -> Result<u32> {
    if depth > 64 {
        return Err(corrupt("tree deeper than 64 levels"));
    }
    match used.get_mut(slot as usize) {
        Some(u) if !*u => *u = true,
        Some(_) => return Err(corrupt(format!("node slot {slot} referenced twice"))),
        None => return Err(corrupt(format!("node slot {slot} beyond the slot count"))),
    }
    let off = (2 + slot as u64) * h.node_size as u64;
    if off + h.node_size as u64 > flen {
        return Err(corrupt(format!("node slot {slot} beyond the end of the tree file")));
    }
    file.read_exact_at(buf, off)?;
    let disk = decode_node(buf, slot, cfg)?;
    let body = match disk {
        DiskNode::Leaf(e) => {
            if e.iter().any(|x| x.addr > HOLE) {
                return Err(corrupt("extent address out of range"));
            }
            Body::Leaf(e)
        }
        DiskNode::Internal(ch, pivots) => {
            let mut children = Vec::with_capacity(ch.len());
            for (s, shift) in ch {
                let id = load(file, h, cfg, s, nodes, used, buf, flen, depth + 1)?;
                children.push(Child { id, shift });
            }
            Body::Internal { children, pivots }
        }
    };
    nodes.push(Node { body, dirty: false, slot: Some(slot) });
    Ok((nodes.len() - 1) as u32)
}
