//! A store directory holding several named volumes, each in its own subdirectory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use vfs::Fs;

use crate::volume::{Volume, volume_dir};
use crate::{BLOCK_SIZE, Error, Options, Result};

/// A block store: a directory of volumes. Volumes are opened on first use and shared afterwards.
#[derive(Debug)]
pub struct Store {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    opts: Options,
    open: Mutex<BTreeMap<String, Arc<Volume>>>,
}

/// Checks a volume name: 1..=255 bytes of `[A-Za-z0-9._-]`, not starting with a dot.
pub fn validate_volume_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok { Ok(()) } else { Err(Error::InvalidArgument(format!("bad volume name {name:?}"))) }
}

impl Store {
    /// Opens (creating if needed) the store directory `dir`.
    pub fn open(fs: Arc<dyn Fs>, dir: &Path, opts: Options) -> Result<Store> {
        opts.validate()?;
        if !fs.exists(dir)? {
            fs.create_dir_all(dir)?;
            // The new directory's entry must be durable before a volume created in it is acknowledged.
            fs.sync_dir(dir.parent().unwrap_or(Path::new("")))?;
        }
        Ok(Store { fs, dir: dir.to_path_buf(), opts, open: Mutex::new(BTreeMap::new()) })
    }

    /// Creates volume `name` of `size` bytes (a nonzero multiple of 4096), fixed for its lifetime.
    pub fn create_volume(&self, name: &str, size: u64) -> Result<Arc<Volume>> {
        validate_volume_name(name)?;
        if size == 0 || !size.is_multiple_of(BLOCK_SIZE as u64) {
            return Err(Error::InvalidArgument(format!(
                "volume size {size} is not a nonzero multiple of 4096"
            )));
        }
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let v = Volume::create(self.fs.clone(), &self.dir, name, size, self.opts.clone())?.into_shared();
        open.insert(name.to_string(), v.clone());
        Ok(v)
    }

    /// Opens (recovering) volume `name`, or returns the already open one.
    pub fn volume(&self, name: &str) -> Result<Arc<Volume>> {
        validate_volume_name(name)?;
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = open.get(name) {
            return Ok(v.clone());
        }
        let v = Volume::open(self.fs.clone(), &self.dir, name, self.opts.clone())?.into_shared();
        open.insert(name.to_string(), v.clone());
        Ok(v)
    }

    /// Opens volume `name` for inspection without changing any file (recovery runs in memory; writes fail).
    /// Fails with `InvalidArgument` ("in use") while another instance has the volume open.
    pub fn volume_read_only(&self, name: &str) -> Result<Arc<Volume>> {
        validate_volume_name(name)?;
        Ok(Volume::open_read_only(self.fs.clone(), &self.dir, name, self.opts.clone())?.into_shared())
    }

    /// Opens an existing store directory for inspection: unlike [`open`](Self::open) it never creates it.
    pub fn open_existing(fs: Arc<dyn Fs>, dir: &Path, opts: Options) -> Result<Store> {
        opts.validate()?;
        if !fs.exists(dir)? {
            return Err(Error::InvalidArgument(format!("no store directory {}", dir.display())));
        }
        Ok(Store { fs, dir: dir.to_path_buf(), opts, open: Mutex::new(BTreeMap::new()) })
    }

    /// Names of the volumes in the store, sorted.
    pub fn list(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for n in self.fs.list_dir(&self.dir)? {
            if validate_volume_name(&n).is_ok()
                && self.fs.exists(&vfs::join(&volume_dir(&self.dir, &n), "meta"))?
            {
                out.push(n);
            }
        }
        out.sort();
        Ok(out)
    }
}
