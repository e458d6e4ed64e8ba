//! What every experiment with a RocksDB peer needs from it beyond reads and writes: waiting until its background
//! work is done (so both systems are measured settled) and reading its statistics tickers.

/// Flushes the memtable and waits until no compaction is pending or running.
pub(super) fn settle(db: &rocksdb::DB) {
    let _ = db.flush();
    loop {
        let p = |n: &str| db.property_int_value(n).ok().flatten().unwrap_or(0);
        if p("rocksdb.compaction-pending") == 0 && p("rocksdb.num-running-compactions") == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The value of ticker `name` (e.g. `rocksdb.flush.write.bytes`) in `stats`, the text of
/// `Options::get_statistics` (lines `NAME COUNT : N`); 0 when absent.
pub(super) fn ticker(stats: &str, name: &str) -> u64 {
    stats
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(" COUNT"))
        .and_then(|l| l.rsplit(':').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// db_bench's key shape: `user` and the index in 12 decimal digits, 16 bytes that sort like the index.
pub(super) fn user_key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..4].copy_from_slice(b"user");
    k[4..].copy_from_slice(format!("{i:012}").as_bytes());
    k
}

/// A value of `N` pseudo-random lowercase letters determined by `i` (compressible like text, unlike random
/// bytes, and the same for every system).
pub(super) fn letters_value<const N: usize>(i: u64) -> [u8; N] {
    let mut v = [0u8; N];
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for b in v.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = b'a' + (x % 26) as u8;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickers_parse_and_keys_sort_like_their_index() {
        let s = "rocksdb.flush.write.bytes COUNT : 123\nrocksdb.flush.write.bytes.x COUNT : 9\n";
        assert_eq!(ticker(s, "rocksdb.flush.write.bytes"), 123);
        assert_eq!(ticker(s, "rocksdb.compact.write.bytes"), 0);
        assert!(user_key(9) < user_key(10));
        assert_eq!(&user_key(42), b"user000000000042");
    }
}
