//! The keys and values the db_bench-style experiments (`lsm`, `gloran`, `rangereduce`) write, made so that
//! building them costs next to nothing on the measured path: an operation's time is the engine's.
//!
//! Values follow db_bench's `RandomGenerator`: one buffer of pseudo-random letters is made once, and a value is a
//! window of it. Making each value byte by byte costs ~2.5 ns a byte; inside a timed 1 KiB put that was more time
//! than the engine's own work, and it shrank every ratio between systems towards 1.

use std::sync::OnceLock;

/// db_bench's key shape: `user` and the index in 12 decimal digits, 16 bytes that sort like the index.
///
/// REQUIRES: `i < 10^12` (larger indexes keep their low 12 digits and would no longer sort like the index).
pub(super) fn user_key(i: u64) -> [u8; 16] {
    let mut k = *b"user000000000000";
    let mut x = i;
    for d in k[4..].iter_mut().rev() {
        *d = b'0' + (x % 10) as u8;
        x /= 10;
    }
    k
}

/// The longest value `letters` hands out.
pub(super) const MAX_VALUE: usize = 4096;
/// Bytes of the buffer values are cut from (past its end, `MAX_VALUE` more, so every window is whole).
const WINDOWS: usize = 1 << 20;

/// A value of `len` pseudo-random lowercase letters determined by `i`: compressible like text, unlike random
/// bytes, and the same for every system. Value `i` is the `i`-th window of `len` bytes of one 1 MiB buffer,
/// modulo its size: the experiments number values by operation, so a run reads the buffer front to back, as
/// db_bench's `RandomGenerator` does. Windows at scrambled offsets (as before session 48) made every timed put
/// wait for the value's first line: 11 % of a put in a profile of `bench gloran`, for every system alike.
///
/// REQUIRES: `len <= MAX_VALUE`.
pub(super) fn letters(i: u64, len: usize) -> &'static [u8] {
    static BUF: OnceLock<Vec<u8>> = OnceLock::new();
    let buf = BUF.get_or_init(|| {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        (0..WINDOWS + MAX_VALUE)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b'a' + (x % 26) as u8
            })
            .collect()
    });
    assert!(len <= MAX_VALUE, "value of {len} bytes is longer than the {MAX_VALUE} the generator makes");
    let at = (i.wrapping_mul(len as u64) % WINDOWS as u64) as usize;
    &buf[at..at + len]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_like_their_index() {
        assert_eq!(&user_key(42), b"user000000000042");
        assert_eq!(&user_key(999_999_999_999), b"user999999999999");
        for i in [0u64, 9, 99, 12_345, 1 << 30] {
            assert!(user_key(i) < user_key(i + 1));
            assert_eq!(user_key(i)[4..], *format!("{i:012}").as_bytes());
        }
    }

    #[test]
    fn values_are_letters_fixed_by_index_and_differ_between_indexes() {
        let a = letters(7, 100);
        assert_eq!(a.len(), 100);
        assert!(a.iter().all(|b| b.is_ascii_lowercase()));
        assert_eq!(a, letters(7, 100));
        // Consecutive values are adjacent windows: a run reads the buffer in order.
        assert_eq!(letters(8, 100).as_ptr(), a.as_ptr().wrapping_add(100));
        let distinct: std::collections::HashSet<&[u8]> = (0..1000).map(|i| letters(i, 16)).collect();
        assert!(distinct.len() > 990, "only {} distinct values of 1000", distinct.len());
        assert_eq!(letters(u64::MAX, MAX_VALUE).len(), MAX_VALUE);
    }
}
