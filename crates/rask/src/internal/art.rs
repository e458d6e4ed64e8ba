//! An adaptive radix tree over u64 anchor keys (Leis et al., ICDE'13), RASK's internal nodes.
//!
//! Keys are the eight big-endian bytes of the anchor, so byte order is numeric order and a predecessor search is a
//! single root-to-leaf walk with at most one step back. Design points from the ART paper that matter here:
//!
//! - **Adaptive node sizes.** Inner nodes are `Node4`, `Node16` (sorted key bytes + child array), `Node48` (a
//!   256-entry byte → slot table + 48 children) and `Node256` (direct array). A node grows to the next size when
//!   full and shrinks when it falls to a quarter-ish of the smaller size (4 → collapse at 1 child, 16 → 4 at 3,
//!   48 → 16 at 12, 256 → 48 at 37; the gaps avoid grow/shrink thrash at the boundary).
//! - **Path compression.** Each inner node stores the bytes all keys below it share (up to 7 for 8-byte keys) and
//!   a one-child node is merged into its child. The full prefix is stored (pessimistic compression), so no leaf
//!   has to be consulted to verify a prefix.
//! - **Lazy expansion.** A leaf is an inline `(key, value)` in its parent's child slot, not a chain of one-child
//!   nodes: RASK has one key per leaf node of its own, so this is where most of the memory saving comes from.
//!
//! `memory_usage` is exact: the sum of the boxed node sizes.

use super::InternalIndex;

#[derive(Clone, Copy, Debug, Default)]
struct Header {
    prefix: [u8; 8],
    prefix_len: u8,
    count: u16,
}

impl Header {
    fn prefix(&self) -> &[u8] {
        &self.prefix[..self.prefix_len as usize]
    }

    /// The stored prefix against `key`'s bytes from `depth`, as one integer comparison.
    /// REQUIRES: `depth + prefix_len <= 8` (a prefix never reaches past the key).
    #[inline]
    fn cmp_prefix(&self, key: u64, depth: usize) -> std::cmp::Ordering {
        let plen = self.prefix_len as usize;
        if plen == 0 {
            return std::cmp::Ordering::Equal;
        }
        let shift = 8 * (8 - plen) as u32;
        let p = u64::from_be_bytes(self.prefix) >> shift;
        let k = (key << (8 * depth as u32)) >> shift;
        p.cmp(&k)
    }
}

struct N4<T> {
    h: Header,
    keys: [u8; 4],
    children: [Option<Node<T>>; 4],
}

struct N16<T> {
    h: Header,
    keys: [u8; 16],
    children: [Option<Node<T>>; 16],
}

struct N48<T> {
    h: Header,
    /// 0 = no child, else slot + 1.
    index: [u8; 256],
    children: [Option<Node<T>>; 48],
}

struct N256<T> {
    h: Header,
    children: [Option<Node<T>>; 256],
}

enum Node<T> {
    /// Transient placeholder while a node is replaced by its grown, shrunk or collapsed form; never in a tree.
    Empty,
    Leaf(u64, T),
    N4(Box<N4<T>>),
    N16(Box<N16<T>>),
    N48(Box<N48<T>>),
    N256(Box<N256<T>>),
}

#[inline]
fn byte(key: u64, depth: usize) -> u8 {
    key.to_be_bytes()[depth]
}

fn none_array<T, const N: usize>() -> [Option<Node<T>>; N] {
    std::array::from_fn(|_| None)
}

impl<T: Copy> Node<T> {
    fn new4(h: Header) -> Node<T> {
        Node::N4(Box::new(N4 { h, keys: [0; 4], children: none_array() }))
    }

    fn header(&self) -> Option<&Header> {
        match self {
            Node::Empty | Node::Leaf(..) => None,
            Node::N4(n) => Some(&n.h),
            Node::N16(n) => Some(&n.h),
            Node::N48(n) => Some(&n.h),
            Node::N256(n) => Some(&n.h),
        }
    }

    fn header_mut(&mut self) -> Option<&mut Header> {
        match self {
            Node::Empty | Node::Leaf(..) => None,
            Node::N4(n) => Some(&mut n.h),
            Node::N16(n) => Some(&mut n.h),
            Node::N48(n) => Some(&mut n.h),
            Node::N256(n) => Some(&mut n.h),
        }
    }

    fn child(&self, b: u8) -> Option<&Node<T>> {
        match self {
            Node::Empty | Node::Leaf(..) => None,
            Node::N4(n) => {
                (0..n.h.count as usize).find(|&i| n.keys[i] == b).and_then(|i| n.children[i].as_ref())
            }
            Node::N16(n) => {
                (0..n.h.count as usize).find(|&i| n.keys[i] == b).and_then(|i| n.children[i].as_ref())
            }
            Node::N48(n) => match n.index[b as usize] {
                0 => None,
                s => n.children[s as usize - 1].as_ref(),
            },
            Node::N256(n) => n.children[b as usize].as_ref(),
        }
    }

    fn child_mut(&mut self, b: u8) -> Option<&mut Node<T>> {
        match self {
            Node::Empty | Node::Leaf(..) => None,
            Node::N4(n) => {
                (0..n.h.count as usize).find(|&i| n.keys[i] == b).and_then(|i| n.children[i].as_mut())
            }
            Node::N16(n) => {
                (0..n.h.count as usize).find(|&i| n.keys[i] == b).and_then(|i| n.children[i].as_mut())
            }
            Node::N48(n) => match n.index[b as usize] {
                0 => None,
                s => n.children[s as usize - 1].as_mut(),
            },
            Node::N256(n) => n.children[b as usize].as_mut(),
        }
    }

    /// Children in ascending key-byte order.
    fn children(&self) -> Vec<(u8, &Node<T>)> {
        match self {
            Node::Empty | Node::Leaf(..) => Vec::new(),
            Node::N4(n) => {
                (0..n.h.count as usize).filter_map(|i| Some((n.keys[i], n.children[i].as_ref()?))).collect()
            }
            Node::N16(n) => {
                (0..n.h.count as usize).filter_map(|i| Some((n.keys[i], n.children[i].as_ref()?))).collect()
            }
            Node::N48(n) => (0..=255u8)
                .filter_map(|b| match n.index[b as usize] {
                    0 => None,
                    s => Some((b, n.children[s as usize - 1].as_ref()?)),
                })
                .collect(),
            Node::N256(n) => {
                (0..=255u8).filter_map(|b| Some((b, n.children[b as usize].as_ref()?))).collect()
            }
        }
    }

    /// The child with the largest key byte `< b`.
    fn child_before(&self, b: u8) -> Option<&Node<T>> {
        match self {
            Node::Empty | Node::Leaf(..) => None,
            Node::N4(n) => {
                (0..n.h.count as usize).rev().find(|&i| n.keys[i] < b).and_then(|i| n.children[i].as_ref())
            }
            Node::N16(n) => {
                (0..n.h.count as usize).rev().find(|&i| n.keys[i] < b).and_then(|i| n.children[i].as_ref())
            }
            Node::N48(n) => (0..b).rev().find_map(|c| match n.index[c as usize] {
                0 => None,
                s => n.children[s as usize - 1].as_ref(),
            }),
            Node::N256(n) => (0..b).rev().find_map(|c| n.children[c as usize].as_ref()),
        }
    }

    fn max_leaf(&self) -> Option<(u64, T)> {
        let mut n = self;
        loop {
            match n {
                Node::Leaf(k, v) => return Some((*k, *v)),
                _ => n = n.child_before_or_last()?,
            }
        }
    }

    fn child_before_or_last(&self) -> Option<&Node<T>> {
        match self {
            Node::N256(n) => n.children.iter().rev().find_map(|c| c.as_ref()),
            Node::N48(n) => n
                .index
                .iter()
                .rev()
                .find_map(|&s| if s == 0 { None } else { n.children[s as usize - 1].as_ref() }),
            Node::N16(n) => n.h.count.checked_sub(1).and_then(|i| n.children[i as usize].as_ref()),
            Node::N4(n) => n.h.count.checked_sub(1).and_then(|i| n.children[i as usize].as_ref()),
            Node::Empty | Node::Leaf(..) => None,
        }
    }

    /// Adds a child under a new key byte, growing the node if it is full. REQUIRES: no child at `b`.
    fn add_child(&mut self, b: u8, child: Node<T>) {
        match self {
            Node::Empty | Node::Leaf(..) => {}
            Node::N4(n) if (n.h.count as usize) < 4 => {
                let c = n.h.count as usize;
                let pos = (0..c).find(|&i| n.keys[i] > b).unwrap_or(c);
                for i in (pos..c).rev() {
                    n.keys[i + 1] = n.keys[i];
                    n.children[i + 1] = n.children[i].take();
                }
                n.keys[pos] = b;
                n.children[pos] = Some(child);
                n.h.count += 1;
            }
            Node::N16(n) if (n.h.count as usize) < 16 => {
                let c = n.h.count as usize;
                let pos = (0..c).find(|&i| n.keys[i] > b).unwrap_or(c);
                for i in (pos..c).rev() {
                    n.keys[i + 1] = n.keys[i];
                    n.children[i + 1] = n.children[i].take();
                }
                n.keys[pos] = b;
                n.children[pos] = Some(child);
                n.h.count += 1;
            }
            Node::N48(n) if (n.h.count as usize) < 48 => {
                let Some(slot) = n.children.iter().position(|c| c.is_none()) else { return };
                n.children[slot] = Some(child);
                n.index[b as usize] = slot as u8 + 1;
                n.h.count += 1;
            }
            Node::N256(n) => {
                n.children[b as usize] = Some(child);
                n.h.count += 1;
            }
            _ => {
                self.grow();
                self.add_child(b, child);
            }
        }
    }

    fn grow(&mut self) {
        let old = std::mem::replace(self, Node::Empty);
        *self = match old {
            Node::N4(mut n) => {
                let mut m = Box::new(N16 { h: n.h, keys: [0; 16], children: none_array() });
                m.keys[..4].copy_from_slice(&n.keys);
                for i in 0..4 {
                    m.children[i] = n.children[i].take();
                }
                Node::N16(m)
            }
            Node::N16(mut n) => {
                let mut m = Box::new(N48 { h: n.h, index: [0; 256], children: none_array() });
                for i in 0..n.h.count as usize {
                    m.index[n.keys[i] as usize] = i as u8 + 1;
                    m.children[i] = n.children[i].take();
                }
                Node::N48(m)
            }
            Node::N48(mut n) => {
                let mut m = Box::new(N256 { h: n.h, children: none_array() });
                for b in 0..256 {
                    if n.index[b] != 0 {
                        m.children[b] = n.children[n.index[b] as usize - 1].take();
                    }
                }
                Node::N256(m)
            }
            other => other,
        };
    }

    /// Removes the child at `b` and returns it; then shrinks or collapses the node if it became sparse.
    fn remove_child(&mut self, b: u8) -> Option<Node<T>> {
        let removed = match self {
            Node::Empty | Node::Leaf(..) => None,
            Node::N4(n) => remove_sorted(&mut n.h, &mut n.keys, &mut n.children, b),
            Node::N16(n) => remove_sorted(&mut n.h, &mut n.keys, &mut n.children, b),
            Node::N48(n) => match n.index[b as usize] {
                0 => None,
                s => {
                    n.index[b as usize] = 0;
                    n.h.count -= 1;
                    n.children[s as usize - 1].take()
                }
            },
            Node::N256(n) => {
                let c = n.children[b as usize].take();
                if c.is_some() {
                    n.h.count -= 1;
                }
                c
            }
        };
        if removed.is_some() {
            self.shrink();
        }
        removed
    }

    fn shrink(&mut self) {
        let count = self.header().map_or(0, |h| h.count as usize);
        let want = match self {
            Node::N4(_) => count == 1,
            Node::N16(_) => count <= 3,
            Node::N48(_) => count <= 12,
            Node::N256(_) => count <= 37,
            Node::Empty | Node::Leaf(..) => false,
        };
        if !want {
            return;
        }
        let old = std::mem::replace(self, Node::Empty);
        *self = match old {
            Node::N4(mut n) => {
                // Path compression: a one-child node merges into its child.
                let b = n.keys[0];
                match n.children[0].take() {
                    Some(Node::Leaf(k, v)) => Node::Leaf(k, v),
                    Some(mut child) => {
                        if let Some(ch) = child.header_mut() {
                            let mut p = [0u8; 8];
                            let pl = n.h.prefix_len as usize;
                            p[..pl].copy_from_slice(n.h.prefix());
                            p[pl] = b;
                            let cl = ch.prefix_len as usize;
                            p[pl + 1..pl + 1 + cl].copy_from_slice(ch.prefix());
                            ch.prefix = p;
                            ch.prefix_len = (pl + 1 + cl) as u8;
                        }
                        child
                    }
                    None => Node::N4(n),
                }
            }
            Node::N16(mut n) => {
                let mut m = N4 { h: n.h, keys: [0; 4], children: none_array() };
                for i in 0..count {
                    m.keys[i] = n.keys[i];
                    m.children[i] = n.children[i].take();
                }
                Node::N4(Box::new(m))
            }
            Node::N48(mut n) => {
                let mut m = Box::new(N16 { h: n.h, keys: [0; 16], children: none_array() });
                let mut i = 0;
                for b in 0..256 {
                    if n.index[b] != 0 {
                        m.keys[i] = b as u8;
                        m.children[i] = n.children[n.index[b] as usize - 1].take();
                        i += 1;
                    }
                }
                Node::N16(m)
            }
            Node::N256(mut n) => {
                let mut m = Box::new(N48 { h: n.h, index: [0; 256], children: none_array() });
                let mut i = 0;
                for b in 0..256 {
                    if let Some(c) = n.children[b].take() {
                        m.index[b] = i as u8 + 1;
                        m.children[i] = Some(c);
                        i += 1;
                    }
                }
                Node::N48(m)
            }
            leaf => leaf,
        };
    }

    fn bytes(&self) -> usize {
        let own = match self {
            Node::Empty | Node::Leaf(..) => 0,
            Node::N4(_) => size_of::<N4<T>>(),
            Node::N16(_) => size_of::<N16<T>>(),
            Node::N48(_) => size_of::<N48<T>>(),
            Node::N256(_) => size_of::<N256<T>>(),
        };
        own + self.children().iter().map(|(_, c)| c.bytes()).sum::<usize>()
    }

    fn for_each(&self, f: &mut dyn FnMut(u64, T)) {
        match self {
            Node::Leaf(k, v) => f(*k, *v),
            _ => {
                for (_, c) in self.children() {
                    c.for_each(f);
                }
            }
        }
    }
}

fn remove_sorted<T, const N: usize>(
    h: &mut Header,
    keys: &mut [u8; N],
    children: &mut [Option<Node<T>>; N],
    b: u8,
) -> Option<Node<T>> {
    let c = h.count as usize;
    let pos = (0..c).find(|&i| keys[i] == b)?;
    let out = children[pos].take();
    for i in pos..c - 1 {
        keys[i] = keys[i + 1];
        children[i] = children[i + 1].take();
    }
    h.count -= 1;
    out
}

/// Length of the common prefix of `key`'s bytes from `depth` and `prefix`.
fn prefix_match(prefix: &[u8], key: u64, depth: usize) -> usize {
    let kb = key.to_be_bytes();
    prefix.iter().zip(&kb[depth..]).take_while(|(a, b)| a == b).count()
}

/// The adaptive radix tree. See the module comment.
pub struct Art<T> {
    root: Option<Node<T>>,
    len: usize,
}

impl<T> std::fmt::Debug for Art<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Art").field("len", &self.len).finish_non_exhaustive()
    }
}

impl<T> Default for Art<T> {
    fn default() -> Self {
        Art { root: None, len: 0 }
    }
}

impl<T: Copy> Art<T> {
    fn insert_at(node: &mut Node<T>, key: u64, value: T, depth: usize) -> Option<T> {
        if let Node::Leaf(k, v) = node {
            if *k == key {
                return Some(std::mem::replace(v, value));
            }
            let (kb, nb) = (k.to_be_bytes(), key.to_be_bytes());
            let common = (depth..8).take_while(|&i| kb[i] == nb[i]).count();
            let mut h = Header { prefix_len: common as u8, ..Header::default() };
            h.prefix[..common].copy_from_slice(&nb[depth..depth + common]);
            let d = depth + common;
            let old = std::mem::replace(node, Node::new4(h));
            node.add_child(kb[d], old);
            node.add_child(nb[d], Node::Leaf(key, value));
            return None;
        }
        let h = node.header()?;
        let plen = h.prefix_len as usize;
        let m = prefix_match(h.prefix(), key, depth);
        if m < plen {
            // The key leaves the compressed path: a new Node4 takes the shared part of the prefix.
            let old_prefix = h.prefix;
            let mut nh = Header { prefix_len: m as u8, ..Header::default() };
            nh.prefix[..m].copy_from_slice(&old_prefix[..m]);
            let mut old = std::mem::replace(node, Node::new4(nh));
            if let Some(oh) = old.header_mut() {
                let rest = plen - m - 1;
                let mut p = [0u8; 8];
                p[..rest].copy_from_slice(&old_prefix[m + 1..plen]);
                oh.prefix = p;
                oh.prefix_len = rest as u8;
            }
            node.add_child(old_prefix[m], old);
            node.add_child(byte(key, depth + m), Node::Leaf(key, value));
            return None;
        }
        let d = depth + plen;
        let b = byte(key, d);
        match node.child_mut(b) {
            Some(child) => Self::insert_at(child, key, value, d + 1),
            None => {
                node.add_child(b, Node::Leaf(key, value));
                None
            }
        }
    }

    /// Removes `key` below `node` (which is not a leaf). Returns the removed value.
    fn remove_at(node: &mut Node<T>, key: u64, depth: usize) -> Option<T> {
        let h = node.header()?;
        let plen = h.prefix_len as usize;
        if prefix_match(h.prefix(), key, depth) < plen {
            return None;
        }
        let d = depth + plen;
        let b = byte(key, d);
        match node.child_mut(b)? {
            Node::Leaf(k, v) => {
                if *k != key {
                    return None;
                }
                let v = *v;
                node.remove_child(b);
                Some(v)
            }
            child => Self::remove_at(child, key, d + 1),
        }
    }

    /// Number of inner nodes by kind (Node4, Node16, Node48, Node256), for tests and statistics.
    pub fn node_counts(&self) -> [usize; 4] {
        fn walk<T: Copy>(n: &Node<T>, acc: &mut [usize; 4]) {
            match n {
                Node::Empty | Node::Leaf(..) => return,
                Node::N4(_) => acc[0] += 1,
                Node::N16(_) => acc[1] += 1,
                Node::N48(_) => acc[2] += 1,
                Node::N256(_) => acc[3] += 1,
            }
            for (_, c) in n.children() {
                walk(c, acc);
            }
        }
        let mut acc = [0; 4];
        if let Some(r) = &self.root {
            walk(r, &mut acc);
        }
        acc
    }
}

impl<T: Copy> InternalIndex<T> for Art<T> {
    fn insert(&mut self, key: u64, value: T) -> Option<T> {
        let old = match &mut self.root {
            None => {
                self.root = Some(Node::Leaf(key, value));
                None
            }
            Some(root) => Self::insert_at(root, key, value, 0),
        };
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    fn remove(&mut self, key: u64) -> Option<T> {
        let root = self.root.as_mut()?;
        let out = match root {
            Node::Leaf(k, v) if *k == key => {
                let v = *v;
                self.root = None;
                Some(v)
            }
            Node::Leaf(..) => None,
            _ => Self::remove_at(root, key, 0),
        };
        if out.is_some() {
            self.len -= 1;
        }
        out
    }

    fn get(&self, key: u64) -> Option<T> {
        let mut node = self.root.as_ref()?;
        let mut depth = 0;
        loop {
            match node {
                Node::Leaf(k, v) => return (*k == key).then_some(*v),
                _ => {
                    let h = node.header()?;
                    let plen = h.prefix_len as usize;
                    if prefix_match(h.prefix(), key, depth) < plen {
                        return None;
                    }
                    depth += plen;
                    node = node.child(byte(key, depth))?;
                    depth += 1;
                }
            }
        }
    }

    fn predecessor(&self, key: u64) -> Option<(u64, T)> {
        // One pass down; the inner nodes passed are remembered with the key byte taken at each, so when the
        // descent falls off (no child at the byte, a leaf above the key, a prefix above the key) the answer is
        // the largest leaf left of the path, found from the deepest node that has a smaller child. Sibling
        // searches are thus paid only once, at the end, not at every level on the way back up.
        let mut node = self.root.as_ref()?;
        let mut depth = 0;
        let mut path: [Option<&Node<T>>; 8] = [None; 8];
        let mut bytes = [0u8; 8];
        let mut n = 0;
        loop {
            if let Node::Leaf(k, v) = node
                && *k <= key
            {
                return Some((*k, *v));
            }
            let Some(h) = node.header() else { break };
            match h.cmp_prefix(key, depth) {
                std::cmp::Ordering::Less => return node.max_leaf(),
                std::cmp::Ordering::Greater => break,
                std::cmp::Ordering::Equal => {}
            }
            depth += h.prefix_len as usize;
            let b = byte(key, depth);
            path[n] = Some(node);
            bytes[n] = b;
            n += 1;
            match node.child(b) {
                Some(c) => {
                    node = c;
                    depth += 1;
                }
                None => break,
            }
        }
        while n > 0 {
            n -= 1;
            if let Some(c) = path[n].and_then(|p| p.child_before(bytes[n])) {
                return c.max_leaf();
            }
        }
        None
    }

    fn len(&self) -> usize {
        self.len
    }

    fn memory_usage(&self) -> usize {
        self.root.as_ref().map_or(0, |r| r.bytes())
    }

    fn for_each(&self, f: &mut dyn FnMut(u64, T)) {
        if let Some(r) = &self.root {
            r.for_each(f);
        }
    }
}
