//! The `synced` mark decoder: arbitrary bytes never panic; accepted marks re-encode exactly.
#![no_main]

use blockstore::format::SyncMark;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = SyncMark::decode(data) {
        assert_eq!(m.encode(), data);
    }
});
