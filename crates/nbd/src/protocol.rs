//! Wire constants and message encodings of the NBD protocol (the upstream `doc/proto.md`).
//!
//! Every integer on the wire is big-endian (network byte order), as the protocol mandates; this is the one place
//! in RangeDB where big-endian is the format rather than a sort order. Messages are built whole in a buffer and
//! written with one `write_all`, so replies from concurrent workers on one connection never interleave.

/// `NBDMAGIC`, the first 8 bytes the server sends.
pub const NBD_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: the newstyle magic the server sends and the prefix of every client option.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic of every option reply.
pub const OPT_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of a transmission request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of a simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Magic of a structured reply chunk.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// Handshake flags (server, 16 bits).
pub mod handshake_flags {
    /// The server speaks fixed newstyle.
    pub const FIXED_NEWSTYLE: u16 = 1 << 0;
    /// The server can omit the 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
    pub const NO_ZEROES: u16 = 1 << 1;
}

/// Client flags (32 bits).
pub mod client_flags {
    /// The client speaks fixed newstyle.
    pub const FIXED_NEWSTYLE: u32 = 1 << 0;
    /// The client asks the server to omit the 124 zero bytes.
    pub const NO_ZEROES: u32 = 1 << 1;
}

/// Transmission flags (16 bits).
pub mod tx_flags {
    /// Always set.
    pub const HAS_FLAGS: u16 = 1 << 0;
    /// The export is read-only.
    pub const READ_ONLY: u16 = 1 << 1;
    /// `NBD_CMD_FLUSH` is supported.
    pub const SEND_FLUSH: u16 = 1 << 2;
    /// `NBD_CMD_FLAG_FUA` is supported.
    pub const SEND_FUA: u16 = 1 << 3;
    /// The medium is rotational.
    pub const ROTATIONAL: u16 = 1 << 4;
    /// `NBD_CMD_TRIM` is supported.
    pub const SEND_TRIM: u16 = 1 << 5;
    /// `NBD_CMD_WRITE_ZEROES` (and `NBD_CMD_FLAG_NO_HOLE`) are supported.
    pub const SEND_WRITE_ZEROES: u16 = 1 << 6;
    /// `NBD_CMD_FLAG_DF` is supported on reads (only with structured replies).
    pub const SEND_DF: u16 = 1 << 7;
    /// Flush and FUA effects are visible across all connections when replied to.
    pub const CAN_MULTI_CONN: u16 = 1 << 8;
    /// `NBD_CMD_CACHE` is understood.
    pub const SEND_CACHE: u16 = 1 << 10;
    /// `NBD_CMD_FLAG_FAST_ZERO` is supported on write-zeroes.
    pub const SEND_FAST_ZERO: u16 = 1 << 11;
}

/// Option codes.
pub mod opt {
    /// Choose an export and enter transmission (no error reply possible).
    pub const EXPORT_NAME: u32 = 1;
    /// End negotiation.
    pub const ABORT: u32 = 2;
    /// List exports.
    pub const LIST: u32 = 3;
    /// Start TLS (not supported: NOTLS mode).
    pub const STARTTLS: u32 = 5;
    /// Describe an export.
    pub const INFO: u32 = 6;
    /// Describe an export and enter transmission.
    pub const GO: u32 = 7;
    /// Negotiate structured replies.
    pub const STRUCTURED_REPLY: u32 = 8;
    /// List metadata contexts (not supported).
    pub const LIST_META_CONTEXT: u32 = 9;
    /// Select metadata contexts (not supported).
    pub const SET_META_CONTEXT: u32 = 10;
    /// Extended headers (not supported).
    pub const EXTENDED_HEADERS: u32 = 11;
}

/// Option reply types.
pub mod rep {
    /// Success, no data.
    pub const ACK: u32 = 1;
    /// One export of `NBD_OPT_LIST`.
    pub const SERVER: u32 = 2;
    /// One information item of `NBD_OPT_INFO` / `NBD_OPT_GO`.
    pub const INFO: u32 = 3;
    /// One metadata context of `NBD_OPT_LIST_META_CONTEXT` / `NBD_OPT_SET_META_CONTEXT`.
    pub const META_CONTEXT: u32 = 4;
    const ERR: u32 = 1 << 31;
    /// The option is unknown to this server.
    pub const ERR_UNSUP: u32 = ERR | 1;
    /// Server policy forbids the option.
    pub const ERR_POLICY: u32 = ERR | 2;
    /// The option is syntactically or semantically invalid.
    pub const ERR_INVALID: u32 = ERR | 3;
    /// The export is unknown.
    pub const ERR_UNKNOWN: u32 = ERR | 6;
    /// The server is shutting down.
    pub const ERR_SHUTDOWN: u32 = ERR | 7;
    /// The client must request block sizes first.
    pub const ERR_BLOCK_SIZE_REQD: u32 = ERR | 8;
    /// The request is too large.
    pub const ERR_TOO_BIG: u32 = ERR | 9;
}

/// Information types of `NBD_REP_INFO`.
pub mod info {
    /// Size and transmission flags (mandatory).
    pub const EXPORT: u16 = 0;
    /// Canonical export name.
    pub const NAME: u16 = 1;
    /// Human-readable description.
    pub const DESCRIPTION: u16 = 2;
    /// Minimum, preferred and maximum payload sizes.
    pub const BLOCK_SIZE: u16 = 3;
}

/// Command types.
pub mod cmd {
    /// Read.
    pub const READ: u16 = 0;
    /// Write (payload follows the header).
    pub const WRITE: u16 = 1;
    /// Disconnect.
    pub const DISC: u16 = 2;
    /// Flush.
    pub const FLUSH: u16 = 3;
    /// Trim (discard).
    pub const TRIM: u16 = 4;
    /// Cache (prefetch hint).
    pub const CACHE: u16 = 5;
    /// Write zeroes.
    pub const WRITE_ZEROES: u16 = 6;
    /// Block status (needs metadata contexts, which this server does not offer).
    pub const BLOCK_STATUS: u16 = 7;
}

/// Command flags.
pub mod cmd_flags {
    /// Force unit access: persist before replying.
    pub const FUA: u16 = 1 << 0;
    /// Write-zeroes must not punch a hole.
    pub const NO_HOLE: u16 = 1 << 1;
    /// Read reply in at most one content chunk.
    pub const DF: u16 = 1 << 2;
    /// Block status: one extent only.
    pub const REQ_ONE: u16 = 1 << 3;
    /// Write-zeroes only if faster than a write.
    pub const FAST_ZERO: u16 = 1 << 4;
}

/// Structured reply chunk types and flags.
pub mod reply {
    /// Final chunk of a structured reply.
    pub const FLAG_DONE: u16 = 1 << 0;
    /// No payload; ends a reply.
    pub const TYPE_NONE: u16 = 0;
    /// Data at an offset.
    pub const TYPE_OFFSET_DATA: u16 = 1;
    /// Zeros at an offset.
    pub const TYPE_OFFSET_HOLE: u16 = 2;
    /// Block status descriptors of one metadata context.
    pub const TYPE_BLOCK_STATUS: u16 = 5;
    /// An error with a message.
    pub const TYPE_ERROR: u16 = (1 << 15) | 1;
}

/// NBD error values (proto.md "Error values"); the numbers are Linux errno values by design.
pub mod errno {
    /// Operation not permitted.
    pub const EPERM: u32 = 1;
    /// Input/output error.
    pub const EIO: u32 = 5;
    /// Cannot allocate memory.
    pub const ENOMEM: u32 = 12;
    /// Invalid argument.
    pub const EINVAL: u32 = 22;
    /// No space left on device.
    pub const ENOSPC: u32 = 28;
    /// Value too large.
    pub const EOVERFLOW: u32 = 75;
    /// Operation not supported.
    pub const ENOTSUP: u32 = 95;
    /// Server is shutting down.
    pub const ESHUTDOWN: u32 = 108;

    /// The value's name as proto.md spells it (`NBD_ENOSPC`), for logs; `NBD_E?` for a value it does not define.
    pub fn name(e: u32) -> &'static str {
        match e {
            EPERM => "NBD_EPERM",
            EIO => "NBD_EIO",
            ENOMEM => "NBD_ENOMEM",
            EINVAL => "NBD_EINVAL",
            ENOSPC => "NBD_ENOSPC",
            EOVERFLOW => "NBD_EOVERFLOW",
            ENOTSUP => "NBD_ENOTSUP",
            ESHUTDOWN => "NBD_ESHUTDOWN",
            _ => "NBD_E?",
        }
    }
}

/// The `base:allocation` metadata context: its name and status flags.
pub mod base_allocation {
    /// The context's name.
    pub const NAME: &str = "base:allocation";
    /// The id this server gives the context when a client selects it.
    pub const ID: u32 = 1;
    /// The extent is not allocated (a hole).
    pub const HOLE: u32 = 1 << 0;
    /// The extent reads as zeros.
    pub const ZERO: u32 = 1 << 1;
}

/// Longest string (export name, description, message) the protocol allows.
pub const MAX_STRING: usize = 4096;

/// Largest export size this server advertises: 2^63 - 1 bytes. The wire field is unsigned, but clients hold
/// offsets as signed 64-bit integers (libnbd fails the connection with `EOVERFLOW`, qemu with "File too
/// large"), so a larger export would be one no client can use.
pub const MAX_EXPORT_SIZE: u64 = i64::MAX as u64;

/// A transmission request header (28 bytes on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Command flags.
    pub flags: u16,
    /// Command type.
    pub kind: u16,
    /// Opaque cookie echoed in the reply.
    pub cookie: u64,
    /// Byte offset.
    pub offset: u64,
    /// Byte length.
    pub len: u32,
}

/// Size of a request header on the wire.
pub const REQUEST_LEN: usize = 28;

impl Request {
    /// Decodes a header; `None` if the magic is wrong (the stream cannot be resynchronised).
    pub fn decode(b: &[u8; REQUEST_LEN]) -> Option<Request> {
        if be32(b, 0) != REQUEST_MAGIC {
            return None;
        }
        Some(Request {
            flags: be16(b, 4),
            kind: be16(b, 6),
            cookie: be64(b, 8),
            offset: be64(b, 16),
            len: be32(b, 24),
        })
    }

    /// Encodes a header (used by tests and clients).
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0u8; REQUEST_LEN];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&self.flags.to_be_bytes());
        b[6..8].copy_from_slice(&self.kind.to_be_bytes());
        b[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        b[16..24].copy_from_slice(&self.offset.to_be_bytes());
        b[24..28].copy_from_slice(&self.len.to_be_bytes());
        b
    }
}

/// Builds an option reply: magic, option, reply type, length, data.
pub fn option_reply(option: u32, kind: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + data.len());
    b.extend_from_slice(&OPT_REPLY_MAGIC.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&kind.to_be_bytes());
    // Option replies are built by this server only, from strings bounded by MAX_STRING.
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    b
}

/// Builds a simple reply header (a read's data, if any, follows it).
pub fn simple_reply(cookie: u64, error: u32) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.to_be_bytes());
    b[8..16].copy_from_slice(&cookie.to_be_bytes());
    b
}

/// Builds a structured reply chunk header for a payload of `len` bytes.
pub fn chunk_header(cookie: u64, flags: u16, kind: u16, len: u32) -> [u8; 20] {
    let mut b = [0u8; 20];
    b[0..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&flags.to_be_bytes());
    b[6..8].copy_from_slice(&kind.to_be_bytes());
    b[8..16].copy_from_slice(&cookie.to_be_bytes());
    b[16..20].copy_from_slice(&len.to_be_bytes());
    b
}

/// Builds a final `NBD_REPLY_TYPE_ERROR` chunk with a human-readable message.
pub fn error_chunk(cookie: u64, error: u32, message: &str) -> Vec<u8> {
    let msg = truncate_utf8(message, 1024);
    let mut b = Vec::with_capacity(26 + msg.len());
    b.extend_from_slice(&chunk_header(cookie, reply::FLAG_DONE, reply::TYPE_ERROR, 6 + msg.len() as u32));
    b.extend_from_slice(&error.to_be_bytes());
    b.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    b.extend_from_slice(msg.as_bytes());
    b
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Reads a big-endian u16 at `at`. REQUIRES: `at + 2 <= b.len()`.
pub fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads a big-endian u32 at `at`. REQUIRES: `at + 4 <= b.len()`.
pub fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reads a big-endian u64 at `at`. REQUIRES: `at + 8 <= b.len()`.
pub fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trips_and_rejects_bad_magic() {
        let r = Request { flags: 3, kind: cmd::WRITE, cookie: 0xdead_beef_0102, offset: 1 << 40, len: 4096 };
        let b = r.encode();
        assert_eq!(Request::decode(&b), Some(r));
        let mut bad = b;
        bad[0] ^= 1;
        assert_eq!(Request::decode(&bad), None);
    }

    #[test]
    fn error_chunk_layout() {
        let b = error_chunk(7, errno::EINVAL, "bad");
        assert_eq!(be32(&b, 0), STRUCTURED_REPLY_MAGIC);
        assert_eq!(be16(&b, 4), reply::FLAG_DONE);
        assert_eq!(be16(&b, 6), reply::TYPE_ERROR);
        assert_eq!(be64(&b, 8), 7);
        assert_eq!(be32(&b, 16), 9);
        assert_eq!(be32(&b, 20), errno::EINVAL);
        assert_eq!(be16(&b, 24), 3);
        assert_eq!(&b[26..], b"bad");
    }

    #[test]
    fn truncate_keeps_char_boundaries() {
        assert_eq!(truncate_utf8("héllo", 2), "h");
        assert_eq!(truncate_utf8("abc", 10), "abc");
    }
}
