//! The protocol's framing, shared by both directions: message headers,
//! NUL-terminated strings, building messages, and the refusal's
//! `ErrorResponse`. Pure: no I/O, no state.

use std::io;

use crate::pooler::SessionStatement;

/// `SSLRequest`'s code in the untyped first message.
pub(super) const SSL_REQUEST: i32 = 80_877_103;
/// `GSSENCRequest`'s code.
pub(super) const GSSENC_REQUEST: i32 = 80_877_104;
/// `CancelRequest`'s code.
pub(super) const CANCEL_REQUEST: i32 = 80_877_102;
/// How large a startup packet may be (PostgreSQL's own limit is 10,000).
pub(super) const MAX_STARTUP: usize = 10_000;

/// Why a relay gave up on its connection: something it cannot rewrite
/// safely or a reply it cannot place. The relay then closes both sides, so
/// the driver sees its connection fail and the pool drops it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Broken(pub(crate) &'static str);

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "statement relay closed the connection: {}", self.0)
    }
}

impl From<Broken> for io::Error {
    fn from(broken: Broken) -> Self {
        io::Error::new(io::ErrorKind::InvalidData, broken.to_string())
    }
}

/// Completes a message header in `buf` from `input`: its tag and length
/// field once all five bytes are there.
///
/// # Errors
///
/// A length below 4 (or negative), which breaks the framing.
pub(super) fn take_header(
    buf: &mut Vec<u8>,
    input: &mut &[u8],
) -> Result<Option<(u8, usize)>, Broken> {
    let n = (5 - buf.len()).min(input.len());
    buf.extend_from_slice(&input[..n]);
    *input = &input[n..];
    let Some((tag, len)) = header(buf) else {
        return Ok(None);
    };
    if len < 4 {
        return Err(Broken("a message of a bad length"));
    }
    Ok(Some((tag, len)))
}

/// A typed message's tag and length field, once five bytes are there.
pub(super) fn header(bytes: &[u8]) -> Option<(u8, usize)> {
    let head: [u8; 5] = bytes.get(..5)?.try_into().ok()?;
    let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    // A negative length breaks the framing, as one below 4 does.
    Some((head[0], usize::try_from(len).unwrap_or(0)))
}

/// The statement `sql` sets session state with, if the look at it refuses
/// one.
pub(super) fn refused(sql: &[u8]) -> Option<SessionStatement> {
    match std::str::from_utf8(sql) {
        Ok(sql) => SessionStatement::in_text(sql),
        // Not UTF-8 (another client encoding): the look reads ASCII words
        // only, which survive the replacement characters.
        Err(_) => SessionStatement::in_text(&String::from_utf8_lossy(sql)),
    }
}

/// Appends the `ErrorResponse` of a refused statement: SQLSTATE `0A000`
/// (`feature_not_supported`), the refusal's message.
pub(super) fn error_response(out: &mut Vec<u8>, statement: SessionStatement) {
    let message = statement.to_string();
    write_message(
        out,
        b'E',
        &[b"SERROR\0VERROR\0C0A000\0M", message.as_bytes(), b"\0\0"],
    );
}

/// A NUL-terminated string and what follows its NUL.
pub(super) fn split_cstr(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let nul = bytes.iter().position(|&b| b == 0)?;
    Some((&bytes[..nul], &bytes[nul + 1..]))
}

/// Appends one typed message made of `parts`.
pub(super) fn write_message(out: &mut Vec<u8>, tag: u8, parts: &[&[u8]]) {
    let len: usize = 4 + parts.iter().map(|p| p.len()).sum::<usize>();
    // The parts come from a message whose length fitted, plus at most two
    // bytes less: the length still fits.
    let len = i32::try_from(len).unwrap_or(i32::MAX);
    out.push(tag);
    out.extend_from_slice(&len.to_be_bytes());
    for part in parts {
        out.extend_from_slice(part);
    }
}

/// The length field of an untyped packet, once its four bytes are there.
#[cfg(feature = "tokio-postgres")]
pub(super) fn header_len(packet: &[u8]) -> Option<usize> {
    let len: [u8; 4] = packet.get(..4)?.try_into().ok()?;
    Some(usize::try_from(i32::from_be_bytes(len)).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_needs_its_five_bytes_and_reads_a_negative_length_as_zero() {
        assert_eq!(header(b""), None);
        assert_eq!(header(&[b'Z', 0, 0, 0]), None);
        assert_eq!(header(&[b'Z', 0, 0, 0, 5]), Some((b'Z', 5)));
        // Bytes past the header are not its business.
        assert_eq!(header(&[b'D', 0, 1, 0, 0, 9, 9]), Some((b'D', 65_536)));
        assert_eq!(header(&[b'D', 0xff, 0xff, 0xff, 0xff]), Some((b'D', 0)));
        assert_eq!(header(&[b'D', 0x80, 0, 0, 0]), Some((b'D', 0)));
    }

    #[test]
    fn a_header_taken_in_pieces_takes_no_byte_past_it() {
        let mut buf = Vec::new();
        let bytes = [b'S', 0, 0, 0, 4, b'X'];
        let mut input = &bytes[..2];
        assert_eq!(take_header(&mut buf, &mut input), Ok(None));
        assert!(input.is_empty());
        let mut input = &bytes[2..];
        assert_eq!(take_header(&mut buf, &mut input), Ok(Some((b'S', 4))));
        assert_eq!(input, b"X");
        assert_eq!(buf, bytes[..5]);
        // An empty input leaves a partial header as it is.
        let mut buf = vec![b'S'];
        let mut input: &[u8] = &[];
        assert_eq!(take_header(&mut buf, &mut input), Ok(None));
        assert_eq!(buf, [b'S']);
    }

    #[test]
    fn a_length_below_four_breaks_the_framing() {
        for len in [[0, 0, 0, 3], [0, 0, 0, 0], [0xff, 0xff, 0xff, 0xfc]] {
            let mut buf = Vec::new();
            let bytes = [b'P', len[0], len[1], len[2], len[3]];
            let mut input = &bytes[..];
            assert!(take_header(&mut buf, &mut input).is_err(), "{len:?}");
        }
    }

    #[test]
    fn a_cstr_ends_at_its_first_nul() {
        assert_eq!(split_cstr(b"ab\0cd\0"), Some((&b"ab"[..], &b"cd\0"[..])));
        assert_eq!(split_cstr(b"\0"), Some((&b""[..], &b""[..])));
        assert_eq!(split_cstr(b"no nul"), None);
        assert_eq!(split_cstr(b""), None);
    }

    #[test]
    fn a_written_message_counts_its_length_field_and_parts() {
        let mut out = vec![b'x'];
        write_message(&mut out, b'P', &[b"\0", b"SELECT 1\0", &[0, 0]]);
        assert_eq!(out[0], b'x');
        assert_eq!(header(&out[1..]), Some((b'P', 4 + 1 + 9 + 2)));
        assert_eq!(&out[6..], b"\0SELECT 1\0\0\0");
        let mut empty = Vec::new();
        write_message(&mut empty, b'S', &[]);
        assert_eq!(empty, [b'S', 0, 0, 0, 4]);
    }

    #[test]
    fn a_refusal_is_an_error_response_of_sqlstate_0a000() {
        let mut out = Vec::new();
        error_response(&mut out, SessionStatement::Listen);
        let (tag, len) = header(&out).expect("a header");
        assert_eq!((tag, len + 1), (b'E', out.len()));
        let body = &out[5..];
        assert!(body.starts_with(b"SERROR\0VERROR\0C0A000\0M"), "{body:?}");
        assert!(body.ends_with(b"\0\0"), "{body:?}");
    }

    #[test]
    fn the_look_at_statements_reads_text_of_any_encoding() {
        assert_eq!(
            refused(b"SET search_path TO x"),
            Some(SessionStatement::Set)
        );
        assert_eq!(refused(b"LISTEN c"), Some(SessionStatement::Listen));
        assert_eq!(refused(b"SELECT 1"), None);
        // Not UTF-8: the words around the bad byte are still read.
        assert_eq!(refused(b"SET x.y = '\xff'"), Some(SessionStatement::Set));
        assert_eq!(refused(b"SELECT '\xff'"), None);
    }

    #[cfg(feature = "tokio-postgres")]
    #[test]
    fn an_untyped_length_needs_four_bytes() {
        assert_eq!(header_len(&[0, 0, 0]), None);
        assert_eq!(header_len(&[0, 0, 0, 8, 4]), Some(8));
        assert_eq!(header_len(&[0xff, 0, 0, 0]), Some(0));
    }
}
