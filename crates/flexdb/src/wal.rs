//! The write-ahead log: checksummed batches of operations, one file per memtable (see `docs/formats/flexdb.md`).
//!
//! A record is `crc32c u32 LE | len u32 LE | payload[len]`, the checksum covering the length and the payload. A
//! payload is a batch of operations, each `op u8 | varint klen | key` followed, for a put, by `varint vlen |
//! value` and, for a range delete, by `varint elen | end`. Puts with empty values are ordinary puts (`op = 1`);
//! deletes are a different opcode, so the two can never be confused.
//!
//! Files are `wal-NNNNNNNNNNNN.log`, numbered in creation order; recovery replays every one of them, oldest first,
//! whatever its size. A log is synced when it is retired (its memtable frozen), so a torn or damaged record can
//! only be legitimate at the tail of the newest log; anywhere else it is corruption.
//!
//! Within the newest log, sync marks separate a torn tail from damaged synced bytes. After a sync the writer's
//! next append starts with a *sync mark* record, payload `4 | durable u64 LE`, naming the offset through which
//! the sync made the log durable (`close` ends the log with one). A bad record before an offset a later valid mark
//! names had been synced, so it is corruption. Past every mark a bad record is a torn tail when a crash can
//! explain it: the file ends inside it, or a sector piece of it reads as never written (zeros; a log is only
//! appended to a fresh file, see `vfs::torn`). Valid records after a bad one prove nothing there (unsynced
//! sectors persist in any mix); a flipped bit in a fully written record is corruption. A writer whose write or
//! sync failed writes no more, so the leftovers of a failed write are never followed by data.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::record::{get_varint, put_varint, varint_len};

/// Largest record buffer a writer keeps between batches.
const SCRATCH_KEEP: usize = 1 << 20;

/// One logged operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Sets `key` to `value` (possibly empty).
    Put(Box<[u8]>, Box<[u8]>),
    /// Deletes `key`.
    Delete(Box<[u8]>),
    /// Deletes every key in `[start, end)`.
    DeleteRange(Box<[u8]>, Box<[u8]>),
}

const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;
const OP_DELETE_RANGE: u8 = 3;
/// First payload byte of a sync mark (not an operation: batches start with an opcode, or are empty).
const OP_SYNC_MARK: u8 = 4;
/// Bytes of a sync-mark record: header, marker byte, durable offset.
const MARK_LEN: usize = 8 + 1 + 8;
/// Largest record a sync mark is copied in front of, to go out in one write.
const MARK_COPY_MAX: usize = 64 << 10;

/// A sync-mark record naming `durable`.
fn sync_mark(durable: u64) -> [u8; MARK_LEN] {
    let mut m = [0u8; MARK_LEN];
    m[4..8].copy_from_slice(&9u32.to_le_bytes());
    m[8] = OP_SYNC_MARK;
    m[9..].copy_from_slice(&durable.to_le_bytes());
    let crc = vfs::crc32c::crc32c(&m[4..]);
    m[..4].copy_from_slice(&crc.to_le_bytes());
    m
}

/// The durable offset of a sync-mark record at `p`, if a valid one is there.
fn mark_at(buf: &[u8], p: usize) -> Option<u64> {
    let m = buf.get(p..p + MARK_LEN)?;
    let ok = m[4..9] == [9, 0, 0, 0, OP_SYNC_MARK] && vfs::crc32c::crc32c(&m[4..]).to_le_bytes() == m[..4];
    ok.then(|| u64::from_le_bytes(m[9..].try_into().unwrap_or([0; 8])))
}

/// The durable offset named by a valid sync mark after `at` that lies beyond `at`, if any. Looked for at every
/// byte, since the damage hides where records start; a false match needs a 32-bit checksum to agree.
fn durable_beyond(buf: &[u8], at: usize) -> Option<u64> {
    (at + 1..buf.len()).filter_map(|p| mark_at(buf, p)).find(|&d| d > at as u64)
}

/// The file name of log `n`.
pub fn file_name(n: u64) -> String {
    format!("wal-{n:012}.log")
}

/// The number of a log file name, if it is one.
pub fn parse_name(name: &str) -> Option<u64> {
    name.strip_prefix("wal-")?.strip_suffix(".log")?.parse().ok()
}

/// Encodes a batch into a complete record.
pub fn encode_batch(ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_batch_into(&mut out, ops);
    out
}

/// The largest payload a record can carry: its length field is 32 bits.
pub const MAX_PAYLOAD: usize = u32::MAX as usize;

/// The payload bytes [`encode_batch`] writes for `ops` (the record adds an 8-byte header).
pub fn payload_len(ops: &[Op]) -> usize {
    let field = |b: &[u8]| varint_len(b.len() as u64) + b.len();
    ops.iter()
        .map(|op| match op {
            Op::Put(a, b) | Op::DeleteRange(a, b) => 1 + field(a) + field(b),
            Op::Delete(a) => 1 + field(a),
        })
        .sum()
}

/// Refuses a batch whose record would not fit its 32-bit length field.
pub fn check_batch_size(ops: &[Op]) -> Result<()> {
    let n = payload_len(ops);
    if n > MAX_PAYLOAD {
        return Err(Error::invalid(format!("a batch of {n} bytes is over the limit of {MAX_PAYLOAD}")));
    }
    Ok(())
}

/// [`encode_batch`] into `out` (cleared first), reserving the record's exact size once: the writer reuses one
/// buffer, where growing a fresh vector byte by byte cost several reallocations per put.
/// REQUIRES: `payload_len(ops) <= MAX_PAYLOAD` (`Db::write` refuses larger batches).
pub fn encode_batch_into(out: &mut Vec<u8>, ops: &[Op]) {
    let size = payload_len(ops);
    out.clear();
    out.reserve(8 + size);
    out.extend_from_slice(&[0u8; 8]);
    for op in ops {
        match op {
            Op::Put(k, v) => {
                out.push(OP_PUT);
                put_varint(out, k.len() as u64);
                out.extend_from_slice(k);
                put_varint(out, v.len() as u64);
                out.extend_from_slice(v);
            }
            Op::Delete(k) => {
                out.push(OP_DELETE);
                put_varint(out, k.len() as u64);
                out.extend_from_slice(k);
            }
            Op::DeleteRange(s, e) => {
                out.push(OP_DELETE_RANGE);
                put_varint(out, s.len() as u64);
                out.extend_from_slice(s);
                put_varint(out, e.len() as u64);
                out.extend_from_slice(e);
            }
        }
    }
    debug_assert_eq!(out.len() - 8, size);
    debug_assert!(size <= MAX_PAYLOAD, "a batch over the record limit reached the encoder");
    out[4..8].copy_from_slice(&(size as u32).to_le_bytes());
    let crc = vfs::crc32c::crc32c(&out[4..]);
    out[0..4].copy_from_slice(&crc.to_le_bytes());
}

fn take_bytes<'a>(p: &mut &'a [u8]) -> Result<&'a [u8]> {
    let (n, h) = get_varint(p).ok_or_else(|| Error::corruption("wal", "bad length varint"))?;
    let n = usize::try_from(n).map_err(|_| Error::corruption("wal", "length overflow"))?;
    if p.len() - h < n {
        return Err(Error::corruption("wal", "operation runs past its record"));
    }
    let b = &p[h..h + n];
    *p = &p[h + n..];
    Ok(b)
}

/// Decodes a payload (checksum already verified).
pub fn decode_payload(mut p: &[u8]) -> Result<Vec<Op>> {
    let mut ops = Vec::new();
    while let Some((&op, rest)) = p.split_first() {
        p = rest;
        let k: Box<[u8]> = take_bytes(&mut p)?.into();
        ops.push(match op {
            OP_PUT => Op::Put(k, take_bytes(&mut p)?.into()),
            OP_DELETE => Op::Delete(k),
            OP_DELETE_RANGE => Op::DeleteRange(k, take_bytes(&mut p)?.into()),
            other => return Err(Error::corruption("wal", format!("unknown opcode {other}"))),
        });
    }
    Ok(ops)
}

/// What replaying one log found.
#[derive(Debug, Default)]
pub struct Replay {
    /// Batches in order.
    pub batches: Vec<Vec<Op>>,
    /// Bytes after the last good record (a torn tail, or what salvage dropped), up to the last non-zero byte.
    pub dropped_bytes: u64,
    /// From [`read_log_salvaging`]: the corruption error a strict read gives, when the log was cut there instead.
    pub salvaged: Option<String>,
}

/// Reads every record of a log. A bad record ends the log when `tail_ok` (the newest log, whose unsynced tail a
/// crash may leave garbled) and a crash can explain it; otherwise it is corruption, as is any bad record in a
/// retired log, which was synced whole.
pub fn read_log(fs: &dyn vfs::Fs, path: &Path, tail_ok: bool) -> Result<Replay> {
    match scan_log(&vfs::read_all(fs, path)?, path, tail_ok) {
        (_, Some(e), _) => Err(e),
        (replay, None, _) => Ok(replay),
    }
}

/// [`read_log`] for `WalRecovery::PointInTime`: damage that `read_log` refuses ends the log instead, keeping the
/// batches before it, and [`Replay::salvaged`] holds the error a strict read returns.
///
/// A range delete changes the table as soon as its record is synced, so one logged after the damage may already
/// be in the table: dropping its record would keep the delete without the writes logged before it, a state no
/// prefix of the writes has. When a valid range-delete record lies after the damage, the salvage is refused
/// (corruption). One whose own record is the damaged one cannot be seen; its delete stays applied.
pub fn read_log_salvaging(fs: &dyn vfs::Fs, path: &Path, tail_ok: bool) -> Result<Replay> {
    let buf = vfs::read_all(fs, path)?;
    let (mut replay, damage, at) = scan_log(&buf, path, tail_ok);
    if let Some(e) = damage {
        refuse_if_range_delete(&buf, at + 1, path, &e)?;
        replay.salvaged = Some(e.to_string());
    }
    Ok(replay)
}

/// For a salvage that drops a whole log newer than the damage (see [`read_log_salvaging`]).
pub fn check_droppable(fs: &dyn vfs::Fs, path: &Path, damage: &str) -> Result<()> {
    refuse_if_range_delete(&vfs::read_all(fs, path)?, 0, path, &damage)
}

/// Fails when a valid record holding a range delete starts at or after `from` (looked for at every offset).
fn refuse_if_range_delete(
    buf: &[u8],
    from: usize,
    path: &Path,
    damage: &dyn std::fmt::Display,
) -> Result<()> {
    for p in from..buf.len().saturating_sub(8) {
        let len = u32::from_le_bytes([buf[p + 4], buf[p + 5], buf[p + 6], buf[p + 7]]) as usize;
        if len == 0 || len > buf.len() - p - 8 {
            continue;
        }
        let crc = u32::from_le_bytes([buf[p], buf[p + 1], buf[p + 2], buf[p + 3]]);
        if vfs::crc32c::crc32c(&buf[p + 4..p + 8 + len]) != crc {
            continue;
        }
        if decode_payload(&buf[p + 8..p + 8 + len])
            .is_ok_and(|ops| ops.iter().any(|o| matches!(o, Op::DeleteRange(..))))
        {
            return Err(Error::corruption(
                "wal",
                format!(
                    "{damage}; point-in-time recovery cannot drop the records after it: the range delete logged \
                     at offset {p} of {} may already have changed the table",
                    path.display()
                ),
            ));
        }
    }
    Ok(())
}

/// The batches of a log image up to its end or its first bad record, the corruption error for that record when
/// it cannot be a torn tail (see [`read_log`]), and the offset where reading stopped.
fn scan_log(buf: &[u8], path: &Path, tail_ok: bool) -> (Replay, Option<Error>, usize) {
    let mut out = Replay::default();
    let mut at = 0usize;
    let damage = loop {
        if at >= buf.len() {
            break None;
        }
        let rest = &buf[at..];
        let bad =
            |why: &str| Some(Error::corruption("wal", format!("{}: {why} at offset {at}", path.display())));
        if rest.len() < 8 {
            break if tail_ok { None } else { bad("truncated record header") };
        }
        let crc = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let len = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
        let cut = rest.len() - 8 < len;
        if cut || vfs::crc32c::crc32c(&rest[4..8 + len]) != crc {
            // Bytes past the last sync of the newest log may persist in any order (sector by sector), so a bad
            // record there ends the log even with bytes after it: those were never synced either. Unless a later
            // sync mark shows this record had been synced, or the damage is none a crash leaves: the file does
            // not end inside the record and no sector piece of it reads as never written (zeros).
            if !tail_ok {
                break bad("damaged record");
            }
            if let Some(d) = durable_beyond(buf, at) {
                break bad(&format!("damaged record (a later sync mark shows it was durable through {d})"));
            }
            if !cut && !vfs::torn::overlaps_unwritten_sector(buf, at, at, at + 8 + len) {
                break bad("damaged record in bytes that were all written (no sector of it reads as zeros)");
            }
            break None;
        }
        let payload = &rest[8..8 + len];
        if payload.first() != Some(&OP_SYNC_MARK) {
            match decode_payload(payload) {
                Ok(ops) => out.batches.push(ops),
                Err(e) => break Some(e),
            }
        } else if len != 9 {
            break bad("malformed sync mark");
        }
        at += 8 + len;
    };
    // Zeros past the last non-zero byte were never written: space a log reserves ahead of its appends
    // (`vfs::Fs::create_log`) or sectors that never reached the media. They are not dropped data.
    let written_end = buf.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1).max(at);
    out.dropped_bytes = (written_end - at) as u64;
    (out, damage, at)
}

/// The open log being appended to.
pub struct WalWriter {
    /// Log number.
    pub number: u64,
    file: Arc<dyn vfs::File>,
    len: u64,
    /// Bytes appended since open.
    pub bytes_written: u64,
    /// The record being appended, reused.
    scratch: Vec<u8>,
    /// The offset through which the last successful sync made the log durable.
    durable: u64,
    /// The durable offset the last sync mark written carries.
    marked: u64,
    /// A write or sync failed: what the file holds past `durable` is unknown (a failed write may have left part
    /// of its bytes, which a later write at the same offset would only partly cover), so nothing more is written.
    failed: vfs::StickyError,
}

impl std::fmt::Debug for WalWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalWriter")
            .field("number", &self.number)
            .field("len", &self.len)
            .field("durable", &self.durable)
            .finish_non_exhaustive()
    }
}

impl WalWriter {
    /// Creates log `number` in `dir` and makes its directory entry durable.
    pub fn create(fs: &dyn vfs::Fs, dir: &Path, number: u64) -> Result<Self> {
        let file = fs.create_log(&dir.join(file_name(number)), vfs::OpenMode::CreateTruncate)?;
        fs.sync_dir(dir)?;
        Ok(WalWriter {
            number,
            file,
            len: 0,
            bytes_written: 0,
            scratch: Vec::new(),
            durable: 0,
            marked: 0,
            failed: vfs::StickyError::default(),
        })
    }

    /// Appends one encoded record; syncs when `sync`.
    pub fn append(&mut self, rec: &[u8], sync: bool) -> Result<()> {
        if self.durable > self.marked {
            // After a sync, a mark first: in the same write for a small record (the copy is small beside the sync
            // it follows), in a write of its own before a large one (values may be up to 1 GiB).
            if rec.len() <= MARK_COPY_MAX {
                let mut both = Vec::with_capacity(MARK_LEN + rec.len());
                both.extend_from_slice(&sync_mark(self.durable));
                both.extend_from_slice(rec);
                self.write(&both)?;
            } else {
                self.write(&sync_mark(self.durable))?;
                self.write(rec)?;
            }
            self.marked = self.durable;
        } else {
            self.write(rec)?;
        }
        if sync {
            self.sync()?;
        }
        Ok(())
    }

    fn write(&mut self, b: &[u8]) -> Result<()> {
        self.failed.check()?;
        self.failed.record(self.file.write_all_at(b, self.len))?;
        self.len += b.len() as u64;
        self.bytes_written += b.len() as u64;
        Ok(())
    }

    /// Encodes `ops` as one record and appends it; syncs when `sync`. Returns the record's length.
    pub fn append_batch(&mut self, ops: &[Op], sync: bool) -> Result<u64> {
        check_batch_size(ops)?;
        let mut rec = std::mem::take(&mut self.scratch);
        encode_batch_into(&mut rec, ops);
        let r = self.append(&rec, sync);
        let n = rec.len() as u64;
        // Keep the buffer for the next batch, unless one huge batch grew it.
        if rec.capacity() <= SCRATCH_KEEP {
            self.scratch = rec;
        }
        r.map(|()| n)
    }

    /// Makes everything appended durable.
    pub fn sync(&mut self) -> Result<()> {
        self.failed.check()?;
        self.failed.record_sync(self.file.sync_data())?;
        self.durable = self.len;
        Ok(())
    }

    /// Whether a write or sync failed, after which the writer refuses to write.
    pub fn failed(&self) -> bool {
        self.failed.is_set()
    }

    /// After a failed write or sync: cuts the log back to the records it can vouch for (`vfs::StickyError::cut`)
    /// so a newer log may follow it. Returns the log's length.
    /// REQUIRES: [`WalWriter::failed`].
    pub fn cut_failed_tail(&mut self) -> Result<u64> {
        Ok(self.failed.cut(&*self.file, self.len, self.durable)?)
    }

    /// Syncs, then ends the log with a sync mark covering everything, so that damage anywhere in a log closed
    /// cleanly is reported as corruption rather than read as a torn tail. No record may follow. A writer that
    /// failed writes nothing more: its error reached the caller then.
    pub fn seal(&mut self) -> Result<()> {
        if self.failed.is_set() {
            return Ok(());
        }
        self.sync()?;
        if self.durable > self.marked {
            self.write(&sync_mark(self.durable))?;
            self.marked = self.durable;
            self.sync()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_roundtrip_keeps_empty_values_apart_from_deletes() {
        let ops = vec![
            Op::Put(b"a".as_slice().into(), Box::new([])),
            Op::Delete(b"b".as_slice().into()),
            Op::DeleteRange(b"c".as_slice().into(), b"d".as_slice().into()),
        ];
        let rec = encode_batch(&ops);
        assert_eq!(decode_payload(&rec[8..]).unwrap(), ops);
    }

    /// Appends one single-put batch per value, syncing after the indexes in `syncs`; seals if asked.
    fn log_of(values: &[&[u8]], syncs: &[usize], seal: bool) -> (vfs::MemFs, Vec<u8>) {
        let fs = vfs::MemFs::new();
        let mut w = WalWriter::create(&fs, Path::new("/"), 1).unwrap();
        for (i, v) in values.iter().enumerate() {
            w.append_batch(&[Op::Put(b"k".as_slice().into(), (*v).into())], syncs.contains(&i)).unwrap();
        }
        if seal {
            w.seal().unwrap();
        }
        let bytes = vfs::read_all(&fs, &Path::new("/").join(file_name(1))).unwrap();
        (fs, bytes)
    }

    fn replay(bytes: &[u8]) -> Result<Vec<Vec<Op>>> {
        use vfs::Fs;
        let fs = vfs::MemFs::new();
        let f = fs.open(Path::new("/w"), vfs::OpenMode::CreateNew).unwrap();
        f.write_all_at(bytes, 0).unwrap();
        read_log(&fs, Path::new("/w"), true).map(|r| r.batches)
    }

    /// The newest log as a killed process or a crash leaves it on real files: records, then zeros reserved
    /// ahead of the appends (`vfs::Fs::create_log`). Every batch is read and the zeros are not dropped data.
    #[test]
    fn a_reserved_zero_tail_ends_the_newest_log_and_drops_nothing() {
        use vfs::Fs;
        let values: Vec<&[u8]> = vec![b"one", b"two", b"three"];
        let (_, mut bytes) = log_of(&values, &[0], false);
        let end = bytes.len();
        bytes.resize(end + (64 << 10), 0);
        let fs = vfs::MemFs::new();
        fs.open(Path::new("/w"), vfs::OpenMode::CreateNew).unwrap().write_all_at(&bytes, 0).unwrap();
        let r = read_log(&fs, Path::new("/w"), true).unwrap();
        assert_eq!(r.batches.len(), 3);
        assert_eq!(r.dropped_bytes, 0);
        // A torn append before the zeros: its header and first bytes reached the media, its second sector did
        // not. It is dropped, and counted up to its last written byte.
        bytes.truncate(end);
        assert!(end < 400, "the torn record must reach into the next sector");
        bytes.extend_from_slice(&0x1234_5678u32.to_le_bytes());
        bytes.extend_from_slice(&600u32.to_le_bytes());
        bytes.extend_from_slice(&[0xCD; 100]);
        bytes.resize(end + (64 << 10), 0);
        fs.open(Path::new("/t"), vfs::OpenMode::CreateNew).unwrap().write_all_at(&bytes, 0).unwrap();
        let r = read_log(&fs, Path::new("/t"), true).unwrap();
        assert_eq!(r.batches.len(), 3);
        assert_eq!(r.dropped_bytes, 108);
    }

    /// Point-in-time recovery looks for range deletes after the damage, from where reading stopped. It took
    /// that offset as the file's length less the dropped bytes, which stopped being it once zeros past the last
    /// written byte were not counted as dropped: with a reserved zero tail the search started past the range
    /// delete and the salvage dropped it, keeping its effect in the table without the writes before it.
    #[test]
    fn regression_salvage_finds_a_range_delete_after_damage_in_a_zero_tailed_log() {
        use vfs::Fs;
        let fs = vfs::MemFs::new();
        let mut w = WalWriter::create(&fs, Path::new("/"), 1).unwrap();
        w.append_batch(&[Op::Put(b"a".as_slice().into(), b"1".as_slice().into())], false).unwrap();
        let first = w.bytes_written as usize;
        w.append_batch(&[Op::Put(b"b".as_slice().into(), b"2".as_slice().into())], false).unwrap();
        w.append_batch(&[Op::DeleteRange(b"a".as_slice().into(), b"z".as_slice().into())], false).unwrap();
        let mut bytes = vfs::read_all(&fs, &Path::new("/").join(file_name(1))).unwrap();
        bytes[first + 10] ^= 0x40;
        bytes.resize(bytes.len() + (64 << 10), 0);
        fs.open(Path::new("/d"), vfs::OpenMode::CreateNew).unwrap().write_all_at(&bytes, 0).unwrap();
        let e = read_log_salvaging(&fs, Path::new("/d"), true).unwrap_err();
        assert!(e.to_string().contains("range delete"), "{e}");
    }

    #[test]
    fn sync_marks_are_not_batches() {
        let large = vec![7u8; MARK_COPY_MAX + 1];
        let values: Vec<&[u8]> = vec![b"1", b"", b"333", &large, b"4444"];
        let (_, bytes) = log_of(&values, &[0, 1, 2, 3, 4], true);
        let got = replay(&bytes).unwrap();
        assert_eq!(got.len(), 5);
        assert_eq!(got[3], vec![Op::Put(b"k".as_slice().into(), large.clone().into())]);
        assert_eq!(got[1], vec![Op::Put(b"k".as_slice().into(), Box::new([]))]);
    }

    /// A bit flip in the newest log's synced records was read as a torn tail: every batch after it, all
    /// acknowledged as durable, was dropped without an error.
    #[test]
    fn regression_damage_inside_the_synced_prefix_is_corruption() {
        let values: Vec<&[u8]> = vec![b"aaaa", b"bbbb", b"cccc", b"dddd"];
        // Synced after batch 2: the mark before batch 3 covers batches 0 to 2.
        let (_, bytes) = log_of(&values, &[2], false);
        for at in [0, 10, 30, 40] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x04;
            let e = replay(&bad).unwrap_err();
            assert!(
                matches!(e, Error::Corruption { .. }) && e.to_string().contains("later sync"),
                "{at}: {e}"
            );
        }
        // Batch 3 was never synced: cut short, it is a torn append.
        let n = bytes.len();
        assert_eq!(replay(&bytes[..n - 2]).unwrap().len(), 3);
        // Sealed at close, the last batch is covered too.
        let (_, sealed) = log_of(&values, &[2], true);
        let mut bad = sealed.clone();
        bad[sealed.len() - MARK_LEN - 2] ^= 0x04;
        assert!(replay(&bad).is_err());
    }

    /// After the last sync mark, damage was always read as a torn tail, so a bit flip in the batches a final sync
    /// had covered (a crash right after it, before any later append carried a mark) dropped them silently. Only a
    /// cut file or a sector reading as zeros can be a torn append.
    #[test]
    fn regression_a_flip_in_batches_a_final_sync_covered_is_corruption() {
        let vals: Vec<Vec<u8>> = (1..=6u8).map(|i| vec![i; 300 * usize::from(i)]).collect();
        let values: Vec<&[u8]> = vals.iter().map(|v| v.as_slice()).collect();
        let (_, bytes) = log_of(&values, &[5], false);
        let n = bytes.len();
        for at in [3, 400, n / 2, n - 600, n - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x01;
            let e = replay(&bad).unwrap_err();
            assert!(
                matches!(e, Error::Corruption { .. }) && e.to_string().contains("all written"),
                "{at}: {e}"
            );
        }
        for cut in [n - 1, n - 500, n - 1500, n / 2] {
            assert!(replay(&bytes[..cut]).is_ok(), "cut at {cut}");
        }
        for sector in (0..n).step_by(512) {
            let mut torn = bytes.clone();
            torn[sector..(sector + 512).min(n)].fill(0);
            assert!(replay(&torn).is_ok(), "sector at {sector} unwritten");
        }
    }

    /// A record whose checksum holds but whose payload does not decode is corruption to a strict read, and ends
    /// the log for a salvaging one, which keeps the batches before it.
    #[test]
    fn an_undecodable_record_with_a_good_checksum_ends_a_salvaged_log() {
        use vfs::Fs;
        let values: Vec<&[u8]> = vec![b"aaaa", b"bbbb"];
        let (_, mut bytes) = log_of(&values, &[1], false);
        let payload = [0xEEu8, 1, b'k'];
        let mut rec = vec![0u8; 8];
        rec[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        rec.extend_from_slice(&payload);
        let crc = vfs::crc32c::crc32c(&rec[4..]);
        rec[..4].copy_from_slice(&crc.to_le_bytes());
        bytes.extend_from_slice(&rec);
        let e = replay(&bytes).unwrap_err();
        assert!(e.to_string().contains("unknown opcode"), "{e}");
        let fs = vfs::MemFs::new();
        fs.open(Path::new("/w"), vfs::OpenMode::CreateNew).unwrap().write_all_at(&bytes, 0).unwrap();
        let r = read_log_salvaging(&fs, Path::new("/w"), true).unwrap();
        assert_eq!(r.batches.len(), 2);
        assert_eq!(r.dropped_bytes, rec.len() as u64);
        assert!(r.salvaged.as_deref().is_some_and(|s| s.contains("unknown opcode")), "{:?}", r.salvaged);
    }

    /// A writer whose write failed writes nothing more, not even the seal's mark: a failed write may have left
    /// part of its bytes, and a later write at the same offset would cover only some of them, leaving damage that
    /// reads as corruption rather than as a torn tail.
    #[test]
    fn a_writer_stops_after_a_failed_write() {
        use vfs::{Fault, FaultFs, FaultKind};
        let fs = FaultFs::new(std::sync::Arc::new(vfs::MemFs::new()));
        let mut w = WalWriter::create(&fs, Path::new("/"), 1).unwrap();
        let put = |v: &[u8]| vec![Op::Put(b"k".as_slice().into(), v.into())];
        w.append_batch(&put(&[1; 100]), true).unwrap();
        fs.inject(Fault::after(vfs::Op::Write, 0, FaultKind::Eio).partial());
        assert!(w.append_batch(&put(&[2; 3000]), false).is_err());
        fs.clear_all();
        // Refused, with the first error's kind, so callers classify it the same way.
        for refused in [w.append_batch(&put(&[3; 10]), false).map(|_| ()), w.sync()] {
            assert!(matches!(&refused, Err(Error::Io(e)) if vfs::is_eio(e)), "{refused:?}");
        }
        w.seal().unwrap();
        let bytes = vfs::read_all(&fs, &Path::new("/").join(file_name(1))).unwrap();
        assert_eq!(replay(&bytes).unwrap(), vec![put(&[1; 100])]);
    }

    #[test]
    fn names() {
        assert_eq!(parse_name(&file_name(42)), Some(42));
        assert_eq!(parse_name("LOCK"), None);
    }
}
