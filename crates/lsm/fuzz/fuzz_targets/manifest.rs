//! Version-edit decoding on arbitrary bytes: never panics; what decodes re-encodes to the same edit.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lsm::edit::VersionEdit;

fuzz_target!(|data: &[u8]| {
    if let Ok(e) = VersionEdit::decode(data) {
        assert_eq!(VersionEdit::decode(&e.encode()), Ok(e));
    }
    let _ = lsm::format::Footer::decode(data);
    let _ = lsm::ikey::parse(data);
});
