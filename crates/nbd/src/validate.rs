//! Request validation: which error reply proto.md assigns to a well-framed but invalid request.

use crate::protocol::{Request, cmd, cmd_flags, errno, tx_flags};

/// Checks a request against the negotiated session; `Err((nbd_errno, message))` is the reply to send.
/// Order follows proto.md's "Error values": unknown command or flag → EINVAL; write-type on a read-only export →
/// EPERM; command not advertised → EINVAL; beyond the end → ENOSPC for writes, EINVAL otherwise; misaligned →
/// EINVAL; READ above the payload limit → EOVERFLOW with structured replies (explicitly allowed there), EINVAL
/// without; WRITE above it → EINVAL.
pub(crate) fn validate(
    req: &Request,
    flags: u16,
    size: u64,
    minimum: u64,
    max_payload: u32,
    structured: bool,
    meta_context: Option<u32>,
) -> Result<(), (u32, &'static str)> {
    let adv = |f: u16| flags & f != 0;
    let fua = if adv(tx_flags::SEND_FUA) { cmd_flags::FUA } else { 0 };
    let allowed = match req.kind {
        cmd::READ => fua | if adv(tx_flags::SEND_DF) { cmd_flags::DF } else { 0 },
        cmd::WRITE | cmd::FLUSH | cmd::TRIM | cmd::CACHE => fua,
        cmd::WRITE_ZEROES => {
            fua | cmd_flags::NO_HOLE | if adv(tx_flags::SEND_FAST_ZERO) { cmd_flags::FAST_ZERO } else { 0 }
        }
        cmd::BLOCK_STATUS if meta_context.is_some() => fua | cmd_flags::REQ_ONE,
        cmd::BLOCK_STATUS => return Err((errno::EINVAL, "no metadata context was negotiated")),
        _ => return Err((errno::EINVAL, "unknown command")),
    };
    if req.flags & !allowed != 0 {
        return Err((errno::EINVAL, "command flag not valid for this command or not negotiated"));
    }
    let writes = matches!(req.kind, cmd::WRITE | cmd::TRIM | cmd::WRITE_ZEROES);
    if writes && adv(tx_flags::READ_ONLY) {
        return Err((errno::EPERM, "the export is read-only"));
    }
    let advertised = match req.kind {
        cmd::FLUSH => adv(tx_flags::SEND_FLUSH),
        cmd::TRIM => adv(tx_flags::SEND_TRIM),
        cmd::WRITE_ZEROES => adv(tx_flags::SEND_WRITE_ZEROES),
        _ => true,
    };
    if !advertised {
        return Err((errno::EINVAL, "command not supported by this export"));
    }
    if req.kind == cmd::FLUSH {
        if req.offset != 0 || req.len != 0 {
            return Err((errno::EINVAL, "flush offset and length must be zero"));
        }
        return Ok(());
    }
    let in_bounds = req.offset.checked_add(u64::from(req.len)).is_some_and(|end| end <= size);
    if !in_bounds {
        return Err(if matches!(req.kind, cmd::WRITE | cmd::WRITE_ZEROES) {
            (errno::ENOSPC, "request extends beyond the end of the export")
        } else {
            (errno::EINVAL, "request extends beyond the end of the export")
        });
    }
    if req.kind == cmd::BLOCK_STATUS && req.len == 0 {
        return Err((errno::EINVAL, "zero-length block status"));
    }
    if !req.offset.is_multiple_of(minimum) || !u64::from(req.len).is_multiple_of(minimum) {
        return Err((errno::EINVAL, "request not aligned to the minimum block size"));
    }
    if req.len > max_payload {
        match req.kind {
            cmd::READ if structured => {
                return Err((errno::EOVERFLOW, "read larger than the maximum payload"));
            }
            cmd::READ | cmd::WRITE => return Err((errno::EINVAL, "payload larger than the maximum payload")),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: u16 = tx_flags::HAS_FLAGS
        | tx_flags::SEND_FLUSH
        | tx_flags::SEND_FUA
        | tx_flags::SEND_TRIM
        | tx_flags::SEND_WRITE_ZEROES
        | tx_flags::SEND_DF;

    fn req(kind: u16, flags: u16, offset: u64, len: u32) -> Request {
        Request { flags, kind, cookie: 1, offset, len }
    }

    fn v(r: Request, flags: u16) -> Result<(), u32> {
        validate(&r, flags, 1 << 20, 512, 1 << 16, true, None).map_err(|(e, _)| e)
    }

    #[test]
    fn validation_assigns_proto_md_errors() {
        assert_eq!(v(req(cmd::READ, 0, 0, 512), ALL), Ok(()));
        assert_eq!(v(req(99, 0, 0, 0), ALL), Err(errno::EINVAL), "unknown command");
        assert_eq!(v(req(cmd::BLOCK_STATUS, 0, 0, 512), ALL), Err(errno::EINVAL));
        assert_eq!(v(req(cmd::READ, 1 << 9, 0, 512), ALL), Err(errno::EINVAL), "unknown flag");
        assert_eq!(
            v(req(cmd::WRITE, cmd_flags::NO_HOLE, 0, 512), ALL),
            Err(errno::EINVAL),
            "flag for another cmd"
        );
        assert_eq!(v(req(cmd::READ, cmd_flags::DF, 0, 512), ALL), Ok(()));
        assert_eq!(v(req(cmd::READ, cmd_flags::DF, 0, 512), ALL & !tx_flags::SEND_DF), Err(errno::EINVAL));
        assert_eq!(v(req(cmd::WRITE, cmd_flags::FUA, 0, 512), ALL & !tx_flags::SEND_FUA), Err(errno::EINVAL));
        assert_eq!(v(req(cmd::WRITE_ZEROES, cmd_flags::FAST_ZERO, 0, 512), ALL), Err(errno::EINVAL));
        assert_eq!(
            v(req(cmd::WRITE_ZEROES, cmd_flags::FAST_ZERO, 0, 512), ALL | tx_flags::SEND_FAST_ZERO),
            Ok(())
        );
        assert_eq!(v(req(cmd::TRIM, 0, 0, 512), ALL & !tx_flags::SEND_TRIM), Err(errno::EINVAL));
        assert_eq!(v(req(cmd::WRITE, 0, 0, 512), ALL | tx_flags::READ_ONLY), Err(errno::EPERM));
        assert_eq!(
            v(req(cmd::TRIM, 0, 0, 512), tx_flags::HAS_FLAGS | tx_flags::READ_ONLY),
            Err(errno::EPERM)
        );
        assert_eq!(v(req(cmd::FLUSH, 0, 0, 512), ALL), Err(errno::EINVAL), "flush with a length");
        assert_eq!(v(req(cmd::FLUSH, 0, 0, 0), ALL), Ok(()));
        assert_eq!(v(req(cmd::WRITE, 0, (1 << 20) - 512, 1024), ALL), Err(errno::ENOSPC));
        assert_eq!(v(req(cmd::WRITE_ZEROES, 0, 1 << 20, 512), ALL), Err(errno::ENOSPC));
        assert_eq!(v(req(cmd::READ, 0, (1 << 20) - 512, 1024), ALL), Err(errno::EINVAL));
        assert_eq!(v(req(cmd::READ, 0, u64::MAX - 10, 512), ALL), Err(errno::EINVAL), "offset overflow");
        assert_eq!(v(req(cmd::WRITE, 0, u64::MAX - 10, 512), ALL), Err(errno::ENOSPC), "offset overflow");
        assert_eq!(v(req(cmd::READ, 0, 1, 512), ALL), Err(errno::EINVAL), "misaligned offset");
        assert_eq!(v(req(cmd::WRITE, 0, 0, 100), ALL), Err(errno::EINVAL), "misaligned length");
        assert_eq!(v(req(cmd::READ, 0, 0, 1 << 17), ALL), Err(errno::EOVERFLOW));
        assert_eq!(
            validate(&req(cmd::READ, 0, 0, 1 << 17), ALL, 1 << 20, 512, 1 << 16, false, None)
                .map_err(|e| e.0),
            Err(errno::EINVAL)
        );
        assert_eq!(v(req(cmd::WRITE, 0, 0, 1 << 17), ALL), Err(errno::EINVAL));
        assert_eq!(v(req(cmd::TRIM, 0, 0, 1 << 17), ALL), Ok(()), "trim has no payload limit");
        assert_eq!(v(req(cmd::CACHE, 0, 0, 1 << 17), ALL), Ok(()));
        assert_eq!(v(req(cmd::READ, 0, 0, 0), ALL), Ok(()), "zero length is a no-op, not an error");
        let bs = |r: Request| validate(&r, ALL, 1 << 20, 512, 1 << 16, true, Some(1)).map_err(|(e, _)| e);
        assert_eq!(bs(req(cmd::BLOCK_STATUS, cmd_flags::REQ_ONE, 0, 512)), Ok(()));
        assert_eq!(bs(req(cmd::BLOCK_STATUS, 0, 0, 1 << 20)), Ok(()), "no payload limit");
        assert_eq!(bs(req(cmd::BLOCK_STATUS, cmd_flags::NO_HOLE, 0, 512)), Err(errno::EINVAL));
        assert_eq!(bs(req(cmd::BLOCK_STATUS, 0, 1 << 20, 512)), Err(errno::EINVAL), "beyond the end");
        assert_eq!(bs(req(cmd::BLOCK_STATUS, 0, 0, 0)), Err(errno::EINVAL));
    }
}
