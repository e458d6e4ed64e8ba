//! The kv shell's tokens and lines (the kv-shell spec's "Tokens"): plain or `0x`-hex keys and values, and
//! command lines read as bytes so that a malformed one is a parse error, not the end of the session.

use std::io::BufRead;

use crate::kv_engine::{KvError, KvResult};

/// Decodes a key or value token.
pub fn decode_token(t: &str) -> KvResult<Vec<u8>> {
    if let Some(hex) = t.strip_prefix("0x") {
        if hex.len() % 2 != 0 {
            return Err(KvError::parse(format!("odd-length hex token {t}")));
        }
        return decode_hex(hex).ok_or_else(|| KvError::parse(format!("bad hex token {t}")));
    }
    if t.starts_with('@') {
        return Err(KvError::parse(format!("token {t} may not start with @")));
    }
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(KvError::parse(format!("bad token {t:?}")));
    }
    Ok(t.as_bytes().to_vec())
}

/// The bytes of hex digits `h` (two per byte, either case), or `None` if `h` holds anything else or an odd count.
/// Works on bytes: slicing the text two bytes at a time would split a multi-byte character (a panic), and
/// `u8::from_str_radix` would take a `+` sign as a digit.
pub fn decode_hex(h: &str) -> Option<Vec<u8>> {
    let nibble = |c: u8| char::from(c).to_digit(16).map(|d| d as u8);
    let h = h.as_bytes();
    if !h.len().is_multiple_of(2) {
        return None;
    }
    h.chunks_exact(2).map(|p| Some(nibble(p[0])? << 4 | nibble(p[1])?)).collect()
}

/// Reads one command line without its line ending (`\n` or `\r\n`): `None` at the end of input, `Some(Err)`
/// for a line that is not UTF-8. Such a line is a malformed line, answered with `ERR parse` while the session
/// goes on, not a failure of the session.
pub fn read_line(input: &mut dyn BufRead) -> std::io::Result<Option<KvResult<String>>> {
    let mut buf = Vec::new();
    if input.read_until(b'\n', &mut buf)? == 0 {
        return Ok(None);
    }
    if buf.ends_with(b"\n") {
        buf.pop();
        if buf.ends_with(b"\r") {
            buf.pop();
        }
    }
    Ok(Some(String::from_utf8(buf).map_err(|_| KvError::parse("line is not valid UTF-8"))))
}

/// Encodes bytes as a token: plain when printable and unambiguous, else hex.
pub fn encode_token(b: &[u8]) -> String {
    if b.first() == Some(&b'@') { hex(b) } else { show(b) }
}

/// Bytes as text when printable (and not starting `0x`), else as [`hex`]: the shells' and inspectors' display,
/// which unlike [`encode_token`] need not avoid a leading `@`.
pub fn show(b: &[u8]) -> String {
    let plain = !b.is_empty() && b.iter().all(|c| c.is_ascii_graphic()) && !b.starts_with(b"0x");
    if plain { String::from_utf8_lossy(b).into_owned() } else { hex(b) }
}

/// `0x` and two lowercase hex digits per byte.
pub fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(2 + 2 * b.len());
    s.push_str("0x");
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_roundtrip() {
        for b in [&b"abc"[..], b"", b"0xab", b"@x", b"a b", &[0, 255]] {
            assert_eq!(decode_token(&encode_token(b)).unwrap(), b);
        }
        assert!(decode_token("0xabc").is_err());
        assert!(decode_token("@1").is_err());
        assert_eq!(decode_token("0xA0ff").unwrap(), [0xa0, 0xff]);
    }

    /// Hex digits are taken byte by byte: a multi-byte character among them is an error, not a panic from
    /// slicing inside it, and a `+` is not a digit (`u8::from_str_radix` took `+a` as 10).
    #[test]
    fn regression_hex_with_a_multibyte_character_or_a_sign_is_refused() {
        for bad in ["a\u{e9}0", "\u{e9}\u{e9}", "+a", "-1", "0g", " a"] {
            assert_eq!(decode_hex(bad), None, "{bad:?}");
            assert!(decode_token(&format!("0x{bad}")).is_err(), "{bad:?}");
        }
        assert_eq!(decode_hex(""), Some(vec![]));
        assert_eq!(decode_hex("00Ff7e"), Some(vec![0, 255, 0x7e]));
    }

    #[test]
    fn lines_end_at_lf_or_crlf_and_need_not_be_utf8() {
        let mut input: &[u8] = b"a b\r\nc\n\xff\r\n\nlast";
        let mut lines = Vec::new();
        while let Some(l) = read_line(&mut input).unwrap() {
            lines.push(l.map_err(|e| e.msg));
        }
        let want: Vec<Result<String, String>> = vec![
            Ok("a b".into()),
            Ok("c".into()),
            Err("line is not valid UTF-8".into()),
            Ok(String::new()),
            Ok("last".into()),
        ];
        assert_eq!(lines, want);
    }
}
