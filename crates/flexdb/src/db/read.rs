//! The read path: point lookups and scans over the memtables and the table, and the paging iterator.
//!
//! Readers copy what they need from the memtables under the memtable lock and read the table after releasing
//! it; `Inner::table_epoch` tells them when the table changed against their copy in between.

use std::sync::atomic::Ordering;

use bptree::ByteKey;

use crate::error::Result;
use crate::memtable::MemValue;

use super::{Db, Pair, Snapshot};

impl Db {
    /// The value of `key`, or `None`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.c.gets.fetch_add(1, Ordering::Relaxed);
        self.read_current(key, true)
    }

    /// [`Db::get`], counted in the statistics only when `count` (snapshots read pre-images through it too).
    pub(super) fn read_current(&self, key: &[u8], count: bool) -> Result<Option<Vec<u8>>> {
        let inner = &self.inner;
        let probe = ByteKey::probe(key);
        loop {
            let (imm, epoch) = {
                let m = inner.mem.read();
                inner.check_readable()?;
                if let Some(v) = m.active.get(&probe) {
                    if count {
                        inner.c.memtable_hits.fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok(v.as_value().map(<[u8]>::to_vec));
                }
                (m.imm.as_ref().map(|(t, _)| t.clone()), inner.table_epoch.load(Ordering::SeqCst))
            };
            if let Some(t) = imm
                && let Some(v) = t.get(&probe)
            {
                if count {
                    inner.c.memtable_hits.fetch_add(1, Ordering::Relaxed);
                }
                return Ok(v.as_value().map(<[u8]>::to_vec));
            }
            #[cfg(test)]
            super::tests::pause_between_sources();
            let v = inner.table.get(key).map_err(|e| inner.explain(e))?;
            if inner.table_epoch.load(Ordering::SeqCst) == epoch {
                return Ok(v.map(Vec::from));
            }
        }
    }

    /// Live pairs with `start <= key < end` (`end = None`: unbounded) in key order, at most `limit`; reversed
    /// (largest first) when `reverse`. Copies every pair; [`Db::scan_with`] lends them instead.
    pub fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize, reverse: bool) -> Result<Vec<Pair>> {
        let mut out = Vec::new();
        self.scan_with(start, end, limit, reverse, |k, v| out.push((k.to_vec(), v.to_vec())))?;
        Ok(out)
    }

    /// [`Db::scan`] that passes each pair to `f` in order, borrowed, and returns how many it passed.
    ///
    /// Three sorted sources are merged, newest first: the active memtable, the immutable memtable and the
    /// committed records. Each is read only up to a cap (at first `limit` entries); a source that hit its cap is
    /// known only up to its last key, so the merge stops at the earliest such horizon. When tombstones or a horizon
    /// leave fewer than `limit` pairs, the scan is repeated with a larger cap: the common case reads `limit`
    /// entries per source and no more. Committed records are lent from the interval cache, not copied.
    pub fn scan_with(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        reverse: bool,
        mut f: impl FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        if limit == 0 || end.is_some_and(|e| e <= start) {
            return Ok(0);
        }
        let mut cap = limit;
        loop {
            match self.scan_capped(start, end, limit, reverse, cap, &mut f)? {
                Pass::Done(n) => return Ok(n),
                Pass::Grow => cap = cap.saturating_mul(4),
                Pass::Again => {}
            }
        }
    }

    /// One pass of [`Db::scan_with`] reading at most `cap` entries per source. Nothing is passed to `f` unless
    /// it returns [`Pass::Done`].
    fn scan_capped(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        reverse: bool,
        cap: usize,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<Pass> {
        use std::cmp::Ordering as O;
        use std::ops::Bound;
        let inner = &self.inner;
        let bounds = (Bound::Included(start), end.map_or(Bound::Unbounded, Bound::Excluded));
        // `a` comes before `b` in scan order.
        let order = |a: &[u8], b: &[u8]| if reverse { b.cmp(a) } else { a.cmp(b) };
        let mut horizon: Option<Vec<u8>> = None;
        let cut = |last: Option<&[u8]>, n: usize, horizon: &mut Option<Vec<u8>>| {
            if n >= cap
                && let Some(l) = last
                && horizon.as_deref().is_none_or(|h| order(l, h) == O::Less)
            {
                *horizon = Some(l.to_vec());
            }
            n >= cap
        };
        let take = |it: &mut dyn Iterator<Item = (&ByteKey, &MemValue)>| -> Vec<(Vec<u8>, MemValue)> {
            it.take(cap).map(|(k, v)| (k.as_bytes().to_vec(), v.clone())).collect()
        };
        let (act, imm, epoch) = {
            let m = inner.mem.read();
            inner.check_readable()?;
            let mut r = m.active.range::<[u8], _>(bounds);
            let act = if reverse { take(&mut r.rev()) } else { take(&mut r) };
            (act, m.imm.as_ref().map(|(t, _)| t.clone()), inner.table_epoch.load(Ordering::SeqCst))
        };
        let imm = match imm {
            Some(t) => {
                let mut r = t.range::<[u8], _>(bounds);
                if reverse { take(&mut r.rev()) } else { take(&mut r) }
            }
            None => Vec::new(),
        };
        #[cfg(test)]
        super::tests::pause_between_sources();
        let mut runs = Vec::new();
        let n = if reverse {
            inner.table.scan_rev(start, end, cap, &mut runs)
        } else {
            inner.table.scan(start, end, cap, &mut runs)
        }
        .map_err(|e| inner.explain(e))?;
        let table_last = runs.last().and_then(|r| r.recs().last()).map(|r| r.0);
        let mut truncated = cut(act.last().map(|e| &e.0[..]), act.len(), &mut horizon);
        truncated |= cut(imm.last().map(|e| &e.0[..]), imm.len(), &mut horizon);
        truncated |= cut(table_last, n, &mut horizon);
        // The memtables' view, newest wins.
        let mut mem: Vec<(&[u8], Option<&[u8]>)> = Vec::with_capacity(act.len() + imm.len());
        let (mut a, mut b) = (act.iter().peekable(), imm.iter().peekable());
        loop {
            let o = match (a.peek(), b.peek()) {
                (None, None) => break,
                (Some(_), None) => O::Less,
                (None, Some(_)) => O::Greater,
                (Some(x), Some(y)) => order(&x.0, &y.0),
            };
            let e = match o {
                O::Less => a.next(),
                O::Greater => b.next(),
                O::Equal => {
                    b.next();
                    a.next()
                }
            };
            mem.extend(e.map(|(k, v)| (&k[..], v.as_value())));
        }
        let mut out: Vec<(&[u8], &[u8])> = Vec::with_capacity(limit.min(mem.len().saturating_add(n)));
        let (mut m, mut t) = (mem.into_iter().peekable(), runs.iter().flat_map(|r| r.recs()).peekable());
        while out.len() < limit {
            let o = match (m.peek(), t.peek()) {
                (None, None) => break,
                (Some(_), None) => O::Less,
                (None, Some(_)) => O::Greater,
                (Some(x), Some(y)) => order(x.0, y.0),
            };
            let (k, v) = match o {
                O::Greater => match t.next() {
                    Some((k, v)) => (k, Some(v)),
                    None => break,
                },
                _ => {
                    if o == O::Equal {
                        t.next();
                    }
                    match m.next() {
                        Some(e) => e,
                        None => break,
                    }
                }
            };
            if horizon.as_deref().is_some_and(|h| order(k, h) == O::Greater) {
                break;
            }
            if let Some(v) = v {
                out.push((k, v));
            }
        }
        if inner.table_epoch.load(Ordering::SeqCst) != epoch {
            return Ok(Pass::Again);
        }
        if out.len() < limit && truncated {
            return Ok(Pass::Grow);
        }
        for &(k, v) in &out {
            f(k, v);
        }
        Ok(Pass::Done(out.len()))
    }

    /// An iterator over live pairs with `start <= key < end` (`end = None`: unbounded), forward or reverse. It
    /// pages through the store with [`Db::scan`] (`page` pairs at a time), so it sees writes made between pages
    /// (for one state of the store, use [`Db::iter_at`]) but never yields a key twice or out of order.
    pub fn iter(&self, start: &[u8], end: Option<&[u8]>, reverse: bool) -> DbIter<'_> {
        DbIter {
            db: self,
            lo: start.to_vec(),
            hi: end.map(<[u8]>::to_vec),
            reverse,
            buf: std::collections::VecDeque::new(),
            done: false,
            page: 64,
            snap: None,
        }
    }
}

/// What one pass of [`Db::scan_with`] came to.
enum Pass {
    /// This many pairs were passed to `f`.
    Done(usize),
    /// A source was cut and fewer than `limit` pairs came out: a larger cap must be tried.
    Grow,
    /// The table may have changed against the memtables' copy while the pass read it (see
    /// `Inner::table_epoch`): read again.
    Again,
}

/// A paging iterator over a key range; see [`Db::iter`].
pub struct DbIter<'a> {
    db: &'a Db,
    lo: Vec<u8>,
    hi: Option<Vec<u8>>,
    reverse: bool,
    buf: std::collections::VecDeque<(Vec<u8>, Vec<u8>)>,
    done: bool,
    page: usize,
    /// Read at this snapshot ([`Db::iter_at`]).
    pub(super) snap: Option<&'a Snapshot>,
}

impl std::fmt::Debug for DbIter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIter")
            .field("reverse", &self.reverse)
            .field("done", &self.done)
            .field("at_snapshot", &self.snap.is_some())
            .finish_non_exhaustive()
    }
}

impl DbIter<'_> {
    /// Repositions the iterator: forward, to the first key `>= key`; reverse, to the last key `< key`. The
    /// position is clamped to the iterator's bounds.
    pub fn seek(&mut self, key: &[u8]) {
        self.buf.clear();
        self.done = false;
        if self.reverse {
            if self.hi.as_deref().is_none_or(|h| key < h) {
                self.hi = Some(key.to_vec());
            }
        } else if key > &self.lo[..] {
            self.lo = key.to_vec();
        }
    }
}

impl Iterator for DbIter<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() && !self.done {
            let page = match self.snap {
                Some(s) => self.db.scan_at(&self.lo, self.hi.as_deref(), self.page, self.reverse, s),
                None => self.db.scan(&self.lo, self.hi.as_deref(), self.page, self.reverse),
            };
            match page {
                Ok(v) => {
                    self.done = v.len() < self.page;
                    if let Some((k, _)) = v.last() {
                        if self.reverse {
                            self.hi = Some(k.clone());
                        } else {
                            let mut next = k.clone();
                            next.push(0);
                            self.lo = next;
                        }
                    }
                    self.buf.extend(v);
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        self.buf.pop_front().map(Ok)
    }
}
