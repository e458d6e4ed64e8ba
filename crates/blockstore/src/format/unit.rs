//! Compression units: the blocks of one write as stored in a data file, LZ4-compressed when that pays.

use super::{UNIT_HEADER_LEN, crc, u32_at};
use crate::{Error, Result};

/// Units longer than this are probed before LZ4 runs over them (see [`encode_unit`]).
pub const PROBE_MIN_BYTES: usize = 4096;
/// The probe takes this many slices, evenly spaced through the unit, of 1/64 of the unit each, at most 512 bytes.
const PROBE_SLICES: usize = 8;
const PROBE_SLICE_MAX: usize = 512;

/// Encodes a compression unit from the concatenation of `parts` (whole blocks) and appends it to `out`: LZ4 when
/// it shrinks the data, else the raw bytes. Without `compress` the unit is stored raw (the caller knows the data
/// does not compress: garbage collection relocating data that was stored raw).
///
/// Incompressible data (encrypted, already compressed, random) would cost a full LZ4 pass that saves nothing, the
/// largest cost of the write path. So a unit over [`PROBE_MIN_BYTES`] is probed first, as file systems with
/// transparent compression do (btrfs's heuristic, ZFS's early abort): LZ4 over 8 slices spread through the unit,
/// 1/8 of it and at most 4 KiB in all; if the sample does not shrink by at least 1/16, the unit is stored raw
/// without compressing it. The probe costs 1/8 of a full pass, 1/32 on a 128 KiB unit. Its misjudgements cost
/// only space (a compressible unit stored raw) and the format does not change: readers see an ordinary raw unit.
pub fn encode_unit(parts: &[&[u8]], compress: bool, out: &mut Vec<u8>) {
    let raw_len: usize = parts.iter().map(|p| p.len()).sum();
    let start = out.len();
    out.extend_from_slice(&[0u8; UNIT_HEADER_LEN]);
    let mut stored = raw_len;
    if compress && (raw_len <= PROBE_MIN_BYTES || probe_compresses(parts, raw_len)) {
        let joined;
        let input: &[u8] = match parts {
            [one] => one,
            _ => {
                joined = parts.concat();
                &joined
            }
        };
        let at = out.len();
        out.resize(at + lz4_flex::block::get_maximum_output_size(raw_len), 0);
        match lz4_flex::block::compress_into(input, &mut out[at..]) {
            Ok(n) if n < raw_len => stored = n,
            _ => {}
        }
        out.truncate(at + if stored < raw_len { stored } else { 0 });
    }
    if stored == raw_len {
        for p in parts {
            out.extend_from_slice(p);
        }
    }
    out[start + 4..start + 8].copy_from_slice(&(stored as u32).to_le_bytes());
    out[start + 8..start + 12].copy_from_slice(&(raw_len as u32).to_le_bytes());
    let c = crc(&[&out[start + 4..]]);
    out[start..start + 4].copy_from_slice(&c.to_le_bytes());
}

/// Whether LZ4 shrinks a sample of the unit by at least 1/16. REQUIRES: `raw_len` is the parts' total length.
fn probe_compresses(parts: &[&[u8]], raw_len: usize) -> bool {
    let slice = (raw_len / (8 * PROBE_SLICES)).clamp(1, PROBE_SLICE_MAX);
    let mut sample = Vec::with_capacity(PROBE_SLICES * slice);
    let stride = raw_len / PROBE_SLICES;
    for i in 0..PROBE_SLICES {
        let mut at = i * stride;
        let mut want = slice;
        for p in parts {
            if want == 0 {
                break;
            }
            if at >= p.len() {
                at -= p.len();
                continue;
            }
            let take = want.min(p.len() - at);
            sample.extend_from_slice(&p[at..at + take]);
            want -= take;
            at = 0;
        }
    }
    let c = lz4_flex::block::compress(&sample);
    c.len() * 16 <= sample.len() * 15
}

/// The length (header included) of the unit at the start of `b` if its stored length fits in `b` and its checksum
/// matches; `None` otherwise (recovery's test for units a crash may have torn).
pub fn intact_unit_len(b: &[u8]) -> Option<usize> {
    if b.len() < UNIT_HEADER_LEN {
        return None;
    }
    let end = UNIT_HEADER_LEN.checked_add(u32_at(b, 4) as usize).filter(|&e| e <= b.len())?;
    (crc(&[&b[4..end]]) == u32_at(b, 0)).then_some(end)
}

/// Decodes a unit read from a data file (`b` = header + payload) that must hold `raw_len` bytes.
pub fn decode_unit(b: &[u8], raw_len: usize) -> Result<Vec<u8>> {
    if check_unit(b, raw_len)? {
        Ok(b[UNIT_HEADER_LEN..].to_vec())
    } else {
        decompress_payload(&b[UNIT_HEADER_LEN..], raw_len)
    }
}

/// [`decode_unit`] taking the buffer: a raw unit's bytes are returned in it, without a second allocation.
pub fn decode_unit_owned(mut b: Vec<u8>, raw_len: usize) -> Result<Vec<u8>> {
    if check_unit(&b, raw_len)? {
        b.drain(..UNIT_HEADER_LEN);
        Ok(b)
    } else {
        decompress_payload(&b[UNIT_HEADER_LEN..], raw_len)
    }
}

/// Checks a unit's lengths against the index's and its checksum; returns whether it is stored raw.
fn check_unit(b: &[u8], raw_len: usize) -> Result<bool> {
    if b.len() < UNIT_HEADER_LEN {
        return Err(Error::Corruption("unit shorter than its header".into()));
    }
    let stored = u32_at(b, 4) as usize;
    let rawlen = u32_at(b, 8) as usize;
    if stored != b.len() - UNIT_HEADER_LEN || rawlen != raw_len {
        return Err(Error::Corruption(format!(
            "unit header says {stored}/{rawlen} bytes, index says {}/{raw_len}",
            b.len() - UNIT_HEADER_LEN
        )));
    }
    if crc(&[&b[4..]]) != u32_at(b, 0) {
        return Err(Error::Corruption("unit checksum mismatch".into()));
    }
    Ok(stored == rawlen)
}

fn decompress_payload(payload: &[u8], raw_len: usize) -> Result<Vec<u8>> {
    let out = lz4_flex::block::decompress(payload, raw_len)
        .map_err(|e| Error::Corruption(format!("unit does not decompress: {e}")))?;
    if out.len() != raw_len {
        return Err(Error::Corruption("unit decompressed to the wrong length".into()));
    }
    Ok(out)
}
