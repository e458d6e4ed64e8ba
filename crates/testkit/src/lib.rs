//! What RangeDB's tests share: which seeds randomized tests run and how long, from the environment, a way to run
//! short of file descriptors, and a bounded wait for background work.
//!
//! - `RANGEDB_SEED=N` runs one seed, `N`, instead of a test's defaults: the seed a failing test printed.
//! - `RANGEDB_TEST_SCALE=K` multiplies a test's steps by `K` (default 1): longer hunts for rare bugs.
//!
//! A value that does not parse fails the test that reads it. A typo must not quietly run the defaults, which
//! would look like a reproduction that passed.
//!
//! A dev-dependency of every engine crate; nothing outside tests uses it.

/// The seed variable.
pub const SEED_VAR: &str = "RANGEDB_SEED";
/// The scale variable.
pub const SCALE_VAR: &str = "RANGEDB_TEST_SCALE";

/// The seeds a randomized test runs: `RANGEDB_SEED` alone when it is set, else `defaults`.
///
/// Panics when `RANGEDB_SEED` is set but not a `u64`.
pub fn seeds(defaults: &[u64]) -> Vec<u64> {
    parse_seeds(std::env::var(SEED_VAR).ok().as_deref(), defaults)
}

/// The step multiplier: `RANGEDB_TEST_SCALE`, or 1 when it is not set.
///
/// Panics when `RANGEDB_TEST_SCALE` is set but not a positive integer.
pub fn scale() -> usize {
    parse_scale(std::env::var(SCALE_VAR).ok().as_deref())
}

/// Polls `cond` every `step` while it holds, for at most `limit`: the wait for background work to change some
/// state. Returns whether `cond` still holds (the wait ran out).
pub fn wait_while(
    limit: std::time::Duration,
    step: std::time::Duration,
    mut cond: impl FnMut() -> bool,
) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while cond() {
        if std::time::Instant::now() >= deadline {
            return true;
        }
        std::thread::sleep(step);
    }
    false
}

/// Lowers the process's soft limit on open files (`RLIMIT_NOFILE`) to `n`, or to the hard limit if that is
/// lower; the hard limit stays, so it could be raised again. It applies to the whole process: a test that calls
/// it belongs in a test binary of its own, or tests running beside it in the same process run short too.
///
/// Panics when the limit cannot be read or set.
pub fn lower_open_file_limit(n: u64) {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read and write only the `rlimit` given, a valid, exclusively borrowed local.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut r), 0, "getrlimit");
        r.rlim_cur = n.min(r.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &r), 0, "setrlimit");
    }
}

fn parse_seeds(var: Option<&str>, defaults: &[u64]) -> Vec<u64> {
    match var {
        Some(s) => {
            vec![
                s.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{SEED_VAR}={s:?} is not an unsigned 64-bit integer")),
            ]
        }
        None => defaults.to_vec(),
    }
}

fn parse_scale(var: Option<&str>) -> usize {
    match var {
        Some(s) => s
            .trim()
            .parse()
            .ok()
            .filter(|&k: &usize| k > 0)
            .unwrap_or_else(|| panic!("{SCALE_VAR}={s:?} is not a positive integer")),
        None => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variables_override_the_defaults() {
        assert_eq!(parse_seeds(None, &[1, 2]), vec![1, 2]);
        assert_eq!(parse_seeds(Some("77"), &[1, 2]), vec![77]);
        assert_eq!(parse_seeds(Some(" 18446744073709551615 "), &[]), vec![u64::MAX]);
        assert_eq!(parse_scale(None), 1);
        assert_eq!(parse_scale(Some("40")), 40);
    }

    #[test]
    fn a_bad_value_fails_instead_of_running_the_defaults() {
        for bad in ["", "x", "-1", "0x10", "18446744073709551616"] {
            assert!(std::panic::catch_unwind(|| parse_seeds(Some(bad), &[1])).is_err(), "{bad:?}");
        }
        for bad in ["", "0", "-2", "ten"] {
            assert!(std::panic::catch_unwind(|| parse_scale(Some(bad))).is_err(), "{bad:?}");
        }
    }
}
