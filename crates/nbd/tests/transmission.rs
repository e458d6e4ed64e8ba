//! Transmission-phase tests in raw bytes against the in-memory device: every command, simple and structured
//! replies, every error reply, framing violations, pipelining, and isolation between clients.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions

mod common;

use std::sync::Arc;

use common::*;
use nbd::protocol::*;
use nbd::{BlockDevice, BlockSizes, Export, Exports, MemDevice, Server, ServerOptions};

fn server() -> (Server, Arc<MemDevice>) {
    mem_server(ServerOptions::default())
}

#[test]
fn simple_replies_write_read_flush_trim_zero_cache() {
    let (s, dev) = server();
    let mut c = connect(&s);
    c.go("disk", false);
    let data = pattern(1, 100_000);
    c.write(1, 4096, &data, 0);
    assert_eq!(c.simple(), (0, 1));
    c.write(2, 200_000, &data[..512], cmd_flags::FUA);
    assert_eq!(c.simple(), (0, 2));
    c.request(cmd::READ, 0, 3, 4096, 100_000);
    assert_eq!(c.simple(), (0, 3));
    assert_eq!(c.read_n(100_000), data);
    c.request(cmd::FLUSH, 0, 4, 0, 0);
    assert_eq!(c.simple(), (0, 4));
    c.request(cmd::WRITE_ZEROES, cmd_flags::NO_HOLE, 5, 4096, 1000);
    assert_eq!(c.simple(), (0, 5));
    c.request(cmd::TRIM, cmd_flags::FUA, 6, 8192, 4096);
    assert_eq!(c.simple(), (0, 6));
    c.request(cmd::CACHE, 0, 7, 0, 65536);
    assert_eq!(c.simple(), (0, 7));
    let mut back = vec![0u8; 100_000];
    dev.read_at(&mut back, 4096).unwrap();
    assert!(back[..1000].iter().all(|&b| b == 0), "write-zeroes zeroed");
    assert!(back[4096..8192].iter().all(|&b| b == 0), "the memory device zeroes trimmed ranges");
    assert_eq!(&back[1000..4096], &data[1000..4096]);
    assert_eq!(&back[8192..], &data[8192..]);
    c.request(cmd::DISC, 0, 8, 0, 0);
    assert!(c.closed());
    drop(c);
    let st = s.stats();
    assert_eq!((st.writes, st.reads, st.flushes, st.write_zeroes, st.trims, st.caches), (2, 1, 1, 1, 1, 1));
    assert_eq!(st.bytes_written, 100_512);
    assert_eq!(st.error_replies, 0);
}

#[test]
fn structured_reads_use_data_hole_and_none_chunks() {
    let (s, _) = server();
    let mut c = connect(&s);
    let flags = c.go("disk", true);
    assert_ne!(flags & tx_flags::SEND_DF, 0);
    let data = pattern(2, 8192);
    c.write(1, 0, &data, 0);
    assert_eq!(c.simple(), (0, 1));
    c.request(cmd::READ, 0, 2, 0, 8192);
    let (f, t, cookie, p) = c.chunk();
    assert_eq!((f, t, cookie), (reply::FLAG_DONE, reply::TYPE_OFFSET_DATA, 2));
    assert_eq!(be64(&p, 0), 0);
    assert_eq!(&p[8..], &data[..]);
    // Unwritten space comes back as one hole chunk.
    c.request(cmd::READ, cmd_flags::DF, 3, 1 << 20, 65536);
    let (f, t, cookie, p) = c.chunk();
    assert_eq!((f, t, cookie), (reply::FLAG_DONE, reply::TYPE_OFFSET_HOLE, 3));
    assert_eq!((be64(&p, 0), be32(&p, 8)), (1 << 20, 65536));
    // A zero-length read is a successful no-op.
    c.request(cmd::READ, 0, 4, 0, 0);
    let (f, t, cookie, p) = c.chunk();
    assert_eq!((f, t, cookie, p.len()), (reply::FLAG_DONE, reply::TYPE_NONE, 4, 0));
    // Errors on reads come as an error chunk with a message.
    c.request(cmd::READ, 0, 5, SIZE - 512, 1024);
    let (f, t, cookie, p) = c.chunk();
    assert_eq!((f, t, cookie), (reply::FLAG_DONE, reply::TYPE_ERROR, 5));
    assert_eq!(be32(&p, 0), errno::EINVAL);
    let mlen = be16(&p, 4) as usize;
    assert_eq!(p.len(), 6 + mlen);
    assert!(std::str::from_utf8(&p[6..]).unwrap().contains("beyond the end"));
}

#[test]
fn invalid_requests_get_error_replies_and_the_session_continues() {
    let (s, dev) = mem_server(ServerOptions { max_payload: 1 << 20, ..Default::default() });
    let mut c = connect(&s);
    c.go("disk", false);
    // Out-of-bounds write: ENOSPC, and its payload is consumed so the next request parses.
    c.write(1, SIZE - 100, &[7u8; 200], 0);
    assert_eq!(c.simple(), (errno::ENOSPC, 1));
    // Write whose end overflows u64.
    c.write(2, u64::MAX - 10, &[7u8; 100], 0);
    assert_eq!(c.simple(), (errno::ENOSPC, 2));
    c.request(cmd::WRITE_ZEROES, 0, 3, SIZE, 1);
    assert_eq!(c.simple(), (errno::ENOSPC, 3));
    c.request(cmd::READ, 0, 4, SIZE, 1);
    assert_eq!(c.simple(), (errno::EINVAL, 4));
    c.request(cmd::TRIM, 0, 5, SIZE - 1, 2);
    assert_eq!(c.simple(), (errno::EINVAL, 5));
    c.request(cmd::CACHE, 0, 6, SIZE + 1, 0);
    assert_eq!(c.simple(), (errno::EINVAL, 6));
    // Unknown command, block status without a context, unknown flags, a flag of another command.
    c.request(42, 0, 7, 0, 0);
    assert_eq!(c.simple(), (errno::EINVAL, 7));
    c.request(cmd::BLOCK_STATUS, 0, 8, 0, 512);
    assert_eq!(c.simple(), (errno::EINVAL, 8));
    c.request(cmd::READ, 1 << 12, 9, 0, 512);
    assert_eq!(c.simple(), (errno::EINVAL, 9));
    c.request(cmd::READ, cmd_flags::DF, 10, 0, 512);
    assert_eq!(c.simple(), (errno::EINVAL, 10), "DF needs structured replies");
    c.write(11, 0, &[1u8; 512], cmd_flags::NO_HOLE);
    assert_eq!(c.simple(), (errno::EINVAL, 11));
    c.request(cmd::FLUSH, 0, 12, 4096, 0);
    assert_eq!(c.simple(), (errno::EINVAL, 12));
    // Payloads above the maximum: a read is refused; a write is refused after its payload is drained.
    c.request(cmd::READ, 0, 13, 0, (1 << 20) + 1);
    assert_eq!(c.simple(), (errno::EINVAL, 13));
    let big = vec![9u8; (1 << 20) + 4096];
    c.write(14, 0, &big, 0);
    assert_eq!(c.simple(), (errno::EINVAL, 14));
    // None of it changed the device, and the session still works.
    assert_eq!(dev.allocated_bytes(), 0);
    c.write(15, 0, b"ok", 0);
    assert_eq!(c.simple(), (0, 15));
    c.request(cmd::READ, 0, 16, 0, 2);
    assert_eq!(c.simple(), (0, 16));
    assert_eq!(c.read_n(2), b"ok");
    drop(c);
    assert_eq!(s.stats().error_replies, 14);
    assert_eq!(s.stats().protocol_violations, 0);
}

#[test]
fn read_only_exports_refuse_writes_with_eperm() {
    let (s, _) = server();
    let mut c = connect(&s);
    let flags = c.go("ro", false);
    assert_ne!(flags & tx_flags::READ_ONLY, 0);
    c.write(1, 0, &[1u8; 512], 0);
    assert_eq!(c.simple(), (errno::EPERM, 1));
    c.request(cmd::TRIM, 0, 2, 0, 512);
    assert_eq!(c.simple(), (errno::EPERM, 2));
    c.request(cmd::WRITE_ZEROES, 0, 3, 0, 512);
    assert_eq!(c.simple(), (errno::EPERM, 3));
    c.request(cmd::READ, 0, 4, 0, 512);
    assert_eq!(c.simple(), (0, 4));
    assert_eq!(c.read_n(512), vec![0u8; 512]);
}

#[test]
fn minimum_block_size_is_advertised_and_enforced() {
    let dev = Arc::new(
        MemDevice::new(1 << 20).with_block_sizes(BlockSizes { minimum: 512, preferred: 4096 }).unwrap(),
    );
    let mut ex = Exports::new();
    ex.add(Export::new("", dev).unwrap()).unwrap();
    let s = Server::new(ex, ServerOptions::default()).unwrap();
    let mut c = connect(&s);
    c.client_flags(client_flags::FIXED_NEWSTYLE);
    c.option(opt::GO, &info_data("", &[info::BLOCK_SIZE]));
    let rs = c.opt_replies();
    let b = rs.iter().find(|r| r.kind == rep::INFO && be16(&r.data, 0) == info::BLOCK_SIZE).unwrap();
    assert_eq!((be32(&b.data, 2), be32(&b.data, 6)), (512, 4096));
    c.write(1, 100, &[1u8; 512], 0);
    assert_eq!(c.simple(), (errno::EINVAL, 1));
    c.request(cmd::READ, 0, 2, 0, 100);
    assert_eq!(c.simple(), (errno::EINVAL, 2));
    c.write(3, 512, &[1u8; 1024], 0);
    assert_eq!(c.simple(), (0, 3));
    // A device size that is not a multiple of its minimum block cannot be exported.
    let odd = Arc::new(
        MemDevice::new(1000).with_block_sizes(BlockSizes { minimum: 512, preferred: 4096 }).unwrap(),
    );
    assert!(Export::new("odd", odd).is_err());
}

#[test]
fn regression_an_export_no_client_can_address_is_refused() {
    // A 16 EiB - 1 TiB volume was advertised as such; nbdinfo showed a negative size and qemu-io failed with
    // "File too large", since clients hold offsets as signed 64-bit integers.
    let at_limit = Arc::new(MemDevice::new(nbd::protocol::MAX_EXPORT_SIZE));
    assert!(Export::new("max", at_limit).is_ok());
    for size in [1u64 << 63, u64::MAX - (1 << 40) + 1] {
        let err = Export::new("big", Arc::new(MemDevice::new(size))).unwrap_err();
        assert!(matches!(err, nbd::Error::InvalidArgument(ref m) if m.contains("2^63 - 1")), "{err}");
    }
}

#[test]
fn fast_zero_is_offered_where_the_device_can_and_unsupported_fast_zero_is_enotsup() {
    // MemDevice zeroes fast; the file device cannot and reports ENOTSUP for FAST_ZERO requests.
    let fs = vfs::MemFs::new();
    let dev = Arc::new(nbd::FileDevice::create(&fs, std::path::Path::new("d"), 1 << 20).unwrap());
    let mut ex = Exports::new();
    ex.add(Export::new("f", dev).unwrap()).unwrap();
    let s = Server::new(ex, ServerOptions::default()).unwrap();
    let mut c = connect(&s);
    let flags = c.go("f", false);
    assert_eq!(flags & tx_flags::SEND_FAST_ZERO, 0, "the file device does not claim fast zeroing");
    c.request(cmd::WRITE_ZEROES, cmd_flags::FAST_ZERO, 1, 0, 4096);
    assert_eq!(c.simple(), (errno::EINVAL, 1), "flag not negotiated");
    c.request(cmd::WRITE_ZEROES, cmd_flags::NO_HOLE, 2, 0, 4096);
    assert_eq!(c.simple(), (0, 2));
}

#[test]
fn bad_request_magic_ends_only_that_session() {
    let (s, _) = server();
    let mut other = connect(&s);
    other.go("disk", false);
    let mut c = connect(&s);
    c.go("disk", false);
    let mut h = Request { flags: 0, kind: cmd::READ, cookie: 1, offset: 0, len: 512 }.encode();
    h[0] = 0;
    c.send(&h);
    assert!(c.closed());
    drop(c);
    other.write(1, 0, b"still here", 0);
    assert_eq!(other.simple(), (0, 1));
    assert_eq!(s.stats().protocol_violations, 1);
}

#[test]
fn disconnects_mid_request_and_mid_payload_are_clean_and_do_not_write() {
    let (s, dev) = server();
    let mut c = connect(&s);
    c.go("disk", false);
    c.send(&Request { flags: 0, kind: cmd::READ, cookie: 1, offset: 0, len: 512 }.encode()[..10]);
    drop(c);
    let mut c = connect(&s);
    c.go("disk", false);
    c.request(cmd::WRITE, 0, 2, 0, 4096);
    c.send(&[5u8; 1000]);
    drop(c);
    assert_eq!(dev.allocated_bytes(), 0, "a partial write payload is never applied");
    assert_eq!(s.stats().protocol_violations, 2);
    assert_eq!(s.stats().connections_active, 0);
}

#[test]
fn oversized_write_beyond_drain_limit_hangs_up() {
    let (s, _) = server();
    let mut c = connect(&s);
    c.go("disk", false);
    c.request(cmd::WRITE, 0, 1, 0, nbd::DRAIN_LIMIT + 1);
    assert!(c.closed());
}

#[test]
fn pipelined_requests_all_complete_with_their_cookies() {
    let (s, _) = mem_server(ServerOptions { workers_per_connection: 4, ..Default::default() });
    let mut c = connect(&s);
    c.go("disk", true);
    let n = 64u64;
    // Writer thread pipelines every request before any reply is read.
    let mut w = c.s.try_clone().unwrap();
    let t = std::thread::spawn(move || {
        use std::io::Write;
        for i in 0..n {
            let d = pattern(i, 65536);
            w.write_all(
                &Request { flags: 0, kind: cmd::WRITE, cookie: i, offset: i * 65536, len: 65536 }.encode(),
            )
            .unwrap();
            w.write_all(&d).unwrap();
        }
    });
    let mut seen = vec![false; n as usize];
    for _ in 0..n {
        let (err, cookie) = c.simple();
        assert_eq!(err, 0);
        assert!(!seen[cookie as usize], "cookie {cookie} replied twice");
        seen[cookie as usize] = true;
    }
    t.join().unwrap();
    for i in 0..n {
        c.request(cmd::READ, 0, 1000 + i, i * 65536, 65536);
    }
    let mut got = 0;
    for _ in 0..n {
        let (err, cookie, data) = c.reply(None);
        assert_eq!(err, 0);
        assert_eq!(data, pattern(cookie - 1000, 65536));
        got += 1;
    }
    assert_eq!(got, n);
}

#[test]
fn disc_completes_outstanding_requests_first() {
    let (s, dev) = server();
    let mut c = connect(&s);
    c.go("disk", false);
    for i in 0..16u64 {
        c.write(i, i * 4096, &pattern(i, 4096), 0);
    }
    c.request(cmd::DISC, 0, 99, 0, 0);
    for _ in 0..16 {
        assert_eq!(c.simple().0, 0);
    }
    assert!(c.closed());
    let mut b = vec![0u8; 4096];
    dev.read_at(&mut b, 15 * 4096).unwrap();
    assert_eq!(b, pattern(15, 4096));
}

/// A device whose every operation fails: the errors must reach the client as the mapped NBD errors.
struct Failing;

impl BlockDevice for Failing {
    fn size(&self) -> u64 {
        1 << 20
    }
    fn features(&self) -> nbd::Features {
        nbd::Features { trim: true, write_zeroes: true, ..Default::default() }
    }
    fn read_at(&self, _: &mut [u8], _: u64) -> nbd::Result<()> {
        Err(nbd::Error::Corruption("checksum mismatch".into()))
    }
    fn write_at(&self, _: &[u8], _: u64, _: bool) -> nbd::Result<()> {
        Err(std::io::Error::from_raw_os_error(libc_enospc()).into())
    }
    fn flush(&self) -> nbd::Result<()> {
        Err(std::io::Error::other("disk gone").into())
    }
}

fn libc_enospc() -> i32 {
    28
}

#[test]
fn device_errors_become_nbd_errors() {
    let mut ex = Exports::new();
    ex.add(Export::new("x", Arc::new(Failing)).unwrap()).unwrap();
    let logged = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = logged.clone();
    let s = Server::new(ex, ServerOptions::default()).unwrap().with_log(move |m| {
        sink.lock().unwrap().push(m.to_string());
    });
    for structured in [false, true] {
        let mut c = connect(&s);
        c.go("x", structured);
        c.request(cmd::READ, 0, 1, 0, 512);
        let (err, cookie, data) = c.reply(Some(512));
        assert_eq!((err, cookie, data.len()), (errno::EIO, 1, 0));
        c.write(2, 0, &[0u8; 512], 0);
        assert_eq!(c.reply(None).0, errno::ENOSPC);
        c.request(cmd::FLUSH, 0, 3, 0, 0);
        assert_eq!(c.reply(None).0, errno::EIO);
        c.request(cmd::WRITE_ZEROES, 0, 4, 0, 512);
        assert_eq!(c.reply(None).0, errno::ENOSPC, "the default write_zeroes writes zeros");
        c.request(cmd::WRITE_ZEROES, 0, 5, 0, 0);
        assert_eq!(c.reply(None), (0, 5, vec![]), "zero-length is a no-op");
        c.request(cmd::DISC, 0, 6, 0, 0);
        assert!(c.closed());
    }
    assert_eq!(s.stats().device_errors, 8);
    // Regression: a device failure (a full disk, a failed volume) reached the client only; the operator's log
    // said nothing until shutdown. Now the first one per connection is logged, and only the first.
    let failures: Vec<String> = logged
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m.contains("the device failed a request"))
        .cloned()
        .collect();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures.iter().all(|m| m.contains("checksum mismatch") && m.contains("NBD_EIO")),
        "{failures:?}"
    );
}

#[test]
fn randomized_against_a_model_over_several_connections() {
    let seed = testkit::seeds(&[0x5eed])[0];
    let scale = testkit::scale();
    let (s, _) = server();
    let mut conns: Vec<Conn> = (0..3)
        .map(|i| {
            let mut c = connect(&s);
            c.go("disk", i % 2 == 0);
            c
        })
        .collect();
    let mut model = vec![0u8; SIZE as usize];
    let mut x = seed | 1;
    let mut rnd = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    for step in 0..400 * scale {
        let c = &mut conns[rnd(3) as usize];
        let len = 1 + rnd(70_000) as u32;
        let off = rnd(SIZE - u64::from(len));
        let cookie = step as u64;
        match rnd(5) {
            0 | 1 => {
                let d = pattern(rnd(1 << 30), len as usize);
                c.write(cookie, off, &d, if rnd(4) == 0 { cmd_flags::FUA } else { 0 });
                assert_eq!(c.reply(None).0, 0, "seed {seed} step {step}");
                model[off as usize..off as usize + len as usize].copy_from_slice(&d);
            }
            2 => {
                c.request(cmd::WRITE_ZEROES, 0, cookie, off, len);
                assert_eq!(c.reply(None).0, 0, "seed {seed} step {step}");
                model[off as usize..off as usize + len as usize].fill(0);
            }
            3 => {
                c.request(cmd::READ, 0, cookie, off, len);
                let (err, ck, data) = c.reply(Some(len as usize));
                assert_eq!((err, ck), (0, cookie), "seed {seed} step {step}");
                assert!(
                    data == model[off as usize..off as usize + len as usize],
                    "seed {seed} step {step}: data"
                );
            }
            _ => {
                // An invalid request in between never disturbs the model.
                c.write(cookie, SIZE - u64::from(len) + 1, &vec![1u8; len as usize], 0);
                assert_eq!(c.reply(None).0, errno::ENOSPC, "seed {seed} step {step}");
            }
        }
    }
}

#[test]
fn random_garbage_after_a_valid_handshake_never_breaks_the_server() {
    let seed = testkit::seeds(&[0xbad5eed])[0];
    let (s, _) = server();
    for round in 0..50u64 {
        let mut c = connect(&s);
        let structured = round % 2 == 0;
        c.go("disk", structured);
        // Mostly-valid headers with random fields, then raw garbage.
        let mut x = (seed ^ round.wrapping_mul(0x9e37_79b9)) | 1;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut bytes = Vec::new();
        for _ in 0..8 {
            let kind = (rnd() % 10) as u16;
            let len = if kind == cmd::WRITE { (rnd() % 5000) as u32 } else { rnd() as u32 };
            let r =
                Request { flags: rnd() as u16 & 0x1f, kind, cookie: rnd(), offset: rnd() % (2 * SIZE), len };
            bytes.extend_from_slice(&r.encode());
            if kind == cmd::WRITE {
                bytes.extend(std::iter::repeat_n(7u8, len as usize));
            }
        }
        bytes.extend((0..rnd() % 200).map(|_| rnd() as u8));
        c.try_send(&bytes);
        let _ = c.s.shutdown(std::net::Shutdown::Write);
        // Drain whatever the server answers until it closes; it must close (seed {seed} round {round}).
        let mut sink = Vec::new();
        use std::io::Read;
        let _ = c.s.read_to_end(&mut sink);
    }
    assert_eq!(s.stats().connections_active, 0, "seed {seed}");
    // The server still serves normally afterwards.
    let mut c = connect(&s);
    c.go("disk", false);
    c.write(1, 0, b"fine", 0);
    assert_eq!(c.simple(), (0, 1));
}

/// A device that panics on writes: a device bug must cut off only the session that hit it.
struct Panicky(MemDevice);

impl BlockDevice for Panicky {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn features(&self) -> nbd::Features {
        self.0.features()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> nbd::Result<()> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, _: &[u8], _: u64, _: bool) -> nbd::Result<()> {
        panic!("device bug (expected by this test)")
    }
    fn flush(&self) -> nbd::Result<()> {
        Ok(())
    }
}

#[test]
fn a_panicking_device_cuts_off_only_the_session_that_hit_it() {
    let mut ex = Exports::new();
    ex.add(Export::new("p", Arc::new(Panicky(MemDevice::new(1 << 20)))).unwrap()).unwrap();
    let s = Server::new(ex, ServerOptions::default()).unwrap();
    let mut bystander = connect(&s);
    bystander.go("p", false);
    let mut c = connect(&s);
    c.go("p", false);
    c.write(1, 0, &[1u8; 512], 0);
    assert!(c.closed());
    drop(c);
    bystander.request(cmd::READ, 0, 2, 0, 512);
    assert_eq!(bystander.simple(), (0, 2));
    assert_eq!(bystander.read_n(512), vec![0u8; 512]);
    drop(bystander);
    assert_eq!(s.stats().connections_active, 0);
}
