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
});
