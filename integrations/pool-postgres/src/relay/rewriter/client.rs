//! The driver's side of the [`Rewriter`]: the framing of its messages,
//! every statement name sent as the unnamed statement, and a statement the
//! server may no longer hold parsed again before its use.

use super::{Refusal, Rewriter};
use crate::pooler::SessionStatement;
use crate::relay::statements::{Loaded, Sent};
use crate::relay::wire::{refused, split_cstr, take_header, write_message, Broken};

/// The largest message the relay buffers whole (`Parse`, `Describe`,
/// `Close`); every other message is streamed.
const MAX_BUFFERED_MESSAGE: usize = 256 * 1024 * 1024;
/// The most bytes of a `Bind`'s start (its portal's and its statement's
/// names) the relay buffers before its parameters stream.
const MAX_BIND_NAMES: usize = 64 * 1024;

/// Where the framing of the driver's messages stands.
#[derive(Debug, Default)]
pub(super) struct Framing {
    /// The header (up to 5 bytes), or the whole of a message buffered to be
    /// rewritten.
    buf: Vec<u8>,
    /// The bytes of a whole message being buffered (tag and length
    /// included); 0 while reading a header.
    need: usize,
    /// Body bytes of a streamed message still to pass on as they come.
    pass: usize,
    /// The message being buffered is a `Bind`, of which only the portal's
    /// and the statement's names are buffered; its parameters stream.
    bind: bool,
    /// Body bytes of a message being dropped, still to come.
    discard: usize,
    /// A `Parse` was refused: every message up to the next `Sync` is
    /// dropped.
    skipping: Option<SessionStatement>,
}

impl Rewriter {
    /// Rewrites typed frontend messages (after the startup packet) into
    /// `out`. `Parse`, `Bind`, `Describe` and `Close` are buffered whole
    /// until complete; every other message passes as its bytes come.
    ///
    /// # Errors
    ///
    /// [`Broken`]: the connection must be closed, nothing more sent.
    pub(crate) fn client_bytes(
        &mut self,
        mut input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), Broken> {
        loop {
            if self.client.discard > 0 {
                let n = self.client.discard.min(input.len());
                self.client.discard -= n;
                input = &input[n..];
                if self.client.discard > 0 {
                    return Ok(());
                }
            }
            if self.client.pass > 0 {
                let n = self.client.pass.min(input.len());
                out.extend_from_slice(&input[..n]);
                self.client.pass -= n;
                input = &input[n..];
                if self.client.pass > 0 {
                    return Ok(());
                }
            }
            if self.client.need > 0 && self.client.bind {
                let room = self.client.need - self.client.buf.len();
                let chunk = &input[..room.min(input.len())];
                // The portal's name, then the statement's: both end at a NUL.
                let mut nuls = self.client.buf[5..].iter().filter(|&&b| b == 0).count();
                let end = chunk.iter().position(|&b| {
                    nuls += usize::from(b == 0);
                    nuls == 2
                });
                let Some(end) = end else {
                    self.client.buf.extend_from_slice(chunk);
                    if self.client.buf.len() == self.client.need {
                        return Err(Broken("a statement message that does not parse"));
                    }
                    if self.client.buf.len() > MAX_BIND_NAMES {
                        return Err(Broken("a Bind whose names are too long to rewrite"));
                    }
                    // All of `input` was taken: the names go on next time.
                    return Ok(());
                };
                self.client.buf.extend_from_slice(&chunk[..=end]);
                input = &input[end + 1..];
                let mut names = std::mem::take(&mut self.client.buf);
                let need = std::mem::take(&mut self.client.need);
                self.client.bind = false;
                self.bind_head(&names, need, out)?;
                self.client.pass = need - names.len();
                names.clear();
                self.client.buf = names;
                continue;
            }
            if self.client.need > 0 {
                let n = (self.client.need - self.client.buf.len()).min(input.len());
                self.client.buf.extend_from_slice(&input[..n]);
                input = &input[n..];
                if self.client.buf.len() < self.client.need {
                    return Ok(());
                }
                let mut whole = std::mem::take(&mut self.client.buf);
                self.client.need = 0;
                self.client_message(whole[0], &whole[5..], out)?;
                whole.clear();
                self.client.buf = whole;
                continue;
            }
            if input.is_empty() {
                return Ok(());
            }
            let Some((tag, len)) = take_header(&mut self.client.buf, &mut input)? else {
                return Ok(());
            };
            if let Some(statement) = self.client.skipping {
                if tag != b'S' {
                    self.client.buf.clear();
                    self.client.discard = len - 4;
                    continue;
                }
                // The `Sync` goes on: the server's `ReadyForQuery` for it
                // carries the refusal.
                self.client.skipping = None;
                self.refusals.push_back(Refusal {
                    batch: self.batches_sent,
                    statement,
                    empty_query: false,
                });
            }
            if tag == b'B' {
                self.client.need = 1 + len;
                self.client.bind = true;
                continue;
            }
            if tag == b'Q' && input.len() >= len - 4 {
                // The whole `Query` is here: looked at where it lies.
                let mut head = std::mem::take(&mut self.client.buf);
                self.client_query(&head, &input[..len - 4], out)?;
                input = &input[len - 4..];
                head.clear();
                self.client.buf = head;
                continue;
            }
            if matches!(tag, b'P' | b'D' | b'C' | b'Q') {
                if len > MAX_BUFFERED_MESSAGE {
                    return Err(Broken("a statement message too large to rewrite"));
                }
                self.client.need = 1 + len;
                continue;
            }
            self.client_streamed(tag)?;
            out.extend_from_slice(&self.client.buf);
            self.client.buf.clear();
            self.client.pass = len - 4;
        }
    }

    /// Follows a frontend message that passes unchanged.
    fn client_streamed(&mut self, tag: u8) -> Result<(), Broken> {
        match tag {
            b'S' | b'Q' | b'F' => {
                // Each ends a batch that the server answers with exactly
                // one `ReadyForQuery` (but for a `Sync` in copy-in mode,
                // see below).
                self.ledger.end_batch();
                self.batches_sent += 1;
                if tag == b'S' {
                    self.syncs_since_execute += 1;
                } else {
                    self.syncs_since_execute = 0;
                }
                if tag == b'Q' {
                    // A simple query drops the unnamed statement.
                    self.loaded = None;
                }
            }
            b'E' => self.syncs_since_execute = 0,
            b'c' | b'f' => {
                // `CopyDone` or `CopyFail`: the copy that the last
                // `Execute` (or `Query`) started is over, and the server
                // ignored every `Sync` sent since, as the protocol says:
                // those batches are part of the one that the next `Sync`
                // ends.
                for _ in 0..std::mem::take(&mut self.syncs_since_execute) {
                    if !self.ledger.reopen_last() {
                        return Err(Broken("a copy's end that follows no batch"));
                    }
                    self.batches_sent -= 1;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Rewrites one whole `Parse`, `Describe`, `Close` or `Query`.
    fn client_message(&mut self, tag: u8, body: &[u8], out: &mut Vec<u8>) -> Result<(), Broken> {
        const BAD: Broken = Broken("a statement message that does not parse");
        match tag {
            b'Q' => self.client_query(&[], body, out)?,
            b'P' => {
                let (name, rest) = split_cstr(body).ok_or(BAD)?;
                let (sql, _) = split_cstr(rest).ok_or(BAD)?;
                if let Some(statement) = refused(sql) {
                    // Neither sent nor kept: as a `Parse` that failed.
                    self.client.skipping = Some(statement);
                    return Ok(());
                }
                self.statements.insert(name, rest.to_vec())?;
                self.ledger.parsed(Sent::Client(name.to_vec()));
                self.loaded = Some(Loaded {
                    name: name.to_vec(),
                    batch: self.batches_sent,
                });
                write_message(out, b'P', &[b"\0", rest]);
            }
            b'D' | b'C' if body.first() == Some(&b'S') => {
                let (name, rest) = split_cstr(&body[1..]).ok_or(BAD)?;
                if !rest.is_empty() {
                    return Err(BAD);
                }
                if tag == b'C' {
                    // Closing the unnamed statement is never an error, even
                    // for a name the relay does not know; whichever
                    // statement it held is parsed again when needed.
                    self.statements.remove(name);
                    self.loaded = None;
                    write_message(out, b'C', &[b"S\0"]);
                } else {
                    self.make_current(name, out)?;
                    write_message(out, b'D', &[b"S\0"]);
                }
            }
            // A portal's `Describe` or `Close`.
            _ => write_message(out, tag, &[body]),
        }
        Ok(())
    }

    /// Passes a `Query` (`head`, its header if not written yet, and
    /// `body`), or, if it sets session state, the empty query in its place.
    fn client_query(&mut self, head: &[u8], body: &[u8], out: &mut Vec<u8>) -> Result<(), Broken> {
        let (sql, _) = split_cstr(body).ok_or(Broken("a Query that does not parse"))?;
        match refused(sql) {
            Some(statement) => {
                self.refusals.push_back(Refusal {
                    batch: self.batches_sent,
                    statement,
                    empty_query: true,
                });
                write_message(out, b'Q', &[b"\0"]);
            }
            None if head.is_empty() => write_message(out, b'Q', &[body]),
            None => {
                out.extend_from_slice(head);
                out.extend_from_slice(body);
            }
        }
        self.client_streamed(b'Q')
    }

    /// Rewrites the start of a `Bind` of `need` bytes in all (tag and
    /// length included): `head` is its header and its two names, the
    /// portal's and the statement's. What follows them streams unchanged.
    fn bind_head(&mut self, head: &[u8], need: usize, out: &mut Vec<u8>) -> Result<(), Broken> {
        const BAD: Broken = Broken("a statement message that does not parse");
        let (portal, rest) = split_cstr(&head[5..]).ok_or(BAD)?;
        let (name, _) = split_cstr(rest).ok_or(BAD)?;
        self.make_current(name, out)?;
        // The statement's name goes; the length field shrinks by as much.
        let len = i32::try_from(need - 1 - name.len()).map_err(|_| BAD)?;
        out.push(b'B');
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(portal);
        out.extend_from_slice(b"\0\0");
        Ok(())
    }

    /// Makes sure the server's unnamed statement holds `name` for the
    /// message that follows, adding its `Parse` if it may not.
    ///
    /// # Errors
    ///
    /// A name the relay does not hold (never parsed, closed, or failed):
    /// sent as it is, it would run whatever statement of that name the
    /// shared server session holds, so the connection fails instead.
    fn make_current(&mut self, name: &[u8], out: &mut Vec<u8>) -> Result<(), Broken> {
        let batch = self.batches_sent;
        let held = self.loaded.as_ref().is_some_and(|loaded| {
            loaded.name == name
                && (loaded.batch == batch
                    || (self.batches_answered >= batch
                        && self.last_idle.is_none_or(|idle| idle < loaded.batch)))
        });
        if held {
            return Ok(());
        }
        let Some(body) = self.statements.get(name) else {
            return Err(Broken(
                "the driver used a statement the relay does not hold (never parsed, closed, or \
                 failed)",
            ));
        };
        write_message(out, b'P', &[b"\0", body]);
        self.ledger.parsed(Sent::Injected);
        self.injected += 1;
        self.loaded = Some(Loaded {
            name: name.to_vec(),
            batch,
        });
        Ok(())
    }
}
