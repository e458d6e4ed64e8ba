//! `Budget`: a byte semaphore bounding the payload memory one connection holds in flight.
//!
//! The reader charges a request's payload before allocating its buffer (write data, read result) and the worker
//! releases it after the reply is sent. A request larger than the whole budget is charged the whole budget, so it
//! runs alone rather than never: the bound is `max(cap, largest request)`, which `ServerOptions::validate`
//! keeps at `cap` by requiring `inflight_bytes >= max_payload`.

use std::sync::{Condvar, Mutex};

#[derive(Debug)]
pub(crate) struct Budget {
    used: Mutex<usize>,
    freed: Condvar,
    cap: usize,
}

impl Budget {
    pub(crate) fn new(cap: usize) -> Self {
        Budget { used: Mutex::new(0), freed: Condvar::new(), cap }
    }

    /// Waits until `n` bytes (at most the cap) fit, charges them and returns the amount charged.
    pub(crate) fn acquire(&self, n: usize) -> usize {
        let n = n.min(self.cap);
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        while *used > 0 && *used + n > self.cap {
            used = self.freed.wait(used).unwrap_or_else(|p| p.into_inner());
        }
        *used += n;
        n
    }

    /// Returns `n` charged bytes.
    pub(crate) fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        *used = used.saturating_sub(n);
        self.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn oversized_requests_run_alone_and_waiters_wake() {
        let b = Arc::new(Budget::new(100));
        assert_eq!(b.acquire(1000), 100);
        let b2 = b.clone();
        let t = std::thread::spawn(move || b2.acquire(10));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!t.is_finished(), "waits while the budget is exhausted");
        b.release(100);
        assert_eq!(t.join().unwrap(), 10);
    }
}
