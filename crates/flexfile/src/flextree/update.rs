//! FlexTree updates (§3.2): insert-range, collapse-range, overwrite, remap, tags and truncate, each a descent
//! that changes one leaf and fixes the shifts on its path.

use crate::error::{Error, Result};

use super::{Body, Extent, FlexTree, HOLE, MAX_SIZE, Piece, corrupt, leaf_index, relayout};

impl FlexTree {
    /// Inserts `len` bytes mapped at `addr` (or a hole when `addr == HOLE`) at `off`, shifting everything at and
    /// after `off` up by `len`. `off` may equal the size (append).
    pub fn insert(&mut self, off: u64, len: u64, addr: u64, tag: u16) -> Result<()> {
        if off > self.size {
            return Err(Error::invalid(format!("insert at {off} past the end ({})", self.size)));
        }
        if len == 0 {
            return Ok(());
        }
        if self.size.checked_add(len).is_none_or(|s| s > MAX_SIZE) {
            return Err(Error::invalid("file would exceed the maximum size (2^48 - 1)"));
        }
        if addr != HOLE && addr.checked_add(len).is_none_or(|e| e > HOLE) {
            return Err(Error::invalid("physical address out of the 48-bit range"));
        }
        let maxl = self.cfg.max_extent_len() as u64;
        let mut done = 0;
        while done < len {
            let n = (len - done).min(maxl);
            let a = if addr == HOLE { HOLE } else { addr + done };
            self.insert_one(off + done, n as u32, a, if done == 0 { tag } else { 0 })?;
            done += n;
        }
        self.after_change()
    }

    fn insert_one(&mut self, off: u64, len: u32, addr: u64, tag: u16) -> Result<()> {
        let (path, leaf, base) = self.descend_mut(off)?;
        let xr = (off as i64 - base) as u64;
        let ext = match &self.node(leaf).body {
            Body::Leaf(e) => e,
            Body::Internal { .. } => return Err(corrupt("expected a leaf")),
        };
        let mut k = leaf_index(ext, xr);
        let split = k < ext.len() && (ext[k].poff as u64) < xr;
        let merge = !split && k > 0 && tag == 0 && self.can_merge(&ext[k - 1], addr, len);
        let ext = self.leaf_mut(leaf)?;
        let mut added = 0;
        if split {
            let e = ext[k];
            let d = (xr - e.poff as u64) as u32;
            ext[k].len = d;
            let a = if e.is_hole() { HOLE } else { e.addr + d as u64 };
            ext.insert(k + 1, Extent { poff: 0, len: e.len - d, tag: 0, addr: a });
            added += 1;
            k += 1;
        }
        let from = if merge {
            ext[k - 1].len += len;
            k
        } else {
            ext.insert(k, Extent { poff: 0, len, tag, addr });
            added += 1;
            k
        };
        // With `from == 0` the new extent leads the leaf at `xr`.
        let m = relayout(ext, from, xr)?;
        self.nr_extents += added;
        self.size += len as u64;
        self.apply_rebase(&path, m)?;
        self.shift_after(&path, len as i64)?;
        self.path_buf = path;
        Ok(())
    }

    /// Removes `[off, off + len)`, shifting everything after it down by `len`. Returns the removed pieces (with
    /// their physical addresses), so the caller can account the freed space.
    pub fn collapse(&mut self, off: u64, len: u64) -> Result<Vec<Piece>> {
        self.check_range(off, len)?;
        let mut pieces = Vec::new();
        let mut remaining = len;
        while remaining > 0 {
            let (path, leaf, base) = self.descend_mut(off)?;
            let xr = (off as i64 - base) as u64;
            let ext = self.leaf_mut(leaf)?;
            let mut k = leaf_index(ext, xr);
            if k >= ext.len() {
                return Err(corrupt(format!("no extent at offset {off} while collapsing")));
            }
            let mut added: i64 = 0;
            if (ext[k].poff as u64) < xr {
                let e = ext[k];
                let d = (xr - e.poff as u64) as u32;
                ext[k].len = d;
                let a = if e.is_hole() { HOLE } else { e.addr + d as u64 };
                ext.insert(k + 1, Extent { poff: xr as u32, len: e.len - d, tag: 0, addr: a });
                added += 1;
                k += 1;
            }
            let mut removed = 0u64;
            while remaining > 0 && k < ext.len() {
                let e = ext[k];
                if e.len as u64 <= remaining {
                    ext.remove(k);
                    added -= 1;
                    pieces.push(Piece { off, len: e.len as u64, addr: e.addr, tag: e.tag });
                    remaining -= e.len as u64;
                    removed += e.len as u64;
                } else {
                    let d = remaining as u32;
                    pieces.push(Piece { off, len: d as u64, addr: e.addr, tag: e.tag });
                    let x = &mut ext[k];
                    x.len -= d;
                    if !x.is_hole() {
                        x.addr += d as u64;
                    }
                    x.tag = 0;
                    removed += d as u64;
                    remaining = 0;
                }
            }
            if k < ext.len() {
                ext[k].poff = xr as u32;
                relayout(ext, k + 1, 0)?;
            }
            if removed == 0 {
                return Err(corrupt("collapse made no progress"));
            }
            self.nr_extents = (self.nr_extents as i64 + added) as u64;
            self.size -= removed;
            self.shift_after(&path, -(removed as i64))?;
            self.rebalance(&path)?;
            self.path_buf = path;
        }
        self.after_change()?;
        Ok(pieces)
    }

    /// Replaces `[off, off + len)` with a new mapping (extending the tree when it runs past the end). A tag at
    /// `off` stays. Returns the pieces that were replaced. REQUIRES: `off <= size`.
    pub fn write(&mut self, off: u64, len: u64, addr: u64) -> Result<Vec<Piece>> {
        if off > self.size {
            return Err(Error::invalid(format!("write at {off} past the end ({})", self.size)));
        }
        let tag = if off < self.size { self.get_tag(off)? } else { 0 };
        let ov = len.min(self.size - off);
        let removed = if ov > 0 { self.collapse(off, ov)? } else { Vec::new() };
        self.insert(off, len, addr, tag)?;
        Ok(removed)
    }

    /// Points the extent that starts exactly at `off` and is exactly `len` long at `new_addr` (garbage
    /// collection's relocation). Returns the old address.
    pub fn remap(&mut self, off: u64, len: u64, new_addr: u64) -> Result<u64> {
        self.check_range(off, len)?;
        if new_addr.checked_add(len).is_none_or(|e| e > HOLE) {
            return Err(Error::invalid("physical address out of the 48-bit range"));
        }
        let (_, leaf, base) = self.descend_mut(off)?;
        let xr = (off as i64 - base) as u64;
        let ext = self.leaf_mut(leaf)?;
        let k = leaf_index(ext, xr);
        match ext.get_mut(k) {
            Some(e) if e.poff as u64 == xr && e.len as u64 == len && !e.is_hole() => {
                let old = e.addr;
                e.addr = new_addr;
                self.after_change()?;
                Ok(old)
            }
            _ => Err(Error::invalid(format!("no data extent of length {len} starts at {off}"))),
        }
    }

    /// Sets the tag of the extent starting at `off`, splitting an extent there if needed.
    pub fn set_tag(&mut self, off: u64, tag: u16) -> Result<()> {
        self.check_range(off, 1)?;
        let (_, leaf, base) = self.descend_mut(off)?;
        let xr = (off as i64 - base) as u64;
        let ext = self.leaf_mut(leaf)?;
        let mut k = leaf_index(ext, xr);
        if k >= ext.len() {
            return Err(corrupt(format!("no extent at offset {off}")));
        }
        if (ext[k].poff as u64) < xr {
            let e = ext[k];
            let d = (xr - e.poff as u64) as u32;
            ext[k].len = d;
            let a = if e.is_hole() { HOLE } else { e.addr + d as u64 };
            ext.insert(k + 1, Extent { poff: xr as u32, len: e.len - d, tag: 0, addr: a });
            k += 1;
            ext[k].tag = tag;
            self.nr_extents += 1;
        } else {
            ext[k].tag = tag;
        }
        self.after_change()
    }

    /// Truncates or extends (with a hole) to `new_size`. Returns the removed pieces.
    pub fn truncate(&mut self, new_size: u64) -> Result<Vec<Piece>> {
        if new_size < self.size {
            self.collapse(new_size, self.size - new_size)
        } else {
            self.insert(self.size, new_size - self.size, HOLE, 0)?;
            Ok(Vec::new())
        }
    }
}
