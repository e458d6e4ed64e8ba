//! Handshake tests in raw bytes: the greeting, every implemented option, and malformed input.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions

mod common;

use common::*;
use nbd::ServerOptions;
use nbd::protocol::*;

fn server() -> nbd::Server {
    mem_server(ServerOptions::default()).0
}

#[test]
fn unknown_client_flags_drop_the_connection() {
    let s = server();
    let mut c = connect(&s);
    c.client_flags(1 << 5);
    assert!(c.closed());
    drop(c);
    assert_eq!(s.stats().protocol_violations, 1);
    assert_eq!(s.stats().handshakes_failed, 1);
}

#[test]
fn bad_option_magic_drops_the_connection() {
    let s = server();
    let mut c = connect(&s);
    c.client_flags(client_flags::FIXED_NEWSTYLE);
    c.send(&0x1234_5678_9abc_def0u64.to_be_bytes());
    c.send(&[0u8; 8]);
    assert!(c.closed());
}

#[test]
fn unknown_and_unsupported_options_get_err_unsup_and_parsing_continues() {
    let s = server();
    let mut c = connect(&s);
    c.client_flags(client_flags::FIXED_NEWSTYLE);
    for (option, data) in [
        (0xdead_u32, &b"some data the server must skip"[..]),
        (opt::STARTTLS, &b""[..]),
        (opt::EXTENDED_HEADERS, &b""[..]),
        (4, &b""[..]), // the withdrawn PEEK_EXPORT
    ] {
        c.option(option, data);
        let r = c.opt_reply();
        assert_eq!((r.option, r.kind), (option, rep::ERR_UNSUP));
    }
    c.option(opt::LIST, &[]);
    let rs = c.opt_replies();
    assert_eq!(rs.len(), 3);
    assert_eq!(rs[0].kind, rep::SERVER);
    assert_eq!(be32(&rs[0].data, 0), 4);
    assert_eq!(&rs[0].data[4..8], b"disk");
    assert_eq!(&rs[0].data[8..], b"test disk", "the description follows the name");
    assert_eq!(&rs[1].data[4..], b"ro");
    assert_eq!(rs[2].kind, rep::ACK);
}

#[test]
fn list_with_data_and_repeated_structured_reply_are_invalid() {
    let s = server();
    let mut c = connect(&s);
    c.client_flags(client_flags::FIXED_NEWSTYLE);
    c.option(opt::LIST, b"x");
    assert_eq!(c.opt_reply().kind, rep::ERR_INVALID);
    c.option(opt::STRUCTURED_REPLY, b"x");
    assert_eq!(c.opt_reply().kind, rep::ERR_INVALID);
    c.option(opt::STRUCTURED_REPLY, &[]);
    assert_eq!(c.opt_reply().kind, rep::ACK);
    c.option(opt::STRUCTURED_REPLY, &[]);
    assert_eq!(c.opt_reply().kind, rep::ERR_INVALID);
}

#[test]
fn info_reports_export_block_size_name_and_description_then_go_enters_transmission() {
    let s = server();
    let mut c = connect(&s);
    c.client_flags(client_flags::FIXED_NEWSTYLE);
    c.option(opt::INFO, &info_data("disk", &[info::NAME, info::DESCRIPTION, info::BLOCK_SIZE, 77]));
    let rs = c.opt_replies();
    assert_eq!(rs.last().unwrap().kind, rep::ACK);
    let item =
        |t: u16| rs.iter().find(|r| r.kind == rep::INFO && be16(&r.data, 0) == t).map(|r| r.data.clone());
    let e = item(info::EXPORT).unwrap();
    assert_eq!(e.len(), 12);
    assert_eq!(be64(&e, 2), SIZE);
    let flags = be16(&e, 10);
    for f in [
        tx_flags::HAS_FLAGS,
        tx_flags::SEND_FLUSH,
        tx_flags::SEND_FUA,
        tx_flags::SEND_TRIM,
        tx_flags::SEND_WRITE_ZEROES,
        tx_flags::SEND_FAST_ZERO,
        tx_flags::SEND_CACHE,
        tx_flags::CAN_MULTI_CONN,
    ] {
        assert_ne!(flags & f, 0, "flag {f:#x} advertised");
    }
    assert_eq!(flags & (tx_flags::READ_ONLY | tx_flags::SEND_DF), 0, "no DF without structured replies");
    assert_eq!(&item(info::NAME).unwrap()[2..], b"disk");
    assert_eq!(&item(info::DESCRIPTION).unwrap()[2..], b"test disk");
    let b = item(info::BLOCK_SIZE).unwrap();
    assert_eq!((be32(&b, 2), be32(&b, 6), be32(&b, 10)), (1, 4096, 32 << 20));

    // The empty name selects the default export; GO then enters transmission with no padding.
    c.option(opt::GO, &info_data("", &[]));
    let rs = c.opt_replies();
    assert_eq!(rs.last().unwrap().kind, rep::ACK);
    c.request(cmd::FLUSH, 0, 9, 0, 0);
    assert_eq!(c.simple(), (0, 9));
}

#[test]
fn info_on_unknown_export_and_malformed_info_get_errors_and_negotiation_continues() {
    let s = server();
    let mut c = connect(&s);
    c.client_flags(client_flags::FIXED_NEWSTYLE);
    c.option(opt::GO, &info_data("nope", &[]));
    let rs = c.opt_replies();
    assert_eq!(rs.len(), 1, "no INFO replies before ERR_UNKNOWN");
    assert_eq!(rs[0].kind, rep::ERR_UNKNOWN);
    // Name length beyond the data.
    let mut bad = info_data("disk", &[]);
    bad[3] = 200;
    c.option(opt::INFO, &bad);
    assert_eq!(c.opt_reply().kind, rep::ERR_INVALID);
    // Request count that does not match the data.
    let mut bad = info_data("disk", &[info::NAME]);
    bad.pop();
    c.option(opt::INFO, &bad);
    assert_eq!(c.opt_reply().kind, rep::ERR_INVALID);
    // Too short to hold the fixed fields.
    c.option(opt::GO, &[0, 0]);
    assert_eq!(c.opt_reply().kind, rep::ERR_INVALID);
    // A NUL in the name.
    c.option(opt::GO, &info_data("di\0k", &[]));
    assert_eq!(c.opt_reply().kind, rep::ERR_INVALID);
    assert_eq!(c.negotiate("disk", true) & tx_flags::SEND_DF, tx_flags::SEND_DF);
}

#[test]
fn export_name_enters_transmission_with_or_without_zero_padding() {
    let s = server();
    for no_zeroes in [false, true] {
        let mut c = connect(&s);
        c.client_flags(client_flags::FIXED_NEWSTYLE | if no_zeroes { client_flags::NO_ZEROES } else { 0 });
        c.option(opt::EXPORT_NAME, b"ro");
        let r = c.read_n(10);
        assert_eq!(be64(&r, 0), 1 << 20);
        let flags = be16(&r, 8);
        assert_ne!(flags & tx_flags::READ_ONLY, 0);
        assert_eq!(
            flags & (tx_flags::SEND_TRIM | tx_flags::SEND_WRITE_ZEROES),
            0,
            "nothing writable advertised"
        );
        if !no_zeroes {
            assert_eq!(c.read_n(124), vec![0u8; 124]);
        }
        c.request(cmd::READ, 0, 5, 0, 4);
        assert_eq!(c.simple(), (0, 5));
        assert_eq!(c.read_n(4), vec![0; 4]);
    }
}

#[test]
fn export_name_of_an_unknown_export_ends_the_session() {
    let s = server();
    let mut c = connect(&s);
    c.client_flags(client_flags::FIXED_NEWSTYLE);
    c.option(opt::EXPORT_NAME, b"missing");
    assert!(c.closed());
}

#[test]
fn abort_is_acknowledged_then_closed() {
    let s = server();
    let mut c = connect(&s);
    c.client_flags(client_flags::FIXED_NEWSTYLE);
    c.option(opt::ABORT, &[]);
    let r = c.opt_reply();
    assert_eq!((r.option, r.kind), (opt::ABORT, rep::ACK));
    assert!(c.closed());
}

#[test]
fn oversized_option_data_and_option_floods_end_the_session() {
    let s = server();
    let mut c = connect(&s);
    c.client_flags(client_flags::FIXED_NEWSTYLE);
    let mut h = Vec::new();
    h.extend_from_slice(&IHAVEOPT.to_be_bytes());
    h.extend_from_slice(&opt::LIST.to_be_bytes());
    h.extend_from_slice(&(nbd::MAX_OPTION_DATA + 1).to_be_bytes());
    c.send(&h);
    assert!(c.closed());

    let (s, _) = mem_server(ServerOptions { max_options: 3, ..Default::default() });
    let mut c = connect(&s);
    c.client_flags(client_flags::FIXED_NEWSTYLE);
    for _ in 0..3 {
        c.option(999, &[]);
        assert_eq!(c.opt_reply().kind, rep::ERR_UNSUP);
    }
    let mut h = Vec::new();
    h.extend_from_slice(&IHAVEOPT.to_be_bytes());
    h.extend_from_slice(&999u32.to_be_bytes());
    h.extend_from_slice(&0u32.to_be_bytes());
    c.try_send(&h);
    assert!(c.closed());
}

#[test]
fn disconnects_mid_handshake_are_clean() {
    let s = server();
    // Gone after the greeting, inside the client flags, inside an option header, inside option data.
    for partial in [&[][..], &[0u8, 0][..], &[0u8, 0, 0, 1, 0x49, 0x48][..]] {
        let mut c = connect(&s);
        c.send(partial);
        drop(c);
    }
    let mut c = connect(&s);
    c.client_flags(client_flags::FIXED_NEWSTYLE);
    let mut h = Vec::new();
    h.extend_from_slice(&IHAVEOPT.to_be_bytes());
    h.extend_from_slice(&opt::GO.to_be_bytes());
    h.extend_from_slice(&100u32.to_be_bytes());
    h.extend_from_slice(&[1, 2, 3]);
    c.send(&h);
    drop(c);
    assert_eq!(s.stats().handshakes_failed, 4);
    assert_eq!(s.stats().connections_active, 0);
}

#[test]
fn a_silent_client_is_dropped_after_the_handshake_timeout() {
    let (s, _) = mem_server(ServerOptions {
        handshake_timeout: std::time::Duration::from_millis(200),
        ..Default::default()
    });
    let mut c = connect(&s);
    let t = std::time::Instant::now();
    assert!(c.closed());
    assert!(t.elapsed() < std::time::Duration::from_secs(10));
}

fn meta_data(name: &str, queries: &[&str]) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend_from_slice(&(name.len() as u32).to_be_bytes());
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&(queries.len() as u32).to_be_bytes());
    for q in queries {
        d.extend_from_slice(&(q.len() as u32).to_be_bytes());
        d.extend_from_slice(q.as_bytes());
    }
    d
}

#[test]
fn meta_contexts_list_and_select_base_allocation() {
    let s = server();
    let mut c = connect(&s);
    c.client_flags(client_flags::FIXED_NEWSTYLE);
    // Before structured replies: invalid.
    c.option(opt::SET_META_CONTEXT, &meta_data("disk", &["base:allocation"]));
    assert_eq!(c.opt_reply().kind, rep::ERR_INVALID);
    c.option(opt::STRUCTURED_REPLY, &[]);
    assert_eq!(c.opt_reply().kind, rep::ACK);
    // LIST with no query, with the namespace wildcard, and with a foreign namespace.
    for (queries, expect) in [(&[][..], true), (&["base:"][..], true), (&["qemu:dirty-bitmap:x"][..], false)]
    {
        c.option(opt::LIST_META_CONTEXT, &meta_data("disk", queries));
        let rs = c.opt_replies();
        assert_eq!(rs.last().unwrap().kind, rep::ACK);
        assert_eq!(rs.len() == 2, expect, "{queries:?}");
        if expect {
            assert_eq!(rs[0].kind, rep::META_CONTEXT);
            assert_eq!(&rs[0].data[4..], b"base:allocation");
        }
    }
    // Malformed: a query length beyond the data; unknown export.
    let mut bad = meta_data("disk", &["base:allocation"]);
    bad.pop();
    c.option(opt::SET_META_CONTEXT, &bad);
    assert_eq!(c.opt_reply().kind, rep::ERR_INVALID);
    c.option(opt::SET_META_CONTEXT, &meta_data("nope", &["base:allocation"]));
    assert_eq!(c.opt_reply().kind, rep::ERR_UNKNOWN);
    c.option(opt::SET_META_CONTEXT, &meta_data("disk", &["base:allocation", "x-other:thing"]));
    let rs = c.opt_replies();
    assert_eq!(rs.len(), 2);
    assert_eq!(be32(&rs[0].data, 0), base_allocation::ID);
    c.option(opt::GO, &info_data("disk", &[]));
    assert_eq!(c.opt_replies().last().unwrap().kind, rep::ACK);
    // Unwritten space is a hole that reads as zeros; written space is data.
    c.write(1, 65536, &[1u8; 4096], 0);
    assert_eq!(c.simple(), (0, 1));
    c.request(cmd::BLOCK_STATUS, 0, 2, 0, 3 * 65536);
    let (f, t, cookie, p) = c.chunk();
    assert_eq!((f, t, cookie), (reply::FLAG_DONE, reply::TYPE_BLOCK_STATUS, 2));
    assert_eq!(be32(&p, 0), base_allocation::ID);
    let ds: Vec<(u32, u32)> = p[4..].chunks(8).map(|d| (be32(d, 0), be32(d, 4))).collect();
    let hz = base_allocation::HOLE | base_allocation::ZERO;
    assert_eq!(ds, vec![(65536, hz), (65536, 0), (65536, hz)]);
    c.request(cmd::BLOCK_STATUS, cmd_flags::REQ_ONE, 3, 0, 3 * 65536);
    let (_, _, _, p) = c.chunk();
    assert_eq!(p.len(), 12, "one descriptor with REQ_ONE");
}

#[test]
fn block_status_needs_the_context_selected_for_the_export_used() {
    let s = server();
    let mut c = connect(&s);
    c.client_flags(client_flags::FIXED_NEWSTYLE);
    c.option(opt::STRUCTURED_REPLY, &[]);
    assert_eq!(c.opt_reply().kind, rep::ACK);
    c.option(opt::SET_META_CONTEXT, &meta_data("ro", &["base:allocation"]));
    assert_eq!(c.opt_replies().len(), 2);
    c.option(opt::GO, &info_data("disk", &[]));
    assert_eq!(c.opt_replies().last().unwrap().kind, rep::ACK);
    c.request(cmd::BLOCK_STATUS, 0, 1, 0, 4096);
    let (_, t, _, p) = c.chunk();
    assert_eq!((t, be32(&p, 0)), (reply::TYPE_ERROR, errno::EINVAL));
}
