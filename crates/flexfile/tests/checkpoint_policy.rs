//! When checkpoints run: at `checkpoint_log_bytes` of log, and not before the log is `checkpoint_tree_ratio` times
//! the tree's size, so scattered updates on a large tree do not rewrite it every few megabytes of log.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use flexfile::{FlexFile, Options};

/// Scattered small inserts and collapses (a fragmented, many-node tree) under `opts`; returns the file's stats and
/// its content after a reopen that replays the log (no closing checkpoint).
fn scattered(opts: Options) -> (flexfile::Stats, Vec<u8>) {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let dir = Path::new("/cp");
    let mut f = FlexFile::create(fs.clone(), dir, opts.clone()).unwrap();
    let mut x = 0x9E37_79B9u64;
    for i in 0..3000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = x % (f.size() + 1);
        if i % 5 == 4 && f.size() > 64 {
            f.collapse(off.min(f.size() - 8), 8).unwrap();
        } else {
            f.insert(off, &[i as u8; 11]).unwrap();
        }
    }
    f.sync().unwrap();
    let stats = f.stats();
    let size = f.size();
    drop(f);
    let mut f = FlexFile::open(fs, dir, opts).unwrap();
    let mut buf = vec![0u8; size as usize];
    f.read(0, &mut buf).unwrap();
    (stats, buf)
}

#[test]
fn checkpoints_wait_for_a_log_proportional_to_the_tree() {
    let base = Options { checkpoint_log_bytes: 1 << 10, ..Options::tiny() };
    let (fixed, want) = scattered(Options { checkpoint_tree_ratio: 0, ..base.clone() });
    let ratio = 4;
    let (prop, got) = scattered(Options { checkpoint_tree_ratio: ratio, ..base.clone() });
    assert_eq!(got, want, "same content whatever the checkpoint policy, after replaying the longer log");
    assert!(fixed.tree_nodes > 40, "the workload must build a tree of many nodes: {fixed:?}");
    assert!(
        prop.checkpoints * 2 < fixed.checkpoints,
        "{} vs {} checkpoints",
        prop.checkpoints,
        fixed.checkpoints
    );
    assert!(prop.tree_bytes_written * 2 < fixed.tree_bytes_written);
    // Each checkpoint writes at most the whole tree, which is at most 1/ratio of the log written since the last
    // one; headers (one node slot each) and the creating checkpoint come on top.
    let per_checkpoint = 2 * base.node_size as u64;
    assert!(
        prop.tree_bytes_written
            <= prop.log_bytes_written / ratio as u64 + (prop.checkpoints + 1) * per_checkpoint,
        "{prop:?}"
    );
}
