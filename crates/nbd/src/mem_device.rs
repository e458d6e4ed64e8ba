//! `MemDevice`: a sparse in-memory block device for tests and benchmarks.
//!
//! The byte space is cut into 64 KiB chunks allocated on first write; chunks never written (or wholly trimmed or
//! zeroed) read as zeros and cost no memory, so a test can serve a multi-GiB export. Chunks live in 64 hash-map
//! stripes, each behind its own `RwLock`, so concurrent requests on different chunks do not contend. Nothing is
//! persistent: flush and FUA are trivially satisfied, and one shared map makes every effect visible to all
//! connections at once (`flush_visible_to_all`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::device::{BlockDevice, BlockSizes, Features};
use crate::error::{Error, Result};

const CHUNK: u64 = 64 * 1024;
const STRIPES: usize = 64;

type Stripe = HashMap<u64, Box<[u8]>>;

/// A sparse in-memory device. See the module documentation.
#[derive(Debug)]
pub struct MemDevice {
    size: u64,
    sizes: BlockSizes,
    read_only: bool,
    stripes: Vec<RwLock<Stripe>>,
    allocated_chunks: AtomicU64,
}

impl MemDevice {
    /// A zero-filled writable device of `size` bytes with the default block sizes.
    pub fn new(size: u64) -> Self {
        MemDevice {
            size,
            sizes: BlockSizes::default(),
            read_only: false,
            stripes: (0..STRIPES).map(|_| RwLock::new(HashMap::new())).collect(),
            allocated_chunks: AtomicU64::new(0),
        }
    }

    /// The same device with other block size constraints.
    pub fn with_block_sizes(mut self, sizes: BlockSizes) -> Result<Self> {
        sizes.validate()?;
        self.sizes = sizes;
        Ok(self)
    }

    /// The same device, refusing writes.
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// Bytes of memory held by allocated chunks.
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated_chunks.load(Ordering::Relaxed) * CHUNK
    }

    fn stripe_read(&self, chunk: u64) -> RwLockReadGuard<'_, Stripe> {
        let lock = &self.stripes[(chunk % STRIPES as u64) as usize];
        lock.read().unwrap_or_else(|p| p.into_inner())
    }

    fn stripe_write(&self, chunk: u64) -> RwLockWriteGuard<'_, Stripe> {
        let lock = &self.stripes[(chunk % STRIPES as u64) as usize];
        lock.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Whole-structure check (feature `invariants`): the allocation counter equals the chunks held, and every
    /// chunk is full-sized and inside the device. Takes every stripe lock in order; callers hold none.
    #[cfg(any(test, feature = "invariants"))]
    fn check_invariants(&self) {
        let guards: Vec<_> = (0..STRIPES as u64).map(|i| self.stripe_read(i)).collect();
        let mut held = 0u64;
        for (i, g) in guards.iter().enumerate() {
            for (&chunk, data) in g.iter() {
                assert_eq!(chunk % STRIPES as u64, i as u64, "chunk {chunk} in the wrong stripe");
                assert!(chunk * CHUNK < self.size, "chunk {chunk} beyond the device");
                assert_eq!(data.len() as u64, CHUNK);
                held += 1;
            }
        }
        assert_eq!(held, self.allocated_chunks.load(Ordering::Relaxed), "allocation counter drifted");
    }

    #[cfg(not(any(test, feature = "invariants")))]
    fn check_invariants(&self) {}

    fn check(&self, offset: u64, len: u64) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(Error::OutOfRange { offset, len, size: self.size }),
        }
    }

    /// Zeros `offset..offset + len`, dropping chunks that become wholly zero by being wholly covered.
    fn zero_range(&self, offset: u64, len: u64) {
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let chunk = at / CHUNK;
            let start_in = (at % CHUNK) as usize;
            let n = (CHUNK - at % CHUNK).min(end - at) as usize;
            let mut stripe = self.stripe_write(chunk);
            if n as u64 == CHUNK {
                if stripe.remove(&chunk).is_some() {
                    self.allocated_chunks.fetch_sub(1, Ordering::Relaxed);
                }
            } else if let Some(data) = stripe.get_mut(&chunk) {
                data[start_in..start_in + n].fill(0);
            }
            at += n as u64;
        }
        self.check_invariants();
    }
}

impl BlockDevice for MemDevice {
    fn size(&self) -> u64 {
        self.size
    }

    fn block_sizes(&self) -> BlockSizes {
        self.sizes
    }

    fn features(&self) -> Features {
        Features {
            read_only: self.read_only,
            flush: true,
            fua: true,
            trim: true,
            write_zeroes: true,
            fast_zero: true,
            cache: true,
            flush_visible_to_all: true,
            rotational: false,
        }
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.check(offset, buf.len() as u64)?;
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let chunk = at / CHUNK;
            let start_in = (at % CHUNK) as usize;
            let n = ((CHUNK as usize) - start_in).min(buf.len() - done);
            let stripe = self.stripe_read(chunk);
            match stripe.get(&chunk) {
                Some(data) => buf[done..done + n].copy_from_slice(&data[start_in..start_in + n]),
                None => buf[done..done + n].fill(0),
            }
            done += n;
        }
        Ok(())
    }

    fn write_at(&self, data: &[u8], offset: u64, _fua: bool) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.check(offset, data.len() as u64)?;
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let chunk = at / CHUNK;
            let start_in = (at % CHUNK) as usize;
            let n = ((CHUNK as usize) - start_in).min(data.len() - done);
            let mut stripe = self.stripe_write(chunk);
            let slot = stripe.entry(chunk).or_insert_with(|| {
                self.allocated_chunks.fetch_add(1, Ordering::Relaxed);
                vec![0u8; CHUNK as usize].into_boxed_slice()
            });
            slot[start_in..start_in + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        self.check_invariants();
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn trim(&self, offset: u64, len: u64, _fua: bool) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.check(offset, len)?;
        self.zero_range(offset, len);
        Ok(())
    }

    fn block_status(&self, offset: u64, len: u32) -> Result<Vec<(u32, u32)>> {
        use crate::protocol::base_allocation::{HOLE, ZERO};
        self.check(offset, u64::from(len))?;
        let end = offset + u64::from(len);
        let mut out: Vec<(u32, u32)> = Vec::new();
        let mut at = offset;
        while at < end {
            let chunk = at / CHUNK;
            let n = (CHUNK - at % CHUNK).min(end - at) as u32;
            let flags = if self.stripe_read(chunk).contains_key(&chunk) { 0 } else { HOLE | ZERO };
            match out.last_mut() {
                Some((l, f)) if *f == flags => *l += n,
                _ => out.push((n, flags)),
            }
            at += u64::from(n);
        }
        Ok(out)
    }

    fn write_zeroes(&self, offset: u64, len: u64, may_trim: bool, _fast: bool, _fua: bool) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.check(offset, len)?;
        if may_trim {
            // Dropping wholly covered chunks is the fast path; they read as zeros and report as holes.
            self.zero_range(offset, len);
            return Ok(());
        }
        // NO_HOLE: the range must stay provisioned (and report as data), so chunks are allocated and zeroed.
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let chunk = at / CHUNK;
            let start_in = (at % CHUNK) as usize;
            let n = (CHUNK - at % CHUNK).min(end - at) as usize;
            let mut stripe = self.stripe_write(chunk);
            let slot = stripe.entry(chunk).or_insert_with(|| {
                self.allocated_chunks.fetch_add(1, Ordering::Relaxed);
                vec![0u8; CHUNK as usize].into_boxed_slice()
            });
            slot[start_in..start_in + n].fill(0);
            at += n as u64;
        }
        self.check_invariants();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_reads_writes_and_trims() {
        let d = MemDevice::new(1 << 30);
        let mut buf = vec![1u8; 100];
        d.read_at(&mut buf, 12345).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        d.write_at(&data, CHUNK - 7, false).unwrap();
        let mut back = vec![0u8; data.len()];
        d.read_at(&mut back, CHUNK - 7).unwrap();
        assert_eq!(back, data);
        assert_eq!(d.allocated_bytes(), 5 * CHUNK);
        d.trim(0, 4 * CHUNK, false).unwrap();
        assert_eq!(d.allocated_bytes(), CHUNK, "wholly trimmed chunks are freed");
        d.read_at(&mut back, CHUNK - 7).unwrap();
        assert!(back[..(3 * CHUNK + 7) as usize].iter().all(|&b| b == 0));
        assert_eq!(&back[(3 * CHUNK + 7) as usize..], &data[(3 * CHUNK + 7) as usize..]);
    }

    #[test]
    fn write_zeroes_with_no_hole_keeps_the_range_provisioned() {
        use crate::protocol::base_allocation::{HOLE, ZERO};
        let d = MemDevice::new(4 * CHUNK);
        d.write_at(&[9u8; 10], 0, false).unwrap();
        d.write_zeroes(0, 2 * CHUNK, false, false, false).unwrap();
        assert_eq!(
            d.block_status(0, (4 * CHUNK) as u32).unwrap(),
            vec![(2 * CHUNK as u32, 0), (2 * CHUNK as u32, HOLE | ZERO)]
        );
        let mut b = [1u8; 10];
        d.read_at(&mut b, 0).unwrap();
        assert_eq!(b, [0u8; 10]);
        d.write_zeroes(0, 2 * CHUNK, true, false, false).unwrap();
        assert_eq!(d.allocated_bytes(), 0, "without NO_HOLE whole chunks are released");
    }

    #[test]
    fn out_of_range_and_read_only_are_errors() {
        let d = MemDevice::new(4096);
        assert!(matches!(d.write_at(&[0; 2], 4095, false), Err(Error::OutOfRange { .. })));
        assert!(matches!(d.read_at(&mut [0; 1], u64::MAX), Err(Error::OutOfRange { .. })));
        let ro = MemDevice::new(4096).read_only();
        assert!(matches!(ro.write_at(&[0; 2], 0, false), Err(Error::ReadOnly)));
        assert!(MemDevice::new(4096).with_block_sizes(BlockSizes { minimum: 3, preferred: 4096 }).is_err());
    }
}
