//! Read-ahead for a table cursor that walks data blocks in file order.
//!
//! A cache miss costs one positional read per 4 KiB block, and in a long scan the system call, not the copy, was
//! most of that cost (about a tenth of the scan). So, as RocksDB's automatic read-ahead does, once a cursor has
//! missed on [`TRIGGER`] blocks in file order, the next miss reads a window of the blocks that follow into a buffer
//! the next misses are served from. The window starts at [`FIRST_WINDOW`] and doubles with each read up to
//! [`MAX_WINDOW`]; a jump (a seek elsewhere, a step backwards) starts over. A level's cursor hands its state to the
//! next file's cursor, so a scan across files keeps its window (and any other file's cursor the buffer, so a
//! seek does not allocate one).
//!
//! Blocks read through the window are checked and cached exactly like blocks read alone: the window only changes
//! how the bytes arrive. A cursor holds at most one window ([`MAX_WINDOW`]), allocated only once it reads ahead.

/// Misses in file order before the next one reads ahead. RocksDB starts after two; a 100-entry scan misses on
/// about three blocks of each sorted run, and with two its windows were mostly unused (`bench lsm`
/// seekrandom-100 6-10 % slower in A/B runs; with four, no slower, and long scans lose four blocks' worth).
pub const TRIGGER: u32 = 4;
/// The first window.
pub const FIRST_WINDOW: usize = 8 << 10;
/// The largest window.
pub const MAX_WINDOW: usize = 256 << 10;

/// One cursor's read-ahead state. See the module comment.
#[derive(Debug)]
pub struct ReadAhead {
    /// The window's bytes: `buf[..filled]` holds the file's bytes from `start`.
    buf: Vec<u8>,
    start: u64,
    filled: usize,
    /// Where the block after the last one the cursor moved to starts.
    next: u64,
    /// Blocks in file order so far.
    run: u32,
    /// Bytes the next window reads.
    window: usize,
}

impl Default for ReadAhead {
    fn default() -> Self {
        ReadAhead { buf: Vec::new(), start: 0, filled: 0, next: 0, run: 0, window: FIRST_WINDOW }
    }
}

impl ReadAhead {
    /// The state for another file of a level, keeping the buffer's allocation but not its bytes. Moving on to
    /// the `next` file, the run and window carry over (a scan crossing files reads the next one's first block
    /// next); otherwise they start over.
    pub fn for_other_file(mut self, next: bool) -> Self {
        self.filled = 0;
        self.start = 0;
        self.next = 0;
        if !next {
            self.run = 0;
            self.window = FIRST_WINDOW;
        }
        self
    }

    /// Notes that the cursor moved to the block of `len` bytes (with trailer) at `off`; `miss` if the cache
    /// lacked it. Only misses in file order count towards reading ahead, as in RocksDB: a short scan over cached
    /// blocks should not start reading windows it will not use.
    pub fn note(&mut self, off: u64, len: usize, miss: bool) {
        if off == self.next {
            self.run = self.run.saturating_add(u32::from(miss));
        } else {
            self.run = u32::from(miss);
            self.window = FIRST_WINDOW;
        }
        self.next = off.saturating_add(len as u64);
    }

    /// The `len` bytes at `off` of `file`, whose readable region (for windows) ends at `limit`: from the window
    /// when it holds them; otherwise read alone, or with the window after them once the cursor runs in file
    /// order. REQUIRES: `off + len <= limit`.
    pub fn read(&mut self, file: &dyn vfs::File, off: u64, len: usize, limit: u64) -> vfs::Result<Vec<u8>> {
        if let Some(b) = self.buffered(off, len) {
            return Ok(b.to_vec());
        }
        if self.run <= TRIGGER {
            let mut v = vec![0u8; len];
            file.read_exact_at(&mut v, off)?;
            return Ok(v);
        }
        let room = usize::try_from(limit.saturating_sub(off)).unwrap_or(usize::MAX);
        let want = self.window.max(len).min(room.max(len));
        self.filled = 0;
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        file.read_exact_at(&mut self.buf[..want], off)?;
        self.start = off;
        self.filled = want;
        self.window = (self.window * 2).min(MAX_WINDOW);
        Ok(self.buf[..len].to_vec())
    }

    /// Bytes `[off, off + len)` if the window holds them.
    fn buffered(&self, off: u64, len: usize) -> Option<&[u8]> {
        let i = usize::try_from(off.checked_sub(self.start)?).ok()?;
        self.buf[..self.filled].get(i..i.checked_add(len)?)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use vfs::Fs;

    use super::*;

    /// A file that counts its reads.
    #[derive(Debug)]
    struct Counting {
        inner: Arc<dyn vfs::File>,
        reads: AtomicUsize,
    }

    impl vfs::File for Counting {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> vfs::Result<usize> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            self.inner.read_at(buf, offset)
        }
        fn write_all_at(&self, buf: &[u8], offset: u64) -> vfs::Result<()> {
            self.inner.write_all_at(buf, offset)
        }
        fn len(&self) -> vfs::Result<u64> {
            self.inner.len()
        }
        fn set_len(&self, len: u64) -> vfs::Result<()> {
            self.inner.set_len(len)
        }
        fn sync_data(&self) -> vfs::Result<()> {
            self.inner.sync_data()
        }
    }

    fn file(n: usize) -> (Counting, Vec<u8>) {
        let fs = vfs::MemFs::new();
        let f = fs.open(Path::new("f"), vfs::OpenMode::CreateTruncate).unwrap();
        let bytes: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
        f.write_all_at(&bytes, 0).unwrap();
        (Counting { inner: f, reads: AtomicUsize::new(0) }, bytes)
    }

    #[test]
    fn a_run_in_file_order_reads_growing_windows_and_returns_the_same_bytes() {
        let (f, bytes) = file(1 << 20);
        let mut ra = ReadAhead::default();
        let blk = 4096;
        for b in 0..(bytes.len() / blk) {
            let off = (b * blk) as u64;
            ra.note(off, blk, true);
            assert_eq!(ra.read(&f, off, blk, bytes.len() as u64).unwrap(), &bytes[b * blk..(b + 1) * blk]);
        }
        // TRIGGER blocks alone, then windows of 8, 16, ..., 256 KiB and 256 KiB from there on.
        let reads = f.reads.load(Ordering::Relaxed);
        assert!(reads <= TRIGGER as usize + 8, "{reads} reads for 256 blocks");
    }

    #[test]
    fn cached_blocks_do_not_start_a_window() {
        let (f, _) = file(64 << 10);
        let mut ra = ReadAhead::default();
        for b in 0..20u64 {
            ra.note(b * 100, 100, false);
        }
        ra.note(2000, 100, true);
        ra.read(&f, 2000, 100, 60_000).unwrap();
        assert_eq!(ra.filled, 0, "twenty cached blocks in file order and one miss are not a run of misses");
    }

    #[test]
    fn a_jump_reads_alone_again_and_a_window_stops_at_the_limit() {
        let (f, bytes) = file(64 << 10);
        let mut ra = ReadAhead::default();
        for b in 0..u64::from(TRIGGER) + 2 {
            ra.note(b * 100, 100, true);
            assert_eq!(ra.read(&f, b * 100, 100, 1000).unwrap(), &bytes[b as usize * 100..][..100]);
        }
        assert_eq!(ra.start + ra.filled as u64, 1000, "the window stops at the limit");
        let before = f.reads.load(Ordering::Relaxed);
        ra.note(30_000, 100, true);
        assert_eq!(ra.read(&f, 30_000, 100, 60_000).unwrap(), &bytes[30_000..30_100]);
        assert_eq!(f.reads.load(Ordering::Relaxed), before + 1);
        assert_eq!(ra.window, FIRST_WINDOW);
    }

    #[test]
    fn a_failed_window_is_not_served_later() {
        let (f, bytes) = file(64 << 10);
        let mut ra = ReadAhead::default();
        let mut off = 60_000;
        for _ in 0..TRIGGER {
            ra.note(off, 100, true);
            ra.read(&f, off, 100, 1 << 30).unwrap();
            off += 100;
        }
        // The window would run past the end of the file: the read fails, and nothing of it is kept.
        ra.note(off, 100, true);
        assert!(ra.read(&f, off, 100, 1 << 30).is_err());
        assert_eq!(ra.filled, 0);
        off += 100;
        ra.note(off, 100, true);
        let o = off as usize;
        assert_eq!(ra.read(&f, off, 100, bytes.len() as u64).unwrap(), &bytes[o..o + 100]);
    }
}
