//! Read-ahead for one sequential reader of a FlexFile (a scan).
//!
//! # Design
//!
//! A logical range of a FlexFile that has been updated in place maps to many small extents, and a plain read
//! costs one positional read per extent. The extents a scan meets are rarely far apart physically, though:
//! bytes loaded in key order sit in order in the data file, and the bytes one commit inserted into neighbouring
//! places were appended one after another. A [`ReadAhead`] keeps a few *windows*, each a run of whole checksum
//! blocks of one closed segment read with one positional read; an extent inside a window is copied from it.
//!
//! What must hold:
//! - A window is used only while the bytes it copied cannot have changed: closed segments change only when
//!   reused as the open segment, and [`crate::segments::Segments`] draws a new process-unique `generation` at
//!   each reuse; windows of another generation (or of another `FlexFile`) are dropped.
//! - Checksums are verified as strictly as an ordinary read: every block an extent touches is checked against
//!   the segment's checksum table before a byte of it is returned (once per window, remembered in a bit mask),
//!   and the same fill rules apply. A window never covers a block the table does not show as written.
//! - The open segment is served from its in-memory buffer as usual (no window), and a read that would need a
//!   window over `ReadAhead::window_bytes` is an ordinary read.

use crate::error::Result;
use crate::segments::Segments;

/// Windows kept per reader: one for the bytes in their original order, the rest for the runs of recent commits.
const WINDOWS: usize = 8;
/// Default bytes of one window. 4 KiB rather than 8: a window copies its whole span, and once a table outgrows
/// the cache most of what an 8 KiB window copies is never used (50-record scans of a 512 MiB-1 GiB FlexDB table
/// ran 9-25 % faster with 4 KiB windows; at 32 MiB the two were level).
pub const DEFAULT_WINDOW_BYTES: u64 = 4 << 10;

struct Window {
    seg: u64,
    /// Segment-relative offset of the first byte (a block boundary).
    start: u64,
    raw: Vec<u8>,
    /// Bit `i`: block `start / bs + i` has been verified.
    verified: u64,
}

/// Read-ahead state of one sequential reader; see the module comment. Create one per scan and pass it to
/// [`crate::FlexFile::read_at_ahead`]; it holds at most eight windows of `window_bytes`.
pub struct ReadAhead {
    windows: Vec<Window>,
    next: usize,
    generation: u64,
    window_bytes: u64,
    /// Positional reads issued through this reader: windows filled, and reads too large for a window.
    pub reads: u64,
}

impl std::fmt::Debug for ReadAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadAhead")
            .field("windows", &self.windows.len())
            .field("window_bytes", &self.window_bytes)
            .field("reads", &self.reads)
            .finish_non_exhaustive()
    }
}

impl Default for ReadAhead {
    fn default() -> Self {
        ReadAhead::new(DEFAULT_WINDOW_BYTES)
    }
}

impl ReadAhead {
    /// A reader whose windows hold `window_bytes` (whole blocks, 1 to 32 of them).
    pub fn new(window_bytes: u64) -> Self {
        ReadAhead { windows: Vec::new(), next: 0, generation: u64::MAX, window_bytes, reads: 0 }
    }

    /// Copies the data-file bytes at `addr` into `buf`, through a window when one holds them or can.
    /// REQUIRES: the range lies in one segment (one extent's piece).
    pub(crate) fn read(&mut self, segs: &Segments, addr: u64, buf: &mut [u8]) -> Result<()> {
        let Some(check) = segs.block_check(addr, buf.len())? else {
            // The open segment (its buffer) or an empty read: no file read.
            segs.read_open(addr, buf);
            return Ok(());
        };
        let bs = segs.block_size();
        // Windows start at multiples of their size and may reach past one more to hold a straddling read, so
        // every window is at most 64 blocks (the `verified` mask).
        let nblocks = (self.window_bytes / bs).clamp(1, 32);
        let (b0, b1) = (check.rstart / bs, (check.rend - 1) / bs);
        if b1 - b0 + 1 > nblocks {
            self.reads += 1;
            return segs.read_checked(check, buf);
        }
        if self.generation != segs.generation() {
            self.windows.clear();
            self.generation = segs.generation();
        }
        let s = check.seg;
        let found = self.windows.iter().position(|w| {
            w.seg == s && w.start <= check.rstart && check.rend <= w.start + w.raw.len() as u64
        });
        let wi = match found {
            Some(i) => i,
            None => {
                // The aligned window holding the read's first block, over the blocks the table shows as written
                // (every block before a written one is written: segments are appended in order), extended to
                // the read's last block when the read straddles the window's end. Aligned rather than starting
                // at the read, so readers going backward through the data file are served too.
                let first = b0 / nblocks * nblocks;
                let mut last = b1;
                while last + 1 < first + nblocks && segs.block_fill(s, last + 1) > 0 {
                    last += 1;
                }
                let wstart = first * bs;
                let wend = last * bs + segs.block_fill(s, last);
                let mut raw = if self.windows.len() < WINDOWS {
                    Vec::new()
                } else {
                    std::mem::take(&mut self.windows[self.next].raw)
                };
                raw.resize((wend - wstart) as usize, 0);
                segs.read_raw(s, wstart, &mut raw)?;
                self.reads += 1;
                let w = Window { seg: s, start: wstart, raw, verified: 0 };
                if self.windows.len() < WINDOWS {
                    self.windows.push(w);
                    self.windows.len() - 1
                } else {
                    let i = self.next;
                    self.windows[i] = w;
                    self.next = (i + 1) % WINDOWS;
                    i
                }
            }
        };
        let w = &mut self.windows[wi];
        let first = w.start / bs;
        for b in b0..=b1 {
            // The fill rules depend on this read's span; only the checksum is remembered.
            let fill = segs.check_fill(s, b, b1)?;
            let bit = 1u64 << (b - first);
            if w.verified & bit == 0 {
                let a = ((b - first) * bs) as usize;
                segs.verify_block(s, b, &w.raw[a..a + fill as usize])?;
                w.verified |= bit;
            }
        }
        let a = (check.seg_off - w.start) as usize;
        buf.copy_from_slice(&w.raw[a..a + buf.len()]);
        Ok(())
    }
}
