//! The table-record and WAL-payload decoders on arbitrary bytes: typed results, never a panic; what decodes
//! re-encodes to the same bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let interval = flexdb::interval::Interval::decode(data.to_vec());
    if let Ok(recs) = flexdb::record::decode_all(data) {
        let mut out = Vec::new();
        for (k, v) in &recs {
            flexdb::record::encode(&mut out, k, v);
        }
        assert_eq!(out, data);
        // The cached form decodes exactly when the record list does, to the same records.
        assert_eq!(interval.map(|i| i.to_recs()).ok(), Some(recs));
    } else {
        assert!(interval.is_err());
    }
    if let Ok(ops) = flexdb::wal::decode_payload(data) {
        let rec = flexdb::wal::encode_batch(&ops);
        assert_eq!(&rec[8..], data);
    }
});
