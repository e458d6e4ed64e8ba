//! `rangedb nbd serve`: serves a volume over NBD to qemu, nbdcopy, fio or the kernel client.
//!
//! DIR is a block store (`crates/blockstore`); the volume is named after `--export` (`default` without it, served
//! as the default export, the one an empty export name reaches). Writes go to the volume's journal and segment
//! cache; FLUSH and FUA sync the journal; TRIM and WRITE_ZEROES are range deletes in the volume's RASK index.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ::nbd::{BlockDevice, BlockSizes, Export, Exports, Features, Server, ServerOptions};
use blockstore::{Options, Store, Volume};

/// Arguments of `rangedb nbd`.
#[derive(Debug, clap::Args)]
pub struct NbdArgs {
    #[command(subcommand)]
    command: NbdCommand,
}

#[derive(Debug, clap::Subcommand)]
enum NbdCommand {
    /// Serve a volume of the store in DIR until interrupted.
    Serve(ServeArgs),
}

/// Arguments of `rangedb nbd serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Store directory holding the volume.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Create the volume (and DIR) instead of opening an existing one; needs --size.
    #[arg(long, requires = "size")]
    create: bool,
    /// Size of a new volume: bytes, or a number with a K, M, G or T suffix (powers of 1024).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    size: Option<u64>,
    /// TCP address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:10809", conflicts_with = "unix")]
    listen: String,
    /// Listen on a Unix-domain socket at PATH instead of TCP.
    #[arg(long, value_name = "PATH")]
    unix: Option<PathBuf>,
    /// Export (and volume) name; without it the volume is the default export, reached with an empty name.
    #[arg(long, value_name = "NAME")]
    export: Option<String>,
    /// Refuse writes.
    #[arg(long)]
    read_only: bool,
    /// Largest READ/WRITE payload in bytes (K/M suffixes allowed), advertised to clients.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "32M")]
    max_payload: u64,
    /// Simultaneous client connections.
    #[arg(long, default_value_t = 64)]
    max_connections: usize,
}

/// Runs `rangedb nbd`.
pub fn run(args: NbdArgs) -> Result<ExitCode, String> {
    match args.command {
        NbdCommand::Serve(a) => serve(a),
    }
}

/// Serves one volume until SIGINT or SIGTERM, then stops cleanly: the requests in flight are answered, the
/// volume is flushed and checkpointed (the next start replays nothing) and closed (its lock released), and the
/// socket file is removed. A signal during start-up, or a second one during that shutdown, ends the process at
/// once (`signals.rs`).
pub fn serve(a: ServeArgs) -> Result<ExitCode, String> {
    // Before any thread starts (the volume's flusher, the server's acceptor): they inherit the mask.
    let signals = crate::signals::StopSignals::block().map_err(|e| format!("blocking stop signals: {e}"))?;
    let serving = Arc::new(AtomicBool::new(false));
    let stop =
        crate::signals::watch(signals, serving.clone()).map_err(|e| format!("watching stop signals: {e}"))?;
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    let volume = a.export.clone().unwrap_or_else(|| "default".to_string());
    blockstore::validate_volume_name(&volume).map_err(|e| format!("export name {volume:?}: {e}"))?;
    let path = a.dir.join(&volume);
    if !a.create && a.size.is_some() {
        return Err("--size applies only with --create (a volume's size is fixed at creation)".into());
    }
    if !a.create && !a.dir.join(&volume).join("meta").exists() {
        return Err(format!(
            "no volume {volume:?} in {} (use --create --size SIZE to make a new one)",
            a.dir.display()
        ));
    }
    // Everything that can be checked before a volume is created is: a `--create` that then failed on a bad
    // option left the new volume behind, and repeating the command with the option fixed met "exists already".
    let max_payload = u32::try_from(a.max_payload).map_err(|_| "--max-payload is too large".to_string())?;
    let opts = ServerOptions { max_payload, max_connections: a.max_connections, ..ServerOptions::default() };
    opts.validate().map_err(|e| e.to_string())?;
    match &a.unix {
        Some(p) => remove_stale_socket(p)?,
        None => {
            use std::net::ToSocketAddrs;
            a.listen.as_str().to_socket_addrs().map_err(|e| format!("listening on {}: {e}", a.listen))?;
        }
    }
    let store = Store::open(fs, &a.dir, Options::default())
        .map_err(|e| format!("opening store {}: {e}", a.dir.display()))?;
    let vol = if a.create {
        let size = a.size.ok_or("--create needs --size")?;
        store.create_volume(&volume, size).map_err(|e| format!("creating volume {}: {e}", path.display()))?
    } else {
        let vol = store.volume(&volume).map_err(|e| format!("opening volume {}: {e}", path.display()))?;
        eprintln!("rangedb nbd: {}", crate::nbd_log::opened(&volume, &vol.stats()));
        vol
    };
    let device: Arc<dyn BlockDevice> =
        if a.read_only { Arc::new(ReadOnlyVolume(vol.clone())) } else { vol.clone() };
    let size = device.size();
    let export_name = a.export.clone().unwrap_or_default();
    let mut exports = Exports::new();
    let export = Export::new(export_name.clone(), device)
        .and_then(|e| e.with_description(format!("rangedb volume {volume}")))
        .map_err(|e| format!("serving volume {}: {e}", path.display()))?;
    exports.add(export).map_err(|e| e.to_string())?;
    let server =
        Server::new(exports, opts).map_err(|e| e.to_string())?.with_log(|m| eprintln!("rangedb nbd: {m}"));
    let listening = match &a.unix {
        Some(p) => server.listen_unix(p).map_err(|e| format!("listening on {}: {e}", p.display())),
        None => server.listen_tcp(a.listen.as_str()).map_err(|e| format!("listening on {}: {e}", a.listen)),
    };
    let running = listening.map_err(|e| {
        if a.create { format!("{e} (the volume was created: serve it again without --create)") } else { e }
    })?;
    eprintln!(
        "rangedb nbd: serving {} ({size} bytes{}) as {}",
        display(&path),
        if a.read_only { ", read-only" } else { "" },
        running.uri(&export_name)
    );
    let watcher = crate::nbd_log::watch(vol.clone(), |m| eprintln!("rangedb nbd: {m}"))
        .map_err(|e| format!("starting the volume watcher: {e}"))?;
    serving.store(true, Ordering::Release);
    let sig = stop.recv().map_err(|_| "the stop-signal thread ended".to_string())?;
    eprintln!("rangedb nbd: {sig}: answering the requests in flight, then flushing the volume");
    let served = running.shutdown();
    drop(watcher);
    eprintln!("rangedb nbd: {}", crate::nbd_log::served(&served));
    let flushed = vol.flush().and_then(|()| if a.read_only { Ok(()) } else { vol.checkpoint() });
    drop(vol);
    // The store holds the last handle: dropping it closes the volume and releases its lock.
    drop(store);
    flushed.map_err(|e| format!("flushing volume {} at shutdown: {e}", path.display()))?;
    eprintln!("rangedb nbd: stopped");
    Ok(ExitCode::SUCCESS)
}

/// Removes a socket file left by a server that was killed, so a restart can bind again; refuses to touch a path
/// that is not a socket or that a live server still answers on.
fn remove_stale_socket(p: &Path) -> Result<(), String> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::symlink_metadata(p) else { return Ok(()) };
    if !meta.file_type().is_socket() {
        return Err(format!("{} exists and is not a socket", p.display()));
    }
    if std::os::unix::net::UnixStream::connect(p).is_ok() {
        return Err(format!("a server is already listening on {}", p.display()));
    }
    std::fs::remove_file(p).map_err(|e| format!("removing stale socket {}: {e}", p.display()))
}

/// A volume served with `--read-only`: the server refuses writes before they reach it.
struct ReadOnlyVolume(Arc<Volume>);

impl BlockDevice for ReadOnlyVolume {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn block_sizes(&self) -> BlockSizes {
        self.0.block_sizes()
    }
    fn features(&self) -> Features {
        Features { read_only: true, trim: false, write_zeroes: false, fast_zero: false, ..self.0.features() }
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> ::nbd::Result<()> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, _: &[u8], _: u64, _: bool) -> ::nbd::Result<()> {
        Err(::nbd::Error::ReadOnly)
    }
    fn flush(&self) -> ::nbd::Result<()> {
        Ok(())
    }
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

/// Parses a size: decimal bytes, or a number followed by K, M, G or T (binary multiples, case-insensitive,
/// an optional trailing `B` or `iB` accepted: `512`, `64K`, `10G`, `1TiB`). Zero is refused.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower.strip_suffix("ib").or_else(|| lower.strip_suffix('b')).unwrap_or(&lower);
    let (digits, shift) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 10),
        Some('m') => (&body[..body.len() - 1], 20),
        Some('g') => (&body[..body.len() - 1], 30),
        Some('t') => (&body[..body.len() - 1], 40),
        _ => (body, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{s:?} is not a size (bytes, or a number with K, M, G or T)"));
    }
    let n: u64 = digits.parse().map_err(|_| format!("{s:?} is too large"))?;
    let v = n.checked_mul(1u64 << shift).ok_or_else(|| format!("{s:?} is too large"))?;
    if v == 0 {
        return Err("a size must be nonzero".into());
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("10M"), Ok(10 << 20));
        assert_eq!(parse_size("3G"), Ok(3 << 30));
        assert_eq!(parse_size("2T"), Ok(2 << 40));
        assert_eq!(parse_size("1TiB"), Ok(1 << 40));
        assert_eq!(parse_size("8MB"), Ok(8 << 20));
        for bad in ["", "K", "0", "1.5G", "-1", "12Q", "99999999999T", "18446744073709551616"] {
            assert!(parse_size(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn serve_refuses_a_missing_volume_and_size_without_create() {
        let dir = tempfile::tempdir().unwrap();
        let args = |create: bool, size: Option<u64>| ServeArgs {
            dir: dir.path().to_path_buf(),
            create,
            size,
            listen: "127.0.0.1:0".into(),
            unix: None,
            export: None,
            read_only: false,
            max_payload: 32 << 20,
            max_connections: 4,
        };
        let e = serve(args(false, None)).unwrap_err();
        assert!(e.contains("--create"), "{e}");
        let e = serve(args(false, Some(4096))).unwrap_err();
        assert!(e.contains("--size applies only"), "{e}");
    }

    /// `serve --create --max-connections 0` created the volume and then refused the option, so the same command
    /// with the option fixed failed with "exists already".
    #[test]
    fn regression_a_bad_server_option_creates_no_volume() {
        let dir = tempfile::tempdir().unwrap();
        let args = |max_connections: usize, listen: &str| ServeArgs {
            dir: dir.path().to_path_buf(),
            create: true,
            size: Some(1 << 20),
            listen: listen.into(),
            unix: None,
            export: None,
            read_only: false,
            max_payload: 32 << 20,
            max_connections,
        };
        let e = serve(args(0, "127.0.0.1:0")).unwrap_err();
        assert!(e.contains("max_connections"), "{e}");
        let e = serve(args(4, "not an address")).unwrap_err();
        assert!(e.contains("listening on not an address"), "{e}");
        assert!(!dir.path().join("default").exists(), "a volume was created");
    }
}
