//! `Server`: accepts connections on TCP or a Unix socket and runs one NBD session per connection.
//!
//! Each accepted connection gets its own thread (plus its workers, see `transmission`), so a slow, broken or
//! hostile client only ever holds its own threads. The accept loop refuses connections beyond
//! `max_connections`. [`Running::shutdown`] stops accepting, shuts down every open socket (which unblocks their
//! threads), and joins everything; dropping a [`Running`] does the same.

use std::collections::HashMap;
use std::io::BufReader;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::export::Exports;
use crate::handshake::{self, Outcome};
use crate::options::{LogFn, ServerOptions};
use crate::stats::{Stats, StatsSnapshot};
use crate::stream::Stream;
use crate::transmission::{self, End};

/// How long a shutdown waits for sessions to finish their in-flight requests before cutting them off.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Refused connections are logged at most once per this interval, with the count since the last line: a client
/// retrying in a loop must not flood the log.
const REFUSAL_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// An NBD server: a set of exports and options. Serve it with [`Server::listen_tcp`], [`Server::listen_unix`] or,
/// for one already-connected socket, [`Server::serve_stream`].
#[derive(Clone)]
pub struct Server {
    exports: Arc<Exports>,
    opts: ServerOptions,
    stats: Arc<Stats>,
    log: Option<Arc<LogFn>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("exports", &self.exports).field("opts", &self.opts).finish()
    }
}

impl Server {
    /// A server of `exports` (at least one). Every export's preferred block size must fit the maximum payload.
    pub fn new(exports: Exports, opts: ServerOptions) -> Result<Self> {
        opts.validate()?;
        if exports.is_empty() {
            return Err(Error::InvalidArgument("a server needs at least one export".into()));
        }
        for e in exports.iter() {
            if e.device().block_sizes().preferred > opts.max_payload {
                return Err(Error::InvalidArgument(format!(
                    "export {:?}: preferred block size above max_payload",
                    e.name()
                )));
            }
        }
        Ok(Server { exports: Arc::new(exports), opts, stats: Arc::new(Stats::default()), log: None })
    }

    /// The same server, reporting to `log` why sessions end abnormally (protocol violations, socket errors),
    /// the first request the device fails on each connection, and refused connections (at most one line per
    /// 10 s).
    pub fn with_log(mut self, log: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.log = Some(Arc::new(log));
        self
    }

    fn log(&self, msg: std::fmt::Arguments<'_>) {
        if let Some(l) = &self.log {
            l(&msg.to_string());
        }
    }

    /// The server's counters.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// Runs one whole session (handshake and transmission) on `stream` on the calling thread, returning when it
    /// ends. Client misbehaviour ends the session, never the server; it is counted, not returned.
    pub fn serve_stream(&self, stream: Stream) -> Result<()> {
        /// Keeps `connections_active` right even if the session unwinds.
        struct Active<'a>(&'a Stats);
        impl Drop for Active<'_> {
            fn drop(&mut self) {
                Stats::dec(&self.0.connections_active);
            }
        }
        Stats::inc(&self.stats.connections_accepted);
        Stats::inc(&self.stats.connections_active);
        let _active = Active(&self.stats);
        let r = self.session(&stream);
        let _ = stream.shutdown();
        r
    }

    fn session(&self, stream: &Stream) -> Result<()> {
        let _ = stream.set_nodelay();
        stream.set_read_timeout(Some(self.opts.handshake_timeout))?;
        let mut reader = BufReader::with_capacity(64 * 1024, stream.try_clone()?);
        let mut writer = stream.try_clone()?;
        let outcome = match handshake::run(&mut reader, &mut writer, &self.exports, &self.opts) {
            Ok(o) => o,
            Err(e) => {
                // Timeout, reset or a client gone mid-message: the session is over, nothing to report upward.
                Stats::inc(&self.stats.handshakes_failed);
                self.log(format_args!("handshake failed: {e}"));
                return Ok(());
            }
        };
        let neg = match outcome {
            Outcome::Transmission(neg) => neg,
            Outcome::Closed => {
                Stats::inc(&self.stats.handshakes_failed);
                return Ok(());
            }
            Outcome::Violation(why) => {
                self.log(format_args!("handshake: client broke the protocol: {why}"));
                Stats::inc(&self.stats.handshakes_failed);
                Stats::inc(&self.stats.protocol_violations);
                return Ok(());
            }
        };
        Stats::inc(&self.stats.handshakes_completed);
        stream.set_read_timeout(None)?;
        match transmission::run(&mut reader, writer, neg, &self.opts, &self.stats, self.log.clone()) {
            End::Violation(why) => {
                self.log(format_args!("transmission: client broke the protocol: {why}; disconnected"));
                Stats::inc(&self.stats.protocol_violations);
            }
            End::Io(e) => self.log(format_args!("transmission: socket error: {e}")),
            End::Disconnect | End::ClientGone => {}
        }
        Ok(())
    }

    /// Listens on a TCP address (for example `127.0.0.1:10809`, or port 0 for an ephemeral port) and serves in
    /// background threads.
    pub fn listen_tcp(self, addr: impl ToSocketAddrs) -> Result<Running> {
        let listener = TcpListener::bind(addr)?;
        let local = listener.local_addr()?;
        self.spawn(Listener::Tcp(listener), Bound::Tcp(local))
    }

    /// Listens on a Unix-domain socket at `path` (which must not exist) and serves in background threads. The
    /// socket file is removed at shutdown.
    pub fn listen_unix(self, path: &Path) -> Result<Running> {
        let listener = UnixListener::bind(path)?;
        self.spawn(Listener::Unix(listener), Bound::Unix(path.to_path_buf()))
    }

    fn spawn(self, listener: Listener, bound: Bound) -> Result<Running> {
        let inner = Arc::new(Inner {
            server: self,
            stopping: AtomicBool::new(false),
            conns: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
        });
        let i2 = inner.clone();
        let accept = std::thread::Builder::new()
            .name("nbd-accept".into())
            .spawn(move || accept_loop(&i2, listener))?;
        Ok(Running { inner, accept: Some(accept), bound })
    }
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

#[derive(Debug, Clone)]
enum Bound {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

struct Conn {
    stream: Stream,
    thread: Option<JoinHandle<()>>,
}

struct Inner {
    server: Server,
    stopping: AtomicBool,
    conns: Mutex<HashMap<u64, Conn>>,
    next_id: AtomicU64,
}

fn accept_loop(inner: &Arc<Inner>, listener: Listener) {
    let (mut unlogged_refusals, mut last_refusal_log) = (0u64, None::<std::time::Instant>);
    loop {
        let accepted = match &listener {
            Listener::Tcp(l) => l.accept().map(|(s, _)| Stream::Tcp(s)),
            Listener::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
        };
        if inner.stopping.load(Ordering::SeqCst) {
            return;
        }
        let stream = match accepted {
            Ok(s) => s,
            Err(_) => {
                // EMFILE, ECONNABORTED...: transient; back off briefly rather than spin or die.
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
        };
        let mut conns = inner.conns.lock().unwrap_or_else(|p| p.into_inner());
        conns.retain(|_, c| !c.thread.as_ref().is_some_and(|t| t.is_finished()));
        if conns.len() >= inner.server.opts.max_connections {
            Stats::inc(&inner.server.stats.connections_refused);
            let _ = stream.shutdown();
            unlogged_refusals += 1;
            if last_refusal_log.is_none_or(|t| t.elapsed() >= REFUSAL_LOG_EVERY) {
                inner.server.log(format_args!(
                    "refused {unlogged_refusals} connection(s): {} open, as many as max_connections allows",
                    conns.len()
                ));
                (unlogged_refusals, last_refusal_log) = (0, Some(std::time::Instant::now()));
            }
            continue;
        }
        let Ok(handle) = stream.try_clone() else { continue };
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let i2 = inner.clone();
        let spawned = std::thread::Builder::new().name(format!("nbd-conn-{id}")).spawn(move || {
            let _ = i2.server.serve_stream(stream);
            i2.conns.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        });
        match spawned {
            Ok(t) => {
                conns.insert(id, Conn { stream: handle, thread: Some(t) });
            }
            Err(_) => {
                let _ = handle.shutdown();
            }
        }
    }
}

/// A listening server. Dropping it shuts it down.
pub struct Running {
    inner: Arc<Inner>,
    accept: Option<JoinHandle<()>>,
    bound: Bound,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running").field("bound", &self.bound).finish()
    }
}

impl Running {
    /// The TCP address listened on (with the real port if port 0 was asked for).
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        match &self.bound {
            Bound::Tcp(a) => Some(*a),
            Bound::Unix(_) => None,
        }
    }

    /// The Unix socket path listened on.
    pub fn unix_path(&self) -> Option<&Path> {
        match &self.bound {
            Bound::Unix(p) => Some(p),
            Bound::Tcp(_) => None,
        }
    }

    /// An `nbd://` or `nbd+unix://` URI of `export` on this server, as libnbd, qemu and fio accept it.
    pub fn uri(&self, export: &str) -> String {
        match &self.bound {
            Bound::Tcp(a) => format!("nbd://{a}/{export}"),
            Bound::Unix(p) => format!("nbd+unix:///{export}?socket={}", p.display()),
        }
    }

    /// The server's counters.
    pub fn stats(&self) -> StatsSnapshot {
        self.inner.server.stats()
    }

    /// Blocks until the server is shut down from another thread (it never stops on its own).
    pub fn wait(mut self) {
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }

    /// Stops accepting, disconnects every client and joins every thread; the counters once every session ended.
    pub fn shutdown(mut self) -> StatsSnapshot {
        self.stop();
        self.inner.server.stats()
    }

    fn stop(&mut self) {
        let Some(accept) = self.accept.take() else { return };
        self.inner.stopping.store(true, Ordering::SeqCst);
        // Wake the blocking accept() with a connection of our own.
        match &self.bound {
            Bound::Tcp(a) => {
                let mut wake = *a;
                if wake.ip().is_unspecified() {
                    wake.set_ip(if a.is_ipv4() {
                        std::net::Ipv4Addr::LOCALHOST.into()
                    } else {
                        std::net::Ipv6Addr::LOCALHOST.into()
                    });
                }
                let _ = TcpStream::connect(wake);
            }
            Bound::Unix(p) => {
                let _ = UnixStream::connect(p);
            }
        }
        let _ = accept.join();
        // First close only the receiving side: readers see end-of-stream, workers finish the requests in
        // flight and send their replies (proto.md: a server shutting down SHOULD serve in-flight requests).
        // Sessions that do not end within the grace period (a client that stopped reading its replies) are then
        // cut off in both directions.
        let threads: Vec<(Stream, JoinHandle<()>)> = {
            let mut conns = self.inner.conns.lock().unwrap_or_else(|p| p.into_inner());
            conns
                .values_mut()
                .filter_map(|c| {
                    let _ = c.stream.shutdown_read();
                    let s = c.stream.try_clone().ok()?;
                    c.thread.take().map(|t| (s, t))
                })
                .collect()
        };
        let deadline = std::time::Instant::now() + SHUTDOWN_GRACE;
        for (stream, t) in threads {
            while !t.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let _ = stream.shutdown();
            let _ = t.join();
        }
        if let Bound::Unix(p) = &self.bound {
            // The socket file is ours (bind created it); removing it is not storage I/O.
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}
