//! How much a read fetches from the data files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use blockstore::{BLOCK_SIZE, Options, Store};
use vfs::{Fs, MemFs};

/// Regression: with units of up to 256 blocks, a 4 KiB random read of sequentially written data fetched and
/// checksummed a whole 1 MiB unit (the fio random-read job over NBD ran at a tenth of a raw file's rate). Units
/// are now at most `max_unit_blocks` (32) blocks, so one block costs at most one 128 KiB unit.
#[test]
fn a_one_block_read_of_a_long_sequential_write_fetches_one_short_unit() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let store = Store::open(fs, Path::new("/s"), Options::default()).unwrap();
    let v = store.create_volume("v", 4 << 20).unwrap();
    // Incompressible data, so units are stored raw and their size is exact.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let data: Vec<u8> = (0..128 * BLOCK_SIZE)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    v.write(&data, 0, false).unwrap();
    v.flush_cache().unwrap();
    assert_eq!(v.info().unwrap().index_pieces, 128 / 32, "one CW of 128 blocks in 32-block units");
    let before = v.stats();
    let mut buf = vec![0u8; BLOCK_SIZE];
    v.read(&mut buf, 77 * BLOCK_SIZE as u64).unwrap();
    assert_eq!(buf, data[77 * BLOCK_SIZE..78 * BLOCK_SIZE]);
    let after = v.stats();
    assert_eq!(after.units_read - before.units_read, 1);
    let fetched = after.unit_bytes_read - before.unit_bytes_read;
    assert!(fetched <= 32 * BLOCK_SIZE as u64 + 64, "a 4 KiB read fetched {fetched} bytes");
    v.check_invariants().unwrap();
}
