//! What the relay's tests share: protocol messages built and read back,
//! and a logged-in rewriter driven from both sides.

use super::rewriter::Rewriter;
use super::wire::{error_response, header, write_message};
use crate::pooler::SessionStatement;

pub(super) fn msg(tag: u8, parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    write_message(&mut out, tag, parts);
    out
}

pub(super) fn parse(name: &str, sql: &str) -> Vec<u8> {
    msg(
        b'P',
        &[name.as_bytes(), b"\0", sql.as_bytes(), b"\0", &[0, 0]],
    )
}

pub(super) fn bind(name: &str) -> Vec<u8> {
    msg(b'B', &[b"\0", name.as_bytes(), b"\0", &[0, 0, 0, 0, 0, 0]])
}

pub(super) fn execute() -> Vec<u8> {
    msg(b'E', &[b"\0", &[0, 0, 0, 0]])
}

pub(super) fn sync() -> Vec<u8> {
    msg(b'S', &[])
}

pub(super) fn ready(status: u8) -> Vec<u8> {
    msg(b'Z', &[&[status]])
}

pub(super) fn parse_complete() -> Vec<u8> {
    msg(b'1', &[])
}

pub(super) fn bind_complete() -> Vec<u8> {
    msg(b'2', &[])
}

pub(super) fn command_complete(tag: &str) -> Vec<u8> {
    msg(b'C', &[tag.as_bytes(), b"\0"])
}

/// The messages of a byte stream as (tag, body).
pub(super) fn messages(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some((tag, len)) = header(bytes) {
        out.push((tag, bytes[5..1 + len].to_vec()));
        bytes = &bytes[1 + len..];
    }
    assert!(bytes.is_empty(), "trailing bytes");
    out
}

pub(super) fn tags(bytes: &[u8]) -> Vec<u8> {
    messages(bytes).iter().map(|m| m.0).collect()
}

pub(super) fn logged_in_with(mut rw: Rewriter) -> Rewriter {
    let mut out = Vec::new();
    rw.server_bytes(&ready(b'I'), &mut out).expect("login");
    assert_eq!(out, ready(b'I'));
    rw
}

pub(super) fn logged_in() -> Rewriter {
    logged_in_with(Rewriter::default())
}

/// Client bytes through `rw`; what reaches the server.
pub(super) fn up(rw: &mut Rewriter, input: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    rw.client_bytes(&input.concat(), &mut out)
        .expect("client bytes");
    out
}

/// Server bytes through `rw`; what reaches the driver.
pub(super) fn down(rw: &mut Rewriter, input: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    rw.server_bytes(&input.concat(), &mut out)
        .expect("server bytes");
    out
}

/// Whether `bytes` name `name` as a statement anywhere.
pub(super) fn names(bytes: &[u8], name: &str) -> bool {
    bytes
        .windows(name.len() + 1)
        .any(|w| w[..name.len()] == *name.as_bytes() && w[name.len()] == 0)
}

pub(super) fn query(sql: &str) -> Vec<u8> {
    msg(b'Q', &[sql.as_bytes(), b"\0"])
}

/// The `ErrorResponse` of a refused statement, as the driver gets it.
pub(super) fn refusal(statement: SessionStatement) -> Vec<u8> {
    let mut out = Vec::new();
    error_response(&mut out, statement);
    out
}
