//! The decoders (tree header, tree node, log) on random and mutated bytes: typed results, never a panic, and what
//! decodes re-encodes to the same value. The cargo-fuzz targets in `fuzz/` explore the same property further.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use flexfile::flextree::{Extent, HOLE, TreeConfig};
use flexfile::log::{self, Op};
use flexfile::treefile::{DiskNode, Header, decode_node, encode_node};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn cfg() -> TreeConfig {
    TreeConfig { leaf_cap: 60, internal_cap: 30, boundary: 0, max_merge: 0 }
}

#[test]
fn node_roundtrip_and_mutations() {
    let mut rng = SmallRng::seed_from_u64(7);
    let leaf = DiskNode::Leaf(
        (0..60)
            .map(|i| Extent {
                poff: i * 10,
                len: 10,
                tag: i as u16,
                addr: if i % 7 == 0 { HOLE } else { i as u64 * 99 },
            })
            .collect(),
    );
    let internal = DiskNode::Internal(
        (0..30).map(|i| (i, -(i as i64) * 5)).collect(),
        (1..30).map(|i| i as i64 * 1000).collect(),
    );
    for node in [leaf, internal] {
        let b = encode_node(&node, 3, 1024);
        assert_eq!(decode_node(&b, 3, &cfg()).unwrap(), node);
        assert!(decode_node(&b, 4, &cfg()).unwrap_err().is_corruption(), "wrong slot must not verify");
        for _ in 0..2000 {
            let mut m = b.clone();
            let i = rng.random_range(0..m.len());
            m[i] ^= 1 << rng.random_range(0..8);
            assert!(decode_node(&m, 3, &cfg()).unwrap_err().is_corruption());
        }
        for n in 0..64 {
            let _ = decode_node(&b[..n], 3, &cfg());
        }
    }
}

#[test]
fn header_roundtrip_and_mutations() {
    let h = Header {
        node_size: 1024,
        version: 77,
        root_slot: 5,
        slot_count: 9,
        size: 123456,
        extents: 42,
        segment_size: 4 << 20,
        leaf_cap: 60,
        internal_cap: 30,
        max_extent: 128 << 10,
        block_size: 4096,
    };
    let b = h.encode();
    assert_eq!(Header::decode(&b), Some(h));
    for i in 0..b.len() {
        for bit in 0..8 {
            let mut m = b;
            m[i] ^= 1 << bit;
            assert_eq!(Header::decode(&m), None, "byte {i} bit {bit}");
        }
    }
}

#[test]
fn log_parse_random_and_mutated() {
    let mut rng = SmallRng::seed_from_u64(9);
    let mut bytes = log::encode_header(5).to_vec();
    let mut ops = Vec::new();
    for b in 0..20 {
        let start = bytes.len();
        for i in 0..5u64 {
            let op = match (b + i) % 4 {
                0 => Op::Insert { off: i, len: 3, addr: i * 7, tag: 1 },
                1 => Op::Collapse { off: i, len: 2 },
                2 => Op::Relocate { off: i, len: 2, addr: 100 },
                _ => Op::SetTag { off: i, tag: 9 },
            };
            ops.push(op);
            bytes.extend_from_slice(&log::encode_op(5, &op));
        }
        let batch = bytes[start..].to_vec();
        bytes.extend_from_slice(&log::encode_commit(5, &batch));
    }
    let p = log::parse(&bytes, 5).unwrap();
    assert_eq!(p.ops, ops);
    assert_eq!(p.batches, 20);
    // Another version's log is ignored, not replayed.
    assert!(log::parse(&bytes, 6).unwrap().ops.is_empty());
    for _ in 0..3000 {
        let mut m = bytes.clone();
        let i = rng.random_range(0..m.len());
        m[i] ^= 1 << rng.random_range(0..8);
        match log::parse(&m, 5) {
            // A flipped bit in a synced batch is reported wherever it is (in the header it makes the log
            // another tree's).
            Ok(p) => assert!(p.version != Some(5), "mutation at {i} went unreported"),
            Err(e) => assert!(e.is_corruption()),
        }
        let n = rng.random_range(0..m.len());
        let _ = log::parse(&m[..n], 5);
        // A cut-short or zero-filled tail (a torn final write) drops the incomplete batch only.
        let mut t = bytes.clone();
        let from = rng.random_range(log::HEADER_LEN..t.len());
        if rng.random_bool(0.5) {
            t.truncate(from);
        } else {
            // Sectors from a boundary on never reached the media.
            let s = (from / log::SECTOR * log::SECTOR).max(log::HEADER_LEN);
            t[s..].fill(0);
        }
        let p = log::parse(&t, 5).unwrap();
        assert!(ops.starts_with(&p.ops) && p.ops.len().is_multiple_of(5), "torn tail from {from}");
    }
    let noise: Vec<u8> = (0..5000).map(|_| rng.random()).collect();
    let _ = log::parse(&noise, 5);
}
