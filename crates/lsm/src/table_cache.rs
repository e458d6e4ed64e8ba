//! Open tables, kept by file number up to a count limit derived from `max_open_files`, least recently used
//! evicted. A table evicted while an iterator uses it stays open through the iterator's `Arc`; the cache still
//! counts it, and makes room for a new table by closing idle ones first, so tables the cache let go of but
//! iterators still read (a compaction's inputs, a scan's) do not push the process past its descriptor limit.

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

/// Files the engine holds open besides cached tables: the WAL, the MANIFEST, the LOCK, a directory being
/// synced, flush and compaction outputs, tables a running compaction keeps after the cache let them go
/// (LevelDB's and RocksDB's `kNumNonTableCacheFiles`).
pub const NON_TABLE_FILES: usize = 10;

/// How many tables the cache keeps open: `max_open_files` less [`NON_TABLE_FILES`], as LevelDB and RocksDB
/// size it, and no more than the process's open-file limit `process_limit` allows once an eighth of it (at
/// least [`NON_TABLE_FILES`]) is left to the engine's other files and to the rest of the process, which the
/// engine shares (RocksDB clips to the whole limit); at least one. Without the clip, the default of 1000 under
/// Linux's usual soft limit of 1024 ran out of descriptors once the database held about 1000 tables, and the
/// failed open stopped writes.
pub fn capacity(max_open_files: usize, process_limit: Option<u64>) -> usize {
    let own = max_open_files.saturating_sub(NON_TABLE_FILES);
    let process = process_limit.map_or(usize::MAX, |l| {
        let l = usize::try_from(l).unwrap_or(usize::MAX);
        l.saturating_sub((l / 8).max(NON_TABLE_FILES))
    });
    own.min(process).max(1)
}

/// What the cache's lock guards.
#[derive(Debug, Default)]
struct Open {
    /// Cached tables with their last-use tick.
    tables: HashMap<u64, OpenTable>,
    /// The tick counter.
    tick: u64,
    /// Tables evicted while readers held them: still open until the last reader lets go.
    held: Vec<Weak<Table>>,
}

impl Open {
    /// Makes room for one more open table within `capacity`: forgets evicted tables no reader holds any more,
    /// then closes the least recently used cached tables no reader holds. When readers hold all of them, the
    /// least recently used still leaves the cache (keeping it bounded) but stays open in `held`.
    fn make_room(&mut self, capacity: usize) {
        self.held.retain(|w| w.strong_count() > 0);
        while self.tables.len() + self.held.len() >= capacity {
            let idle = self
                .tables
                .iter()
                .filter(|(_, (t, _))| Arc::strong_count(t) == 1)
                .min_by_key(|(_, (_, used))| *used)
                .map(|(&n, _)| n);
            match idle {
                Some(n) => self.evict(n),
                None => break,
            }
        }
        if self.tables.len() >= capacity
            && let Some((&victim, _)) = self.tables.iter().min_by_key(|(_, (_, used))| *used)
        {
            self.evict(victim);
        }
    }

    /// Drops table `number` from the cache, tracking it in `held` if a reader still has it (a reader may also
    /// have reached it through its `FileMeta` since the caller looked).
    fn evict(&mut self, number: u64) {
        if let Some((t, _)) = self.tables.remove(&number)
            && Arc::strong_count(&t) > 1
        {
            self.held.push(Arc::downgrade(&t));
        }
    }
}

/// The table cache.
#[derive(Debug)]
pub struct TableCache {
    fs: Arc<dyn vfs::Fs>,
    dir: PathBuf,
    blocks: Arc<BlockCache>,
    capacity: usize,
    open: Mutex<Open>,
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
            open: Mutex::new(Open::default()),
            opens: AtomicU64::new(0),
        }
    }

    /// Tables opened so far (each miss of [`TableCache::get`] that found the file).
    pub fn opens(&self) -> u64 {
        self.opens.load(Ordering::Relaxed)
    }

    /// Tables open now: those cached and those evicted that readers still hold.
    pub fn open_tables(&self) -> usize {
        let g = self.open.lock().unwrap_or_else(|p| p.into_inner());
        g.tables.len() + g.held.iter().filter(|w| w.strong_count() > 0).count()
    }

    /// The block cache.
    pub fn blocks(&self) -> &Arc<BlockCache> {
        &self.blocks
    }

    /// The open table `number` of `size` bytes, opening it if needed.
    pub fn get(&self, number: u64, size: u64) -> Result<Arc<Table>> {
        {
            let mut g = self.open.lock().unwrap_or_else(|p| p.into_inner());
            g.tick += 1;
            let tick = g.tick;
            if let Some((t, used)) = g.tables.get_mut(&number) {
                *used = tick;
                return Ok(t.clone());
            }
            // Before the open, so the descriptor it needs is free.
            g.make_room(self.capacity);
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
        g.tick += 1;
        let tick = g.tick;
        // Another thread may have opened it meanwhile: this copy replaces that one in the cache.
        g.evict(number);
        g.make_room(self.capacity);
        g.tables.insert(number, (t.clone(), tick));
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
        self.open.lock().unwrap_or_else(|p| p.into_inner()).evict(number);
        self.blocks.evict_file(number);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn capacity_leaves_room_for_other_files_and_respects_the_process_limit() {
        assert_eq!(capacity(1000, None), 990, "LevelDB's table cache size");
        assert_eq!(capacity(1000, Some(1 << 20)), 990);
        assert_eq!(capacity(1000, Some(1024)), 896, "an eighth of the process limit left to other files");
        assert_eq!(capacity(1000, Some(40)), 30, "at least NON_TABLE_FILES left");
        assert_eq!(capacity(5, None), 1, "at least one table");
        assert_eq!(capacity(1000, Some(3)), 1);
        assert_eq!(capacity(usize::MAX, None), usize::MAX - NON_TABLE_FILES);
    }

    fn cache_of(n: u64, capacity: usize) -> TableCache {
        let fs = Arc::new(vfs::MemFs::new());
        vfs::Fs::create_dir_all(fs.as_ref(), Path::new("db")).unwrap();
        for number in 1..=n {
            let f = vfs::Fs::open(
                fs.as_ref(),
                &PathBuf::from("db").join(filename::table_name(number)),
                vfs::OpenMode::CreateTruncate,
            )
            .unwrap();
            let mut b = crate::table::TableBuilder::new(f, crate::table::TableOptions::default());
            b.add(&crate::ikey::make(b"k", number, crate::ikey::Kind::Value), b"v").unwrap();
            b.finish().unwrap();
        }
        TableCache::new(fs, PathBuf::from("db"), Arc::new(BlockCache::new(1 << 20)), capacity)
    }

    fn size_of(c: &TableCache, number: u64) -> u64 {
        c.fs.open(&c.dir.join(filename::table_name(number)), vfs::OpenMode::ReadOnly).unwrap().len().unwrap()
    }

    #[test]
    fn tables_readers_hold_count_against_the_capacity() {
        let c = cache_of(8, 3);
        let get = |n: u64| c.get(n, size_of(&c, n)).unwrap();
        // Readers hold 1 and 2 (a compaction's inputs, say) while other tables come and go.
        let (one, two) = (get(1), get(2));
        for n in 3..=8 {
            drop(get(n));
            assert!(c.open_tables() <= 3, "{} open after table {n}", c.open_tables());
        }
        // The held tables stayed open and readable; once let go they are closed to make room.
        for t in [&one, &two] {
            use crate::iter::InternalIter;
            let mut it = t.iter();
            it.seek_to_first();
            assert!(it.valid() && crate::ikey::user_key(it.key()) == b"k", "a held table still reads");
        }
        assert_eq!(c.open_tables(), 3);
        drop((one, two));
        for n in 3..=5 {
            drop(get(n));
        }
        assert_eq!(c.open_tables(), 3);
        assert_eq!(c.open.lock().unwrap().held.iter().filter(|w| w.strong_count() > 0).count(), 0);
    }
}
