//! The names side of `CrashFs`: the current and durable trees of paths and the log of pending namespace
//! operations between them.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::CrashMode;
use super::inode::Inode;
use crate::rng::SplitMix64;

/// A file's contents, shared by its names, the pending operations naming it and its open handles.
pub(super) type InodeRef = Arc<Mutex<Inode>>;

/// What a path names.
#[derive(Debug, Clone)]
pub(super) enum Node {
    File(InodeRef),
    Dir,
}

/// Paths to what they name; parents sort before their children (paths compare by component).
pub(super) type Tree = BTreeMap<PathBuf, Node>;

/// A namespace change not yet known durable.
#[derive(Debug)]
pub(super) enum NsOp {
    Create(PathBuf, InodeRef),
    Mkdir(PathBuf),
    Remove(PathBuf),
    Rename(PathBuf, PathBuf),
}

impl NsOp {
    fn names(&self) -> impl Iterator<Item = &Path> {
        let (a, b) = match self {
            NsOp::Create(p, _) | NsOp::Mkdir(p) | NsOp::Remove(p) => (p, None),
            NsOp::Rename(from, to) => (from, Some(to)),
        };
        std::iter::once(a.as_path()).chain(b.map(PathBuf::as_path))
    }

    pub(super) fn apply(&self, tree: &mut Tree) {
        match self {
            NsOp::Create(p, inode) => {
                tree.insert(p.clone(), Node::File(inode.clone()));
            }
            NsOp::Mkdir(p) => {
                tree.insert(p.clone(), Node::Dir);
            }
            NsOp::Remove(p) => {
                tree.remove(p);
            }
            NsOp::Rename(from, to) => {
                if let Some(node) = tree.remove(from) {
                    tree.insert(to.clone(), node);
                }
            }
        }
    }
}

/// The current tree, the durable tree, and the pending operations that lead from the one to the other.
#[derive(Debug, Default)]
pub(super) struct Namespace {
    pub(super) cur: Tree,
    pub(super) durable: Tree,
    pub(super) pending: Vec<NsOp>,
}

impl Namespace {
    /// A namespace in which `tree` is current and durable.
    pub(super) fn durable(tree: Tree) -> Self {
        Namespace { cur: tree.clone(), durable: tree, pending: Vec::new() }
    }

    /// Applies `op` to the current tree and logs it as pending.
    pub(super) fn push(&mut self, op: NsOp) {
        op.apply(&mut self.cur);
        self.pending.push(op);
    }

    /// `sync_dir(dir)`: commits every pending operation with an entry in `dir` and, transitively, the earlier
    /// pending operations they depend on, applying them to the durable tree in log order.
    pub(super) fn commit(&mut self, dir: &Path) {
        // Walk the log backwards: an operation is committed if it has an entry in `dir` or names a path that a
        // later committed operation names (it is a dependency of that one).
        let mut needed: HashSet<PathBuf> = HashSet::new();
        let mut commit = vec![false; self.pending.len()];
        for (i, op) in self.pending.iter().enumerate().rev() {
            if op.names().any(|n| parent(n) == dir || needed.contains(n)) {
                commit[i] = true;
                needed.extend(op.names().map(Path::to_path_buf));
            }
        }
        let pending = std::mem::take(&mut self.pending);
        for (op, commit) in pending.into_iter().zip(commit) {
            if commit {
                op.apply(&mut self.durable);
            } else {
                self.pending.push(op);
            }
        }
    }

    /// The tree a crash leaves: the durable tree plus the pending operations that survive (each by a coin from
    /// `rng` in `Seeded` mode, none or all in the other modes, never one whose dependency was dropped), minus
    /// entries whose parent directory did not survive.
    pub(super) fn after_crash(&self, mode: CrashMode, rng: &mut SplitMix64) -> Tree {
        let mut tree = self.durable.clone();
        let mut dropped: HashSet<&Path> = HashSet::new();
        for op in &self.pending {
            let keep = match mode {
                CrashMode::DropUnsynced => false,
                CrashMode::KeepUnsynced => true,
                CrashMode::Seeded(_) => rng.coin(),
            } && !op.names().any(|n| dropped.contains(n));
            if keep {
                op.apply(&mut tree);
            } else {
                dropped.extend(op.names());
            }
        }
        // Parents sort before their children, so one pass drops orphans, and their children after them.
        let mut survived = Tree::new();
        for (path, node) in tree {
            if dir_in(&survived, parent(&path)) {
                survived.insert(path, node);
            }
        }
        survived
    }
}

/// Whether `p` is a root (`""` or `/`): always present, always durable.
pub(super) fn is_root(p: &Path) -> bool {
    p.as_os_str().is_empty() || p == Path::new("/")
}

/// The directory holding `p`'s entry.
pub(super) fn parent(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new(""))
}

/// Whether `dir` is a directory of `tree`.
pub(super) fn dir_in(tree: &Tree, dir: &Path) -> bool {
    is_root(dir) || matches!(tree.get(dir), Some(Node::Dir))
}
