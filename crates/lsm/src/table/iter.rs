//! Iterating a table: the index block picks a data block, the data block iterates entries.

use std::sync::Arc;

use super::Table;
use crate::block::{Block, BlockIter};
use crate::error::{Error, Result};
use crate::format::Handle;
use crate::ikey;
use crate::iter::InternalIter;
use crate::readahead::ReadAhead;

/// A two-level cursor: the index block picks a data block, the data block iterates entries.
#[derive(Debug)]
pub struct TableIter {
    table: Arc<Table>,
    index: BlockIter,
    data: Option<BlockIter>,
    err: Option<Error>,
    ra: ReadAhead,
    fill_cache: bool,
}

impl TableIter {
    pub(super) fn new(table: Arc<Table>, ra: ReadAhead, fill_cache: bool) -> TableIter {
        let index = BlockIter::new(table.index.clone(), ikey::cmp);
        TableIter { table, index, data: None, err: None, ra, fill_cache }
    }

    /// The cursor's read-ahead state, for the next file of a level.
    pub fn into_readahead(self) -> ReadAhead {
        self.ra
    }

    fn load_data(&mut self) -> bool {
        self.data = None;
        if !self.index.valid() {
            if self.index.corrupt() {
                self.err = Some(Error::corruption(&self.table.name, "malformed index block"));
            }
            return false;
        }
        let Some(h) = Handle::decode(self.index.value()) else {
            self.err = Some(Error::corruption(&self.table.name, "bad index handle"));
            return false;
        };
        match self.table.data_block_ahead(h, &mut self.ra, self.fill_cache) {
            Ok(b) => {
                self.data = Some(BlockIter::new(b, ikey::cmp));
                true
            }
            Err(e) => {
                self.err = Some(e);
                false
            }
        }
    }

    fn data_valid(&mut self) -> bool {
        match &self.data {
            Some(d) if d.valid() => true,
            Some(d) if d.corrupt() => {
                self.err = Some(Error::corruption(&self.table.name, "malformed data block"));
                self.data = None;
                false
            }
            _ => false,
        }
    }

    fn skip_forward(&mut self) {
        while self.err.is_none() && !self.data_valid() {
            if self.err.is_some() {
                break;
            }
            if self.data.is_some() {
                self.index.next();
            }
            if !self.load_data() {
                self.data = None;
                return;
            }
            if let Some(d) = &mut self.data {
                d.seek_to_first();
            }
        }
    }

    fn skip_backward(&mut self) {
        while self.err.is_none() && !self.data_valid() {
            if self.err.is_some() {
                break;
            }
            if self.data.is_some() {
                self.index.prev();
            }
            if !self.load_data() {
                self.data = None;
                return;
            }
            if let Some(d) = &mut self.data {
                d.seek_to_last();
            }
        }
    }
}

impl InternalIter for TableIter {
    fn valid(&self) -> bool {
        self.err.is_none() && self.data.as_ref().is_some_and(|d| d.valid())
    }

    fn seek_to_first(&mut self) {
        self.index.seek_to_first();
        if self.load_data()
            && let Some(d) = &mut self.data
        {
            d.seek_to_first();
        }
        self.skip_forward();
    }

    fn seek_to_last(&mut self) {
        self.index.seek_to_last();
        if self.load_data()
            && let Some(d) = &mut self.data
        {
            d.seek_to_last();
        }
        self.skip_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        self.index.seek(target);
        if self.load_data()
            && let Some(d) = &mut self.data
        {
            d.seek(target);
        }
        self.skip_forward();
    }

    fn next(&mut self) {
        if let Some(d) = &mut self.data {
            d.next();
        }
        self.skip_forward();
    }

    fn prev(&mut self) {
        if let Some(d) = &mut self.data {
            d.prev();
        }
        self.skip_backward();
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.key())
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.value())
    }

    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn data_block(&self) -> Option<&Arc<Block>> {
        self.data.as_ref().filter(|d| d.valid()).map(|d| d.block())
    }
}
