//! The whole-file consistency check behind `rangedb inspect flexfile` and the tests.

use std::collections::HashMap;

use super::FlexFile;
use crate::error::{Error, Result};

impl FlexFile {
    /// Verifies every invariant: the tree's structure, the space accounting against the tree, and (when `deep`)
    /// the checksum of every mapped byte. Problems are `Corruption`.
    pub fn check(&mut self, deep: bool) -> Result<()> {
        self.tree.check()?;
        let seg = self.opts.segment_size;
        let mut valid: HashMap<u64, u64> = HashMap::new();
        let mut extents = Vec::new();
        self.tree.for_each_extent(|off, e| {
            if !e.is_hole() {
                *valid.entry(e.addr / seg).or_default() += e.len as u64;
                extents.push((off, e.len, e.addr));
            }
        })?;
        for s in 0..self.data.count().max(valid.keys().max().map_or(0, |m| m + 1)) {
            let want = valid.get(&s).copied().unwrap_or(0);
            if self.data.valid(s) != want {
                return Err(Error::corruption(
                    "data",
                    format!("segment {s}: accounted {} live bytes, tree maps {want}", self.data.valid(s)),
                ));
            }
        }
        for &(off, len, addr) in &extents {
            if addr % seg + len as u64 > self.data.capacity() {
                return Err(Error::corruption(
                    "tree",
                    format!("extent at {off} runs past its segment's data"),
                ));
            }
            if self.data.is_free(addr / seg) {
                return Err(Error::corruption("data", format!("extent at {off} maps a free segment")));
            }
        }
        if deep {
            let mut buf = Vec::new();
            for (_, len, addr) in extents {
                buf.resize(len as usize, 0);
                self.data.read(addr, &mut buf)?;
            }
        }
        Ok(())
    }
}
