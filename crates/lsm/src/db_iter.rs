//! The user-facing iterator: turns the merged stream of internal entries into the live user keys visible at a
//! snapshot, within optional bounds, in both directions (LevelDB's `DBIter`, plus range tombstones and bounds).
//!
//! Forward: the underlying iterator sits on the entry that produced the current key. Reverse: it sits just
//! before all entries of the current key, whose newest visible value is saved in `saved_value`.
//! An entry is hidden if its sequence is above the snapshot, if a newer entry of the same key is visible, or if a
//! range tombstone visible at the snapshot with a larger sequence covers it.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ikey::{self, Kind};
use crate::iter::{InternalIter, MergingIter};
use crate::rangedel::{RangeCover, ReadPin};
use crate::tombstones::Fragments;
use crate::version::Version;

/// An iterator over live keys.
pub struct DbIter {
    iter: MergingIter,
    snapshot: u64,
    tombstones: Vec<Arc<Fragments>>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    forward: bool,
    valid: bool,
    saved_key: Vec<u8>,
    saved_value: Vec<u8>,
    /// The user key of the entry under the cursor, parsed into a buffer that is swapped with `saved_key` instead
    /// of allocating a key per entry (an allocation and a free per entry were 18 % of a long scan's time).
    cur: Vec<u8>,
    err: Option<Error>,
    _version: Arc<Version>,
    /// Range records kept outside the sources (GLORAN's global index).
    global: Option<Box<dyn RangeCover>>,
    /// The iterator was repositioned: the next key asked of `global` repositions it too, so it does not walk
    /// over every range record between its old position and the new one.
    global_reseek: bool,
    _pin: Option<ReadPin>,
    /// Key and value bytes of the entries examined, handed to `read_sink` when the iterator is dropped (the
    /// range-query statistics; see [`DbIter::set_read_sink`]).
    read_bytes: u64,
    read_sink: Option<ReadSink>,
}

/// Receives the bytes a range query examined.
pub(crate) type ReadSink = Box<dyn FnOnce(u64) + Send>;

impl Drop for DbIter {
    fn drop(&mut self) {
        if let Some(sink) = self.read_sink.take() {
            sink(self.read_bytes);
        }
    }
}

impl std::fmt::Debug for DbIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIter").field("snapshot", &self.snapshot).field("valid", &self.valid).finish()
    }
}

impl DbIter {
    pub(crate) fn new(
        iter: MergingIter,
        snapshot: u64,
        tombstones: Vec<Arc<Fragments>>,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        version: Arc<Version>,
    ) -> Self {
        DbIter {
            iter,
            snapshot,
            tombstones,
            lower,
            upper,
            forward: true,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            cur: Vec::new(),
            err: None,
            _version: version,
            global: None,
            global_reseek: false,
            _pin: None,
            read_bytes: 0,
            read_sink: None,
        }
    }

    /// Adds the cover of a strategy that keeps range records outside the sources, and the read pin it needs.
    pub(crate) fn set_global(&mut self, cover: Option<Box<dyn RangeCover>>, pin: Option<ReadPin>) {
        self.global = cover;
        self._pin = pin;
    }

    /// Hands the key and value bytes of every entry the iterator examines to `sink` when it is dropped.
    pub(crate) fn set_read_sink(&mut self, sink: ReadSink) {
        self.read_sink = Some(sink);
    }

    fn covered(&mut self, uk: &[u8], seq: u64) -> bool {
        if self.tombstones.iter().any(|f| f.covers(uk, seq, self.snapshot)) {
            return true;
        }
        let Some(g) = self.global.as_mut() else { return false };
        // Forward scans ask in ascending order and share one pass over the index; reverse steps and seeks ask
        // smaller keys, which the cover answers by repositioning only when the key leaves the area or gap it
        // stands on.
        let r = if std::mem::take(&mut self.global_reseek) {
            g.seek(uk).and_then(|()| g.covered(uk, seq))
        } else {
            g.covered(uk, seq)
        };
        match r {
            Ok(c) => c,
            Err(e) => {
                self.err = Some(e);
                self.valid = false;
                true
            }
        }
    }

    /// [`Self::covered`] for the key in `cur`.
    fn cur_covered(&mut self, seq: u64) -> bool {
        let uk = std::mem::take(&mut self.cur);
        let c = self.covered(&uk, seq);
        self.cur = uk;
        c
    }

    /// Whether positioned at a key.
    pub fn valid(&self) -> bool {
        self.valid && self.err.is_none()
    }

    /// The current key. REQUIRES: valid.
    pub fn key(&self) -> &[u8] {
        if self.forward { ikey::user_key(self.iter.key()) } else { &self.saved_key }
    }

    /// The current value. REQUIRES: valid.
    pub fn value(&self) -> &[u8] {
        if self.forward { self.iter.value() } else { &self.saved_value }
    }

    /// The first error (I/O or corruption) met; an iterator with an error is not valid.
    pub fn status(&self) -> Result<()> {
        if let Some(e) = &self.err {
            return Err(e.clone());
        }
        self.iter.status()
    }

    fn check_status(&mut self) -> bool {
        if let Err(e) = self.iter.status() {
            self.err = Some(e);
            self.valid = false;
            return false;
        }
        true
    }

    /// Parses the current internal key: its user key into `cur`, its sequence and kind returned.
    fn parse_current(&mut self) -> Option<(u64, Kind)> {
        self.read_bytes += (self.iter.key().len() + self.iter.value().len()) as u64;
        match ikey::parse(self.iter.key()) {
            Some(p) => {
                self.cur.clear();
                self.cur.extend_from_slice(p.user_key);
                Some((p.seq, p.kind))
            }
            None => {
                self.err = Some(Error::corruption("iterator", "malformed internal key"));
                self.valid = false;
                None
            }
        }
    }

    fn find_next_user_entry(&mut self, mut skipping: bool) {
        // `saved_key` holds the key to skip when `skipping`.
        while self.iter.valid() {
            let Some((seq, kind)) = self.parse_current() else { return };
            if seq <= self.snapshot {
                if self.upper.as_ref().is_some_and(|u| self.cur.as_slice() >= u.as_slice()) {
                    break;
                }
                match kind {
                    Kind::Delete | Kind::RangeDelete => {
                        std::mem::swap(&mut self.saved_key, &mut self.cur);
                        skipping = true;
                    }
                    Kind::Value => {
                        if skipping && self.cur.as_slice() <= self.saved_key.as_slice() {
                            // Hidden by a newer entry of the same key.
                        } else if self.cur_covered(seq) {
                            std::mem::swap(&mut self.saved_key, &mut self.cur);
                            skipping = true;
                        } else {
                            self.valid = true;
                            self.saved_key.clear();
                            return;
                        }
                    }
                }
            }
            self.iter.next();
        }
        self.check_status();
        self.saved_key.clear();
        self.valid = false;
    }

    fn find_prev_user_entry(&mut self) {
        let mut value_kind = Kind::Delete;
        while self.iter.valid() {
            let Some((seq, kind)) = self.parse_current() else { return };
            if seq <= self.snapshot {
                if value_kind != Kind::Delete && self.cur.as_slice() < self.saved_key.as_slice() {
                    break;
                }
                if self.lower.as_ref().is_some_and(|l| self.cur.as_slice() < l.as_slice()) {
                    break;
                }
                value_kind =
                    if kind == Kind::Value && !self.cur_covered(seq) { Kind::Value } else { Kind::Delete };
                if value_kind == Kind::Delete {
                    self.saved_key.clear();
                    self.saved_value.clear();
                } else {
                    std::mem::swap(&mut self.saved_key, &mut self.cur);
                    self.saved_value.clear();
                    self.saved_value.extend_from_slice(self.iter.value());
                }
            }
            self.iter.prev();
        }
        if !self.check_status() {
            return;
        }
        if value_kind == Kind::Delete {
            self.valid = false;
            self.saved_key.clear();
            self.saved_value.clear();
            self.forward = false;
        } else {
            self.valid = true;
        }
    }

    /// Advances to the next live key. REQUIRES: valid.
    pub fn next(&mut self) {
        if !self.valid() {
            return;
        }
        if !self.forward {
            self.forward = true;
            // The iterator is just before the entries of saved_key: step into them, then skip them.
            if !self.iter.valid() {
                self.iter.seek_to_first();
            } else {
                self.iter.next();
            }
            if !self.iter.valid() {
                self.valid = false;
                self.saved_key.clear();
                self.check_status();
                return;
            }
        } else {
            self.saved_key.clear();
            self.saved_key.extend_from_slice(ikey::user_key(self.iter.key()));
            self.iter.next();
            if !self.iter.valid() {
                self.valid = false;
                self.saved_key.clear();
                self.check_status();
                return;
            }
        }
        self.find_next_user_entry(true);
    }

    /// Steps back to the previous live key. REQUIRES: valid.
    pub fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        if self.forward {
            self.saved_key.clear();
            self.saved_key.extend_from_slice(ikey::user_key(self.iter.key()));
            loop {
                self.iter.prev();
                if !self.iter.valid() {
                    self.valid = false;
                    self.saved_key.clear();
                    self.saved_value.clear();
                    self.check_status();
                    return;
                }
                if ikey::user_key(self.iter.key()) < self.saved_key.as_slice() {
                    break;
                }
            }
            self.forward = false;
        }
        self.find_prev_user_entry();
    }

    /// Positions at the first live key >= `target` (and >= the lower bound).
    pub fn seek(&mut self, target: &[u8]) {
        self.global_reseek = true;
        let t = match &self.lower {
            Some(l) if target < l.as_slice() => l.clone(),
            _ => target.to_vec(),
        };
        self.forward = true;
        self.saved_key.clear();
        self.saved_value.clear();
        self.iter.seek(&ikey::make(&t, self.snapshot, ikey::SEEK_KIND));
        self.find_next_user_entry(false);
    }

    /// Positions at the last live key <= `target` (and below the upper bound).
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.global_reseek = true;
        if self.upper.as_ref().is_some_and(|u| target >= u.as_slice()) {
            self.seek_to_last();
            return;
        }
        self.forward = false;
        self.saved_key.clear();
        self.saved_value.clear();
        // (target, 0) sorts after every entry of target.
        self.iter.seek(&ikey::make(target, 0, Kind::Delete));
        if self.iter.valid() {
            self.iter.prev();
        } else {
            self.iter.seek_to_last();
        }
        self.find_prev_user_entry();
    }

    /// Positions at the first live key.
    pub fn seek_to_first(&mut self) {
        self.global_reseek = true;
        match self.lower.clone() {
            Some(l) => self.seek(&l),
            None => {
                self.forward = true;
                self.saved_key.clear();
                self.saved_value.clear();
                self.iter.seek_to_first();
                self.find_next_user_entry(false);
            }
        }
    }

    /// Positions at the last live key.
    pub fn seek_to_last(&mut self) {
        self.global_reseek = true;
        self.forward = false;
        self.saved_key.clear();
        self.saved_value.clear();
        match self.upper.clone() {
            Some(u) => {
                self.iter.seek(&ikey::make(&u, ikey::MAX_SEQ, ikey::SEEK_KIND));
                if self.iter.valid() {
                    self.iter.prev();
                } else {
                    self.iter.seek_to_last();
                }
            }
            None => self.iter.seek_to_last(),
        }
        self.find_prev_user_entry();
    }

    /// Collects up to `limit` live `(key, value)` pairs from the current position forward.
    pub fn collect_forward(&mut self, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        while self.valid() && out.len() < limit {
            out.push((self.key().to_vec(), self.value().to_vec()));
            self.next();
        }
        self.status()?;
        Ok(out)
    }

    /// Collects up to `limit` live pairs from the current position backward.
    pub fn collect_reverse(&mut self, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        while self.valid() && out.len() < limit {
            out.push((self.key().to_vec(), self.value().to_vec()));
            self.prev();
        }
        self.status()?;
        Ok(out)
    }
}
