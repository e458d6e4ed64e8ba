//! The data-file footer decoder: arbitrary bytes never panic; accepted footers re-encode exactly.
#![no_main]

use blockstore::Footer;
use blockstore::format::FOOTER_LEN;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let file_len = u64::from_le_bytes(data[..8].try_into().unwrap_or([0; 8]));
    if let Some(f) = Footer::decode(&data[8..], file_len) {
        assert_eq!(data.len() - 8, FOOTER_LEN);
        assert_eq!(&f.encode()[..], &data[8..]);
        assert_eq!(f.data_len + FOOTER_LEN as u64, file_len);
    }
});
