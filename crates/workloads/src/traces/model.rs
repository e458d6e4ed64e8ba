//! The per-block reference model of a trace replay and the `--dump` format of `rangedb rask replay`.
//!
//! A replay stores, for every write, the value (write number, block offset within the write); writes are numbered
//! from 0 in trace order per volume, counting only writes. The model keeps that value per block, which is what any
//! correct range index must return, block by block. [`BlockModel::dump`] writes the final mapping in the spec's dump
//! format: per volume in id order, in ascending block order, lines `volume first_block last_block write_number
//! offset_of_first_block`, where consecutive blocks that map to the same write at consecutive offsets share one
//! line, and never-written blocks have no line. Two correct indexes therefore dump byte-identical files.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::block_op::{BlockOp, IoKind};
use super::volumes::Volumes;

/// The value a replay stores for one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockValue {
    /// The write's number within its volume (0-based, writes only).
    pub write: u64,
    /// The block's offset within that write.
    pub offset: u64,
}

/// One block per map entry: slow and obviously right.
#[derive(Debug, Clone, Default)]
pub struct BlockModel {
    volumes: Vec<VolumeModel>,
}

#[derive(Debug, Clone, Default)]
struct VolumeModel {
    blocks: BTreeMap<u64, BlockValue>,
    writes: u64,
}

impl BlockModel {
    /// An empty model.
    pub fn new() -> BlockModel {
        BlockModel::default()
    }

    fn volume(&mut self, v: u32) -> &mut VolumeModel {
        let v = v as usize;
        if self.volumes.len() <= v {
            self.volumes.resize_with(v + 1, VolumeModel::default);
        }
        &mut self.volumes[v]
    }

    /// Applies a write (returns its write number) or, for a read, returns `None` (see [`BlockModel::read`]).
    pub fn apply(&mut self, op: &BlockOp) -> Option<u64> {
        if op.kind == IoKind::Read {
            return None;
        }
        let vol = self.volume(op.volume);
        let write = vol.writes;
        vol.writes += 1;
        for (offset, block) in (op.first_block..=op.last_block).enumerate() {
            vol.blocks.insert(block, BlockValue { write, offset: offset as u64 });
        }
        Some(write)
    }

    /// What a read of `[first, last]` on `volume` returns: each written block with its value, in block order.
    pub fn read(&self, volume: u32, first: u64, last: u64) -> Vec<(u64, BlockValue)> {
        match self.volumes.get(volume as usize) {
            Some(vol) => vol.blocks.range(first..=last).map(|(&b, &v)| (b, v)).collect(),
            None => Vec::new(),
        }
    }

    /// Writes applied to `volume` so far.
    pub fn writes(&self, volume: u32) -> u64 {
        self.volumes.get(volume as usize).map_or(0, |v| v.writes)
    }

    /// Writes the dump of every volume. `volumes` names them (a volume without a name is written as its id).
    pub fn dump(&self, volumes: &Volumes, out: &mut impl Write) -> io::Result<()> {
        for (id, vol) in self.volumes.iter().enumerate() {
            let name = volumes.name(id as u32);
            let name = if name.is_empty() { id.to_string() } else { name.to_string() };
            let mut run: Option<(u64, u64, BlockValue)> = None; // (first, last, value of first)
            for (&block, &value) in &vol.blocks {
                if let Some((first, last, v0)) = run {
                    let continues = block == last + 1
                        && value.write == v0.write
                        && value.offset == v0.offset + (block - first);
                    if continues {
                        run = Some((first, block, v0));
                        continue;
                    }
                    writeln!(out, "{name} {first} {last} {} {}", v0.write, v0.offset)?;
                }
                run = Some((block, block, value));
            }
            if let Some((first, last, v0)) = run {
                writeln!(out, "{name} {first} {last} {} {}", v0.write, v0.offset)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(first: u64, last: u64) -> BlockOp {
        BlockOp { volume: 0, kind: IoKind::Write, first_block: first, last_block: last }
    }

    #[test]
    fn dump_merges_runs_of_one_write() {
        let mut m = BlockModel::new();
        m.apply(&w(0, 9)); // write 0
        m.apply(&w(3, 4)); // write 1 splits write 0
        m.apply(&w(20, 20)); // write 2
        let mut out = Vec::new();
        m.dump(&Volumes::numbered(1), &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "0 0 2 0 0\n0 3 4 1 0\n0 5 9 0 5\n0 20 20 2 0\n");
        assert_eq!(
            m.read(0, 2, 3),
            vec![(2, BlockValue { write: 0, offset: 2 }), (3, BlockValue { write: 1, offset: 0 })]
        );
        assert_eq!(m.writes(0), 3);
    }
}
