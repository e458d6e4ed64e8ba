//! The three public trace formats and the conversion of one line into a [`BlockOp`].
//!
//! | format | fields (comma-separated) |
//! |---|---|
//! | `alibaba` | `device_id,opcode(R\|W),offset_bytes,length_bytes,timestamp_us` |
//! | `tencent` | `timestamp_s,offset_sectors,size_sectors,io_type(0=read,1=write),volume_id` (512-byte sectors) |
//! | `msr` | `filetime,hostname,disk,Read\|Write,offset_bytes,size_bytes,response_time` |
//!
//! A request covering bytes `[offset, offset + length)` becomes blocks `offset / B ..= (offset + length − 1) / B`
//! for block size `B`: the start rounded down, the end rounded up. A zero-length request touches no block and is
//! malformed. Fields may carry surrounding spaces; blank lines are skipped (they are not requests). Timestamps and
//! response times are validated as numbers but not used: replay preserves trace order and omits time (RASK §7.1).
//! MSR volumes are named `hostname_disk`, as the MSR Cambridge files are (`hm_0`, `src1_2`).

use super::block_op::{BlockOp, IoKind};
use super::error::LineError;
use super::volumes::Volumes;

/// Bytes per sector in the Tencent format.
pub const SECTOR_SIZE: u64 = 512;

/// Default block size for the byte-to-block conversion.
pub const DEFAULT_BLOCK_SIZE: u64 = 4096;

/// Longest line accepted; real lines are well under 200 bytes.
pub(crate) const MAX_LINE: usize = 4096;

/// A public block-trace format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// Alibaba Cloud EBS block traces.
    Alibaba,
    /// Tencent CBS traces.
    Tencent,
    /// MSR Cambridge traces (SNIA IOTTA).
    Msr,
}

impl TraceFormat {
    /// Every format.
    pub const ALL: [TraceFormat; 3] = [TraceFormat::Alibaba, TraceFormat::Tencent, TraceFormat::Msr];

    /// `alibaba`, `tencent` or `msr`.
    pub fn name(&self) -> &'static str {
        match self {
            TraceFormat::Alibaba => "alibaba",
            TraceFormat::Tencent => "tencent",
            TraceFormat::Msr => "msr",
        }
    }

    /// Parses [`TraceFormat::name`].
    pub fn from_name(name: &str) -> Option<TraceFormat> {
        TraceFormat::ALL.into_iter().find(|f| f.name().eq_ignore_ascii_case(name))
    }

    /// Guesses the format of a trace from one of its lines: the format that parses it. Alibaba and Tencent both
    /// have five fields but differ in where the read/write code sits (`R|W` second, `0|1` fourth), so a valid line
    /// parses in at most one format. `None` if no format parses the line.
    pub fn sniff(line: &[u8]) -> Option<TraceFormat> {
        TraceFormat::ALL
            .into_iter()
            .find(|&f| matches!(parse_line(f, line, DEFAULT_BLOCK_SIZE, &mut Volumes::new()), Ok(Some(_))))
    }

    fn field_count(&self) -> usize {
        match self {
            TraceFormat::Alibaba | TraceFormat::Tencent => 5,
            TraceFormat::Msr => 7,
        }
    }
}

/// Parses one line (without its newline). `Ok(None)` for a blank line. New volume names are interned into
/// `volumes`. REQUIRES: `block_size > 0` (a zero block size is reported as an overflow, never a panic).
pub fn parse_line(
    format: TraceFormat,
    line: &[u8],
    block_size: u64,
    volumes: &mut Volumes,
) -> Result<Option<BlockOp>, LineError> {
    if line.len() > MAX_LINE {
        return Err(LineError::TooLong { len: line.len() });
    }
    let text = std::str::from_utf8(line).map_err(|_| LineError::BadEncoding)?;
    if text.bytes().any(|b| (b < 0x20 && b != b'\t' && b != b'\r') || b == 0x7f) {
        return Err(LineError::BadEncoding);
    }
    if text.trim().is_empty() {
        return Ok(None);
    }
    let mut fields = [""; 7];
    let mut found = 0usize;
    for f in text.split(',') {
        if found < fields.len() {
            fields[found] = f.trim();
        }
        found += 1;
    }
    let expected = format.field_count();
    if found != expected {
        return Err(LineError::FieldCount { expected, found });
    }
    let (volume, kind, offset, length) = match format {
        TraceFormat::Alibaba => {
            let volume = volume_name(fields[0], "device_id")?;
            let kind = match fields[1] {
                "R" => IoKind::Read,
                "W" => IoKind::Write,
                _ => return Err(LineError::BadOpcode),
            };
            let offset = number(fields[2], "offset_bytes")?;
            let length = number(fields[3], "length_bytes")?;
            timestamp(fields[4], "timestamp_us")?;
            (volumes.intern(volume.as_bytes()), kind, offset, length)
        }
        TraceFormat::Tencent => {
            timestamp(fields[0], "timestamp_s")?;
            let offset =
                number(fields[1], "offset_sectors")?.checked_mul(SECTOR_SIZE).ok_or(LineError::Overflow)?;
            let length =
                number(fields[2], "size_sectors")?.checked_mul(SECTOR_SIZE).ok_or(LineError::Overflow)?;
            let kind = match fields[3] {
                "0" => IoKind::Read,
                "1" => IoKind::Write,
                _ => return Err(LineError::BadOpcode),
            };
            let volume = volume_name(fields[4], "volume_id")?;
            (volumes.intern(volume.as_bytes()), kind, offset, length)
        }
        TraceFormat::Msr => {
            timestamp(fields[0], "filetime")?;
            let host = volume_name(fields[1], "hostname")?;
            let disk = number(fields[2], "disk")?;
            let kind = match fields[3] {
                "Read" => IoKind::Read,
                "Write" => IoKind::Write,
                _ => return Err(LineError::BadOpcode),
            };
            let offset = number(fields[4], "offset_bytes")?;
            let length = number(fields[5], "size_bytes")?;
            timestamp(fields[6], "response_time")?;
            let name = format!("{host}_{disk}");
            (volumes.intern(name.as_bytes()), kind, offset, length)
        }
    };
    let (first_block, last_block) = to_blocks(offset, length, block_size)?;
    Ok(Some(BlockOp { volume, kind, first_block, last_block }))
}

/// Bytes `[offset, offset + length)` as inclusive blocks, start rounded down and end rounded up.
pub(crate) fn to_blocks(offset: u64, length: u64, block_size: u64) -> Result<(u64, u64), LineError> {
    if length == 0 {
        return Err(LineError::ZeroLength);
    }
    if block_size == 0 {
        return Err(LineError::Overflow);
    }
    // The last byte, not one past it: a request may end at the last byte of the 64-bit space.
    let last = offset.checked_add(length - 1).ok_or(LineError::Overflow)?;
    Ok((offset / block_size, last / block_size))
}

fn volume_name<'a>(field: &'a str, name: &'static str) -> Result<&'a str, LineError> {
    if field.is_empty() { Err(LineError::EmptyField { field: name }) } else { Ok(field) }
}

/// A decimal u64: digits only, no sign, no overflow.
fn number(field: &str, name: &'static str) -> Result<u64, LineError> {
    if field.is_empty() {
        return Err(LineError::EmptyField { field: name });
    }
    if !field.bytes().all(|b| b.is_ascii_digit()) {
        return Err(LineError::BadNumber { field: name });
    }
    field.parse::<u64>().map_err(|_| LineError::BadNumber { field: name })
}

/// A non-negative decimal, optionally with a fractional part (some trace versions write fractional seconds).
fn timestamp(field: &str, name: &'static str) -> Result<(), LineError> {
    let (int, frac) = match field.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (field, None),
    };
    if int.is_empty() {
        return Err(LineError::EmptyField { field: name });
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || frac.is_some_and(|f| !digits(f)) {
        return Err(LineError::BadNumber { field: name });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing() {
        assert_eq!(TraceFormat::sniff(b"1,W,0,4096,1"), Some(TraceFormat::Alibaba));
        assert_eq!(TraceFormat::sniff(b"1,0,8,1,1063"), Some(TraceFormat::Tencent));
        assert_eq!(TraceFormat::sniff(b"1,hm,0,Read,0,4096,1"), Some(TraceFormat::Msr));
        assert_eq!(TraceFormat::sniff(b"garbage"), None);
        assert_eq!(TraceFormat::from_name("MSR"), Some(TraceFormat::Msr));
    }

    #[test]
    fn rounding_start_down_end_up() {
        assert_eq!(to_blocks(0, 4096, 4096), Ok((0, 0)));
        assert_eq!(to_blocks(0, 4097, 4096), Ok((0, 1)));
        assert_eq!(to_blocks(4095, 2, 4096), Ok((0, 1)));
        assert_eq!(to_blocks(8192, 512, 4096), Ok((2, 2)));
        assert_eq!(to_blocks(1, 1, 4096), Ok((0, 0)));
        assert_eq!(to_blocks(0, 0, 4096), Err(LineError::ZeroLength));
        assert_eq!(to_blocks(u64::MAX, 2, 4096), Err(LineError::Overflow));
        // Regression: a request ending at the last byte of the 64-bit space was refused as an overflow.
        assert_eq!(to_blocks(u64::MAX - 4095, 4096, 4096), Ok((u64::MAX / 4096, u64::MAX / 4096)));
        assert_eq!(to_blocks(u64::MAX, 1, 1), Ok((u64::MAX, u64::MAX)));
        assert_eq!(to_blocks(u64::MAX - 1, 1, 1), Ok((u64::MAX - 1, u64::MAX - 1)));
        assert_eq!(to_blocks(0, 1, 0), Err(LineError::Overflow));
    }
}
