//! Listener tests: TCP and Unix sockets, concurrent clients, the connection limit, shutdown with clients open.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions

mod common;

use std::io::Read;
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use nbd::protocol::*;
use nbd::{Export, Exports, MemDevice, Server, ServerOptions};

fn greet(mut s: impl Read) -> bool {
    let mut g = [0u8; 18];
    s.read_exact(&mut g).is_ok() && be64(&g, 0) == NBD_MAGIC
}

fn exports() -> Exports {
    let mut ex = Exports::new();
    ex.add(Export::new("a", Arc::new(MemDevice::new(1 << 20))).unwrap()).unwrap();
    ex
}

#[test]
fn tcp_and_unix_listeners_greet_and_shut_down_with_clients_connected() {
    let s = Server::new(exports(), ServerOptions::default()).unwrap();
    let tcp = s.clone().listen_tcp("127.0.0.1:0").unwrap();
    let addr = tcp.tcp_addr().unwrap();
    assert!(tcp.uri("a").starts_with("nbd://127.0.0.1:"));
    let mut idle: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect();
    for c in &mut idle {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert!(greet(&mut *c));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nbd.sock");
    let unix = s.listen_unix(&path).unwrap();
    assert_eq!(unix.uri(""), format!("nbd+unix:///?socket={}", path.display()));
    let u = UnixStream::connect(&path).unwrap();
    u.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert!(greet(&u));
    // Shutdown must not wait for the idle clients to speak.
    let t = std::time::Instant::now();
    tcp.shutdown();
    unix.shutdown();
    assert!(t.elapsed() < Duration::from_secs(10));
    assert!(!path.exists(), "the socket file is removed");
    for mut c in idle {
        let mut b = [0u8; 1];
        assert!(matches!(c.read(&mut b), Ok(0) | Err(_)), "client was disconnected");
    }
}

#[test]
fn connections_beyond_the_limit_are_refused_and_others_unaffected() {
    let logged = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = logged.clone();
    let s = Server::new(exports(), ServerOptions { max_connections: 2, ..Default::default() })
        .unwrap()
        .with_log(move |m| sink.lock().unwrap().push(m.to_string()));
    let r = s.listen_tcp("127.0.0.1:0").unwrap();
    let addr = r.tcp_addr().unwrap();
    let a = TcpStream::connect(addr).unwrap();
    let b = TcpStream::connect(addr).unwrap();
    for c in [&a, &b] {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert!(greet(c));
    }
    let c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert!(!greet(&c), "third connection refused");
    drop(a);
    // Once a slot frees up, new clients are served again.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let d = TcpStream::connect(addr).unwrap();
        d.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        if greet(&d) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "slot never freed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(r.stats().connections_refused >= 1);
    // Regression: refusals reached only the counters, so an operator whose client could not connect found
    // nothing in the log. One line per 10 s at most, however many refusals.
    let refusals: Vec<String> =
        logged.lock().unwrap().iter().filter(|m| m.contains("refused")).cloned().collect();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert!(refusals[0].contains("2 open"), "{refusals:?}");
    drop(b);
}

#[test]
fn concurrent_clients_see_each_others_flushed_writes() {
    let (s, _) = mem_server(ServerOptions::default());
    let writers: Vec<_> = (0..4u64)
        .map(|i| {
            let s = s.clone();
            std::thread::spawn(move || {
                let mut c = connect(&s);
                let flags = c.go("disk", i % 2 == 1);
                assert_ne!(flags & tx_flags::CAN_MULTI_CONN, 0);
                for j in 0..32u64 {
                    let off = (i * 32 + j) * 8192;
                    c.write(j, off, &pattern(i * 1000 + j, 8192), cmd_flags::FUA);
                    assert_eq!(c.reply(None).0, 0);
                }
                c.request(cmd::FLUSH, 0, 999, 0, 0);
                assert_eq!(c.reply(None).0, 0);
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let mut c = connect(&s);
    c.go("disk", true);
    for i in 0..4u64 {
        for j in 0..32u64 {
            c.request(cmd::READ, 0, j, (i * 32 + j) * 8192, 8192);
            assert_eq!(c.reply(None).2, pattern(i * 1000 + j, 8192));
        }
    }
}

/// A device whose writes take a while, to have a request in flight at shutdown.
struct Slow(MemDevice);

impl nbd::BlockDevice for Slow {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn features(&self) -> nbd::Features {
        self.0.features()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> nbd::Result<()> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64, fua: bool) -> nbd::Result<()> {
        std::thread::sleep(Duration::from_millis(300));
        self.0.write_at(data, offset, fua)
    }
    fn flush(&self) -> nbd::Result<()> {
        Ok(())
    }
}

#[test]
fn shutdown_answers_requests_in_flight_before_disconnecting() {
    use std::io::Write;
    let mut ex = Exports::new();
    ex.add(Export::new("", Arc::new(Slow(MemDevice::new(1 << 20)))).unwrap()).unwrap();
    let r = Server::new(ex, ServerOptions::default()).unwrap().listen_tcp("127.0.0.1:0").unwrap();
    let mut c = TcpStream::connect(r.tcp_addr().unwrap()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    assert!(greet(&mut c));
    c.write_all(&client_flags::FIXED_NEWSTYLE.to_be_bytes()).unwrap();
    let mut o = Vec::new();
    o.extend_from_slice(&IHAVEOPT.to_be_bytes());
    o.extend_from_slice(&opt::GO.to_be_bytes());
    let d = info_data("", &[]);
    o.extend_from_slice(&(d.len() as u32).to_be_bytes());
    o.extend_from_slice(&d);
    c.write_all(&o).unwrap();
    // Skip the option replies: INFO (export), INFO (block size), ACK.
    for _ in 0..3 {
        let mut h = [0u8; 20];
        c.read_exact(&mut h).unwrap();
        let mut body = vec![0u8; be32(&h, 16) as usize];
        c.read_exact(&mut body).unwrap();
    }
    c.write_all(&Request { flags: 0, kind: cmd::WRITE, cookie: 77, offset: 0, len: 4 }.encode()).unwrap();
    c.write_all(b"data").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let t = std::thread::spawn(move || r.shutdown());
    let mut rep = [0u8; 16];
    c.read_exact(&mut rep).unwrap();
    assert_eq!((be32(&rep, 4), be64(&rep, 8)), (0, 77), "the in-flight write was answered");
    let mut b = [0u8; 1];
    assert!(matches!(c.read(&mut b), Ok(0) | Err(_)));
    // The final counters include the write answered during the shutdown, and no session is left.
    let st = t.join().unwrap();
    assert_eq!((st.writes, st.bytes_written, st.connections_active), (1, 4, 0), "{st:?}");
}
