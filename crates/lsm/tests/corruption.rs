//! Bit flips in every kind of file give a `Corruption` error (at open or at the read that touches the damaged
//! bytes), never a panic and never a wrong answer. The last WAL is checked separately: sync marks and the shape
//! of a torn append tell its damaged records from a torn tail, closed cleanly or not.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lsm::{Db, Options, ReadOptions, WriteOptions};
use vfs::{Fs, OpenMode};

fn opts() -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 8 << 10,
        max_bytes_for_level_base: 16 << 10,
        target_file_size_base: 4 << 10,
        block_size: 512,
        level0_file_num_compaction_trigger: 2,
        ..Options::default()
    }
}

/// Builds a database with tables in several levels, range tombstones and an unflushed WAL tail.
fn build(fs: &Arc<vfs::MemFs>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let f: Arc<dyn Fs> = fs.clone();
    let db = Db::open(f, "/db", opts()).unwrap();
    let w = WriteOptions::default();
    let mut model = BTreeMap::new();
    for i in 0..600u32 {
        let k = format!("key{:04}", (i * 7919) % 1000).into_bytes();
        let v = format!("value{i}").into_bytes();
        db.put(&w, &k, &v).unwrap();
        model.insert(k, v);
        if i % 100 == 50 {
            db.delete_range(&w, b"key0100", b"key0120").unwrap();
            let ks: Vec<_> =
                model.range(b"key0100".to_vec()..b"key0120".to_vec()).map(|(k, _)| k.clone()).collect();
            for k in ks {
                model.remove(&k);
            }
        }
    }
    db.compact_range(None, None).unwrap();
    for i in 0..50u32 {
        let k = format!("tail{i:03}").into_bytes();
        db.put(&WriteOptions { sync: true }, &k, b"t").unwrap();
        model.insert(k, b"t".to_vec());
    }
    db.close().unwrap();
    model
}

/// Opens and reads everything; `Ok(contents)` or the first error.
fn read_all(fs: &Arc<vfs::MemFs>) -> lsm::Result<BTreeMap<Vec<u8>, Vec<u8>>> {
    let f: Arc<dyn Fs> = fs.clone();
    let db = Db::open(f, "/db", Options { create_if_missing: false, ..opts() })?;
    let mut out = BTreeMap::new();
    for (k, v) in db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX)? {
        out.insert(k, v);
    }
    // Point reads touch filters and index blocks through another path.
    for k in out.keys().take(50) {
        db.get(k)?;
    }
    let mut it = db.iter(&ReadOptions::default())?;
    it.seek_to_last();
    while it.valid() {
        it.prev();
    }
    it.status()?;
    Ok(out)
}

fn flip(fs: &vfs::MemFs, name: &str, pos: u64, bit: u8) {
    let f = fs.open(&Path::new("/db").join(name), OpenMode::ReadWrite).unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, pos).unwrap();
    b[0] ^= 1 << bit;
    f.write_all_at(&b, pos).unwrap();
}

fn snapshot_files(fs: &vfs::MemFs) -> Vec<(String, Vec<u8>)> {
    fs.list_dir(Path::new("/db"))
        .unwrap()
        .into_iter()
        .filter(|n| n != "LOCK")
        .map(|n| {
            let d = vfs::read_all(fs, &Path::new("/db").join(&n)).unwrap();
            (n, d)
        })
        .collect()
}

fn restore(files: &[(String, Vec<u8>)]) -> Arc<vfs::MemFs> {
    let fs = Arc::new(vfs::MemFs::new());
    fs.create_dir_all(Path::new("/db")).unwrap();
    for (n, d) in files {
        let f = fs.open(&Path::new("/db").join(n), OpenMode::CreateNew).unwrap();
        f.write_all_at(d, 0).unwrap();
    }
    fs
}

#[test]
fn bit_flips_in_tables_manifest_and_current_are_corruption() {
    let fs = Arc::new(vfs::MemFs::new());
    let model = build(&fs);
    let files = snapshot_files(&fs);
    assert_eq!(read_all(&restore(&files)).unwrap(), model);
    let mut checked = 0;
    for (name, data) in &files {
        let kind = lsm::filename::parse(name);
        if matches!(kind, Some(lsm::filename::FileKind::Log(_))) {
            continue;
        }
        let len = data.len() as u64;
        let step = (len / 97).max(1);
        let mut pos = 0;
        while pos < len {
            let fs2 = restore(&files);
            flip(&fs2, name, pos, (pos % 8) as u8);
            match read_all(&fs2) {
                Ok(got) => assert_eq!(got, model, "flip in {name} at {pos} gave a wrong answer"),
                Err(e) => assert!(e.is_corruption(), "flip in {name} at {pos}: {e} is not corruption"),
            }
            checked += 1;
            pos += step;
        }
    }
    assert!(checked > 100);
}

/// A closed database's last WAL ends with a sync mark covering every record, so a flip anywhere in the records
/// is corruption; a flip in the mark itself loses nothing (the records before it are intact).
#[test]
fn bit_flips_in_the_last_wal_are_corruption() {
    let fs = Arc::new(vfs::MemFs::new());
    let model = build(&fs);
    let files = snapshot_files(&fs);
    let (name, data) = files
        .iter()
        .find(|(n, d)| {
            matches!(lsm::filename::parse(n), Some(lsm::filename::FileKind::Log(_))) && !d.is_empty()
        })
        .expect("an unflushed WAL")
        .clone();
    let mut intact = 0;
    for pos in (0..data.len() as u64).step_by(7) {
        let fs2 = restore(&files);
        flip(&fs2, &name, pos, 3);
        match read_all(&fs2) {
            Ok(got) => {
                assert_eq!(got, model, "flip at {pos}");
                intact += 1;
            }
            Err(e) => assert!(e.is_corruption(), "flip at {pos}: {e}"),
        }
    }
    // Only the final mark's bytes (35 of them) may be flipped without an error.
    assert!(intact <= 35 / 7 + 1, "{intact} flips read without an error");
}

/// A bit flip in WAL records that the last sync covered, in a log no later append marked (the process died right
/// after the sync), was read as a torn tail: the acknowledged writes from the flip on were dropped without an
/// error. Only a cut file or sectors reading as zeros are torn appends, so every flip here is corruption, except
/// one that makes a fragment's length reach past the end of the file (read as cut short: a prefix is recovered).
#[test]
fn regression_bit_flips_in_a_synced_wal_that_was_never_closed_are_corruption() {
    let (crashed, wal, keys) = killed_after_a_final_sync(41);
    let dir = Path::new("/db");
    let data = vfs::read_all(&crashed, &dir.join(&wal)).unwrap();
    // The length fields of the fragments (one per record here: they are small).
    let mut length_bytes = Vec::new();
    let mut p = 0;
    while p < data.len() {
        length_bytes.extend([p + 4, p + 5]);
        p += 7 + usize::from(u16::from_le_bytes([data[p + 4], data[p + 5]]));
    }
    let open = |fs: vfs::CrashFs| {
        let f: Arc<dyn Fs> = Arc::new(fs);
        Db::open(f, "/db", Options { create_if_missing: false, ..opts() }).and_then(|db| {
            db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX)
                .map(|kv| kv.into_iter().map(|(k, _)| k).collect::<Vec<_>>())
        })
    };
    assert_eq!(open(crashed.crash_drop_unsynced()).unwrap(), keys);
    let mut corrupt = 0;
    for (pos, &byte) in data.iter().enumerate() {
        let fs = crashed.crash_drop_unsynced();
        let file = fs.open(&dir.join(&wal), OpenMode::ReadWrite).unwrap();
        file.write_all_at(&[byte ^ 0x40], pos as u64).unwrap();
        file.sync_data().unwrap();
        match open(fs) {
            Err(e) => {
                assert!(e.is_corruption(), "flip at {pos}: {e}");
                corrupt += 1;
            }
            Ok(got) => {
                assert!(
                    length_bytes.contains(&pos),
                    "flip at {pos} read as a torn tail: {} writes",
                    got.len()
                );
                assert_eq!(got, keys[..got.len()], "flip at {pos}");
            }
        }
    }
    assert!(corrupt >= data.len() - length_bytes.len(), "{corrupt} of {} flips", data.len());
}

/// With `WalRecovery::PointInTime` an open that strict recovery refuses salvages the writes before the damage,
/// says what it dropped, and leaves a store that opens strictly afterwards and takes new writes.
#[test]
fn point_in_time_recovery_salvages_the_writes_before_wal_damage() {
    let (crashed, wal, keys) = killed_after_a_final_sync(40);
    let dir = Path::new("/db");
    let len = crashed.open(&dir.join(&wal), OpenMode::ReadOnly).unwrap().len().unwrap();
    let file = crashed.open(&dir.join(&wal), OpenMode::ReadWrite).unwrap();
    let mut b = [0u8; 1];
    file.read_exact_at(&mut b, len / 2).unwrap();
    file.write_all_at(&[b[0] ^ 0x10], len / 2).unwrap();
    file.sync_data().unwrap();
    let fs: Arc<dyn Fs> = Arc::new(crashed);
    let (db, got, strict) = refused_then_salvaged(&fs);
    assert!(!got.is_empty() && got.len() < keys.len(), "{} of {}", got.len(), keys.len());
    assert_eq!(got, keys[..got.len()]);
    let r = db.recovery().clone();
    assert_eq!(r.records, got.len() as u64);
    assert!(r.dropped_bytes > 0 && r.dropped_bytes < len, "{r:?}");
    assert!(r.stopped_at.as_deref().is_some_and(|s| s.starts_with(&wal)), "{r:?}");
    assert!(r.salvaged.as_deref().is_some_and(|s| s.contains("corruption")), "{r:?}");
    db.put(&WriteOptions { sync: true }, b"after", b"salvage").unwrap();
    db.close().unwrap();
    // The salvaged state is the store's now: a strict open accepts it.
    let db = Db::open(fs, "/db", strict).unwrap();
    assert_eq!(db.recovery().salvaged, None);
    assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"salvage"[..]));
    assert_eq!(db.scan(&ReadOptions::default(), b"key", b"key\xff", usize::MAX).unwrap().len(), got.len());
}

/// A WAL record whose checksum holds but whose write batch does not decode is corruption to a strict open; a
/// point-in-time open keeps the writes before it and drops it and everything after it.
#[test]
fn regression_point_in_time_recovery_stops_at_an_undecodable_batch() {
    let (crashed, wal, keys) = killed_after_a_final_sync(40);
    let path = Path::new("/db").join(&wal);
    let len = crashed.open(&path, OpenMode::ReadOnly).unwrap().len().unwrap();
    let file = crashed.open(&path, OpenMode::ReadWrite).unwrap();
    let mut w = lsm::wal::LogWriter::new(file, len);
    // Header (sequence, count 1), then a put whose key length runs past the record.
    let mut bad = 41u64.to_le_bytes().to_vec();
    bad.extend_from_slice(&1u32.to_le_bytes());
    bad.extend_from_slice(&[1, 200, b'k']);
    w.add_record(&bad).unwrap();
    let mut later = lsm::batch::WriteBatch::new();
    later.put(b"later", b"x");
    let mut good = later.data().to_vec();
    good[..8].copy_from_slice(&42u64.to_le_bytes());
    w.add_record(&good).unwrap();
    w.sync().unwrap();
    drop(w);
    let fs: Arc<dyn Fs> = Arc::new(crashed);
    let (db, got, strict) = refused_then_salvaged(&fs);
    assert_eq!(got, keys);
    let r = db.recovery().clone();
    assert_eq!(r.records, keys.len() as u64);
    assert!(r.dropped_bytes >= (bad.len() + good.len()) as u64, "{r:?}");
    assert!(r.stopped_at.as_deref().is_some_and(|s| s.contains("does not decode")), "{r:?}");
    assert!(r.salvaged.is_some(), "{r:?}");
    db.close().unwrap();
    let db = Db::open(fs, "/db", strict).unwrap();
    assert_eq!(db.get(b"later").unwrap(), None);
    assert_eq!(db.scan(&ReadOptions::default(), b"", b"\xff", usize::MAX).unwrap().len(), keys.len());
}

/// Checks that a strict open of `/db` on `fs` reports corruption, then opens it with point-in-time recovery:
/// the salvaged database, its keys in order, and the strict options for later opens.
fn refused_then_salvaged(fs: &Arc<dyn Fs>) -> (Db, Vec<Vec<u8>>, Options) {
    let strict = Options { create_if_missing: false, ..opts() };
    let e = Db::open(fs.clone(), "/db", strict.clone()).unwrap_err();
    assert!(e.is_corruption(), "{e}");
    let salvage = Options { wal_recovery: lsm::WalRecovery::PointInTime, ..strict.clone() };
    let db = Db::open(fs.clone(), "/db", salvage).unwrap();
    let keys = db
        .scan(&ReadOptions::default(), b"", b"\xff", usize::MAX)
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    (db, keys, strict)
}

/// A database that took `n` puts (`key0000`, ... in order), only the last one synced, and was killed right after
/// it: the crashed file system, the name of its WAL, and the keys in order.
fn killed_after_a_final_sync(n: u32) -> (vfs::CrashFs, String, Vec<Vec<u8>>) {
    let cfs = Arc::new(vfs::CrashFs::new());
    let f: Arc<dyn Fs> = cfs.clone();
    let db = Db::open(f, "/db", opts()).unwrap();
    let keys: Vec<Vec<u8>> = (0..n).map(|i| format!("key{i:04}").into_bytes()).collect();
    for (i, k) in keys.iter().enumerate() {
        db.put(&WriteOptions { sync: i + 1 == keys.len() }, k, b"value").unwrap();
    }
    let crashed = cfs.crash_drop_unsynced();
    drop(db);
    let wal = crashed
        .list_dir(Path::new("/db"))
        .unwrap()
        .into_iter()
        .filter(|n| matches!(lsm::filename::parse(n), Some(lsm::filename::FileKind::Log(_))))
        .max()
        .unwrap();
    (crashed, wal, keys)
}
