//! Cache prefetch hints for searches that chase pointers through memory larger than the cache.
//!
//! Why: in a memtable larger than the last-level cache a lookup is a chain of dependent misses. Inside a leaf
//! the header's binary search touches up to five of its twelve lines one after another, then the block's count,
//! its digests and the matching key follow. Asking for the lines a search will read before it starts lets the
//! misses overlap instead of queueing (`docs/bptree.md`, "Prefetching"). Public so that other in-memory
//! indexes share the one `unsafe` block: GLORAN's buffer R-tree asks for the children it will walk.
//!
//! A prefetch is only a hint: it never faults, whatever the address, and changes no value a program can observe.

/// Bytes of a cache line on the machines we target.
pub const LINE: usize = 64;

/// Asks for the line holding `p`.
#[inline(always)]
pub fn line<T>(p: *const T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `prefetcht0` reads nothing the program can observe and never faults, whatever the address (Intel
    // SDM, PREFETCHh: "does not affect program behavior"); the pointer is not dereferenced.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = p;
}

/// Asks for every line of `s` (the slice's elements, not what they point to).
#[inline(always)]
pub fn slice<T>(s: &[T]) {
    let bytes = std::mem::size_of_val(s);
    let p = s.as_ptr().cast::<u8>();
    let mut off = 0;
    while off < bytes {
        line(p.wrapping_add(off));
        off += LINE;
    }
    if bytes > 0 {
        // The last element may start in one line and end in the next.
        line(p.wrapping_add(bytes - 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_change_nothing_even_for_wild_or_empty_addresses() {
        let v: Vec<u64> = (0..1000).collect();
        slice(&v);
        slice::<u64>(&[]);
        line(std::ptr::null::<u8>());
        line(std::ptr::without_provenance::<u8>(usize::MAX));
        assert_eq!(v.iter().sum::<u64>(), 499_500);
    }
}
