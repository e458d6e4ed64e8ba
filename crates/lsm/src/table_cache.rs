//! Open tables, kept by file number up to a count limit (RocksDB's `max_open_files`), least recently used
//! evicted. A table evicted while an iterator uses it stays open through the iterator's `Arc`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::filename;
use crate::table::Table;
use crate::version::FileMeta;

type OpenTable = (Arc<Table>, u64);

/// The table cache.
#[derive(Debug)]
pub struct TableCache {
    fs: Arc<dyn vfs::Fs>,
    dir: PathBuf,
    blocks: Arc<BlockCache>,
    capacity: usize,
    /// Open tables with their last-use tick, and the tick counter.
    open: Mutex<(HashMap<u64, OpenTable>, u64)>,
    /// Tables opened so far.
    opens: AtomicU64,
}

impl TableCache {
    /// A cache of at most `capacity` open tables reading blocks through `blocks`.
    pub fn new(fs: Arc<dyn vfs::Fs>, dir: PathBuf, blocks: Arc<BlockCache>, capacity: usize) -> Self {
        TableCache {
            fs,
            dir,
            blocks,
            capacity: capacity.max(1),
            open: Mutex::new((HashMap::new(), 0)),
            opens: AtomicU64::new(0),
        }
    }

    /// Tables opened so far (each miss of [`TableCache::get`] that found the file).
    pub fn opens(&self) -> u64 {
        self.opens.load(Ordering::Relaxed)
    }

    /// The block cache.
    pub fn blocks(&self) -> &Arc<BlockCache> {
        &self.blocks
    }

    /// The open table `number` of `size` bytes, opening it if needed.
    pub fn get(&self, number: u64, size: u64) -> Result<Arc<Table>> {
        {
            let mut g = self.open.lock().unwrap_or_else(|p| p.into_inner());
            g.1 += 1;
            let tick = g.1;
            if let Some((t, used)) = g.0.get_mut(&number) {
                *used = tick;
                return Ok(t.clone());
            }
        }
        let name = filename::table_name(number);
        let file = match self.fs.open(&self.dir.join(&name), vfs::OpenMode::ReadOnly) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::corruption(name, "table referenced by the MANIFEST is missing"));
            }
            Err(e) => return Err(e.into()),
        };
        let actual = file.len()?;
        if actual != size {
            return Err(Error::corruption(name, format!("size {actual} but the MANIFEST says {size}")));
        }
        let t = Arc::new(Table::open(file, number, &name, size, self.blocks.clone())?);
        self.opens.fetch_add(1, Ordering::Relaxed);
        let mut g = self.open.lock().unwrap_or_else(|p| p.into_inner());
        g.1 += 1;
        let tick = g.1;
        g.0.insert(number, (t.clone(), tick));
        if g.0.len() > self.capacity
            && let Some((&victim, _)) = g.0.iter().min_by_key(|(_, (_, used))| *used)
        {
            g.0.remove(&victim);
        }
        Ok(t)
    }

    /// The open table of `f`: through the table `f` remembers while the cache keeps it open (no lock), else
    /// [`TableCache::get`]. Tables reached through `f` do not refresh their place in the cache's LRU order, so a
    /// full cache may close a busy table; `f` then goes through [`TableCache::get`] for good.
    pub fn table(&self, f: &FileMeta) -> Result<Arc<Table>> {
        if let Some(t) = f.reader.get().and_then(Weak::upgrade) {
            return Ok(t);
        }
        let t = self.get(f.number(), f.info.size)?;
        let _ = f.reader.set(Arc::downgrade(&t));
        Ok(t)
    }

    /// Forgets table `number` and its cached blocks (the file is being deleted).
    pub fn evict(&self, number: u64) {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).0.remove(&number);
        self.blocks.evict_file(number);
    }
}
