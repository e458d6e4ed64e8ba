//! Disjointization of effective areas (§4.2, Fig. 5 and Fig. 6): the sweep that builds a DR-tree's leaf level.
//!
//! # The sweep
//! Areas arrive sorted by start key (for a flush the buffer's areas are sorted first: a sorted run is the paper's
//! min-heap of start keys drained in order). The sweep keeps the paper's other two heaps: a min-heap of the end keys
//! of active areas, and `curr`, the active areas ordered by sequence number, whose maximum is the *dominant* area.
//! Start and end keys are the boundaries of *elementary key intervals*; inside one interval the set of active areas
//! is constant, so the interval's answer is computed once from `curr` and emitted. Adjacent intervals with the same
//! answer are coalesced, which is what turns "split at every boundary" into the paper's pictures: in Fig. 5 (b) the
//! older area α is cut into the parts left and right of β, in (c) α is trimmed to where β does not reach, in (a) the
//! dominated β vanishes, and in Fig. 6 an area replaced by a newer one becomes dominant again after the newer one
//! ends (R9).
//!
//! Compaction (§4.2, "a simple two-way merge") feeds this same sweep with the two input levels merged by start key.
//! Both inputs are already disjoint, so at any key at most one area (one stack of bands, see below) of each input is
//! active and the sweep degenerates into the paper's pairwise disjointization of the two current areas; it stays
//! streaming, with memory bounded by the active areas.
//!
//! # What an interval's answer is, exactly
//! Without snapshots the paper's rule is "the most recent area wins": an entry older than the dominant delete is
//! deleted for every reader. Our engine has snapshots: a reader at snapshot `s` sees only deletes with sequence
//! `<= s`, so for it an entry `(k, e)` is deleted iff some area covering `(k, e)` has `seq <= s`. Let `f(e)` be the
//! smallest `seq` of the active areas covering `e`; the exact answer for every reader is "`f(e) <= s`". Two deletes
//! `D1 < D2` are indistinguishable to every reader iff no live snapshot lies in `[D1, D2)` (they are in the same
//! *stripe*, as RocksDB calls it); the newest reader (the latest sequence) sees every delete. So the sweep splits the
//! sequence axis of an interval at the bounds of the active areas, computes `f` per piece, and merges adjacent pieces
//! whose `f` lie in one stripe into one band reporting the newest of them. With no snapshots and every `min_seq`
//! equal (the common case) this is exactly the paper's single dominant area per interval; with snapshots it keeps the
//! few extra bands a snapshot reader needs, stacked in the sequence dimension so areas stay pairwise disjoint in the
//! working space (Lemma 4.2) and a point query still meets at most one area per DR-tree.
//!
//! Unlike the paper's case (c) the union of the sequence ranges is kept exactly: where an older area reaches lower
//! sequence numbers than the newer one (a smaller `min_seq`), the sweep keeps that part instead of relying on the
//! argument that such entries cannot exist. It costs nothing when the bounds are equal and keeps the index exact
//! for any caller.
//!
//! The garbage-collection watermark (§4.4) is applied on output: bands are clipped to `min_seq >= watermark` and
//! dropped when empty.
//!
//! # Cost
//! Each elementary interval costs `O(a log a)` for `a` active areas; there are at most `2n` intervals. In a
//! compaction `a <= 2 * stripes`. A flush of heavily nested records pays more; the buffer is small (4 MiB).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use crate::area::Area;
use crate::error::{Error, Result};

/// The live snapshots a disjointization must keep distinguishable, sorted ascending.
#[derive(Debug, Clone, Copy)]
pub struct Stripes<'a> {
    snapshots: &'a [u64],
}

impl<'a> Stripes<'a> {
    /// REQUIRES: `snapshots` sorted ascending.
    pub fn new(snapshots: &'a [u64]) -> Self {
        Stripes { snapshots }
    }

    /// The stripe of a delete at `seq`: how many live snapshots cannot see it. Deletes in one stripe are seen by
    /// exactly the same readers.
    #[inline]
    pub fn id(&self, seq: u64) -> usize {
        self.snapshots.partition_point(|&s| s < seq)
    }
}

/// A band of one elementary key interval: sequence numbers `[min, max)` reporting delete `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Band {
    min: u64,
    max: u64,
    seq: u64,
}

/// The streaming sweep. Push areas in start-key order, then [`Sweep::finish`]; output arrives through the sink in
/// DR-tree order ([`Area::order`]), pairwise disjoint.
pub struct Sweep<'a, F: FnMut(Area) -> Result<()>> {
    stripes: Stripes<'a>,
    watermark: u64,
    sink: F,
    /// Left boundary of the next elementary interval.
    cur: Vec<u8>,
    /// Start key of the last pushed area, to check the input order.
    last_start: Option<Vec<u8>>,
    /// Min-heap of (end key, id) of active areas.
    ends: BinaryHeap<Reverse<(Vec<u8>, u64)>>,
    /// `curr`: active areas by (sequence, id); the last entry is the dominant area.
    curr: BTreeMap<(u64, u64), Area>,
    next_id: u64,
    /// The last emitted interval, held back so an adjacent interval with the same bands can extend it.
    pending: Option<(Vec<u8>, Vec<u8>, Vec<Band>)>,
    emitted: u64,
}

impl<F: FnMut(Area) -> Result<()>> std::fmt::Debug for Sweep<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sweep")
            .field("watermark", &self.watermark)
            .field("active", &self.curr.len())
            .field("emitted", &self.emitted)
            .finish_non_exhaustive()
    }
}

impl<'a, F: FnMut(Area) -> Result<()>> Sweep<'a, F> {
    /// A sweep keeping `snapshots` distinguishable and clipping output to sequence numbers `>= watermark`.
    pub fn new(stripes: Stripes<'a>, watermark: u64, sink: F) -> Self {
        Sweep {
            stripes,
            watermark,
            sink,
            cur: Vec::new(),
            last_start: None,
            ends: BinaryHeap::new(),
            curr: BTreeMap::new(),
            next_id: 0,
            pending: None,
            emitted: 0,
        }
    }

    /// Adds the next area. REQUIRES: start keys non-decreasing across calls (checked: a violation is reported as
    /// corruption, since inputs come from sorted files or a sorted buffer).
    pub fn push(&mut self, a: Area) -> Result<()> {
        if a.is_empty() {
            return Ok(());
        }
        if self.last_start.as_ref().is_some_and(|prev| a.start < *prev) {
            return Err(Error::corrupt("areas out of start-key order in disjointization input"));
        }
        self.last_start = Some(a.start.clone());
        self.advance(Some(&a.start))?;
        let id = self.next_id;
        self.next_id += 1;
        self.ends.push(Reverse((a.end.clone(), id)));
        self.curr.insert((a.seq, id), a);
        Ok(())
    }

    /// Drains the active areas; returns how many areas were emitted in total.
    pub fn finish(mut self) -> Result<u64> {
        self.advance(None)?;
        self.flush_pending()?;
        Ok(self.emitted)
    }

    /// Emits every elementary interval that ends at or before `upto` (all of them for `None`).
    fn advance(&mut self, upto: Option<&[u8]>) -> Result<()> {
        while let Some(Reverse((end, _))) = self.ends.peek() {
            if upto.is_some_and(|k| end.as_slice() > k) {
                break;
            }
            let end = end.clone();
            if self.cur < end {
                let lo = std::mem::take(&mut self.cur);
                self.emit(lo, end.clone())?;
            }
            while let Some(Reverse((e, id))) = self.ends.peek() {
                if *e != end {
                    break;
                }
                let id = *id;
                self.ends.pop();
                self.curr.retain(|&(_, i), _| i != id);
            }
            self.cur = end;
        }
        if let Some(k) = upto {
            if !self.curr.is_empty() && self.cur.as_slice() < k {
                let lo = std::mem::take(&mut self.cur);
                self.emit(lo, k.to_vec())?;
            }
            self.cur = k.to_vec();
        }
        Ok(())
    }

    /// The bands of the active set: the sequence axis cut at every area bound, `f` (the smallest covering delete)
    /// per piece, adjacent pieces of one stripe merged, clipped to the watermark.
    fn bands(&self) -> Vec<Band> {
        let mut out: Vec<Band> = Vec::new();
        if self.curr.len() == 1 {
            if let Some(a) = self.curr.values().next() {
                out.push(Band { min: a.min_seq, max: a.max_seq, seq: a.seq });
            }
        } else {
            // Events on the sequence axis: +seq at min, -seq at max.
            let mut ev: Vec<(u64, bool, u64)> = Vec::with_capacity(self.curr.len() * 2);
            for a in self.curr.values() {
                ev.push((a.min_seq, true, a.seq));
                ev.push((a.max_seq, false, a.seq));
            }
            ev.sort_unstable();
            let mut covering: BTreeMap<u64, u32> = BTreeMap::new();
            let mut i = 0;
            while i < ev.len() {
                let p = ev[i].0;
                while i < ev.len() && ev[i].0 == p {
                    let (_, add, s) = ev[i];
                    if add {
                        *covering.entry(s).or_insert(0) += 1;
                    } else if let Some(c) = covering.get_mut(&s) {
                        *c -= 1;
                        if *c == 0 {
                            covering.remove(&s);
                        }
                    }
                    i += 1;
                }
                let (Some(&f), Some(&(q, _, _))) = (covering.keys().next(), ev.get(i)) else { continue };
                match out.last_mut() {
                    Some(b) if b.max == p && self.stripes.id(b.seq) == self.stripes.id(f) => {
                        b.max = q;
                        b.seq = b.seq.max(f);
                    }
                    _ => out.push(Band { min: p, max: q, seq: f }),
                }
            }
        }
        out.retain_mut(|b| {
            b.min = b.min.max(self.watermark);
            b.min < b.max
        });
        out
    }

    fn compatible(&self, a: &[Band], b: &[Band]) -> bool {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                x.min == y.min && x.max == y.max && self.stripes.id(x.seq) == self.stripes.id(y.seq)
            })
    }

    fn emit(&mut self, lo: Vec<u8>, hi: Vec<u8>) -> Result<()> {
        let bands = self.bands();
        let extends = match &self.pending {
            Some((_, pend_hi, pend_bands)) => {
                *pend_hi == lo && !bands.is_empty() && self.compatible(pend_bands, &bands)
            }
            None => false,
        };
        if extends {
            if let Some((_, pend_hi, pend_bands)) = &mut self.pending {
                *pend_hi = hi;
                for (x, y) in pend_bands.iter_mut().zip(&bands) {
                    x.seq = x.seq.max(y.seq);
                }
            }
            return Ok(());
        }
        self.flush_pending()?;
        if !bands.is_empty() {
            self.pending = Some((lo, hi, bands));
        }
        Ok(())
    }

    fn flush_pending(&mut self) -> Result<()> {
        if let Some((lo, hi, bands)) = self.pending.take() {
            for b in bands {
                self.emitted += 1;
                (self.sink)(Area {
                    start: lo.clone(),
                    end: hi.clone(),
                    min_seq: b.min,
                    max_seq: b.max,
                    seq: b.seq,
                })?;
            }
        }
        Ok(())
    }
}

/// Disjointizes an arbitrary set of areas (sorting it first): the flush path and the golden tests.
pub fn disjointize(mut areas: Vec<Area>, snapshots: &[u64], watermark: u64) -> Result<Vec<Area>> {
    areas.sort_by(Area::order);
    let mut out = Vec::new();
    let mut sweep = Sweep::new(Stripes::new(snapshots), watermark, |a| {
        out.push(a);
        Ok(())
    });
    for a in areas {
        sweep.push(a)?;
    }
    sweep.finish()?;
    Ok(out)
}

/// Checks that `areas` are in DR-tree order and pairwise disjoint in the working space.
pub fn check_disjoint(areas: &[Area]) -> std::result::Result<(), String> {
    for w in areas.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if Area::order(a, b) != std::cmp::Ordering::Less {
            return Err(format!("out of order: {a:?} then {b:?}"));
        }
        if a.start == b.start && a.end == b.end {
            if a.max_seq > b.min_seq {
                return Err(format!("stacked bands overlap: {a:?} and {b:?}"));
            }
        } else if a.end > b.start {
            return Err(format!("key ranges overlap: {a:?} and {b:?}"));
        }
    }
    for a in areas {
        if a.is_empty() || a.seq < a.max_seq {
            return Err(format!("malformed area {a:?}"));
        }
    }
    Ok(())
}
