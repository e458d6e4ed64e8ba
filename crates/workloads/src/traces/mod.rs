//! Block I/O traces: parsers for the public Alibaba, Tencent CBS and MSR Cambridge formats, RASK's I/O compaction,
//! trace statistics, and a synthetic EBS trace generator.
//!
//! Everything here speaks [`BlockOp`]: one read or write of an inclusive block range `[first_block, last_block]` on
//! one volume. Byte offsets and lengths from a trace become blocks by rounding the start down and the end up
//! (`rangedb rask replay` spec). Volumes are interned to dense ids ([`Volumes`]) in order of first appearance, so
//! per-volume state can live in a `Vec`; their names come back through [`Volumes::name`].
//!
//! - [`TraceReader`] parses a trace (plain or gzip, detected from the magic bytes) line by line. Malformed lines are
//!   typed errors with their line number ([`TraceError::Malformed`]); in strict mode the first one ends the read, in
//!   lenient mode they are counted and the first few kept ([`ReadStats`]). Nothing panics on any input.
//! - [`IoCompactor`] implements §3.1's I/O compaction: writes are buffered per volume like EBS's SegmentCache and,
//!   when the buffer reaches the window (default 128 blocks), reordered and merged into consecutive writes (CWs).
//! - [`analyze`] measures what RASK §2–3 reports of a trace: average write length, long-CW ratio, and where reads
//!   start relative to the CW they read.
//! - [`BlockModel`] is the per-block reference model of a replay and writes the `--dump` format.
//! - [`SyntheticTrace`] generates a seeded EBS-like trace with those statistics as parameters, and [`write_trace`]
//!   writes any [`BlockOp`] stream in one of the public formats, so a synthetic trace can be replayed from a file
//!   exactly like a downloaded one. [`TraceSource`] hides which of the two a replay reads.

mod analysis;
mod block_op;
mod compaction;
mod cw_map;
mod error;
mod format;
mod model;
mod reader;
mod source;
mod synthetic;
mod volumes;
mod writer;

pub use analysis::{AnalysisOptions, Analyzer, DEFAULT_CW_WINDOW_WRITES, TraceStats, analyze};
pub use block_op::{BlockOp, IoKind, split_by_volume};
pub use compaction::{Compacted, CompactionStats, DEFAULT_WINDOW_BLOCKS, IoCompactor, TryCompacted};
pub use error::{LineError, TraceError};
pub use format::{DEFAULT_BLOCK_SIZE, SECTOR_SIZE, TraceFormat, parse_line};
pub use model::{BlockModel, BlockValue};
pub use reader::{ReadStats, TraceOptions, TraceReader};
pub use source::TraceSource;
pub use synthetic::{SyntheticOptions, SyntheticTrace};
pub use volumes::Volumes;
pub use writer::write_trace;
