//! `FaultFs`: wraps any file system and makes chosen operations fail with EIO or ENOSPC.
//!
//! Each operation kind ([`Op`]) has at most one armed [`Fault`]. A fault fires either after a number of
//! operations of its kind succeeded ([`Trigger::After`]) or with a probability drawn from a seeded generator
//! ([`Trigger::Probability`]); it fires once and disarms, or stays armed (every later operation after the count,
//! or each operation with the probability, fails). A failing operation does not reach the wrapped file system, so
//! it has no effect: a failed write wrote nothing, a failed sync made nothing durable; except that a write fault
//! made with [`Fault::partial`] first writes the front half of the buffer, as a short write followed by the error
//! does on a real file system. Engines must not rely on either (a real failed write may have written part, a real failed `fsync` may have dropped the dirty pages; see
//! `docs/vfs.md`), which is why the error is all they see.
//!
//! A fault can be limited to paths containing a string ([`Fault::on_paths`]), so a test can fail the manifest's
//! sync but not the log's; a file operation matches by the path the file was opened with, a rename by either path.
//!
//! Faults can be armed and cleared while the wrapped engine runs; files opened through a `FaultFs` check the
//! current rules on every call. Counters of calls and injected faults per kind are public.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::rng::SplitMix64;
use crate::{File, FileLock, Fs, OpenMode, Result};

/// The kinds of operation a fault can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// [`Fs::open`], every mode.
    Open,
    /// [`File::read_at`] (and so `read_exact_at`).
    Read,
    /// [`File::write_all_at`].
    Write,
    /// [`File::sync_data`].
    Sync,
    /// [`Fs::sync_dir`].
    SyncDir,
    /// [`Fs::rename`].
    Rename,
    /// [`Fs::remove_file`].
    Remove,
    /// [`Fs::list_dir`].
    List,
    /// [`File::set_len`].
    SetLen,
    /// [`Fs::create_dir_all`].
    CreateDir,
    /// [`Fs::lock`].
    Lock,
    /// [`File::insert_range`] and [`File::collapse_range`].
    FallocateRange,
    /// Metadata lookups: [`File::len`] and [`Fs::exists`].
    Stat,
}

impl Op {
    /// Every kind, in declaration order.
    pub const ALL: [Op; 13] = [
        Op::Open,
        Op::Read,
        Op::Write,
        Op::Sync,
        Op::SyncDir,
        Op::Rename,
        Op::Remove,
        Op::List,
        Op::SetLen,
        Op::CreateDir,
        Op::Lock,
        Op::FallocateRange,
        Op::Stat,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// The error a fault produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// `EIO`: the device failed the operation ([`crate::is_eio`]).
    Eio,
    /// `ENOSPC`: no space left ([`crate::is_no_space`]).
    NoSpace,
}

impl FaultKind {
    /// A fresh error of this kind, as the OS reports it.
    pub fn error(self) -> io::Error {
        io::Error::from_raw_os_error(match self {
            FaultKind::Eio => libc::EIO,
            FaultKind::NoSpace => libc::ENOSPC,
        })
    }
}

/// When an armed fault fires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trigger {
    /// After this many operations of the kind (counted from arming) succeeded.
    After(u64),
    /// Each operation with probability `p` (0.0..=1.0), drawn from a generator seeded with `seed`.
    Probability {
        /// The chance that one operation fails.
        p: f64,
        /// Seeds the generator, so a run is reproducible.
        seed: u64,
    },
}

/// A fault to arm on one operation kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// The operation kind that fails.
    pub op: Op,
    /// The error it fails with.
    pub kind: FaultKind,
    /// When it fails.
    pub trigger: Trigger,
    /// Disarm after firing once (`true`), or keep failing (`false`).
    pub once: bool,
    /// Only operations on a path containing this string are counted and failed; `None` matches all.
    pub path_contains: Option<String>,
    /// A failing [`Op::Write`] first writes the front half of its buffer (a short write, then the error).
    pub partial: bool,
}

impl Fault {
    /// Fails the operation after `n` successful ones of its kind, once.
    pub fn after(op: Op, n: u64, kind: FaultKind) -> Self {
        Fault { op, kind, trigger: Trigger::After(n), once: true, path_contains: None, partial: false }
    }

    /// Fails each operation of the kind with probability `p`, seeded; stays armed.
    pub fn random(op: Op, p: f64, seed: u64, kind: FaultKind) -> Self {
        Fault {
            op,
            kind,
            trigger: Trigger::Probability { p, seed },
            once: false,
            path_contains: None,
            partial: false,
        }
    }

    /// The same fault, staying armed after it fires.
    pub fn persistent(mut self) -> Self {
        self.once = false;
        self
    }

    /// The same fault, limited to operations on paths containing `part` (e.g. `"MANIFEST"`, `".log"`).
    pub fn on_paths(mut self, part: &str) -> Self {
        self.path_contains = Some(part.to_string());
        self
    }

    /// The same fault, writing the front half of the buffer before failing (meaningful for [`Op::Write`]).
    pub fn partial(mut self) -> Self {
        self.partial = true;
        self
    }

    /// The same fault, disarmed after it fires once.
    pub fn once(mut self) -> Self {
        self.once = true;
        self
    }
}

#[derive(Debug)]
struct Armed {
    fault: Fault,
    passed: u64,
    rng: SplitMix64,
}

impl Armed {
    fn matches(&self, paths: &[&Path]) -> bool {
        match &self.fault.path_contains {
            None => true,
            Some(part) => paths.iter().any(|p| p.to_string_lossy().contains(part.as_str())),
        }
    }

    fn fires(&mut self) -> bool {
        match self.fault.trigger {
            Trigger::After(n) => {
                if self.passed >= n {
                    return true;
                }
                self.passed += 1;
                false
            }
            Trigger::Probability { p, .. } => self.rng.unit() < p,
        }
    }
}

const KINDS: usize = Op::ALL.len();

#[derive(Debug, Default)]
struct Shared {
    rules: Mutex<[Option<Armed>; KINDS]>,
    calls: [AtomicU64; KINDS],
    injected: [AtomicU64; KINDS],
}

impl Shared {
    /// Counts one call of kind `op` on `paths` and fails it if an armed fault fires.
    fn check(&self, op: Op, paths: &[&Path]) -> Result<()> {
        self.check_partial(op, paths).map_err(|(e, _)| e)
    }

    /// Like `check`; a failure also says whether the fault asks for a partial effect.
    fn check_partial(&self, op: Op, paths: &[&Path]) -> std::result::Result<(), (io::Error, bool)> {
        let i = op.index();
        self.calls[i].fetch_add(1, Ordering::Relaxed);
        let mut rules =
            self.rules.lock().map_err(|_| (io::Error::other("fault rules lock poisoned"), false))?;
        let Some(armed) = rules[i].as_mut() else { return Ok(()) };
        if !armed.matches(paths) || !armed.fires() {
            return Ok(());
        }
        let (err, partial) = (armed.fault.kind.error(), armed.fault.partial);
        if armed.fault.once {
            rules[i] = None;
        }
        self.injected[i].fetch_add(1, Ordering::Relaxed);
        Err((err, partial))
    }
}

/// A file system that injects I/O errors into another. Cloning gives another handle with the same rules.
#[derive(Clone)]
pub struct FaultFs {
    inner: Arc<dyn Fs>,
    shared: Arc<Shared>,
}

impl fmt::Debug for FaultFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultFs").field("inner", &self.inner).field("injected", &self.injected()).finish()
    }
}

impl FaultFs {
    /// Wraps `inner` with no fault armed.
    pub fn new(inner: Arc<dyn Fs>) -> Self {
        FaultFs { inner, shared: Arc::default() }
    }

    /// The wrapped file system.
    pub fn inner(&self) -> &Arc<dyn Fs> {
        &self.inner
    }

    /// Arms `fault`, replacing any fault armed on the same operation kind. Its count starts now.
    /// A probability outside `0.0..=1.0` is clamped.
    pub fn inject(&self, mut fault: Fault) {
        let seed = match &mut fault.trigger {
            Trigger::Probability { p, seed } => {
                *p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
                *seed
            }
            Trigger::After(_) => 0,
        };
        let i = fault.op.index();
        let armed = Armed { fault, passed: 0, rng: SplitMix64::new(seed) };
        if let Ok(mut rules) = self.shared.rules.lock() {
            rules[i] = Some(armed);
        }
    }

    /// Disarms the fault on `op`, if any.
    pub fn clear(&self, op: Op) {
        if let Ok(mut rules) = self.shared.rules.lock() {
            rules[op.index()] = None;
        }
    }

    /// Disarms every fault.
    pub fn clear_all(&self) {
        if let Ok(mut rules) = self.shared.rules.lock() {
            *rules = Default::default();
        }
    }

    /// Whether a fault is armed on `op`.
    pub fn is_armed(&self, op: Op) -> bool {
        self.shared.rules.lock().is_ok_and(|rules| rules[op.index()].is_some())
    }

    /// Faults injected so far, over all kinds.
    pub fn injected(&self) -> u64 {
        self.shared.injected.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Faults injected so far on `op`.
    pub fn injected_on(&self, op: Op) -> u64 {
        self.shared.injected[op.index()].load(Ordering::Relaxed)
    }

    /// Calls of kind `op` so far, failed or not.
    pub fn calls(&self, op: Op) -> u64 {
        self.shared.calls[op.index()].load(Ordering::Relaxed)
    }
}

impl Fs for FaultFs {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn File>> {
        self.shared.check(Op::Open, &[path])?;
        let inner = self.inner.open(path, mode)?;
        Ok(Arc::new(FaultFile { inner, path: path.to_path_buf(), shared: self.shared.clone() }))
    }

    fn create_log(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn File>> {
        self.shared.check(Op::Open, &[path])?;
        let inner = self.inner.create_log(path, mode)?;
        Ok(Arc::new(FaultFile { inner, path: path.to_path_buf(), shared: self.shared.clone() }))
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        self.shared.check(Op::Remove, &[path])?;
        self.inner.remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.shared.check(Op::Rename, &[from, to])?;
        self.inner.rename(from, to)
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<String>> {
        self.shared.check(Op::List, &[dir])?;
        self.inner.list_dir(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.shared.check(Op::CreateDir, &[dir])?;
        self.inner.create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.shared.check(Op::SyncDir, &[dir])?;
        self.inner.sync_dir(dir)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        self.shared.check(Op::Stat, &[path])?;
        self.inner.exists(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.shared.check(Op::Lock, &[path])?;
        self.inner.lock(path)
    }
}

/// A file opened through a [`FaultFs`]: every call first consults the current rules.
struct FaultFile {
    inner: Arc<dyn File>,
    path: PathBuf,
    shared: Arc<Shared>,
}

impl fmt::Debug for FaultFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultFile").field("path", &self.path).field("inner", &self.inner).finish()
    }
}

impl File for FaultFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.shared.check(Op::Read, &[&self.path])?;
        self.inner.read_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        if let Err((e, partial)) = self.shared.check_partial(Op::Write, &[&self.path]) {
            if partial {
                self.inner.write_all_at(&buf[..buf.len() / 2], offset)?;
            }
            return Err(e);
        }
        self.inner.write_all_at(buf, offset)
    }

    fn sync_data(&self) -> Result<()> {
        self.shared.check(Op::Sync, &[&self.path])?;
        self.inner.sync_data()
    }

    fn len(&self) -> Result<u64> {
        self.shared.check(Op::Stat, &[&self.path])?;
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.shared.check(Op::SetLen, &[&self.path])?;
        self.inner.set_len(len)
    }

    fn insert_range(&self, offset: u64, len: u64) -> Result<()> {
        self.shared.check(Op::FallocateRange, &[&self.path])?;
        self.inner.insert_range(offset, len)
    }

    fn collapse_range(&self, offset: u64, len: u64) -> Result<()> {
        self.shared.check(Op::FallocateRange, &[&self.path])?;
        self.inner.collapse_range(offset, len)
    }
}
