//! Shared pieces of the randomized tests: the per-block model, the operation generator and seeding.
#![allow(dead_code)]

use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rask::{BlockRange, WriteRef};

/// The reference: one entry per mapped block, (write number, offset of the block within its write).
#[derive(Default, Clone, Debug)]
pub struct Model {
    pub blocks: BTreeMap<u64, (u64, u64)>,
}

impl Model {
    pub fn put(&mut self, r: BlockRange, w: WriteRef) {
        for (i, b) in (r.first()..=r.last()).enumerate() {
            self.blocks.insert(b, (w.write, w.offset + i as u64));
        }
    }

    pub fn delete(&mut self, r: BlockRange) {
        let keys: Vec<u64> = self.blocks.range(r.first()..=r.last()).map(|(k, _)| *k).collect();
        for k in keys {
            self.blocks.remove(&k);
        }
    }

    /// Per-block view of `r`.
    pub fn get(&self, r: BlockRange) -> Vec<(u64, (u64, u64))> {
        self.blocks.range(r.first()..=r.last()).map(|(k, v)| (*k, *v)).collect()
    }
}

/// Per-block (block, (write, offset)) pairs.
pub type Blocks = Vec<(u64, (u64, u64))>;

/// Expands pieces into per-block pairs, checking they are in block order, disjoint and inside `within`.
pub fn expand(pieces: &[(BlockRange, WriteRef)], within: BlockRange) -> Result<Blocks, String> {
    let mut out = Vec::new();
    let mut last: Option<u64> = None;
    for (r, v) in pieces {
        if !within.covers(r) {
            return Err(format!("piece {r:?} outside {within:?}"));
        }
        if let Some(l) = last
            && r.first() <= l
        {
            return Err(format!("piece {r:?} not after block {l}"));
        }
        for (i, b) in (r.first()..=r.last()).enumerate() {
            out.push((b, (v.write, v.offset + i as u64)));
        }
        last = Some(r.last());
    }
    Ok(out)
}

/// One operation of a randomized run.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    Put(BlockRange, WriteRef),
    Delete(BlockRange),
    Get(BlockRange),
}

/// Generates operations with the overlap patterns of the paper's Fig. 6: a new range covering an old one,
/// overlapping it partially, covering or overlapping many; plus same-left-bound rewrites (lightweight GC),
/// sequential continuation (consecutive writes) and ranges at the top of the address space.
pub struct OpGen {
    rng: SmallRng,
    space: u64,
    write: u64,
    recent: Vec<BlockRange>,
}

impl OpGen {
    pub fn new(seed: u64, space: u64) -> OpGen {
        OpGen { rng: SmallRng::seed_from_u64(seed), space, write: 0, recent: Vec::new() }
    }

    fn base(&mut self) -> u64 {
        if self.rng.random_ratio(1, 40) { u64::MAX - self.space } else { 0 }
    }

    fn range(&mut self) -> BlockRange {
        let base = self.base();
        let len = match self.rng.random_range(0..10) {
            0..=4 => self.rng.random_range(1..=8),
            5..=7 => self.rng.random_range(1..=32),
            8 => self.rng.random_range(1..=self.space / 4),
            _ => 1,
        };
        let pick = self.rng.random_range(0..10);
        let r = if pick < 4 && !self.recent.is_empty() {
            let old = self.recent[self.rng.random_range(0..self.recent.len())];
            match pick {
                // Same left bound, possibly longer or shorter.
                0 => BlockRange::with_len(old.first(), len).ok(),
                // Cover the old range.
                1 => BlockRange::new(
                    old.first().saturating_sub(self.rng.random_range(0..4)),
                    old.last().saturating_add(self.rng.random_range(0..4)),
                )
                .ok(),
                // Continue it (a consecutive write).
                2 => old.last().checked_add(1).and_then(|f| BlockRange::with_len(f, len).ok()),
                // Partially overlap it.
                _ => {
                    let f = self.rng.random_range(old.first()..=old.last());
                    BlockRange::with_len(f, len).ok()
                }
            }
        } else {
            None
        };
        let r = r.unwrap_or_else(|| {
            let f = base + self.rng.random_range(0..self.space - len.min(self.space - 1));
            BlockRange::with_len(f, len).unwrap_or(BlockRange::block(f))
        });
        if self.recent.len() >= 16 {
            let i = self.rng.random_range(0..16);
            self.recent[i] = r;
        } else {
            self.recent.push(r);
        }
        r
    }

    pub fn next_op(&mut self, read_pct: u32, delete_pct: u32) -> Op {
        let roll = self.rng.random_range(0..100);
        if roll < read_pct {
            let r = if self.rng.random_ratio(1, 10) {
                let base = self.base();
                BlockRange::new(base, base + self.space - 1).unwrap_or(BlockRange::FULL)
            } else {
                self.range()
            };
            Op::Get(r)
        } else if roll < read_pct + delete_pct {
            Op::Delete(self.range())
        } else {
            let r = self.range();
            let w = WriteRef::new(self.write, 0);
            self.write += 1;
            Op::Put(r, w)
        }
    }
}

/// Seeds for a randomized test: `RANGEDB_SEED` alone when set, else a fixed default and a few more.
pub fn seeds() -> Vec<u64> {
    testkit::seeds(&[0x5EED_0001, 2, 3, 4])
}

/// Multiplier for test sizes from `RANGEDB_TEST_SCALE` (default 1).
pub fn scale() -> usize {
    testkit::scale()
}
