//! A store directory holding several named volumes, each in its own subdirectory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use vfs::Fs;

use crate::volume::{Volume, volume_dir};
use crate::{BLOCK_SIZE, Error, MAX_VOLUME_SIZE, Options, Result};

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
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "bad volume name {name:?}: use 1 to 255 ASCII letters, digits, '.', '_' or '-', not starting with '.'"
        )))
    }
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

    /// Creates volume `name` of `size` bytes, fixed for its lifetime.
    /// REQUIRES: `size` is a nonzero multiple of 4096 and at most [`MAX_VOLUME_SIZE`]; otherwise
    /// `InvalidArgument`.
    pub fn create_volume(&self, name: &str, size: u64) -> Result<Arc<Volume>> {
        validate_volume_name(name)?;
        if size == 0 || !size.is_multiple_of(BLOCK_SIZE as u64) {
            return Err(Error::InvalidArgument(format!(
                "volume size {size} is not a nonzero multiple of 4096"
            )));
        }
        if size > MAX_VOLUME_SIZE {
            return Err(Error::InvalidArgument(format!(
                "volume size {size} is over {MAX_VOLUME_SIZE} bytes (8 EiB - 4 KiB), the largest a disk's users can address"
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_volume_names_are_refused_with_the_rule() {
        let long = "x".repeat(256);
        for name in ["", ".", "..", ".hidden", "../x", "a/b", "a b", "é", long.as_str()] {
            let err = validate_volume_name(name).unwrap_err();
            assert!(
                matches!(err, Error::InvalidArgument(ref m) if m.contains("ASCII letters, digits")),
                "{err}"
            );
        }
        for name in ["default", "LOCK", "v-1.img", "a_b", &"x".repeat(255)] {
            validate_volume_name(name).unwrap();
        }
    }

    #[test]
    fn regression_a_volume_too_large_to_serve_is_refused_and_the_largest_works_to_its_last_block() {
        // A 16 EiB - 1 TiB volume was created, then `nbd serve` advertised a size no client accepts.
        let fs: Arc<dyn Fs> = Arc::new(vfs::MemFs::new());
        let dir = Path::new("s");
        let store = Store::open(fs.clone(), dir, Options::default()).unwrap();
        for size in [MAX_VOLUME_SIZE + BLOCK_SIZE as u64, u64::MAX - BLOCK_SIZE as u64 + 1] {
            let err = store.create_volume("big", size).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(ref m) if m.contains("8 EiB")), "{err}");
        }
        assert!(store.list().unwrap().is_empty(), "a refused volume leaves nothing behind");
        let v = store.create_volume("max", MAX_VOLUME_SIZE).unwrap();
        let tail = MAX_VOLUME_SIZE - 2 * BLOCK_SIZE as u64;
        let data: Vec<u8> = (0..2 * BLOCK_SIZE).map(|i| (i % 251) as u8).collect();
        v.write(&data, tail, true).unwrap();
        drop(v);
        drop(store);
        let store = Store::open(fs, dir, Options::default()).unwrap();
        let v = store.volume("max").unwrap();
        let mut back = vec![0u8; 2 * BLOCK_SIZE];
        v.read(&mut back, tail).unwrap();
        assert_eq!(back, data);
        let mut head = vec![1u8; BLOCK_SIZE];
        v.read(&mut head, 0).unwrap();
        assert!(head.iter().all(|&b| b == 0));
        assert!(v.read(&mut head, MAX_VOLUME_SIZE).is_err(), "past the end");
    }
}
