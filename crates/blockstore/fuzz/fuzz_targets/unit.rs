//! The compression-unit decoder: arbitrary bytes and lengths never panic, and a unit it accepts decodes to exactly
//! the length the index promised.
#![no_main]

use blockstore::format::decode_unit;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    // The first two bytes choose the expected raw length (whole blocks, up to 64 KiB, as the index would).
    let blocks = usize::from(u16::from_le_bytes([data[0], data[1]]) % 17);
    if let Ok(raw) = decode_unit(&data[2..], blocks * 4096) {
        assert_eq!(raw.len(), blocks * 4096);
    }
});
