//! Versions: which tables make up each level at a point in time, and the MANIFEST that records how they change.
//!
//! A [`Version`] is immutable and shared through `Arc`: every iterator, snapshot read and compaction pins the
//! version it started from, so the tables it needs cannot be deleted under it. Tables are `Arc<FileMeta>`; when an
//! edit removes a table from the current version its `FileMeta` is marked removed, and when the last version
//! holding it goes away `Drop` queues its number for deletion ([`Obsolete`]). A trivial move re-adds the same
//! `FileMeta` at another level, so it is never marked.
//!
//! [`VersionSet`] owns the MANIFEST: edits are appended and synced before the new version is installed, and a new
//! MANIFEST (a snapshot of the current version) is started at open and when the old one grows large; CURRENT is
//! switched to it with the write-temp, sync, rename, sync-dir sequence.

use std::cmp::Ordering;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering as AtOrd};
use std::sync::{Arc, Mutex, OnceLock};

use crate::edit::{COMPARATOR, FileInfo, VersionEdit};
use crate::error::{Error, Result};
use crate::filename;
use crate::ikey;
use crate::table::Table;
use crate::wal::{LogReader, LogWriter};

/// Number of levels (RocksDB's default).
pub const NUM_LEVELS: usize = 7;

/// Numbers of files no version references any more, waiting to be deleted.
pub type Obsolete = Arc<Mutex<Vec<u64>>>;

/// A table in a version.
#[derive(Debug)]
pub struct FileMeta {
    /// What the MANIFEST records.
    pub info: FileInfo,
    removed: AtomicBool,
    /// Set while a compaction has the file as input, so two compactions never pick the same file.
    pub being_compacted: AtomicBool,
    obsolete: Obsolete,
    /// The open table, once the table cache has opened it (see [`TableCache::table`](crate::table_cache::TableCache::table)): readers reach it with one
    /// atomic increment instead of the cache's lock and hash lookup. Weak, so the cache's bound on open tables
    /// still decides what stays open.
    pub(crate) reader: OnceLock<std::sync::Weak<Table>>,
}

impl FileMeta {
    /// A file outside any version set (unit tests of code that reads only `info`).
    #[cfg(test)]
    pub(crate) fn new_for_test(info: FileInfo) -> FileMeta {
        FileMeta {
            info,
            removed: AtomicBool::new(false),
            being_compacted: AtomicBool::new(false),
            obsolete: Obsolete::default(),
            reader: OnceLock::new(),
        }
    }

    /// The file number.
    pub fn number(&self) -> u64 {
        self.info.number
    }
    /// Smallest user key.
    pub fn smallest_user(&self) -> &[u8] {
        ikey::user_key(&self.info.smallest)
    }
    /// Largest user key (inclusive bound, conservative for tombstone ends).
    pub fn largest_user(&self) -> &[u8] {
        ikey::user_key(&self.info.largest)
    }
    /// Whether the file's user-key range intersects `[lo, hi]` (`None` = unbounded).
    pub fn overlaps(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
        !(lo.is_some_and(|l| self.largest_user() < l) || hi.is_some_and(|h| self.smallest_user() > h))
    }
}

impl Drop for FileMeta {
    fn drop(&mut self) {
        if self.removed.load(AtOrd::Acquire) {
            self.obsolete.lock().unwrap_or_else(|p| p.into_inner()).push(self.info.number);
        }
    }
}

/// The tables of every level.
#[derive(Debug, Default)]
pub struct Version {
    /// `levels[0]` newest first (may overlap); other levels sorted by key, non-overlapping.
    pub levels: Vec<Vec<Arc<FileMeta>>>,
    /// [`Version::seq_bounds`], computed on first use (a version is not changed once shared).
    seq_bounds: OnceLock<Option<(u64, u64)>>,
}

impl Version {
    /// A version holding `levels`.
    pub fn new(levels: Vec<Vec<Arc<FileMeta>>>) -> Self {
        Version { levels, seq_bounds: OnceLock::new() }
    }

    fn empty() -> Self {
        Version::new(vec![Vec::new(); NUM_LEVELS])
    }

    /// The smallest and largest sequence number of any table (`None` without tables): every version of a key
    /// that a table search can find lies in this band.
    ///
    /// REQUIRES: `levels` is not changed after the first call.
    pub fn seq_bounds(&self) -> Option<(u64, u64)> {
        *self.seq_bounds.get_or_init(|| {
            let files = self.levels.iter().flatten();
            files.fold(None, |b, f| {
                let (lo, hi) = (f.info.smallest_seq, f.info.largest_seq);
                Some(b.map_or((lo, hi), |(a, z): (u64, u64)| (a.min(lo), z.max(hi))))
            })
        })
    }

    /// Bytes in `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|f| f.info.size).sum()
    }

    /// The files of `level` whose user-key range intersects `[lo, hi]`. For level 0 the range is widened until
    /// closed under overlap (LevelDB's rule), so a newer L0 file is never left above an older one it overlaps.
    pub fn overlapping(&self, level: usize, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Vec<Arc<FileMeta>> {
        let mut lo = lo.map(<[u8]>::to_vec);
        let mut hi = hi.map(<[u8]>::to_vec);
        'restart: loop {
            let mut out = Vec::new();
            for f in &self.levels[level] {
                if f.overlaps(lo.as_deref(), hi.as_deref()) {
                    if level == 0 {
                        if lo.as_ref().is_some_and(|l| f.smallest_user() < l.as_slice()) {
                            lo = Some(f.smallest_user().to_vec());
                            continue 'restart;
                        }
                        if hi.as_ref().is_some_and(|h| f.largest_user() > h.as_slice()) {
                            hi = Some(f.largest_user().to_vec());
                            continue 'restart;
                        }
                    }
                    out.push(f.clone());
                }
            }
            return out;
        }
    }

    /// For level > 0: index of the first file whose largest key >= `target` (an internal key).
    pub fn find_file(&self, level: usize, target: &[u8]) -> usize {
        self.levels[level].partition_point(|f| ikey::cmp(&f.info.largest, target) == Ordering::Less)
    }

    /// Checks level ordering: L0 by sequence, L1+ sorted and non-overlapping (internal-key bounds).
    pub fn check(&self) -> std::result::Result<(), String> {
        for (l, files) in self.levels.iter().enumerate() {
            for f in files {
                if ikey::cmp(&f.info.smallest, &f.info.largest) == Ordering::Greater {
                    return Err(format!("L{l} file {} has smallest > largest", f.number()));
                }
            }
            if l > 0 {
                for w in files.windows(2) {
                    if ikey::cmp(&w[0].info.largest, &w[1].info.smallest) != Ordering::Less {
                        return Err(format!("L{l} files {} and {} overlap", w[0].number(), w[1].number()));
                    }
                }
            }
        }
        Ok(())
    }

    /// Every live file number.
    pub fn live_files(&self) -> Vec<u64> {
        self.levels.iter().flatten().map(|f| f.number()).collect()
    }
}

/// The MANIFEST and the chain of versions.
#[derive(Debug)]
pub struct VersionSet {
    fs: Arc<dyn vfs::Fs>,
    dir: PathBuf,
    current: Arc<Version>,
    /// The next unused file number.
    pub next_file: u64,
    /// WALs below this number are flushed.
    pub log_number: u64,
    /// The last sequence number made durable in the MANIFEST (the DB keeps the live one).
    pub last_seq: u64,
    /// Round-robin compaction start per level.
    pub compact_pointers: Vec<Vec<u8>>,
    /// The range-delete strategy's index state last recorded (GLORAN's files and GC watermark).
    pub range_index: Option<crate::edit::RangeIndexState>,
    manifest: Option<LogWriter>,
    manifest_number: u64,
    /// Start a new MANIFEST when the current one passes this size.
    pub max_manifest_size: u64,
    obsolete: Obsolete,
    /// Tables added by edits whose MANIFEST write or sync failed: not installed, but possibly named by the old
    /// MANIFEST, so they stay until a new MANIFEST made the in-memory state durable ([`VersionSet::roll_manifest`]).
    unapplied: Vec<u64>,
}

impl VersionSet {
    /// An empty version set for a new database (nothing written yet).
    pub fn new(fs: Arc<dyn vfs::Fs>, dir: PathBuf, obsolete: Obsolete) -> Self {
        VersionSet {
            fs,
            dir,
            current: Arc::new(Version::empty()),
            next_file: 2,
            log_number: 0,
            last_seq: 0,
            compact_pointers: vec![Vec::new(); NUM_LEVELS],
            range_index: None,
            manifest: None,
            manifest_number: 0,
            max_manifest_size: 64 << 20,
            obsolete,
            unapplied: Vec::new(),
        }
    }

    /// The current version.
    pub fn current(&self) -> Arc<Version> {
        self.current.clone()
    }

    /// The live MANIFEST's number.
    pub fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Allocates a file number.
    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file;
        self.next_file += 1;
        n
    }

    /// Rebuilds the state from CURRENT and the MANIFEST it names.
    pub fn recover(&mut self) -> Result<()> {
        let cur = vfs::read_all(&*self.fs, &self.dir.join("CURRENT"))?;
        let name = std::str::from_utf8(&cur)
            .ok()
            .and_then(|s| s.strip_suffix('\n'))
            .filter(|s| matches!(filename::parse(s), Some(filename::FileKind::Manifest(_))))
            .ok_or_else(|| Error::corruption("CURRENT", "does not name a MANIFEST"))?
            .to_string();
        let Some(filename::FileKind::Manifest(mnum)) = filename::parse(&name) else {
            return Err(Error::corruption("CURRENT", "does not name a MANIFEST"));
        };
        let data = match vfs::read_all(&*self.fs, &self.dir.join(&name)) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::corruption(name, "MANIFEST named by CURRENT is missing"));
            }
            Err(e) => return Err(e.into()),
        };
        let mut r = LogReader::from_bytes(data, &name);
        let mut version = Version::empty();
        let (mut log_number, mut next_file, mut last_seq) = (None, None, None);
        let mut first = true;
        while let Some(rec) = r.next_record() {
            let e = VersionEdit::decode(rec).map_err(|m| Error::corruption(name.clone(), m))?;
            if first && e.comparator.as_deref() != Some(COMPARATOR) {
                return Err(Error::corruption(name, "MANIFEST does not start with the bytewise comparator"));
            }
            first = false;
            log_number = e.log_number.or(log_number);
            next_file = e.next_file.or(next_file);
            last_seq = e.last_seq.or(last_seq);
            if let Some(r) = &e.range_index {
                self.range_index = Some(r.clone());
            }
            for (l, k) in &e.compact_pointers {
                if let Some(p) = self.compact_pointers.get_mut(*l as usize) {
                    *p = k.clone();
                }
            }
            version = self.apply(&version, &e, false).map_err(|m| Error::corruption(name.clone(), m))?;
        }
        // A damaged final record is a torn append that was never acknowledged (edits are synced before they take
        // effect). The check that WAL `log_number` still exists, done by the caller, catches a lost edit whose
        // effects were relied on. Damage that a later sync mark shows had been synced is corruption: the edits
        // after it took effect, and dropping them would resurrect deleted files' data or lose new ones.
        r.check_durable()?;
        if first {
            return Err(Error::corruption(name, "MANIFEST holds no complete edit"));
        }
        let (Some(log_number), Some(next_file), Some(last_seq)) = (log_number, next_file, last_seq) else {
            return Err(Error::corruption(name, "MANIFEST lacks log number, next file or last sequence"));
        };
        version.check().map_err(|m| Error::corruption(name.clone(), m))?;
        if version.live_files().iter().any(|&n| n >= next_file) {
            return Err(Error::corruption(name, "a table number is not below the next file number"));
        }
        self.current = Arc::new(version);
        self.log_number = log_number;
        self.next_file = next_file.max(mnum + 1);
        self.last_seq = last_seq;
        self.manifest_number = mnum;
        Ok(())
    }

    /// Builds the version that results from applying `e` to `base`. With `mark`, removed files are marked so
    /// they are deleted once unreferenced.
    fn apply(&self, base: &Version, e: &VersionEdit, mark: bool) -> std::result::Result<Version, String> {
        let mut v = Version::empty();
        let added: std::collections::HashSet<u64> = e.added.iter().map(|(_, f)| f.number).collect();
        let mut moved: std::collections::HashMap<u64, Arc<FileMeta>> = std::collections::HashMap::new();
        for (l, files) in base.levels.iter().enumerate() {
            for f in files {
                if e.deleted.contains(&(l as u32, f.number())) {
                    if added.contains(&f.number()) {
                        moved.insert(f.number(), f.clone());
                    } else if mark {
                        f.removed.store(true, AtOrd::Release);
                    }
                } else {
                    v.levels[l].push(f.clone());
                }
            }
        }
        for (l, info) in &e.added {
            let l = *l as usize;
            if l >= NUM_LEVELS {
                return Err(format!("file {} added at level {l}", info.number));
            }
            if v.levels.iter().flatten().any(|f| f.number() == info.number) {
                return Err(format!("file {} added twice", info.number));
            }
            let f = moved.remove(&info.number).unwrap_or_else(|| {
                Arc::new(FileMeta {
                    info: info.clone(),
                    removed: AtomicBool::new(false),
                    being_compacted: AtomicBool::new(false),
                    obsolete: self.obsolete.clone(),
                    reader: OnceLock::new(),
                })
            });
            v.levels[l].push(f);
        }
        v.levels[0]
            .sort_by(|a, b| b.info.largest_seq.cmp(&a.info.largest_seq).then(b.number().cmp(&a.number())));
        for files in v.levels.iter_mut().skip(1) {
            files.sort_by(|a, b| ikey::cmp(&a.info.smallest, &b.info.smallest));
        }
        Ok(v)
    }

    /// Records `e` in the MANIFEST (synced) and installs the resulting version.
    /// REQUIRES: the caller serializes edits (one background worker at a time).
    pub fn log_and_apply(&mut self, mut e: VersionEdit) -> Result<()> {
        if let Some(n) = e.log_number {
            debug_assert!(n >= self.log_number);
        }
        e.next_file = Some(self.next_file);
        e.last_seq = Some(e.last_seq.unwrap_or(self.last_seq).max(self.last_seq));
        let v = self.apply(&self.current, &e, false).map_err(|m| Error::corruption("version edit", m))?;
        #[cfg(feature = "invariants")]
        if let Err(m) = v.check() {
            return Err(Error::corruption("version edit", m));
        }
        // After a failed write or sync the old MANIFEST's tail is unknown: the edit goes to a new one.
        let need_new = self.manifest.as_ref().is_none_or(|m| m.failed() || m.len() >= self.max_manifest_size);
        let written = if need_new {
            self.write_new_manifest(&v, &e)
        } else if let Some(m) = &mut self.manifest {
            m.add_record(&e.encode()).and_then(|()| m.sync())
        } else {
            Ok(())
        };
        if let Err(err) = written {
            let live = self.current.live_files();
            self.unapplied.extend(e.added.iter().map(|(_, f)| f.number).filter(|n| !live.contains(n)));
            return Err(err);
        }
        // Only now, with the edit durable, do removed files become deletable.
        let v = self.apply(&self.current, &e, true).map_err(|m| Error::corruption("version edit", m))?;
        if let Some(n) = e.log_number {
            self.log_number = n;
        }
        self.last_seq = e.last_seq.unwrap_or(self.last_seq);
        if let Some(r) = e.range_index {
            self.range_index = Some(r);
        }
        for (l, k) in e.compact_pointers {
            self.compact_pointers[l as usize] = k;
        }
        self.current = Arc::new(v);
        Ok(())
    }

    /// Makes the next edit start a new MANIFEST (a snapshot of the current version), so that edits whose write or
    /// sync failed, which the old MANIFEST may or may not hold, stop mattering once that edit is durable.
    pub fn roll_manifest(&mut self) {
        self.manifest = None;
    }

    /// The tables of failed edits (see `unapplied`), once a new MANIFEST is durable: no version names them, and
    /// no durable MANIFEST CURRENT can lead to does either.
    /// REQUIRES: since [`VersionSet::roll_manifest`], an edit succeeded.
    pub fn take_unapplied(&mut self) -> Vec<u64> {
        let live = self.current.live_files();
        let mut gone = std::mem::take(&mut self.unapplied);
        gone.retain(|n| !live.contains(n));
        gone
    }

    /// Writes a MANIFEST holding a snapshot of `v` (plus `e`'s scalar fields) and switches CURRENT to it.
    fn write_new_manifest(&mut self, v: &Version, e: &VersionEdit) -> Result<()> {
        let num = self.new_file_number();
        let name = filename::manifest_name(num);
        let path = self.dir.join(&name);
        let file = self.fs.open(&path, vfs::OpenMode::CreateTruncate)?;
        let mut w = LogWriter::new(file, 0);
        let mut snap = VersionEdit {
            comparator: Some(COMPARATOR.to_string()),
            log_number: Some(e.log_number.unwrap_or(self.log_number)),
            next_file: Some(self.next_file),
            last_seq: e.last_seq,
            range_index: e.range_index.clone().or_else(|| self.range_index.clone()),
            ..VersionEdit::default()
        };
        for (l, k) in self.compact_pointers.iter().enumerate() {
            if !k.is_empty() {
                snap.compact_pointers.push((l as u32, k.clone()));
            }
        }
        for (l, k) in &e.compact_pointers {
            snap.compact_pointers.push((*l, k.clone()));
        }
        for (l, files) in v.levels.iter().enumerate() {
            for f in files {
                snap.added.push((l as u32, f.info.clone()));
            }
        }
        let r = (|| -> Result<()> {
            w.add_record(&snap.encode())?;
            w.sync()?;
            // The new MANIFEST's directory entry must be durable before CURRENT can name it: the rename of
            // CURRENT does not depend on the MANIFEST's creation, so a crash could keep one without the other.
            self.fs.sync_dir(&self.dir)?;
            vfs::write_atomic(&*self.fs, &self.dir.join("CURRENT"), format!("{name}\n").as_bytes())?;
            Ok(())
        })();
        if let Err(err) = r {
            // CURRENT may or may not name the new MANIFEST; keep the old writer unusable so the next edit starts
            // yet another MANIFEST rather than appending to one CURRENT may not name.
            // The file is left for the startup cleanup: removing it here could remove the file CURRENT names.
            self.manifest = None;
            return Err(err);
        }
        let old = self.manifest_number;
        self.manifest = Some(w);
        self.manifest_number = num;
        if old != 0 && old != num {
            let _ = self.fs.remove_file(&self.dir.join(filename::manifest_name(old)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfs::{Fault, FaultFs, FaultKind, MemFs};

    /// After a failed MANIFEST write the file's tail is unknown (part of the edit may be there, and a shorter edit
    /// written over it would leave the rest): the next edit goes to a new MANIFEST, and a reopen reads every edit
    /// that succeeded.
    #[test]
    fn an_edit_after_a_failed_manifest_write_goes_to_a_new_manifest() {
        let mem: Arc<dyn vfs::Fs> = Arc::new(MemFs::new());
        let ffs = Arc::new(FaultFs::new(mem.clone()));
        let dir = PathBuf::from("/db");
        mem.create_dir_all(&dir).unwrap();
        let mut vs = VersionSet::new(ffs.clone(), dir.clone(), Obsolete::default());
        let edit = |seq| VersionEdit { log_number: Some(1), last_seq: Some(seq), ..VersionEdit::default() };
        vs.log_and_apply(edit(10)).unwrap();
        let first = vs.manifest_number();
        ffs.inject(Fault::after(vfs::Op::Write, 0, FaultKind::Eio).partial());
        assert!(vs.log_and_apply(edit(20)).is_err());
        ffs.clear_all();
        vs.log_and_apply(edit(30)).unwrap();
        assert_ne!(vs.manifest_number(), first);
        let mut again = VersionSet::new(mem, dir, Obsolete::default());
        again.recover().unwrap();
        assert_eq!(again.last_seq, 30);
    }
}
