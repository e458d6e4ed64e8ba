//! A volume served as an NBD export.

use nbd::{BlockDevice, BlockSizes, Features};

use crate::Volume;

/// `base:allocation` is answered from the index and the segment cache: blocks neither maps (never written,
/// trimmed, zeroed) are holes that read as zeros.
///
/// Requests of any byte alignment are served (partial blocks are read-modified-written inside the volume lock);
/// 4 KiB, the block size, is preferred. WRITE_ZEROES (also with NO_HOLE: the store keeps no allocation that a hole would release,
/// so a delete is exactly "reads return zeros") and TRIM are range deletes, so fast zeroing is honoured. One volume
/// state serves every connection, so flushes are globally visible and multi-conn is safe.
impl BlockDevice for Volume {
    fn size(&self) -> u64 {
        Volume::size(self)
    }

    fn block_sizes(&self) -> BlockSizes {
        BlockSizes { minimum: 1, preferred: crate::BLOCK_SIZE as u32 }
    }

    fn features(&self) -> Features {
        Features {
            read_only: false,
            flush: true,
            fua: true,
            trim: true,
            write_zeroes: true,
            fast_zero: true,
            cache: false,
            flush_visible_to_all: true,
            rotational: false,
        }
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> nbd::Result<()> {
        Ok(self.read(buf, offset)?)
    }

    fn write_at(&self, data: &[u8], offset: u64, fua: bool) -> nbd::Result<()> {
        Ok(self.write(data, offset, fua)?)
    }

    fn flush(&self) -> nbd::Result<()> {
        Ok(Volume::flush(self)?)
    }

    fn trim(&self, offset: u64, len: u64, fua: bool) -> nbd::Result<()> {
        Ok(self.zero(offset, len, fua)?)
    }

    fn block_status(&self, offset: u64, len: u32) -> nbd::Result<Vec<(u32, u32)>> {
        use nbd::protocol::base_allocation::{HOLE, ZERO};
        let ext = self.allocation(offset, u64::from(len))?;
        // Each extent is at most `len` bytes, so it fits in u32.
        Ok(ext.into_iter().map(|(l, data)| (l as u32, if data { 0 } else { HOLE | ZERO })).collect())
    }

    fn write_zeroes(
        &self,
        offset: u64,
        len: u64,
        _may_trim: bool,
        _fast: bool,
        fua: bool,
    ) -> nbd::Result<()> {
        Ok(self.zero(offset, len, fua)?)
    }
}
