//! Both engines behind `rangedb kv exec` against one model: random scripts of every spec command (writes, batches,
//! range deletes, reads at snapshots, flushes, compactions), with sizes so small that memtables are frozen,
//! committed, flushed and compacted every few commands. Each engine must answer every line as the model does
//! (a `BTreeMap`, copied at each snapshot), so the two engines also answer alike. The LSM runs under both
//! range-delete strategies, with RangeReduce on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

type Map = BTreeMap<String, String>;

fn seeds() -> Vec<u64> {
    testkit::seeds(&[7, 8])
}

/// The LSM engine's flags that make it flush and compact every few commands.
const LSM_TINY: [&str; 12] = [
    "--write-buffer-size",
    "2048",
    "--target-file-size-base",
    "4096",
    "--max-bytes-for-level-base",
    "16384",
    "--max-bytes-for-level-multiplier",
    "4",
    "--level0-file-num-compaction-trigger",
    "2",
    "--block-size",
    "256",
];

/// The engines and their flags: every background mechanism fires constantly.
fn engines() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut all = vec![(
        "flexdb",
        vec!["--memtable-bytes", "4096", "--interval-max-keys", "4", "--cache-bytes", "4096"],
    )];
    for strategy in ["local", "global"] {
        let mut flags = LSM_TINY.to_vec();
        flags.extend(["--range-delete-strategy", strategy, "--range-reduce", "bounded-merge"]);
        all.push(("lsm", flags));
    }
    all
}

/// A value token: empty (`0x`) or plain text.
fn token(v: &str) -> &str {
    if v.is_empty() { "0x" } else { v }
}

struct Script {
    rng: SmallRng,
    model: Map,
    /// Live snapshots by shell id, with the model as it was.
    snaps: BTreeMap<u64, Map>,
    next_snap: u64,
    input: String,
    want: Vec<String>,
}

impl Script {
    fn key(&mut self) -> String {
        format!("k{:04}", self.rng.random_range(0..400))
    }

    fn value(&mut self) -> String {
        let n = if self.rng.random_bool(0.05) { 0 } else { self.rng.random_range(1..60) };
        (0..n).map(|_| char::from(b'a' + self.rng.random_range(0..26u8))).collect()
    }

    fn range(&mut self) -> (String, String) {
        let a = self.key();
        let len = self.rng.random_range(0..30);
        let b = format!("k{:04}", a[1..].parse::<u32>().unwrap() + len);
        (a, b)
    }

    /// A write command applied to the model: put, del or delrange.
    fn write(&mut self) -> String {
        match self.rng.random_range(0..10) {
            0..6 => {
                let (k, v) = (self.key(), self.value());
                let line = format!("put {k} {}", token(&v));
                self.model.insert(k, v);
                line
            }
            6..9 => {
                let k = self.key();
                self.model.remove(&k);
                format!("del {k}")
            }
            _ => {
                let (a, b) = self.range();
                self.model.retain(|k, _| *k < a || *k >= b);
                format!("delrange {a} {b}")
            }
        }
    }

    /// One command, its lines appended to `input` and its expected answer to `want`.
    fn step(&mut self) {
        let r = self.rng.random_range(0..100);
        let snap = if !self.snaps.is_empty() && self.rng.random_bool(0.4) {
            let ids: Vec<u64> = self.snaps.keys().copied().collect();
            Some(ids[self.rng.random_range(0..ids.len())])
        } else {
            None
        };
        let at = snap.map_or(String::new(), |id| format!(" @{id}"));
        match r {
            0..40 => {
                let line = self.write();
                self.line(&line, "OK");
            }
            40..45 => {
                let n = self.rng.random_range(1..5);
                let mut lines = format!("batch {n}");
                for _ in 0..n {
                    lines.push('\n');
                    lines += &self.write();
                }
                self.line(&lines, "OK");
            }
            45..68 => {
                let k = self.key();
                let map = self.view(snap);
                let ans = map.get(&k).map_or("NOT_FOUND".to_string(), |v| token(v).to_string());
                self.line(&format!("get {k}{at}"), &ans);
            }
            68..84 => {
                let (a, b) = self.range();
                let rev = self.rng.random_bool(0.3);
                let limit = self.rng.random_bool(0.7).then(|| self.rng.random_range(1..12));
                let map = self.view(snap);
                let all: Vec<(&String, &String)> = map.range(a.clone()..b.clone()).collect();
                let ordered: Vec<_> = if rev { all.into_iter().rev().collect() } else { all };
                let got: Vec<_> = ordered.into_iter().take(limit.unwrap_or(usize::MAX)).collect();
                let mut ans = String::new();
                for (k, v) in &got {
                    let _ = writeln!(ans, "{k} {}", token(v));
                }
                let _ = write!(ans, "END {}", got.len());
                let cmd = if rev { "rscan" } else { "scan" };
                let lim = limit.map_or(String::new(), |l| format!(" {l}"));
                self.line(&format!("{cmd} {a} {b}{lim}{at}"), &ans);
            }
            84..89 if self.snaps.len() < 5 => {
                self.next_snap += 1;
                self.snaps.insert(self.next_snap, self.model.clone());
                let id = self.next_snap;
                self.line("snapshot", &format!("SNAPSHOT {id}"));
            }
            84..92 => {
                // A live snapshot, or now and then one that is not.
                let id = snap.unwrap_or(self.next_snap + 1);
                let ans = match self.snaps.remove(&id) {
                    Some(_) => "OK".to_string(),
                    None => format!("ERR invalid no snapshot {id}"),
                };
                self.line(&format!("release {id}"), &ans);
            }
            92..95 => self.line("flush", "OK"),
            95..97 => self.line("sync", "OK"),
            97 => self.line("compact", "OK"),
            _ => {
                let (a, b) = self.range();
                self.line(&format!("compact {a} {b}"), "OK");
            }
        }
    }

    fn view(&self, snap: Option<u64>) -> Map {
        snap.map_or_else(|| self.model.clone(), |id| self.snaps[&id].clone())
    }

    fn line(&mut self, cmd: &str, ans: &str) {
        self.input += cmd;
        self.input.push('\n');
        self.want.push(format!("{cmd}\n=> {ans}"));
    }
}

/// Runs `input` through `rangedb kv exec` and returns its standard output.
fn exec(engine: &str, flags: &[&str], dir: &std::path::Path, input: &str) -> String {
    let out = common::kv_exec(engine, flags, dir, input.as_bytes());
    assert!(out.status.success(), "{engine}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn both_engines_answer_random_scripts_as_the_model_does() {
    for seed in seeds() {
        let mut s = Script {
            rng: SmallRng::seed_from_u64(seed),
            model: Map::new(),
            snaps: BTreeMap::new(),
            next_snap: 0,
            input: String::new(),
            want: Vec::new(),
        };
        for _ in 0..2500 * testkit::scale() {
            s.step();
        }
        let want_out: String =
            s.want.iter().map(|w| w.split_once("\n=> ").unwrap().1.to_string() + "\n").collect();
        for (engine, flags) in engines() {
            let dir = tempfile::tempdir().unwrap();
            let got = exec(engine, &flags, &dir.path().join("db"), &s.input);
            if got == want_out {
                continue;
            }
            // Name the first command answered differently.
            let mut rest = got.as_str();
            for w in &s.want {
                let (cmd, ans) = w.split_once("\n=> ").unwrap();
                let n = ans.lines().count();
                let mine: Vec<&str> = rest.lines().take(n).collect();
                assert_eq!(mine.join("\n"), ans, "seed {seed}, {engine} {flags:?}: `{cmd}`");
                let used: usize = mine.iter().map(|l| l.len() + 1).sum();
                rest = &rest[used.min(rest.len())..];
            }
            panic!("seed {seed}, {engine} {flags:?}: output differs after the last command");
        }
    }
}
