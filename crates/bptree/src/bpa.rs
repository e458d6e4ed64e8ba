//! The buffered partitioned array (BPA), the BP-tree's leaf (paper §3).

use std::borrow::Borrow;
use std::mem;
use std::ops::Bound;

use crate::leaf::{Leaf, above, below};
use crate::options::Options;
use crate::prefetch;
use crate::probe::{Fingerprint, PointProbe, Probe};
use crate::stats::Stats;

mod flush;
mod iter;

pub use iter::BpaIter;

/// A buffered partitioned array: one contiguous run of slots cut into a log, a header and blocks.
///
/// ```text
///  slot:  0 .. log_size | log_size .. +num_blocks | num_blocks blocks of block_size slots
///        +--------------+-------------------------+-----------+-----------+-- ... --+
///        |     log      | h0 h1 h2 ...  (header)  |  block 0  |  block 1  |         |
///        | unsorted,    | sorted; h_i is the      | keys in   | keys in   |         |
///        | newest first | minimum of block i and  | (h0, h1)  | (h1, h2)  |         |
///        | to be seen   | lives only here         | unordered | unordered |         |
///        +--------------+-------------------------+-----------+-----------+-- ... --+
/// ```
///
/// Keys and values are kept in two parallel arrays of that shape (`keys`, `vals`), so the scans that dominate an
/// insert or find (the log, the header, one block) read only keys, densely. A third array of the same shape, `fps`,
/// holds each stored key's one-byte [`Fingerprint`]: an equality scan of the log or a block (a find, and the
/// search every insert of a new key makes) reads that block's digests, one cache line for 64 slots, and compares
/// only the keys whose digest matches, about one in 256 of the others. A block of 32 `ByteKey`s spans twelve
/// lines; in a memtable larger than the cache those scans were a quarter of a lookup (`docs/bptree.md`). Key types
/// whose `Fingerprint::STORED` is false (integers of up to 64 bits) keep no digests: `fps` is empty and the scans
/// compare keys.
///
/// Occupancy is by counts (`log_len`, `header_len`, `counts[i]`), never by a reserved "empty" key: every key value
/// is storable. Empty slots hold `Default` values, which is why the leaf needs `K: Default, V: Default` and moves
/// entries with swaps.
///
/// Blocks `0..header_len` are in use; block `i` holds `h_i` in header slot `i` and `counts[i]` more entries in its
/// block slots, all strictly between `h_i` and `h_{i+1}`. Bit `i` of `sorted` says block `i`'s slots are in key
/// order (the paper's sorted-block bit vector); `log_sorted` says the same of the log.
///
/// Insert (paper §3, "Insert"): an update of a key already in the log, the header or its block happens in place;
/// a new key is appended to the log. When the log fills, it is sorted and flushed: if every block has room for its
/// share while keeping one free slot (Case 2a), the share is appended to the block; otherwise (Case 2b) the whole
/// leaf is merged into sorted order and redistributed evenly over all blocks. Invariant after every insert: at
/// least one free slot in the log and in every block.
///
/// Deviation: the paper lets a key live in both the log and the blocks and resolves the pair at flush time. We look
/// the key up before buffering it (one extra block scan on insert) because the tree's `insert` returns the old
/// value and `len` is exact; log and blocks are therefore always disjoint, flushes never need to deduplicate, and a
/// range map needs no sorted copy of the log to skip duplicates.
pub struct Bpa<K, V> {
    keys: Box<[K]>,
    vals: Box<[V]>,
    /// `fps[i]` is `keys[i].fingerprint()` for every occupied slot (log, header and block slots in use); free
    /// slots hold anything. Empty unless `K::STORED`.
    fps: Box<[u8]>,
    /// Entries in each block's slots (not counting its header entry).
    counts: Box<[u16]>,
    /// Bit `i`: block `i`'s slots are sorted.
    sorted: Box<[u64]>,
    log_len: u32,
    header_len: u32,
    len: u32,
    log_sorted: bool,
    log_size: u32,
    num_blocks: u32,
    block_size: u32,
}

impl<K, V> std::fmt::Debug for Bpa<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bpa")
            .field("len", &self.len)
            .field("log_len", &self.log_len)
            .field("num_blocks", &self.num_blocks)
            .finish_non_exhaustive()
    }
}

/// Slot arithmetic and the header search, which need nothing of the key type (the iterator uses them too).
impl<K, V> Bpa<K, V> {
    #[inline]
    fn hdr(&self, i: usize) -> usize {
        self.log_size as usize + i
    }

    #[inline]
    fn blk(&self, i: usize) -> usize {
        self.log_size as usize + self.num_blocks as usize + i * self.block_size as usize
    }

    #[inline]
    fn count(&self, i: usize) -> usize {
        self.counts[i] as usize
    }

    #[inline]
    fn block_sorted(&self, i: usize) -> bool {
        self.sorted[i / 64] & (1 << (i % 64)) != 0
    }

    #[inline]
    fn set_sorted(&mut self, i: usize, on: bool) {
        if on {
            self.sorted[i / 64] |= 1 << (i % 64);
        } else {
            self.sorted[i / 64] &= !(1 << (i % 64));
        }
    }

    /// The headers in use.
    #[inline]
    fn headers(&self) -> &[K] {
        let h = self.hdr(0);
        &self.keys[h..h + self.header_len as usize]
    }

    /// The block whose range holds `key`: the last header not above it; `None` if `key` is below every header.
    #[inline]
    fn block_of<Q>(&self, key: &Q) -> Option<usize>
    where
        Q: Probe<K> + ?Sized,
    {
        let p = self.headers().partition_point(|k| key.cmp_to(k).is_ge());
        p.checked_sub(1)
    }
}

impl<K: Ord + Default + Fingerprint, V: Default> Bpa<K, V> {
    #[inline]
    fn swap_slots(&mut self, a: usize, b: usize) {
        self.keys.swap(a, b);
        self.vals.swap(a, b);
        if K::STORED {
            self.fps.swap(a, b);
        }
    }

    /// Puts an entry in slot `i`, with its fingerprint.
    #[inline]
    fn put_slot(&mut self, i: usize, key: K, value: V) {
        let fp = if K::STORED { key.fingerprint() } else { 0 };
        self.put_slot_with(i, key, value, fp);
    }

    /// Puts an entry in slot `i` whose fingerprint is known. REQUIRES: `fp` is `key`'s (or `!K::STORED`).
    #[inline]
    fn put_slot_with(&mut self, i: usize, key: K, value: V, fp: u8) {
        if K::STORED {
            self.fps[i] = fp;
        }
        self.keys[i] = key;
        self.vals[i] = value;
    }

    /// The first slot of `[from, from + n)` holding `key` (`fp` its fingerprint): the digests are compared 64 at a
    /// time into a mask (no early exit, so the comparison vectorizes), then only the matching slots' keys.
    #[inline]
    fn scan_eq<Q>(&self, from: usize, n: usize, key: &Q, fp: u8) -> Option<usize>
    where
        Q: PointProbe<K> + ?Sized,
    {
        if !K::STORED {
            return self.keys[from..from + n].iter().position(|k| key.eq_to(k)).map(|s| from + s);
        }
        let fps = &self.fps[from..from + n];
        for (c, chunk) in fps.chunks(64).enumerate() {
            let mut m = 0u64;
            for (i, &f) in chunk.iter().enumerate() {
                m |= u64::from(f == fp) << i;
            }
            while m != 0 {
                let s = from + 64 * c + m.trailing_zeros() as usize;
                // A digest match is the key all but once in 256: fetch its value's line alongside the key's.
                prefetch::line(self.vals.as_ptr().wrapping_add(s));
                if key.eq_to(&self.keys[s]) {
                    return Some(s);
                }
                m &= m - 1;
            }
        }
        None
    }

    /// Whether `key` is above every key of the leaf, when that is cheap to tell (`false` when unsure): the last
    /// log entry of a sorted log and the largest entry of the last block, if that block is sorted, bound all.
    /// Ascending inserts then skip the lookup our insert makes to keep log and blocks disjoint (see the type
    /// comment), which otherwise scanned the whole log on every insert of a sequential load.
    #[inline]
    fn above_all(&self, key: &K) -> bool {
        let j = self.log_len as usize;
        if j > 0 && !(self.log_sorted && self.keys[j - 1] < *key) {
            return false;
        }
        let Some(b) = (self.header_len as usize).checked_sub(1) else { return true };
        let max = match self.count(b) {
            0 => self.hdr(b),
            n if self.block_sorted(b) => self.blk(b) + n - 1,
            _ => return false,
        };
        self.keys[max] < *key
    }

    /// Slot holding `key`: the header, one block, then the log (paper §3, "Find", reordered).
    #[inline]
    fn find_slot<Q>(&self, key: &Q) -> Option<usize>
    where
        Q: PointProbe<K> + ?Sized,
    {
        // Log and blocks are disjoint (see the type comment), so the order of the searches does not matter for
        // correctness; the blocks hold almost every entry, so looking there first skips the log scan on most hits.
        // The header search's lines, the counts and the log's digests are asked for together: in a cold leaf they
        // were misses taken one after another.
        prefetch::slice(self.headers());
        prefetch::line(self.counts.as_ptr());
        if K::STORED {
            prefetch::line(self.fps.as_ptr());
        }
        let fp = if K::STORED { key.key_fingerprint() } else { 0 };
        if let Some(slot) = self.find_in_blocks(key, fp) {
            return Some(slot);
        }
        self.scan_eq(0, self.log_len as usize, key, fp)
    }

    #[inline]
    fn find_in_blocks<Q>(&self, key: &Q, fp: u8) -> Option<usize>
    where
        Q: PointProbe<K> + ?Sized,
    {
        let b = self.block_of(key)?;
        let start = self.blk(b);
        if K::STORED {
            // The block's digests do not depend on its count, which is another line: load both at once.
            prefetch::slice(&self.fps[start..start + self.block_size as usize]);
        }
        let h = self.hdr(b);
        if key.eq_to(&self.keys[h]) {
            return Some(h);
        }
        if !K::STORED && self.block_sorted(b) {
            let slots = &self.keys[start..start + self.count(b)];
            return slots.binary_search_by(|k| key.cmp_to(k).reverse()).ok().map(|s| start + s);
        }
        // With digests, sorted or not, they decide: one line of them against a binary search's dependent loads.
        self.scan_eq(start, self.count(b), key, fp)
    }

    /// Exactly the blocks a scan of `length` entries from `start` reaches: block `e` after the start block is
    /// reached iff fewer than `length` entries lie in `[start, h_e)`. REQUIRES: the log is sorted.
    fn blocks_reached<Q>(&self, start: Bound<&Q>, length: usize) -> std::ops::Range<usize>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let hl = self.header_len as usize;
        if hl == 0 || length == 0 {
            return 0..0;
        }
        let first = match start {
            Bound::Unbounded => 0,
            Bound::Included(s) | Bound::Excluded(s) => self.block_of(s).unwrap_or(0),
        };
        let s0 = self.blk(first);
        let mut before = usize::from(above(self.keys[self.hdr(first)].borrow(), start))
            + self.keys[s0..s0 + self.count(first)].iter().filter(|k| above((*k).borrow(), start)).count();
        let log_n = self.log_len as usize;
        let mut lp = self.keys[..log_n].partition_point(|k| !above(k.borrow(), start));
        let mut end = first + 1;
        while end < hl {
            let h = &self.keys[self.hdr(end)];
            while lp < log_n && self.keys[lp] < *h {
                lp += 1;
                before += 1;
            }
            if before >= length {
                break;
            }
            before += 1 + self.count(end);
            end += 1;
        }
        first..end
    }
}

impl<K: Ord + Default + Fingerprint, V: Default> Leaf<K, V> for Bpa<K, V> {
    type Iter<'a>
        = BpaIter<'a, K, V>
    where
        Self: 'a,
        K: 'a,
        V: 'a;

    fn new(opts: &Options) -> Self {
        let slots = opts.leaf_slots();
        let mut keys = Vec::with_capacity(slots);
        keys.resize_with(slots, K::default);
        let mut vals = Vec::with_capacity(slots);
        vals.resize_with(slots, V::default);
        Bpa {
            keys: keys.into_boxed_slice(),
            vals: vals.into_boxed_slice(),
            fps: vec![0; if K::STORED { slots } else { 0 }].into_boxed_slice(),
            counts: vec![0; opts.num_blocks].into_boxed_slice(),
            sorted: vec![u64::MAX; opts.num_blocks.div_ceil(64)].into_boxed_slice(),
            log_len: 0,
            header_len: 0,
            len: 0,
            log_sorted: true,
            log_size: opts.log_size as u32,
            num_blocks: opts.num_blocks as u32,
            block_size: opts.block_size as u32,
        }
    }

    fn split_at(opts: &Options) -> usize {
        // A flush must always fit: at most `block_size` entries per block (header + block_size - 1 slots).
        let by_fill = (opts.split_fill * opts.leaf_slots() as f64) as usize;
        by_fill.min(opts.num_blocks * opts.block_size).max(2)
    }

    fn len(&self) -> usize {
        self.len as usize
    }

    fn get<Q>(&self, key: &Q) -> Option<(&K, &V)>
    where
        Q: PointProbe<K> + ?Sized,
    {
        self.find_slot(key).map(|s| (&self.keys[s], &self.vals[s]))
    }

    fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        Q: PointProbe<K> + ?Sized,
    {
        self.find_slot(key).map(|s| &mut self.vals[s])
    }

    fn insert(&mut self, key: K, value: V, stats: &mut Stats) -> Option<V> {
        if !self.above_all(&key)
            && let Some(slot) = self.find_slot(&key)
        {
            return Some(mem::replace(&mut self.vals[slot], value));
        }
        self.insert_new(key, value, stats);
        None
    }

    fn insert_new(&mut self, key: K, value: V, stats: &mut Stats) {
        let j = self.log_len as usize;
        // Once unsorted the log stays so until it is sorted or flushed: skip the comparison (a cold line).
        if self.log_sorted && j > 0 && self.keys[j - 1] > key {
            self.log_sorted = false;
        }
        self.put_slot(j, key, value);
        self.log_len += 1;
        self.len += 1;
        if self.log_len == self.log_size {
            self.flush(stats);
        }
    }

    fn remove<Q>(&mut self, key: &Q, _stats: &mut Stats) -> Option<(K, V)>
    where
        Q: PointProbe<K> + ?Sized,
    {
        let slot = self.find_slot(key)?;
        self.len -= 1;
        let log_n = self.log_len as usize;
        if slot < log_n {
            self.log_len -= 1;
            return Some(self.take_shifting(slot, log_n));
        }
        let (h0, b0) = (self.hdr(0), self.blk(0));
        if slot < b0 {
            // A header entry: the block's smallest slot entry takes its place.
            let b = slot - h0;
            let c = self.count(b);
            let out = (mem::take(&mut self.keys[slot]), mem::take(&mut self.vals[slot]));
            if c == 0 {
                self.remove_block(b);
            } else {
                let s = self.blk(b);
                let min = if self.block_sorted(b) {
                    s
                } else {
                    let slots = &self.keys[s..s + c];
                    let mut m = 0;
                    for (i, k) in slots.iter().enumerate().skip(1) {
                        if *k < slots[m] {
                            m = i;
                        }
                    }
                    s + m
                };
                let (k, v) = self.take_shifting(min, s + c);
                self.put_slot(slot, k, v);
                self.counts[b] -= 1;
            }
            return Some(out);
        }
        let b = (slot - b0) / self.block_size as usize;
        let end = self.blk(b) + self.count(b);
        self.counts[b] -= 1;
        Some(self.take_shifting(slot, end))
    }

    fn drain_sorted(&mut self, out: &mut Vec<(K, V)>, stats: &mut Stats) {
        self.drain_into(out, stats);
    }

    fn load_sorted<I: ExactSizeIterator<Item = (K, V)>>(&mut self, items: I) {
        let n = items.len();
        self.place_sorted(
            items.map(|(k, v)| {
                let fp = if K::STORED { k.fingerprint() } else { 0 };
                (k, v, fp)
            }),
            n,
        );
    }

    fn first_key(&self) -> Option<&K> {
        let log_min = self.keys[..self.log_len as usize].iter().min();
        let hdr_min = self.headers().first();
        match (log_min, hdr_min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn iterate_from<Q, F>(&mut self, start: Bound<&Q>, length: usize, f: &mut F, stats: &mut Stats) -> usize
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        F: FnMut(&K, &V),
    {
        if length == 0 {
            return 0;
        }
        // Sort the log and the blocks the scan will reach (paper §3, "Range iteration", Figure 2b): from the
        // start block on, until the blocks sorted hold `length` entries (a bound on how far the scan goes).
        self.sort_log(stats);
        for b in self.blocks_reached(start, length) {
            self.sort_block(b, stats);
        }
        self.scan(start, length, f)
    }

    fn scan<Q, F>(&self, start: Bound<&Q>, length: usize, f: &mut F) -> usize
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        F: FnMut(&K, &V),
    {
        if length == 0 {
            return 0;
        }
        if !self.sorted_for(start, length) {
            // Not prepared by a sort: fall back to the permutation-based iterator (same result, slower).
            let mut n = 0;
            for (k, v) in self.range(start, Bound::Unbounded).take(length) {
                f(k, v);
                n += 1;
            }
            return n;
        }
        // Two-finger merge of the sorted log with the sorted blocks.
        let log_n = self.log_len as usize;
        let hl = self.header_len as usize;
        let mut li = self.keys[..log_n].partition_point(|k| !above(k.borrow(), start));
        let (mut b, mut p) = (0usize, 0usize);
        if let Bound::Included(s) | Bound::Excluded(s) = start
            && let Some(sb) = self.block_of(s)
        {
            b = sb;
            if !above(self.keys[self.hdr(b)].borrow(), start) {
                let bs = self.blk(b);
                let c = self.count(b);
                p = 1 + self.keys[bs..bs + c].partition_point(|k| !above(k.borrow(), start));
            }
        }
        let mut done = 0;
        while b < hl {
            let (h, s, c) = (self.hdr(b), self.blk(b), self.count(b));
            let (keys, vals) = (&self.keys, &self.vals);
            // The block's entries in order: position 0 is the header, position i >= 1 is slot s + i - 1.
            let last = if c == 0 { h } else { s + c - 1 };
            if li >= log_n || keys[li] > keys[last] {
                // No log entry falls inside this block: emit its run without interleaving.
                if p == 0 {
                    f(&keys[h], &vals[h]);
                    done += 1;
                    if done == length {
                        return done;
                    }
                    p = 1;
                }
                let from = s + p - 1;
                let n = (s + c - from).min(length - done);
                for (k, v) in keys[from..from + n].iter().zip(&vals[from..from + n]) {
                    f(k, v);
                }
                done += n;
                if done == length {
                    return done;
                }
            } else {
                for pos in p..=c {
                    let slot = if pos == 0 { h } else { s + pos - 1 };
                    let k = &keys[slot];
                    while li < log_n && keys[li] < *k {
                        f(&keys[li], &vals[li]);
                        li += 1;
                        done += 1;
                        if done == length {
                            return done;
                        }
                    }
                    f(k, &vals[slot]);
                    done += 1;
                    if done == length {
                        return done;
                    }
                }
            }
            b += 1;
            p = 0;
        }
        while li < log_n && done < length {
            f(&self.keys[li], &self.vals[li]);
            li += 1;
            done += 1;
        }
        done
    }

    fn sorted_for<Q>(&self, start: Bound<&Q>, length: usize) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.log_sorted && self.blocks_reached(start, length).all(|b| self.block_sorted(b))
    }

    fn map_range<Q, F>(&self, lo: Bound<&Q>, hi: Bound<&Q>, f: &mut F) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
        F: FnMut(&K, &V),
    {
        // Log and blocks are disjoint, so no sorted copy of the log is needed to skip duplicates.
        let mut beyond = false;
        for j in 0..self.log_len as usize {
            let k = self.keys[j].borrow();
            if !below(k, hi) {
                beyond = true;
            } else if above(k, lo) {
                f(&self.keys[j], &self.vals[j]);
            }
        }
        let hl = self.header_len as usize;
        let first = match lo {
            Bound::Unbounded => 0,
            Bound::Included(s) | Bound::Excluded(s) => self.block_of(s).unwrap_or(0),
        };
        for b in first..hl {
            let h = self.hdr(b);
            if !below(self.keys[h].borrow(), hi) {
                return true;
            }
            let s = self.blk(b);
            // Whole block inside the range: no per-key checks (the common case of a long map).
            let inside = above(self.keys[h].borrow(), lo)
                && (b + 1 < hl && below(self.keys[self.hdr(b + 1)].borrow(), hi));
            if inside {
                f(&self.keys[h], &self.vals[h]);
                for slot in s..s + self.count(b) {
                    f(&self.keys[slot], &self.vals[slot]);
                }
                continue;
            }
            for slot in std::iter::once(h).chain(s..s + self.count(b)) {
                let k = self.keys[slot].borrow();
                if !below(k, hi) {
                    beyond = true;
                } else if above(k, lo) {
                    f(&self.keys[slot], &self.vals[slot]);
                }
            }
        }
        beyond
    }

    fn range<'a, Q>(&'a self, lo: Bound<&Q>, hi: Bound<&Q>) -> BpaIter<'a, K, V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        BpaIter::new(self, lo, hi)
    }

    fn sort_all(&mut self, stats: &mut Stats) {
        self.sort_log(stats);
        for b in 0..self.header_len as usize {
            self.sort_block(b, stats);
        }
    }

    fn memory_usage(&self) -> usize {
        mem::size_of::<Self>()
            + self.keys.len() * mem::size_of::<K>()
            + self.vals.len() * mem::size_of::<V>()
            + self.fps.len()
            + self.counts.len() * 2
            + self.sorted.len() * 8
    }

    fn check_light(&self) -> Result<(), String> {
        let log_n = self.log_len as usize;
        let hl = self.header_len as usize;
        if log_n >= self.log_size as usize {
            return Err(format!("log has no free slot ({log_n})"));
        }
        if hl > self.num_blocks as usize {
            return Err("header_len above num_blocks".into());
        }
        if self.headers().windows(2).any(|w| w[0] >= w[1]) {
            return Err("header not sorted".into());
        }
        // The log is where inserts write: its digests are checked here, the blocks' by `check`.
        if K::STORED && (0..log_n).any(|i| self.fps[i] != self.keys[i].fingerprint()) {
            return Err("a log slot holds a stale fingerprint".into());
        }
        let mut total = log_n + hl;
        for b in 0..self.num_blocks as usize {
            let c = self.count(b);
            if (b >= hl && c != 0) || c >= self.block_size as usize {
                return Err(format!("block {b} holds {c} entries (no free slot, or unused)"));
            }
            total += c;
        }
        if total != self.len as usize {
            return Err(format!("len {} but {} entries", self.len, total));
        }
        Ok(())
    }

    fn check(&self) -> Result<(), String> {
        let log_n = self.log_len as usize;
        let hl = self.header_len as usize;
        if log_n >= self.log_size as usize {
            return Err(format!("log has no free slot ({log_n})"));
        }
        if hl > self.num_blocks as usize {
            return Err("header_len above num_blocks".into());
        }
        let log = &self.keys[..log_n];
        if self.log_sorted && log.windows(2).any(|w| w[0] >= w[1]) {
            return Err("log marked sorted but is not".into());
        }
        let mut total = log_n + hl;
        for b in 0..self.num_blocks as usize {
            let c = self.count(b);
            if b >= hl {
                if c != 0 {
                    return Err(format!("unused block {b} holds {c} entries"));
                }
                continue;
            }
            total += c;
            if c >= self.block_size as usize {
                return Err(format!("block {b} has no free slot"));
            }
            let h = &self.keys[self.hdr(b)];
            if b + 1 < hl && *h >= self.keys[self.hdr(b + 1)] {
                return Err(format!("header not sorted at {b}"));
            }
            let s = self.blk(b);
            let slots = &self.keys[s..s + c];
            for k in slots {
                if k <= h || (b + 1 < hl && *k >= self.keys[self.hdr(b + 1)]) {
                    return Err(format!("block {b} holds a key outside its header range"));
                }
            }
            if self.block_sorted(b) && slots.windows(2).any(|w| w[0] >= w[1]) {
                return Err(format!("block {b} marked sorted but is not"));
            }
            let mut sorted: Vec<&K> = slots.iter().collect();
            sorted.sort();
            if sorted.windows(2).any(|w| w[0] == w[1]) {
                return Err(format!("block {b} holds a duplicate key"));
            }
        }
        if total != self.len as usize {
            return Err(format!("len {} but {} entries", self.len, total));
        }
        let mut logk: Vec<&K> = log.iter().collect();
        logk.sort();
        if logk.windows(2).any(|w| w[0] == w[1]) {
            return Err("log holds a duplicate key".into());
        }
        if K::STORED {
            let occupied = (0..log_n)
                .chain((0..hl).map(|b| self.hdr(b)))
                .chain((0..hl).flat_map(|b| self.blk(b)..self.blk(b) + self.count(b)));
            if let Some(i) = occupied.into_iter().find(|&i| self.fps[i] != self.keys[i].fingerprint()) {
                return Err(format!("slot {i} holds a stale fingerprint"));
            }
        }
        for k in log {
            if let Some(b) = self.block_of(k) {
                let s = self.blk(b);
                if self.keys[self.hdr(b)] == *k || self.keys[s..s + self.count(b)].contains(k) {
                    return Err("a log key is also in the blocks".into());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
