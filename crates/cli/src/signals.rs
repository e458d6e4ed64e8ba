//! Signals: stopping a server on SIGINT or SIGTERM instead of dying mid-request, and SIGPIPE for the commands
//! that only print.
//!
//! The signals are blocked in the main thread before it starts any other thread, so every thread inherits the
//! mask and no handler ever runs inside a request. One thread ([`watch`]) takes them with `sigwait`:
//! - during start-up (recovery, binding) a signal ends the process at once, as it did before: start-up is
//!   crash-safe, and an operator who interrupts a long recovery expects it to stop;
//! - once the server runs, the first signal is handed to the main thread, which shuts down cleanly;
//! - a second signal during that shutdown ends the process at once, should the shutdown hang.
//!
//! The `unsafe` calls below are FFI, out of Miri's reach; their test, the end-to-end SIGTERM test and the broken
//! pipe test pass under AddressSanitizer (`RUSTFLAGS=-Zsanitizer=address cargo +nightly test -p rangedb-cli
//! --target x86_64-unknown-linux-gnu`, with `--bin rangedb signals`, `--test nbd_cli` and `--test inspect_cli`).
//!
//! Commands that only read and print also restore SIGPIPE's default action ([`die_on_broken_pipe`]).

use std::io;
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};

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
        // SAFETY: `set` is an initialised signal set; a null old-set pointer is allowed and means "do not report
        // the previous mask". Only the calling thread's mask changes.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(StopSignals { set })
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
}

/// Starts the thread that takes the stop signals (see the module comment): until `serving` is set a signal
/// ends the process at once; after, the first one is sent on the returned channel and a second ends the process
/// at once. The exit status of an immediate end is 128 plus the signal number, as a shell reports a killed
/// process.
pub fn watch(signals: StopSignals, serving: Arc<AtomicBool>) -> io::Result<Receiver<&'static str>> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new().name("stop-signals".into()).spawn(move || {
        let mut handed_over = false;
        loop {
            let sig = match signals.wait() {
                Ok(sig) => sig,
                Err(e) => {
                    eprintln!("rangedb: waiting for stop signals failed: {e}");
                    return;
                }
            };
            if handed_over || !serving.load(Ordering::Acquire) || tx.send(sig).is_err() {
                eprintln!("rangedb: {sig}: stopping at once");
                std::process::exit(128 + if sig == "SIGINT" { libc::SIGINT } else { libc::SIGTERM });
            }
            handed_over = true;
        }
    })?;
    Ok(rx)
}

/// Restores SIGPIPE's default action, so a command that only reads and prints ends quietly, as `cat` or
/// `sst_dump` do, when the reader of its output goes away (`rangedb inspect ... | head`). Rust starts programs
/// with SIGPIPE ignored, and `println!` then panics on the failed write. Not for the NBD server, which must
/// outlive a client that closes its socket, nor for the scripted sessions (`exec`), which report the failed
/// write and close their store.
///
/// REQUIRES: called before the command starts any thread (the action is process-wide).
pub fn die_on_broken_pipe() {
    // SAFETY: `signal` with a valid signal number and `SIG_DFL` only changes the process's disposition of
    // SIGPIPE; no handler of ours runs. On failure (`SIG_ERR`) SIGPIPE stays ignored, the behaviour before.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
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
