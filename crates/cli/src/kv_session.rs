//! The command loop of a kv shell session (shared/specs/kv-shell.md): one command per line, one response per
//! command, output flushed after each.

use std::io::{BufRead, Write};

use crate::kv_engine::{KvEngine, KvError, KvResult, Update};
use crate::tokens::{decode_token, encode_token, read_line};

fn parse_update(words: &[&str]) -> KvResult<Update> {
    match words {
        ["put", k, v] => Ok(Update::Put(decode_token(k)?, decode_token(v)?)),
        ["del", k] => Ok(Update::Del(decode_token(k)?)),
        ["delrange", a, b] => {
            let (a, b) = (decode_token(a)?, decode_token(b)?);
            if a > b {
                return Err(KvError { kind: "invalid", msg: "delrange start is after end".into() });
            }
            Ok(Update::DelRange(a, b))
        }
        ["put", ..] => Err(KvError::parse("usage: put K V")),
        ["del", ..] => Err(KvError::parse("usage: del K")),
        ["delrange", ..] => Err(KvError::parse("usage: delrange A B")),
        _ => Err(KvError::parse(format!("expected put/del/delrange, got {:?}", words.join(" ")))),
    }
}

/// Splits a trailing `@id` off a read command.
fn split_snap<'a>(words: &'a [&'a str]) -> KvResult<(&'a [&'a str], Option<u64>)> {
    match words.last() {
        Some(w) if w.starts_with('@') => {
            let id = w[1..].parse().map_err(|_| KvError::parse(format!("bad snapshot {w}")))?;
            Ok((&words[..words.len() - 1], Some(id)))
        }
        _ => Ok((words, None)),
    }
}

/// Runs the command loop of one session; `out` gets one response per command.
pub fn session(
    engine: &mut dyn KvEngine,
    sync: bool,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    while let Some(line) = read_line(input)? {
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                writeln!(out, "ERR {} {}", e.kind, e.msg)?;
                out.flush()?;
                continue;
            }
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let resp: KvResult<String> = (|| match words[0] {
            // The commands that take no argument refuse one rather than ignore it (`sync x` is a typo, not a
            // sync).
            "snapshot" | "flush" | "sync" | "stats" if words.len() > 1 => {
                Err(KvError::parse(format!("usage: {} (takes no argument)", words[0])))
            }
            "put" | "del" | "delrange" => {
                let u = parse_update(&words)?;
                engine.write(vec![u], sync)?;
                Ok("OK".to_string())
            }
            "get" => {
                let (w, snap) = split_snap(&words)?;
                let [_, k] = w else { return Err(KvError::parse("usage: get K [@id]")) };
                Ok(match engine.get(&decode_token(k)?, snap)? {
                    Some(v) => encode_token(&v),
                    None => "NOT_FOUND".to_string(),
                })
            }
            "scan" | "rscan" => {
                let (w, snap) = split_snap(&words)?;
                let (a, b, limit) = match w {
                    [_, a, b] => (a, b, usize::MAX),
                    [_, a, b, l] => (a, b, l.parse().map_err(|_| KvError::parse(format!("bad limit {l}")))?),
                    _ => return Err(KvError::parse("usage: scan A B [LIMIT] [@id]")),
                };
                let rows =
                    engine.scan(&decode_token(a)?, &decode_token(b)?, limit, words[0] == "rscan", snap)?;
                let mut s = String::new();
                for (k, v) in &rows {
                    s.push_str(&format!("{} {}\n", encode_token(k), encode_token(v)));
                }
                s.push_str(&format!("END {}", rows.len()));
                Ok(s)
            }
            "batch" => {
                let [_, n] = words.as_slice() else { return Err(KvError::parse("usage: batch N")) };
                let n: usize = n.parse().map_err(|_| KvError::parse(format!("bad count {n}")))?;
                // N comes from the input: reserve for a few lines only, or `batch 18446744073709551615` would
                // abort the process before reading one.
                let mut ups = Vec::with_capacity(n.min(1024));
                let mut err = None;
                for _ in 0..n {
                    let l = read_line(input).map_err(|e| KvError { kind: "io", msg: e.to_string() })?;
                    let Some(l) = l else {
                        return Err(KvError::parse("batch ended early"));
                    };
                    let l = match l {
                        Ok(l) => l,
                        Err(e) => {
                            err = err.or(Some(e));
                            continue;
                        }
                    };
                    let w: Vec<&str> = l.split_whitespace().collect();
                    match parse_update(&w) {
                        Ok(u) => ups.push(u),
                        Err(e) => err = err.or(Some(e)),
                    }
                }
                if let Some(e) = err {
                    return Err(e);
                }
                engine.write(ups, sync)?;
                Ok("OK".to_string())
            }
            "snapshot" => Ok(format!("SNAPSHOT {}", engine.snapshot()?)),
            "release" => {
                let [_, id] = words.as_slice() else { return Err(KvError::parse("usage: release ID")) };
                engine.release(id.parse().map_err(|_| KvError::parse(format!("bad id {id}")))?)?;
                Ok("OK".to_string())
            }
            "flush" => engine.flush().map(|_| "OK".to_string()),
            "sync" => engine.sync().map(|_| "OK".to_string()),
            "compact" => {
                let range = match words.as_slice() {
                    [_] => None,
                    [_, a, b] => Some((decode_token(a)?, decode_token(b)?)),
                    _ => return Err(KvError::parse("usage: compact [A B]")),
                };
                // Refused for both engines alike (FlexDB has no range to compact, the LSM engine refuses it too).
                if range.as_ref().is_some_and(|(a, b)| a > b) {
                    return Err(KvError { kind: "invalid", msg: "compact start is after end".into() });
                }
                engine.compact(range).map(|_| "OK".to_string())
            }
            "stats" => engine.stats(),
            // Escaped: a response is one printable line, whatever bytes the command held.
            other => Err(KvError::parse(format!("unknown command {}", other.escape_debug()))),
        })();
        match resp {
            Ok(s) => writeln!(out, "{s}")?,
            Err(e) => writeln!(out, "ERR {} {}", e.kind, e.msg)?,
        }
        out.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_with_the_wrong_arity_names_its_usage() {
        let msg = |line: &str| parse_update(&line.split(' ').collect::<Vec<_>>()).err().unwrap().msg;
        assert_eq!(msg("put a"), "usage: put K V");
        assert_eq!(msg("put a 1 2"), "usage: put K V");
        assert_eq!(msg("del"), "usage: del K");
        assert_eq!(msg("delrange a"), "usage: delrange A B");
        assert!(msg("get a").starts_with("expected put/del/delrange"));
    }
}
