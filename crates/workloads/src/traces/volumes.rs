//! Volume names to dense ids.

use std::collections::HashMap;

/// Interns volume names (device ids, `hostname_disk` for MSR) to ids `0, 1, 2, ...` in order of first appearance.
#[derive(Debug, Clone, Default)]
pub struct Volumes {
    names: Vec<String>,
    ids: HashMap<Box<[u8]>, u32>,
}

impl Volumes {
    /// No volumes yet.
    pub fn new() -> Volumes {
        Volumes::default()
    }

    /// Volumes named `0, 1, ..., n-1` with ids equal to their number (the synthetic generator's volumes).
    pub fn numbered(n: u32) -> Volumes {
        let mut v = Volumes::new();
        for i in 0..n {
            v.intern(i.to_string().as_bytes());
        }
        v
    }

    /// The id of `name`, assigning the next one if it is new. Names are stored as UTF-8 (lossily if they are
    /// not), so every id has a printable name.
    pub fn intern(&mut self, name: &[u8]) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(String::from_utf8_lossy(name).into_owned());
        self.ids.insert(name.into(), id);
        id
    }

    /// The id of `name`, if seen.
    pub fn id(&self, name: &str) -> Option<u32> {
        self.ids.get(name.as_bytes()).copied()
    }

    /// The name of `id` (empty if unknown).
    pub fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", String::as_str)
    }

    /// Number of volumes seen.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no volume was seen.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}
