//! What every experiment with a RocksDB peer needs from it beyond reads and writes: waiting until its background
//! work is done (so both systems are measured settled) and reading its statistics tickers.

/// Flushes the memtable and waits until no compaction is pending or running.
pub(super) fn settle(db: &rocksdb::DB) {
    let _ = db.flush();
    loop {
        let p = |n: &str| db.property_int_value(n).ok().flatten().unwrap_or(0);
        if p("rocksdb.compaction-pending") == 0 && p("rocksdb.num-running-compactions") == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The value of ticker `name` (e.g. `rocksdb.flush.write.bytes`) in `stats`, the text of
/// `Options::get_statistics` (lines `NAME COUNT : N`); 0 when absent.
pub(super) fn ticker(stats: &str, name: &str) -> u64 {
    stats
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(" COUNT"))
        .and_then(|l| l.rsplit(':').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Compactions per output level from RocksDB's event log (the `LOG` file's `EVENT_LOG_v1` lines), in the
/// form `L1: 3 compactions read 52.1 MB wrote 47.1 MB, 1 moves of 4 files 17.1 MB; L2: ...` (read = input
/// bytes of both levels).
pub(super) fn per_level_from_log(log: &str) -> String {
    use std::collections::{BTreeMap, HashMap, HashSet};
    // level -> (compactions, read, written, moves, moved files, moved bytes)
    let mut rows: BTreeMap<u64, [u64; 6]> = BTreeMap::new();
    let mut started: HashMap<u64, u64> = HashMap::new();
    let mut flush_jobs: HashSet<u64> = HashSet::new();
    let (mut flushes, mut flushed) = (0u64, 0u64);
    for line in log.lines() {
        let Some(i) = line.find("EVENT_LOG_v1 ") else { continue };
        let Ok(e) = serde_json::from_str::<serde_json::Value>(&line[i + 13..]) else { continue };
        let n = |k: &str| e.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
        match e.get("event").and_then(|v| v.as_str()).unwrap_or("") {
            "compaction_started" => {
                started.insert(n("job"), n("input_data_size"));
            }
            "compaction_finished" => {
                let r = rows.entry(n("output_level")).or_default();
                r[0] += 1;
                r[1] += started.get(&n("job")).copied().unwrap_or(0);
                r[2] += n("total_output_size");
            }
            "trivial_move" => {
                let r = rows.entry(n("destination_level")).or_default();
                r[3] += 1;
                r[4] += n("files");
                r[5] += n("total_files_size");
            }
            "flush_started" => {
                flush_jobs.insert(n("job"));
            }
            "flush_finished" => flushes += 1,
            "table_file_creation" if flush_jobs.contains(&n("job")) => flushed += n("file_size"),
            _ => {}
        }
    }
    let mb = |b: u64| b as f64 / 1e6;
    let rows: Vec<String> = rows
        .iter()
        .map(|(l, r)| {
            format!(
                "L{l}: {} compactions read {:.1} MB wrote {:.1} MB, {} moves of {} files {:.1} MB",
                r[0],
                mb(r[1]),
                mb(r[2]),
                r[3],
                r[4],
                mb(r[5])
            )
        })
        .collect();
    format!("{flushes} flushes wrote {:.1} MB; {}", mb(flushed), rows.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickers_parse() {
        let s = "rocksdb.flush.write.bytes COUNT : 123\nrocksdb.flush.write.bytes.x COUNT : 9\n";
        assert_eq!(ticker(s, "rocksdb.flush.write.bytes"), 123);
        assert_eq!(ticker(s, "rocksdb.compact.write.bytes"), 0);
    }
}
