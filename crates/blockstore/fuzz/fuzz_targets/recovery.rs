//! Whole-volume recovery from arbitrary file contents: a volume whose journal, newest data file and checkpoint
//! are fuzz input opens with a typed error or recovers a consistent index; it never panics, and every read
//! either succeeds or reports an error.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use blockstore::{Options, Store};
use libfuzzer_sys::fuzz_target;
use vfs::{Fs, MemFs, OpenMode};

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    // Split the input into three files at the offsets the first four bytes name.
    let a = usize::from(u16::from_le_bytes([data[0], data[1]])) % (data.len() - 3);
    let b = a + usize::from(u16::from_le_bytes([data[2], data[3]])) % (data.len() - 3 - a + 1);
    let body = &data[4..];
    let (journal, rest) = body.split_at(a.min(body.len()));
    let (datafile, ckpt) = rest.split_at((b - a).min(rest.len()));
    let fs = Arc::new(MemFs::new());
    let store = Store::open(fs.clone(), Path::new("/s"), Options::default()).expect("store");
    store.create_volume("v", 64 * 4096).expect("create");
    drop(store);
    let put = |name: &str, bytes: &[u8]| {
        let f = fs.open(&Path::new("/s/v").join(name), OpenMode::CreateTruncate).expect("open");
        f.write_all_at(bytes, 0).expect("write");
    };
    put("journal", journal);
    put("data-00000001.dat", datafile);
    if !ckpt.is_empty() {
        put("checkpoint", ckpt);
    }
    let Ok(v) = Store::open(fs, Path::new("/s"), Options::default()).and_then(|s| s.volume("v")) else { return };
    v.check_invariants().expect("a recovered index is consistent");
    let mut buf = vec![0u8; 64 * 4096];
    let _ = v.read(&mut buf, 0);
});
