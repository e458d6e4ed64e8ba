//! FlexFile: a persistent file with O(log N) insert-range and collapse-range (§4 of the paper).
//!
//! # Design
//!
//! A FlexFile is a directory of three files (see `docs/formats/flexfile.md`):
//!
//! - `flexfile.data`: segments written log-structured ([`Segments`]); new bytes always go to the open segment,
//!   whose in-memory buffer merges contiguous small writes.
//! - `flexfile.tree`: the FlexTree, checkpointed copy-on-write ([`TreeFile`]).
//! - `flexfile.log`: the logical log of tree operations since the last checkpoint ([`crate::log`]).
//!
//! Every mutation is expressed as logical [`Op`]s, applied to the in-memory tree and appended to the log buffer.
//! Write ordering:
//!
//! 1. *commit* (on `sync`, after a GC round, or when the log buffer fills at the end of an operation): the data
//!    file is synced, then the buffered entries and a commit entry are appended to the log and the log is synced.
//!    Segments emptied by the committed operations become reusable only now.
//! 2. *checkpoint* (when the log file passes both `checkpoint_log_bytes` and `checkpoint_tree_ratio` times the
//!    tree's size, at `close`, after recovery): the data file is synced, dirty nodes go to free tree slots, the
//!    tree file is synced, the header flips to version `v + 1` and is synced; then the log is reset to version
//!    `v + 1`. A log whose version differs from the tree's is ignored.
//!
//! Operations are atomic with respect to crashes: a batch in the log holds whole operations only (the buffer is
//! committed between operations, never inside one, and grows as needed for one large operation instead of
//! overflowing), and garbage collection runs only between operations. After a crash the file holds the state at
//! some operation boundary no earlier than the last completed `sync`.
//!
//! Space management (§4.1): `valid` bytes per segment; before an operation that writes `n` bytes, if the data file
//! already holds more than `live / gc_start_utilization + reserve + need` segments and fewer than `reserve + need`
//! are free, the emptiest segments no fuller than `utilization_cap` are relocated in batches, each batch followed
//! by a commit. The start utilisation is the paper's data-file size (its GC experiment: 45 GB or 90 GB for 42 GB
//! of records): at the cap, GC runs as soon as it may; lower, the file grows first and GC later finds emptier
//! segments.
//! Extents are at most 1/32 of a segment, so relocating a segment at most 30/32 full always nets free space, and
//! each round is bounded, so the loop terminates (the reference implementation's did not).
//!
//! Errors: any failure after a mutation has started poisons the handle (`Error::Poisoned` from then on); the
//! files stay consistent and reopening recovers the last committed state.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use vfs::OpenMode;

use crate::error::{Error, Result};
use crate::flextree::{FlexTree, HOLE, MAX_SIZE};
use crate::log::{self, ENTRY_LEN, Op};
use crate::options::Options;
use crate::readahead::ReadAhead;
use crate::segments::Segments;
use crate::treefile::TreeFile;

mod check;
mod space;
mod stats;

pub use stats::Stats;

/// File names inside a FlexFile directory.
pub const DATA_FILE: &str = "flexfile.data";
/// The tree file's name.
pub const TREE_FILE: &str = "flexfile.tree";
/// The log file's name.
pub const LOG_FILE: &str = "flexfile.log";
/// The lock file's name.
pub const LOCK_FILE: &str = "LOCK";

/// A FlexFile. Not thread-safe by itself (`&mut self` for everything that may touch the files).
#[derive(Debug)]
pub struct FlexFile {
    fs: Arc<dyn vfs::Fs>,
    dir: PathBuf,
    /// Shared with the instance a [`FlexFile::reload`] builds, so the directory stays locked throughout.
    lock: Arc<dyn vfs::FileLock>,
    /// Set when a sync of the data, log or tree file fails (see [`FlexFile::reload`]).
    sync_failures: vfs::SyncFailures,
    opts: Options,
    tree: FlexTree,
    tf: TreeFile,
    log: Arc<dyn vfs::File>,
    log_len: u64,
    log_buf: Vec<u8>,
    data: Segments,
    poisoned: bool,
    stats: Stats,
    /// The counters of the instances [`reload`](FlexFile::reload) replaced, so counters stay cumulative.
    reloaded: Stats,
}

fn chunks(len: u64, max: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..len.div_ceil(max)).map(move |i| (i * max, (len - i * max).min(max)))
}

/// The read of `[off, off + buf.len())` shared by [`FlexFile::read`] and [`FlexFile::read_at`]: checks the range,
/// zero-fills holes and hands every mapped piece to `piece` (data address, its part of `buf`).
fn read_pieces(
    tree: &FlexTree,
    size: u64,
    poisoned: bool,
    off: u64,
    buf: &mut [u8],
    mut piece: impl FnMut(u64, &mut [u8]) -> Result<()>,
) -> Result<()> {
    if poisoned {
        return Err(Error::Poisoned);
    }
    let len = buf.len() as u64;
    if off.checked_add(len).is_none_or(|e| e > size) {
        return Err(Error::invalid(format!("range {off}+{len} past the end ({size})")));
    }
    if buf.is_empty() {
        return Ok(());
    }
    // Most reads lie in one extent: one descent, no piece list.
    let (start, e) = tree.extent_at(off)?;
    if start + e.len as u64 >= off + len {
        if e.is_hole() {
            buf.fill(0);
            return Ok(());
        }
        return piece(e.addr + (off - start), buf);
    }
    let mut at = 0usize;
    for p in tree.query(off, len)? {
        let dst = &mut buf[at..at + p.len as usize];
        if p.addr == HOLE {
            dst.fill(0);
        } else {
            piece(p.addr, dst)?;
        }
        at += p.len as usize;
    }
    Ok(())
}

impl FlexFile {
    /// Creates a new FlexFile in `dir` (created if missing). Fails if `dir` already holds one.
    pub fn create(fs: Arc<dyn vfs::Fs>, dir: &Path, opts: Options) -> Result<FlexFile> {
        opts.validate()?;
        fs.create_dir_all(dir)?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            // The directory entry itself must survive a crash once create returns.
            fs.sync_dir(parent)?;
        }
        let lock = lock_dir(fs.as_ref(), dir)?;
        if fs.exists(&dir.join(TREE_FILE))? {
            return Err(Error::invalid(format!("{} already holds a FlexFile", dir.display())));
        }
        let data = fs.open(&dir.join(DATA_FILE), OpenMode::CreateTruncate)?;
        let log = fs.open(&dir.join(LOG_FILE), OpenMode::CreateTruncate)?;
        let mut tree = FlexTree::new(opts.tree_config())?;
        // The tree file is written under a temporary name and renamed last: a directory holds a FlexFile exactly
        // when it holds a tree file with a valid header.
        let tmp = dir.join(format!("{TREE_FILE}.tmp"));
        let tfile = fs.open(&tmp, OpenMode::CreateTruncate)?;
        let tf = TreeFile::create(tfile, &opts, &mut tree)?;
        log.write_all_at(&log::encode_header(tf.version()), 0)?;
        log.sync_data()?;
        data.sync_data()?;
        drop((tf, log, data));
        // The data and log files' directory entries must be durable before the rename can be: a crash could
        // otherwise keep the tree file, which says "a FlexFile is here", without its log
        // (`regression_a_crash_in_create_leaves_no_flexfile_or_a_whole_one`).
        fs.sync_dir(dir)?;
        fs.rename(&tmp, &dir.join(TREE_FILE))?;
        fs.sync_dir(dir)?;
        drop(lock);
        Self::open(fs, dir, opts)
    }

    /// Opens the FlexFile in `dir`, recovering from the log. The format parameters stored in the tree file
    /// (segment and node sizes, capacities) override those in `opts`; the policy knobs of `opts` apply.
    pub fn open(fs: Arc<dyn vfs::Fs>, dir: &Path, opts: Options) -> Result<FlexFile> {
        let tpath = dir.join(TREE_FILE);
        // Refused before the lock, so a missing directory or one holding no FlexFile is left as it was. `create`
        // renames the tree file into place last, so once it exists it stays, and the lock below is enough.
        if !fs.exists(dir)? {
            return Err(Error::invalid(format!("{} does not exist", dir.display())));
        }
        if !fs.exists(&tpath)? {
            return Err(Error::invalid(format!("{} holds no FlexFile", dir.display())));
        }
        let lock = lock_dir(fs.as_ref(), dir)?;
        Self::open_locked(fs, dir, opts, Arc::from(lock), vfs::SyncFailures::default())
    }

    /// Whether a sync of its data, log or tree file ever failed (then [`FlexFile::reload`] refuses).
    pub fn sync_failed(&self) -> bool {
        self.sync_failures.any()
    }

    /// Reads the FlexFile back from its files, as [`FlexFile::open`] does after a crash, and replaces this
    /// instance with the result: what only this instance's memory held (an unwritten log tail, a tree change not
    /// yet logged) is dropped, and a poisoned instance becomes usable again. For a caller that can redo the lost
    /// changes (FlexDB replays its WAL) after a write or sync failed part-way. The statistics restart, as at an
    /// open. On failure this instance is poisoned (the attempt may have changed the files under it); a later
    /// reload may still succeed.
    ///
    /// Refused after a failed sync of any of its files: Linux then marks the unwritten pages clean, so they may be
    /// lost on the media while reads still return them, and a reload would build on bytes the next power loss can
    /// take away. Only a recovery from what the media holds (a restart) is safe then.
    pub fn reload(&mut self) -> Result<()> {
        if self.sync_failures.any() {
            return Err(Error::Io(std::io::Error::other(
                "a sync of the FlexFile failed: pages it wrote since its last good sync may be lost on the media \
                 while the page cache still shows them, so it cannot be reloaded in place",
            )));
        }
        // First make what the files hold durable, so the recovery below reads what a crash would leave: it trusts
        // the log it reads, and a crash inside its checkpoint must find that log as it read it (unsynced entries
        // could otherwise come back torn over older bytes, which recovery reports as corruption).
        for name in [DATA_FILE, LOG_FILE, TREE_FILE] {
            let f = self.sync_failures.watch(self.fs.open(&self.dir.join(name), OpenMode::ReadWrite)?);
            if let Err(e) = f.sync_data() {
                self.poisoned = true;
                return Err(e.into());
            }
        }
        // The same flag: a sync failing in the reload's own recovery taints this FlexFile too, although the
        // instance it was building is dropped.
        let (fs, dir, opts) = (self.fs.clone(), self.dir.clone(), self.opts.clone());
        match Self::open_locked(fs, &dir, opts, self.lock.clone(), self.sync_failures.clone()) {
            Ok(fresh) => {
                let mut reloaded = self.stats();
                reloaded.reloads += 1;
                *self = fresh;
                self.reloaded = reloaded;
                Ok(())
            }
            Err(e) => {
                // The attempt's recovery may have checkpointed part-way, so the files no longer match this
                // instance's memory: it must write nothing more, not even at close.
                self.poisoned = true;
                Err(e)
            }
        }
    }

    /// [`FlexFile::open`] once `lock` is held.
    fn open_locked(
        fs: Arc<dyn vfs::Fs>,
        dir: &Path,
        opts: Options,
        lock: Arc<dyn vfs::FileLock>,
        sync_failures: vfs::SyncFailures,
    ) -> Result<FlexFile> {
        let tpath = dir.join(TREE_FILE);
        let tfile = sync_failures.watch(fs.open(&tpath, OpenMode::ReadWrite)?);
        let h = TreeFile::read_header(tfile.as_ref())?;
        let opts = Options {
            segment_size: h.segment_size,
            max_extent: h.max_extent,
            block_size: h.block_size,
            leaf_cap: h.leaf_cap as usize,
            internal_cap: h.internal_cap as usize,
            node_size: h.node_size,
            ..opts
        };
        opts.validate()
            .map_err(|e| Error::corruption("tree", format!("stored parameters are invalid: {e}")))?;
        let (tf, tree) = TreeFile::open(tfile, opts.tree_config())?;
        let data = sync_failures.watch(fs.open(&dir.join(DATA_FILE), OpenMode::CreateOrOpen)?);
        let log = sync_failures.watch(fs.open(&dir.join(LOG_FILE), OpenMode::CreateOrOpen)?);
        let data = Segments::new(data, &opts)?;
        let mut f = FlexFile {
            fs,
            dir: dir.to_path_buf(),
            lock,
            sync_failures,
            opts,
            tree,
            tf,
            log,
            log_len: 0,
            log_buf: Vec::new(),
            data,
            poisoned: false,
            stats: Stats::default(),
            reloaded: Stats::default(),
        };
        f.recover()?;
        Ok(f)
    }

    fn recover(&mut self) -> Result<()> {
        let len = usize::try_from(self.log.len()?).map_err(|_| Error::corruption("log", "log too large"))?;
        let mut bytes = vec![0u8; len];
        self.log.read_exact_at(&mut bytes, 0)?;
        let parsed = log::parse(&bytes, self.tf.version())?;
        // The log header is synced at creation and rewritten only after a newer tree header is durable, so an
        // invalid header or one newer than the tree means damage (a lost newest header), never a crash.
        match parsed.version {
            None => return Err(Error::corruption("log", "invalid log header")),
            Some(v) if v > self.tf.version() => {
                return Err(Error::corruption(
                    "tree",
                    format!(
                        "the log extends version {v} but the newest valid tree header is {}",
                        self.tf.version()
                    ),
                ));
            }
            _ => {}
        }
        for op in &parsed.ops {
            self.apply(op, false).map_err(|e| match e {
                Error::InvalidArgument(m) => {
                    Error::corruption("log", format!("entry does not apply to the tree: {m}"))
                }
                e => e,
            })?;
        }
        self.stats.replayed_ops = parsed.ops.len() as u64;
        self.stats.torn_log_bytes = parsed.torn_bytes;
        let mut valid: HashMap<u64, u64> = HashMap::new();
        let seg = self.opts.segment_size;
        self.tree.for_each_extent(|_, e| {
            if !e.is_hole() {
                *valid.entry(e.addr / seg).or_default() += e.len as u64;
            }
        })?;
        self.data.set_valid(valid)?;
        if !parsed.ops.is_empty()
            || parsed.version != Some(self.tf.version())
            || bytes.len() > log::HEADER_LEN
        {
            // Fold the replayed log into a new tree version and start a fresh log.
            self.checkpoint_inner()?;
        } else {
            self.log_len = log::HEADER_LEN as u64;
        }
        Ok(())
    }

    /// The options in force (format parameters as stored).
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The logical size in bytes.
    pub fn size(&self) -> u64 {
        self.tree.size()
    }

    /// The in-memory extent index (read-only).
    pub fn tree(&self) -> &FlexTree {
        &self.tree
    }

    /// The durable tree version.
    pub fn version(&self) -> u64 {
        self.tf.version()
    }

    fn guard<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        let r = f(self);
        if r.is_err() {
            self.poisoned = true;
        }
        r
    }

    /// Applies one operation to the tree and the space accounting (`account` false during replay, where the
    /// counters are rebuilt from the tree afterwards).
    fn apply(&mut self, op: &Op, account: bool) -> Result<()> {
        match *op {
            Op::Insert { off, len, addr, tag } => {
                self.tree.insert(off, len as u64, addr, tag)?;
                if account && addr != HOLE {
                    self.data.add_valid(addr, len as u64)?;
                }
            }
            Op::Collapse { off, len } => {
                let removed = self.tree.collapse(off, len as u64)?;
                if account {
                    for p in removed.iter().filter(|p| p.addr != HOLE) {
                        self.data.sub_valid(p.addr, p.len)?;
                    }
                }
            }
            Op::Relocate { off, len, addr } => {
                let old = self.tree.remap(off, len as u64, addr)?;
                if account {
                    self.data.sub_valid(old, len as u64)?;
                    self.data.add_valid(addr, len as u64)?;
                }
            }
            Op::SetTag { off, tag } => self.tree.set_tag(off, tag)?,
        }
        Ok(())
    }

    fn run(&mut self, op: Op) -> Result<()> {
        self.apply(&op, true)?;
        self.log_buf.extend_from_slice(&log::encode_op(self.tf.version(), &op));
        Ok(())
    }

    fn insert_hole(&mut self, off: u64, len: u64) -> Result<()> {
        for (o, n) in chunks(len, u32::MAX as u64) {
            self.run(Op::Insert { off: off + o, len: n as u32, addr: HOLE, tag: 0 })?;
        }
        Ok(())
    }

    fn end_op(&mut self) -> Result<()> {
        if self.log_buf.len() >= self.opts.log_buffer_bytes {
            self.commit()?;
        }
        if self.log_len + self.log_buf.len() as u64 >= self.checkpoint_threshold() {
            self.checkpoint_inner()?;
        }
        Ok(())
    }

    /// The log size at which the next checkpoint runs (see `Options::checkpoint_tree_ratio`).
    fn checkpoint_threshold(&self) -> u64 {
        let tree = self.tree.node_count() as u64 * self.opts.node_size as u64;
        self.opts.checkpoint_log_bytes.max(tree.saturating_mul(self.opts.checkpoint_tree_ratio as u64))
    }

    fn check_end(&self, off: u64, len: u64) -> Result<()> {
        match off.checked_add(len) {
            Some(e) if e <= MAX_SIZE => Ok(()),
            _ => Err(Error::invalid("the file would exceed the maximum size (2^48 - 1)")),
        }
    }

    /// Writes `buf` at `off`, overwriting; writing past the end extends the file, leaving a hole in between.
    pub fn write(&mut self, off: u64, buf: &[u8]) -> Result<()> {
        self.check_end(off.max(self.size()), buf.len() as u64)?;
        self.guard(|f| {
            // GC commits: it must run before the operation logs anything, or a crash could expose half of it.
            f.ensure_space(buf.len() as u64)?;
            if off > f.size() {
                f.insert_hole(f.size(), off - f.size())?;
            }
            f.write_data(off, buf, false)?;
            f.end_op()
        })
    }

    /// REQUIRES: `ensure_space` ran before the operation's first `run`.
    fn write_data(&mut self, off: u64, buf: &[u8], insert: bool) -> Result<()> {
        self.stats.user_bytes += buf.len() as u64;
        let max = self.opts.max_extent_len() as usize;
        let mut pos = off;
        let mut rest = buf;
        while !rest.is_empty() {
            let take = rest.len().min(max);
            let (addr, n) = self.data.append(&rest[..take], false)?;
            if insert {
                self.run(Op::Insert { off: pos, len: n as u32, addr, tag: 0 })?;
            } else {
                let size = self.size();
                let tag = if pos < size { self.tree.get_tag(pos)? } else { 0 };
                let ov = (n as u64).min(size.saturating_sub(pos));
                if ov > 0 {
                    self.run(Op::Collapse { off: pos, len: ov as u32 })?;
                }
                self.run(Op::Insert { off: pos, len: n as u32, addr, tag })?;
            }
            pos += n as u64;
            rest = &rest[n..];
        }
        Ok(())
    }

    /// Inserts `buf` at `off`, moving the bytes at and after `off` up by `buf.len()`. `off` may equal the size.
    pub fn insert(&mut self, off: u64, buf: &[u8]) -> Result<()> {
        if off > self.size() {
            return Err(Error::invalid(format!("insert at {off} past the end ({})", self.size())));
        }
        self.check_end(self.size(), buf.len() as u64)?;
        self.guard(|f| {
            f.ensure_space(buf.len() as u64)?;
            f.write_data(off, buf, true)?;
            f.end_op()
        })
    }

    /// Removes `[off, off + len)`, moving the bytes after it down by `len`.
    pub fn collapse(&mut self, off: u64, len: u64) -> Result<()> {
        if off.checked_add(len).is_none_or(|e| e > self.size()) {
            return Err(Error::invalid(format!("collapse {off}+{len} past the end ({})", self.size())));
        }
        self.guard(|f| {
            for (_, n) in chunks(len, u32::MAX as u64) {
                f.run(Op::Collapse { off, len: n as u32 })?;
            }
            f.end_op()
        })
    }

    /// Replaces `[off, off + len)` with `buf` as one operation: the file moves by `buf.len() - len` after it, and a
    /// crash leaves either the old bytes or the new ones, never a state between (a `collapse` then an `insert`
    /// could be cut between the two). The new bytes are one contiguous run in the data file.
    pub fn replace(&mut self, off: u64, len: u64, buf: &[u8]) -> Result<()> {
        let size = self.size();
        if off.checked_add(len).is_none_or(|e| e > size) {
            return Err(Error::invalid(format!("replace {off}+{len} past the end ({size})")));
        }
        self.check_end(size - len, buf.len() as u64)?;
        self.guard(|f| {
            // GC commits: it must run before the operation logs anything (as in `write`).
            f.ensure_space(buf.len() as u64)?;
            for (_, n) in chunks(len, u32::MAX as u64) {
                f.run(Op::Collapse { off, len: n as u32 })?;
            }
            f.write_data(off, buf, true)?;
            f.end_op()
        })
    }

    /// Sets the size: shrinking drops the tail, growing appends a hole.
    pub fn truncate(&mut self, len: u64) -> Result<()> {
        self.check_end(len, 0)?;
        let size = self.size();
        if len < size {
            self.collapse(len, size - len)
        } else {
            self.guard(|f| {
                f.insert_hole(size, len - size)?;
                f.end_op()
            })
        }
    }

    /// Tags the extent starting at `off` (splitting an extent there if needed).
    pub fn set_tag(&mut self, off: u64, tag: u16) -> Result<()> {
        if off >= self.size() {
            return Err(Error::invalid(format!("tag at {off} past the end ({})", self.size())));
        }
        self.guard(|f| {
            f.run(Op::SetTag { off, tag })?;
            f.end_op()
        })
    }

    /// The tag of the extent starting at `off` (0 when `off` is inside an extent or untagged).
    pub fn get_tag(&self, off: u64) -> Result<u16> {
        self.tree.get_tag(off)
    }

    /// Reads `buf.len()` bytes at `off`; holes read as zeros. Reading past the end is an error.
    pub fn read(&mut self, off: u64, buf: &mut [u8]) -> Result<()> {
        let (size, poisoned) = (self.size(), self.poisoned);
        read_pieces(&self.tree, size, poisoned, off, buf, |addr, dst| self.data.read(addr, dst))
    }

    /// [`FlexFile::read`] through a shared reference, so readers can run concurrently (behind a reader-writer
    /// lock, with writers taking it exclusively). Same bytes and the same checksum verification; checksum tables
    /// not yet cached are read from the file for this call only.
    pub fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        read_pieces(&self.tree, self.size(), self.poisoned, off, buf, |addr, dst| {
            self.data.read_shared(addr, dst)
        })
    }

    /// [`FlexFile::read_at`] for a sequential reader: extents near ones read before through `ra` are copied from
    /// its windows instead of read one by one (see [`crate::readahead`]). Verified as strictly.
    pub fn read_at_ahead(&self, off: u64, buf: &mut [u8], ra: &mut ReadAhead) -> Result<()> {
        read_pieces(&self.tree, self.size(), self.poisoned, off, buf, |addr, dst| {
            ra.read(&self.data, addr, dst)
        })
    }

    /// Reads up to `max` bytes from the start of the extent containing `off` (§5.4). Returns the extent's logical
    /// offset (`<= off`) and the bytes read.
    pub fn read_extent(&mut self, off: u64, max: usize) -> Result<(u64, Vec<u8>)> {
        let (start, e) = self.tree.extent_at(off)?;
        let n = (e.len as usize).min(max);
        let mut buf = vec![0u8; n];
        self.read(start, &mut buf)?;
        Ok((start, buf))
    }

    /// A sequential reader starting at `off`.
    pub fn reader(&mut self, off: u64) -> Reader<'_> {
        Reader { file: self, pos: off }
    }

    /// Makes everything written so far durable.
    pub fn sync(&mut self) -> Result<()> {
        self.guard(|f| f.commit())
    }

    fn commit(&mut self) -> Result<()> {
        self.data.sync()?;
        if !self.log_buf.is_empty() {
            let commit = log::encode_commit(self.tf.version(), &self.log_buf);
            self.log_buf.extend_from_slice(&commit);
            self.log.write_all_at(&self.log_buf, self.log_len)?;
            self.log.sync_data()?;
            self.log_len += self.log_buf.len() as u64;
            self.stats.log_bytes_written += self.log_buf.len() as u64;
            self.log_buf.clear();
            self.stats.commits += 1;
        }
        self.data.release_pending();
        Ok(())
    }

    /// Writes the tree to the tree file (a new version) and resets the log.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.guard(|f| f.checkpoint_inner())
    }

    fn checkpoint_inner(&mut self) -> Result<()> {
        self.data.sync()?;
        self.tf.checkpoint(&mut self.tree)?;
        let v = self.tf.version();
        self.log.set_len(log::HEADER_LEN as u64)?;
        // The cut durable before the new header is written: else a power loss could keep the new header over the
        // old length, and the old entries after it would read as corruption rather than as a finished log
        // (`regression_a_crash_at_the_end_of_a_checkpoint_is_no_corruption`).
        self.log.sync_data()?;
        self.log.write_all_at(&log::encode_header(v), 0)?;
        self.log.sync_data()?;
        self.stats.log_bytes_written += log::HEADER_LEN as u64;
        self.log_len = log::HEADER_LEN as u64;
        self.log_buf.clear();
        self.data.release_pending();
        Ok(())
    }

    /// Checkpoints and closes.
    pub fn close(mut self) -> Result<()> {
        self.checkpoint()
    }

    /// The file system the FlexFile lives on.
    pub fn fs(&self) -> &Arc<dyn vfs::Fs> {
        &self.fs
    }

    /// Bytes per log entry (for tools).
    pub const LOG_ENTRY_LEN: usize = ENTRY_LEN;
}

/// Reads a FlexFile forward from a position.
#[derive(Debug)]
pub struct Reader<'a> {
    file: &'a mut FlexFile,
    pos: u64,
}

impl Reader<'_> {
    /// The next read's offset.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Reads up to `buf.len()` bytes; 0 at the end.
    pub fn read_next(&mut self, buf: &mut [u8]) -> Result<usize> {
        let n = (buf.len() as u64).min(self.file.size().saturating_sub(self.pos)) as usize;
        self.file.read(self.pos, &mut buf[..n])?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl std::io::Read for Reader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.read_next(buf).map_err(|e| match e {
            Error::Io(e) => e,
            e => std::io::Error::other(e.to_string()),
        })
    }
}

/// Takes `dir`'s lock. Another holder is an invalid argument naming the directory, as the LSM engine and the
/// block store report it (it was an I/O error naming the `LOCK` file).
fn lock_dir(fs: &dyn vfs::Fs, dir: &Path) -> Result<Box<dyn vfs::FileLock>> {
    fs.lock(&dir.join(LOCK_FILE)).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock => Error::invalid(format!("FlexFile {} is in use", dir.display())),
        _ => e.into(),
    })
}
