//! The thread-safe index (§6.2).

/// Placeholder until the concurrent index lands.
pub struct ConcurrentRask;
