//! A copy-on-write view of another file system: reads come from the base, every change stays in memory.
//!
//! Inspection tools open stores through it. An engine's open path recovers by writing (replaying a log into a new
//! table, starting a new MANIFEST, deleting files no version names); through an overlay it runs unchanged and
//! sees the recovered state, while the directory on disk is left exactly as it was. A file is copied into memory
//! the first time it is opened for writing, renamed or truncated ("copy-up"); a removed base file is hidden by a
//! whiteout. Locks are taken on the base, so a store in use by another process is refused, not read mid-change.

use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::{File, FileLock, Fs, MemFs, OpenMode, Result, normalize, read_all};

/// A copy-on-write [`Fs`] over `base`; nothing is ever written to `base`.
pub struct OverlayFs {
    base: Arc<dyn Fs>,
    upper: MemFs,
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
        OverlayFs { base, upper: MemFs::new(), whiteouts: Mutex::new(BTreeSet::new()) }
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

    /// Makes `p` an upper file with the base's contents, if it is not one already.
    fn copy_up(&self, p: &Path) -> Result<()> {
        if self.upper.exists(p)? {
            return Ok(());
        }
        if !self.in_base(p)? {
            return Err(not_found(p));
        }
        let data = read_all(&*self.base, p)?;
        self.ensure_upper_dir(p)?;
        self.upper.open(p, OpenMode::CreateNew)?.write_all_at(&data, 0)?;
        // The base file is now shadowed: a later removal must hide it.
        self.whiteouts()?.insert(p.to_path_buf());
        Ok(())
    }
}

impl Fs for OverlayFs {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn File>> {
        let p = normalize(path);
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
            OpenMode::ReadWrite | OpenMode::CreateOrOpen => {
                if in_base {
                    self.copy_up(&p)?;
                } else {
                    self.ensure_upper_dir(&p)?;
                }
                self.upper.open(&p, mode)
            }
            OpenMode::ReadOnly => Err(not_found(&p)),
        }
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let p = normalize(path);
        let in_base = self.in_base(&p)?;
        if self.upper.exists(&p)? {
            self.upper.remove_file(&p)?;
        } else if !in_base {
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
        self.upper.rename(&f, &t)?;
        let mut w = self.whiteouts()?;
        w.insert(f);
        // The upper file now shadows whatever the base holds at `to`.
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
        Ok(self.upper.exists(&p)? || self.in_base(&p)?)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        // Exclusion is about the real store; the lock file already exists wherever the store does.
        self.base.lock(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
