//! Exports: named devices a server offers, and the default export an empty name selects.

use std::sync::Arc;

use crate::device::BlockDevice;
use crate::error::{Error, Result};
use crate::protocol::{MAX_EXPORT_SIZE, MAX_STRING, tx_flags};

/// One served device under a name.
#[derive(Clone)]
pub struct Export {
    name: String,
    description: String,
    device: Arc<dyn BlockDevice>,
}

impl std::fmt::Debug for Export {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Export")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("size", &self.device.size())
            .finish()
    }
}

impl Export {
    /// An export of `device` under `name` (UTF-8, no NUL, at most 4096 bytes; may be empty).
    /// REQUIRES: the device's size is a multiple of its minimum block size and at most [`MAX_EXPORT_SIZE`];
    /// otherwise `InvalidArgument`.
    pub fn new(name: impl Into<String>, device: Arc<dyn BlockDevice>) -> Result<Self> {
        let name = name.into();
        check_string("export name", &name)?;
        let sizes = device.block_sizes();
        sizes.validate()?;
        if !device.size().is_multiple_of(u64::from(sizes.minimum)) {
            return Err(Error::InvalidArgument(format!(
                "device size {} is not a multiple of its minimum block size {}",
                device.size(),
                sizes.minimum
            )));
        }
        if device.size() > MAX_EXPORT_SIZE {
            return Err(Error::InvalidArgument(format!(
                "device size {} is over 2^63 - 1 bytes, the largest export NBD clients accept",
                device.size()
            )));
        }
        Ok(Export { name, description: String::new(), device })
    }

    /// The same export with a human-readable description (shown by `NBD_OPT_LIST` and `NBD_INFO_DESCRIPTION`).
    pub fn with_description(mut self, description: impl Into<String>) -> Result<Self> {
        let description = description.into();
        check_string("export description", &description)?;
        self.description = description;
        Ok(self)
    }

    /// The export's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The export's description (possibly empty).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The served device.
    pub fn device(&self) -> &Arc<dyn BlockDevice> {
        &self.device
    }

    /// The transmission flags this export advertises. Every flag is true of the device: a flag for a feature the
    /// device lacks is withheld (proto.md: the server MUST NOT set the flag for features it does not support).
    /// `SEND_DF` needs structured replies, since only they can carry the single-chunk promise.
    pub fn transmission_flags(&self, structured: bool) -> u16 {
        let f = self.device.features();
        let writable = !f.read_only;
        let mut flags = tx_flags::HAS_FLAGS;
        let mut set = |cond: bool, flag: u16| {
            if cond {
                flags |= flag;
            }
        };
        set(f.read_only, tx_flags::READ_ONLY);
        set(f.flush, tx_flags::SEND_FLUSH);
        set(f.fua, tx_flags::SEND_FUA);
        set(f.rotational, tx_flags::ROTATIONAL);
        set(f.trim && writable, tx_flags::SEND_TRIM);
        set(f.write_zeroes && writable, tx_flags::SEND_WRITE_ZEROES);
        set(f.write_zeroes && f.fast_zero && writable, tx_flags::SEND_FAST_ZERO);
        set(structured, tx_flags::SEND_DF);
        set(f.flush_visible_to_all, tx_flags::CAN_MULTI_CONN);
        set(f.cache, tx_flags::SEND_CACHE);
        flags
    }
}

/// The exports of one server. An empty requested name selects the default export.
#[derive(Debug, Clone, Default)]
pub struct Exports {
    list: Vec<Arc<Export>>,
    default: Option<usize>,
}

impl Exports {
    /// No exports.
    pub fn new() -> Self {
        Exports::default()
    }

    /// Adds an export; names must be unique. The first export added becomes the default unless one is set with
    /// [`Exports::set_default`].
    pub fn add(&mut self, export: Export) -> Result<()> {
        if self.list.iter().any(|e| e.name == export.name) {
            return Err(Error::InvalidArgument(format!("duplicate export name {:?}", export.name)));
        }
        self.list.push(Arc::new(export));
        if self.default.is_none() {
            self.default = Some(self.list.len() - 1);
        }
        Ok(())
    }

    /// Makes the export called `name` the default (the one an empty name selects).
    pub fn set_default(&mut self, name: &str) -> Result<()> {
        let i = self
            .list
            .iter()
            .position(|e| e.name == name)
            .ok_or_else(|| Error::InvalidArgument(format!("no export named {name:?}")))?;
        self.default = Some(i);
        Ok(())
    }

    /// Clears the default export: an empty name then selects only an export literally named "".
    pub fn clear_default(&mut self) {
        self.default = None;
    }

    /// The export a client asking for `name` gets.
    pub fn lookup(&self, name: &str) -> Option<&Arc<Export>> {
        if let Some(e) = self.list.iter().find(|e| e.name == name) {
            return Some(e);
        }
        if name.is_empty() {
            return self.default.and_then(|i| self.list.get(i));
        }
        None
    }

    /// Every export, in the order added.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Export>> {
        self.list.iter()
    }

    /// Whether there are no exports.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

fn check_string(what: &str, s: &str) -> Result<()> {
    if s.len() > MAX_STRING || s.contains('\0') {
        return Err(Error::InvalidArgument(format!("{what} must be at most {MAX_STRING} bytes without NUL")));
    }
    Ok(())
}
