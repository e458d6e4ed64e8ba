//! `SyncWatch`: a file handle that remembers whether a sync of it ever failed.
//!
//! After a failed `fdatasync` Linux marks the file's dirty pages clean without writing them ("fsyncgate"), so
//! they may be lost on the media while reads still return them from the page cache, and no later sync writes
//! them. A structure updated in place (FlexFile's data, log and tree files) then cannot be reloaded from its files
//! as if nothing happened: what it reads back may be gone after the next power loss. Engines wrap such files so
//! they can tell a failed sync, which only a crash-style recovery from the media can repair, from a failed
//! write, which leaves the pages that were written dirty and a later sync good.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::{File, Result};

/// A flag that the file handles it watches ([`SyncFailures::watch`]) set when a sync of one fails.
#[derive(Debug, Default, Clone)]
pub struct SyncFailures(Arc<AtomicBool>);

impl SyncFailures {
    /// Whether a sync of any watched file failed.
    pub fn any(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// `file`, watched: a failed `sync_data` on the result sets this flag.
    pub fn watch(&self, file: Arc<dyn File>) -> Arc<dyn File> {
        Arc::new(SyncWatch { inner: file, failed: self.clone() })
    }
}

/// A file whose failed syncs set a [`SyncFailures`] flag; everything else passes through.
#[derive(Debug)]
struct SyncWatch {
    inner: Arc<dyn File>,
    failed: SyncFailures,
}

impl File for SyncWatch {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.inner.read_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.inner.write_all_at(buf, offset)
    }

    fn sync_data(&self) -> Result<()> {
        let r = self.inner.sync_data();
        if r.is_err() {
            self.failed.0.store(true, Ordering::Release);
        }
        r
    }

    fn len(&self) -> Result<u64> {
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.inner.set_len(len)
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_exact_at(buf, offset)
    }

    fn insert_range(&self, offset: u64, len: u64) -> Result<()> {
        self.inner.insert_range(offset, len)
    }

    fn collapse_range(&self, offset: u64, len: u64) -> Result<()> {
        self.inner.collapse_range(offset, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Fault, FaultFs, FaultKind, Fs, MemFs, Op, OpenMode};
    use std::path::Path;

    #[test]
    fn a_failed_sync_sets_the_flag_and_a_failed_write_does_not() {
        let fs = FaultFs::new(Arc::new(MemFs::new()));
        let flag = SyncFailures::default();
        let f = flag.watch(fs.open(Path::new("f"), OpenMode::CreateNew).unwrap());
        fs.inject(Fault::after(Op::Write, 0, FaultKind::Eio));
        assert!(f.write_all_at(b"x", 0).is_err());
        assert!(!flag.any());
        f.write_all_at(b"abc", 0).unwrap();
        f.sync_data().unwrap();
        assert!(!flag.any());
        fs.inject(Fault::after(Op::Sync, 0, FaultKind::Eio));
        assert!(f.sync_data().is_err());
        assert!(flag.any());
        let mut b = [0u8; 3];
        f.read_exact_at(&mut b, 0).unwrap();
        assert_eq!(&b, b"abc");
    }
}
