//! The LSM engine behind the kv shell: options from the command line's flags, snapshots by shell id.

use std::collections::HashMap;
use std::sync::Arc;

use crate::kv_args::ExecArgs;
use crate::kv_engine::{KvEngine, KvError, KvResult, Update};

struct LsmEngine {
    db: lsm::Db,
    snaps: HashMap<u64, lsm::Snapshot>,
    next_snap: u64,
}

impl LsmEngine {
    fn read_opts(&self, snap: Option<u64>) -> KvResult<lsm::ReadOptions<'_>> {
        let snapshot = match snap {
            Some(id) => Some(
                self.snaps
                    .get(&id)
                    .ok_or_else(|| KvError { kind: "invalid", msg: format!("no snapshot {id}") })?,
            ),
            None => None,
        };
        Ok(lsm::ReadOptions { snapshot, ..Default::default() })
    }
}

impl KvEngine for LsmEngine {
    fn write(&mut self, ups: Vec<Update>, sync: bool) -> KvResult<()> {
        let mut b = lsm::WriteBatch::new();
        for u in &ups {
            match u {
                Update::Put(k, v) => b.put(k, v),
                Update::Del(k) => b.delete(k),
                Update::DelRange(a, z) => b.delete_range(a, z),
            }
        }
        Ok(self.db.write(&lsm::WriteOptions { sync }, b)?)
    }
    fn get(&mut self, k: &[u8], snap: Option<u64>) -> KvResult<Option<Vec<u8>>> {
        let o = self.read_opts(snap)?;
        Ok(self.db.get_opt(&o, k)?)
    }
    fn scan(
        &mut self,
        a: &[u8],
        b: &[u8],
        limit: usize,
        rev: bool,
        snap: Option<u64>,
    ) -> KvResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let o = self.read_opts(snap)?;
        if a >= b {
            return Ok(Vec::new());
        }
        Ok(if rev { self.db.rscan(&o, a, b, limit)? } else { self.db.scan(&o, a, b, limit)? })
    }
    fn snapshot(&mut self) -> KvResult<u64> {
        self.next_snap += 1;
        self.snaps.insert(self.next_snap, self.db.snapshot());
        Ok(self.next_snap)
    }
    fn release(&mut self, id: u64) -> KvResult<()> {
        match self.snaps.remove(&id) {
            Some(_) => Ok(()),
            None => Err(KvError { kind: "invalid", msg: format!("no snapshot {id}") }),
        }
    }
    fn flush(&mut self) -> KvResult<()> {
        Ok(self.db.flush()?)
    }
    fn sync(&mut self) -> KvResult<()> {
        Ok(self.db.sync_wal()?)
    }
    fn compact(&mut self, range: Option<(Vec<u8>, Vec<u8>)>) -> KvResult<()> {
        match range {
            Some((a, b)) => Ok(self.db.compact_range(Some(&a), Some(&b))?),
            None => Ok(self.db.compact_range(None, None)?),
        }
    }
    fn stats(&mut self) -> KvResult<String> {
        Ok(self.db.stats().to_json())
    }
    fn close(self: Box<Self>) -> KvResult<()> {
        let LsmEngine { db, snaps, .. } = *self;
        drop(snaps);
        Ok(db.close()?)
    }
}

pub(crate) fn open_lsm(a: &ExecArgs, recovery: vfs::torn::WalRecovery) -> KvResult<Box<dyn KvEngine>> {
    let mut o = lsm::Options { create_if_missing: a.create, ..Default::default() };
    macro_rules! set {
        ($($f:ident),*) => { $( if let Some(v) = a.$f { o.$f = v; } )* };
    }
    set!(
        write_buffer_size,
        max_write_buffer_number,
        level0_file_num_compaction_trigger,
        level0_slowdown_writes_trigger,
        level0_stop_writes_trigger,
        max_bytes_for_level_base,
        max_bytes_for_level_multiplier,
        target_file_size_base,
        block_size,
        bloom_bits_per_key,
        block_cache_size
    );
    o.disable_auto_compactions = a.disable_auto_compactions;
    if let Some(c) = &a.compression {
        o.compression = match c.as_str() {
            "none" => lsm::Compression::None,
            "lz4" => lsm::Compression::Lz4,
            "zstd" => lsm::Compression::Zstd,
            other => return Err(KvError { kind: "invalid", msg: format!("unknown compression {other}") }),
        };
    }
    if let Some(s) = &a.range_delete_strategy {
        o.range_delete_strategy = lsm::strategy_by_name(s)?;
    }
    if let Some(m) = &a.range_reduce {
        o.range_reduce.mode = lsm::RangeReduceMode::from_name(m).ok_or_else(|| {
            let names: Vec<&str> = lsm::RangeReduceMode::NAMED.iter().map(|(n, _)| *n).collect();
            KvError::new("invalid", format!("unknown RangeReduce mode {m:?} ({})", names.join(" | ")))
        })?;
    }
    o.wal_recovery = recovery;
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    let db = lsm::Db::open(fs, &a.dir, o)?;
    crate::kv_engine::report_salvage(db.recovery().salvaged.as_deref(), db.recovery().dropped_bytes);
    Ok(Box::new(LsmEngine { db, snaps: HashMap::new(), next_snap: 0 }))
}
