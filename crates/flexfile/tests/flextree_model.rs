//! Model-based randomized tests of FlexTree against a plain `Vec` of runs, with tiny nodes so splits, merges and
//! rebases happen constantly; plus the paper's worked examples (Fig. 4, Fig. 6, Fig. 7).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use flexfile::flextree::{FlexTree, HOLE, Piece, TreeConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The model: the logical space as a list of runs (length, address), plus tags by offset.
#[derive(Default, Clone)]
struct Model {
    runs: Vec<(u64, u64)>,
    tags: BTreeMap<u64, u16>,
}

impl Model {
    fn size(&self) -> u64 {
        self.runs.iter().map(|r| r.0).sum()
    }

    /// Splits so a run starts at `x`; returns its index.
    fn split(&mut self, x: u64) -> usize {
        let mut pos = 0;
        for i in 0..self.runs.len() {
            let (l, a) = self.runs[i];
            if pos == x {
                return i;
            }
            if x < pos + l {
                let d = x - pos;
                self.runs[i] = (d, a);
                self.runs.insert(i + 1, (l - d, if a == HOLE { HOLE } else { a + d }));
                return i + 1;
            }
            pos += l;
        }
        self.runs.len()
    }

    fn insert(&mut self, x: u64, len: u64, addr: u64, tag: u16) {
        let i = self.split(x);
        self.runs.insert(i, (len, addr));
        self.tags = self.tags.iter().map(|(&k, &v)| if k >= x { (k + len, v) } else { (k, v) }).collect();
        if tag != 0 {
            self.tags.insert(x, tag);
        }
    }

    fn collapse(&mut self, x: u64, len: u64) {
        let i = self.split(x);
        let j = self.split(x + len);
        self.runs.drain(i..j);
        self.tags = self
            .tags
            .iter()
            .filter(|(k, _)| !(x..x + len).contains(*k))
            .map(|(&k, &v)| if k >= x + len { (k - len, v) } else { (k, v) })
            .collect();
    }

    fn write(&mut self, x: u64, len: u64, addr: u64) {
        let tag = self.tags.get(&x).copied().unwrap_or(0);
        let ov = len.min(self.size() - x);
        if ov > 0 {
            self.collapse(x, ov);
        }
        self.insert(x, len, addr, tag);
    }

    fn canonical(&self) -> Vec<(u64, u64)> {
        canonical(self.runs.iter().copied())
    }
}

fn canonical(it: impl Iterator<Item = (u64, u64)>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (l, a) in it {
        if let Some(last) = out.last_mut() {
            let joins = if a == HOLE { last.1 == HOLE } else { last.1 != HOLE && last.1 + last.0 == a };
            if joins {
                last.0 += l;
                continue;
            }
        }
        out.push((l, a));
    }
    out
}

fn tree_runs(t: &FlexTree) -> Vec<(u64, u64)> {
    canonical(t.query(0, t.size()).unwrap().into_iter().map(|p| (p.len, p.addr)))
}

fn seeds() -> Vec<u64> {
    testkit::seeds(&[1, 2, 3, 4, 5, 6])
}

fn run_model(seed: u64, cfg: TreeConfig, ops: usize, huge: bool) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut t = FlexTree::new(cfg).unwrap();
    let mut m = Model::default();
    let mut next_addr = 0u64;
    let boundary = cfg.boundary.max(1);
    for step in 0..ops {
        let size = m.size();
        let op = rng.random_range(0..100);
        let ctx = format!("seed {seed} step {step} op {op} size {size}");
        let mut len = rng.random_range(1..40u64);
        if huge && rng.random_range(0..10) == 0 {
            len = rng.random_range(1u64 << 28..1u64 << 33);
        }
        match op {
            0..=39 => {
                let x = rng.random_range(0..=size);
                let addr = if rng.random_range(0..8) == 0 || len > 1000 {
                    HOLE
                } else {
                    // Data extents never cross a boundary; keep the model's addresses segment-local.
                    if next_addr % boundary + len > boundary {
                        next_addr = (next_addr / boundary + 1) * boundary;
                    }
                    let a = next_addr;
                    // Sometimes continue the previous address so merges happen.
                    next_addr += len + if rng.random_range(0..3) == 0 { 0 } else { 7 };
                    a
                };
                let tag = if rng.random_range(0..6) == 0 { rng.random_range(1..100) } else { 0 };
                t.insert(x, len, addr, tag).unwrap_or_else(|e| panic!("{ctx}: {e}"));
                m.insert(x, len, addr, tag);
            }
            40..=64 if size > 0 => {
                let x = rng.random_range(0..size);
                let len = if rng.random_range(0..200) == 0 { size - x } else { len.min(size - x) };
                let removed = t.collapse(x, len).unwrap_or_else(|e| panic!("{ctx}: {e}"));
                assert_eq!(removed.iter().map(|p| p.len).sum::<u64>(), len, "{ctx}");
                m.collapse(x, len);
            }
            65..=79 => {
                let x = rng.random_range(0..=size);
                if next_addr % boundary + len > boundary {
                    next_addr = (next_addr / boundary + 1) * boundary;
                }
                let len = len.min(boundary);
                let addr = next_addr;
                next_addr += len;
                t.write(x, len, addr).unwrap_or_else(|e| panic!("{ctx}: {e}"));
                m.write(x, len, addr);
            }
            80..=89 if size > 0 => {
                let x = rng.random_range(0..size);
                let tag = rng.random_range(0..50);
                t.set_tag(x, tag).unwrap_or_else(|e| panic!("{ctx}: {e}"));
                if tag == 0 {
                    m.tags.remove(&x);
                } else {
                    m.tags.insert(x, tag);
                }
            }
            _ if size > 0 => {
                // Queries of random sub-ranges must agree with the model.
                let x = rng.random_range(0..size);
                let len = rng.random_range(1..=(size - x).min(200));
                let got = canonical(t.query(x, len).unwrap().into_iter().map(|p| (p.len, p.addr)));
                let mut mm = m.clone();
                let i = mm.split(x);
                let j = mm.split(x + len);
                assert_eq!(got, canonical(mm.runs[i..j].iter().copied()), "{ctx}: query {x}+{len}");
                let tx = rng.random_range(0..size);
                assert_eq!(
                    t.get_tag(tx).unwrap(),
                    m.tags.get(&tx).copied().unwrap_or(0),
                    "{ctx}: tag at {tx}"
                );
            }
            _ => {}
        }
        assert_eq!(t.size(), m.size(), "{ctx}");
        if step % 16 == 0 || huge {
            assert_eq!(tree_runs(&t), m.canonical(), "{ctx}");
            for (&k, &v) in &m.tags {
                assert_eq!(t.get_tag(k).unwrap(), v, "{ctx}: tag at {k}");
            }
        }
        t.check().unwrap_or_else(|e| panic!("{ctx}: {e}"));
    }
    assert_eq!(tree_runs(&t), m.canonical());
    let st = t.stats();
    eprintln!("seed {seed}: size {} extents {} nodes {} {st:?}", t.size(), t.extent_count(), t.node_count());
    assert!(st.splits > 0 && st.merges > 0, "seed {seed}: the run never split or merged: {st:?}");
}

#[test]
fn model_tiny_nodes() {
    for seed in seeds() {
        let cfg = TreeConfig { leaf_cap: 4, internal_cap: 4, boundary: 64, max_merge: 0 };
        run_model(seed, cfg, 3000 * testkit::scale(), false);
    }
}

#[test]
fn model_small_nodes() {
    for seed in seeds() {
        let cfg = TreeConfig { leaf_cap: 6, internal_cap: 5, boundary: 128, max_merge: 32 };
        run_model(seed ^ 0x55, cfg, 3000 * testkit::scale(), false);
    }
}

#[test]
fn model_huge_extents_force_rebases() {
    let mut rebases = 0;
    for seed in seeds() {
        let cfg = TreeConfig { leaf_cap: 4, internal_cap: 4, boundary: 64, max_merge: 0 };
        let mut rng = SmallRng::seed_from_u64(seed);
        let _ = rng.random::<u8>();
        run_model(seed ^ 0xabc, cfg, 600 * testkit::scale(), true);
        // Drive a leaf towards the 32-bit limit directly: big holes inserted at a leaf's head.
        let mut t = FlexTree::new(cfg).unwrap();
        for i in 0..40u64 {
            t.insert(0, 1 + i, i * 64, 0).unwrap();
        }
        for _ in 0..40 {
            let x = t.size() / 2;
            t.insert(x, 900 << 20, HOLE, 0).unwrap();
            t.check().unwrap();
        }
        rebases += t.stats().rebases;
    }
    assert!(rebases > 0, "no rebase happened");
}

#[test]
fn paper_figure4_insert_at_head_shifts_everything() {
    // Fig. 3b/4: extents (0,9,0) (9,8,31) ...; inserting (0,3,89) shifts every extent by 3.
    let mut t =
        FlexTree::new(TreeConfig { leaf_cap: 4, internal_cap: 4, boundary: 0, max_merge: 0 }).unwrap();
    let ext = [(9u64, 0u64), (8, 31), (13, 50), (3, 40), (6, 12), (9, 15), (3, 39), (9, 50), (1, 42)];
    for (l, a) in ext {
        t.insert(t.size(), l, a, 0).unwrap();
    }
    let before = t.query(0, t.size()).unwrap();
    t.insert(0, 3, 89, 0).unwrap();
    let after = t.query(0, t.size()).unwrap();
    assert_eq!(after[0], Piece { off: 0, len: 3, addr: 89, tag: 0 });
    for (b, a) in before.iter().zip(&after[1..]) {
        assert_eq!((b.off + 3, b.len, b.addr), (a.off, a.len, a.addr));
    }
    // Fig. 6: the 19-byte range at 36 of the shifted file.
    let size = t.size();
    let q = t.query(36, 19.min(size - 36)).unwrap();
    assert_eq!(q.iter().map(|p| p.len).sum::<u64>(), 19);
    // Fig. 7: removing a 9-byte range shifts everything after it back by 9.
    let tail = t.query(42, size - 42).unwrap();
    t.collapse(33, 9).unwrap();
    let tail2 = t.query(33, size - 42).unwrap();
    assert_eq!(
        canonical(tail.iter().map(|p| (p.len, p.addr))),
        canonical(tail2.iter().map(|p| (p.len, p.addr)))
    );
}

#[test]
fn insert_at_head_many_times_stays_consistent() {
    let mut t =
        FlexTree::new(TreeConfig { leaf_cap: 8, internal_cap: 6, boundary: 0, max_merge: 0 }).unwrap();
    for i in 0..2000u64 {
        t.insert(0, 10, i * 100, 0).unwrap();
    }
    let q = t.query(0, t.size()).unwrap();
    assert_eq!(q.len(), 2000);
    for (i, p) in q.iter().enumerate() {
        assert_eq!(p.addr, (1999 - i as u64) * 100);
    }
    assert!(t.stats().splits > 0);
    // Removing everything merges the tree back down to an empty root leaf.
    t.collapse(0, t.size()).unwrap();
    assert_eq!(t.size(), 0);
    assert_eq!(t.node_count(), 1);
}

#[test]
fn invalid_arguments_are_errors_not_panics() {
    let mut t = FlexTree::new(TreeConfig::default()).unwrap();
    assert!(t.insert(1, 1, 0, 0).is_err());
    assert!(t.collapse(0, 1).is_err());
    assert!(t.query(0, 1).is_err());
    assert!(t.set_tag(0, 1).is_err());
    assert!(t.insert(0, 10, HOLE - 5, 0).is_err());
    assert!(t.write(3, 1, 0).is_err());
    assert!(FlexTree::new(TreeConfig { leaf_cap: 2, ..TreeConfig::default() }).is_err());
}
