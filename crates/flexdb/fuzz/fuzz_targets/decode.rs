//! The table-record and WAL-payload decoders on arbitrary bytes: typed results, never a panic; what decodes
//! re-encodes to the same bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(interval) = flexdb::interval::Interval::decode(data.to_vec()) {
        let mut out = Vec::new();
        for (k, v) in &interval.to_recs() {
            flexdb::record::encode(&mut out, k, v);
        }
        assert_eq!(out, data);
    }
    if let Ok(ops) = flexdb::wal::decode_payload(data) {
        let rec = flexdb::wal::encode_batch(&ops);
        assert_eq!(&rec[8..], data);
    }
    // A whole log (records, sync marks, damage), as the newest log and as a retired one.
    use vfs::Fs;
    let fs = vfs::MemFs::new();
    let path = std::path::Path::new("/wal");
    if let Ok(f) = fs.open(path, vfs::OpenMode::CreateNew)
        && f.write_all_at(data, 0).is_ok()
    {
        let strict = flexdb::wal::read_log(&fs, path, true);
        let _ = flexdb::wal::read_log(&fs, path, false);
        // Salvage keeps at least what a strict read accepts, and reads the same batches up to the damage.
        if let Ok(s) = flexdb::wal::read_log_salvaging(&fs, path, true)
            && let Ok(strict) = strict
        {
            assert_eq!(s.batches, strict.batches);
        }
        let _ = flexdb::wal::check_droppable(&fs, path, "damage");
    }
});
