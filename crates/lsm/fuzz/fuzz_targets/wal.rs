//! The record-log reader and write-batch decoder on arbitrary bytes: never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = lsm::wal::LogReader::from_bytes(data.to_vec(), "fuzz.log");
    while let Some(rec) = r.next_record() {
        if let Ok(b) = lsm::WriteBatch::from_data(rec, "fuzz.log") {
            for op in b.iter() {
                let _ = op;
            }
        }
    }
    // Looks past the damage for sync marks and unwritten sectors.
    let _ = r.check_durable();
    let _ = r.unread_bytes();
    let _ = lsm::WriteBatch::from_data(data, "fuzz.log");
});
