//! The storage I/O layer: the only way RangeDB's persistent code touches storage.
//!
//! Every engine takes an `Arc<dyn Fs>` so the same code runs on real files ([`OsFs`]), in memory ([`MemFs`]),
//! under simulated power loss ([`CrashFs`]) and under injected I/O errors ([`FaultFs`]). What an engine may assume of
//! the media is written down in `docs/vfs.md`; the short form:
//!
//! - `write_all_at` is not atomic and not durable; after a crash an unsynced write may be absent, present, or torn
//!   at 512-byte sector granularity.
//! - `sync_data` makes the file's contents (and its length) durable; it says nothing about the directory entry.
//! - `create`, `rename` and `remove_file` are atomic but become durable only after `sync_dir` of the parent.
//! - Nothing orders unsynced writes; only a completed `sync_data` does.
//! - A failed `sync_data` or `sync_dir` is never retried: the engine treats the file's unsynced writes as lost.
//!
//! Errors are `std::io::Error`: the engines wrap them as their own `Io` variant, keeping them separate from
//! corruption. [`is_no_space`] and [`is_eio`] classify the two failures that fault injection produces.

use std::fmt::Debug;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod cow_file;
mod crash;
pub mod crc32c;
mod fault;
mod mem;
mod os;
mod os_log;
mod os_prefault;
mod overlay;
mod rng;
mod sync_watch;
pub mod torn;

pub use crash::{CrashFs, CrashMode, CrashPoint, CrashStats, SECTOR_SIZE, is_crash_point};
pub use fault::{Fault, FaultFs, FaultKind, Op, Trigger};
pub use mem::MemFs;
pub use os::{OsFs, open_file_limit};
pub use os_log::WINDOW as LOG_RESERVATION;
pub use overlay::OverlayFs;
pub use sync_watch::SyncFailures;

/// The result type of every storage call.
pub type Result<T> = io::Result<T>;

/// How [`Fs::open`] treats an existing or missing file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Open an existing file for reading only.
    ReadOnly,
    /// Open an existing file for reading and writing.
    ReadWrite,
    /// Create a new file; fails with `AlreadyExists` if the path exists.
    CreateNew,
    /// Open the file for reading and writing, creating it empty if missing.
    CreateOrOpen,
    /// Create the file, or truncate it to zero length if it exists.
    CreateTruncate,
}

impl OpenMode {
    /// Whether files opened in this mode accept writes.
    pub fn writable(self) -> bool {
        !matches!(self, OpenMode::ReadOnly)
    }
}

/// An open file. All offsets are absolute; there is no cursor, so one file can serve many threads.
pub trait File: Send + Sync + Debug {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (0 at or past the end).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize>;

    /// Writes all of `buf` at `offset`, extending the file if needed (a gap reads as zeros).
    fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()>;

    /// Makes the contents and length durable (`fdatasync`).
    fn sync_data(&self) -> Result<()>;

    /// The current length in bytes.
    fn len(&self) -> Result<u64>;

    /// Whether the file is empty.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Truncates or extends (with zeros) the file to `len` bytes.
    fn set_len(&self, len: u64) -> Result<()>;

    /// Reads exactly `buf.len()` bytes at `offset`; a short file gives `UnexpectedEof`.
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past end of file")),
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Shifts the bytes at `offset..` up by `len`, leaving a hole of `len` zero bytes at `offset`
    /// (`FALLOC_FL_INSERT_RANGE`). Filesystems require block-aligned `offset` and `len`; where the file system
    /// lacks the operation the error kind is `Unsupported`.
    fn insert_range(&self, offset: u64, len: u64) -> Result<()> {
        let _ = (offset, len);
        Err(unsupported("insert_range"))
    }

    /// Removes the bytes `offset..offset + len`, shifting the rest down (`FALLOC_FL_COLLAPSE_RANGE`). Same
    /// alignment rules and `Unsupported` error as [`File::insert_range`].
    fn collapse_range(&self, offset: u64, len: u64) -> Result<()> {
        let _ = (offset, len);
        Err(unsupported("collapse_range"))
    }
}

/// An advisory lock on a path, held until dropped. Two holders cannot exist at once, in one process or two.
pub trait FileLock: Send + Sync + Debug {}

/// A file system: a namespace of files and directories.
pub trait Fs: Send + Sync + Debug {
    /// Opens `path` as `mode` says.
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn File>>;

    /// Creates a file that its writer appends to, a log, as `open` does with `mode`, which must be
    /// [`OpenMode::CreateNew`] or [`OpenMode::CreateTruncate`] (else `InvalidInput`). The file system may reserve
    /// space ahead of the appends and write through a memory mapping ([`OsFs`] does). What the handle reports is
    /// unchanged (`len` is the end of the furthest write, reads stop there, `sync_data` makes exactly the written
    /// bytes and length durable), but after a crash a log with writes after its last sync may be longer than its
    /// last write, the excess reading as zeros (`docs/vfs.md`, assumption 11). REQUIRES: whoever reads the file
    /// after a crash takes an all-zero tail as its end.
    fn create_log(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn File>> {
        check_log_mode(mode)?;
        self.open(path, mode)
    }

    /// Removes a file. Durable only after [`Fs::sync_dir`] of its parent.
    fn remove_file(&self, path: &Path) -> Result<()>;

    /// Atomically renames `from` to `to`, replacing `to` if it exists. Durable only after [`Fs::sync_dir`] of
    /// the parent(s).
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;

    /// The names (not paths) of the entries of `dir`, sorted.
    fn list_dir(&self, dir: &Path) -> Result<Vec<String>>;

    /// Creates `dir` and its missing parents. Durable only after [`Fs::sync_dir`] of each parent.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;

    /// Makes the entries of `dir` (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;

    /// Whether `path` names a file or directory (`false` for a path below a file).
    fn exists(&self, path: &Path) -> Result<bool>;

    /// Takes the advisory lock at `path` (creating the file if needed). A lock already held anywhere gives an
    /// error of kind `WouldBlock`.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
}

/// The error an operation a file system lacks returns.
pub fn unsupported(op: &str) -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, format!("{op} is not supported by this file system"))
}

/// `Fs::create_log`'s modes.
pub(crate) fn check_log_mode(mode: OpenMode) -> Result<()> {
    match mode {
        OpenMode::CreateNew | OpenMode::CreateTruncate => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a log is created, not opened as {mode:?}"),
        )),
    }
}

/// Whether `e` is "no space left on device" (ENOSPC).
pub fn is_no_space(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOSPC) || e.kind() == io::ErrorKind::StorageFull
}

/// Whether `e` says the file system refused to allocate: [`is_no_space`] or a disk quota exceeded (EDQUOT). Both
/// pass once space is freed, unlike a device error. Judged by the OS error code or, for a copy that kept only
/// the kind, by the kind.
pub fn is_out_of_space(e: &io::Error) -> bool {
    is_no_space(e) || e.raw_os_error() == Some(libc::EDQUOT) || e.kind() == io::ErrorKind::QuotaExceeded
}

/// The first failed write or sync of a log writer, kept so that the writer refuses every later call (assumption
/// 7): after a failed write the file's bytes past the last sync are unknown (part of the write may be there, and
/// a later write at the same offset would cover only some of it), so nothing more may be appended.
#[derive(Debug, Default)]
pub struct StickyError {
    first: Option<io::Error>,
    /// A sync failed (not only a write): bytes past the last good sync may never reach the media even if a later
    /// sync returns Ok (Linux marks the failed pages clean), so only what that sync covered can be trusted.
    sync_failed: bool,
}

impl StickyError {
    /// Whether a call failed.
    pub fn is_set(&self) -> bool {
        self.first.is_some()
    }

    /// Whether a sync failed (see [`StickyError::record_sync`]).
    pub fn sync_failed(&self) -> bool {
        self.sync_failed
    }

    /// `Ok` until a call failed; then an error like the first one (the same OS error code, or else the same
    /// kind), so callers classify refusals (`is_eio`, `is_no_space`) as they did the failure.
    pub fn check(&self) -> Result<()> {
        match &self.first {
            None => Ok(()),
            Some(e) => Err(match e.raw_os_error() {
                Some(code) => io::Error::from_raw_os_error(code),
                None => io::Error::new(e.kind(), format!("an earlier write or sync failed: {e}")),
            }),
        }
    }

    /// `r`, after remembering its error if it is the first.
    pub fn record<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r
            && self.first.is_none()
        {
            self.first = Some(match e.raw_os_error() {
                Some(code) => io::Error::from_raw_os_error(code),
                None => io::Error::new(e.kind(), e.to_string()),
            });
        }
        r
    }

    /// [`StickyError::record`] for the result of a sync.
    pub fn record_sync<T>(&mut self, r: Result<T>) -> Result<T> {
        self.sync_failed |= r.is_err();
        self.record(r)
    }

    /// After a failed write or sync: cuts the log `file` back to the records it can vouch for and syncs it, so
    /// it ends cleanly and a newer log may follow it (recovery accepts a damaged tail in the newest log only).
    /// That is `written` bytes (every record written whole) if only a write failed, and `durable` (what the last
    /// successful sync covered) if a sync failed. The writer stays failed; it may be cut again. Returns the
    /// log's length.
    /// REQUIRES: [`StickyError::is_set`]; `durable <= written`, both at record boundaries.
    pub fn cut(&mut self, file: &dyn File, written: u64, durable: u64) -> Result<u64> {
        debug_assert!(self.is_set(), "cut of a healthy log");
        let len = if self.sync_failed { durable } else { written };
        file.set_len(len)?;
        if let Err(e) = file.sync_data() {
            self.sync_failed = true;
            return Err(e);
        }
        Ok(len)
    }
}

/// Whether `e` is a device I/O error (EIO).
pub fn is_eio(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EIO)
}

/// `path` with `.` components dropped and `..` resolved lexically, so every in-memory file system names one file
/// one way (`db/./a`, `db//a` and `db/x/../a` are all `db/a`). A `..` above the start is dropped.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// Joins a file name onto a directory: the helper engines use to name their files.
pub fn join(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// Reads a whole file.
pub fn read_all(fs: &dyn Fs, path: &Path) -> Result<Vec<u8>> {
    let f = fs.open(path, OpenMode::ReadOnly)?;
    let len = usize::try_from(f.len()?).map_err(|_| io::Error::other("file too large to read whole"))?;
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, 0)?;
    Ok(buf)
}

/// Writes `data` to a new file at `path` durably: write, `sync_data`, rename over `path`, `sync_dir`.
/// Readers see either the old file or the new one, never a mix, also across a crash.
pub fn write_atomic(fs: &dyn Fs, path: &Path, data: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new(""));
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let f = fs.open(&tmp, OpenMode::CreateTruncate)?;
    f.write_all_at(data, 0)?;
    f.sync_data()?;
    drop(f);
    fs.rename(&tmp, path)?;
    fs.sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sticky_error_keeps_the_first_failure_and_its_kind() {
        let mut s = StickyError::default();
        assert!(s.check().is_ok() && !s.is_set());
        assert_eq!(s.record(Ok(7)).unwrap(), 7);
        assert!(s.record::<()>(Err(io::Error::from_raw_os_error(libc::EIO))).is_err());
        assert!(s.record::<()>(Err(io::Error::from_raw_os_error(libc::ENOSPC))).is_err());
        assert!(s.is_set() && is_eio(&s.check().unwrap_err()));
        let mut t = StickyError::default();
        let _ = t.record::<()>(Err(io::Error::new(io::ErrorKind::StorageFull, "full")));
        assert!(is_no_space(&t.check().unwrap_err()));
    }

    #[test]
    fn out_of_space_covers_a_full_disk_and_an_exceeded_quota_only() {
        for (errno, out) in
            [(libc::ENOSPC, true), (libc::EDQUOT, true), (libc::EIO, false), (libc::EFBIG, false)]
        {
            assert_eq!(is_out_of_space(&io::Error::from_raw_os_error(errno)), out, "errno {errno}");
        }
        assert!(is_out_of_space(&io::Error::new(io::ErrorKind::StorageFull, "full")));
        // A copy that kept only the kind (as engines copy a background error for each caller) still counts.
        assert!(is_out_of_space(&io::Error::new(io::ErrorKind::QuotaExceeded, "quota")));
    }
}
