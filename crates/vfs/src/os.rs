//! The operating system's file system, through positional I/O.

use std::fmt;
use std::fs;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::os_log::MappedLog;
use crate::{File, FileLock, Fs, OpenMode, Result};

/// The process's soft limit on open files (`RLIMIT_NOFILE`), or `None` when it is unlimited or unknown. Engines
/// that keep files open size their handle caches from it, so they leave the rest of the process room.
pub fn open_file_limit() -> Option<u64> {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit only writes the `rlimit` it is given, which is a valid, exclusively borrowed local.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    (rc == 0 && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

/// The real file system. Paths are used as given.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsFs;

impl OsFs {
    /// The OS file system.
    pub fn new() -> Self {
        OsFs
    }
}

impl Fs for OsFs {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn File>> {
        let mut o = fs::OpenOptions::new();
        o.read(true);
        match mode {
            OpenMode::ReadOnly => {}
            OpenMode::ReadWrite => {
                o.write(true);
            }
            OpenMode::CreateNew => {
                o.write(true).create_new(true);
            }
            OpenMode::CreateOrOpen => {
                o.write(true).create(true);
            }
            OpenMode::CreateTruncate => {
                o.write(true).create(true).truncate(true);
            }
        }
        let file = o.open(path)?;
        // Linux opens a directory read-only without complaint; refuse it here as the in-memory file systems do,
        // so the error comes at open and not at the first read.
        if file.metadata()?.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{} is a directory", path.display()),
            ));
        }
        Ok(Arc::new(OsFile { file, log: None }))
    }

    fn create_log(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn File>> {
        crate::check_log_mode(mode)?;
        let mut o = fs::OpenOptions::new();
        o.read(true).write(true);
        if mode == OpenMode::CreateNew {
            o.create_new(true);
        } else {
            o.create(true).truncate(true);
        }
        let file = o.open(path)?;
        Ok(Arc::new(OsFile { file, log: Some(Mutex::new(MappedLog::new())) }))
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        fs::rename(from, to)
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        fs::create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
        fs::File::open(dir)?.sync_all()
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        match path.try_exists() {
            // A path below a file (`file/name`) names nothing, as the simulators answer; the OS says ENOTDIR.
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => Ok(false),
            r => r,
        }
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let file = fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        // SAFETY: flock takes a file descriptor that `file` owns and keeps open for the call; no memory is shared.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!("{} is locked by another process or handle", path.display()),
                ));
            }
            return Err(e);
        }
        Ok(Box::new(OsLock { _file: file }))
    }
}

/// Holds the locked descriptor; closing it releases the `flock`.
struct OsLock {
    _file: fs::File,
}

impl fmt::Debug for OsLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OsLock")
    }
}

impl FileLock for OsLock {}

/// An open OS file.
#[derive(Debug)]
struct OsFile {
    file: fs::File,
    /// Set for a file made by `create_log`: appends go through a mapping (`os_log.rs`).
    log: Option<Mutex<MappedLog>>,
}

impl OsFile {
    fn log(&self) -> Option<MutexGuard<'_, MappedLog>> {
        // Nothing in a holder panics between a change to the file and the state's record of it, so a poisoned
        // lock still describes the file; go on with it.
        self.log.as_ref().map(|m| m.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn fallocate(&self, mode: libc::c_int, offset: u64, len: u64) -> Result<()> {
        let off = libc::off_t::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let len = libc::off_t::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: fallocate reads only its integer arguments and the descriptor `self.file` keeps open.
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), mode, off, len) };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
            return Err(crate::unsupported("fallocate insert/collapse range"));
        }
        Err(e)
    }
}

impl File for OsFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        match self.log() {
            Some(log) => log.read_at(&self.file, buf, offset),
            None => FileExt::read_at(&self.file, buf, offset),
        }
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        match self.log() {
            Some(mut log) => log.write_all_at(&self.file, buf, offset),
            None => FileExt::write_all_at(&self.file, buf, offset),
        }
    }

    fn sync_data(&self) -> Result<()> {
        match self.log() {
            Some(mut log) => log.sync_data(&self.file),
            None => self.file.sync_data(),
        }
    }

    fn len(&self) -> Result<u64> {
        match self.log() {
            Some(log) => Ok(log.len()),
            None => Ok(self.file.metadata()?.len()),
        }
    }

    fn set_len(&self, len: u64) -> Result<()> {
        match self.log() {
            Some(mut log) => log.set_len(&self.file, len),
            None => self.file.set_len(len),
        }
    }

    fn insert_range(&self, offset: u64, len: u64) -> Result<()> {
        if self.log.is_some() {
            return Err(crate::unsupported("insert range in a log"));
        }
        self.fallocate(libc::FALLOC_FL_INSERT_RANGE, offset, len)
    }

    fn collapse_range(&self, offset: u64, len: u64) -> Result<()> {
        if self.log.is_some() {
            return Err(crate::unsupported("collapse range in a log"));
        }
        self.fallocate(libc::FALLOC_FL_COLLAPSE_RANGE, offset, len)
    }
}

impl Drop for OsFile {
    fn drop(&mut self) {
        if let Some(mut log) = self.log() {
            log.close(&self.file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_open_file_limit_covers_the_files_open_now() {
        // The test process holds a few files (standard streams at least), so a limit it reports is above that.
        let open = std::fs::read_dir("/proc/self/fd").map_or(3, |d| d.count() as u64);
        assert!(open_file_limit().is_none_or(|l| l >= open), "{:?} < {open}", open_file_limit());
    }

    #[test]
    fn positional_io_and_lock() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFs::new();
        let p = dir.path().join("f");
        let f = fs.open(&p, OpenMode::CreateNew).unwrap();
        f.write_all_at(b"xyz", 4096).unwrap();
        f.sync_data().unwrap();
        assert_eq!(f.len().unwrap(), 4099);
        fs.sync_dir(dir.path()).unwrap();
        let l = fs.lock(&dir.path().join("LOCK")).unwrap();
        assert_eq!(fs.lock(&dir.path().join("LOCK")).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        drop(l);
        assert!(fs.lock(&dir.path().join("LOCK")).is_ok());
    }

    #[test]
    fn regression_opening_a_directory_fails_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let e = OsFs::new().open(dir.path(), OpenMode::ReadOnly).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::IsADirectory);
    }

    #[test]
    fn list_rename_remove_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFs::new();
        let sub = dir.path().join("db");
        fs.create_dir_all(&sub).unwrap();
        fs.open(&sub.join("a"), OpenMode::CreateNew).unwrap().write_all_at(b"x", 0).unwrap();
        fs.rename(&sub.join("a"), &sub.join("b")).unwrap();
        fs.sync_dir(&sub).unwrap();
        assert_eq!(fs.list_dir(&sub).unwrap(), vec!["b".to_string()]);
        assert_eq!(crate::read_all(&fs, &sub.join("b")).unwrap(), b"x");
        fs.remove_file(&sub.join("b")).unwrap();
        assert!(!fs.exists(&sub.join("b")).unwrap());
        assert!(fs.open(&sub.join("b"), OpenMode::ReadOnly).is_err());
    }

    #[test]
    fn insert_range_shifts_blocks_where_supported() {
        let dir = tempfile::tempdir().unwrap();
        let f = OsFs::new().open(&dir.path().join("f"), OpenMode::CreateNew).unwrap();
        let block: Vec<u8> = (0..8192u32).map(|i| (i / 4096) as u8 + 1).collect();
        f.write_all_at(&block, 0).unwrap();
        match f.insert_range(4096, 4096) {
            Ok(()) => {
                let mut buf = vec![0u8; 3 * 4096];
                f.read_exact_at(&mut buf, 0).unwrap();
                assert!(buf[..4096].iter().all(|&b| b == 1));
                assert!(buf[4096..8192].iter().all(|&b| b == 0));
                assert!(buf[8192..].iter().all(|&b| b == 2));
                f.collapse_range(4096, 4096).unwrap();
                assert_eq!(f.len().unwrap(), 8192);
            }
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}"),
        }
    }
}
