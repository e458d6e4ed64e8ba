//! A copy-on-write view of another file system: reads come from the base, every change stays in memory.
//!
//! Inspection tools open stores through it. An engine's open path recovers by writing (replaying a log into a new
//! table, starting a new MANIFEST, deleting files no version names); through an overlay it runs unchanged and
//! sees the recovered state, while the directory on disk is left exactly as it was. A base file opened for writing
//! or renamed is shadowed by a [`CowFile`] that copies pages into memory only as they are written ("copy-up", one
//! page at a time, so a store's large data files cost nothing until recovery writes to them); a removed base file
//! is hidden by a whiteout. Locks are taken on the base, so a store in use by another process is refused, not read mid-change.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::cow_file::CowFile;
use crate::{File, FileLock, Fs, MemFs, OpenMode, Result, normalize};

/// A copy-on-write [`Fs`] over `base`; nothing is ever written to `base`.
pub struct OverlayFs {
    base: Arc<dyn Fs>,
    upper: MemFs,
    /// Base files opened for writing or renamed, by their path in the overlay. Disjoint from `upper`'s files.
    cow: Mutex<BTreeMap<PathBuf, Arc<CowFile>>>,
    /// Base paths removed or renamed away in the overlay.
    whiteouts: Mutex<BTreeSet<PathBuf>>,
}

impl fmt::Debug for OverlayFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OverlayFs").finish_non_exhaustive()
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{} not found", path.display()))
}

impl OverlayFs {
    /// A view of `base` whose changes are kept in memory.
    pub fn new(base: Arc<dyn Fs>) -> OverlayFs {
        OverlayFs {
            base,
            upper: MemFs::new(),
            cow: Mutex::new(BTreeMap::new()),
            whiteouts: Mutex::new(BTreeSet::new()),
        }
    }

    fn whiteouts(&self) -> Result<MutexGuard<'_, BTreeSet<PathBuf>>> {
        self.whiteouts.lock().map_err(|_| io::Error::other("overlay whiteout lock poisoned"))
    }

    fn in_base(&self, p: &Path) -> Result<bool> {
        Ok(!self.whiteouts()?.contains(p) && self.base.exists(p)?)
    }

    fn ensure_upper_dir(&self, p: &Path) -> Result<()> {
        match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => self.upper.create_dir_all(d),
            _ => Ok(()),
        }
    }

    fn cow(&self) -> Result<MutexGuard<'_, BTreeMap<PathBuf, Arc<CowFile>>>> {
        self.cow.lock().map_err(|_| io::Error::other("overlay copy-on-write lock poisoned"))
    }

    /// Bytes the overlay holds in memory: files created in it and pages copied up from the base.
    pub fn resident_bytes(&self) -> Result<u64> {
        let mut n = 0;
        for f in self.cow()?.values() {
            n += f.resident_bytes()?;
        }
        Ok(n + self.upper.total_bytes()?)
    }

    /// Shadows base file `p` with a copy-on-write file, if it is not shadowed already.
    fn copy_up(&self, p: &Path) -> Result<()> {
        if self.upper.exists(p)? || self.cow()?.contains_key(p) {
            return Ok(());
        }
        if !self.in_base(p)? {
            return Err(not_found(p));
        }
        let f = CowFile::new(self.base.open(p, OpenMode::ReadOnly)?)?;
        self.cow()?.insert(p.to_path_buf(), Arc::new(f));
        // The base file is now shadowed: a later removal must hide it.
        self.whiteouts()?.insert(p.to_path_buf());
        Ok(())
    }
}

impl Fs for OverlayFs {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn File>> {
        let p = normalize(path);
        if let Some(f) = self.cow()?.get(&p).cloned() {
            match mode {
                OpenMode::CreateNew => {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!("{} exists", p.display()),
                    ));
                }
                OpenMode::CreateTruncate => f.set_len(0)?,
                _ => {}
            }
            return Ok(f);
        }
        if self.upper.exists(&p)? {
            if mode == OpenMode::CreateNew {
                return Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{} exists", p.display())));
            }
            return self.upper.open(&p, mode);
        }
        let in_base = self.in_base(&p)?;
        match mode {
            OpenMode::ReadOnly if in_base => self.base.open(&p, OpenMode::ReadOnly),
            OpenMode::ReadOnly | OpenMode::ReadWrite if !in_base => Err(not_found(&p)),
            OpenMode::CreateNew if in_base => {
                Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{} exists", p.display())))
            }
            OpenMode::CreateTruncate | OpenMode::CreateNew => {
                self.ensure_upper_dir(&p)?;
                if in_base {
                    self.whiteouts()?.insert(p.clone());
                }
                self.upper.open(&p, OpenMode::CreateTruncate)
            }
            OpenMode::ReadWrite | OpenMode::CreateOrOpen if in_base => {
                self.copy_up(&p)?;
                let f = self.cow()?.get(&p).cloned().ok_or_else(|| not_found(&p))?;
                Ok(f)
            }
            OpenMode::ReadWrite | OpenMode::CreateOrOpen => {
                self.ensure_upper_dir(&p)?;
                self.upper.open(&p, mode)
            }
            OpenMode::ReadOnly => Err(not_found(&p)),
        }
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let p = normalize(path);
        let in_base = self.in_base(&p)?;
        let was_cow = self.cow()?.remove(&p).is_some();
        if !was_cow && self.upper.exists(&p)? {
            self.upper.remove_file(&p)?;
        } else if !was_cow && !in_base {
            return Err(not_found(&p));
        }
        if in_base || self.base.exists(&p)? {
            self.whiteouts()?.insert(p);
        }
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (f, t) = (normalize(from), normalize(to));
        self.copy_up(&f)?;
        self.ensure_upper_dir(&t)?;
        let mut cow = self.cow()?;
        if let Some(file) = cow.remove(&f) {
            if self.upper.exists(&t)? {
                self.upper.remove_file(&t)?;
            }
            cow.insert(t.clone(), file);
        } else {
            cow.remove(&t);
            self.upper.rename(&f, &t)?;
        }
        drop(cow);
        let mut w = self.whiteouts()?;
        w.insert(f);
        // The renamed file now shadows whatever the base holds at `to`.
        w.insert(t);
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<String>> {
        let d = normalize(dir);
        if !self.base.exists(&d)? && !self.upper.exists(&d)? {
            return Err(not_found(&d));
        }
        let mut names: BTreeSet<String> = BTreeSet::new();
        if self.base.exists(&d)? {
            let w = self.whiteouts()?;
            for n in self.base.list_dir(&d)? {
                if !w.contains(&d.join(&n)) {
                    names.insert(n);
                }
            }
        }
        if self.upper.exists(&d)? {
            names.extend(self.upper.list_dir(&d)?);
        }
        for p in self.cow()?.keys() {
            if let Some(n) = p.file_name().filter(|_| p.parent() == Some(d.as_path())) {
                names.insert(n.to_string_lossy().into_owned());
            }
        }
        Ok(names.into_iter().collect())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.upper.create_dir_all(&normalize(dir))
    }

    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        let p = normalize(path);
        Ok(self.upper.exists(&p)? || self.cow()?.contains_key(&p) || self.in_base(&p)?)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        // Exclusion is about the real store; the lock file already exists wherever the store does.
        self.base.lock(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read_all;

    fn base_with(files: &[(&str, &[u8])]) -> Result<Arc<MemFs>> {
        let m = MemFs::new();
        m.create_dir_all(Path::new("/db"))?;
        for (n, d) in files {
            m.open(Path::new(n), OpenMode::CreateNew)?.write_all_at(d, 0)?;
        }
        Ok(Arc::new(m))
    }

    fn contents(fs: &dyn Fs, p: &str) -> Vec<u8> {
        read_all(fs, Path::new(p)).unwrap_or_default()
    }

    #[test]
    fn changes_stay_in_the_overlay_and_reads_see_them() -> Result<()> {
        let base = base_with(&[("/db/a", b"alpha"), ("/db/b", b"beta"), ("/db/c", b"gamma")])?;
        let o = OverlayFs::new(base.clone());
        o.open(Path::new("/db/a"), OpenMode::ReadWrite)?.write_all_at(b"A", 0)?;
        o.remove_file(Path::new("/db/b"))?;
        o.rename(Path::new("/db/c"), Path::new("/db/d"))?;
        o.open(Path::new("/db/e"), OpenMode::CreateNew)?.write_all_at(b"new", 0)?;
        o.open(Path::new("/db/e2"), OpenMode::CreateOrOpen)?;
        assert_eq!(contents(&o, "/db/a"), b"Alpha");
        assert!(!o.exists(Path::new("/db/b"))? && !o.exists(Path::new("/db/c"))?);
        assert_eq!(contents(&o, "/db/d"), b"gamma");
        assert_eq!(o.list_dir(Path::new("/db"))?, vec!["a", "d", "e", "e2"]);
        assert!(o.open(Path::new("/db/b"), OpenMode::ReadOnly).is_err());
        assert!(o.open(Path::new("/db/a"), OpenMode::CreateNew).is_err());
        // The base is untouched.
        assert_eq!(contents(&*base, "/db/a"), b"alpha");
        assert_eq!(contents(&*base, "/db/b"), b"beta");
        assert_eq!(base.list_dir(Path::new("/db"))?, vec!["a", "b", "c"]);
        Ok(())
    }

    #[test]
    fn truncating_or_recreating_a_base_file_hides_the_old_bytes() -> Result<()> {
        let base = base_with(&[("/db/a", b"alpha"), ("/db/b", b"beta")])?;
        let o = OverlayFs::new(base.clone());
        o.open(Path::new("/db/a"), OpenMode::CreateTruncate)?;
        assert_eq!(contents(&o, "/db/a"), b"");
        o.remove_file(Path::new("/db/b"))?;
        o.open(Path::new("/db/b"), OpenMode::CreateNew)?.write_all_at(b"B", 0)?;
        assert_eq!(contents(&o, "/db/b"), b"B");
        o.remove_file(Path::new("/db/b"))?;
        assert!(!o.exists(Path::new("/db/b"))?);
        assert_eq!(contents(&*base, "/db/a"), b"alpha");
        Ok(())
    }

    #[test]
    fn opening_a_base_file_for_writing_copies_only_what_is_written() -> Result<()> {
        let big = vec![3u8; 1 << 20];
        let base = base_with(&[("/db/data", &big)])?;
        let o = OverlayFs::new(base.clone());
        let f = o.open(Path::new("/db/data"), OpenMode::ReadWrite)?;
        f.write_all_at(b"new", 1000)?;
        assert!(o.resident_bytes()? <= 4096, "copied {} bytes", o.resident_bytes()?);
        // Later opens, renames and listings see the one shadowing file.
        assert_eq!(&contents(&o, "/db/data")[999..1004], b"\x03new\x03");
        o.rename(Path::new("/db/data"), Path::new("/db/moved"))?;
        assert_eq!(o.list_dir(Path::new("/db"))?, vec!["moved"]);
        assert_eq!(contents(&o, "/db/moved").len(), 1 << 20);
        o.open(Path::new("/db/moved"), OpenMode::CreateTruncate)?;
        assert_eq!(contents(&o, "/db/moved"), b"");
        o.remove_file(Path::new("/db/moved"))?;
        assert!(o.list_dir(Path::new("/db"))?.is_empty());
        assert_eq!(contents(&*base, "/db/data"), big);
        Ok(())
    }
}
