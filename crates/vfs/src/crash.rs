//! `CrashFs`: an in-memory file system that remembers what is durable, so tests can simulate power loss.
//!
//! # Model
//!
//! Contents and names are tracked separately, as a POSIX file system keeps them.
//!
//! *Contents* belong to an inode, shared by every name and handle of the file. Each inode holds its current
//! bytes, its bytes as of the last `sync_data`, and the byte ranges changed since (writes, `set_len`, a
//! truncating open, `insert_range`/`collapse_range`). `sync_data` copies the dirty ranges and clears them.
//!
//! A sync that fails ([`CrashFs::fail_next_syncs`]) behaves as Linux does after a writeback error ("fsyncgate"):
//! the dirty ranges are marked clean without reaching the media. They move to a *lost* set, which no later sync
//! copies; a crash may show their sectors old or new. So an engine that retries a failed sync and trusts its `Ok`
//! loses acknowledged data in crash tests, as it would on real hardware. Invariant: outside the dirty and lost
//! ranges the current and the durable bytes agree, both in value and in whether the byte exists.
//!
//! *Names* are two trees of paths: the current one, and the durable one as of the directory syncs. Every
//! namespace change (create, mkdir, remove, rename) is applied to the current tree at once and appended to a log
//! of pending operations. `sync_dir(d)` commits every pending operation with an entry in `d`, together with the
//! earlier pending operations they depend on (those naming a common path), and applies them in log order to the
//! durable tree. A rename is one operation, so it is atomic: it is either committed or pending as a whole.
//! A directory created by `create_dir_all` is itself an entry of its parent; until that parent is synced a crash
//! may drop the directory and with it everything beneath.
//!
//! # Crash
//!
//! [`CrashFs::crash`] builds the state a power loss would leave, chosen deterministically by a seed:
//! - each pending namespace operation survives or not (a fair coin), except that an operation whose dependency
//!   was dropped is dropped too, so the result is always a state some ordering of the operations reaches;
//!   entries whose parent directory did not survive vanish;
//! - each surviving file's unsynced changes are all dropped, all kept, or torn: the length is the old or the new
//!   one and every dirty 512-byte sector is independently old or new (bytes with no old value read as zeros).
//!
//! The result is a fresh `CrashFs` in which everything is durable. The crashed file system is left untouched, so
//! one pre-crash state can be crashed under many seeds. [`CrashFs::crash_drop_unsynced`] and
//! [`CrashFs::crash_keep_unsynced`] give the two extremes (power loss losing every unsynced change, and a process
//! crash in which the kernel wrote everything back).
//!
//! # Crash points
//!
//! [`CrashFs::set_op_budget`] lets the next `n` mutating operations (writes, length changes, syncs, creating
//! opens, namespace changes) succeed; the one after and every later one fail without effect with an error for
//! which [`is_crash_point`] holds, as if the process had died there. [`CrashFs::ops`] counts mutating operations,
//! so a test runs a workload once to count them and then picks crash points in that range.

mod inode;
mod names;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::rng::SplitMix64;
use crate::{File, FileLock, Fs, OpenMode, Result, normalize};
use inode::Inode;
pub use inode::SECTOR_SIZE;
use names::{InodeRef, Namespace, Node, NsOp, dir_in, is_root, parent};

/// The error payload of an operation refused because the crash point was reached.
#[derive(Debug)]
pub struct CrashPoint;

impl fmt::Display for CrashPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("simulated crash: the process died at this operation")
    }
}

impl std::error::Error for CrashPoint {}

/// Whether `e` is the error a [`CrashFs`] returns once its crash point is reached.
pub fn is_crash_point(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<CrashPoint>())
}

/// Counters of a [`CrashFs`] since it was created (or since the crash that created it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CrashStats {
    /// Mutating operations that succeeded; the crash-point budget counts these.
    pub ops: u64,
    /// `write_all_at` calls that succeeded.
    pub writes: u64,
    /// Bytes written by those calls.
    pub bytes_written: u64,
    /// `sync_data` calls that succeeded.
    pub syncs: u64,
    /// `sync_dir` calls that succeeded.
    pub dir_syncs: u64,
    /// Operations refused because the crash point had been reached.
    pub refused: u64,
    /// `sync_data` calls failed by [`CrashFs::fail_next_syncs`].
    pub failed_syncs: u64,
}

/// Which unsynced state a crash keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Power loss that drops every unsynced change.
    DropUnsynced,
    /// A process crash: every change survives, durable or not.
    KeepUnsynced,
    /// Power loss whose survivors (and torn sectors) the seed chooses.
    Seeded(u64),
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{} not found", path.display()))
}

fn poisoned() -> io::Error {
    io::Error::other("crash file system lock poisoned")
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    m.lock().map_err(|_| poisoned())
}

/// Locks for the test-facing calls (`crash`, `snapshot`) that must not fail: a poisoned lock means a thread
/// panicked mid-operation, which the simulated power loss then simply follows.
fn lock_anyway<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn to_usize(v: u64) -> Result<usize> {
    usize::try_from(v).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))
}

#[derive(Debug, Default)]
struct Counters {
    ops: AtomicU64,
    writes: AtomicU64,
    bytes_written: AtomicU64,
    syncs: AtomicU64,
    dir_syncs: AtomicU64,
    refused: AtomicU64,
    failed_syncs: AtomicU64,
}

#[derive(Debug)]
struct Shared {
    ns: Mutex<Namespace>,
    locks: Mutex<HashSet<PathBuf>>,
    /// Mutating operations still allowed; `u64::MAX` means no crash point.
    budget: AtomicU64,
    dead: AtomicBool,
    /// `sync_data` calls still to fail with lost writeback.
    failing_syncs: AtomicU64,
    counters: Counters,
}

impl Shared {
    fn new(ns: Namespace) -> Self {
        Shared {
            ns: Mutex::new(ns),
            locks: Mutex::default(),
            budget: AtomicU64::new(u64::MAX),
            dead: AtomicBool::new(false),
            failing_syncs: AtomicU64::new(0),
            counters: Counters::default(),
        }
    }

    /// Admits one mutating operation or refuses it at the crash point. Once refused, always refused.
    fn admit(&self) -> Result<()> {
        let ok = !self.dead.load(Ordering::SeqCst)
            && self
                .budget
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| match b {
                    0 => None,
                    u64::MAX => Some(u64::MAX),
                    b => Some(b - 1),
                })
                .is_ok();
        if ok {
            self.counters.ops.fetch_add(1, Ordering::Relaxed);
            Ok(())
        } else {
            self.dead.store(true, Ordering::SeqCst);
            self.counters.refused.fetch_add(1, Ordering::Relaxed);
            Err(io::Error::other(CrashPoint))
        }
    }
}

/// A simulated file system that can lose power. Cloning gives another handle on the same state.
#[derive(Clone)]
pub struct CrashFs {
    shared: Arc<Shared>,
}

impl fmt::Debug for CrashFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrashFs").field("stats", &self.stats()).finish_non_exhaustive()
    }
}

impl Default for CrashFs {
    fn default() -> Self {
        Self::new()
    }
}

impl CrashFs {
    /// An empty file system. The roots `""` and `/` always exist and are durable.
    pub fn new() -> Self {
        CrashFs { shared: Arc::new(Shared::new(Namespace::default())) }
    }

    /// Arms a crash point: the next `n` mutating operations succeed and every one after them is refused (see
    /// [`is_crash_point`]). Revives a file system that reached an earlier crash point.
    pub fn set_op_budget(&self, n: u64) {
        self.shared.dead.store(false, Ordering::SeqCst);
        self.shared.budget.store(n, Ordering::SeqCst);
    }

    /// Removes the crash point and revives a file system that reached it.
    pub fn clear_op_budget(&self) {
        self.shared.budget.store(u64::MAX, Ordering::SeqCst);
        self.shared.dead.store(false, Ordering::SeqCst);
    }

    /// Whether the crash point has been reached.
    pub fn reached_crash_point(&self) -> bool {
        self.shared.dead.load(Ordering::SeqCst)
    }

    /// Makes the next `n` `sync_data` calls fail with `EIO` the way Linux fails them after a writeback error: the
    /// file's unsynced changes are marked clean without reaching the media, so a retried sync returns `Ok` and
    /// still does not make them durable (see the module comment). The failed calls count as mutating operations.
    pub fn fail_next_syncs(&self, n: u64) {
        self.shared.failing_syncs.store(n, Ordering::SeqCst);
    }

    /// Mutating operations performed so far: the range from which tests pick crash points.
    pub fn ops(&self) -> u64 {
        self.shared.counters.ops.load(Ordering::Relaxed)
    }

    /// The counters.
    pub fn stats(&self) -> CrashStats {
        let c = &self.shared.counters;
        CrashStats {
            ops: c.ops.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            bytes_written: c.bytes_written.load(Ordering::Relaxed),
            syncs: c.syncs.load(Ordering::Relaxed),
            dir_syncs: c.dir_syncs.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            failed_syncs: c.failed_syncs.load(Ordering::Relaxed),
        }
    }

    /// The state a power loss would leave, chosen by `seed` (see the module comment).
    pub fn crash(&self, seed: u64) -> CrashFs {
        self.crash_with(CrashMode::Seeded(seed))
    }

    /// The state a power loss dropping every unsynced change would leave.
    pub fn crash_drop_unsynced(&self) -> CrashFs {
        self.crash_with(CrashMode::DropUnsynced)
    }

    /// The state a process crash leaves: everything written survives.
    pub fn crash_keep_unsynced(&self) -> CrashFs {
        self.crash_with(CrashMode::KeepUnsynced)
    }

    /// The state after a crash of the given kind, as a new file system in which everything is durable. This
    /// file system is not changed; handles opened on it keep working on it, not on the result.
    pub fn crash_with(&self, mode: CrashMode) -> CrashFs {
        let ns = lock_anyway(&self.shared.ns);
        let mut rng = SplitMix64::new(match mode {
            CrashMode::Seeded(seed) => seed,
            _ => 0,
        });
        let tree = ns.after_crash(mode, &mut rng);
        // Survivors get fresh inodes (one per old inode) holding their post-crash bytes, in path order so the
        // seed's choices are reproducible.
        let mut survived = BTreeMap::new();
        let mut fresh: HashMap<*const Mutex<Inode>, InodeRef> = HashMap::new();
        for (path, node) in tree {
            let node = match node {
                Node::Dir => Node::Dir,
                Node::File(inode) => {
                    let new = match fresh.get(&Arc::as_ptr(&inode)) {
                        Some(new) => new.clone(),
                        None => {
                            let bytes = lock_anyway(&inode).after_crash(mode, &mut rng);
                            let new = Arc::new(Mutex::new(Inode::durable_only(bytes)));
                            fresh.insert(Arc::as_ptr(&inode), new.clone());
                            new
                        }
                    };
                    Node::File(new)
                }
            };
            survived.insert(path, node);
        }
        let ns = Namespace::durable(survived);
        CrashFs { shared: Arc::new(Shared::new(ns)) }
    }

    /// The current bytes of every file, by path: for tests comparing a file system with a model.
    pub fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let ns = lock_anyway(&self.shared.ns);
        let mut out = BTreeMap::new();
        for (path, node) in &ns.cur {
            if let Node::File(inode) = node {
                out.insert(path.clone(), lock_anyway(inode).cur.clone());
            }
        }
        out
    }

    /// Namespace operations not yet made durable by a directory sync.
    pub fn pending_dir_ops(&self) -> usize {
        lock_anyway(&self.shared.ns).pending.len()
    }

    /// The inode `open` gives `path` under `mode`, creating or truncating as the mode says.
    fn open_inode(&self, path: &Path, mode: OpenMode) -> Result<InodeRef> {
        let path = normalize(path);
        if matches!(mode, OpenMode::CreateNew | OpenMode::CreateOrOpen | OpenMode::CreateTruncate) {
            self.shared.admit()?;
        }
        let mut ns = lock(&self.shared.ns)?;
        let node = if is_root(&path) { Some(&Node::Dir) } else { ns.cur.get(&path) };
        let inode = match (mode, node) {
            (_, Some(Node::Dir)) => {
                return Err(io::Error::new(
                    io::ErrorKind::IsADirectory,
                    format!("{} is a directory", path.display()),
                ));
            }
            (OpenMode::ReadOnly | OpenMode::ReadWrite, None) => return Err(not_found(&path)),
            (OpenMode::CreateNew, Some(_)) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists", path.display()),
                ));
            }
            (OpenMode::CreateTruncate, Some(Node::File(inode))) => {
                lock(inode)?.set_len(0);
                inode.clone()
            }
            (_, Some(Node::File(inode))) => inode.clone(),
            (_, None) => {
                if !dir_in(&ns.cur, parent(&path)) {
                    return Err(not_found(parent(&path)));
                }
                let inode = InodeRef::default();
                ns.push(NsOp::Create(path, inode.clone()));
                inode
            }
        };
        Ok(inode)
    }

    fn file(&self, inode: InodeRef, writable: bool) -> Arc<dyn File> {
        Arc::new(CrashFile { inode, writable, shared: self.shared.clone() })
    }
}

impl Fs for CrashFs {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn File>> {
        Ok(self.file(self.open_inode(path, mode)?, mode.writable()))
    }

    fn create_log(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn File>> {
        crate::check_log_mode(mode)?;
        let inode = self.open_inode(path, mode)?;
        lock(&inode)?.log = true;
        Ok(self.file(inode, true))
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let path = normalize(path);
        self.shared.admit()?;
        let mut ns = lock(&self.shared.ns)?;
        match ns.cur.get(&path) {
            Some(Node::File(_)) => {}
            Some(Node::Dir) => {
                return Err(io::Error::new(
                    io::ErrorKind::IsADirectory,
                    format!("{} is a directory", path.display()),
                ));
            }
            None => return Err(not_found(&path)),
        }
        ns.push(NsOp::Remove(path));
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (from, to) = (normalize(from), normalize(to));
        self.shared.admit()?;
        let mut ns = lock(&self.shared.ns)?;
        if !matches!(ns.cur.get(&from), Some(Node::File(_))) {
            return Err(not_found(&from));
        }
        if !dir_in(&ns.cur, parent(&to)) {
            return Err(not_found(parent(&to)));
        }
        if is_root(&to) || matches!(ns.cur.get(&to), Some(Node::Dir)) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{} is a directory", to.display()),
            ));
        }
        if from == to {
            return Ok(());
        }
        ns.push(NsOp::Rename(from, to));
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<String>> {
        let dir = normalize(dir);
        let ns = lock(&self.shared.ns)?;
        if !dir_in(&ns.cur, &dir) {
            return Err(not_found(&dir));
        }
        let mut names: Vec<String> = ns
            .cur
            .keys()
            .filter(|p| p.parent() == Some(dir.as_path()))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        names.sort();
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let dir = normalize(dir);
        self.shared.admit()?;
        let mut ns = lock(&self.shared.ns)?;
        let mut missing = Vec::new();
        for d in dir.ancestors().take_while(|d| !is_root(d)) {
            match ns.cur.get(d) {
                Some(Node::Dir) => break,
                Some(Node::File(_)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotADirectory,
                        format!("{} is a file", d.display()),
                    ));
                }
                None => missing.push(d.to_path_buf()),
            }
        }
        for d in missing.into_iter().rev() {
            ns.push(NsOp::Mkdir(d));
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let dir = normalize(dir);
        self.shared.admit()?;
        let mut ns = lock(&self.shared.ns)?;
        if !dir_in(&ns.cur, &dir) {
            return Err(not_found(&dir));
        }
        ns.commit(&dir);
        self.shared.counters.dir_syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        let path = normalize(path);
        let ns = lock(&self.shared.ns)?;
        Ok(is_root(&path) || ns.cur.contains_key(&path))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let path = normalize(path);
        self.open(&path, OpenMode::CreateOrOpen)?;
        let mut held = lock(&self.shared.locks)?;
        if !held.insert(path.clone()) {
            return Err(io::Error::new(io::ErrorKind::WouldBlock, format!("{} is locked", path.display())));
        }
        Ok(Box::new(CrashLock { path, shared: self.shared.clone() }))
    }
}

struct CrashLock {
    path: PathBuf,
    shared: Arc<Shared>,
}

impl fmt::Debug for CrashLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrashLock").field("path", &self.path).finish()
    }
}

impl FileLock for CrashLock {}

impl Drop for CrashLock {
    fn drop(&mut self) {
        if let Ok(mut held) = self.shared.locks.lock() {
            held.remove(&self.path);
        }
    }
}

/// A handle on a `CrashFs` file: it follows the inode, not the name, across renames and removal.
struct CrashFile {
    inode: InodeRef,
    writable: bool,
    shared: Arc<Shared>,
}

impl fmt::Debug for CrashFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrashFile").field("writable", &self.writable).finish_non_exhaustive()
    }
}

impl CrashFile {
    /// Checks the handle may write and admits one mutating operation.
    fn mutate(&self) -> Result<MutexGuard<'_, Inode>> {
        if !self.writable {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, "file opened read-only"));
        }
        self.shared.admit()?;
        lock(&self.inode)
    }
}

impl File for CrashFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let inode = lock(&self.inode)?;
        let off = to_usize(offset)?;
        if off >= inode.cur.len() {
            return Ok(0);
        }
        let n = buf.len().min(inode.cur.len() - off);
        buf[..n].copy_from_slice(&inode.cur[off..off + n]);
        Ok(n)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let off = to_usize(offset)?;
        let mut inode = self.mutate()?;
        if buf.is_empty() {
            return Ok(());
        }
        inode.write(buf, off)?;
        let c = &self.shared.counters;
        c.writes.fetch_add(1, Ordering::Relaxed);
        c.bytes_written.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn sync_data(&self) -> Result<()> {
        self.shared.admit()?;
        let fail =
            self.shared.failing_syncs.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if fail.is_ok() {
            lock(&self.inode)?.lose_writeback();
            self.shared.counters.failed_syncs.fetch_add(1, Ordering::Relaxed);
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        lock(&self.inode)?.sync();
        self.shared.counters.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        Ok(lock(&self.inode)?.cur.len() as u64)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        let len = to_usize(len)?;
        self.mutate()?.set_len(len);
        Ok(())
    }

    fn insert_range(&self, offset: u64, len: u64) -> Result<()> {
        let (off, len) = (to_usize(offset)?, to_usize(len)?);
        let mut inode = self.mutate()?;
        if off >= inode.cur.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "insert_range at or past the end"));
        }
        inode.shift(off, |data| {
            data.splice(off..off, std::iter::repeat_n(0u8, len));
        });
        Ok(())
    }

    fn collapse_range(&self, offset: u64, len: u64) -> Result<()> {
        let (off, len) = (to_usize(offset)?, to_usize(len)?);
        let mut inode = self.mutate()?;
        let end = off.checked_add(len).ok_or_else(|| io::Error::other("range end overflows"))?;
        if end >= inode.cur.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "collapse_range reaches the end of the file",
            ));
        }
        inode.shift(off, |data| {
            data.drain(off..end);
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regression_the_root_cannot_be_opened_as_a_file() {
        let fs = CrashFs::new();
        for root in ["", "/", "."] {
            let e = fs.open(Path::new(root), OpenMode::CreateOrOpen).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::IsADirectory, "{root:?}");
        }
        assert!(fs.snapshot().is_empty());
        fs.open(Path::new("f"), OpenMode::CreateNew).unwrap();
        assert_eq!(fs.rename(Path::new("f"), Path::new("")).unwrap_err().kind(), io::ErrorKind::IsADirectory);
    }

    /// A log's reservation: a crash after unsynced appends may leave zeros past the written bytes (as the OS file
    /// system's reserved space), never after a sync; other files never grow so.
    #[test]
    fn a_crashed_log_may_keep_zeros_past_its_unsynced_appends() {
        let fs = CrashFs::new();
        let log = fs.create_log(Path::new("log"), OpenMode::CreateNew).unwrap();
        let plain = fs.open(Path::new("plain"), OpenMode::CreateNew).unwrap();
        fs.sync_dir(Path::new("")).unwrap();
        for f in [&log, &plain] {
            f.write_all_at(b"synced", 0).unwrap();
            f.sync_data().unwrap();
        }
        for seed in 0..8 {
            assert_eq!(crate::read_all(&fs.crash(seed), Path::new("log")).unwrap(), b"synced");
        }
        for f in [&log, &plain] {
            f.write_all_at(b"+more", 6).unwrap();
        }
        let (mut padded, mut exact) = (0, 0);
        for seed in 0..64 {
            let c = fs.crash(seed);
            let got = crate::read_all(&c, Path::new("log")).unwrap();
            let written = got.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
            assert!(got[..written] == b"synced+more"[..written] && written >= 6, "{got:?}");
            if got.len() > 11 {
                assert!(got.len().is_multiple_of(64 << 10) && got[written..].iter().all(|&b| b == 0));
                padded += 1;
            } else {
                exact += 1;
            }
            assert!(crate::read_all(&c, Path::new("plain")).unwrap().len() <= 11);
        }
        assert!(padded > 0 && exact > 0, "{padded} padded, {exact} exact");
        assert_eq!(
            fs.create_log(Path::new("x"), OpenMode::ReadWrite).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn sync_dir_commits_dependencies_in_other_directories() {
        let fs = CrashFs::new();
        fs.create_dir_all(Path::new("a")).unwrap();
        fs.create_dir_all(Path::new("b")).unwrap();
        fs.sync_dir(Path::new("")).unwrap();
        fs.open(Path::new("a/x"), OpenMode::CreateNew).unwrap();
        fs.rename(Path::new("a/x"), Path::new("b/x")).unwrap();
        fs.remove_file(Path::new("b/x")).unwrap();
        // Syncing `b` commits the remove, hence the rename it depends on, hence the create.
        fs.sync_dir(Path::new("b")).unwrap();
        assert_eq!(fs.pending_dir_ops(), 0);
        for seed in 0..16 {
            let c = fs.crash(seed);
            assert!(!c.exists(Path::new("a/x")).unwrap() && !c.exists(Path::new("b/x")).unwrap());
        }
    }
}
