//! An in-memory file system: fast, shared between handles, lost when dropped. Syncs are no-ops.
//!
//! Paths are normalized lexically on entry (`db/./a`, `db//a` and `db/x/../a` name one file), so `list_dir`,
//! `exists` and `open` agree however a caller spells a path. `""` and `/` are distinct roots, as a relative and an
//! absolute path are on the OS.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use crate::{File, FileLock, Fs, OpenMode, Result, normalize};

/// The bytes of one in-memory file, shared by every handle opened on it.
pub(crate) type Contents = Arc<RwLock<Vec<u8>>>;

#[derive(Default)]
struct State {
    files: BTreeMap<PathBuf, Contents>,
    dirs: BTreeSet<PathBuf>,
}

/// An in-memory [`Fs`]. Cloning gives another handle on the same files.
#[derive(Clone, Default)]
pub struct MemFs {
    state: Arc<Mutex<State>>,
    locks: Arc<Mutex<HashSet<PathBuf>>>,
}

impl fmt::Debug for MemFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemFs").finish_non_exhaustive()
    }
}

fn poisoned() -> io::Error {
    io::Error::other("in-memory file system lock poisoned")
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{} not found", path.display()))
}

fn parent(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

impl MemFs {
    /// An empty file system. The root (`""` and `/`) exists.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> Result<MutexGuard<'_, State>> {
        self.state.lock().map_err(|_| poisoned())
    }

    /// The summed length of every file.
    pub fn total_bytes(&self) -> Result<u64> {
        let st = self.state()?;
        let mut n = 0;
        for c in st.files.values() {
            n += c.read().map_err(|_| poisoned())?.len() as u64;
        }
        Ok(n)
    }

    fn dir_exists(st: &State, dir: &Path) -> bool {
        dir.as_os_str().is_empty() || dir == Path::new("/") || st.dirs.contains(dir)
    }
}

impl Fs for MemFs {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn File>> {
        let path = &normalize(path);
        let mut st = self.state()?;
        if Self::dir_exists(&st, path) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{} is a directory", path.display()),
            ));
        }
        let existing = st.files.get(path).cloned();
        let contents = match (mode, existing) {
            (OpenMode::ReadOnly | OpenMode::ReadWrite, None) => return Err(not_found(path)),
            (OpenMode::CreateNew, Some(_)) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists", path.display()),
                ));
            }
            (OpenMode::CreateTruncate, Some(c)) => {
                c.write().map_err(|_| poisoned())?.clear();
                c
            }
            (_, Some(c)) => c,
            (_, None) => {
                if !Self::dir_exists(&st, &parent(path)) {
                    return Err(not_found(&parent(path)));
                }
                let c = Contents::default();
                st.files.insert(path.to_path_buf(), c.clone());
                c
            }
        };
        Ok(Arc::new(MemFile { contents, writable: mode.writable() }))
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let path = &normalize(path);
        self.state()?.files.remove(path).map(|_| ()).ok_or_else(|| not_found(path))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (from, to) = (&normalize(from), &normalize(to));
        let mut st = self.state()?;
        if !Self::dir_exists(&st, &parent(to)) {
            return Err(not_found(&parent(to)));
        }
        if Self::dir_exists(&st, to) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{} is a directory", to.display()),
            ));
        }
        let c = st.files.remove(from).ok_or_else(|| not_found(from))?;
        st.files.insert(to.to_path_buf(), c);
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<String>> {
        let dir = &normalize(dir);
        let st = self.state()?;
        if !Self::dir_exists(&st, dir) {
            return Err(not_found(dir));
        }
        let mut names: Vec<String> = st
            .files
            .keys()
            .chain(st.dirs.iter())
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let dir = normalize(dir);
        let mut st = self.state()?;
        let ancestors = || dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && *d != Path::new("/"));
        // Check every ancestor before creating any, so a failed call leaves nothing behind.
        if let Some(d) = ancestors().find(|d| st.files.contains_key(*d)) {
            return Err(io::Error::new(io::ErrorKind::NotADirectory, format!("{} is a file", d.display())));
        }
        for d in ancestors() {
            st.dirs.insert(d.to_path_buf());
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let dir = &normalize(dir);
        let st = self.state()?;
        if Self::dir_exists(&st, dir) { Ok(()) } else { Err(not_found(dir)) }
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        let path = &normalize(path);
        let st = self.state()?;
        Ok(st.files.contains_key(path) || Self::dir_exists(&st, path))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let path = normalize(path);
        self.open(&path, OpenMode::CreateOrOpen)?;
        let mut held = self.locks.lock().map_err(|_| poisoned())?;
        if !held.insert(path.clone()) {
            return Err(io::Error::new(io::ErrorKind::WouldBlock, format!("{} is locked", path.display())));
        }
        Ok(Box::new(MemLock { path, locks: self.locks.clone() }))
    }
}

struct MemLock {
    path: PathBuf,
    locks: Arc<Mutex<HashSet<PathBuf>>>,
}

impl fmt::Debug for MemLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemLock").field("path", &self.path).finish()
    }
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        if let Ok(mut held) = self.locks.lock() {
            held.remove(&self.path);
        }
    }
}

/// A handle on an in-memory file.
#[derive(Debug)]
pub(crate) struct MemFile {
    contents: Contents,
    writable: bool,
}

impl MemFile {
    fn check_writable(&self) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(io::Error::new(io::ErrorKind::PermissionDenied, "file opened read-only"))
        }
    }
}

fn to_usize(v: u64) -> Result<usize> {
    usize::try_from(v).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))
}

impl File for MemFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let data = self.contents.read().map_err(|_| poisoned())?;
        let off = to_usize(offset)?;
        if off >= data.len() {
            return Ok(0);
        }
        let n = buf.len().min(data.len() - off);
        buf[..n].copy_from_slice(&data[off..off + n]);
        Ok(n)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.check_writable()?;
        if buf.is_empty() {
            // pwrite of nothing does not extend the file.
            return Ok(());
        }
        let mut data = self.contents.write().map_err(|_| poisoned())?;
        let off = to_usize(offset)?;
        let end = off.checked_add(buf.len()).ok_or_else(|| io::Error::other("write end overflows"))?;
        if data.len() < end {
            data.resize(end, 0);
        }
        data[off..end].copy_from_slice(buf);
        Ok(())
    }

    fn sync_data(&self) -> Result<()> {
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        Ok(self.contents.read().map_err(|_| poisoned())?.len() as u64)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.check_writable()?;
        let len = to_usize(len)?;
        self.contents.write().map_err(|_| poisoned())?.resize(len, 0);
        Ok(())
    }

    fn insert_range(&self, offset: u64, len: u64) -> Result<()> {
        self.check_writable()?;
        let mut data = self.contents.write().map_err(|_| poisoned())?;
        let (off, len) = (to_usize(offset)?, to_usize(len)?);
        if off >= data.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "insert_range at or past the end"));
        }
        data.splice(off..off, std::iter::repeat_n(0u8, len));
        Ok(())
    }

    fn collapse_range(&self, offset: u64, len: u64) -> Result<()> {
        self.check_writable()?;
        let mut data = self.contents.write().map_err(|_| poisoned())?;
        let (off, len) = (to_usize(offset)?, to_usize(len)?);
        let end = off.checked_add(len).ok_or_else(|| io::Error::other("range end overflows"))?;
        if end >= data.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "collapse_range reaches the end of the file",
            ));
        }
        data.drain(off..end);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_rename_list() {
        let fs = MemFs::new();
        fs.create_dir_all(Path::new("/db")).unwrap();
        let f = fs.open(Path::new("/db/a"), OpenMode::CreateNew).unwrap();
        f.write_all_at(b"hello", 3).unwrap();
        let mut buf = [9u8; 8];
        f.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"\0\0\0hello");
        assert!(fs.open(Path::new("/db/a"), OpenMode::CreateNew).is_err());
        fs.rename(Path::new("/db/a"), Path::new("/db/b")).unwrap();
        assert_eq!(fs.list_dir(Path::new("/db")).unwrap(), vec!["b".to_string()]);
        assert_eq!(
            fs.open(Path::new("/db/a"), OpenMode::ReadOnly).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn list_dir_and_lookups_agree_on_path_spellings() {
        let fs = MemFs::new();
        fs.create_dir_all(Path::new("db/./wal")).unwrap();
        fs.open(Path::new("db//wal/../a"), OpenMode::CreateNew).unwrap();
        fs.open(Path::new("/abs"), OpenMode::CreateNew).unwrap();
        for spelling in ["db", "db/", "./db", "db/.", "db/wal/.."] {
            assert_eq!(fs.list_dir(Path::new(spelling)).unwrap(), vec!["a".to_string(), "wal".to_string()]);
        }
        assert!(fs.exists(Path::new("./db/a")).unwrap());
        assert_eq!(fs.list_dir(Path::new("")).unwrap(), vec!["db".to_string()]);
        assert_eq!(fs.list_dir(Path::new(".")).unwrap(), vec!["db".to_string()]);
        assert_eq!(fs.list_dir(Path::new("/")).unwrap(), vec!["abs".to_string()]);
        assert!(fs.open(Path::new("db/a"), OpenMode::CreateNew).is_err());
        fs.rename(Path::new("./db/a"), Path::new("db/wal/b")).unwrap();
        assert_eq!(fs.list_dir(Path::new("db/wal")).unwrap(), vec!["b".to_string()]);
    }

    #[test]
    fn regression_create_dir_all_under_a_file_leaves_nothing() {
        let fs = MemFs::new();
        fs.open(Path::new("f"), OpenMode::CreateNew).unwrap();
        assert_eq!(fs.create_dir_all(Path::new("f/x/y")).unwrap_err().kind(), io::ErrorKind::NotADirectory);
        assert!(!fs.exists(Path::new("f/x")).unwrap());
        assert!(!fs.exists(Path::new("f/x/y")).unwrap());
    }

    #[test]
    fn regression_the_root_cannot_be_opened_as_a_file() {
        let fs = MemFs::new();
        for root in ["", "/", "."] {
            let e = fs.open(Path::new(root), OpenMode::CreateOrOpen).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::IsADirectory, "{root:?}");
        }
        assert!(fs.list_dir(Path::new("")).unwrap().is_empty());
        fs.open(Path::new("f"), OpenMode::CreateNew).unwrap();
        assert_eq!(fs.rename(Path::new("f"), Path::new("")).unwrap_err().kind(), io::ErrorKind::IsADirectory);
    }

    #[test]
    fn regression_empty_write_does_not_extend() {
        let fs = MemFs::new();
        let f = fs.open(Path::new("f"), OpenMode::CreateNew).unwrap();
        f.write_all_at(&[], 4096).unwrap();
        assert_eq!(f.len().unwrap(), 0);
    }

    #[test]
    fn regression_rename_onto_a_directory_fails() {
        let fs = MemFs::new();
        fs.create_dir_all(Path::new("d")).unwrap();
        fs.open(Path::new("f"), OpenMode::CreateNew).unwrap();
        assert_eq!(
            fs.rename(Path::new("f"), Path::new("d")).unwrap_err().kind(),
            io::ErrorKind::IsADirectory
        );
        assert!(fs.exists(Path::new("f")).unwrap());
    }

    #[test]
    fn lock_is_exclusive_until_dropped() {
        let fs = MemFs::new();
        let l = fs.lock(Path::new("LOCK")).unwrap();
        assert_eq!(fs.lock(Path::new("LOCK")).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        drop(l);
        fs.lock(Path::new("LOCK")).unwrap();
    }

    #[test]
    fn insert_and_collapse_shift_bytes() {
        let fs = MemFs::new();
        let f = fs.open(Path::new("f"), OpenMode::CreateNew).unwrap();
        f.write_all_at(b"abcdef", 0).unwrap();
        f.insert_range(2, 2).unwrap();
        let mut buf = [0u8; 8];
        f.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"ab\0\0cdef");
        f.collapse_range(1, 3).unwrap();
        assert_eq!(f.len().unwrap(), 5);
    }
}
