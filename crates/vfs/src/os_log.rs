//! Appends to an OS log file through a shared memory mapping ([`crate::Fs::create_log`] on [`crate::OsFs`]).
//!
//! Why: a write-ahead log appends one small record per update, and with `pwrite` each append is a system call
//! (about 1.2 µs on a virtualised 2-core machine, a quarter of an LSM put there). A store into a `MAP_SHARED`
//! mapping of the file lands in the same page cache pages `pwrite` would have filled, so it survives a process
//! crash exactly as a `pwrite` does, and `fdatasync` writes it back exactly as it would a `pwrite`'s pages: the
//! durability contract is unchanged. An append costs a copy, plus, once per 4 KiB page, the page fault that
//! allocates the page (which `pwrite` pays inside the call).
//!
//! How:
//! - The file is mapped [`WINDOW`] bytes at a time. Before any byte of a window is stored, the window's space is
//!   reserved with `fallocate` (mode 0: blocks allocated, file size extended), for two reasons. A store to a
//!   mapped page past the file's end raises `SIGBUS`, so the size must cover every byte written. And a store to
//!   a hole would allocate a block at writeback, where a full disk raises `SIGBUS` instead of an error; with the
//!   blocks reserved first, a full disk is an `ENOSPC` from `fallocate`, returned as the write's error.
//! - Stores never reach past `allocated` (the file size as the kernel sees it), which only this handle changes.
//! - The reserved space past the last write reads as zeros. `len` and `read_at` answer for the written bytes
//!   only, and `sync_data` first cuts the file back to them (`ftruncate`), so a synced log's durable length is
//!   exactly its written length. The next append reserves again. After a crash a log with appends after its last
//!   sync may therefore be longer than its last write, with zeros past it: log readers take an all-zero tail as
//!   the log's end (assumption 11 in `docs/vfs.md`).
//! - Writes that do not fit the forward-moving window (before its start) go through `pwrite`, and so do the first
//!   [`MAP_AFTER_SYNC`] bytes after each sync: a log synced every few records gains nothing from the mapping and
//!   would pay for cutting and remaking the reservation at every sync.
//! - A helper thread takes the page faults up to [`PREFAULT_AHEAD`] bytes past the written end before the appender
//!   gets there, and unmaps the windows the appender moved past (`os_prefault.rs`).
//!
//! What can still raise `SIGBUS`: another process truncating the file under the mapping, or a read error when
//! the kernel has to read a page of the current window back from the device (a partly written page evicted under
//! memory pressure, then appended to). Both would kill the process: a crash, which recovery handles; LMDB and
//! RocksDB's `allow_mmap_writes` live with the same.

use std::fs;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::Result;
use crate::os_prefault;

/// Bytes mapped, and reserved, at a time. A crash can leave up to this many zero bytes after a log's last write.
pub const WINDOW: u64 = 1 << 20;

/// Bytes appended after a sync through `pwrite` before appends go through the mapping again. A sync cuts the
/// reservation and the next mapped append makes it again: on ext4 that pair of extent changes made a synced
/// 130-byte append take 1.65x as long (415 against 245 us with `fdatasync`). Logs synced every few records keep
/// `pwrite`; between rarer syncs (or none) the mapping's saving wins.
const MAP_AFTER_SYNC: u64 = 64 << 10;

/// How far past the written end the helper thread is asked to have the pages faulted in. It is asked again
/// when the appender has used half of it, so a request covers about half of it (32 pages of 4 KiB). Faulted
/// pages past the written end hold zeros in the page cache until appended to, and are dropped by the cut at a
/// sync or close.
pub const PREFAULT_AHEAD: u64 = 256 << 10;

/// One mapped window: `WINDOW` bytes of the file from offset `start`, unmapped when the last holder drops it (the
/// log, or a prefault request still pending for it).
#[derive(Debug)]
pub(crate) struct Window {
    ptr: NonNull<u8>,
    start: u64,
}

// SAFETY: the mapping is process-wide memory, not tied to the thread that made it. Its bytes are stored to only
// through `MappedLog::write_all_at` (`&mut`, behind the caller's mutex); other holders only `madvise` it, which
// changes page tables, not bytes, so sharing references to a `Window` across threads races on no byte.
unsafe impl Send for Window {}
// SAFETY: as for `Send`: `&Window` gives access to `populate` only, which reads and writes no byte of the mapping.
unsafe impl Sync for Window {}

impl Window {
    /// Takes the write faults of `len` bytes from byte `at` of the window without storing anything.
    /// REQUIRES: `at` page aligned, `at + len <= WINDOW`.
    pub(crate) fn populate(&self, at: usize, len: usize) -> io::Result<()> {
        debug_assert!(at as u64 + len as u64 <= WINDOW);
        // SAFETY: the range lies inside this live mapping (it is unmapped only when the last `Arc` drops, and
        // the caller holds one). MADV_POPULATE_WRITE faults pages in as a write would but stores nothing, so it
        // cannot change a byte that anyone reads; a page past the file's end makes it fail, not raise `SIGBUS`.
        let rc = unsafe { libc::madvise(self.ptr.as_ptr().add(at).cast(), len, libc::MADV_POPULATE_WRITE) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: `ptr` is the start of a live mapping of `WINDOW` bytes made by `MappedLog::remap`, this is its
        // last holder, and no reference into it exists (stores go through raw pointers only).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), WINDOW as usize) };
    }
}

/// The mapped-append state of one log file. REQUIRES (of the caller): one `MappedLog` per file, behind a mutex,
/// and no other writer of the file's size.
#[derive(Debug)]
pub(crate) struct MappedLog {
    /// The current window, or none yet.
    map: Option<Arc<Window>>,
    /// The file's size as the kernel sees it. Every store stays below it.
    allocated: u64,
    /// End of the furthest write: the log's length.
    written: u64,
    /// `fallocate` is not supported here: every write is a `pwrite`.
    plain: bool,
    /// Bytes written since the last sync (saturating).
    since_sync: u64,
    /// File offset up to which the helper thread was asked to fault the current window's pages in.
    prefaulted: u64,
}

fn off_t(v: u64) -> Result<libc::off_t> {
    libc::off_t::try_from(v).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// Asked of the system once: every append needs it, and `sysconf` showed in an append's profile.
fn page_size() -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf reads a system constant; it has no memory arguments.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        u64::try_from(p).ok().filter(|p| p.is_power_of_two()).unwrap_or(4096)
    })
}

impl MappedLog {
    /// The state for a new, empty file.
    pub(crate) fn new() -> Self {
        MappedLog { map: None, allocated: 0, written: 0, plain: false, since_sync: 0, prefaulted: 0 }
    }

    /// The log's length: the end of its furthest write.
    pub(crate) fn len(&self) -> u64 {
        self.written
    }

    /// Reads written bytes only (the reserved zeros past them are not part of the file).
    pub(crate) fn read_at(&self, file: &fs::File, buf: &mut [u8], offset: u64) -> Result<usize> {
        let avail = self.written.saturating_sub(offset);
        let n = buf.len().min(usize::try_from(avail).unwrap_or(usize::MAX));
        if n == 0 {
            return Ok(0);
        }
        FileExt::read_at(file, &mut buf[..n], offset)
    }

    pub(crate) fn write_all_at(&mut self, file: &fs::File, mut buf: &[u8], mut offset: u64) -> Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        self.since_sync = self.since_sync.saturating_add(buf.len() as u64);
        if self.plain
            || self.since_sync <= MAP_AFTER_SYNC
            || self.map.as_ref().is_some_and(|w| offset < w.start)
        {
            FileExt::write_all_at(file, buf, offset)?;
            self.allocated = self.allocated.max(end);
            self.written = self.written.max(end);
            return Ok(());
        }
        while !buf.is_empty() {
            let start = match &self.map {
                Some(w) if offset < w.start + WINDOW => w.start,
                _ => self.remap(file, offset)?,
            };
            let window_end = start + WINDOW;
            if self.allocated < window_end {
                match self.reserve(file, window_end) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                        self.unmap();
                        self.plain = true;
                        return self.write_all_at(file, buf, offset);
                    }
                    Err(e) => return Err(e),
                }
            }
            let at = (offset - start) as usize;
            let n = buf.len().min(WINDOW as usize - at);
            let Some(w) = &self.map else { unreachable!("a window was mapped above") };
            // SAFETY: the mapping is `WINDOW` bytes long and `at + n <= WINDOW`; every byte of it lies below
            // `allocated` (reserved just above), so within the file's size and backed by allocated blocks: the
            // store cannot fault past the end. `buf` is ordinary memory and cannot overlap the mapping (no slice
            // into the mapping is ever handed out). Other holders of the window only `madvise` it.
            unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), w.ptr.as_ptr().add(at), n) };
            buf = &buf[n..];
            offset += n as u64;
            self.written = self.written.max(offset);
        }
        self.prefault_ahead();
        Ok(())
    }

    /// Asks the helper thread for the current window's pages up to `PREFAULT_AHEAD` past the written end, once
    /// half of what it was asked for last is used (or the rest of the window is less than that).
    fn prefault_ahead(&mut self) {
        let Some(w) = &self.map else { return };
        let page = page_size();
        let end = (w.start + WINDOW).min(self.allocated);
        let from = self.prefaulted.max(self.written.next_multiple_of(page)).max(w.start);
        let to = (self.written + PREFAULT_AHEAD).min(end) & !(page - 1);
        if to > from && (to - from >= PREFAULT_AHEAD / 2 || to == end) {
            os_prefault::populate(w, (from - w.start) as usize, (to - from) as usize);
            self.prefaulted = to;
        }
    }

    /// Cuts the reserved tail, then makes the written bytes and the length durable.
    pub(crate) fn sync_data(&mut self, file: &fs::File) -> Result<()> {
        self.since_sync = 0;
        if self.allocated > self.written {
            file.set_len(self.written)?;
            self.allocated = self.written;
            // The cut dropped the pages past the written end, faulted in or not.
            self.prefaulted = self.prefaulted.min(self.written);
        }
        // `fdatasync` writes back pages dirtied through the mapping as it does `pwrite`'s: both are the page
        // cache's pages, marked dirty at the store's write fault.
        file.sync_data()
    }

    pub(crate) fn set_len(&mut self, file: &fs::File, len: u64) -> Result<()> {
        // Grown by `fallocate`, not `ftruncate`: a hole under the window would be allocated at a store's fault,
        // where a full disk is a `SIGBUS`.
        if len > self.allocated && !self.plain {
            match self.reserve(file, len) {
                Ok(()) => {
                    self.written = len;
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    self.unmap();
                    self.plain = true;
                }
                Err(e) => return Err(e),
            }
        }
        file.set_len(len)?;
        self.allocated = len;
        self.written = len;
        self.prefaulted = self.prefaulted.min(len);
        Ok(())
    }

    /// Maps the window holding `offset`; returns its start.
    fn remap(&mut self, file: &fs::File, offset: u64) -> Result<u64> {
        self.unmap();
        let start = offset & !(page_size() - 1);
        // SAFETY: a fresh shared mapping of a descriptor `file` keeps open, at a page-aligned offset; the kernel
        // picks the address, so no existing memory is affected. The result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                WINDOW as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                off_t(start)?,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        // No read-around on faults: the first store into a fresh window would otherwise read in (zero-fill) the
        // whole window at once, up to the device's read-ahead size, about 0.8 ms in one append on ext4 with
        // 8 MiB read-ahead. Each page is faulted on its own, mostly by the helper thread ahead of the appender.
        // SAFETY: advice on the mapping just made, which lies entirely within it; it changes no byte.
        let _ = unsafe { libc::madvise(p, WINDOW as usize, libc::MADV_RANDOM) };
        self.map = Some(Arc::new(Window { ptr, start }));
        self.prefaulted = start;
        Ok(start)
    }

    /// Extends the file's size and blocks to `to`.
    fn reserve(&mut self, file: &fs::File, to: u64) -> Result<()> {
        let from = self.allocated;
        // SAFETY: fallocate reads only its integer arguments and the descriptor `file` keeps open.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, off_t(from)?, off_t(to - from)?) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        self.allocated = to;
        Ok(())
    }

    /// Lets go of the current window; the helper thread unmaps it once no request of its holds it.
    fn unmap(&mut self) {
        if let Some(w) = self.map.take() {
            os_prefault::release(w);
        }
    }

    /// On close: unmaps and cuts the reserved tail. A failure leaves zeros past the log's end, which readers
    /// take as its end, so it is not reported.
    pub(crate) fn close(&mut self, file: &fs::File) {
        self.unmap();
        if self.allocated > self.written {
            let _ = file.set_len(self.written);
            self.allocated = self.written;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{MAP_AFTER_SYNC, PREFAULT_AHEAD, WINDOW};
    use crate::rng::SplitMix64;
    use crate::{Fs, OpenMode, OsFs};

    fn on_disk_len(p: &Path) -> u64 {
        std::fs::metadata(p).unwrap().len()
    }

    fn read_back(f: &dyn crate::File) -> Vec<u8> {
        let mut out = vec![0u8; f.len().unwrap() as usize];
        f.read_exact_at(&mut out, 0).unwrap();
        out
    }

    /// Appends of every size, across window boundaries, with syncs, cuts and a write behind the window, against
    /// a `Vec<u8>` model: the handle, the file after a sync and the file after close all hold exactly the model.
    #[test]
    fn appends_match_a_vec_model_through_windows_syncs_and_cuts() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        let f = OsFs::new().create_log(&p, OpenMode::CreateNew).unwrap();
        let mut model: Vec<u8> = Vec::new();
        let mut rng = SplitMix64::new(7);
        let mut mapped = false;
        while (model.len() as u64) < 3 * WINDOW + 5000 {
            let n = match rng.below(10) {
                0 => rng.below(200_000) as usize,
                1 => 0,
                _ => 1 + rng.below(300) as usize,
            };
            let data: Vec<u8> = (0..n).map(|_| 1 + rng.below(255) as u8).collect();
            let at = model.len() as u64;
            f.write_all_at(&data, at).unwrap();
            model.extend_from_slice(&data);
            assert_eq!(f.len().unwrap(), model.len() as u64);
            mapped |= on_disk_len(&p) > model.len() as u64;
            match rng.below(40) {
                0 => {
                    f.sync_data().unwrap();
                    assert_eq!(on_disk_len(&p), model.len() as u64, "a sync leaves no reserved tail");
                }
                1 if !model.is_empty() => {
                    let cut = rng.below(model.len() as u64) as usize;
                    f.set_len(cut as u64).unwrap();
                    model.truncate(cut);
                }
                3 => {
                    // Grown, as `set_len` may (zeros), then appended past.
                    let grown = model.len() + rng.below(10_000) as usize;
                    f.set_len(grown as u64).unwrap();
                    model.resize(grown, 0);
                }
                2 if model.len() > 10 => {
                    // A rewrite behind the append point (behind the window, too, once it moved on).
                    let at = rng.below(model.len() as u64 - 10) as usize;
                    f.write_all_at(b"rewritten!", at as u64).unwrap();
                    model[at..at + 10].copy_from_slice(b"rewritten!");
                }
                _ => {}
            }
        }
        assert!(mapped, "no append went through the mapping");
        assert_eq!(read_back(&*f), model);
        let mut past = [9u8; 4];
        assert_eq!(f.read_at(&mut past, model.len() as u64).unwrap(), 0, "reads stop at the written end");
        f.sync_data().unwrap();
        drop(f);
        assert_eq!(std::fs::read(&p).unwrap(), model);
    }

    /// Closing without a sync cuts the reservation too, so a log closed cleanly has its exact length.
    #[test]
    fn close_cuts_the_reserved_tail() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        let f = OsFs::new().create_log(&p, OpenMode::CreateNew).unwrap();
        let mut model = Vec::new();
        for i in 0..1000u32 {
            let rec = [i as u8 | 1; 100];
            f.write_all_at(&rec, model.len() as u64).unwrap();
            model.extend_from_slice(&rec);
            let reserved = on_disk_len(&p) > model.len() as u64;
            // The first appends after open (as after a sync) are `pwrite`s; then the window is reserved.
            assert_eq!(reserved, model.len() as u64 > MAP_AFTER_SYNC, "after {} bytes", model.len());
        }
        assert!(on_disk_len(&p) <= model.len() as u64 + WINDOW);
        drop(f);
        assert_eq!(std::fs::read(&p).unwrap(), model);
    }

    #[test]
    fn modes_follow_open_and_refuse_non_creating_ones() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFs::new();
        let p = dir.path().join("log");
        fs.create_log(&p, OpenMode::CreateNew).unwrap().write_all_at(b"old", 0).unwrap();
        assert_eq!(
            fs.create_log(&p, OpenMode::CreateNew).unwrap_err().kind(),
            std::io::ErrorKind::AlreadyExists
        );
        let f = fs.create_log(&p, OpenMode::CreateTruncate).unwrap();
        assert_eq!(f.len().unwrap(), 0);
        for mode in [OpenMode::ReadOnly, OpenMode::ReadWrite, OpenMode::CreateOrOpen] {
            assert_eq!(fs.create_log(&p, mode).unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
        }
        assert_eq!(f.insert_range(0, 4096).unwrap_err().kind(), std::io::ErrorKind::Unsupported);
    }

    /// Whether the page at `addr` of this process is mapped (`/proc/self/pagemap`, bit 63 of its entry).
    fn page_present(addr: usize) -> bool {
        use std::io::{Read, Seek, SeekFrom};
        let page = super::page_size() as usize;
        let mut f = std::fs::File::open("/proc/self/pagemap").unwrap();
        f.seek(SeekFrom::Start((addr / page * 8) as u64)).unwrap();
        let mut e = [0u8; 8];
        f.read_exact(&mut e).unwrap();
        u64::from_le_bytes(e) >> 63 == 1
    }

    /// The helper thread faults the pages ahead of the written end in (write faults on a shared mapping do no
    /// fault-around, so a mapped page past the last store is the helper's work), and the file still holds
    /// exactly what was written.
    #[test]
    fn pages_ahead_of_the_appender_are_faulted_in_and_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&p).unwrap();
        let mut log = super::MappedLog::new();
        let mut model = Vec::new();
        while (model.len() as u64) < MAP_AFTER_SYNC + 100_000 {
            let rec = [model.len() as u8 | 1; 130];
            log.write_all_at(&file, &rec, model.len() as u64).unwrap();
            model.extend_from_slice(&rec);
        }
        super::os_prefault::drain();
        if !super::os_prefault::enabled() {
            eprintln!("MADV_POPULATE_WRITE is not supported here; nothing to check");
            return;
        }
        let w = log.map.clone().unwrap();
        let page = super::page_size();
        let from = (model.len() as u64).next_multiple_of(page);
        assert!(
            log.prefaulted >= model.len() as u64 + PREFAULT_AHEAD / 2,
            "asked at most half a distance ago"
        );
        for off in (from..log.prefaulted).step_by(page as usize) {
            let addr = w.ptr.as_ptr() as usize + (off - w.start) as usize;
            assert!(page_present(addr), "page at {off} not faulted in (written {})", model.len());
        }
        assert!(log.prefaulted <= w.start + WINDOW);
        let mut past = [7u8; 4096];
        assert_eq!(log.read_at(&file, &mut past, model.len() as u64).unwrap(), 0);
        log.close(&file);
        assert_eq!(std::fs::read(&p).unwrap(), model, "populating stored nothing");
    }

    /// A log closed or dropped right after its appends, while requests for its window are still queued: the
    /// window stays mapped for them, and every file holds exactly its appends.
    #[test]
    fn windows_outlive_their_log_while_requests_are_pending() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFs::new();
        let mut models = Vec::new();
        for i in 0..40u32 {
            let p = dir.path().join(format!("log{i}"));
            let f = fs.create_log(&p, OpenMode::CreateNew).unwrap();
            let mut model = Vec::new();
            while (model.len() as u64) < MAP_AFTER_SYNC + 2 * PREFAULT_AHEAD + u64::from(i) * 997 {
                let rec = [(i as u8) | 0x40; 4000];
                f.write_all_at(&rec, model.len() as u64).unwrap();
                model.extend_from_slice(&rec);
            }
            if i % 2 == 0 {
                f.sync_data().unwrap();
            }
            drop(f);
            models.push((p, model));
        }
        super::os_prefault::drain();
        for (p, model) in models {
            assert_eq!(std::fs::read(&p).unwrap(), model);
        }
    }

    /// Handles on one log from several threads (the engines serialise appends, but reads and `len` come from
    /// anywhere): appends by one thread are read back whole by another.
    #[test]
    fn readers_on_other_threads_see_appended_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let f = OsFs::new().create_log(&dir.path().join("log"), OpenMode::CreateNew).unwrap();
        let rec = [0xA5u8; 1000];
        std::thread::scope(|s| {
            let w = s.spawn(|| {
                for i in 0..3000u64 {
                    f.write_all_at(&rec, i * 1000).unwrap();
                }
            });
            let mut buf = [0u8; 1000];
            while !w.is_finished() {
                let n = f.len().unwrap();
                if n >= 1000 {
                    f.read_exact_at(&mut buf, n - 1000).unwrap();
                    assert_eq!(buf, rec);
                }
            }
        });
        assert_eq!(f.len().unwrap(), 3_000_000);
    }
}
