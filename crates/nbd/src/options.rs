//! `ServerOptions`: limits and concurrency of a server, with documented defaults.

use std::time::Duration;

use crate::error::{Error, Result};

/// A sink for the server's one-line diagnostics for operators (see [`crate::Server::with_log`]).
pub type LogFn = dyn Fn(&str) + Send + Sync;

/// Options of a [`crate::Server`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerOptions {
    /// Largest READ or WRITE payload accepted, advertised as the maximum payload size of `NBD_INFO_BLOCK_SIZE`.
    /// Default 32 MiB (2^25), the size proto.md asks every server to accept. Range `4096..=2^30`.
    pub max_payload: u32,
    /// Connections served at once; further connections are closed at once. Default 64.
    pub max_connections: usize,
    /// Threads per connection executing requests, so a client that pipelines requests has several in flight.
    /// Default 4. 1 executes each connection's requests strictly in order.
    pub workers_per_connection: usize,
    /// Payload bytes (write data received and read data not yet sent) in flight per connection before the
    /// server stops reading requests from that client. Default 64 MiB. Must be `>= max_payload`.
    pub inflight_bytes: usize,
    /// Longest silence allowed during the handshake before the connection is dropped; the transmission phase
    /// has no timeout (an idle client is legitimate). Default 30 s.
    pub handshake_timeout: Duration,
    /// Option requests allowed in one handshake before the server hangs up (denial-of-service guard).
    /// Default 1024.
    pub max_options: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            max_payload: 32 << 20,
            max_connections: 64,
            workers_per_connection: 4,
            inflight_bytes: 64 << 20,
            handshake_timeout: Duration::from_secs(30),
            max_options: 1024,
        }
    }
}

impl ServerOptions {
    /// Checks every option's range.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::InvalidArgument(m.to_string()));
        if !(4096..=1 << 30).contains(&self.max_payload) {
            return bad("max_payload must be in 4096..=2^30");
        }
        if self.max_connections == 0 {
            return bad("max_connections must be at least 1");
        }
        if !(1..=256).contains(&self.workers_per_connection) {
            return bad("workers_per_connection must be in 1..=256");
        }
        if self.inflight_bytes < self.max_payload as usize {
            return bad("inflight_bytes must be at least max_payload");
        }
        if self.handshake_timeout.is_zero() {
            return bad("handshake_timeout must be nonzero");
        }
        if self.max_options == 0 {
            return bad("max_options must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_bad_values_do_not() {
        ServerOptions::default().validate().unwrap();
        let o = ServerOptions { max_payload: 100, ..Default::default() };
        assert!(o.validate().is_err());
        let o = ServerOptions { inflight_bytes: 1 << 20, ..Default::default() };
        assert!(o.validate().is_err());
        let o = ServerOptions { workers_per_connection: 0, ..Default::default() };
        assert!(o.validate().is_err());
    }
}
