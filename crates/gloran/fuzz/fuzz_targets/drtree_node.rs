//! Fuzzes the DR-tree node decoder: any bytes give a node or `Corruption`, never a panic; a node that decodes
//! re-encodes to the same bytes.
#![no_main]

use gloran::node::{Node, NodeBuilder, NodeView, decode_node};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match decode_node(data) {
        Ok(Node::Leaf(areas)) => {
            let mut b = NodeBuilder::leaf();
            for a in &areas {
                b.push_area(a);
            }
            assert_eq!(b.finish(), data);
        }
        Ok(Node::Inner(h, children)) => {
            let mut b = NodeBuilder::inner(h);
            for c in &children {
                b.push_child(c);
            }
            assert_eq!(b.finish(), data);
        }
        Err(e) => assert!(e.is_corruption()),
    }
    // The in-place reader used by lookups must be as robust as the full decoder.
    if let Ok(v) = NodeView::parse(data) {
        let _ = v.last_le(b"key");
        for i in 0..v.len().min(64) {
            let _ = v.area(i);
            let _ = v.child(i);
        }
    }
});
