//! The volume `meta` decoder: arbitrary bytes never panic; accepted metas re-encode exactly.
#![no_main]

use blockstore::format::VolumeMeta;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = VolumeMeta::decode(data) {
        assert_eq!(m.encode(), data);
    }
});
