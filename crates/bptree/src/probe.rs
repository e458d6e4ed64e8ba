//! How a lookup key is compared against the keys a tree stores.
//!
//! Point operations (`get`, `get_with`, `upsert`, `remove`) take any `Q: Probe<K>`. Every `Q` that `K`
//! borrows as is one (`&[u8]` for `ByteKey`, `u64` for `u64`), through the blanket impl; a key type can also
//! offer a prepared form that compares faster than its borrowed slice, as [`crate::ByteKey::probe`] does.

use std::borrow::Borrow;
use std::cmp::Ordering;

/// A lookup key that can be compared with stored keys `K` in `K`'s order.
pub trait Probe<K> {
    /// The probe's order against `key`: `Less` when the probe sorts before `key`.
    fn cmp_to(&self, key: &K) -> Ordering;

    /// Whether the probe equals `key`.
    #[inline]
    fn eq_to(&self, key: &K) -> bool {
        self.cmp_to(key).is_eq()
    }
}

impl<Q: Ord + ?Sized, K: Borrow<Q>> Probe<K> for Q {
    #[inline]
    fn cmp_to(&self, key: &K) -> Ordering {
        self.cmp(key.borrow())
    }

    #[inline]
    fn eq_to(&self, key: &K) -> bool {
        self == key.borrow()
    }
}
