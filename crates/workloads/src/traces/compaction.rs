//! I/O compaction (RASK §3.1): merge temporally close writes to consecutive blocks into one write.
//!
//! In Alibaba's EBS a write is journalled, acknowledged and cached in the SegmentCache; when the cache reaches its
//! threshold (512 KiB = 128 blocks of 4 KiB, "roughly 35.2 write requests" at the average 3.63 blocks per write),
//! it is flushed to the data files. I/O compaction uses that flush: the cached writes are *reordered* by block
//! address and *merged* into consecutive writes (CWs), and each CW is written and indexed as one range instead of
//! one entry per request. The paper's example: writes [1,4], [11,12], [5,6], [7,8] cached together flush as the CWs
//! [1,8] and [11,12].
//!
//! This implementation, per volume (each virtual disk has its own cache):
//! - A write is appended to its volume's buffer; the buffer's size is the sum of the buffered writes' lengths (the
//!   cache holds each write's data, so an overwritten block counts again).
//! - When the size reaches the window (`>= window_blocks`, default 128), the buffer is flushed: writes are sorted by
//!   first block and swept; a write that overlaps or touches the current CW (`first <= cw.last + 1`) extends it,
//!   otherwise the CW is emitted and a new one starts. CWs are emitted in ascending block order. A single write
//!   larger than the window flushes immediately, together with what was buffered.
//! - Overlapping writes in one flush merge into one CW covering their union: the flush writes the newest data of
//!   every block once, so one range describes it (within the CW, later writes win block by block, which a replay
//!   that stores per-CW values reflects by construction).
//! - Reads are passed through at their position in the trace. In EBS a read of a block still in the SegmentCache is
//!   served from the cache; the index sees the read as issued, so the read is not delayed or reordered.
//! - [`IoCompactor::finish`] flushes every volume's remainder (end of trace), in volume-id order.
//!
//! `window_blocks = 0` disables compaction: every write passes through unchanged.

use std::collections::VecDeque;

use super::block_op::{BlockOp, IoKind};

/// The paper's window: the SegmentCache size, 128 blocks.
pub const DEFAULT_WINDOW_BLOCKS: u64 = 128;

/// Counters of a compaction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Writes received.
    pub writes_in: u64,
    /// Writes (CWs) emitted.
    pub writes_out: u64,
    /// Blocks written by the received writes (with repeats).
    pub blocks_in: u64,
    /// Blocks covered by the emitted CWs.
    pub blocks_out: u64,
    /// Reads passed through.
    pub reads: u64,
    /// Buffer flushes.
    pub flushes: u64,
}

#[derive(Debug, Default, Clone)]
struct VolumeBuffer {
    writes: Vec<BlockOp>,
    blocks: u64,
}

/// Incremental I/O compaction: [`push`](IoCompactor::push) operations in trace order, [`pop`](IoCompactor::pop)
/// the compacted stream, [`finish`](IoCompactor::finish) at the end.
#[derive(Debug, Clone)]
pub struct IoCompactor {
    window_blocks: u64,
    buffers: Vec<VolumeBuffer>,
    out: VecDeque<BlockOp>,
    stats: CompactionStats,
}

impl IoCompactor {
    /// A compactor with window `window_blocks` (0 disables merging).
    pub fn new(window_blocks: u64) -> IoCompactor {
        IoCompactor {
            window_blocks,
            buffers: Vec::new(),
            out: VecDeque::new(),
            stats: CompactionStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> CompactionStats {
        self.stats
    }

    /// Feeds the next operation of the trace.
    pub fn push(&mut self, op: BlockOp) {
        match op.kind {
            IoKind::Read => {
                self.stats.reads += 1;
                self.out.push_back(op);
            }
            IoKind::Write => {
                self.stats.writes_in += 1;
                self.stats.blocks_in += op.blocks();
                if self.window_blocks == 0 {
                    self.emit(op);
                    return;
                }
                let v = op.volume as usize;
                if self.buffers.len() <= v {
                    self.buffers.resize_with(v + 1, VolumeBuffer::default);
                }
                let buf = &mut self.buffers[v];
                buf.writes.push(op);
                buf.blocks = buf.blocks.saturating_add(op.blocks());
                if buf.blocks >= self.window_blocks {
                    self.flush(v);
                }
            }
        }
    }

    /// The next compacted operation, if one is ready.
    pub fn pop(&mut self) -> Option<BlockOp> {
        self.out.pop_front()
    }

    /// Flushes every volume's buffered writes (call at the end of the trace).
    pub fn finish(&mut self) {
        for v in 0..self.buffers.len() {
            self.flush(v);
        }
    }

    fn emit(&mut self, op: BlockOp) {
        self.stats.writes_out += 1;
        self.stats.blocks_out += op.blocks();
        self.out.push_back(op);
    }

    fn flush(&mut self, v: usize) {
        let mut writes = std::mem::take(&mut self.buffers[v].writes);
        self.buffers[v].blocks = 0;
        if writes.is_empty() {
            return;
        }
        self.stats.flushes += 1;
        // Stable sort: equal starts keep arrival order (irrelevant to the union, but deterministic).
        writes.sort_by_key(|w| w.first_block);
        let mut cw = writes[0];
        for w in &writes[1..] {
            if w.first_block <= cw.last_block.saturating_add(1) {
                cw.last_block = cw.last_block.max(w.last_block);
            } else {
                self.emit(cw);
                cw = *w;
            }
        }
        self.emit(cw);
        // Give the allocation back to the buffer for the next window.
        writes.clear();
        self.buffers[v].writes = writes;
    }
}

/// I/O compaction as an iterator adapter over a trace's operations.
#[derive(Debug, Clone)]
pub struct Compacted<I> {
    inner: I,
    compactor: IoCompactor,
    finished: bool,
}

impl<I: Iterator<Item = BlockOp>> Compacted<I> {
    /// Compacts `inner` with window `window_blocks`.
    pub fn new(inner: I, window_blocks: u64) -> Compacted<I> {
        Compacted { inner, compactor: IoCompactor::new(window_blocks), finished: false }
    }

    /// Counters so far.
    pub fn stats(&self) -> CompactionStats {
        self.compactor.stats()
    }
}

impl<I: Iterator<Item = BlockOp>> Iterator for Compacted<I> {
    type Item = BlockOp;

    fn next(&mut self) -> Option<BlockOp> {
        loop {
            if let Some(op) = self.compactor.pop() {
                return Some(op);
            }
            if self.finished {
                return None;
            }
            match self.inner.next() {
                Some(op) => self.compactor.push(op),
                None => {
                    self.compactor.finish();
                    self.finished = true;
                }
            }
        }
    }
}

/// I/O compaction over a fallible stream (a [`crate::traces::TraceReader`] or [`crate::traces::TraceSource`]):
/// operations are compacted as by [`Compacted`]; an error is passed through at once and ends the stream without
/// flushing what was buffered (a trace that failed to read is not replayed to its end).
#[derive(Debug)]
pub struct TryCompacted<I> {
    inner: I,
    compactor: IoCompactor,
    finished: bool,
}

impl<I, E> TryCompacted<I>
where
    I: Iterator<Item = Result<BlockOp, E>>,
{
    /// Compacts `inner` with window `window_blocks`.
    pub fn new(inner: I, window_blocks: u64) -> TryCompacted<I> {
        TryCompacted { inner, compactor: IoCompactor::new(window_blocks), finished: false }
    }

    /// Counters so far.
    pub fn stats(&self) -> CompactionStats {
        self.compactor.stats()
    }

    /// The wrapped iterator (e.g. to read a [`crate::traces::TraceReader`]'s counters).
    pub fn inner(&self) -> &I {
        &self.inner
    }
}

impl<I, E> Iterator for TryCompacted<I>
where
    I: Iterator<Item = Result<BlockOp, E>>,
{
    type Item = Result<BlockOp, E>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(op) = self.compactor.pop() {
                return Some(Ok(op));
            }
            if self.finished {
                return None;
            }
            match self.inner.next() {
                Some(Ok(op)) => self.compactor.push(op),
                Some(Err(e)) => {
                    self.finished = true;
                    return Some(Err(e));
                }
                None => {
                    self.compactor.finish();
                    self.finished = true;
                }
            }
        }
    }
}
