//! The BP-tree: an in-memory ordered map whose leaves are buffered partitioned arrays (Xu, Li, Wheatman, Marneni,
//! Pandey: "BP-tree: Overcoming the Point-Range Operation Tradeoff for In-Memory B-trees", VLDB 2023).
//!
//! A B+-tree with small sorted-array internal nodes (1 KiB) and large leaves (1,088 slots, 17 KiB with 8-byte keys
//! and values). Each leaf is a [`Bpa`]: inserts go to a small unsorted log, which is flushed into
//! range-partitioned, unsorted blocks when it fills; range reads sort lazily what they touch. Large leaves make
//! long scans sequential; the log and the blocks keep inserts as cheap as in a small-leaf B-tree. See
//! `docs/bptree.md` for the paper mapped to this code.
//!
//! # The API (what the LSM engine and FlexDB build their memtables on)
//!
//! Three trees share one leaf type and one iterator:
//!
//! | type | writes | reads | use |
//! |---|---|---|---|
//! | [`BpTree<K, V>`] | `&mut self` | `&self` | the active memtable (single writer, or behind a lock) |
//! | [`FrozenBpTree<K, V>`] | none | `&self`, `Sync` | the immutable memtable: `tree.freeze()` sorts everything once |
//! | [`ConcurrentBpTree<K, V>`] | `&self` | `&self` | many writers and readers: per-node reader-writer locks |
//!
//! Keys are any `K: Ord + Clone + Default + HeapSize + Fingerprint`, values any `V: Default + HeapSize`
//! ([`HeapSize`] reports heap bytes so `memory_usage()` is exact and O(1); it is implemented for integers,
//! `Vec<u8>`, `Box<[u8]>`, `String`, `Arc<[u8]>`, tuples and [`ByteKey`]). No key value is reserved. Fixed-size keys (`u64`, `[u8; N]`)
//! are compared inline; byte-string keys should be [`ByteKey`] (24 bytes in the leaf), which compares its first
//! sixteen bytes as an integer held in the leaf, holds keys of up to 16 bytes inline and longer ones in one
//! exact-size length-prefixed allocation. [`Fingerprint`] is a key's one-byte digest, which leaves keep beside
//! byte-string keys so scans compare few keys; it is implemented for integers, byte strings, strings, byte arrays
//! and [`ByteKey`] (for another key type any function of the key's value is correct, a constant included). Point
//! lookups take any [`PointProbe`]: every `Q` that `K` borrows as (`&[u8]` for `ByteKey`, `Box<[u8]>` and
//! `Vec<u8>`), or a prepared [`ByteProbe`] ([`ByteKey::probe`]), which compares by the integer first; range bounds
//! take a borrowed `Q`.
//!
//! ```
//! use bptree::{BpTree, ByteKey};
//! use std::ops::Bound;
//!
//! let mut t: BpTree<ByteKey, Box<[u8]>> = BpTree::new();
//! assert_eq!(t.insert(ByteKey::new(b"apple"), b"red".to_vec().into()), None);
//! t.insert(ByteKey::new(b"banana"), b"yellow".to_vec().into());
//! let old = t.insert(ByteKey::new(b"apple"), b"green".to_vec().into());
//! assert_eq!(old.as_deref(), Some(&b"red"[..]));
//! assert_eq!(t.get(&b"apple"[..]).map(|v| &v[..]), Some(&b"green"[..]));
//! assert_eq!(t.len(), 2);
//!
//! // Ordered, bounded, double-ended iteration (seek = choose the start bound).
//! let keys: Vec<&[u8]> = t.range::<[u8], _>((Bound::Included(&b"b"[..]), Bound::Unbounded))
//!     .map(|(k, _)| k.as_bytes()).collect();
//! assert_eq!(keys, vec![&b"banana"[..]]);
//! assert_eq!(t.iter().next_back().map(|(k, _)| k.as_bytes()), Some(&b"banana"[..]));
//!
//! assert_eq!(t.remove(&b"banana"[..]).as_deref(), Some(&b"yellow"[..]));
//! assert!(t.memory_usage() > 0);
//!
//! // Freeze: read-only, fully sorted, shareable across threads.
//! let frozen = std::sync::Arc::new(t.freeze());
//! let f2 = frozen.clone();
//! std::thread::spawn(move || assert_eq!(f2.len(), 1)).join().unwrap();
//! assert_eq!(frozen.iter().count(), 1);
//! ```
//!
//! Operations of every tree:
//! - `insert(k, v) -> Option<V>` (the old value), `get(&q) -> Option<&V>` (`Option<V>` cloned for the concurrent
//!   tree), `remove(&q) -> Option<V>`, `len()`, `is_empty()`, `memory_usage()`, `stats()`.
//! - `range(bounds)`: a double-ended iterator of `(&K, &V)` in key order over any `RangeBounds`; `iter()`.
//!   The concurrent tree's `range` yields owned `(K, V)` and re-seeks between leaves (no lock is held between
//!   calls to `next`).
//! - `iterate_range(start: Bound<&Q>, length, f)`: the paper's ordered scan of `length` entries; on the mutable
//!   tree it sorts the regions it touches in place.
//! - `map_range(bounds, f)`: the paper's unordered scan.
//! - `BpTree::bulk_load(opts, sorted)`, `BpTree::freeze(self)`, `FrozenBpTree::into_inner`.
//! - `check_invariants()`: the whole-structure check tests run; the `invariants` cargo feature also checks each
//!   leaf after every insert, flush, split and merge.
//!
//! The leaf type is a parameter: `BpTree<K, V, SortedLeaf<K, V>>` is the same tree with classic sorted-array leaves
//! (the paper's B-tree baseline and our ablation).

mod bpa;
mod byte_key;
mod concurrent;
mod error;
mod frozen;
#[doc(hidden)]
pub mod fuzz_support;
mod heap_size;
mod iter;
mod leaf;
mod options;
pub mod prefetch;
mod probe;
mod sorted_leaf;
mod stats;
mod sync;
mod tree;

pub use bpa::{Bpa, BpaIter};
pub use byte_key::{ByteKey, ByteProbe};
pub use concurrent::{ConcurrentBpTree, ConcurrentRange};
pub use error::{Error, Result};
pub use frozen::FrozenBpTree;
pub use heap_size::HeapSize;
pub use iter::Range;
pub use leaf::Leaf;
pub use options::Options;
pub use probe::{Fingerprint, PointProbe, Probe};
pub use sorted_leaf::SortedLeaf;
pub use stats::Stats;
pub use tree::BpTree;

/// The classic B+-tree: the same tree with sorted-array leaves (the paper's baseline; the ablation of the BPA).
pub type SortedLeafTree<K, V> = BpTree<K, V, SortedLeaf<K, V>>;
