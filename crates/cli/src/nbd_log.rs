//! What `rangedb nbd serve` tells its operator: what the volume's recovery replayed at start, the volume's
//! stops and recoveries while it serves, and what the sessions did at the stop. Clients only see a failed
//! write as an errno (QEMU pauses the guest on ENOSPC and retries); the operator needs to know that the volume
//! stopped taking writes, why, whether freeing space is enough, and when it recovered.
//!
//! A thread samples [`Volume::health`] and the recovery counter every [`INTERVAL`] and logs each change. A
//! stop and a recovery falling between two samples show only as the counter that moved, and are logged as one
//! line.

use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use ::nbd::StatsSnapshot;
use blockstore::{Health, Stats, Volume};

/// How often the volume is sampled: a stop shows in the log within this long.
pub const INTERVAL: Duration = Duration::from_millis(500);

/// One sample of a volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    health: Health,
    stats: Stats,
}

impl Sample {
    /// The volume's state now.
    pub fn of(v: &Volume) -> Sample {
        // A recovery between the two reads would pair a stopped health with the recovery's counter, and the log
        // would report a stop that is already over: read again until the counter held still across the health
        // read (recoveries come at most once a second).
        loop {
            let recoveries = v.stats().recoveries;
            let health = v.health();
            let stats = v.stats();
            if stats.recoveries == recoveries {
                return Sample { health, stats };
            }
        }
    }
}

/// What a volume's recovery at open replayed, for the start-up log.
pub fn opened(name: &str, s: &Stats) -> String {
    format!(
        "volume {name}: recovery loaded {} checkpoint piece(s) and replayed {} batch(es), {} journal record(s)",
        s.recovered_checkpoint_pieces, s.recovered_batches, s.recovered_journal_records
    )
}

/// What the server did, for the log line at its stop.
pub fn served(s: &StatsSnapshot) -> String {
    format!(
        "served {} connection(s): {} read(s) of {} bytes, {} write(s) of {} bytes, {} flush(es), {} trim(s), {} \
         write-zeroes; {} error replies, {} device failures",
        s.handshakes_completed,
        s.reads,
        s.bytes_read,
        s.writes,
        s.bytes_written,
        s.flushes,
        s.trims,
        s.write_zeroes,
        s.error_replies,
        s.device_errors
    )
}

/// The log lines for the change from `before` to `now` of volume `name`, oldest event first.
pub fn changes(name: &str, before: &Sample, now: &Sample) -> Vec<String> {
    let mut out = Vec::new();
    let recovered = now.stats.recoveries > before.stats.recoveries;
    if recovered {
        // Unseen stop: it began and ended between two samples.
        let how = if before.health == Health::Writable { "stopped taking writes and " } else { "" };
        out.push(format!(
            "volume {name} {how}recovered in place: replayed {} batch(es), {} journal record(s); writes are taken \
             again",
            now.stats.recovered_batches, now.stats.recovered_journal_records
        ));
    }
    if let Health::Stopped { reason, recovers_by_itself } = &now.health
        && (recovered || before.health != now.health)
    {
        let then = if *recovers_by_itself {
            "it takes them again once the file system has room (a write retries at most once a second)"
        } else {
            "they fail until the server is restarted (a failed sync or a device error may have lost data below \
             the page cache: check the disk, then `rangedb inspect blockstore DIR --action check`)"
        };
        out.push(format!("volume {name} stopped taking writes: {reason}; {then}"));
    }
    out
}

/// The sampling thread; stops when dropped.
pub struct Watcher {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// Starts sampling `v`, passing every log line to `log`.
pub fn watch(v: Arc<Volume>, log: impl Fn(&str) + Send + 'static) -> std::io::Result<Watcher> {
    let (tx, rx) = mpsc::channel::<()>();
    let mut last = Sample::of(&v);
    let thread = std::thread::Builder::new().name("volume-watch".into()).spawn(move || {
        while let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(INTERVAL) {
            let now = Sample::of(&v);
            for line in changes(v.name(), &last, &now) {
                log(&line);
            }
            last = now;
        }
    })?;
    Ok(Watcher { stop: Some(tx), thread: Some(thread) })
}

impl Drop for Watcher {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(health: Health, recoveries: u64) -> Sample {
        let stats =
            Stats { recoveries, recovered_batches: 2, recovered_journal_records: 7, ..Stats::default() };
        Sample { health, stats }
    }

    fn stopped(by_itself: bool) -> Health {
        Health::Stopped {
            reason: "No space left on device (os error 28)".into(),
            recovers_by_itself: by_itself,
        }
    }

    #[test]
    fn a_stop_and_a_recovery_are_each_logged_once() {
        let ok = sample(Health::Writable, 0);
        assert!(changes("v", &ok, &ok).is_empty());
        let full = sample(stopped(true), 0);
        let lines = changes("v", &ok, &full);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].starts_with("volume v stopped taking writes: No space left"), "{}", lines[0]);
        assert!(lines[0].contains("once the file system has room"), "{}", lines[0]);
        assert!(
            changes("v", &full, &full).is_empty(),
            "a stop is logged when it starts, not at every sample"
        );
        let back = sample(Health::Writable, 1);
        assert_eq!(
            changes("v", &full, &back),
            [
                "volume v recovered in place: replayed 2 batch(es), 7 journal record(s); writes are taken again"
            ]
        );
    }

    #[test]
    fn a_stop_that_needs_a_restart_says_so() {
        let lines = changes("v", &sample(Health::Writable, 0), &sample(stopped(false), 0));
        assert!(lines[0].contains("until the server is restarted"), "{}", lines[0]);
    }

    /// Between two samples the volume recovered and stopped again: both are logged, in that order.
    #[test]
    fn a_recovery_then_a_new_stop_between_samples_logs_both() {
        let lines = changes("v", &sample(stopped(true), 0), &sample(stopped(true), 1));
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("recovered in place") && lines[1].contains("stopped taking writes"));
    }

    #[test]
    fn a_stop_and_its_recovery_between_samples_are_one_line() {
        let lines = changes("v", &sample(Health::Writable, 0), &sample(Health::Writable, 1));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("volume v stopped taking writes and recovered in place:"),
            "{}",
            lines[0]
        );
    }

    #[test]
    fn the_stop_line_sums_up_the_sessions() {
        let s = StatsSnapshot {
            handshakes_completed: 2,
            writes: 3,
            bytes_written: 12288,
            ..StatsSnapshot::default()
        };
        let line = served(&s);
        assert!(
            line.starts_with("served 2 connection(s): 0 read(s) of 0 bytes, 3 write(s) of 12288 bytes"),
            "{line}"
        );
    }

    #[test]
    fn the_start_up_line_names_what_recovery_replayed() {
        let s = Stats { recovered_checkpoint_pieces: 3, recovered_batches: 1, ..Stats::default() };
        assert_eq!(
            opened("default", &s),
            "volume default: recovery loaded 3 checkpoint piece(s) and replayed 1 batch(es), 0 journal record(s)"
        );
    }
}
