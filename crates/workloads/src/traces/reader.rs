//! Streaming trace reader: plain or gzip input, strict or lenient handling of malformed lines.
//!
//! The reader never holds more than one line (capped at 4 KiB; longer lines are drained and reported as
//! [`LineError::TooLong`]), so a multi-gigabyte trace streams in constant memory and a file without newlines cannot
//! exhaust it. Gzip is detected from the magic bytes `1f 8b`, not the file name; concatenated gzip members (as
//! `cat a.gz b.gz` produces) are read as one stream.
//!
//! Errors are kept apart by cause: [`TraceError::Io`] for the device, [`TraceError::Corrupt`] for a broken gzip
//! stream, [`TraceError::Malformed`] for a bad line. Lenient mode (the default of `rangedb rask replay`) skips
//! malformed lines but counts them and keeps the first few with their line numbers in [`ReadStats`], so none is ever
//! dropped silently; strict mode stops at the first.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use flate2::bufread::MultiGzDecoder;

use super::block_op::{BlockOp, IoKind};
use super::error::{LineError, TraceError};
use super::format::{DEFAULT_BLOCK_SIZE, MAX_LINE, TraceFormat, parse_line};
use super::volumes::Volumes;

/// How to read a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceOptions {
    /// The trace's format.
    pub format: TraceFormat,
    /// Block size for the byte-to-block conversion. Default 4096.
    pub block_size: u64,
    /// Stop at the first malformed line (`--strict`). Default false: count and skip.
    pub strict: bool,
    /// Only yield this volume's operations (`--volume ID`); others are counted in [`ReadStats::filtered`].
    pub volume: Option<String>,
    /// How many malformed lines [`ReadStats::first_malformed`] keeps. Default 10.
    pub keep_malformed: usize,
}

impl TraceOptions {
    /// Defaults for `format`.
    pub fn new(format: TraceFormat) -> TraceOptions {
        TraceOptions {
            format,
            block_size: DEFAULT_BLOCK_SIZE,
            strict: false,
            volume: None,
            keep_malformed: 10,
        }
    }

    /// Checks the options.
    pub fn validate(&self) -> Result<(), TraceError> {
        if self.block_size == 0 {
            return Err(TraceError::InvalidArgument("block size must be positive".into()));
        }
        Ok(())
    }
}

/// What a read has seen so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Lines read, including blank and malformed ones.
    pub lines: u64,
    /// Blank lines skipped.
    pub blank: u64,
    /// Operations yielded.
    pub ops: u64,
    /// Reads yielded.
    pub reads: u64,
    /// Writes yielded.
    pub writes: u64,
    /// Operations of other volumes skipped by [`TraceOptions::volume`].
    pub filtered: u64,
    /// Malformed lines (in strict mode at most 1).
    pub malformed: u64,
    /// The first malformed lines: (1-based line number, error).
    pub first_malformed: Vec<(u64, LineError)>,
    /// Whether the input was gzip-compressed.
    pub gzip: bool,
}

/// Reads [`BlockOp`]s from a trace. An iterator of `Result<BlockOp, TraceError>`; after an error it yields nothing.
pub struct TraceReader {
    src: Box<dyn BufRead + Send>,
    opts: TraceOptions,
    volumes: Volumes,
    stats: ReadStats,
    line: Vec<u8>,
    done: bool,
}

impl std::fmt::Debug for TraceReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceReader")
            .field("opts", &self.opts)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl TraceReader {
    /// Opens a trace file. Traces are inputs to replay, not database state, so this reads the file directly rather
    /// than through the storage layer.
    pub fn open(path: &Path, opts: TraceOptions) -> Result<TraceReader, TraceError> {
        let file = File::open(path)?;
        TraceReader::from_reader(file, opts)
    }

    /// Reads a trace from any byte source (plain or gzip).
    pub fn from_reader(
        src: impl Read + Send + 'static,
        opts: TraceOptions,
    ) -> Result<TraceReader, TraceError> {
        opts.validate()?;
        let mut buffered = BufReader::with_capacity(1 << 16, src);
        let head = buffered.fill_buf()?;
        let gzip = head.len() >= 2 && head[0] == 0x1f && head[1] == 0x8b;
        let src: Box<dyn BufRead + Send> = if gzip {
            Box::new(BufReader::with_capacity(1 << 16, MultiGzDecoder::new(buffered)))
        } else {
            Box::new(buffered)
        };
        Ok(TraceReader {
            src,
            opts,
            volumes: Volumes::new(),
            stats: ReadStats { gzip, ..ReadStats::default() },
            line: Vec::with_capacity(256),
            done: false,
        })
    }

    /// Volumes seen so far (ids of the yielded operations index it).
    pub fn volumes(&self) -> &Volumes {
        &self.volumes
    }

    /// Counters so far.
    pub fn stats(&self) -> &ReadStats {
        &self.stats
    }

    /// The options in force.
    pub fn options(&self) -> &TraceOptions {
        &self.opts
    }

    /// Consumes the reader, returning the volumes and counters.
    pub fn into_parts(self) -> (Volumes, ReadStats) {
        (self.volumes, self.stats)
    }

    /// Reads the next line into `self.line` (at most `MAX_LINE + 1` bytes kept). Returns the line's full length, or
    /// `None` at the end of input.
    fn read_line(&mut self) -> io::Result<Option<usize>> {
        self.line.clear();
        let mut total = 0usize;
        loop {
            let chunk = match self.src.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                return Ok(if total == 0 { None } else { Some(total) });
            }
            let (take, end_of_line) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            let room = (MAX_LINE + 1).saturating_sub(self.line.len());
            self.line.extend_from_slice(&chunk[..take.min(room)]);
            total += take;
            self.src.consume(if end_of_line { take + 1 } else { take });
            if end_of_line {
                return Ok(Some(total));
            }
        }
    }

    fn io_error(&mut self, e: io::Error) -> TraceError {
        self.done = true;
        let line = self.stats.lines + 1;
        if self.stats.gzip
            && matches!(
                e.kind(),
                io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
            )
        {
            TraceError::Corrupt { line, detail: e.to_string() }
        } else {
            TraceError::Io(e)
        }
    }
}

impl Iterator for TraceReader {
    type Item = Result<BlockOp, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let len = match self.read_line() {
                Ok(Some(len)) => len,
                Ok(None) => {
                    self.done = true;
                    return None;
                }
                Err(e) => return Some(Err(self.io_error(e))),
            };
            self.stats.lines += 1;
            let line_no = self.stats.lines;
            let parsed = if len > MAX_LINE {
                Err(LineError::TooLong { len })
            } else {
                parse_line(self.opts.format, &self.line, self.opts.block_size, &mut self.volumes)
            };
            match parsed {
                Ok(None) => self.stats.blank += 1,
                Ok(Some(op)) => {
                    if let Some(only) = &self.opts.volume
                        && self.volumes.name(op.volume) != only
                    {
                        self.stats.filtered += 1;
                        continue;
                    }
                    self.stats.ops += 1;
                    match op.kind {
                        IoKind::Read => self.stats.reads += 1,
                        IoKind::Write => self.stats.writes += 1,
                    }
                    return Some(Ok(op));
                }
                Err(error) => {
                    self.stats.malformed += 1;
                    if self.stats.first_malformed.len() < self.opts.keep_malformed {
                        self.stats.first_malformed.push((line_no, error.clone()));
                    }
                    if self.opts.strict {
                        self.done = true;
                        return Some(Err(TraceError::Malformed { line: line_no, error }));
                    }
                }
            }
        }
        None
    }
}
