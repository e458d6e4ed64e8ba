//! The `BlockDevice` trait: what an export serves.
//!
//! The server owns the protocol; a device owns the bytes. The server validates every request before a device sees
//! it (bounds, alignment to [`BlockSizes::minimum`], payload limits, flags), so a device may rely on the
//! `REQUIRES:` contracts below and needs no protocol knowledge. A device is shared by every connection to its
//! export and called from several worker threads at once, so it must be internally synchronised.
//!
//! Durability contract (the NBD ordering rules, proto.md "Ordering of messages and writes"):
//! - a write (`write_at`, `trim`, `write_zeroes`) with `fua = true` returns only once its data is persistent;
//! - `flush` returns only once every write that *returned* before `flush` was called is persistent.
//!
//! [`Features::flush_visible_to_all`] says whether those effects are visible to every connection when the call
//! returns (one shared cache, or none); only then does the server advertise `NBD_FLAG_CAN_MULTI_CONN`.

use crate::error::Result;

/// The block size constraints a device imposes (proto.md "Size constraints").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockSizes {
    /// Smallest addressable unit; offsets and lengths of every request are multiples of it. A power of two in
    /// `1..=65536`. Default 1 (any byte range).
    pub minimum: u32,
    /// Size at and above which aligned requests avoid read-modify-write. A power of two `>= max(minimum, 512)`.
    /// Default 4096.
    pub preferred: u32,
}

impl Default for BlockSizes {
    fn default() -> Self {
        BlockSizes { minimum: 1, preferred: 4096 }
    }
}

impl BlockSizes {
    /// Checks the constraints proto.md puts on the advertised values.
    pub fn validate(&self) -> Result<()> {
        let ok = self.minimum.is_power_of_two()
            && self.minimum <= 65536
            && self.preferred.is_power_of_two()
            && self.preferred >= self.minimum.max(512);
        if ok {
            Ok(())
        } else {
            Err(crate::Error::InvalidArgument(format!(
                "block sizes minimum {} preferred {}: minimum must be a power of two <= 65536 and preferred a power \
                 of two >= max(minimum, 512)",
                self.minimum, self.preferred
            )))
        }
    }
}

/// What a device supports; each flag becomes (or withholds) an NBD transmission flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// The device refuses writes (`NBD_FLAG_READ_ONLY`).
    pub read_only: bool,
    /// `flush` makes data persistent (`NBD_FLAG_SEND_FLUSH`).
    pub flush: bool,
    /// Writes honour `fua` (`NBD_FLAG_SEND_FUA`).
    pub fua: bool,
    /// `trim` is implemented (`NBD_FLAG_SEND_TRIM`); it may be a no-op hint.
    pub trim: bool,
    /// `write_zeroes` is implemented (`NBD_FLAG_SEND_WRITE_ZEROES`).
    pub write_zeroes: bool,
    /// `write_zeroes` with `fast = true` is meaningful (`NBD_FLAG_SEND_FAST_ZERO`).
    pub fast_zero: bool,
    /// `cache` is implemented (`NBD_FLAG_SEND_CACHE`); it may be a no-op hint.
    pub cache: bool,
    /// Flush and FUA effects are visible to all connections on return (`NBD_FLAG_CAN_MULTI_CONN`).
    pub flush_visible_to_all: bool,
    /// The medium is rotational (`NBD_FLAG_ROTATIONAL`).
    pub rotational: bool,
}

impl Default for Features {
    /// A writable device that supports flush and FUA and nothing optional.
    fn default() -> Self {
        Features {
            read_only: false,
            flush: true,
            fua: true,
            trim: false,
            write_zeroes: false,
            fast_zero: false,
            cache: false,
            flush_visible_to_all: false,
            rotational: false,
        }
    }
}

/// A fixed-size byte-addressed device served as an NBD export.
///
/// REQUIRES (guaranteed by the server for every call): `offset + len <= size()`, offset and length multiples of
/// `block_sizes().minimum`, and writes only when `features().read_only` is false.
pub trait BlockDevice: Send + Sync + 'static {
    /// The size in bytes; fixed for the lifetime of the device.
    fn size(&self) -> u64;

    /// The block size constraints (default: any alignment, 4 KiB preferred).
    fn block_sizes(&self) -> BlockSizes {
        BlockSizes::default()
    }

    /// What the device supports.
    fn features(&self) -> Features;

    /// Fills `buf` with the bytes at `offset..offset + buf.len()`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;

    /// Writes `data` at `offset`; with `fua`, returns only once the data is persistent.
    fn write_at(&self, data: &[u8], offset: u64, fua: bool) -> Result<()>;

    /// Makes every write that returned before this call persistent.
    fn flush(&self) -> Result<()>;

    /// Hints that `offset..offset + len` is no longer needed. Later reads of the range may return anything until
    /// it is written again. The default ignores the hint.
    fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<()> {
        let _ = (offset, len, fua);
        Ok(())
    }

    /// Makes `offset..offset + len` read as zeros. With `may_trim` (the client did not send `NO_HOLE`) the device
    /// may deallocate instead of writing; with `fast`, it must either be faster than an equivalent write or fail
    /// with [`crate::Error::Unsupported`] without changing anything.
    fn write_zeroes(&self, offset: u64, len: u64, may_trim: bool, fast: bool, fua: bool) -> Result<()> {
        let _ = (may_trim, fua);
        if fast {
            return Err(crate::Error::Unsupported("fast write-zeroes"));
        }
        // Write zeros in bounded pieces so a huge request never allocates its whole length.
        const PIECE: u64 = 1 << 20;
        let zeros = vec![0u8; PIECE.min(len) as usize];
        let mut at = offset;
        let end = offset + len;
        while at < end {
            let n = PIECE.min(end - at) as usize;
            self.write_at(&zeros[..n], at, false)?;
            at += n as u64;
        }
        if fua { self.flush() } else { Ok(()) }
    }

    /// The allocation status of `offset..offset + len` for the `base:allocation` metadata context: consecutive
    /// extents `(length, flags)` from `offset`, flags from [`crate::protocol::base_allocation`] (`HOLE`, `ZERO`).
    /// The lengths must be nonzero and sum to at most `len` (at least one extent); the server merges neighbours
    /// with equal flags. The default reports everything as allocated data (flags 0), which is always correct.
    fn block_status(&self, offset: u64, len: u32) -> Result<Vec<(u32, u32)>> {
        let _ = offset;
        Ok(vec![(len, 0)])
    }

    /// Hints that `offset..offset + len` will be read soon. The default ignores the hint.
    fn cache(&self, offset: u64, len: u64) -> Result<()> {
        let _ = (offset, len);
        Ok(())
    }
}
