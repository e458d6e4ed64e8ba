//! The transmission phase: reading requests, validating them, executing them on the device, replying.
//!
//! One connection is one reader (the connection's thread) plus `workers_per_connection` worker threads. The
//! reader parses each request header, validates it against the negotiated flags, the export size, the minimum
//! block size and the payload limit, reads a write's payload, and queues the request; workers call the device
//! and send the reply. Replies may leave out of request order, which proto.md allows and which lets a pipelining
//! client (qemu, libnbd, fio) keep several requests in flight. Each reply is written whole under the writer lock,
//! so replies never interleave on the wire.
//!
//! Why this is safe for FLUSH: a write is replied to only after its device call returned, and the device's
//! `flush` covers every write that returned before it began; so every write the client saw completed before
//! sending FLUSH is covered, which is exactly proto.md's rule.
//!
//! Errors: a request that is well framed but invalid gets an error reply (`NBD_EINVAL`, `NBD_ENOSPC`,
//! `NBD_EPERM`, `NBD_EOVERFLOW` as proto.md assigns them) and the session continues; a rejected write's payload is
//! read and discarded first so the stream stays in step. Only framing the server cannot follow (bad request magic,
//! a truncated message, a write payload above [`DRAIN_LIMIT`]) ends the session with a hard disconnect. A device
//! failure becomes that request's error reply. Nothing a client sends affects another connection.

use std::io::{self, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use crate::budget::Budget;
use crate::handshake::{Negotiated, read_or_eof};
use crate::options::{LogFn, ServerOptions};
use crate::protocol::{
    REQUEST_LEN, Request, base_allocation, chunk_header, cmd, cmd_flags, errno, error_chunk, reply,
    simple_reply, tx_flags,
};
use crate::stats::Stats;
use crate::stream::Stream;
use crate::validate::validate;

/// A rejected write payload up to this size is read and discarded so the session can go on; a larger one ends
/// the session (proto.md lets a server treat such lengths as denial of service; payloads up to 2^25 never are).
pub const DRAIN_LIMIT: u32 = 64 << 20;

/// How the transmission phase ended.
#[derive(Debug)]
pub(crate) enum End {
    /// `NBD_CMD_DISC`: outstanding requests were completed.
    Disconnect,
    /// The client closed the connection between requests.
    ClientGone,
    /// The client broke framing; the server hung up.
    Violation(String),
    /// The socket failed.
    Io(io::Error),
}

enum Job {
    Read { cookie: u64, offset: u64, len: u32, charge: usize },
    Write { cookie: u64, offset: u64, data: Vec<u8>, fua: bool, charge: usize },
    Flush { cookie: u64 },
    Trim { cookie: u64, offset: u64, len: u32, fua: bool },
    Zeroes { cookie: u64, offset: u64, len: u32, may_trim: bool, fast: bool, fua: bool },
    Cache { cookie: u64, offset: u64, len: u32 },
    Status { cookie: u64, offset: u64, len: u32, req_one: bool, context: u32 },
}

struct Shared {
    writer: Mutex<Stream>,
    broken: AtomicBool,
    budget: Budget,
    stats: Arc<Stats>,
    neg: Negotiated,
    /// Where the server reports events an operator must see.
    log: Option<Arc<LogFn>>,
    /// Whether this connection reported a device failure already: the first one is news (a full disk, a
    /// failed volume), the ones after it would flood the log with the same news.
    device_failure_logged: AtomicBool,
}

impl Shared {
    fn send(&self, bytes: &[u8]) {
        if self.broken.load(Ordering::Relaxed) {
            return;
        }
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if w.write_all(bytes).and_then(|_| w.flush()).is_err() {
            // The client cannot hear us any more: stop the reader too.
            self.broken.store(true, Ordering::Relaxed);
            let _ = w.shutdown();
        }
    }

    /// Ends the session in both directions (hard disconnect) and unblocks the reader.
    fn cut_off(&self) {
        self.broken.store(true, Ordering::Relaxed);
        let w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let _ = w.shutdown();
        // Budget a dead worker held is never returned; let the reader through so it can see the broken stream.
        self.budget.release(usize::MAX);
    }

    fn reply_ok(&self, cookie: u64) {
        self.send(&simple_reply(cookie, 0));
    }

    fn reply_err(&self, cookie: u64, err: u32, msg: &str) {
        Stats::inc(&self.stats.error_replies);
        // With structured replies, errors go as an error chunk (required for reads, preferred for the rest
        // because it carries a message).
        if self.neg.structured {
            self.send(&error_chunk(cookie, err, msg));
        } else {
            self.send(&simple_reply(cookie, err));
        }
    }
}

/// Runs the transmission phase until the client disconnects or breaks framing. The first request the device
/// fails is reported to `log`.
pub(crate) fn run(
    reader: &mut BufReader<Stream>,
    writer: Stream,
    neg: Negotiated,
    opts: &ServerOptions,
    stats: &Arc<Stats>,
    log: Option<Arc<LogFn>>,
) -> End {
    let shared = Shared {
        writer: Mutex::new(writer),
        broken: AtomicBool::new(false),
        budget: Budget::new(opts.inflight_bytes),
        stats: stats.clone(),
        neg,
        log,
        device_failure_logged: AtomicBool::new(false),
    };
    let (tx, rx) = mpsc::sync_channel::<Job>(4 * opts.workers_per_connection);
    let rx = Mutex::new(rx);
    std::thread::scope(|s| {
        for _ in 0..opts.workers_per_connection {
            s.spawn(|| {
                loop {
                    let job = {
                        let rx = rx.lock().unwrap_or_else(|p| p.into_inner());
                        rx.recv()
                    };
                    let Ok(job) = job else { break };
                    // A panicking device must not take the connection's threads down with it half-way (the
                    // reader would wait forever for budget the dead worker held): the session is cut off
                    // instead, and only this session.
                    let ran =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| execute(&shared, job)));
                    if ran.is_err() {
                        Stats::inc(&shared.stats.device_errors);
                        shared.cut_off();
                    }
                }
            });
        }
        let end = read_loop(reader, &shared, &tx, opts);
        // Dropping the sender lets the workers finish what is queued (proto.md: on NBD_CMD_DISC "handle all
        // outstanding requests") and exit; the scope joins them.
        drop(tx);
        end
    })
}

fn read_loop(
    reader: &mut BufReader<Stream>,
    sh: &Shared,
    tx: &mpsc::SyncSender<Job>,
    opts: &ServerOptions,
) -> End {
    let flags = sh.neg.flags;
    let device = sh.neg.export.device().clone();
    let size = device.size();
    let minimum = u64::from(device.block_sizes().minimum);
    let adv = |f: u16| flags & f != 0;
    loop {
        let mut h = [0u8; REQUEST_LEN];
        match read_or_eof(reader, &mut h) {
            Ok(true) => {}
            Ok(false) => return End::ClientGone,
            Err(_) if sh.broken.load(Ordering::Relaxed) => return End::ClientGone,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return End::Violation("connection closed inside a request header".into());
            }
            Err(e) => return End::Io(e),
        }
        let Some(req) = Request::decode(&h) else {
            return End::Violation("bad request magic".into());
        };
        Stats::inc(&sh.stats.requests);
        if req.kind == cmd::DISC {
            return End::Disconnect;
        }
        let verdict =
            validate(&req, flags, size, minimum, opts.max_payload, sh.neg.structured, sh.neg.meta_context);
        let job = match (req.kind, verdict) {
            (cmd::WRITE, verdict) => {
                if let Err((err, msg)) = verdict {
                    if req.len > DRAIN_LIMIT {
                        return End::Violation(format!("write payload of {} bytes", req.len));
                    }
                    if let Err(e) = drain(reader, u64::from(req.len)) {
                        return End::Violation(format!("write payload cut short: {e}"));
                    }
                    sh.reply_err(req.cookie, err, msg);
                    continue;
                }
                let charge = sh.budget.acquire(req.len as usize);
                // Read into uninitialised capacity: zeroing a 128 KiB buffer first cost as much as a copy.
                let mut data = Vec::with_capacity(req.len as usize);
                let got = reader.by_ref().take(u64::from(req.len)).read_to_end(&mut data);
                if let Err(e) = got.and_then(|n| {
                    if n == req.len as usize {
                        Ok(())
                    } else {
                        Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed"))
                    }
                }) {
                    sh.budget.release(charge);
                    return End::Violation(format!("write payload cut short: {e}"));
                }
                Job::Write {
                    cookie: req.cookie,
                    offset: req.offset,
                    data,
                    fua: req.flags & cmd_flags::FUA != 0,
                    charge,
                }
            }
            (_, Err((err, msg))) => {
                sh.reply_err(req.cookie, err, msg);
                continue;
            }
            (cmd::READ, Ok(())) => {
                let charge = sh.budget.acquire(req.len as usize);
                Job::Read { cookie: req.cookie, offset: req.offset, len: req.len, charge }
            }
            (cmd::FLUSH, Ok(())) => Job::Flush { cookie: req.cookie },
            (cmd::TRIM, Ok(())) => Job::Trim {
                cookie: req.cookie,
                offset: req.offset,
                len: req.len,
                fua: req.flags & cmd_flags::FUA != 0,
            },
            (cmd::WRITE_ZEROES, Ok(())) => Job::Zeroes {
                cookie: req.cookie,
                offset: req.offset,
                len: req.len,
                may_trim: req.flags & cmd_flags::NO_HOLE == 0,
                fast: req.flags & cmd_flags::FAST_ZERO != 0,
                fua: req.flags & cmd_flags::FUA != 0 && adv(tx_flags::SEND_FUA),
            },
            (cmd::CACHE, Ok(())) => Job::Cache { cookie: req.cookie, offset: req.offset, len: req.len },
            (cmd::BLOCK_STATUS, Ok(())) => Job::Status {
                cookie: req.cookie,
                offset: req.offset,
                len: req.len,
                req_one: req.flags & cmd_flags::REQ_ONE != 0,
                // validate() accepts BLOCK_STATUS only with a negotiated context.
                context: sh.neg.meta_context.unwrap_or(base_allocation::ID),
            },
            (_, Ok(())) => {
                // validate() accepts only the commands matched above.
                sh.reply_err(req.cookie, errno::EINVAL, "unknown command");
                continue;
            }
        };
        if tx.send(job).is_err() || sh.broken.load(Ordering::Relaxed) {
            return End::ClientGone;
        }
    }
}

/// Builds the `NBD_REPLY_TYPE_BLOCK_STATUS` chunk from a device's extents, enforcing what proto.md requires
/// whatever the device returned: nonzero lengths, neighbours with equal flags merged, a total of at most `len`, one
/// descriptor with `REQ_ONE`, at most 2^20 descriptors. `None` if nothing is left to describe.
fn status_chunk(
    cookie: u64,
    context: u32,
    len: u32,
    req_one: bool,
    extents: &[(u32, u32)],
) -> Option<Vec<u8>> {
    const MAX_DESCRIPTORS: usize = 1 << 20;
    let mut out: Vec<(u32, u32)> = Vec::new();
    let mut left = len;
    for &(l, f) in extents {
        let l = l.min(left);
        if l == 0 {
            continue;
        }
        let full = out.len() == MAX_DESCRIPTORS;
        match out.last_mut() {
            Some((pl, pf)) if *pf == f => *pl += l,
            _ if full => break,
            _ => out.push((l, f)),
        }
        left -= l;
    }
    if req_one {
        out.truncate(1);
    }
    if out.is_empty() {
        return None;
    }
    let payload = 4 + 8 * out.len();
    let mut b = Vec::with_capacity(20 + payload);
    b.extend_from_slice(&chunk_header(cookie, reply::FLAG_DONE, reply::TYPE_BLOCK_STATUS, payload as u32));
    b.extend_from_slice(&context.to_be_bytes());
    for (l, f) in out {
        b.extend_from_slice(&l.to_be_bytes());
        b.extend_from_slice(&f.to_be_bytes());
    }
    Some(b)
}

fn drain(r: &mut BufReader<Stream>, mut n: u64) -> io::Result<()> {
    let mut scratch = [0u8; 16 * 1024];
    while n > 0 {
        let k = (scratch.len() as u64).min(n) as usize;
        r.read_exact(&mut scratch[..k])?;
        n -= k as u64;
    }
    Ok(())
}

fn execute(sh: &Shared, job: Job) {
    let device = sh.neg.export.device();
    let stats = &sh.stats;
    let fail = |cookie: u64, e: crate::Error| {
        Stats::inc(&stats.device_errors);
        let errno = e.nbd_errno();
        if let Some(log) = &sh.log
            && !sh.device_failure_logged.swap(true, Ordering::Relaxed)
        {
            log(&format!(
                "transmission: the device failed a request: {e} (answered {}; later failures on this \
                 connection are counted in device_errors, not logged)",
                crate::protocol::errno::name(errno)
            ));
        }
        sh.reply_err(cookie, errno, &e.to_string());
    };
    match job {
        Job::Read { cookie, offset, len, charge } => {
            let hdr = if sh.neg.structured { 28 } else { 16 };
            let mut buf = vec![0u8; hdr + len as usize];
            match device.read_at(&mut buf[hdr..], offset) {
                Err(e) => fail(cookie, e),
                Ok(()) => {
                    Stats::inc(&stats.reads);
                    Stats::add(&stats.bytes_read, u64::from(len));
                    if !sh.neg.structured {
                        buf[..16].copy_from_slice(&simple_reply(cookie, 0));
                        sh.send(&buf);
                    } else if len == 0 {
                        sh.send(&chunk_header(cookie, reply::FLAG_DONE, reply::TYPE_NONE, 0));
                    } else if buf[hdr..].iter().all(|&b| b == 0) {
                        // A hole chunk spares the network the zeros; a single content chunk also satisfies DF.
                        let mut b = Vec::with_capacity(32);
                        b.extend_from_slice(&chunk_header(
                            cookie,
                            reply::FLAG_DONE,
                            reply::TYPE_OFFSET_HOLE,
                            12,
                        ));
                        b.extend_from_slice(&offset.to_be_bytes());
                        b.extend_from_slice(&len.to_be_bytes());
                        sh.send(&b);
                    } else {
                        // The data is complete in memory, so no error can follow: this chunk may be the last.
                        buf[..20].copy_from_slice(&chunk_header(
                            cookie,
                            reply::FLAG_DONE,
                            reply::TYPE_OFFSET_DATA,
                            8 + len,
                        ));
                        buf[20..28].copy_from_slice(&offset.to_be_bytes());
                        sh.send(&buf);
                    }
                }
            }
            drop(buf);
            sh.budget.release(charge);
        }
        Job::Write { cookie, offset, data, fua, charge } => {
            match device.write_at(&data, offset, fua) {
                Err(e) => fail(cookie, e),
                Ok(()) => {
                    Stats::inc(&stats.writes);
                    Stats::add(&stats.bytes_written, data.len() as u64);
                    sh.reply_ok(cookie);
                }
            }
            drop(data);
            sh.budget.release(charge);
        }
        Job::Flush { cookie } => match device.flush() {
            Err(e) => fail(cookie, e),
            Ok(()) => {
                Stats::inc(&stats.flushes);
                sh.reply_ok(cookie);
            }
        },
        Job::Trim { cookie, offset, len, fua } => {
            let r = if len == 0 { Ok(()) } else { device.trim(offset, u64::from(len), fua) };
            match r {
                Err(e) => fail(cookie, e),
                Ok(()) => {
                    Stats::inc(&stats.trims);
                    sh.reply_ok(cookie);
                }
            }
        }
        Job::Zeroes { cookie, offset, len, may_trim, fast, fua } => {
            let r = if len == 0 {
                Ok(())
            } else {
                device.write_zeroes(offset, u64::from(len), may_trim, fast, fua)
            };
            match r {
                Err(e) => fail(cookie, e),
                Ok(()) => {
                    Stats::inc(&stats.write_zeroes);
                    sh.reply_ok(cookie);
                }
            }
        }
        Job::Status { cookie, offset, len, req_one, context } => match device.block_status(offset, len) {
            Err(e) => fail(cookie, e),
            Ok(extents) => match status_chunk(cookie, context, len, req_one, &extents) {
                Some(chunk) => {
                    Stats::inc(&stats.block_status);
                    sh.send(&chunk);
                }
                None => {
                    Stats::inc(&stats.device_errors);
                    sh.reply_err(cookie, errno::EIO, "the device reported no allocation extents");
                }
            },
        },
        Job::Cache { cookie, offset, len } => {
            let r = if len == 0 { Ok(()) } else { device.cache(offset, u64::from(len)) };
            match r {
                Err(e) => fail(cookie, e),
                Ok(()) => {
                    Stats::inc(&stats.caches);
                    sh.reply_ok(cookie);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_chunks_are_merged_capped_and_nonempty() {
        let parse = |b: Vec<u8>| -> Vec<(u32, u32)> {
            assert_eq!(crate::protocol::be16(&b, 6), reply::TYPE_BLOCK_STATUS);
            assert_eq!(crate::protocol::be32(&b, 20), 1);
            b[24..].chunks(8).map(|c| (crate::protocol::be32(c, 0), crate::protocol::be32(c, 4))).collect()
        };
        let c = status_chunk(9, 1, 100, false, &[(10, 0), (0, 3), (20, 0), (50, 3), (90, 0)]).unwrap();
        assert_eq!(parse(c), vec![(30, 0), (50, 3), (20, 0)], "merged and capped at the request length");
        let c = status_chunk(9, 1, 100, true, &[(10, 0), (20, 3)]).unwrap();
        assert_eq!(parse(c), vec![(10, 0)]);
        assert!(status_chunk(9, 1, 100, false, &[(0, 0)]).is_none());
    }
}
