//! Creating and opening a volume: recovery loads the index checkpoint, replays the data-file batches after
//! it, then the journal records newer than the last batch (see the module comment of `volume.rs`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex};

use rask::Rask;
use vfs::{Fs, OpenMode};

use crate::cache::SegmentCache;
use crate::datafile::DataFiles;
use crate::format::{Checkpoint, META_VERSION, SyncMark, VolumeMeta};
use crate::journal::{Journal, JournalOp};
use crate::options::open_data_files;
use crate::stats::Stats;
use crate::{BLOCK_SIZE, Error, Options, Result};

use super::batch::flusher;
use super::{
    CHECKPOINT_FILE, LOCK_FILE, Poison, SYNCED_FILE, Shared, State, Volume, apply_batch_op, block_range,
    check_blocks, index_delete, volume_dir,
};

impl Volume {
    /// Creates volume `name` of `size` bytes in store directory `store`.
    pub(crate) fn create(
        fs: Arc<dyn Fs>,
        store: &Path,
        name: &str,
        size: u64,
        opts: Options,
    ) -> Result<Volume> {
        let dir = volume_dir(store, name);
        if fs.exists(&vfs::join(&dir, "meta"))? {
            return Err(Error::VolumeExists(name.to_string()));
        }
        fs.create_dir_all(&dir)?;
        // Locked before the check that counts: of two creators, the second finds the first's meta.
        let lock = lock_volume(fs.as_ref(), &dir, name, false)?;
        if fs.exists(&vfs::join(&dir, "meta"))? {
            return Err(Error::VolumeExists(name.to_string()));
        }
        fs.open(&vfs::join(&dir, "journal"), OpenMode::CreateTruncate)?.sync_data()?;
        let meta = VolumeMeta { version: META_VERSION, size, block_size: BLOCK_SIZE as u32 };
        vfs::write_atomic(fs.as_ref(), &vfs::join(&dir, "meta"), &meta.encode())?;
        fs.sync_dir(store)?;
        Volume::open_locked(fs, store, name, opts, false, lock)
    }

    /// Opens and recovers volume `name`.
    pub(crate) fn open(fs: Arc<dyn Fs>, store: &Path, name: &str, opts: Options) -> Result<Volume> {
        exists(fs.as_ref(), store, name)?;
        let lock = lock_volume(fs.as_ref(), &volume_dir(store, name), name, false)?;
        Volume::open_locked(fs, store, name, opts, false, lock)
    }

    /// Opens volume `name` for inspection: recovery runs in memory only (no torn tail is cut, no file removed)
    /// and every write or flush fails. Refused while another instance has the volume open.
    pub(crate) fn open_read_only(fs: Arc<dyn Fs>, store: &Path, name: &str, opts: Options) -> Result<Volume> {
        exists(fs.as_ref(), store, name)?;
        let lock = lock_volume(fs.as_ref(), &volume_dir(store, name), name, true)?;
        Volume::open_locked(fs, store, name, opts, true, lock)
    }

    /// REQUIRES: `lock` is the volume's lock (`None` only for a read-only open of a volume no instance of this
    /// format has ever opened for writing).
    fn open_locked(
        fs: Arc<dyn Fs>,
        store: &Path,
        name: &str,
        opts: Options,
        read_only: bool,
        lock: Option<Box<dyn vfs::FileLock>>,
    ) -> Result<Volume> {
        let (state, size) = State::recover(fs, &volume_dir(store, name), name, opts, read_only)?;
        let background = !read_only && state.opts.flush_in_background;
        let gc_in_background = state.opts.gc_in_background;
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            cv: Condvar::new(),
            shutdown: AtomicBool::new(false),
            gc_lock: Mutex::new(()),
            last_recovery: Mutex::new(None),
            gc_running: AtomicBool::new(false),
            #[cfg(test)]
            pause_before_wait_ms: std::sync::atomic::AtomicU64::new(0),
        });
        let flusher = if background {
            let sh = shared.clone();
            Some(std::thread::Builder::new().name("blockstore-flush".into()).spawn(move || flusher(&sh))?)
        } else {
            None
        };
        Ok(Volume {
            _lock: lock,
            name: name.to_string(),
            size,
            shared,
            flusher,
            gc_in_background,
            gc_thread: Mutex::new(None),
        })
    }
}

impl State {
    /// Recovers a volume's state from the files in its directory `dir`: the index checkpoint, the data-file
    /// batches after it, the journal records after those (see the module comment); with its size in bytes.
    /// Outside `read_only`, a torn tail is cut off and files a collection was removing are removed.
    /// REQUIRES: the caller holds the volume's lock (or, `read_only`, keeps every write away).
    pub(super) fn recover(
        fs: Arc<dyn Fs>,
        dir: &Path,
        name: &str,
        opts: Options,
        read_only: bool,
    ) -> Result<(State, u64)> {
        opts.validate()?;
        let dir = dir.to_path_buf();
        let meta_path = vfs::join(&dir, "meta");
        if !fs.exists(&meta_path)? {
            return Err(Error::NoSuchVolume(name.to_string()));
        }
        let mut meta = VolumeMeta::decode(&vfs::read_all(fs.as_ref(), &meta_path)?)?;
        if meta.block_size as usize != BLOCK_SIZE
            || meta.size == 0
            || !meta.size.is_multiple_of(BLOCK_SIZE as u64)
        {
            return Err(Error::Corruption(format!("volume {name}: unsupported geometry {meta:?}")));
        }
        if meta.version < META_VERSION && !read_only {
            // Before the journal can get a sync mark (see `META_VERSION`).
            meta.version = META_VERSION;
            vfs::write_atomic(fs.as_ref(), &meta_path, &meta.encode())?;
        }
        let blocks = meta.size / BLOCK_SIZE as u64;
        let mut index = Rask::new(opts.index.clone()).map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let mut stats = Stats::default();
        let ckpt_path = vfs::join(&dir, CHECKPOINT_FILE);
        let ckpt = if fs.exists(&ckpt_path)? {
            Some(Checkpoint::decode(&vfs::read_all(fs.as_ref(), &ckpt_path)?)?)
        } else {
            None
        };
        let after = ckpt.as_ref().map_or(0, |c| c.batch_seq);
        let synced_path = vfs::join(&dir, SYNCED_FILE);
        let durable = if fs.exists(&synced_path)? {
            SyncMark::decode(&vfs::read_all(fs.as_ref(), &synced_path)?)?
        } else {
            SyncMark::default()
        };
        let max_open = open_data_files(opts.max_open_data_files, vfs::open_file_limit());
        let (mut data, batches) = DataFiles::open(fs.clone(), &dir, after, durable, read_only, max_open)?;
        let mut last_journal_seq = 0;
        let mut checkpoint_len = 0;
        if let Some(c) = &ckpt {
            // Files older than the checkpoint's current file that it does not list were being deleted by a
            // garbage collection when the volume went down: nothing references them any more.
            let mut removed = false;
            for (id, _) in data.written() {
                if id < c.current_file && c.files.binary_search_by_key(&id, |&(f, _)| f).is_err() {
                    if read_only {
                        data.forget(id);
                    } else {
                        data.remove(id)?;
                        removed = true;
                    }
                }
            }
            if removed {
                fs.sync_dir(&dir)?;
            }
            for p in &c.pieces {
                check_blocks(p.first, p.blocks, blocks)?;
                if !data.contains(p.loc.file) {
                    return Err(Error::Corruption(format!(
                        "index checkpoint references missing data file {}",
                        p.loc.file
                    )));
                }
                index.put(block_range(p.first, p.blocks), p.loc);
            }
            stats.recovered_checkpoint_pieces = c.pieces.len() as u64;
            last_journal_seq = c.journal_seq;
            checkpoint_len = c.encode_len() as u64;
        }
        for b in &batches {
            last_journal_seq = last_journal_seq.max(b.header.journal_seq);
            for op in &b.ops {
                apply_batch_op(&mut index, None, b.file, op, blocks)?;
            }
            stats.recovered_batches += 1;
        }
        let mut live: BTreeMap<u32, u64> = BTreeMap::new();
        for (r, loc) in index.iter() {
            *live.entry(loc.file).or_default() += r.len();
        }
        for (&id, &n) in &live {
            if n > data.written_blocks(id) {
                return Err(Error::Corruption(format!(
                    "the index maps {n} blocks to data file {id}, which holds {}",
                    data.written_blocks(id)
                )));
            }
        }
        let jmode = if read_only { OpenMode::ReadOnly } else { OpenMode::ReadWrite };
        let jpath = vfs::join(&dir, "journal");
        let (mut journal, records) = Journal::open(fs.open(&jpath, jmode)?, read_only, last_journal_seq)
            .map_err(|e| match e {
                // Name the file: the operator's way out is to cut it at the reported offset (docs/blockstore.md).
                Error::Corruption(m) => Error::Corruption(format!("{}: {m}", jpath.display())),
                e => e,
            })?;
        let mut cache = SegmentCache::default();
        let mut next_journal_seq = last_journal_seq + 1;
        if !read_only && records.last().is_some_and(|&(seq, _)| seq <= last_journal_seq) {
            // Every record is in a data file already: start the next chain at offset 0 instead of after records
            // that replay would only skip.
            journal.truncate()?;
        }
        let journal_len = journal.len();
        for (seq, op) in records {
            if seq <= last_journal_seq {
                continue;
            }
            match op {
                JournalOp::Write { first, data } => {
                    check_blocks(first, (data.len() / BLOCK_SIZE) as u64, blocks)?;
                    cache.write(first, &data);
                }
                JournalOp::Delete { first, blocks: n } => {
                    check_blocks(first, u64::from(n), blocks)?;
                    cache.delete(first, u64::from(n));
                    index_delete(&mut index, &mut live, block_range(first, u64::from(n)));
                }
            }
            stats.recovered_journal_records += 1;
            next_journal_seq = seq + 1;
        }
        let state = State {
            fs,
            dir,
            opts,
            journal,
            cache,
            frozen: None,
            frozen_journal_seq: 0,
            frozen_taken: false,
            flushing: false,
            presynced: 0,
            index,
            data,
            live,
            next_journal_seq,
            journal_len_at_batch: journal_len,
            batch_journal_seq: last_journal_seq,
            bytes_since_checkpoint: 0,
            last_checkpoint_bytes: checkpoint_len,
            checkpoint_seq: after,
            synced: durable,
            gc_due: false,
            poisoned: read_only.then(Poison::read_only),
            stats,
        };
        let mut state = state;
        state.gc_due = !read_only && state.gc_wanted();
        Ok((state, meta.size))
    }
}

/// `NoSuchVolume` unless volume `name` has its meta file: checked before the lock, which would otherwise create
/// a lock file in (or fail on) a directory that holds no volume.
fn exists(fs: &dyn Fs, store: &Path, name: &str) -> Result<()> {
    if fs.exists(&vfs::join(&volume_dir(store, name), "meta"))? {
        Ok(())
    } else {
        Err(Error::NoSuchVolume(name.to_string()))
    }
}

/// Takes the volume's lock file (`LOCK` in its directory), so that two instances, in one process or two, never
/// write one volume: both would append to the same journal and data files. A read-only open (inspection) takes it
/// only if it exists, so that inspecting a volume written before locks existed changes nothing on disk.
fn lock_volume(
    fs: &dyn Fs,
    dir: &Path,
    name: &str,
    read_only: bool,
) -> Result<Option<Box<dyn vfs::FileLock>>> {
    let path = vfs::join(dir, LOCK_FILE);
    if read_only && !fs.exists(&path)? {
        return Ok(None);
    }
    match fs.lock(&path) {
        Ok(l) => Ok(Some(l)),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Err(Error::InvalidArgument(format!(
            "volume {name} is in use by another instance ({})",
            path.display()
        ))),
        Err(e) => Err(e.into()),
    }
}
