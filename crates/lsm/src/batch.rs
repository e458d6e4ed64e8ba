//! Write batches: a group of updates applied atomically, and the WAL record format.
//!
//! Layout (docs/formats/wal.md): `seq: u64 LE | count: u32 LE | record*`, record =
//! `kind: u8 | key: varint-len bytes | (Value) value: varint-len bytes | (RangeDelete) end: varint-len bytes`.
//! Record i gets sequence number `seq + i`.

use crate::coding::{Decoder, le_u32, le_u64, put_len_prefixed};
use crate::error::{Error, Result};
use crate::ikey::Kind;

const HEADER: usize = 12;

/// An atomic group of puts, deletes and range deletes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
}

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch { rep: vec![0; HEADER] }
    }
}

/// One decoded update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op<'a> {
    /// Set `key` to `value`.
    Put(&'a [u8], &'a [u8]),
    /// Delete `key`.
    Delete(&'a [u8]),
    /// Delete every key in `[start, end)`.
    DeleteRange(&'a [u8], &'a [u8]),
}

/// The longest key the engine stores: the memtable's key and its version entries carry 32-bit lengths, as
/// RocksDB's do.
pub const MAX_KEY_LEN: usize = u32::MAX as usize;
/// The longest value the engine stores (see [`MAX_KEY_LEN`]).
pub const MAX_VALUE_LEN: usize = u32::MAX as usize;

/// Refuses a key or value over its limit, before anything copies it.
pub(crate) fn check_lengths(keys: &[&[u8]], value: Option<&[u8]>) -> Result<()> {
    if let Some(k) = keys.iter().find(|k| k.len() > MAX_KEY_LEN) {
        return Err(Error::InvalidArgument(format!(
            "a key of {} bytes is over the limit of {MAX_KEY_LEN}",
            k.len()
        )));
    }
    match value {
        Some(v) if v.len() > MAX_VALUE_LEN => Err(Error::InvalidArgument(format!(
            "a value of {} bytes is over the limit of {MAX_VALUE_LEN}",
            v.len()
        ))),
        _ => Ok(()),
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch with room for `bytes` of encoded updates, so filling it does not reallocate (RocksDB's
    /// `reserved_bytes`). [`WriteBatch::encoded_len`] gives one update's size.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut rep = Vec::with_capacity(HEADER + bytes);
        rep.resize(HEADER, 0);
        WriteBatch { rep }
    }

    /// The most bytes one update with these two byte strings (key and value, or start and end; `b` empty for
    /// a delete) adds to a batch: the kind byte and two length prefixes of at most 10 bytes each.
    pub fn encoded_len(a: &[u8], b: &[u8]) -> usize {
        1 + 10 + a.len() + 10 + b.len()
    }

    /// Number of updates.
    pub fn count(&self) -> u32 {
        le_u32(&self.rep, 8).unwrap_or(0)
    }

    /// Whether the batch holds no update.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    fn bump(&mut self) {
        let c = self.count() + 1;
        self.rep[8..12].copy_from_slice(&c.to_le_bytes());
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.rep.push(Kind::Value as u8);
        put_len_prefixed(&mut self.rep, key);
        put_len_prefixed(&mut self.rep, value);
        self.bump();
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: &[u8]) {
        self.rep.push(Kind::Delete as u8);
        put_len_prefixed(&mut self.rep, key);
        self.bump();
    }

    /// Deletes `[start, end)`. An empty range (`start >= end`) is accepted and deletes nothing.
    pub fn delete_range(&mut self, start: &[u8], end: &[u8]) {
        self.rep.push(Kind::RangeDelete as u8);
        put_len_prefixed(&mut self.rep, start);
        put_len_prefixed(&mut self.rep, end);
        self.bump();
    }

    /// Appends every update of `other`.
    pub fn append(&mut self, other: &WriteBatch) {
        self.rep.extend_from_slice(&other.rep[HEADER..]);
        let c = self.count() + other.count();
        self.rep[8..12].copy_from_slice(&c.to_le_bytes());
    }

    /// The encoded size.
    pub fn size(&self) -> usize {
        self.rep.len()
    }

    /// The first sequence number (set when written).
    pub fn seq(&self) -> u64 {
        le_u64(&self.rep, 0).unwrap_or(0)
    }

    pub(crate) fn set_seq(&mut self, seq: u64) {
        self.rep[..8].copy_from_slice(&seq.to_le_bytes());
    }

    /// The encoded bytes (the WAL record).
    pub fn data(&self) -> &[u8] {
        &self.rep
    }

    /// Parses a WAL record, checking that it decodes completely and that the count matches.
    pub fn from_data(data: &[u8], file: &str) -> Result<WriteBatch> {
        let b = WriteBatch { rep: data.to_vec() };
        if data.len() < HEADER {
            return Err(Error::corruption(file, "write batch shorter than its header"));
        }
        let mut n = 0u32;
        for op in b.iter() {
            op.map_err(|m| Error::corruption(file, m))?;
            n += 1;
        }
        if n != b.count() {
            return Err(Error::corruption(file, "write batch count mismatch"));
        }
        Ok(b)
    }

    /// The updates in order.
    pub fn iter(&self) -> impl Iterator<Item = std::result::Result<Op<'_>, &'static str>> {
        let mut d = Decoder::new(self.rep.get(HEADER..).unwrap_or(&[]));
        let mut failed = false;
        std::iter::from_fn(move || {
            if failed || d.is_empty() {
                return None;
            }
            let r = (|| {
                let kind = d.u8().ok_or("truncated record")?;
                let key = d.len_prefixed().ok_or("truncated key")?;
                match Kind::from_u8(kind) {
                    Some(Kind::Value) => Ok(Op::Put(key, d.len_prefixed().ok_or("truncated value")?)),
                    Some(Kind::Delete) => Ok(Op::Delete(key)),
                    Some(Kind::RangeDelete) => {
                        Ok(Op::DeleteRange(key, d.len_prefixed().ok_or("truncated end")?))
                    }
                    None => Err("unknown record kind"),
                }
            })();
            failed = r.is_err();
            Some(r)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_sized_by_encoded_len_never_grows() {
        let long = vec![7u8; 300];
        for (a, b) in [(&b"k"[..], &b""[..]), (b"key", b"value"), (&long[..], &long[..200])] {
            for kind in 0..3 {
                let mut batch = WriteBatch::with_capacity(WriteBatch::encoded_len(a, b));
                let cap = batch.rep.capacity();
                match kind {
                    0 => batch.put(a, b),
                    1 => batch.delete(a),
                    _ => batch.delete_range(a, b),
                }
                assert_eq!(batch.rep.capacity(), cap, "kind {kind}, {} and {} bytes", a.len(), b.len());
                assert_eq!(batch.count(), 1);
                assert_eq!(WriteBatch::from_data(batch.data(), "t").unwrap(), batch);
            }
        }
    }

    #[test]
    fn batch_roundtrip_and_damage() {
        let mut b = WriteBatch::new();
        b.put(b"k", b"v");
        b.delete(b"d");
        b.delete_range(b"a", b"z");
        b.set_seq(77);
        let c = WriteBatch::from_data(b.data(), "wal").unwrap();
        assert_eq!(c.seq(), 77);
        let ops: Vec<_> = c.iter().map(|o| o.unwrap()).collect();
        assert_eq!(ops, vec![Op::Put(b"k", b"v"), Op::Delete(b"d"), Op::DeleteRange(b"a", b"z")]);
        for n in 0..b.data().len() {
            assert!(WriteBatch::from_data(&b.data()[..n], "wal").is_err());
        }
    }
}
