//! The fixed newstyle handshake and option haggling (proto.md "Handshake" and "Option types").
//!
//! The server greets with `NBDMAGIC IHAVEOPT` and the handshake flags `FIXED_NEWSTYLE | NO_ZEROES`, reads the
//! client flags (unknown bits: the connection is dropped, as proto.md requires), then answers options until one
//! enters transmission (`GO` or `EXPORT_NAME`) or the session ends. Options this server does not implement —
//! `STARTTLS` (NOTLS mode), extended headers, anything unknown — get
//! `NBD_REP_ERR_UNSUP` after their data is skipped, so the client can carry on. Malformed option data gets
//! `NBD_REP_ERR_INVALID`; only a broken framing (bad magic, oversized option, too many options) ends the session,
//! since then nothing after it can be parsed or the client is abusive.
//!
//! Block sizes: `NBD_INFO_BLOCK_SIZE` is sent on every successful `INFO`/`GO`, requested or not (proto.md lets a
//! server send unrequested information). A client that did not request it is not refused even when the device's
//! minimum block is above 1: the server rejects misaligned requests with `NBD_EINVAL` instead, which proto.md
//! permits ("MUST cleanly error commands that fall outside the constraints").

use std::io::{self, Read, Write};
use std::sync::Arc;

use crate::export::{Export, Exports};
use crate::options::ServerOptions;
use crate::protocol::{
    IHAVEOPT, MAX_STRING, NBD_MAGIC, base_allocation, be16, be32, client_flags, handshake_flags, info, opt,
    option_reply, rep,
};

/// Option data longer than this ends the session: no option this server knows needs more (GO with 4096-byte
/// name and every info request fits in 136 KiB), and skipping gigabytes would let a client tie up a thread.
pub const MAX_OPTION_DATA: u32 = 256 * 1024;

/// What the handshake ended with.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Transmission begins on `export`.
    Transmission(Negotiated),
    /// The client aborted (or went away) cleanly.
    Closed,
    /// The client broke a mandatory rule; the server hangs up.
    Violation(String),
}

/// The state a successful handshake hands to the transmission phase.
#[derive(Debug)]
pub(crate) struct Negotiated {
    pub export: Arc<Export>,
    pub structured: bool,
    pub flags: u16,
    /// The id of `base:allocation` when the client selected it for this export (`NBD_CMD_BLOCK_STATUS` allowed).
    pub meta_context: Option<u32>,
}

/// Runs the handshake on `r`/`w`. I/O errors (including a timeout) are returned as errors.
pub(crate) fn run<R: Read, W: Write>(
    r: &mut R,
    w: &mut W,
    exports: &Exports,
    opts: &ServerOptions,
) -> io::Result<Outcome> {
    let mut greeting = Vec::with_capacity(18);
    greeting.extend_from_slice(&NBD_MAGIC.to_be_bytes());
    greeting.extend_from_slice(&IHAVEOPT.to_be_bytes());
    greeting.extend_from_slice(&(handshake_flags::FIXED_NEWSTYLE | handshake_flags::NO_ZEROES).to_be_bytes());
    w.write_all(&greeting)?;
    w.flush()?;

    let mut cf = [0u8; 4];
    if !read_or_eof(r, &mut cf)? {
        return Ok(Outcome::Closed);
    }
    let cflags = u32::from_be_bytes(cf);
    if cflags & !(client_flags::FIXED_NEWSTYLE | client_flags::NO_ZEROES) != 0 {
        return Ok(Outcome::Violation(format!("unknown client flags {cflags:#x}")));
    }
    let no_zeroes = cflags & client_flags::NO_ZEROES != 0;
    let mut structured = false;
    // The export the last NBD_OPT_SET_META_CONTEXT referred to, and whether it selected base:allocation.
    let mut meta: Option<(Arc<Export>, bool)> = None;
    let active_meta = |meta: &Option<(Arc<Export>, bool)>, export: &Arc<Export>| match meta {
        Some((e, true)) if Arc::ptr_eq(e, export) => Some(base_allocation::ID),
        _ => None,
    };

    for _ in 0..opts.max_options {
        let mut h = [0u8; 16];
        if !read_or_eof(r, &mut h)? {
            return Ok(Outcome::Closed);
        }
        let magic = u64::from_be_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]);
        if magic != IHAVEOPT {
            return Ok(Outcome::Violation(format!("bad option magic {magic:#x}")));
        }
        let option = be32(&h, 8);
        let len = be32(&h, 12);
        if len > MAX_OPTION_DATA {
            return Ok(Outcome::Violation(format!("option {option} carries {len} bytes of data")));
        }
        let mut data = vec![0u8; len as usize];
        r.read_exact(&mut data)?;

        match option {
            opt::EXPORT_NAME => {
                // No error reply exists for EXPORT_NAME: an unknown export ends the session.
                let Some(export) = std::str::from_utf8(&data).ok().and_then(|n| exports.lookup(n)) else {
                    return Ok(Outcome::Violation("NBD_OPT_EXPORT_NAME names no export".into()));
                };
                let flags = export.transmission_flags(structured);
                let mut b = Vec::with_capacity(134);
                b.extend_from_slice(&export.device().size().to_be_bytes());
                b.extend_from_slice(&flags.to_be_bytes());
                if !no_zeroes {
                    b.extend_from_slice(&[0u8; 124]);
                }
                w.write_all(&b)?;
                w.flush()?;
                let meta_context = active_meta(&meta, export);
                return Ok(Outcome::Transmission(Negotiated {
                    export: export.clone(),
                    structured,
                    flags,
                    meta_context,
                }));
            }
            opt::ABORT => {
                // proto.md: reply ACK; a client that already hung up is not an error.
                let _ = w.write_all(&option_reply(option, rep::ACK, &[])).and_then(|_| w.flush());
                return Ok(Outcome::Closed);
            }
            opt::LIST => {
                if !data.is_empty() {
                    send(w, option, rep::ERR_INVALID, b"NBD_OPT_LIST takes no data")?;
                    continue;
                }
                let mut out = Vec::new();
                for e in exports.iter() {
                    let mut d = Vec::with_capacity(4 + e.name().len() + e.description().len());
                    d.extend_from_slice(&(e.name().len() as u32).to_be_bytes());
                    d.extend_from_slice(e.name().as_bytes());
                    d.extend_from_slice(e.description().as_bytes());
                    out.extend_from_slice(&option_reply(option, rep::SERVER, &d));
                }
                out.extend_from_slice(&option_reply(option, rep::ACK, &[]));
                w.write_all(&out)?;
                w.flush()?;
            }
            opt::STRUCTURED_REPLY => {
                if !data.is_empty() {
                    send(w, option, rep::ERR_INVALID, b"NBD_OPT_STRUCTURED_REPLY takes no data")?;
                } else if structured {
                    send(w, option, rep::ERR_INVALID, b"structured replies are already negotiated")?;
                } else {
                    structured = true;
                    send(w, option, rep::ACK, &[])?;
                }
            }
            opt::INFO | opt::GO => match parse_info_request(&data) {
                Err(msg) => send(w, option, rep::ERR_INVALID, msg.as_bytes())?,
                Ok(req) => {
                    let Some(export) = std::str::from_utf8(req.name).ok().and_then(|n| exports.lookup(n))
                    else {
                        send(w, option, rep::ERR_UNKNOWN, b"no such export")?;
                        continue;
                    };
                    let flags = export.transmission_flags(structured);
                    w.write_all(&info_replies(option, export, flags, &req.requests, opts))?;
                    w.flush()?;
                    if option == opt::GO {
                        let meta_context = active_meta(&meta, export);
                        return Ok(Outcome::Transmission(Negotiated {
                            export: export.clone(),
                            structured,
                            flags,
                            meta_context,
                        }));
                    }
                }
            },
            opt::LIST_META_CONTEXT | opt::SET_META_CONTEXT => {
                let set = option == opt::SET_META_CONTEXT;
                if set {
                    // A SET replaces the selection even when it fails.
                    meta = None;
                }
                if !structured {
                    send(w, option, rep::ERR_INVALID, b"negotiate structured replies first")?;
                    continue;
                }
                let (name, queries) = match parse_meta_request(&data) {
                    Ok(r) => r,
                    Err(msg) => {
                        send(w, option, rep::ERR_INVALID, msg.as_bytes())?;
                        continue;
                    }
                };
                let Some(export) = std::str::from_utf8(name).ok().and_then(|n| exports.lookup(n)) else {
                    send(w, option, rep::ERR_UNKNOWN, b"no such export")?;
                    continue;
                };
                // base:allocation is the only context. LIST also accepts the namespace wildcard "base:" and lists
                // everything for no query; SET selects only by exact name. Queries of other namespaces are
                // ignored, as proto.md requires.
                let selected = if set {
                    queries.iter().any(|q| *q == base_allocation::NAME.as_bytes())
                } else {
                    queries.is_empty()
                        || queries.iter().any(|q| *q == b"base:" || *q == base_allocation::NAME.as_bytes())
                };
                let mut out = Vec::new();
                if selected {
                    let id = if set { base_allocation::ID } else { 0 };
                    let mut d = Vec::with_capacity(4 + base_allocation::NAME.len());
                    d.extend_from_slice(&id.to_be_bytes());
                    d.extend_from_slice(base_allocation::NAME.as_bytes());
                    out.extend_from_slice(&option_reply(option, rep::META_CONTEXT, &d));
                }
                out.extend_from_slice(&option_reply(option, rep::ACK, &[]));
                w.write_all(&out)?;
                w.flush()?;
                if set {
                    meta = Some((export.clone(), selected));
                }
            }
            opt::STARTTLS => send(w, option, rep::ERR_UNSUP, b"TLS is not supported by this server")?,
            _ => send(w, option, rep::ERR_UNSUP, b"option not supported")?,
        }
    }
    Ok(Outcome::Violation(format!("more than {} options", opts.max_options)))
}

struct InfoRequest<'a> {
    name: &'a [u8],
    requests: Vec<u16>,
}

/// Parses `NBD_OPT_INFO`/`NBD_OPT_GO` data: u32 name length, name, u16 count, count × u16 info types. The
/// lengths must account for the data exactly.
fn parse_info_request(d: &[u8]) -> Result<InfoRequest<'_>, String> {
    if d.len() < 6 {
        return Err(format!("option data of {} bytes is shorter than 6", d.len()));
    }
    let name_len = be32(d, 0) as usize;
    if name_len > d.len() - 6 {
        return Err(format!("name length {name_len} exceeds option data length - 6"));
    }
    if name_len > MAX_STRING {
        return Err(format!("name length {name_len} exceeds {MAX_STRING}"));
    }
    let name = &d[4..4 + name_len];
    let count = be16(d, 4 + name_len) as usize;
    let rest = &d[6 + name_len..];
    if rest.len() != 2 * count {
        return Err(format!("{count} information requests need {} bytes, got {}", 2 * count, rest.len()));
    }
    if name.contains(&0) {
        return Err("export name contains NUL".into());
    }
    let requests = rest.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
    Ok(InfoRequest { name, requests })
}

/// Parses `NBD_OPT_LIST_META_CONTEXT` / `NBD_OPT_SET_META_CONTEXT` data: u32 name length, name, u32 query count,
/// then per query a u32 length and the query. The lengths must account for the data exactly.
fn parse_meta_request(d: &[u8]) -> Result<(&[u8], Vec<&[u8]>), String> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8], String> {
        let s = d.get(at..at.checked_add(n).ok_or("length overflow")?).ok_or("option data too short")?;
        at += n;
        Ok(s)
    };
    let name_len = be32(take(4)?, 0) as usize;
    if name_len > MAX_STRING {
        return Err(format!("name length {name_len} exceeds {MAX_STRING}"));
    }
    let name = take(name_len)?;
    let count = be32(take(4)?, 0) as usize;
    let mut queries = Vec::new();
    for _ in 0..count {
        let len = be32(take(4)?, 0) as usize;
        if len > MAX_STRING {
            return Err(format!("query length {len} exceeds {MAX_STRING}"));
        }
        queries.push(take(len)?);
    }
    if at != d.len() {
        return Err(format!("{} bytes after the last query", d.len() - at));
    }
    if name.contains(&0) || queries.iter().any(|q| q.contains(&0)) {
        return Err("strings must not contain NUL".into());
    }
    Ok((name, queries))
}

/// The `NBD_REP_INFO` replies and the final ACK for a successful INFO/GO.
fn info_replies(
    option: u32,
    export: &Export,
    flags: u16,
    requested: &[u16],
    opts: &ServerOptions,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut item = |kind: u16, payload: &[u8]| {
        let mut d = Vec::with_capacity(2 + payload.len());
        d.extend_from_slice(&kind.to_be_bytes());
        d.extend_from_slice(payload);
        out.extend_from_slice(&option_reply(option, rep::INFO, &d));
    };
    let mut e = Vec::with_capacity(10);
    e.extend_from_slice(&export.device().size().to_be_bytes());
    e.extend_from_slice(&flags.to_be_bytes());
    item(info::EXPORT, &e);
    if requested.contains(&info::NAME) {
        item(info::NAME, export.name().as_bytes());
    }
    if requested.contains(&info::DESCRIPTION) && !export.description().is_empty() {
        item(info::DESCRIPTION, export.description().as_bytes());
    }
    let sizes = export.device().block_sizes();
    let mut b = Vec::with_capacity(12);
    b.extend_from_slice(&sizes.minimum.to_be_bytes());
    b.extend_from_slice(&sizes.preferred.to_be_bytes());
    b.extend_from_slice(&opts.max_payload.max(sizes.preferred).to_be_bytes());
    item(info::BLOCK_SIZE, &b);
    out.extend_from_slice(&option_reply(option, rep::ACK, &[]));
    out
}

fn send<W: Write>(w: &mut W, option: u32, kind: u32, data: &[u8]) -> io::Result<()> {
    w.write_all(&option_reply(option, kind, data))?;
    w.flush()
}

/// Fills `buf`; `Ok(false)` if the peer closed before sending its first byte.
pub(crate) fn read_or_eof<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed mid-message")),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_request_parsing_checks_every_length() {
        let mut d = Vec::new();
        d.extend_from_slice(&3u32.to_be_bytes());
        d.extend_from_slice(b"abc");
        d.extend_from_slice(&2u16.to_be_bytes());
        d.extend_from_slice(&info::NAME.to_be_bytes());
        d.extend_from_slice(&info::BLOCK_SIZE.to_be_bytes());
        let r = parse_info_request(&d).unwrap();
        assert_eq!(r.name, b"abc");
        assert_eq!(r.requests, vec![info::NAME, info::BLOCK_SIZE]);
        assert!(parse_info_request(&d[..d.len() - 1]).is_err(), "truncated request list");
        let mut long = d.clone();
        long.push(0);
        assert!(parse_info_request(&long).is_err(), "trailing byte");
        let mut bad_name = d.clone();
        bad_name[0..4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(parse_info_request(&bad_name).is_err(), "name length beyond data");
        assert!(parse_info_request(&[0, 0, 0]).is_err());
    }
}
