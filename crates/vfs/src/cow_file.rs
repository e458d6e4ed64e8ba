//! `CowFile`: a copy-on-write view of one base file, kept page by page in memory.
//!
//! [`crate::OverlayFs`] hands one out when a base file is opened for writing. Only the pages written through it
//! are held (a page is copied from the base the first time any byte of it is written), so recovering a store of
//! many gigabytes through an overlay costs memory in proportion to what recovery writes, not to the store.
//!
//! Invariants: `len` is the view's length; base bytes at or past `base_limit` read as zeros (a truncation below
//! the base's length hides them for good); a resident page holds the view's bytes for its whole extent, with
//! zeros past `len`.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::{File, Result};

/// Granularity of copy-up.
const PAGE: u64 = 4096;

struct State {
    len: u64,
    base_limit: u64,
    pages: BTreeMap<u64, Box<[u8]>>,
}

/// A copy-on-write file over a read-only base file. Writes never reach the base.
pub(crate) struct CowFile {
    base: Arc<dyn File>,
    state: Mutex<State>,
}

impl fmt::Debug for CowFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CowFile").finish_non_exhaustive()
    }
}

impl CowFile {
    pub(crate) fn new(base: Arc<dyn File>) -> Result<CowFile> {
        let len = base.len()?;
        Ok(CowFile { base, state: Mutex::new(State { len, base_limit: len, pages: BTreeMap::new() }) })
    }

    fn state(&self) -> Result<MutexGuard<'_, State>> {
        self.state.lock().map_err(|_| io::Error::other("copy-on-write file lock poisoned"))
    }

    /// Bytes held in memory.
    pub(crate) fn resident_bytes(&self) -> Result<u64> {
        Ok(self.state()?.pages.len() as u64 * PAGE)
    }

    /// Reads the base's bytes of `[at, at + dst.len())` below `limit` into `dst`, zeros above.
    fn read_base(&self, limit: u64, dst: &mut [u8], at: u64) -> Result<()> {
        let n = limit.saturating_sub(at).min(dst.len() as u64) as usize;
        if n > 0 {
            self.base.read_exact_at(&mut dst[..n], at)?;
        }
        dst[n..].fill(0);
        Ok(())
    }
}

impl File for CowFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let st = self.state()?;
        if offset >= st.len {
            return Ok(0);
        }
        let n = (st.len - offset).min(buf.len() as u64) as usize;
        let mut done = 0usize;
        while done < n {
            let at = offset + done as u64;
            let (page, off) = (at / PAGE, (at % PAGE) as usize);
            let take = (PAGE as usize - off).min(n - done);
            let dst = &mut buf[done..done + take];
            match st.pages.get(&page) {
                Some(p) => dst.copy_from_slice(&p[off..off + take]),
                None => self.read_base(st.base_limit, dst, at)?,
            }
            done += take;
        }
        Ok(n)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "write past the largest offset"))?;
        let mut st = self.state()?;
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let (page, off) = (at / PAGE, (at % PAGE) as usize);
            let take = (PAGE as usize - off).min(buf.len() - done);
            if !st.pages.contains_key(&page) {
                let mut p = vec![0u8; PAGE as usize].into_boxed_slice();
                // Bytes past the view's end are zeros, whatever the base holds there.
                let limit = st.base_limit.min(st.len);
                self.read_base(limit, &mut p, page * PAGE)?;
                st.pages.insert(page, p);
            }
            if let Some(p) = st.pages.get_mut(&page) {
                p[off..off + take].copy_from_slice(&buf[done..done + take]);
            }
            done += take;
        }
        st.len = st.len.max(end);
        Ok(())
    }

    fn sync_data(&self) -> Result<()> {
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        Ok(self.state()?.len)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        let mut st = self.state()?;
        if len < st.len {
            st.base_limit = st.base_limit.min(len);
            let first_gone = len.div_ceil(PAGE);
            st.pages.split_off(&first_gone);
            if let Some(p) = st.pages.get_mut(&(len / PAGE)).filter(|_| !len.is_multiple_of(PAGE)) {
                p[(len % PAGE) as usize..].fill(0);
            }
        }
        st.len = len;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Fs, MemFs, OpenMode};
    use std::path::Path;

    fn base(data: &[u8]) -> Result<(MemFs, Arc<dyn File>)> {
        let m = MemFs::new();
        let f = m.open(Path::new("b"), OpenMode::CreateNew)?;
        f.write_all_at(data, 0)?;
        Ok((m, f))
    }

    fn all(f: &dyn File) -> Result<Vec<u8>> {
        let mut v = vec![0u8; f.len()? as usize];
        f.read_exact_at(&mut v, 0)?;
        Ok(v)
    }

    /// Model check against a `Vec<u8>` over random writes and length changes crossing page boundaries.
    #[test]
    fn matches_a_vec_model() -> Result<()> {
        let init: Vec<u8> = (0..3 * PAGE + 100).map(|i| (i % 251) as u8).collect();
        let (_m, b) = base(&init)?;
        let f = CowFile::new(b.clone())?;
        let mut model = init.clone();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for i in 0..400 {
            match next(4) {
                0 => {
                    let len = next(5 * PAGE);
                    f.set_len(len)?;
                    model.resize(len as usize, 0);
                }
                _ => {
                    let off = next(5 * PAGE);
                    let n = next(2 * PAGE) as usize;
                    let data: Vec<u8> = (0..n).map(|j| (i + j) as u8).collect();
                    f.write_all_at(&data, off)?;
                    let end = off as usize + n;
                    if model.len() < end {
                        model.resize(end, 0);
                    }
                    model[off as usize..end].copy_from_slice(&data);
                }
            }
            assert_eq!(all(&f)?, model, "after step {i}");
        }
        assert_eq!(all(b.as_ref())?, init, "the base changed");
        Ok(())
    }

    #[test]
    fn holds_only_the_pages_written() -> Result<()> {
        let (_m, b) = base(&vec![7u8; (64 * PAGE) as usize])?;
        let f = CowFile::new(b)?;
        f.write_all_at(b"xy", 10 * PAGE - 1)?;
        assert_eq!(f.resident_bytes()?, 2 * PAGE);
        let mut r = [0u8; 4];
        f.read_exact_at(&mut r, 10 * PAGE - 2)?;
        assert_eq!(&r, b"\x07xy\x07");
        Ok(())
    }
}
