//! Fuzzes a whole DR-tree file (footer, node pointers, leaves): open, check, point probes and a scan on arbitrary
//! bytes give answers or errors, never a panic or a hang.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use gloran::drtree::DrTree;
use libfuzzer_sys::fuzz_target;
use vfs::{Fs, MemFs, OpenMode};

fuzz_target!(|data: &[u8]| {
    let fs = MemFs::new();
    let path = Path::new("/f.drt");
    let Ok(f) = fs.open(path, OpenMode::CreateTruncate) else { return };
    if f.write_all_at(data, 0).is_err() {
        return;
    }
    let Ok(tree) = DrTree::open(&fs, path) else { return };
    let tree = Arc::new(tree);
    let _ = tree.check();
    let mut nodes = 0;
    for k in [&b""[..], b"a", b"\xff\xff"] {
        let _ = tree.covering(k, 0, u64::MAX, &mut nodes);
    }
    if let Ok(mut it) = tree.iter_from(b"a") {
        for _ in 0..10_000 {
            match it.next_area() {
                Ok(Some(_)) => {}
                _ => break,
            }
        }
    }
});
