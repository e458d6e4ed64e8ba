//! One on-disk DR-tree (§4.2): the disjoint areas of one LSM-DRtree level, packed into checksummed nodes.
//!
//! The writer takes areas already disjoint and in DR-tree order (the output of the disjointization sweep) and
//! streams them into leaves of about `node_size` bytes, written back to back from offset 0; then it builds the
//! parent levels from the leaves' bounds, level by level, each level's nodes clustered and sorted by key, the root
//! last, and a fixed-size footer. A lookup reads the footer once (at open) and then exactly one node per tree level:
//! areas are disjoint, so the leaf whose first start key is the largest `<= key` is the only one that can hold the
//! key (the writer never splits a stack of bands with equal key range across two leaves, which keeps that true).
//! A scan reads leaves sequentially from the one that holds its first key.
//!
//! See `docs/formats/drtree.md` for the byte layout.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use vfs::{File, Fs, OpenMode};

use crate::area::Area;
use crate::error::{Error, Result};
use crate::node::{ChildRef, HEADER_LEN, Header, MAX_NODE_LEN, NodeBuilder, NodeView};

/// `"GLRNDRT1"` read as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"GLRNDRT1");
/// The format version this code writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes of the footer at the end of every DR-tree file.
pub const FOOTER_LEN: usize = 68;
const WRITE_CHUNK: usize = 256 << 10;

/// What the footer records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Footer {
    /// Node levels (0: the tree is empty; 1: the root is a leaf).
    pub height: u32,
    /// File offset of the root node.
    pub root_offset: u64,
    /// Encoded length of the root node.
    pub root_len: u32,
    /// Areas in the leaves.
    pub areas: u64,
    /// End of the leaf region (leaves occupy `[0, leaves_end)`).
    pub leaves_end: u64,
    /// Smallest `min_seq` of any area.
    pub min_seq: u64,
    /// Largest `max_seq` of any area.
    pub max_seq: u64,
}

impl Footer {
    fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut b = [0u8; FOOTER_LEN];
        b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.height.to_le_bytes());
        b[16..24].copy_from_slice(&self.root_offset.to_le_bytes());
        b[24..28].copy_from_slice(&self.root_len.to_le_bytes());
        // 28..32 reserved, zero.
        b[32..40].copy_from_slice(&self.areas.to_le_bytes());
        b[40..48].copy_from_slice(&self.leaves_end.to_le_bytes());
        b[48..56].copy_from_slice(&self.min_seq.to_le_bytes());
        b[56..64].copy_from_slice(&self.max_seq.to_le_bytes());
        let crc = vfs::crc32c::crc32c(&b[..64]);
        b[64..68].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8], file_len: u64) -> Result<Footer> {
        let u64_at = |at: usize| b.get(at..at + 8).and_then(|s| s.try_into().ok()).map(u64::from_le_bytes);
        let u32_at = |at: usize| b.get(at..at + 4).and_then(|s| s.try_into().ok()).map(u32::from_le_bytes);
        let bad = |m: &str| Error::corrupt(format!("DR-tree footer: {m}"));
        if b.len() != FOOTER_LEN {
            return Err(bad("truncated"));
        }
        if u32_at(64) != Some(vfs::crc32c::crc32c(&b[..64])) {
            return Err(bad("checksum mismatch"));
        }
        if u64_at(0) != Some(MAGIC) {
            return Err(bad("bad magic"));
        }
        match u32_at(8) {
            Some(FORMAT_VERSION) => {}
            v => return Err(bad(&format!("unsupported format version {v:?}"))),
        }
        let f = Footer {
            height: u32_at(12).ok_or_else(|| bad("truncated"))?,
            root_offset: u64_at(16).ok_or_else(|| bad("truncated"))?,
            root_len: u32_at(24).ok_or_else(|| bad("truncated"))?,
            areas: u64_at(32).ok_or_else(|| bad("truncated"))?,
            leaves_end: u64_at(40).ok_or_else(|| bad("truncated"))?,
            min_seq: u64_at(48).ok_or_else(|| bad("truncated"))?,
            max_seq: u64_at(56).ok_or_else(|| bad("truncated"))?,
        };
        if u32_at(28) != Some(0) {
            return Err(bad("reserved bytes not zero"));
        }
        let body = file_len - FOOTER_LEN as u64;
        let root_end = f.root_offset.checked_add(u64::from(f.root_len));
        let sane = if f.height == 0 {
            f.areas == 0 && f.root_len == 0 && f.leaves_end == 0 && body == 0
        } else {
            f.height <= 64
                && f.areas > 0
                && root_end == Some(body)
                && f.leaves_end <= body
                && f.leaves_end > 0
                && (f.height > 1 || f.root_offset == 0 && f.leaves_end == body)
                && f.min_seq < f.max_seq
        };
        if !sane {
            return Err(bad("inconsistent fields"));
        }
        Ok(f)
    }
}

/// Streams disjoint areas into a new DR-tree file.
pub struct DrTreeWriter {
    file: Arc<dyn File>,
    path: PathBuf,
    node_size: usize,
    out: Vec<u8>,
    offset: u64,
    leaf: NodeBuilder,
    leaf_bounds: Option<ChildRef>,
    last: Option<Area>,
    children: Vec<ChildRef>,
    footer: Footer,
}

impl std::fmt::Debug for DrTreeWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DrTreeWriter")
            .field("path", &self.path)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl DrTreeWriter {
    /// Creates (truncating) `path`. `node_size` is the target encoded size of a node.
    pub fn create(fs: &dyn Fs, path: &Path, node_size: usize) -> Result<Self> {
        let file = fs.open(path, OpenMode::CreateTruncate)?;
        Ok(DrTreeWriter {
            file,
            path: path.to_path_buf(),
            node_size,
            out: Vec::with_capacity(WRITE_CHUNK),
            offset: 0,
            leaf: NodeBuilder::leaf(),
            leaf_bounds: None,
            last: None,
            children: Vec::new(),
            footer: Footer { min_seq: u64::MAX, ..Footer::default() },
        })
    }

    fn write_node(&mut self, node: Vec<u8>) -> Result<(u64, u32)> {
        let at = self.offset;
        let len =
            u32::try_from(node.len()).map_err(|_| Error::InvalidArgument("DR-tree node too large".into()))?;
        self.out.extend_from_slice(&node);
        self.offset += node.len() as u64;
        if self.out.len() >= WRITE_CHUNK {
            self.drain()?;
        }
        Ok((at, len))
    }

    fn drain(&mut self) -> Result<()> {
        if !self.out.is_empty() {
            let at = self.offset - self.out.len() as u64;
            self.file.write_all_at(&self.out, at)?;
            self.out.clear();
        }
        Ok(())
    }

    fn finish_leaf(&mut self) -> Result<()> {
        if self.leaf.count() == 0 {
            return Ok(());
        }
        let node = std::mem::replace(&mut self.leaf, NodeBuilder::leaf()).finish();
        let (offset, len) = self.write_node(node)?;
        if let Some(mut c) = self.leaf_bounds.take() {
            c.offset = offset;
            c.len = len;
            self.children.push(c);
        }
        Ok(())
    }

    /// Appends the next area. REQUIRES: areas arrive in DR-tree order, pairwise disjoint (checked; a violation
    /// is `InvalidArgument`).
    pub fn push(&mut self, a: &Area) -> Result<()> {
        if a.is_empty() || a.seq < a.max_seq {
            return Err(Error::InvalidArgument(format!("malformed area {a:?}")));
        }
        let same_range = match &self.last {
            Some(p) => {
                let ordered = Area::order(p, a) == std::cmp::Ordering::Less;
                let same = p.start == a.start && p.end == a.end;
                let disjoint = if same { p.max_seq <= a.min_seq } else { p.end <= a.start };
                if !ordered || !disjoint {
                    return Err(Error::InvalidArgument(format!(
                        "areas not disjoint and ordered: {p:?}, {a:?}"
                    )));
                }
                same
            }
            None => false,
        };
        // Never split a stack of bands with one key range: a lookup must find its key in a single leaf.
        if !same_range
            && self.leaf.count() > 0
            && self.leaf.encoded_len() + a.footprint() + 12 > self.node_size
        {
            self.finish_leaf()?;
        }
        self.leaf.push_area(a);
        match &mut self.leaf_bounds {
            Some(c) => {
                c.end.clone_from(&a.end);
                c.min_seq = c.min_seq.min(a.min_seq);
                c.max_seq = c.max_seq.max(a.max_seq);
                c.min_vis = c.min_vis.min(a.seq);
            }
            None => {
                self.leaf_bounds = Some(ChildRef {
                    first: a.start.clone(),
                    end: a.end.clone(),
                    min_seq: a.min_seq,
                    max_seq: a.max_seq,
                    min_vis: a.seq,
                    offset: 0,
                    len: 0,
                })
            }
        }
        self.footer.areas += 1;
        self.footer.min_seq = self.footer.min_seq.min(a.min_seq);
        self.footer.max_seq = self.footer.max_seq.max(a.max_seq);
        self.last = Some(a.clone());
        Ok(())
    }

    /// Writes the parent levels, the root and the footer, and syncs the file. Returns the file's length.
    pub fn finish(mut self) -> Result<u64> {
        self.finish_leaf()?;
        self.footer.leaves_end = self.offset;
        let mut level = std::mem::take(&mut self.children);
        let mut height = 1u32;
        if level.is_empty() {
            self.footer = Footer::default();
        } else {
            while level.len() > 1 {
                let h =
                    u8::try_from(height).map_err(|_| Error::InvalidArgument("DR-tree too tall".into()))?;
                let mut parents = Vec::new();
                let mut node = NodeBuilder::inner(h);
                let mut bounds: Option<ChildRef> = None;
                // At least two children per inner node, so every level shrinks.
                for c in level {
                    let entry = c.first.len() + c.end.len() + 48;
                    if node.count() >= 2 && node.encoded_len() + entry > self.node_size {
                        let done = std::mem::replace(&mut node, NodeBuilder::inner(h)).finish();
                        let (offset, len) = self.write_node(done)?;
                        if let Some(mut b) = bounds.take() {
                            (b.offset, b.len) = (offset, len);
                            parents.push(b);
                        }
                    }
                    node.push_child(&c);
                    match &mut bounds {
                        Some(b) => {
                            b.end = b.end.clone().max(c.end.clone());
                            b.min_seq = b.min_seq.min(c.min_seq);
                            b.max_seq = b.max_seq.max(c.max_seq);
                            b.min_vis = b.min_vis.min(c.min_vis);
                        }
                        None => bounds = Some(ChildRef { offset: 0, len: 0, ..c }),
                    }
                }
                let done = node.finish();
                let (offset, len) = self.write_node(done)?;
                if let Some(mut b) = bounds.take() {
                    (b.offset, b.len) = (offset, len);
                    parents.push(b);
                }
                level = parents;
                height += 1;
            }
            let root = &level[0];
            self.footer.height = height;
            self.footer.root_offset = root.offset;
            self.footer.root_len = root.len;
        }
        let footer = self.footer.encode();
        self.out.extend_from_slice(&footer);
        self.offset += FOOTER_LEN as u64;
        self.drain()?;
        self.file.sync_data()?;
        let _ = &self.path;
        Ok(self.offset)
    }
}

/// An open DR-tree file.
#[derive(Debug)]
pub struct DrTree {
    file: Arc<dyn File>,
    path: PathBuf,
    len: u64,
    footer: Footer,
    /// The inner nodes (`[leaves_end, file_len - 68)`), checksums verified at open.
    inner: Vec<u8>,
    /// The leaf region (`[0, leaves_end)`) of a tree of at most [`LEAF_CACHE_MAX`] leaf bytes, checksums verified
    /// at open: a point probe then reads no storage (the engine's tables get the same from its block cache).
    leaves: Option<Vec<u8>>,
}

/// Largest leaf region kept in memory whole (per DR-tree file).
pub const LEAF_CACHE_MAX: u64 = 8 << 20;

impl DrTree {
    /// Opens `path` and checks its footer.
    pub fn open(fs: &dyn Fs, path: &Path) -> Result<DrTree> {
        let file = fs.open(path, OpenMode::ReadOnly)?;
        let len = file.len()?;
        if len < FOOTER_LEN as u64 {
            return Err(Error::corrupt(format!("DR-tree file of {len} bytes has no footer")).in_file(path));
        }
        let mut b = [0u8; FOOTER_LEN];
        file.read_exact_at(&mut b, len - FOOTER_LEN as u64)?;
        let footer = Footer::decode(&b, len).map_err(|e| e.in_file(path))?;
        // Inner nodes are contiguous between the leaves and the footer and about 1/fan-out of the file: keep them
        // in memory (verified once here), so a lookup reads only its leaf from storage.
        let body = len - FOOTER_LEN as u64;
        let inner_len = usize::try_from(body - footer.leaves_end)
            .map_err(|_| Error::corrupt("inner region too large").in_file(path))?;
        let mut inner = vec![0u8; inner_len];
        file.read_exact_at(&mut inner, footer.leaves_end)?;
        let mut at = 0;
        while at < inner.len() {
            let h = Header::parse(&inner[at..]).map_err(|e| e.in_file(path))?;
            let end = at + h.node_len();
            let node =
                inner.get(at..end).ok_or_else(|| Error::corrupt("inner node truncated").in_file(path))?;
            let v = NodeView::parse(node).map_err(|e| e.in_file(path))?;
            if v.is_leaf() {
                return Err(Error::corrupt("leaf in the inner-node region").in_file(path));
            }
            at = end;
        }
        let leaves = if footer.leaves_end <= LEAF_CACHE_MAX {
            let mut l = vec![0u8; footer.leaves_end as usize];
            file.read_exact_at(&mut l, 0)?;
            let mut at = 0;
            while at < l.len() {
                let h = Header::parse(&l[at..]).map_err(|e| e.in_file(path))?;
                let end = at + h.node_len();
                let node = l.get(at..end).ok_or_else(|| Error::corrupt("leaf truncated").in_file(path))?;
                let v = NodeView::parse(node).map_err(|e| e.in_file(path))?;
                if !v.is_leaf() {
                    return Err(Error::corrupt("inner node in the leaf region").in_file(path));
                }
                at = end;
            }
            Some(l)
        } else {
            None
        };
        Ok(DrTree { file, path: path.to_path_buf(), len, footer, inner, leaves })
    }

    /// The bytes of the node at `offset`: borrowed from the inner-node cache, or read from the file into `buf`.
    fn node<'b>(&'b self, offset: u64, len: u32, buf: &'b mut Vec<u8>) -> Result<NodeView<'b>> {
        if offset >= self.footer.leaves_end {
            let at = usize::try_from(offset - self.footer.leaves_end).unwrap_or(usize::MAX);
            let b = at
                .checked_add(len as usize)
                .and_then(|end| self.inner.get(at..end))
                .ok_or_else(|| Error::corrupt(format!("node pointer {offset}+{len} outside the file")))
                .map_err(|e| e.in_file(&self.path))?;
            return NodeView::parse_with(b, false).map_err(|e| e.in_file(&self.path));
        }
        if let Some(l) = &self.leaves {
            let b = usize::try_from(offset)
                .ok()
                .and_then(|at| l.get(at..at.checked_add(len as usize)?))
                .ok_or_else(|| Error::corrupt(format!("node pointer {offset}+{len} outside the leaves")))
                .map_err(|e| e.in_file(&self.path))?;
            return NodeView::parse_with(b, false).map_err(|e| e.in_file(&self.path));
        }
        self.read_node(offset, len, buf)?;
        NodeView::parse_with(buf, false)
    }

    /// The footer.
    pub fn footer(&self) -> &Footer {
        &self.footer
    }

    /// The file's length in bytes.
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the node at `offset` of `len` bytes and checks its checksum.
    fn read_node(&self, offset: u64, len: u32, buf: &mut Vec<u8>) -> Result<()> {
        let body = self.len - FOOTER_LEN as u64;
        if len as usize > MAX_NODE_LEN || offset.checked_add(u64::from(len)).is_none_or(|e| e > body) {
            return Err(
                Error::corrupt(format!("node pointer {offset}+{len} outside the file")).in_file(&self.path)
            );
        }
        buf.resize(len as usize, 0);
        self.file.read_exact_at(buf, offset)?;
        NodeView::parse(buf).map_err(|e| e.in_file(&self.path))?;
        Ok(())
    }

    /// The delete covering `(key, seq)` that a reader at `snapshot` sees, if this tree holds one. Reads one node
    /// per tree level at most; `nodes` counts them.
    pub fn covering(&self, key: &[u8], seq: u64, snapshot: u64, nodes: &mut u64) -> Result<Option<u64>> {
        let f = &self.footer;
        if f.height == 0 || seq < f.min_seq || seq >= f.max_seq {
            return Ok(None);
        }
        let mut buf = Vec::new();
        let (mut offset, mut len) = (f.root_offset, f.root_len);
        let mut height = f.height;
        loop {
            let v = self.node(offset, len, &mut buf)?;
            *nodes += 1;
            height = self.expect_height(&v, height)?;
            let Some(i) = v.last_le(key)? else { return Ok(None) };
            if v.is_leaf() {
                let start = v.area(i)?.start;
                let mut j = i;
                loop {
                    let a = v.area(j)?;
                    if a.start != start {
                        return Ok(None);
                    }
                    if a.covers(key, seq) {
                        return Ok((a.seq <= snapshot).then_some(a.seq));
                    }
                    if j == 0 {
                        return Ok(None);
                    }
                    j -= 1;
                }
            }
            let c = v.child(i)?;
            if !c.may_cover(key, seq, snapshot) {
                return Ok(None);
            }
            (offset, len) = (c.offset, c.len);
        }
    }

    /// Checks that a node read while descending sits at the height its parent implies (`levels_left` node levels
    /// from here to the leaves, inclusive); returns the count for its children. Bounds every descent, so a pointer
    /// cycle in a damaged file is corruption, not a hang.
    fn expect_height(&self, v: &NodeView<'_>, levels_left: u32) -> Result<u32> {
        if levels_left == 0 || u32::from(v.header.height) + 1 != levels_left {
            return Err(
                Error::corrupt("node height does not match its place in the tree").in_file(&self.path)
            );
        }
        Ok(levels_left - 1)
    }

    /// Reads every inner node and checks that each child's recorded bounds match the child.
    fn check_subtree(&self, offset: u64, len: u32, levels_left: u32, want: Option<&ChildRef>) -> Result<()> {
        let mut buf = Vec::new();
        let (below, decoded) = {
            let v = self.node(offset, len, &mut buf)?;
            let below = self.expect_height(&v, levels_left)?;
            (below, crate::node::decode_node_view(&v).map_err(|e| e.in_file(&self.path))?)
        };
        let bad = |m: &str| Err(Error::corrupt(m.to_string()).in_file(&self.path));
        match decoded {
            crate::node::Node::Leaf(areas) => {
                if let (Some(w), Some(first), Some(last)) = (want, areas.first(), areas.last()) {
                    let min = areas.iter().map(|a| a.min_seq).min().unwrap_or(0);
                    let max = areas.iter().map(|a| a.max_seq).max().unwrap_or(0);
                    let vis = areas.iter().map(|a| a.seq).min().unwrap_or(0);
                    if w.first != first.start
                        || w.end != last.end
                        || (w.min_seq, w.max_seq, w.min_vis) != (min, max, vis)
                    {
                        return bad("leaf bounds differ from its parent's entry");
                    }
                }
                if areas.is_empty() {
                    return bad("empty leaf");
                }
            }
            crate::node::Node::Inner(_, children) => {
                if want.zip(children.first()).is_some_and(|(w, first)| w.first != first.first) {
                    return bad("inner node bounds differ from its parent's entry");
                }
                if children.is_empty() {
                    return bad("empty inner node");
                }
                for c in &children {
                    self.check_subtree(c.offset, c.len, below, Some(c))?;
                }
            }
        }
        Ok(())
    }

    /// The file offset of the leaf that holds the first area ending after `key` (or the leaf region's end).
    /// The leaf where areas ending after `key` begin, and, when the descent stepped past a child that ends at or
    /// before `key`, that child's largest end key: every area before the leaf ends at or before it.
    fn seek_leaf(&self, key: &[u8]) -> Result<(u64, Option<Vec<u8>>)> {
        let f = &self.footer;
        if f.height == 0 {
            return Ok((0, None));
        }
        let mut buf = Vec::new();
        let (mut offset, mut len) = (f.root_offset, f.root_len);
        let mut height = f.height;
        let mut stepped: Option<Vec<u8>> = None;
        loop {
            let v = self.node(offset, len, &mut buf)?;
            height = self.expect_height(&v, height)?;
            if v.is_leaf() {
                return Ok((offset, stepped));
            }
            let i = v.last_le(key)?.unwrap_or(0);
            let c = v.child(i)?;
            // The chosen child ends at or before `key`: the next child (if any) is where areas after `key` start.
            let c = if c.end.as_slice() <= key && i + 1 < v.len() {
                stepped = Some(c.end.to_vec());
                v.child(i + 1)?
            } else {
                c
            };
            (offset, len) = (c.offset, c.len);
        }
    }

    /// Iterates the areas whose end key is after `from`, in DR-tree order, reading leaves sequentially.
    pub fn iter_from(self: &Arc<Self>, from: &[u8]) -> Result<AreaIter> {
        let (next, stepped) = self.seek_leaf(from)?;
        Ok(AreaIter {
            tree: Arc::clone(self),
            next,
            buf: Vec::new(),
            idx: 0,
            from: from.to_vec(),
            leaves: 0,
            floor_known: stepped.is_some(),
            floor: stepped.unwrap_or_default(),
        })
    }

    /// Iterates every area.
    pub fn iter(self: &Arc<Self>) -> Result<AreaIter> {
        Ok(AreaIter {
            tree: Arc::clone(self),
            next: 0,
            buf: Vec::new(),
            idx: 0,
            from: Vec::new(),
            leaves: 0,
            floor: Vec::new(),
            floor_known: true,
        })
    }

    /// Reads and validates every node and checks order and disjointness of all areas (`rangedb`'s check).
    pub fn check(self: &Arc<Self>) -> Result<u64> {
        if self.footer.height > 0 {
            self.check_subtree(self.footer.root_offset, self.footer.root_len, self.footer.height, None)?;
        }
        let mut prev: Option<Area> = None;
        let mut n = 0u64;
        let mut it = self.iter()?;
        while let Some(a) = it.next_area()? {
            if let Some(p) = &prev {
                crate::disjoint::check_disjoint(&[p.clone(), a.clone()])
                    .map_err(|m| Error::corrupt(m).in_file(&self.path))?;
            }
            n += 1;
            prev = Some(a);
        }
        if n != self.footer.areas {
            return Err(Error::corrupt(format!(
                "footer counts {} areas, leaves hold {n}",
                self.footer.areas
            ))
            .in_file(&self.path));
        }
        Ok(n)
    }
}

/// Sequential reader of a DR-tree's areas.
#[derive(Debug)]
pub struct AreaIter {
    tree: Arc<DrTree>,
    next: u64,
    buf: Vec<u8>,
    idx: usize,
    from: Vec<u8>,
    leaves: u64,
    /// After a seek to `from`: a key at or below `from` such that no area this iterator skipped or stepped over
    /// covers a key in `[floor, from]` (the largest end key of those areas). Meaningful when `floor_known`.
    floor: Vec<u8>,
    floor_known: bool,
}

impl AreaIter {
    /// Repositions on the first area whose end key is after `from` (forward or backward).
    pub fn seek(&mut self, from: &[u8]) -> Result<()> {
        let (next, stepped) = self.tree.seek_leaf(from)?;
        self.next = next;
        self.buf.clear();
        self.idx = 0;
        self.from.clear();
        self.from.extend_from_slice(from);
        self.floor_known = stepped.is_some();
        self.floor = stepped.unwrap_or_default();
        Ok(())
    }

    /// The largest end key of the areas before the first one returned since the last seek, when the seek skipped
    /// or stepped over any; `None` when it did not (then every area before the first one returned ends at or
    /// before that area's start, and there is none before it if that start is after the seek key).
    pub(crate) fn floor(&self) -> Option<&[u8]> {
        self.floor_known.then_some(self.floor.as_slice())
    }

    /// Leaves read so far.
    pub fn leaves_read(&self) -> u64 {
        self.leaves
    }

    /// The next area, or `None` at the end.
    pub fn next_area(&mut self) -> Result<Option<Area>> {
        loop {
            if !self.buf.is_empty() {
                // Verified when loaded below (or when the leaf cache was filled).
                let v = NodeView::parse_with(&self.buf, false).map_err(|e| e.in_file(&self.tree.path))?;
                while self.idx < v.len() {
                    let a = v.area(self.idx)?;
                    self.idx += 1;
                    if a.end > self.from.as_slice() {
                        return Ok(Some(a.to_area()));
                    }
                    // Ends grow along the leaves (disjoint key ranges; a band stack shares one end).
                    self.floor.clear();
                    self.floor.extend_from_slice(a.end);
                    self.floor_known = true;
                }
                self.buf.clear();
            }
            let end = self.tree.footer.leaves_end;
            if self.next >= end {
                return Ok(None);
            }
            let mut h = [0u8; HEADER_LEN];
            let cached = self.tree.leaves.as_deref();
            match cached.and_then(|l| l.get(self.next as usize..self.next as usize + HEADER_LEN)) {
                Some(b) => h.copy_from_slice(b),
                None => self.tree.file.read_exact_at(&mut h, self.next)?,
            }
            let header = Header::parse(&h).map_err(|e| e.in_file(&self.tree.path))?;
            let len = u32::try_from(header.node_len())
                .map_err(|_| Error::corrupt("leaf too long").in_file(&self.tree.path))?;
            if self.next + u64::from(len) > end || header.height != 0 {
                return Err(Error::corrupt("leaf region malformed").in_file(&self.tree.path));
            }
            let mut buf = std::mem::take(&mut self.buf);
            match cached.and_then(|l| l.get(self.next as usize..(self.next + u64::from(len)) as usize)) {
                // The leaf cache was checksum-verified when the tree was opened.
                Some(b) => {
                    buf.clear();
                    buf.extend_from_slice(b);
                }
                None => self.tree.read_node(self.next, len, &mut buf)?,
            }
            self.buf = buf;
            self.next += u64::from(len);
            self.idx = 0;
            self.leaves += 1;
        }
    }
}
