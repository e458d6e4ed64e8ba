//! A minimal raw NBD client for protocol tests: it speaks exact bytes so tests can also speak wrong ones.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use nbd::protocol::*;
use nbd::{Export, Exports, MemDevice, Server, ServerOptions, Stream};

pub const SIZE: u64 = 16 << 20;

/// A client end plus the server thread serving the other end.
pub struct Conn {
    pub s: UnixStream,
    pub server: Server,
    pub thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        let _ = self.s.shutdown(std::net::Shutdown::Both);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

pub fn mem_server(opts: ServerOptions) -> (Server, Arc<MemDevice>) {
    let dev = Arc::new(MemDevice::new(SIZE));
    let mut ex = Exports::new();
    ex.add(Export::new("disk", dev.clone()).unwrap().with_description("test disk").unwrap()).unwrap();
    ex.add(Export::new("ro", Arc::new(MemDevice::new(1 << 20).read_only())).unwrap()).unwrap();
    (Server::new(ex, opts).unwrap(), dev)
}

/// Connects a socket pair to `server` and reads the greeting.
pub fn connect(server: &Server) -> Conn {
    let (a, b) = UnixStream::pair().unwrap();
    a.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let srv = server.clone();
    let thread = std::thread::spawn(move || srv.serve_stream(Stream::Unix(b)).unwrap());
    let mut c = Conn { s: a, server: server.clone(), thread: Some(thread) };
    let g = c.read_n(18);
    assert_eq!(be64(&g, 0), NBD_MAGIC);
    assert_eq!(be64(&g, 8), IHAVEOPT);
    assert_eq!(be16(&g, 16), handshake_flags::FIXED_NEWSTYLE | handshake_flags::NO_ZEROES);
    c
}

pub struct OptReply {
    pub option: u32,
    pub kind: u32,
    pub data: Vec<u8>,
}

impl Conn {
    pub fn read_n(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0u8; n];
        self.s.read_exact(&mut b).unwrap();
        b
    }

    pub fn send(&mut self, b: &[u8]) {
        self.s.write_all(b).unwrap();
    }

    /// Sends, tolerating a server that already hung up.
    pub fn try_send(&mut self, b: &[u8]) {
        let _ = self.s.write_all(b);
    }

    /// Whether the server closed the connection (EOF on read).
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.s.read(&mut b), Ok(0) | Err(_))
    }

    pub fn client_flags(&mut self, f: u32) {
        self.send(&f.to_be_bytes());
    }

    pub fn option(&mut self, option: u32, data: &[u8]) {
        let mut b = Vec::new();
        b.extend_from_slice(&IHAVEOPT.to_be_bytes());
        b.extend_from_slice(&option.to_be_bytes());
        b.extend_from_slice(&(data.len() as u32).to_be_bytes());
        b.extend_from_slice(data);
        self.send(&b);
    }

    pub fn opt_reply(&mut self) -> OptReply {
        let h = self.read_n(20);
        assert_eq!(be64(&h, 0), OPT_REPLY_MAGIC);
        let len = be32(&h, 16) as usize;
        OptReply { option: be32(&h, 8), kind: be32(&h, 12), data: self.read_n(len) }
    }

    /// Replies up to and including the final (ACK or error) one.
    pub fn opt_replies(&mut self) -> Vec<OptReply> {
        let mut v = Vec::new();
        loop {
            let r = self.opt_reply();
            let done = ![rep::INFO, rep::SERVER, rep::META_CONTEXT].contains(&r.kind);
            v.push(r);
            if done {
                return v;
            }
        }
    }

    /// Fixed newstyle, optional structured replies, GO on `name`; returns the transmission flags.
    pub fn go(&mut self, name: &str, structured: bool) -> u16 {
        self.client_flags(client_flags::FIXED_NEWSTYLE | client_flags::NO_ZEROES);
        self.negotiate(name, structured)
    }

    /// Like [`Conn::go`] after the client flags were sent.
    pub fn negotiate(&mut self, name: &str, structured: bool) -> u16 {
        if structured {
            self.option(opt::STRUCTURED_REPLY, &[]);
            assert_eq!(self.opt_reply().kind, rep::ACK);
        }
        self.option(opt::GO, &info_data(name, &[info::BLOCK_SIZE]));
        let rs = self.opt_replies();
        assert_eq!(rs.last().unwrap().kind, rep::ACK, "GO failed");
        let e = rs.iter().find(|r| r.kind == rep::INFO && be16(&r.data, 0) == info::EXPORT).unwrap();
        be16(&e.data, 10)
    }

    pub fn request(&mut self, kind: u16, flags: u16, cookie: u64, offset: u64, len: u32) {
        self.send(&Request { flags, kind, cookie, offset, len }.encode());
    }

    pub fn write(&mut self, cookie: u64, offset: u64, data: &[u8], flags: u16) {
        self.request(cmd::WRITE, flags, cookie, offset, data.len() as u32);
        self.send(data);
    }

    /// Reads a simple reply header: (error, cookie).
    pub fn simple(&mut self) -> (u32, u64) {
        let h = self.read_n(16);
        assert_eq!(be32(&h, 0), SIMPLE_REPLY_MAGIC, "expected a simple reply");
        (be32(&h, 4), be64(&h, 8))
    }

    /// Reads one structured chunk: (flags, type, cookie, payload).
    pub fn chunk(&mut self) -> (u16, u16, u64, Vec<u8>) {
        let h = self.read_n(20);
        assert_eq!(be32(&h, 0), STRUCTURED_REPLY_MAGIC, "expected a structured chunk");
        let len = be32(&h, 16) as usize;
        (be16(&h, 4), be16(&h, 6), be64(&h, 8), self.read_n(len))
    }

    /// Any reply: a simple one, or a whole structured one assembled into (error, cookie, data).
    pub fn reply(&mut self, read_len: Option<usize>) -> (u32, u64, Vec<u8>) {
        let mut m = [0u8; 4];
        self.s.read_exact(&mut m).unwrap();
        let magic = u32::from_be_bytes(m);
        if magic == SIMPLE_REPLY_MAGIC {
            let rest = self.read_n(12);
            let err = be32(&rest, 0);
            let cookie = be64(&rest, 4);
            let data = match read_len {
                Some(n) if err == 0 => self.read_n(n),
                _ => Vec::new(),
            };
            return (err, cookie, data);
        }
        assert_eq!(magic, STRUCTURED_REPLY_MAGIC);
        let rest = self.read_n(16);
        let (mut flags, mut kind, cookie) = (be16(&rest, 0), be16(&rest, 2), be64(&rest, 4));
        let mut payload = self.read_n(be32(&rest, 12) as usize);
        let mut data = Vec::new();
        let mut err = 0;
        loop {
            match kind {
                reply::TYPE_OFFSET_DATA => data.extend_from_slice(&payload[8..]),
                reply::TYPE_OFFSET_HOLE => data.resize(data.len() + be32(&payload, 8) as usize, 0),
                reply::TYPE_ERROR => err = be32(&payload, 0),
                reply::TYPE_NONE => {}
                t => panic!("unexpected chunk type {t}"),
            }
            if flags & reply::FLAG_DONE != 0 {
                return (err, cookie, data);
            }
            let (f, k, c, p) = self.chunk();
            assert_eq!(c, cookie);
            (flags, kind, payload) = (f, k, p);
        }
    }
}

pub fn info_data(name: &str, reqs: &[u16]) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend_from_slice(&(name.len() as u32).to_be_bytes());
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&(reqs.len() as u16).to_be_bytes());
    for r in reqs {
        d.extend_from_slice(&r.to_be_bytes());
    }
    d
}

/// A deterministic byte pattern.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
