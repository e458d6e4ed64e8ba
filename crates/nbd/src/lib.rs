//! An NBD (Network Block Device) server: serves any [`BlockDevice`] to qemu, libnbd (`nbdinfo`, `nbdcopy`,
//! `nbdsh`), fio's `nbd` engine and the Linux kernel client, over TCP or Unix-domain sockets.
//!
//! The protocol is the upstream `doc/proto.md` of the NetworkBlockDevice project. This server implements the
//! fixed newstyle handshake with `NBD_OPT_GO`, `INFO`, `EXPORT_NAME`, `LIST`, `ABORT` and `STRUCTURED_REPLY`;
//! `LIST_META_CONTEXT` and `SET_META_CONTEXT` (the `base:allocation` context); the transmission commands `READ`,
//! `WRITE`, `FLUSH`, `TRIM`, `WRITE_ZEROES` (with `NO_HOLE` and `FAST_ZERO`), `CACHE`, `BLOCK_STATUS` and `DISC`,
//! with FUA; structured replies when negotiated. `docs/nbd.md` lists what is implemented, what is not (TLS, other
//! metadata contexts, extended headers), the advertised flags and the limits.
//!
//! Layout (one component per file):
//! - [`device`]: the `BlockDevice` trait, its block size constraints and feature flags;
//! - [`MemDevice`] (sparse, in memory) and [`FileDevice`] (one file through `vfs`);
//! - `handshake`: option haggling; `transmission`: requests, validation, workers and replies;
//! - [`Server`] / [`Running`]: listeners and per-connection threads; [`ServerOptions`]: limits;
//! - [`protocol`]: wire constants and encodings; [`Stats`]: counters.

mod budget;
pub mod device;
mod error;
mod export;
mod file_device;
mod handshake;
mod mem_device;
mod options;
pub mod protocol;
mod server;
mod stats;
mod stream;
mod transmission;
mod validate;

pub use device::{BlockDevice, BlockSizes, Features};
pub use error::{Error, Result};
pub use export::{Export, Exports};
pub use file_device::FileDevice;
pub use handshake::MAX_OPTION_DATA;
pub use mem_device::MemDevice;
pub use options::{LogFn, ServerOptions};
pub use server::{Running, Server};
pub use stats::{Stats, StatsSnapshot};
pub use stream::Stream;
pub use transmission::DRAIN_LIMIT;
