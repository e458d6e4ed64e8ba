//! Copy-on-write across checkpoints: the previous tree version stays intact on disk until the next header is
//! durable, including the slots of nodes that merges freed (the reference implementation reused those at once).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use flexfile::flexfile::TREE_FILE;
use flexfile::treefile::TreeFile;
use flexfile::{FlexFile, Options};
use vfs::OpenMode;

fn tree_runs(t: &flexfile::FlexTree) -> Vec<(u64, u64)> {
    t.query(0, t.size()).unwrap().into_iter().map(|p| (p.len, p.addr)).collect()
}

#[test]
fn regression_previous_version_survives_a_checkpoint_with_merges() {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let dir = Path::new("/cow");
    let opts = Options::tiny();
    let mut f = FlexFile::create(fs.clone(), dir, opts.clone()).unwrap();
    for i in 0..300u32 {
        f.insert((i as u64 * 31) % (f.size() + 1), &[i as u8; 13]).unwrap();
    }
    f.checkpoint().unwrap();
    let v_old = f.version();
    let old = tree_runs(f.tree());
    // Collapse most of the file: many merges free many nodes; then rewrite a lot so new nodes need slots.
    let merges_before = f.tree().stats().merges;
    f.collapse(100, f.size() - 200).unwrap();
    assert!(f.tree().stats().merges > merges_before + 10);
    for i in 0..100u32 {
        f.insert(50, &[i as u8; 5]).unwrap();
    }
    f.checkpoint().unwrap();
    let v_new = f.version();
    assert_eq!(v_new, v_old + 1);
    drop(f);
    // Damage the new header: the old version must still load, node for node.
    let t = fs.open(&dir.join(TREE_FILE), OpenMode::ReadWrite).unwrap();
    let h = TreeFile::read_header(t.as_ref()).unwrap();
    assert_eq!(h.version, v_new);
    let off = (v_new % 2) * h.node_size as u64 + 17;
    let mut b = [0u8; 1];
    t.read_exact_at(&mut b, off).unwrap();
    t.write_all_at(&[b[0] ^ 0xff], off).unwrap();
    let (tf, tree) = TreeFile::open(t, opts.tree_config()).unwrap();
    assert_eq!(tf.version(), v_old);
    assert_eq!(tree_runs(&tree), old);
}
