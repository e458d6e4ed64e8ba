//! The BPA's reorganisations: sorting the log and blocks, flushing the log into the blocks (Case 2a) or
//! merging and redistributing the whole leaf (Case 2b), draining it in order, and closing a block.

use super::*;

impl<K: Ord + Default + Fingerprint, V: Default> Bpa<K, V> {
    /// Sorts slots `[a, b)` by key, moving values along.
    pub(super) fn sort_slots(&mut self, a: usize, b: usize) {
        let n = b - a;
        if n <= 48 {
            // Insertion sort with block moves: few compares on short runs, and already-sorted runs cost n - 1.
            for i in a + 1..b {
                let mut j = i;
                while j > a && self.keys[j - 1] > self.keys[i] {
                    j -= 1;
                }
                if j < i {
                    self.keys[j..=i].rotate_right(1);
                    self.vals[j..=i].rotate_right(1);
                    if K::STORED {
                        self.fps[j..=i].rotate_right(1);
                    }
                }
            }
            return;
        }
        let mut perm: Vec<u32> = (0..n as u32).collect();
        let keys = &self.keys[a..b];
        perm.sort_unstable_by(|&x, &y| keys[x as usize].cmp(&keys[y as usize]));
        // Apply the permutation by following its cycles: slot a+i must receive the entry now at a+perm[i].
        for i in 0..n {
            let mut cur = i;
            while perm[cur] as usize != i {
                let next = perm[cur] as usize;
                self.swap_slots(a + cur, a + next);
                perm[cur] = cur as u32;
                cur = next;
            }
            perm[cur] = cur as u32;
        }
    }

    pub(super) fn sort_log(&mut self, stats: &mut Stats) {
        if !self.log_sorted {
            self.sort_slots(0, self.log_len as usize);
            self.log_sorted = true;
            stats.log_sorts += 1;
        }
    }

    pub(super) fn sort_block(&mut self, b: usize, stats: &mut Stats) {
        if !self.block_sorted(b) {
            let s = self.blk(b);
            self.sort_slots(s, s + self.count(b));
            self.set_sorted(b, true);
            stats.block_sorts += 1;
        }
    }

    /// Case 2 of insert: the log is full; empty it into the blocks.
    pub(super) fn flush(&mut self, stats: &mut Stats) {
        stats.flushes += 1;
        self.sort_log(stats);
        let n = self.log_len as usize;
        let hl = self.header_len as usize;
        if hl == 0 {
            // First flush: the sorted log becomes the header (spread evenly over the blocks).
            self.redistribute(stats);
            return;
        }
        // Pass 1: how many log entries each block would receive (the log is sorted, so one sweep).
        let bs = self.block_size as usize;
        let mut fits = true;
        let mut b = 0;
        let mut run = 0;
        for j in 0..n {
            while b + 1 < hl && self.keys[self.hdr(b + 1)] <= self.keys[j] {
                fits &= self.count(b) + run < bs;
                b += 1;
                run = 0;
            }
            run += 1;
        }
        fits &= self.count(b) + run < bs;
        if !fits {
            // Case 2b.
            self.redistribute(stats);
            return;
        }
        // Case 2a: append each entry at the end of its block.
        stats.flush_appends += 1;
        let mut b = 0;
        for j in 0..n {
            while b + 1 < hl && self.keys[self.hdr(b + 1)] <= self.keys[j] {
                b += 1;
            }
            let h = self.hdr(b);
            if self.keys[j] < self.keys[h] {
                // Below every header (only possible for block 0): it becomes the new minimum, and the old
                // header entry moves into the block.
                self.swap_slots(j, h);
            }
            let c = self.count(b);
            let dst = self.blk(b) + c;
            if c > 0 && self.keys[dst - 1] > self.keys[j] {
                self.set_sorted(b, false);
            }
            self.swap_slots(dst, j);
            self.counts[b] += 1;
        }
        self.log_len = 0;
        self.log_sorted = true;
    }

    /// Case 2b: merge everything into sorted order and spread it evenly over all blocks.
    pub(super) fn redistribute(&mut self, stats: &mut Stats) {
        stats.redistributes += 1;
        // The fingerprints travel with their entries instead of being hashed again, one per entry moved.
        if K::STORED {
            let mut all = Vec::with_capacity(self.len as usize);
            self.drain_with(stats, |k, v, fp| all.push((k, v, fp)));
            let n = all.len();
            self.place_sorted(all.into_iter(), n);
        } else {
            // No digests: the narrower entries of the plain drain (a sequential load redistributes a whole leaf
            // every log's worth of inserts, and wider entries cost it a third of its speed).
            let mut all = Vec::with_capacity(self.len as usize);
            self.drain_into(&mut all, stats);
            let n = all.len();
            self.place_sorted(all.into_iter().map(|(k, v)| (k, v, 0)), n);
        }
    }

    /// Moves every entry in key order to `out`, leaving the leaf empty.
    pub(super) fn drain_into(&mut self, out: &mut Vec<(K, V)>, stats: &mut Stats) {
        self.drain_with(stats, |k, v, _| out.push((k, v)));
    }

    /// Hands every entry with its fingerprint to `emit` in key order, leaving the leaf empty.
    fn drain_with(&mut self, stats: &mut Stats, mut emit: impl FnMut(K, V, u8)) {
        self.sort_log(stats);
        let hl = self.header_len as usize;
        for b in 0..hl {
            self.sort_block(b, stats);
        }
        // Two-finger merge of the sorted log with the blocks' sequence (h_0, block 0, h_1, block 1, ...).
        let log_n = self.log_len as usize;
        let mut li = 0;
        let mut take = |this: &mut Self, slot: usize| {
            emit(
                mem::take(&mut this.keys[slot]),
                mem::take(&mut this.vals[slot]),
                if K::STORED { this.fps[slot] } else { 0 },
            );
        };
        for b in 0..hl {
            let h = self.hdr(b);
            let s = self.blk(b);
            let c = self.count(b);
            for slot in std::iter::once(h).chain(s..s + c) {
                while li < log_n && self.keys[li] < self.keys[slot] {
                    take(self, li);
                    li += 1;
                }
                take(self, slot);
            }
            self.counts[b] = 0;
        }
        while li < log_n {
            take(self, li);
            li += 1;
        }
        self.log_len = 0;
        self.header_len = 0;
        self.len = 0;
        self.log_sorted = true;
    }

    /// Spreads `n` sorted entries, each with its key's fingerprint, evenly over the blocks.
    /// REQUIRES: empty; `n <= num_blocks * block_size`; each fingerprint is its key's.
    pub(super) fn place_sorted<I: Iterator<Item = (K, V, u8)>>(&mut self, mut items: I, n: usize) {
        debug_assert!(self.len == 0 && n <= self.num_blocks as usize * self.block_size as usize);
        let used = n.min(self.num_blocks as usize);
        if used == 0 {
            return;
        }
        let base = n / used;
        let extra = n % used;
        for b in 0..used {
            let cnt = base + usize::from(b < extra);
            let h = self.hdr(b);
            let s = self.blk(b);
            for i in 0..cnt {
                let Some((k, v, fp)) = items.next() else { break };
                let slot = if i == 0 { h } else { s + i - 1 };
                self.put_slot_with(slot, k, v, fp);
            }
            self.counts[b] = (cnt - 1) as u16;
            self.set_sorted(b, true);
        }
        self.header_len = used as u32;
        self.len = n as u32;
    }

    /// Removes the entry at `slot` of the run `[a, end)` keeping the run's order; returns it.
    pub(super) fn take_shifting(&mut self, slot: usize, end: usize) -> (K, V) {
        self.keys[slot..end].rotate_left(1);
        self.vals[slot..end].rotate_left(1);
        if K::STORED {
            self.fps[slot..end].rotate_left(1);
        }
        (mem::take(&mut self.keys[end - 1]), mem::take(&mut self.vals[end - 1]))
    }

    /// Block `b` lost its last entry: close the gap so the blocks in use stay a prefix with sorted headers.
    pub(super) fn remove_block(&mut self, b: usize) {
        let hl = self.header_len as usize;
        for i in b..hl - 1 {
            let (h, hn) = (self.hdr(i), self.hdr(i + 1));
            self.swap_slots(h, hn);
            let c = self.count(i + 1);
            let (s, sn) = (self.blk(i), self.blk(i + 1));
            for x in 0..c {
                self.swap_slots(s + x, sn + x);
            }
            self.counts[i] = c as u16;
            self.counts[i + 1] = 0;
            let bit = self.block_sorted(i + 1);
            self.set_sorted(i, bit);
        }
        self.set_sorted(hl - 1, true);
        self.header_len -= 1;
    }
}
