//! `FileDevice`: an export backed by one file through `vfs`, so the server is usable on real storage before (and
//! independently of) the block store.
//!
//! The file's length is the device size, fixed when the device is created. Writes are positional writes into the
//! file; FUA and flush are `sync_data`. All connections share one open file (and so one OS page cache), which is
//! why flush effects are visible to every connection (`flush_visible_to_all`). TRIM is accepted as the hint
//! proto.md allows it to be and discards nothing: `vfs` offers no hole punching, and the file stays fully
//! provisioned. WRITE_ZEROES writes zeros, which honours `NO_HOLE` by construction. CACHE reads the range once to
//! warm the page cache.

use std::path::Path;
use std::sync::Arc;

use vfs::{File, Fs, OpenMode};

use crate::device::{BlockDevice, BlockSizes, Features};
use crate::error::{Error, Result};

/// A device stored in one file. See the module documentation.
#[derive(Debug)]
pub struct FileDevice {
    file: Arc<dyn File>,
    size: u64,
    read_only: bool,
}

impl FileDevice {
    /// Creates a new zero-filled file of `size` bytes at `path` (which must not exist) and makes its creation
    /// durable.
    pub fn create(fs: &dyn Fs, path: &Path, size: u64) -> Result<Self> {
        if size == 0 {
            return Err(Error::InvalidArgument("a device needs a nonzero size".into()));
        }
        let file = fs.open(path, OpenMode::CreateNew)?;
        file.set_len(size)?;
        file.sync_data()?;
        fs.sync_dir(path.parent().unwrap_or(Path::new("")))?;
        Ok(FileDevice { file, size, read_only: false })
    }

    /// Opens an existing file as a device of its current length.
    pub fn open(fs: &dyn Fs, path: &Path, read_only: bool) -> Result<Self> {
        let mode = if read_only { OpenMode::ReadOnly } else { OpenMode::ReadWrite };
        let file = fs.open(path, mode)?;
        let size = file.len()?;
        if size == 0 {
            return Err(Error::InvalidArgument(format!(
                "{} is empty; a device needs a nonzero size",
                path.display()
            )));
        }
        Ok(FileDevice { file, size, read_only })
    }
}

impl BlockDevice for FileDevice {
    fn size(&self) -> u64 {
        self.size
    }

    fn block_sizes(&self) -> BlockSizes {
        BlockSizes::default()
    }

    fn features(&self) -> Features {
        Features {
            read_only: self.read_only,
            flush: true,
            fua: true,
            trim: true,
            write_zeroes: true,
            fast_zero: false,
            cache: true,
            flush_visible_to_all: true,
            rotational: false,
        }
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        Ok(self.file.read_exact_at(buf, offset)?)
    }

    fn write_at(&self, data: &[u8], offset: u64, fua: bool) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.file.write_all_at(data, offset)?;
        if fua {
            self.file.sync_data()?;
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(self.file.sync_data()?)
    }

    fn cache(&self, offset: u64, len: u64) -> Result<()> {
        const PIECE: u64 = 1 << 20;
        let mut buf = vec![0u8; PIECE.min(len) as usize];
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let n = PIECE.min(end - at) as usize;
            self.file.read_exact_at(&mut buf[..n], at)?;
            at += n as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_write_reopen_read() {
        let fs = vfs::MemFs::new();
        let p = Path::new("disk.img");
        let d = FileDevice::create(&fs, p, 1 << 20).unwrap();
        d.write_at(b"hello", 4096, true).unwrap();
        d.write_zeroes(4097, 2, true, false, false).unwrap();
        assert!(matches!(d.write_zeroes(0, 1, true, true, false), Err(Error::Unsupported(_))));
        d.flush().unwrap();
        drop(d);
        let d = FileDevice::open(&fs, p, true).unwrap();
        assert_eq!(d.size(), 1 << 20);
        let mut b = [0u8; 5];
        d.read_at(&mut b, 4096).unwrap();
        assert_eq!(&b, b"h\0\0lo");
        assert!(matches!(d.write_at(b"x", 0, false), Err(Error::ReadOnly)));
        assert!(FileDevice::create(&fs, p, 10).is_err(), "create refuses an existing file");
    }
}
