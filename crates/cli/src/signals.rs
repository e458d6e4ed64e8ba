//! Stopping a server on SIGINT or SIGTERM instead of dying mid-request.
//!
//! The signals are blocked in the serving thread before it starts any other thread, so every thread inherits the
//! mask and the signals stay pending until [`StopSignals::wait`] takes one (`sigwait`). No handler runs in an
//! arbitrary thread, and a signal that arrives during set-up is not lost. After the first signal, [`unblock`]
//! lets a second one take its default action (terminate) in the waiting thread, so an operator can still stop a
//! shutdown that hangs.
//!
//! [`unblock`]: StopSignals::unblock

use std::io;
use std::mem::MaybeUninit;

/// SIGINT and SIGTERM, blocked in the thread that made this and in every thread it starts afterwards.
pub struct StopSignals {
    set: libc::sigset_t,
}

impl StopSignals {
    /// Blocks SIGINT and SIGTERM in the calling thread.
    ///
    /// REQUIRES: no thread that could take these signals was started before (threads started later inherit the
    /// mask; one started earlier would run the default action and kill the process).
    pub fn block() -> io::Result<StopSignals> {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: `sigemptyset` initialises the set it is given a valid pointer to; we read it only after it
        // returned 0 (success).
        let mut set = unsafe {
            if libc::sigemptyset(set.as_mut_ptr()) != 0 {
                return Err(io::Error::last_os_error());
            }
            set.assume_init()
        };
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: `set` is an initialised signal set owned by this frame; `sig` is a valid signal number.
            if unsafe { libc::sigaddset(&mut set, sig) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let s = StopSignals { set };
        s.mask(libc::SIG_BLOCK)?;
        Ok(s)
    }

    /// Waits until SIGINT or SIGTERM is pending and takes it; returns its name.
    pub fn wait(&self) -> io::Result<&'static str> {
        let mut sig: libc::c_int = 0;
        // SAFETY: `self.set` is an initialised signal set and `sig` a valid place for the result; `sigwait`
        // touches nothing else.
        let rc = unsafe { libc::sigwait(&self.set, &mut sig) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(if sig == libc::SIGINT { "SIGINT" } else { "SIGTERM" })
    }

    /// Unblocks the signals in the calling thread: the next one terminates the process.
    pub fn unblock(&self) -> io::Result<()> {
        self.mask(libc::SIG_UNBLOCK)
    }

    fn mask(&self, how: libc::c_int) -> io::Result<()> {
        // SAFETY: `self.set` is an initialised signal set; a null old-set pointer is allowed and means "do not
        // report the previous mask". Only the calling thread's mask changes.
        let rc = unsafe { libc::pthread_sigmask(how, &self.set, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SIGTERM sent to this thread while the signals are blocked stays pending and `wait` takes it; the
    /// default action (terminating the test binary) never runs.
    #[test]
    fn a_blocked_signal_is_taken_by_wait() {
        std::thread::spawn(|| {
            let s = StopSignals::block().unwrap();
            // SAFETY: `pthread_self` names this live thread; SIGTERM is a valid signal, blocked here, so it is
            // only queued for this thread.
            let rc = unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGTERM) };
            assert_eq!(rc, 0);
            assert_eq!(s.wait().unwrap(), "SIGTERM");
        })
        .join()
        .unwrap();
    }
}
