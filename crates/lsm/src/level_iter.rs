//! The level iterator: one level's tables read as one sorted run, each table opened only when the iterator
//! reaches it (LevelDB's two-level iterator over a level's file list).

use std::cmp::Ordering;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ikey;
use crate::iter::InternalIter;
use crate::table::TableIter;
use crate::table_cache::TableCache;
use crate::version::FileMeta;

/// Concatenates the (sorted, disjoint) files of one level, opening each table only when reached.
pub struct LevelIter {
    files: Vec<Arc<FileMeta>>,
    cache: Arc<TableCache>,
    idx: usize,
    cur: Option<TableIter>,
    err: Option<Error>,
    /// Whether blocks read are added to the block cache (see [`Table::iter_with`](crate::table::Table::iter_with)).
    fill_cache: bool,
}

impl std::fmt::Debug for LevelIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LevelIter").field("files", &self.files.len()).field("idx", &self.idx).finish()
    }
}

impl LevelIter {
    /// Iterates `files` (sorted, non-overlapping).
    pub fn new(files: Vec<Arc<FileMeta>>, cache: Arc<TableCache>) -> Self {
        LevelIter { idx: files.len(), files, cache, cur: None, err: None, fill_cache: true }
    }

    /// Iterates `files` for a compaction: blocks read are not added to the block cache.
    pub fn for_compaction(files: Vec<Arc<FileMeta>>, cache: Arc<TableCache>) -> Self {
        LevelIter { fill_cache: false, ..Self::new(files, cache) }
    }

    fn open(&mut self, idx: usize) -> bool {
        // A scan moving on to the next file keeps its read-ahead window; any other move only the buffer.
        let ra = match self.cur.take() {
            Some(c) => c.into_readahead().for_other_file(idx == self.idx.wrapping_add(1)),
            None => Default::default(),
        };
        self.idx = idx;
        let Some(f) = self.files.get(idx) else { return false };
        match self.cache.table(f) {
            Ok(t) => {
                self.cur = Some(t.iter_with(ra, self.fill_cache));
                true
            }
            Err(e) => {
                self.err = Some(e);
                false
            }
        }
    }

    fn settle_forward(&mut self) {
        while self.err.is_none() {
            match &self.cur {
                Some(c) if c.valid() => return,
                Some(c) if c.status().is_err() => {
                    self.err = c.status().err();
                    return;
                }
                _ => {}
            }
            if !self.open(self.idx + 1) {
                return;
            }
            if let Some(c) = &mut self.cur {
                c.seek_to_first();
            }
        }
    }

    fn settle_backward(&mut self) {
        while self.err.is_none() {
            match &self.cur {
                Some(c) if c.valid() => return,
                Some(c) if c.status().is_err() => {
                    self.err = c.status().err();
                    return;
                }
                _ => {}
            }
            if self.idx == 0 || self.idx > self.files.len() {
                self.cur = None;
                self.idx = self.files.len();
                return;
            }
            if !self.open(self.idx - 1) {
                return;
            }
            if let Some(c) = &mut self.cur {
                c.seek_to_last();
            }
        }
    }
}

impl InternalIter for LevelIter {
    fn valid(&self) -> bool {
        self.err.is_none() && self.cur.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) {
        if self.open(0)
            && let Some(c) = &mut self.cur
        {
            c.seek_to_first();
        }
        self.settle_forward();
    }

    fn seek_to_last(&mut self) {
        if !self.files.is_empty()
            && self.open(self.files.len() - 1)
            && let Some(c) = &mut self.cur
        {
            c.seek_to_last();
        }
        self.settle_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        let i = self.files.partition_point(|f| ikey::cmp(&f.info.largest, target) == Ordering::Less);
        if self.open(i)
            && let Some(c) = &mut self.cur
        {
            c.seek(target);
        }
        self.settle_forward();
    }

    fn next(&mut self) {
        if let Some(c) = &mut self.cur {
            c.next();
        }
        self.settle_forward();
    }

    fn prev(&mut self) {
        if let Some(c) = &mut self.cur {
            c.prev();
        }
        self.settle_backward();
    }

    fn key(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |c| c.key())
    }

    fn value(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |c| c.value())
    }

    fn data_block(&self) -> Option<&Arc<crate::block::Block>> {
        self.cur.as_ref().and_then(|c| c.data_block())
    }

    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}
