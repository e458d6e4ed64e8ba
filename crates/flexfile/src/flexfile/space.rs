//! Space management of the data file (§4.1): garbage collection before writes, and defragmentation on request.
//! The policy is in the module comment of [`super`].

use std::collections::HashSet;

use super::{FlexFile, chunks};
use crate::error::{Error, Result};
use crate::flextree::HOLE;
use crate::log::Op;

impl FlexFile {
    /// Garbage-collects before an operation writing `n` bytes (the policy is in the module comment of
    /// `flexfile.rs`).
    pub(super) fn ensure_space(&mut self, n: u64) -> Result<()> {
        let cap = self.data.capacity();
        let need = n.div_ceil(cap) + 1;
        let reserve = self.opts.gc_reserve_segments;
        let (num, den) = (self.opts.utilization_cap.0 as u128, self.opts.utilization_cap.1 as u128);
        let (sn, sd) = (self.opts.gc_start_utilization.0 as u128, self.opts.gc_start_utilization.1 as u128);
        let live = self.data.live_bytes() as u128;
        let target = (live * sd).div_ceil(sn * cap as u128) as u64 + reserve + need;
        if self.data.count() < target {
            return Ok(());
        }
        let rounds = self.data.count() + 1;
        for _ in 0..rounds {
            if self.data.free_count() >= reserve + need {
                break;
            }
            let victims: Vec<u64> = self
                .data
                .gc_candidates()
                .into_iter()
                .filter(|&(_, v)| v as u128 * den <= cap as u128 * num)
                .take(self.opts.gc_batch)
                .map(|(s, _)| s)
                .collect();
            if victims.is_empty() {
                break;
            }
            self.relocate(&victims)?;
            self.commit()?;
            self.stats.gc_rounds += 1;
            self.stats.gc_segments += victims.len() as u64;
        }
        Ok(())
    }

    fn relocate(&mut self, victims: &[u64]) -> Result<()> {
        let set: HashSet<u64> = victims.iter().copied().collect();
        let seg = self.opts.segment_size;
        let mut moves = Vec::new();
        self.tree.for_each_extent(|off, e| {
            if !e.is_hole() && set.contains(&(e.addr / seg)) {
                moves.push((off, e.len, e.addr));
            }
        })?;
        let mut buf = Vec::new();
        for (off, len, addr) in moves {
            buf.resize(len as usize, 0);
            self.data.read(addr, &mut buf)?;
            let (new, n) = self.data.append(&buf, true)?;
            if n != len as usize {
                return Err(Error::corruption("data", "extent longer than a segment"));
            }
            self.run(Op::Relocate { off, len, addr: new })?;
            self.stats.gc_bytes += len as u64;
        }
        Ok(())
    }

    /// Rewrites `[off, off + len)` into fresh segments so its extents become physically contiguous.
    pub fn defrag(&mut self, off: u64, len: u64) -> Result<()> {
        if off.checked_add(len).is_none_or(|e| e > self.size()) {
            return Err(Error::invalid(format!("defrag {off}+{len} past the end ({})", self.size())));
        }
        let step = (self.data.capacity() as usize).max(1 << 20);
        self.guard(|f| {
            f.data.close_open()?;
            let mut buf = Vec::new();
            for (o, n) in chunks(len, step as u64) {
                buf.resize(n as usize, 0);
                f.read(off + o, &mut buf)?;
                // Holes stay holes.
                let pieces = f.tree.query(off + o, n)?;
                let mut at = 0u64;
                for p in pieces {
                    if p.addr != HOLE {
                        let s = at as usize;
                        let data = buf[s..s + p.len as usize].to_vec();
                        let user = f.stats.user_bytes;
                        f.ensure_space(p.len)?;
                        f.write_data(off + o + at, &data, false)?;
                        f.stats.user_bytes = user;
                    }
                    at += p.len;
                }
                f.end_op()?;
            }
            Ok(())
        })
    }
}
