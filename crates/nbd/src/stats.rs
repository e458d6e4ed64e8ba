//! Server counters: plain atomics, readable at any time through [`crate::Server::stats`].

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// Live counters of one server (shared by its connections).
        #[derive(Debug, Default)]
        pub struct Stats {
            $($(#[$doc])* pub $name: AtomicU64,)*
        }

        /// A point-in-time copy of [`Stats`].
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct StatsSnapshot {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl Stats {
            /// Copies every counter.
            pub fn snapshot(&self) -> StatsSnapshot {
                StatsSnapshot { $($name: self.$name.load(Ordering::Relaxed),)* }
            }
        }
    };
}

counters! {
    /// Connections accepted.
    connections_accepted,
    /// Connections currently open.
    connections_active,
    /// Connections refused because `max_connections` were open.
    connections_refused,
    /// Handshakes that reached the transmission phase.
    handshakes_completed,
    /// Sessions that ended during the handshake (abort, bad input, unknown export, timeout).
    handshakes_failed,
    /// Hard disconnects because the client broke a mandatory rule (bad magic, truncated request, ...).
    protocol_violations,
    /// Transmission requests received (all commands).
    requests,
    /// Read commands completed successfully.
    reads,
    /// Write commands completed successfully.
    writes,
    /// Flush commands completed successfully.
    flushes,
    /// Trim commands completed successfully.
    trims,
    /// Write-zeroes commands completed successfully.
    write_zeroes,
    /// Cache commands completed successfully.
    caches,
    /// Block status commands completed successfully.
    block_status,
    /// Bytes returned by reads.
    bytes_read,
    /// Bytes accepted by writes.
    bytes_written,
    /// Requests answered with an error (validation or device).
    error_replies,
    /// Device calls that failed.
    device_errors,
}

impl Stats {
    pub(crate) fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn dec(c: &AtomicU64) {
        c.fetch_sub(1, Ordering::Relaxed);
    }
}
