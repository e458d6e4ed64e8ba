//! Writing a [`BlockOp`] stream in one of the public formats, so a synthetic trace can be stored, shared and replayed
//! through the same parser as a downloaded one.
//!
//! Byte offsets and lengths are `first_block · B` and `blocks · B` for block size `B`, so parsing the output with
//! the same `B` gives back the same operations. Timestamps are synthetic and increasing: Alibaba microseconds = the
//! operation's index; Tencent seconds = index / 1000; MSR Windows filetime (100 ns units) starting at 2007-02-22,
//! when the MSR traces begin, 10 µs apart; MSR response times are 0. MSR needs a host and a disk number: a volume
//! named `host_N` (N decimal) is written as host `host`, disk `N` and parses back to the same name; any other name
//! is written as host = the name, disk 0, and parses back as `name_0`.

use std::io::Write;

use super::block_op::{BlockOp, IoKind};
use super::error::TraceError;
use super::format::{SECTOR_SIZE, TraceFormat};
use super::volumes::Volumes;

/// Filetime of 2007-02-22 00:00 UTC.
const MSR_EPOCH_FILETIME: u64 = 128_166_372_000_000_000;

/// Writes `ops` to `out` in `format`, one line each. Returns the number of lines written.
pub fn write_trace(
    out: &mut impl Write,
    format: TraceFormat,
    block_size: u64,
    volumes: &Volumes,
    ops: impl IntoIterator<Item = BlockOp>,
) -> Result<u64, TraceError> {
    if block_size == 0 {
        return Err(TraceError::InvalidArgument("block size must be positive".into()));
    }
    if format == TraceFormat::Tencent && !block_size.is_multiple_of(SECTOR_SIZE) {
        return Err(TraceError::InvalidArgument(format!(
            "the Tencent format counts 512-byte sectors; block size {block_size} is not a multiple"
        )));
    }
    let mut n = 0u64;
    for op in ops {
        let overflow = || TraceError::InvalidArgument(format!("{op:?} does not fit in 64-bit byte offsets"));
        let offset = op.first_block.checked_mul(block_size).ok_or_else(overflow)?;
        let length = op.blocks().checked_mul(block_size).ok_or_else(overflow)?;
        offset.checked_add(length).ok_or_else(overflow)?;
        let name = volumes.name(op.volume);
        let name = if name.is_empty() { op.volume.to_string() } else { name.to_string() };
        match format {
            TraceFormat::Alibaba => {
                let code = if op.kind == IoKind::Read { 'R' } else { 'W' };
                writeln!(out, "{name},{code},{offset},{length},{n}")?;
            }
            TraceFormat::Tencent => {
                let code = if op.kind == IoKind::Read { 0 } else { 1 };
                writeln!(
                    out,
                    "{},{},{},{code},{name}",
                    n / 1000,
                    offset / SECTOR_SIZE,
                    length / SECTOR_SIZE
                )?;
            }
            TraceFormat::Msr => {
                let (host, disk) = match name.rsplit_once('_') {
                    Some((h, d))
                        if !h.is_empty() && !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) =>
                    {
                        (h.to_string(), d.to_string())
                    }
                    _ => (name.clone(), "0".to_string()),
                };
                let code = if op.kind == IoKind::Read { "Read" } else { "Write" };
                let time = MSR_EPOCH_FILETIME + n * 100;
                writeln!(out, "{time},{host},{disk},{code},{offset},{length},0")?;
            }
        }
        n += 1;
    }
    Ok(n)
}
