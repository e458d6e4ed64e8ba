//! Feeds arbitrary client bytes to a whole NBD session (handshake and transmission) and checks that the server
//! neither panics nor hangs: it must end the session once the input runs out.
//!
//! The first input byte chooses a prefix: 0 = raw bytes from the first client byte on; 1 = a valid fixed newstyle
//! handshake with simple replies first; 2 = the same with structured replies; so the fuzzer reaches the
//! transmission phase without having to discover the handshake.
//!
//! LeakSanitizer may now and then report the `Thread` handle of a worker the session spawned in a scope: std
//! counts a scoped thread as done once its result is delivered, before the thread's own teardown frees that
//! handle, so the check can run in between. Such a report does not reproduce when its input is run again; a
//! real leak does.
#![no_main]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use nbd::protocol::*;
use nbd::{Export, Exports, MemDevice, Server, ServerOptions, Stream};

fn option(out: &mut Vec<u8>, o: u32, data: &[u8]) {
    out.extend_from_slice(&IHAVEOPT.to_be_bytes());
    out.extend_from_slice(&o.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let mut input = Vec::new();
    if mode % 3 != 0 {
        input.extend_from_slice(&(client_flags::FIXED_NEWSTYLE | client_flags::NO_ZEROES).to_be_bytes());
        if mode % 3 == 2 {
            option(&mut input, opt::STRUCTURED_REPLY, &[]);
        }
        option(&mut input, opt::GO, &[0, 0, 0, 0, 0, 0]);
    }
    input.extend_from_slice(rest);

    let mut ex = Exports::new();
    ex.add(Export::new("", Arc::new(MemDevice::new(1 << 20))).unwrap()).unwrap();
    let opts = ServerOptions { max_payload: 1 << 16, inflight_bytes: 1 << 20, ..Default::default() };
    let server = Server::new(ex, opts).unwrap();
    let (mut client, srv) = UnixStream::pair().unwrap();
    let t = std::thread::spawn(move || server.serve_stream(Stream::Unix(srv)));
    let mut reader = client.try_clone().unwrap();
    let drain = std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = reader.read_to_end(&mut sink);
    });
    let _ = client.write_all(&input);
    let _ = client.shutdown(std::net::Shutdown::Write);
    t.join().unwrap().unwrap();
    drop(client);
    drain.join().unwrap();
});
