//! A random-operation driver shared by the crash and fault tests: applies one operation to a FlexFile and
//! returns the model as it is if the operation takes effect, with the operation's result.

#![allow(dead_code)]

use flexfile::FlexFile;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

pub fn rng(seed: u64) -> SmallRng {
    SmallRng::seed_from_u64(seed)
}

/// Performs a random mutation; returns the model after it (as if it succeeded) and the result.
pub fn mutate(rng: &mut SmallRng, f: &mut FlexFile, m: &[u8]) -> (Vec<u8>, flexfile::Result<()>) {
    let size = m.len();
    let n = if rng.random_range(0..20) == 0 { rng.random_range(100..1500) } else { rng.random_range(1..120) };
    let data: Vec<u8> = (0..n).map(|_| rng.random()).collect();
    let mut next = m.to_vec();
    let r = match rng.random_range(0..100) {
        0..=39 => {
            let off = rng.random_range(0..=size);
            next.splice(off..off, data.iter().copied());
            f.insert(off as u64, &data)
        }
        40..=69 => {
            let off = if rng.random_range(0..10) == 0 {
                size + rng.random_range(0..300)
            } else {
                rng.random_range(0..=size)
            };
            if off + n > next.len() {
                next.resize(off + n, 0);
            }
            next[off..off + n].copy_from_slice(&data);
            f.write(off as u64, &data)
        }
        70..=89 if size > 0 => {
            let off = rng.random_range(0..size);
            let len = rng.random_range(1..=(size - off).min(n * 2));
            next.drain(off..off + len);
            f.collapse(off as u64, len as u64)
        }
        90..=93 => {
            let len = if rng.random_range(0..2) == 0 {
                size.saturating_sub(rng.random_range(0..50))
            } else {
                size + rng.random_range(0..100)
            };
            next.resize(len, 0);
            f.truncate(len as u64)
        }
        94..=95 if size > 0 => {
            let off = rng.random_range(0..size);
            let len = rng.random_range(1..=(size - off).min(2000));
            f.defrag(off as u64, len as u64)
        }
        96..=97 => {
            let off = rng.random_range(0..=size);
            let len = rng.random_range(0..=(size - off).min(n * 2));
            next.splice(off..off + len, data.iter().copied());
            f.replace(off as u64, len as u64, &data)
        }
        _ if size > 0 => {
            let off = rng.random_range(0..size);
            f.set_tag(off as u64, rng.random_range(1..100))
        }
        _ => Ok(()),
    };
    (next, r)
}

pub fn contents(f: &mut FlexFile) -> flexfile::Result<Vec<u8>> {
    let mut buf = vec![0u8; f.size() as usize];
    f.read(0, &mut buf)?;
    Ok(buf)
}
