//! An in-process relay between a PostgreSQL driver and a transaction-mode
//! pooler that turns every prepared statement into the unnamed one.
//!
//! Behind a pooler in transaction mode, a named statement is left on
//! whichever server connection ran its `Parse`, where the next client
//! numbering its statements the same way meets it ("prepared statement
//! ... already exists"), and is missing from the server connection the next
//! transaction runs on ("... does not exist"). The unnamed statement has
//! neither problem: each `Parse` replaces it, and it lives only on the
//! server connection of the moment.
//!
//! The relay reads the frontend protocol the driver writes and sends every
//! statement name of `Parse`, `Bind`, `Describe` (statement) and `Close`
//! (statement) to the server as the unnamed statement (lengths recomputed).
//! It keeps each statement's `Parse` body by the driver's name, and follows
//! which of them the server's unnamed statement holds now. A `Bind` or
//! `Describe` of a statement the server may no longer hold (another
//! statement was parsed since, or a `ReadyForQuery` said "idle", after which
//! the pooler may move the client to another server connection) is preceded
//! by that statement's `Parse` again, in the same message batch, and the
//! server's `ParseComplete` for it is kept from the driver. So the driver's
//! own statement cache keeps working (one round trip per cached query),
//! while no name ever reaches the server.
//!
//! Safety rules, each of which closes the connection (both sides; the
//! driver sees its connection fail and the pool drops it) rather than guess:
//!
//! - A statement is kept until the driver closes it or its last `Parse` fails,
//!   never evicted: a `Bind` or `Describe` of a name the relay does not
//!   hold would run whatever statement of that name the shared server
//!   session holds, so it is never sent. Memory is bounded by a limit on
//!   the statements held; past it the connection fails.
//! - Replies are matched to the driver's batches (`Sync`, `Query`,
//!   `FunctionCall`), counting that the server ignores a `Sync` sent in
//!   copy-in mode (tokio-postgres's `copy_in` sends one before its data).
//!   A `ParseComplete` or `ReadyForQuery` that belongs to no batch, or
//!   framing that does not parse, ends the connection.
//!
//! Statements that set session state (`SET`, `LISTEN`, session-level
//! advisory locks, see [`SessionStatement`]) are refused: the relay looks
//! at the text of every `Query` and `Parse` (the look of the pooled
//! tokio-postgres client) and sends none of a refused one. A refused
//! `Query` goes to the server as the empty query, and the server's
//! `EmptyQueryResponse` is replaced by an `ErrorResponse` of SQLSTATE
//! `0A000` with the refusal's message. After a refused `Parse`, every
//! message up to the driver's `Sync` is dropped, as a server drops them
//! after an error; the `Sync` goes on, and the `ErrorResponse` is placed
//! before the server's `ReadyForQuery` for it, after the replies to what
//! the batch sent before the `Parse` (unless one of those failed, which is
//! then the batch's one error). So the driver gets the answers it expects,
//! in order, and the server's status in `ReadyForQuery`: nothing of the
//! refused statement ran, an open transaction is not failed. The refusal
//! is answered with the batch's `ReadyForQuery`, so a driver that waits for
//! a reply to a `Flush` before its `Sync` would wait; neither
//! tokio-postgres nor sqlx does.
//!
//! Only `Parse`, `Describe`, `Close` and `Query` are buffered whole, and of
//! a `Bind` its two names; every other byte, parameters, rows and copy data
//! included, passes through as it arrives. Replies are rewritten where
//! they lie, nothing held back, but for the bytes that follow an added
//! `ErrorResponse` in the same read (see `Rewriter::take_owed`).
//!
//! For tokio-postgres, which takes any stream, the rewriting runs inside
//! the driver's own stream (`Rewriting`): no socket and no task sit
//! between driver and pooler. sqlx cannot take a stream, so its driver
//! reaches a relay task over a private Unix socket ([`Relay::start`]).
//!
//! Only the plaintext protocol can be read: with TLS to the pooler nothing
//! can be rewritten, and the managers refuse that combination.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::pooler::SessionStatement;

/// `SSLRequest`'s code in the untyped first message.
const SSL_REQUEST: i32 = 80_877_103;
/// `GSSENCRequest`'s code.
const GSSENC_REQUEST: i32 = 80_877_104;
/// `CancelRequest`'s code.
const CANCEL_REQUEST: i32 = 80_877_102;
/// How large a startup packet may be (PostgreSQL's own limit is 10,000).
const MAX_STARTUP: usize = 10_000;
/// Bytes read at a time from either side.
const READ_CHUNK: usize = 16 * 1024;

/// Relays alive in this process (their tasks not yet ended).
static OPEN_RELAYS: AtomicUsize = AtomicUsize::new(0);

/// How many relays are running in this process: one per open connection of
/// a manager in transaction pooler mode, plus any whose connection is being
/// opened. Each ends when its connection (or its server) closes.
pub fn open_relays() -> usize {
    OPEN_RELAYS.load(Ordering::Relaxed)
}

/// One driver-side statement name, as bytes without the trailing NUL.
type Name = Vec<u8>;

/// How many statements one relay holds for its driver, at most: past it the
/// connection fails (the relay never forgets a statement the driver has
/// not closed).
const MAX_STATEMENTS: usize = 10_000;
/// How many bytes of `Parse` bodies one relay holds, at most.
const MAX_STATEMENT_BYTES: usize = 32 * 1024 * 1024;
/// The largest message the relay buffers whole (`Parse`, `Describe`,
/// `Close`); every other message is streamed.
const MAX_BUFFERED_MESSAGE: usize = 256 * 1024 * 1024;
/// The most bytes of a `Bind`'s start (its portal's and its statement's
/// names) the relay buffers before its parameters stream.
const MAX_BIND_NAMES: usize = 64 * 1024;

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

/// A `Parse` the server will answer with `ParseComplete`, in order.
#[derive(Debug)]
enum Sent {
    /// The driver's own `Parse` of this name.
    Client(Name),
    /// A `Parse` the relay added before a `Bind` or `Describe`: its
    /// `ParseComplete` is not the driver's to see.
    Injected,
}

/// The `Parse` bodies (everything after the name) by the driver's names:
/// every statement the driver parsed and has not closed (nor failed to
/// parse), never evicted; bounded by failing the connection instead.
#[derive(Debug)]
struct Statements {
    by_name: HashMap<Name, Vec<u8>>,
    bytes: usize,
    max_count: usize,
    max_bytes: usize,
}

impl Statements {
    fn new(max_count: usize, max_bytes: usize) -> Self {
        Self {
            by_name: HashMap::new(),
            bytes: 0,
            max_count,
            max_bytes,
        }
    }

    fn insert(&mut self, name: &[u8], body: Vec<u8>) -> Result<(), Broken> {
        self.bytes += body.len();
        if let Some(old) = self.by_name.insert(name.to_vec(), body) {
            self.bytes -= old.len();
        }
        if self.by_name.len() > self.max_count || self.bytes > self.max_bytes {
            return Err(Broken(
                "the driver holds more statements than the relay keeps for one connection",
            ));
        }
        Ok(())
    }

    fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.by_name.get(name).map(Vec::as_slice)
    }

    fn remove(&mut self, name: &[u8]) {
        if let Some(body) = self.by_name.remove(name) {
            self.bytes -= body.len();
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_name.len()
    }
}

/// Which of the driver's statements the server's unnamed statement holds,
/// and in which message batch (counted by `Sync`s) it was parsed.
#[derive(Debug)]
struct Loaded {
    name: Name,
    batch: u64,
}

/// Where the framing of the driver's messages stands.
#[derive(Debug, Default)]
struct Framing {
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

/// A refused statement, answered with an `ErrorResponse` in its batch.
#[derive(Debug)]
struct Refusal {
    /// The batch, counted as `batches_sent` counts them.
    batch: u64,
    statement: SessionStatement,
    /// A `Query` sent as the empty query, whose `EmptyQueryResponse` is
    /// not the driver's to see.
    empty_query: bool,
}

/// Where the framing of the replies stands. Nothing is held: each byte
/// goes on to the driver or is dropped as it comes, decided by its
/// message's tag, so the replies can be rewritten in the driver's own
/// buffer.
#[derive(Debug, Default)]
struct Replies {
    /// Header bytes of the current message seen so far (0 to 5).
    head: u8,
    /// The current message's tag.
    tag: u8,
    /// Its length field, as far as it came.
    len: [u8; 4],
    /// Body bytes of the current message still to come.
    pass: usize,
    /// Whether the current message is dropped rather than passed.
    drop: bool,
    /// A `ReadyForQuery` whose status byte is still to come.
    want_status: bool,
}

/// The relay's protocol state: a rewriter for each direction, sharing what
/// the server holds.
#[derive(Debug)]
pub(crate) struct Rewriter {
    client: Framing,
    server: Replies,
    /// The first `ReadyForQuery` (end of the login) was seen.
    logged_in: bool,
    statements: Statements,
    loaded: Option<Loaded>,
    /// Batches the driver ended (`Sync`, `Query`, `FunctionCall`), less
    /// the `Sync`s the server ignored in copy-in mode.
    batches_sent: u64,
    /// Batches the server answered (`ReadyForQuery` after login).
    batches_answered: u64,
    /// The last answered batch after which the session was idle.
    last_idle: Option<u64>,
    /// The `Parse`s of the batch being written.
    open_batch: VecDeque<Sent>,
    /// The `Parse`s of the batches sent and not answered yet, oldest first.
    sent_batches: VecDeque<VecDeque<Sent>>,
    /// `Sync`s the driver sent since its last `Execute` or `Query`: if that
    /// one started a `COPY FROM STDIN`, the server ignores them.
    syncs_since_execute: u64,
    /// `Parse`s added by the relay, for tests and logs.
    injected: u64,
    /// Refused statements whose batches are not answered yet, oldest
    /// first.
    refusals: VecDeque<Refusal>,
    /// Bytes for the driver that follow an added `ErrorResponse`, not yet
    /// taken (see [`take_owed`](Self::take_owed)).
    owed: Vec<u8>,
}

impl Default for Rewriter {
    fn default() -> Self {
        Self::with_limits(MAX_STATEMENTS, MAX_STATEMENT_BYTES)
    }
}

impl Rewriter {
    /// A rewriter for one connection that holds at most `max_count`
    /// statements, of at most `max_bytes` in all.
    pub(crate) fn with_limits(max_count: usize, max_bytes: usize) -> Self {
        Self {
            client: Framing::default(),
            server: Replies::default(),
            logged_in: false,
            statements: Statements::new(max_count, max_bytes),
            loaded: None,
            batches_sent: 0,
            batches_answered: 0,
            last_idle: None,
            open_batch: VecDeque::new(),
            sent_batches: VecDeque::new(),
            syncs_since_execute: 0,
            injected: 0,
            refusals: VecDeque::new(),
            owed: Vec::new(),
        }
    }

    /// Bytes for the driver beyond what the last
    /// [`server_in_place`](Self::server_in_place) left in its buffer: an
    /// added `ErrorResponse` and what followed it in that read. They go to
    /// the driver before anything read after; empty when nothing is owed.
    /// (The relay task's [`server_bytes`](Self::server_bytes) takes them
    /// itself.)
    #[cfg_attr(not(feature = "tokio-postgres"), allow(dead_code))]
    pub(crate) fn take_owed(&mut self) -> &mut Vec<u8> {
        &mut self.owed
    }

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
                self.sent_batches
                    .push_back(std::mem::take(&mut self.open_batch));
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
                    let Some(mut ignored) = self.sent_batches.pop_back() else {
                        return Err(Broken("a copy's end that follows no batch"));
                    };
                    ignored.append(&mut self.open_batch);
                    self.open_batch = ignored;
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
                self.open_batch.push_back(Sent::Client(name.to_vec()));
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
        self.open_batch.push_back(Sent::Injected);
        self.injected += 1;
        self.loaded = Some(Loaded {
            name: name.to_vec(),
            batch,
        });
        Ok(())
    }

    /// Passes backend messages into `out`, streamed as their bytes come,
    /// but for the `ParseComplete`s of the relay's own `Parse`s, which are
    /// dropped.
    ///
    /// # Errors
    ///
    /// [`Broken`]: a reply the relay cannot place, or broken framing.
    pub(crate) fn server_bytes(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), Broken> {
        let start = out.len();
        out.extend_from_slice(input);
        let kept = self.server_in_place(&mut out[start..])?;
        out.truncate(start + kept);
        out.append(&mut self.owed);
        Ok(())
    }

    /// Rewrites backend bytes where they lie, as [`server_bytes`](Self::server_bytes)
    /// does: what goes on to the driver is moved to the front of `buf`, and
    /// its length returned. Nothing is held back between calls, but for an
    /// `ErrorResponse` added for a refused statement: it and every byte for
    /// the driver after it in `buf` are owed instead (see
    /// [`take_owed`](Self::take_owed)), to go before the next call's. Call
    /// it only with nothing owed.
    ///
    /// # Errors
    ///
    /// [`Broken`]: a reply the relay cannot place, or broken framing.
    pub(crate) fn server_in_place(&mut self, buf: &mut [u8]) -> Result<usize, Broken> {
        let (mut read, mut kept) = (0, 0);
        while read < buf.len() {
            if self.server.head == 0 && buf.len() - read >= 5 {
                // A whole header: the message at once, as far as it came.
                let tag = buf[read];
                let len = [buf[read + 1], buf[read + 2], buf[read + 3], buf[read + 4]];
                // A negative length breaks the framing, as one below 4 does.
                let len = usize::try_from(i32::from_be_bytes(len)).unwrap_or(0);
                self.server.drop = !self.server_message(tag)?;
                self.server_length(tag, len)?;
                let here = (1 + len).min(buf.len() - read);
                if self.server.want_status && here > 5 {
                    self.server.want_status = false;
                    self.ready(buf[read + 5])?;
                }
                if !self.server.drop {
                    if !self.owed.is_empty() {
                        self.owed.extend_from_slice(&buf[read..read + here]);
                    } else {
                        if kept != read {
                            buf.copy_within(read..read + here, kept);
                        }
                        kept += here;
                    }
                }
                read += here;
                if here < 1 + len {
                    self.server.head = 5;
                    self.server.pass = 1 + len - here;
                }
                continue;
            }
            if self.server.head < 5 {
                let byte = buf[read];
                read += 1;
                if self.server.head == 0 {
                    self.server.tag = byte;
                    self.server.drop = !self.server_message(byte)?;
                } else {
                    self.server.len[usize::from(self.server.head) - 1] = byte;
                }
                self.server.head += 1;
                if !self.server.drop {
                    if !self.owed.is_empty() {
                        self.owed.push(byte);
                    } else {
                        buf[kept] = byte;
                        kept += 1;
                    }
                }
                if self.server.head == 5 {
                    // A negative length breaks the framing, as one below 4 does.
                    let len = usize::try_from(i32::from_be_bytes(self.server.len)).unwrap_or(0);
                    self.server_length(self.server.tag, len)?;
                    self.server.pass = len - 4;
                    if self.server.pass == 0 {
                        self.server.head = 0;
                    }
                }
                continue;
            }
            if self.server.want_status {
                self.server.want_status = false;
                self.ready(buf[read])?;
            }
            let n = self.server.pass.min(buf.len() - read);
            if !self.server.drop {
                if !self.owed.is_empty() {
                    self.owed.extend_from_slice(&buf[read..read + n]);
                } else {
                    if kept != read {
                        buf.copy_within(read..read + n, kept);
                    }
                    kept += n;
                }
            }
            read += n;
            self.server.pass -= n;
            if self.server.pass == 0 {
                self.server.head = 0;
            }
        }
        Ok(kept)
    }

    /// Follows a backend message from its tag; whether it goes on to the
    /// driver.
    fn server_message(&mut self, tag: u8) -> Result<bool, Broken> {
        if !self.logged_in {
            if tag == b'Z' {
                self.logged_in = true;
            }
            return Ok(true);
        }
        // The batch being answered, if it holds a refused statement.
        let refusal = self
            .refusals
            .front()
            .filter(|refusal| refusal.batch == self.batches_answered);
        match (tag, refusal) {
            (b'I', Some(refusal)) if refusal.empty_query => return Ok(false),
            (b'E', Some(_)) => {
                // The server failed the batch before the refused statement:
                // that is the batch's one error.
                self.refusals.pop_front();
            }
            (b'Z', Some(_)) => {
                if let Some(refusal) = self.refusals.pop_front() {
                    error_response(&mut self.owed, refusal.statement);
                }
            }
            _ => {}
        }
        match tag {
            b'1' => {
                let oldest = match self.sent_batches.front_mut() {
                    Some(batch) => batch.pop_front(),
                    None => self.open_batch.pop_front(),
                };
                match oldest {
                    Some(Sent::Client(_)) => Ok(true),
                    Some(Sent::Injected) => Ok(false),
                    None => Err(Broken("a ParseComplete the relay cannot place")),
                }
            }
            b'E' => {
                // The server skips the rest of the batch: its `Parse`s not
                // yet answered never ran.
                let skipped = match self.sent_batches.front_mut() {
                    Some(batch) => std::mem::take(batch),
                    None => std::mem::take(&mut self.open_batch),
                };
                for sent in skipped {
                    if let Sent::Client(name) = sent {
                        // A later batch (sent, or being written) may parse
                        // the name again: that `Parse` stands, and the body
                        // kept is already its own (each `Parse` replaces
                        // it). Its own error, if it fails, forgets it.
                        let parsed_again = self
                            .sent_batches
                            .iter()
                            .flatten()
                            .chain(&self.open_batch)
                            .any(|later| matches!(later, Sent::Client(n) if *n == name));
                        if !parsed_again {
                            self.statements.remove(&name);
                        }
                    }
                }
                self.loaded = None;
                Ok(true)
            }
            b'Z' => {
                if self.sent_batches.pop_front().is_none() {
                    return Err(Broken("a ReadyForQuery the relay cannot place"));
                }
                self.server.want_status = true;
                Ok(true)
            }
            _ => Ok(true),
        }
    }

    /// Checks a backend message's length field, once its header is whole.
    fn server_length(&self, tag: u8, len: usize) -> Result<(), Broken> {
        if len < 4 {
            return Err(Broken("a message of a bad length"));
        }
        if tag == b'Z' && self.logged_in && len != 5 {
            return Err(Broken("a ReadyForQuery of a bad length"));
        }
        Ok(())
    }

    /// The status byte of a `ReadyForQuery` (placed by its header).
    fn ready(&mut self, status: u8) -> Result<(), Broken> {
        let answered = self.batches_answered;
        self.batches_answered += 1;
        if self.batches_answered > self.batches_sent {
            return Err(Broken("more ReadyForQuery than batches sent"));
        }
        if status == b'I' {
            self.last_idle = Some(answered);
        }
        Ok(())
    }

    /// `Parse`s the relay added so far.
    #[cfg(test)]
    fn injected(&self) -> u64 {
        self.injected
    }
}

/// Completes a message header in `buf` from `input`: its tag and length
/// field once all five bytes are there.
///
/// # Errors
///
/// A length below 4 (or negative), which breaks the framing.
fn take_header(buf: &mut Vec<u8>, input: &mut &[u8]) -> Result<Option<(u8, usize)>, Broken> {
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
fn header(bytes: &[u8]) -> Option<(u8, usize)> {
    let head: [u8; 5] = bytes.get(..5)?.try_into().ok()?;
    let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    // A negative length breaks the framing, as one below 4 does.
    Some((head[0], usize::try_from(len).unwrap_or(0)))
}

/// The statement `sql` sets session state with, if the look at it refuses
/// one.
fn refused(sql: &[u8]) -> Option<SessionStatement> {
    match std::str::from_utf8(sql) {
        Ok(sql) => SessionStatement::in_text(sql),
        // Not UTF-8 (another client encoding): the look reads ASCII words
        // only, which survive the replacement characters.
        Err(_) => SessionStatement::in_text(&String::from_utf8_lossy(sql)),
    }
}

/// Appends the `ErrorResponse` of a refused statement: SQLSTATE `0A000`
/// (`feature_not_supported`), the refusal's message.
fn error_response(out: &mut Vec<u8>, statement: SessionStatement) {
    let message = statement.to_string();
    write_message(
        out,
        b'E',
        &[b"SERROR\0VERROR\0C0A000\0M", message.as_bytes(), b"\0\0"],
    );
}

/// A NUL-terminated string and what follows its NUL.
fn split_cstr(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let nul = bytes.iter().position(|&b| b == 0)?;
    Some((&bytes[..nul], &bytes[nul + 1..]))
}

/// Appends one typed message made of `parts`.
fn write_message(out: &mut Vec<u8>, tag: u8, parts: &[&[u8]]) {
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

/// Where the relay reaches the pooler.
#[derive(Debug, Clone)]
pub enum Upstream {
    /// A TCP host and port.
    Tcp(String, u16),
    /// A Unix domain socket file.
    #[cfg_attr(not(unix), allow(dead_code))]
    Unix(PathBuf),
}

/// The pooler's end of a relay: one socket, either kind.
pub(crate) enum ServerStream {
    /// Over TCP.
    Tcp(tokio::net::TcpStream),
    /// Over a Unix domain socket.
    #[cfg(unix)]
    Unix(tokio::net::UnixStream),
}

impl AsyncRead for ServerStream {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => std::pin::Pin::new(s).poll_read(cx, buf),
            #[cfg(unix)]
            Self::Unix(s) => std::pin::Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ServerStream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Tcp(s) => std::pin::Pin::new(s).poll_write(cx, buf),
            #[cfg(unix)]
            Self::Unix(s) => std::pin::Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => std::pin::Pin::new(s).poll_flush(cx),
            #[cfg(unix)]
            Self::Unix(s) => std::pin::Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => std::pin::Pin::new(s).poll_shutdown(cx),
            #[cfg(unix)]
            Self::Unix(s) => std::pin::Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// TCP keepalive for the relay's socket to the pooler: the first probe
/// after `idle`, then every `interval`, giving up after `retries`.
#[cfg(feature = "tokio-postgres")]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keepalive {
    pub(crate) idle: std::time::Duration,
    pub(crate) interval: Option<std::time::Duration>,
    pub(crate) retries: Option<u32>,
}

#[cfg(feature = "tokio-postgres")]
impl Keepalive {
    /// Turns keepalive on for `stream`.
    ///
    /// # Errors
    ///
    /// The socket option's error.
    fn apply(&self, stream: &tokio::net::TcpStream) -> io::Result<()> {
        let mut keepalive = socket2::TcpKeepalive::new().with_time(self.idle);
        #[cfg(any(
            target_os = "linux",
            target_os = "android",
            target_os = "macos",
            target_os = "ios",
            target_os = "freebsd",
            target_os = "netbsd",
            windows
        ))]
        if let Some(interval) = self.interval {
            keepalive = keepalive.with_interval(interval);
        }
        #[cfg(any(
            target_os = "linux",
            target_os = "android",
            target_os = "macos",
            target_os = "ios",
            target_os = "freebsd",
            target_os = "netbsd"
        ))]
        if let Some(retries) = self.retries {
            keepalive = keepalive.with_retries(retries);
        }
        socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive)
    }
}

impl Upstream {
    /// Connects to the pooler.
    ///
    /// # Errors
    ///
    /// The I/O error of the connect (refused, unreachable, unknown host).
    pub(crate) async fn connect(&self) -> io::Result<ServerStream> {
        match self {
            Self::Tcp(host, port) => {
                let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                stream.set_nodelay(true)?;
                Ok(ServerStream::Tcp(stream))
            }
            #[cfg(unix)]
            Self::Unix(path) => Ok(ServerStream::Unix(
                tokio::net::UnixStream::connect(path).await?,
            )),
            #[cfg(not(unix))]
            Self::Unix(path) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "Unix domain sockets ({}) need a Unix platform",
                    path.display()
                ),
            )),
        }
    }
}

/// A started relay: where the driver connects, and what stops the relay
/// if the driver never does.
#[doc(hidden)]
#[derive(Debug)]
pub struct Relay {
    /// The directory holding the relay's socket file, for the driver's
    /// `socket` option.
    pub dir: PathBuf,
    /// The port the socket file is named after (`.s.PGSQL.<port>`).
    pub port: u16,
    /// Dropped once the driver's connect is over: a relay still waiting for
    /// its driver then ends.
    _armed: tokio::sync::oneshot::Sender<()>,
}

/// The port the relay's socket file is named after.
#[doc(hidden)]
const RELAY_PORT: u16 = 5432;

/// Counts relays for unique directory names.
#[doc(hidden)]
static NEXT_RELAY: AtomicU64 = AtomicU64::new(0);

/// Removes the relay's socket file and directory when dropped.
#[doc(hidden)]
struct SocketDir {
    dir: PathBuf,
    file: PathBuf,
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Counts a relay as open for as long as it lives.
struct OpenRelay;

impl OpenRelay {
    fn new() -> Self {
        OPEN_RELAYS.fetch_add(1, Ordering::Relaxed);
        Self
    }
}

impl Drop for OpenRelay {
    fn drop(&mut self) {
        OPEN_RELAYS.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Relay {
    #[doc(hidden)]
    /// Connects to the pooler, then listens on a Unix socket in a new
    /// directory only this user can enter, and spawns the task that accepts
    /// the driver's one connection and relays it, rewriting statements with
    /// a `Rewriter`.
    ///
    /// The task ends when either side closes, or, if the driver never
    /// connected, when the returned value is dropped. The socket file and
    /// its directory are removed as soon as the driver is connected.
    ///
    /// # Errors
    ///
    /// The I/O error of the connect to the pooler or of the listener.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (the drivers need one anyway).
    #[cfg(unix)]
    pub async fn start(upstream: &Upstream) -> io::Result<Relay> {
        use std::os::unix::fs::DirBuilderExt;

        let server = upstream.connect().await?;
        let dir = std::env::temp_dir().join(format!(
            "pool-core-relay-{}-{}-{:016x}",
            std::process::id(),
            NEXT_RELAY.fetch_add(1, Ordering::Relaxed),
            fastrand::u64(..),
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let file = dir.join(format!(".s.PGSQL.{RELAY_PORT}"));
        let socket = SocketDir {
            dir: dir.clone(),
            file,
        };
        let listener = tokio::net::UnixListener::bind(&socket.file)?;
        let (armed, disarmed) = tokio::sync::oneshot::channel::<()>();
        let open = OpenRelay::new();
        tokio::spawn(async move {
            let _open = open;
            let accepted = {
                let accept = std::pin::pin!(listener.accept());
                match futures_util::future::select(accept, disarmed).await {
                    futures_util::future::Either::Left((accepted, _)) => accepted,
                    futures_util::future::Either::Right(_) => return,
                }
            };
            drop(listener);
            drop(socket);
            match accepted {
                Ok((client, _)) => {
                    log_end(relay(client, server, Rewriter::default()).await);
                }
                Err(error) => tracing::debug!(%error, "statement relay could not accept"),
            }
        });
        Ok(Relay {
            dir,
            port: RELAY_PORT,
            _armed: armed,
        })
    }

    /// Connects to the pooler (with TCP `keepalive`, if given) and returns
    /// the driver's stream to it with the relay's rewriting inside, for
    /// drivers that take a stream (`tokio_postgres::Config::connect_raw`):
    /// see [`Rewriting`].
    ///
    /// # Errors
    ///
    /// The I/O error of the connect to the pooler or of the keepalive
    /// option.
    #[cfg(feature = "tokio-postgres")]
    pub(crate) async fn rewriting(
        upstream: &Upstream,
        keepalive: Option<Keepalive>,
    ) -> io::Result<Rewriting<ServerStream>> {
        let server = upstream.connect().await?;
        if let (ServerStream::Tcp(tcp), Some(keepalive)) = (&server, keepalive) {
            keepalive.apply(tcp)?;
        }
        Ok(Rewriting::new(server))
    }

    /// On platforms without Unix domain sockets there is no private place
    /// for the relay to listen.
    ///
    /// # Errors
    ///
    /// Always `Unsupported`: see [`Upstream`].
    #[cfg(not(unix))]
    pub(crate) async fn start(_upstream: &Upstream) -> io::Result<Relay> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the transaction pooler mode's relay needs Unix domain sockets",
        ))
    }
}

/// Where the driver's untyped startup packets stand in a [`Rewriting`]
/// stream.
#[cfg(feature = "tokio-postgres")]
#[derive(Debug)]
enum Startup {
    /// A startup packet (or `SSLRequest`, `GSSENCRequest`,
    /// `CancelRequest`), as far as it came.
    Packet(Vec<u8>),
    /// The startup packet went on: typed messages follow, rewritten.
    Done,
    /// A cancel request went on: the rest passes unread.
    Raw,
}

/// The driver's stream to the pooler with the relay's rewriting inside it,
/// for drivers that take any stream (`tokio_postgres::Config::connect_raw`):
/// what the driver writes is rewritten into a buffer and written on to the
/// pooler, and what the pooler answers is rewritten in the driver's own
/// read buffer. No socket and no task sit in between; the rules are the
/// `Rewriter`'s, as in the relay task.
///
/// An `SSLRequest` or `GSSENCRequest` is answered "no" here, as the relay
/// does. Once the rewriter gives up ([`Broken`]), every read and write
/// fails with an `InvalidData` error, so the driver's connection ends and
/// the pooler's socket is closed with it.
#[cfg(feature = "tokio-postgres")]
pub(crate) struct Rewriting<S> {
    inner: S,
    rewriter: Rewriter,
    startup: Startup,
    /// Rewritten driver bytes not yet written to the pooler, from `sent`.
    pending: Vec<u8>,
    sent: usize,
    /// An answer "no" owed to the driver for its `SSLRequest`.
    refuse_tls: bool,
    broken: Option<Broken>,
    _open: OpenRelay,
}

#[cfg(feature = "tokio-postgres")]
impl<S> Rewriting<S> {
    /// Rewrites the driver's connection over `inner`, the pooler's socket.
    pub(crate) fn new(inner: S) -> Self {
        Self::with_rewriter(inner, Rewriter::default())
    }

    fn with_rewriter(inner: S, rewriter: Rewriter) -> Self {
        Self {
            inner,
            rewriter,
            startup: Startup::Packet(Vec::new()),
            pending: Vec::new(),
            sent: 0,
            refuse_tls: false,
            broken: None,
            _open: OpenRelay::new(),
        }
    }

    /// The error of a rewriter that gave up, logged once.
    fn fail(&mut self, broken: Broken) -> io::Error {
        if self.broken.is_none() {
            tracing::warn!(error = %broken, "statement relay to the pooler ended");
        }
        let error = io::Error::from(broken.clone());
        self.broken = Some(broken);
        error
    }

    /// Takes the startup packets from the front of `input`: a packet goes
    /// to `pending` once whole, an `SSLRequest` or `GSSENCRequest` is
    /// answered here.
    fn take_startup(&mut self, input: &mut &[u8]) -> io::Result<()> {
        while let Startup::Packet(packet) = &mut self.startup {
            if input.is_empty() {
                return Ok(());
            }
            let want = match header_len(packet) {
                None => 4,
                Some(len) if (8..=MAX_STARTUP).contains(&len) => len,
                Some(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "a startup packet of a bad length",
                    ))
                }
            };
            let n = (want - packet.len()).min(input.len());
            packet.extend_from_slice(&input[..n]);
            *input = &input[n..];
            if packet.len() < 8 || packet.len() < want {
                continue;
            }
            let code = i32::from_be_bytes([packet[4], packet[5], packet[6], packet[7]]);
            match code {
                SSL_REQUEST | GSSENC_REQUEST => {
                    packet.clear();
                    self.refuse_tls = true;
                }
                CANCEL_REQUEST => {
                    self.pending.extend_from_slice(packet);
                    self.startup = Startup::Raw;
                }
                _ => {
                    self.pending.extend_from_slice(packet);
                    self.startup = Startup::Done;
                }
            }
        }
        Ok(())
    }
}

/// The length field of an untyped packet, once its four bytes are there.
#[cfg(feature = "tokio-postgres")]
fn header_len(packet: &[u8]) -> Option<usize> {
    let len: [u8; 4] = packet.get(..4)?.try_into().ok()?;
    Some(usize::try_from(i32::from_be_bytes(len)).unwrap_or(0))
}

#[cfg(feature = "tokio-postgres")]
impl<S: AsyncWrite + Unpin> Rewriting<S> {
    /// Writes what is pending to the pooler.
    fn poll_drain(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        while self.sent < self.pending.len() {
            let n = std::task::ready!(
                std::pin::Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.sent..])
            )?;
            if n == 0 {
                return std::task::Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.pending.clear();
        self.sent = 0;
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(feature = "tokio-postgres")]
impl<S: AsyncWrite + Unpin> AsyncWrite for Rewriting<S> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(broken) = &this.broken {
            return std::task::Poll::Ready(Err(broken.clone().into()));
        }
        // What was rewritten before goes first: the buffer holds at most
        // one write's worth.
        std::task::ready!(this.poll_drain(cx))?;
        let mut input = buf;
        this.take_startup(&mut input)?;
        match this.startup {
            Startup::Done => {
                if let Err(broken) = this.rewriter.client_bytes(input, &mut this.pending) {
                    return std::task::Poll::Ready(Err(this.fail(broken)));
                }
            }
            Startup::Raw => this.pending.extend_from_slice(input),
            Startup::Packet(_) => {}
        }
        // `buf` is taken whole; what the pooler does not take now is
        // written by the next write or flush.
        if let std::task::Poll::Ready(Err(error)) = this.poll_drain(cx) {
            return std::task::Poll::Ready(Err(error));
        }
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_drain(cx))?;
        std::pin::Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_drain(cx))?;
        std::pin::Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(feature = "tokio-postgres")]
impl<S: AsyncRead + Unpin> AsyncRead for Rewriting<S> {
    /// Reads from the pooler into `buf` and rewrites there: only what the
    /// driver is to see stays. Replies wholly the relay's own (the
    /// `ParseComplete` of a `Parse` it added) are read past, so an empty
    /// read still means the pooler closed.
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(broken) = &this.broken {
            return std::task::Poll::Ready(Err(broken.clone().into()));
        }
        if this.refuse_tls && buf.remaining() > 0 {
            this.refuse_tls = false;
            buf.put_slice(b"N");
            return std::task::Poll::Ready(Ok(()));
        }
        if this.put_owed(buf) {
            return std::task::Poll::Ready(Ok(()));
        }
        let start = buf.filled().len();
        loop {
            std::task::ready!(std::pin::Pin::new(&mut this.inner).poll_read(cx, buf))?;
            let end = buf.filled().len();
            if end == start || matches!(this.startup, Startup::Raw) {
                return std::task::Poll::Ready(Ok(()));
            }
            match this
                .rewriter
                .server_in_place(&mut buf.filled_mut()[start..])
            {
                Ok(kept) => buf.set_filled(start + kept),
                Err(broken) => {
                    buf.set_filled(start);
                    return std::task::Poll::Ready(Err(this.fail(broken)));
                }
            }
            if buf.filled().len() > start || this.put_owed(buf) {
                return std::task::Poll::Ready(Ok(()));
            }
        }
    }
}

#[cfg(feature = "tokio-postgres")]
impl<S> Rewriting<S> {
    /// Puts what the rewriter owes the driver into `buf`, as much as fits;
    /// whether anything was put.
    fn put_owed(&mut self, buf: &mut tokio::io::ReadBuf<'_>) -> bool {
        let owed = self.rewriter.take_owed();
        let n = owed.len().min(buf.remaining());
        if n == 0 {
            return false;
        }
        buf.put_slice(&owed[..n]);
        owed.drain(..n);
        true
    }
}

/// Logs how a relay ended: at `WARN` when it closed the connection itself
/// (see [`Broken`]), at `DEBUG` for an I/O error of either side.
fn log_end(ended: io::Result<()>) {
    match ended {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::InvalidData => {
            tracing::warn!(%error, "statement relay to the pooler ended");
        }
        Err(error) => tracing::debug!(%error, "statement relay to the pooler ended"),
    }
}

/// Relays one connection: the startup packet as it is (an `SSLRequest` or
/// `GSSENCRequest` answered "no" here, the driver being told to speak
/// plaintext to the relay), then every message through `rewriter`, until
/// either side closes.
async fn relay<C>(client: C, server: ServerStream, rewriter: Rewriter) -> io::Result<()>
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    match server {
        ServerStream::Tcp(server) => relay_with(client, server, rewriter).await,
        #[cfg(unix)]
        ServerStream::Unix(server) => relay_with(client, server, rewriter).await,
    }
}

async fn relay_with<C, S>(mut client: C, mut server: S, rewriter: Rewriter) -> io::Result<()>
where
    C: AsyncRead + AsyncWrite + Unpin,
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        let mut len = [0_u8; 4];
        client.read_exact(&mut len).await?;
        let len = usize::try_from(i32::from_be_bytes(len)).unwrap_or(0);
        if !(8..=MAX_STARTUP).contains(&len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a startup packet of a bad length",
            ));
        }
        let mut packet = vec![0_u8; len];
        packet[..4].copy_from_slice(&(len as u32).to_be_bytes());
        client.read_exact(&mut packet[4..]).await?;
        let code = i32::from_be_bytes([packet[4], packet[5], packet[6], packet[7]]);
        match code {
            SSL_REQUEST | GSSENC_REQUEST => client.write_all(b"N").await?,
            CANCEL_REQUEST => {
                server.write_all(&packet).await?;
                tokio::io::copy_bidirectional(&mut client, &mut server).await?;
                return Ok(());
            }
            _ => {
                server.write_all(&packet).await?;
                break;
            }
        }
    }
    let rewriter = Mutex::new(rewriter);
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut server_read, mut server_write) = tokio::io::split(server);
    let upstream = async {
        let mut buf = vec![0_u8; READ_CHUNK];
        let mut out = Vec::with_capacity(READ_CHUNK);
        loop {
            let n = client_read.read(&mut buf).await?;
            if n == 0 {
                server_write.shutdown().await?;
                return Ok::<_, io::Error>(());
            }
            out.clear();
            rewriter
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .client_bytes(&buf[..n], &mut out)?;
            if !out.is_empty() {
                server_write.write_all(&out).await?;
            }
        }
    };
    let downstream = async {
        let mut buf = vec![0_u8; READ_CHUNK];
        let mut out = Vec::with_capacity(READ_CHUNK);
        loop {
            let n = server_read.read(&mut buf).await?;
            if n == 0 {
                client_write.shutdown().await?;
                return Ok::<_, io::Error>(());
            }
            out.clear();
            rewriter
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .server_bytes(&buf[..n], &mut out)?;
            if !out.is_empty() {
                client_write.write_all(&out).await?;
            }
        }
    };
    // Either side closing ends the relay; the other side's socket closes as
    // its half is dropped here.
    let done =
        match futures_util::future::select(std::pin::pin!(upstream), std::pin::pin!(downstream))
            .await
        {
            futures_util::future::Either::Left((done, _))
            | futures_util::future::Either::Right((done, _)) => done,
        };
    done
}

/// Where a driver's options point, for [`Relay::start`]: a socket directory
/// (given, or as the host) holds `.s.PGSQL.<port>`.
#[doc(hidden)]
pub fn upstream(socket_dir: Option<&Path>, host: &str, port: u16) -> Upstream {
    match socket_dir {
        Some(dir) => Upstream::Unix(dir.join(format!(".s.PGSQL.{port}"))),
        None if host.starts_with('/') => {
            Upstream::Unix(Path::new(host).join(format!(".s.PGSQL.{port}")))
        }
        None => Upstream::Tcp(host.to_owned(), port),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(tag: u8, parts: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        write_message(&mut out, tag, parts);
        out
    }

    fn parse(name: &str, sql: &str) -> Vec<u8> {
        msg(
            b'P',
            &[name.as_bytes(), b"\0", sql.as_bytes(), b"\0", &[0, 0]],
        )
    }

    fn bind(name: &str) -> Vec<u8> {
        msg(b'B', &[b"\0", name.as_bytes(), b"\0", &[0, 0, 0, 0, 0, 0]])
    }

    fn execute() -> Vec<u8> {
        msg(b'E', &[b"\0", &[0, 0, 0, 0]])
    }

    fn sync() -> Vec<u8> {
        msg(b'S', &[])
    }

    fn ready(status: u8) -> Vec<u8> {
        msg(b'Z', &[&[status]])
    }

    fn parse_complete() -> Vec<u8> {
        msg(b'1', &[])
    }

    fn bind_complete() -> Vec<u8> {
        msg(b'2', &[])
    }

    fn command_complete(tag: &str) -> Vec<u8> {
        msg(b'C', &[tag.as_bytes(), b"\0"])
    }

    /// The messages of a byte stream as (tag, body).
    fn messages(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some((tag, len)) = header(bytes) {
            out.push((tag, bytes[5..1 + len].to_vec()));
            bytes = &bytes[1 + len..];
        }
        assert!(bytes.is_empty(), "trailing bytes");
        out
    }

    fn tags(bytes: &[u8]) -> Vec<u8> {
        messages(bytes).iter().map(|m| m.0).collect()
    }

    fn logged_in_with(mut rw: Rewriter) -> Rewriter {
        let mut out = Vec::new();
        rw.server_bytes(&ready(b'I'), &mut out).expect("login");
        assert_eq!(out, ready(b'I'));
        rw
    }

    fn logged_in() -> Rewriter {
        logged_in_with(Rewriter::default())
    }

    /// Client bytes through `rw`; what reaches the server.
    fn up(rw: &mut Rewriter, input: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        rw.client_bytes(&input.concat(), &mut out)
            .expect("client bytes");
        out
    }

    /// Server bytes through `rw`; what reaches the driver.
    fn down(rw: &mut Rewriter, input: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        rw.server_bytes(&input.concat(), &mut out)
            .expect("server bytes");
        out
    }

    /// Whether `bytes` name `name` as a statement anywhere.
    fn names(bytes: &[u8], name: &str) -> bool {
        bytes
            .windows(name.len() + 1)
            .any(|w| w[..name.len()] == *name.as_bytes() && w[name.len()] == 0)
    }

    #[test]
    fn every_statement_name_reaches_the_server_unnamed() {
        let mut rw = logged_in();
        let out = up(
            &mut rw,
            &[
                parse("sqlx_s_1", "SELECT $1"),
                msg(b'D', &[b"Ssqlx_s_1\0"]),
                sync(),
            ],
        );
        let sent = messages(&out);
        assert_eq!(sent[0], (b'P', b"\0SELECT $1\0\0\0".to_vec()));
        assert_eq!(sent[1], (b'D', b"S\0".to_vec()));
        assert_eq!(sent[2].0, b'S');
        // In a transaction ('T'), the next batch binds without a re-parse.
        let back = down(&mut rw, &[parse_complete(), ready(b'T')]);
        assert_eq!(messages(&back).len(), 2);
        let out = up(&mut rw, &[bind("sqlx_s_1"), sync()]);
        let sent = messages(&out);
        assert_eq!(sent.len(), 2, "{sent:?}");
        assert_eq!(sent[0], (b'B', b"\0\0\0\0\0\0\0\0".to_vec()));
        assert_eq!(rw.injected(), 0);
    }

    #[test]
    fn a_bind_after_an_idle_ready_parses_again_and_hides_its_parse_complete() {
        let mut rw = logged_in();
        up(&mut rw, &[parse("s1", "SELECT 1"), sync()]);
        let back = down(&mut rw, &[parse_complete(), ready(b'I')]);
        assert_eq!(messages(&back).len(), 2);
        let out = up(&mut rw, &[bind("s1"), sync()]);
        let sent = messages(&out);
        assert_eq!(sent[0], (b'P', b"\0SELECT 1\0\0\0".to_vec()));
        assert_eq!(sent[1].0, b'B');
        assert_eq!(rw.injected(), 1);
        // The added Parse's reply is dropped; BindComplete and the rest pass.
        let back = down(&mut rw, &[parse_complete(), bind_complete(), ready(b'I')]);
        assert_eq!(back, [bind_complete(), ready(b'I')].concat());
    }

    #[test]
    fn a_nested_parse_in_between_makes_the_outer_bind_parse_again() {
        let mut rw = logged_in();
        // The outer statement, then one run to learn a type, then the
        // outer bind, all before any reply (pipelined).
        up(&mut rw, &[parse("", "SELECT $1::mytype"), sync()]);
        up(
            &mut rw,
            &[parse("s2", "SELECT typname"), bind("s2"), sync()],
        );
        let out = up(&mut rw, &[bind(""), sync()]);
        let sent = messages(&out);
        assert_eq!(sent[0], (b'P', b"\0SELECT $1::mytype\0\0\0".to_vec()));
        assert_eq!(rw.injected(), 1);
    }

    #[test]
    fn a_simple_query_in_a_transaction_makes_the_next_bind_parse_again() {
        let mut rw = logged_in();
        up(&mut rw, &[parse("s1", "SELECT 1"), sync()]);
        down(&mut rw, &[parse_complete(), ready(b'T')]);
        // The server drops its unnamed statement at a simple query.
        up(&mut rw, &[msg(b'Q', &[b"SELECT 2\0"])]);
        down(&mut rw, &[command_complete("SELECT 1"), ready(b'T')]);
        let out = up(&mut rw, &[bind("s1"), sync()]);
        assert_eq!(tags(&out), b"PBS".to_vec());
    }

    #[test]
    fn a_batch_not_yet_answered_counts_as_idle() {
        let mut rw = logged_in();
        let out = up(
            &mut rw,
            &[parse("s1", "SELECT 1"), sync(), bind("s1"), sync()],
        );
        assert_eq!(tags(&out), b"PSPBS".to_vec());
    }

    #[test]
    fn a_failed_parse_is_forgotten_and_close_is_unnamed() {
        let mut rw = logged_in();
        up(&mut rw, &[parse("s1", "SELEC 1"), sync()]);
        let error = msg(b'E', &[b"SERROR\0\0"]);
        let back = down(&mut rw, &[error.clone(), ready(b'I')]);
        assert_eq!(back, [error, ready(b'I')].concat());
        assert_eq!(rw.statements.len(), 0);

        let out = up(&mut rw, &[parse("s3", "SELECT 3"), msg(b'C', &[b"Ss3\0"])]);
        let sent = messages(&out);
        assert_eq!(sent[1], (b'C', b"S\0".to_vec()));
        assert_eq!(rw.statements.len(), 0);
        // A portal's close is left alone.
        let portal = msg(b'C', &[b"Pp1\0"]);
        assert_eq!(up(&mut rw, std::slice::from_ref(&portal)), portal);
    }

    #[test]
    fn a_statement_the_relay_does_not_hold_is_never_sent_by_its_name() {
        // Never parsed, failed, or closed: the connection fails rather than
        // run whatever the shared server session holds under that name.
        for before in [
            vec![],
            vec![parse("s1", "SELECT 1"), msg(b'C', &[b"Ss1\0"]), sync()],
        ] {
            for message in [bind("s1"), msg(b'D', &[b"Ss1\0"])] {
                let mut rw = logged_in();
                let mut out = Vec::new();
                rw.client_bytes(&before.concat(), &mut out).expect("before");
                out.clear();
                let refused = rw.client_bytes(&[message, sync()].concat(), &mut out);
                assert!(refused.is_err(), "{refused:?}");
                assert!(!names(&out, "s1"), "{out:?}");
            }
        }
    }

    #[test]
    fn statements_past_any_count_are_kept_and_the_first_runs_as_itself() {
        // Many more statements than any statement cache holds, each held by
        // the driver: the first is parsed again by its body, never sent by
        // its name.
        let mut rw = logged_in();
        for i in 0..300 {
            up(
                &mut rw,
                &[
                    parse(&format!("s{i}"), &format!("SELECT 'ours {i}'")),
                    sync(),
                ],
            );
            down(&mut rw, &[parse_complete(), ready(b'I')]);
        }
        let out = up(&mut rw, &[bind("s0"), execute(), sync()]);
        let sent = messages(&out);
        assert_eq!(sent[0], (b'P', b"\0SELECT 'ours 0'\0\0\0".to_vec()));
        assert!(!names(&out, "s0"), "{sent:?}");
    }

    #[test]
    fn past_its_limit_the_relay_fails_the_connection() {
        let mut rw = logged_in_with(Rewriter::with_limits(3, 1 << 20));
        let mut out = Vec::new();
        for i in 0..3 {
            rw.client_bytes(&parse(&format!("s{i}"), "SELECT 1"), &mut out)
                .expect("within the limit");
        }
        // Replacing a held statement is no new one.
        rw.client_bytes(&parse("s0", "SELECT 2"), &mut out)
            .expect("replaced");
        // Closed ones no longer count.
        rw.client_bytes(&msg(b'C', &[b"Ss0\0"]), &mut out)
            .expect("closed");
        rw.client_bytes(&parse("s3", "SELECT 1"), &mut out)
            .expect("room again");
        assert!(rw.client_bytes(&parse("s4", "SELECT 1"), &mut out).is_err());
        let mut by_bytes = logged_in_with(Rewriter::with_limits(100, 64));
        let long = "x".repeat(80);
        assert!(by_bytes
            .client_bytes(&parse("s0", &long), &mut out)
            .is_err());
    }

    #[test]
    fn a_copy_in_with_its_ignored_sync_keeps_the_batches_in_step() {
        let mut rw = logged_in();
        // tokio-postgres's copy_in: Bind/Execute/Sync, then the data,
        // CopyDone/Sync. The server ignores the first Sync (it is in
        // copy-in mode) and answers the two with one ReadyForQuery.
        up(&mut rw, &[parse("s0", "COPY t FROM STDIN"), sync()]);
        down(&mut rw, &[parse_complete(), ready(b'I')]);
        let out = up(&mut rw, &[bind("s0"), execute(), sync()]);
        assert_eq!(tags(&out), b"PBES".to_vec());
        let copy_in = msg(b'G', &[&[0, 0, 0]]);
        let back = down(
            &mut rw,
            &[parse_complete(), bind_complete(), copy_in.clone()],
        );
        assert_eq!(back, [bind_complete(), copy_in].concat());
        up(
            &mut rw,
            &[
                msg(b'd', &[b"1\n"]),
                msg(b'd', &[b"2\n"]),
                msg(b'c', &[]),
                sync(),
            ],
        );
        down(&mut rw, &[command_complete("COPY 2"), ready(b'I')]);
        assert_eq!(rw.batches_sent, rw.batches_answered);
        // The connection goes on: a new statement and a cached one, each
        // answered and placed.
        up(&mut rw, &[parse("s1", "SELECT 1"), sync()]);
        let back = down(&mut rw, &[parse_complete(), ready(b'I')]);
        assert_eq!(tags(&back), b"1Z".to_vec());
        let out = up(&mut rw, &[bind("s1"), execute(), sync()]);
        assert_eq!(tags(&out), b"PBES".to_vec());
        let back = down(
            &mut rw,
            &[
                parse_complete(),
                bind_complete(),
                command_complete("SELECT 1"),
                ready(b'I'),
            ],
        );
        assert_eq!(tags(&back), b"2CZ".to_vec());
        assert_eq!(rw.batches_sent, rw.batches_answered);
    }

    #[test]
    fn a_failed_copy_in_keeps_the_batches_in_step_too() {
        let mut rw = logged_in();
        up(
            &mut rw,
            &[parse("", "COPY t FROM STDIN"), bind(""), execute(), sync()],
        );
        down(
            &mut rw,
            &[parse_complete(), bind_complete(), msg(b'G', &[&[0, 0, 0]])],
        );
        up(
            &mut rw,
            &[msg(b'd', &[b"x\n"]), msg(b'f', &[b"gave up\0"]), sync()],
        );
        let error = msg(b'E', &[b"SERROR\0\0"]);
        down(&mut rw, &[error, ready(b'I')]);
        assert_eq!(rw.batches_sent, rw.batches_answered);
        up(&mut rw, &[parse("s9", "SELECT 9"), sync()]);
        assert_eq!(
            tags(&down(&mut rw, &[parse_complete(), ready(b'I')])),
            b"1Z".to_vec()
        );
    }

    #[test]
    fn replies_it_cannot_place_fail_the_connection() {
        let mut rw = logged_in();
        let mut out = Vec::new();
        assert!(
            rw.server_bytes(&ready(b'I'), &mut out).is_err(),
            "no batch sent"
        );
        let mut rw = logged_in();
        assert!(
            rw.server_bytes(&parse_complete(), &mut out).is_err(),
            "no Parse sent"
        );
        let mut rw = logged_in();
        up(&mut rw, &[parse("s1", "SELECT 1"), sync()]);
        down(&mut rw, &[parse_complete()]);
        assert!(
            rw.server_bytes(&parse_complete(), &mut out).is_err(),
            "one Parse, two replies"
        );
    }

    #[test]
    fn an_error_mid_pipeline_forgets_the_parses_the_server_skipped() {
        let mut rw = logged_in();
        // Three batches at once; the second fails at its first message.
        up(
            &mut rw,
            &[
                parse("a", "SELECT 1"),
                sync(),
                parse("b", "SELEC 2"),
                parse("c", "SELECT 3"),
                sync(),
                parse("d", "SELECT 4"),
                sync(),
            ],
        );
        let error = msg(b'E', &[b"SERROR\0\0"]);
        let back = down(
            &mut rw,
            &[
                parse_complete(),
                ready(b'I'),
                error,
                ready(b'I'),
                parse_complete(),
                ready(b'I'),
            ],
        );
        assert_eq!(tags(&back), b"1ZEZ1Z".to_vec());
        assert!(rw.statements.get(b"a").is_some() && rw.statements.get(b"d").is_some());
        assert!(rw.statements.get(b"b").is_none() && rw.statements.get(b"c").is_none());
    }

    #[test]
    fn a_name_parsed_again_behind_its_failed_parse_stays_held() {
        let mut rw = logged_in();
        // Pipelined: the second batch parses "s1" again before the first
        // batch's Parse of it has failed.
        up(&mut rw, &[parse("s1", "SELEC 1"), sync()]);
        up(
            &mut rw,
            &[parse("s1", "SELECT 2"), bind("s1"), execute(), sync()],
        );
        let error = msg(b'E', &[b"SERROR\0\0"]);
        let back = down(
            &mut rw,
            &[
                error.clone(),
                ready(b'I'),
                parse_complete(),
                bind_complete(),
                command_complete("SELECT 1"),
                ready(b'I'),
            ],
        );
        assert_eq!(
            back,
            [
                error,
                ready(b'I'),
                parse_complete(),
                bind_complete(),
                command_complete("SELECT 1"),
                ready(b'I'),
            ]
            .concat()
        );
        // The second batch's Parse stands: a third batch binds "s1", parsed
        // again by the body that stands, never by its name.
        let mut out = Vec::new();
        rw.client_bytes(&[bind("s1"), execute(), sync()].concat(), &mut out)
            .expect("s1 is held");
        let sent = messages(&out);
        assert_eq!(sent[0], (b'P', b"\0SELECT 2\0\0\0".to_vec()));
        assert_eq!(tags(&out), b"PBES".to_vec());
        assert!(!names(&out, "s1"), "{sent:?}");
        let back = down(
            &mut rw,
            &[
                parse_complete(),
                bind_complete(),
                command_complete("SELECT 1"),
                ready(b'I'),
            ],
        );
        assert_eq!(tags(&back), b"2CZ".to_vec());
    }

    #[test]
    fn a_name_parsed_again_inside_its_failed_batch_is_forgotten() {
        let mut rw = logged_in();
        // The second Parse of "s1" follows the failing one in the same
        // batch: the server skipped it, so "s1" is held by nobody.
        up(
            &mut rw,
            &[
                parse("s1", "SELEC 1"),
                parse("s1", "SELECT 2"),
                bind("s1"),
                execute(),
                sync(),
            ],
        );
        let error = msg(b'E', &[b"SERROR\0\0"]);
        let back = down(&mut rw, &[error.clone(), ready(b'I')]);
        assert_eq!(back, [error, ready(b'I')].concat());
        assert_eq!(rw.statements.len(), 0);
        let mut out = Vec::new();
        let refused = rw.client_bytes(&[bind("s1"), sync()].concat(), &mut out);
        assert!(refused.is_err(), "{refused:?}");
        assert!(!names(&out, "s1"), "{out:?}");
    }

    #[test]
    fn a_later_parse_that_fails_too_forgets_the_name() {
        let mut rw = logged_in();
        // Both pipelined Parses of "s1" fail: after the second error
        // nothing holds it.
        up(&mut rw, &[parse("s1", "SELEC 1"), sync()]);
        up(&mut rw, &[parse("s1", "SELEC 2"), sync()]);
        let error = msg(b'E', &[b"SERROR\0\0"]);
        down(&mut rw, &[error.clone(), ready(b'I')]);
        assert_eq!(rw.statements.len(), 1, "the second Parse is pending");
        down(&mut rw, &[error, ready(b'I')]);
        assert_eq!(rw.statements.len(), 0);
        let mut out = Vec::new();
        assert!(rw
            .client_bytes(&[bind("s1"), sync()].concat(), &mut out)
            .is_err());
    }

    fn query(sql: &str) -> Vec<u8> {
        msg(b'Q', &[sql.as_bytes(), b"\0"])
    }

    /// The `ErrorResponse` of a refused statement, as the driver gets it.
    fn refusal(statement: SessionStatement) -> Vec<u8> {
        let mut out = Vec::new();
        error_response(&mut out, statement);
        out
    }

    #[test]
    fn a_refused_simple_query_runs_as_the_empty_query_and_fails_with_0a000() {
        let mut rw = logged_in();
        let out = up(&mut rw, &[query("LISTEN jobs")]);
        assert_eq!(out, query(""));
        // The server's answer to the empty query, in a transaction: its
        // EmptyQueryResponse becomes the refusal, its status stays.
        let back = down(&mut rw, &[msg(b'I', &[]), ready(b'T')]);
        assert_eq!(
            back,
            [refusal(SessionStatement::Listen), ready(b'T')].concat()
        );
        let sent = messages(&back);
        let body = String::from_utf8_lossy(&sent[0].1);
        assert!(body.contains("C0A000\0"), "{body}");
        assert!(
            body.contains("LISTEN cannot work behind a transaction-mode pooler"),
            "{body}"
        );
        // What is not refused passes as it is.
        for sql in [
            "SELECT 1",
            "SET LOCAL x.y = 1",
            "UNLISTEN *",
            "SELECT 'SET'",
        ] {
            assert_eq!(up(&mut rw, &[query(sql)]), query(sql), "{sql}");
            let back = down(&mut rw, &[command_complete("SELECT 1"), ready(b'I')]);
            assert_eq!(tags(&back), b"CZ".to_vec(), "{sql}");
        }
    }

    #[test]
    fn a_refused_parse_drops_its_batch_up_to_sync_and_fails_before_its_ready() {
        let mut rw = logged_in();
        let out = up(
            &mut rw,
            &[
                parse("s1", "SELECT 1"),
                bind("s1"),
                execute(),
                parse("s2", "SELECT pg_advisory_lock(1)"),
                msg(b'D', &[b"Ss2\0"]),
                bind("s2"),
                execute(),
                sync(),
            ],
        );
        // What came before the refused Parse, and the Sync.
        assert_eq!(tags(&out), b"PBES".to_vec());
        assert!(!names(&out, "SELECT pg_advisory_lock(1)"));
        let back = down(
            &mut rw,
            &[
                parse_complete(),
                bind_complete(),
                command_complete("SELECT 1"),
                ready(b'I'),
            ],
        );
        assert_eq!(
            back,
            [
                parse_complete(),
                bind_complete(),
                command_complete("SELECT 1"),
                refusal(SessionStatement::AdvisoryLock),
                ready(b'I'),
            ]
            .concat()
        );
        // The refused statement is not held: as one whose Parse failed.
        assert_eq!(rw.statements.len(), 1);
        let mut out = Vec::new();
        assert!(rw
            .client_bytes(&[bind("s2"), sync()].concat(), &mut out)
            .is_err());
    }

    #[test]
    fn a_server_error_before_a_refused_parse_is_the_batch_s_only_error() {
        let mut rw = logged_in();
        let out = up(
            &mut rw,
            &[parse("s1", "SELEC 1"), parse("s2", "SET x.y = 1"), sync()],
        );
        assert_eq!(tags(&out), b"PS".to_vec());
        let failed = msg(b'E', &[b"SERROR\0C42601\0Msyntax error\0\0"]);
        let back = down(&mut rw, &[failed.clone(), ready(b'I')]);
        assert_eq!(back, [failed, ready(b'I')].concat());
        // The next batch is answered as the server answers it.
        up(&mut rw, &[parse("s3", "SELECT 3"), sync()]);
        let back = down(&mut rw, &[parse_complete(), ready(b'I')]);
        assert_eq!(back, [parse_complete(), ready(b'I')].concat());
    }

    #[test]
    fn refusals_between_pipelined_batches_keep_every_answer_in_place() {
        let input = [
            query("SELECT 1"),
            query("SET search_path TO x"),
            parse("s1", "SELECT $1::int4"),
            bind("s1"),
            execute(),
            sync(),
            parse("s2", "LISTEN c"),
            bind("s2"),
            execute(),
            sync(),
            query("SELECT 2"),
        ]
        .concat();
        let replies = [
            command_complete("SELECT 1"),
            ready(b'I'),
            msg(b'I', &[]),
            ready(b'I'),
            parse_complete(),
            bind_complete(),
            command_complete("SELECT 1"),
            ready(b'I'),
            ready(b'I'),
            command_complete("SELECT 1"),
            ready(b'I'),
        ]
        .concat();
        let want = [
            command_complete("SELECT 1"),
            ready(b'I'),
            refusal(SessionStatement::Set),
            ready(b'I'),
            parse_complete(),
            bind_complete(),
            command_complete("SELECT 1"),
            ready(b'I'),
            refusal(SessionStatement::Listen),
            ready(b'I'),
            command_complete("SELECT 1"),
            ready(b'I'),
        ]
        .concat();
        let sent = [
            query("SELECT 1"),
            query(""),
            msg(b'P', &[b"\0SELECT $1::int4\0", &[0, 0]]),
            bind(""),
            execute(),
            sync(),
            sync(),
            query("SELECT 2"),
        ]
        .concat();
        for cut in 0..input.len().max(replies.len()) {
            let mut rw = logged_in();
            let mut out = Vec::new();
            let at = cut.min(input.len());
            rw.client_bytes(&input[..at], &mut out).expect("first part");
            rw.client_bytes(&input[at..], &mut out)
                .expect("second part");
            assert_eq!(out, sent, "cut at {cut}");
            // In place, as the rewriting stream reads: what is owed goes
            // before the next read's bytes.
            let mut back = Vec::new();
            let at = cut.min(replies.len());
            for part in [&replies[..at], &replies[at..]] {
                let mut buf = part.to_vec();
                let kept = rw.server_in_place(&mut buf).expect("replies");
                back.extend_from_slice(&buf[..kept]);
                back.append(rw.take_owed());
            }
            assert_eq!(back, want, "cut at {cut}");
        }
    }

    #[test]
    fn messages_split_anywhere_come_out_the_same() {
        let input = [
            parse("sqlx_s_7", "SELECT $1::int4"),
            msg(b'D', &[b"Ssqlx_s_7\0"]),
            sync(),
            bind("sqlx_s_7"),
            execute(),
            sync(),
        ]
        .concat();
        let replies = [
            parse_complete(),
            msg(b't', &[&[0, 1, 0, 0, 0, 23]]),
            msg(b'T', &[&[0, 0]]),
            ready(b'I'),
            parse_complete(),
            bind_complete(),
            msg(b'D', &[&[0, 1, 0, 0, 0, 1], b"7"]),
            command_complete("SELECT 1"),
            ready(b'I'),
        ]
        .concat();
        let mut rw = logged_in();
        let mut whole = Vec::new();
        rw.client_bytes(&input, &mut whole).expect("whole");
        let mut whole_back = Vec::new();
        rw.server_bytes(&replies, &mut whole_back).expect("whole");
        for cut in 1..input.len().max(replies.len()) {
            let mut rw = logged_in();
            let mut out = Vec::new();
            let at = cut.min(input.len());
            rw.client_bytes(&input[..at], &mut out).expect("first part");
            rw.client_bytes(&input[at..], &mut out)
                .expect("second part");
            assert_eq!(out, whole, "cut at {cut}");
            let mut back = Vec::new();
            let at = cut.min(replies.len());
            rw.server_bytes(&replies[..at], &mut back)
                .expect("first part");
            rw.server_bytes(&replies[at..], &mut back)
                .expect("second part");
            assert_eq!(back, whole_back, "cut at {cut}");
        }
    }

    #[test]
    fn rows_and_copy_data_stream_through_unbuffered() {
        let mut rw = logged_in();
        up(&mut rw, &[msg(b'Q', &[b"SELECT big\0"])]);
        let row = msg(b'D', &[&[0, 1, 0, 1, 0, 0], &vec![b'x'; 65_536]]);
        let mut out = Vec::new();
        // Half a row goes on to the driver at once.
        rw.server_bytes(&row[..30_000], &mut out).expect("half");
        assert_eq!(out, row[..30_000]);
        rw.server_bytes(&row[30_000..], &mut out).expect("rest");
        assert_eq!(out, row);
        let data = msg(b'd', &[&vec![b'y'; 65_536]]);
        let mut sent = Vec::new();
        rw.client_bytes(&data[..10], &mut sent).expect("part");
        assert_eq!(sent, data[..10]);
    }

    #[test]
    fn a_large_bind_streams_through_unbuffered() {
        // A row of several MiB written by a `Bind` (an insert's parameter)
        // goes on as its bytes come once the statement's name is read: the
        // relay never holds the whole message.
        let mut rw = logged_in();
        up(&mut rw, &[parse("s1", "INSERT INTO t VALUES ($1)"), sync()]);
        down(&mut rw, &[parse_complete(), ready(b'T')]);
        let value = vec![b'x'; 4 << 20];
        let len = i32::try_from(value.len()).expect("fits");
        let big = msg(
            b'B',
            &[
                b"\0s1\0",
                &[0, 0, 0, 1],
                &len.to_be_bytes(),
                &value,
                &[0, 0],
            ],
        );
        let mut out = Vec::new();
        let first = 1 << 20;
        rw.client_bytes(&big[..first], &mut out).expect("first MiB");
        assert!(
            out.len() >= first - 16,
            "{} of {first} bytes went on",
            out.len()
        );
        rw.client_bytes(&big[first..], &mut out).expect("the rest");
        rw.client_bytes(&[execute(), sync()].concat(), &mut out)
            .expect("execute");
        let sent = messages(&out);
        assert_eq!(sent[0].0, b'B');
        assert_eq!(sent[0].1[..2], *b"\0\0");
        assert_eq!(sent[0].1.len(), big.len() - 5 - 2);
        assert_eq!(sent[0].1[2..], big[9..]);
        assert_eq!(tags(&out), b"BES".to_vec());
        assert!(!names(&out, "s1"));
    }

    /// A startup packet for user `u`.
    #[cfg(feature = "tokio-postgres")]
    fn startup() -> Vec<u8> {
        let body: &[u8] = b"\0\x03\0\0user\0u\0\0";
        let len = u32::try_from(4 + body.len()).expect("fits");
        [&len.to_be_bytes()[..], body].concat()
    }

    /// A driver's stream through [`Rewriting`], the pooler's end, and the
    /// login done.
    #[cfg(feature = "tokio-postgres")]
    async fn rewriting_pair() -> (Rewriting<tokio::io::DuplexStream>, tokio::io::DuplexStream) {
        let (ours, mut server) = tokio::io::duplex(64 * 1024);
        let mut driver = Rewriting::new(ours);
        driver.write_all(&startup()).await.expect("startup");
        driver.flush().await.expect("flush");
        let mut got = vec![0; startup().len()];
        server.read_exact(&mut got).await.expect("startup read");
        assert_eq!(got, startup());
        server.write_all(&ready(b'I')).await.expect("login");
        let mut back = [0; 6];
        driver.read_exact(&mut back).await.expect("login read");
        assert_eq!(back[..], ready(b'I'));
        (driver, server)
    }

    #[cfg(feature = "tokio-postgres")]
    #[tokio::test]
    async fn the_rewriting_stream_answers_a_refusal_in_a_small_read_buffer() {
        let (mut driver, mut server) = rewriting_pair().await;
        driver.write_all(&query("LISTEN c")).await.expect("write");
        driver.flush().await.expect("flush");
        let mut got = vec![0; query("").len()];
        server.read_exact(&mut got).await.expect("read");
        assert_eq!(got, query(""));
        server
            .write_all(&[msg(b'I', &[]), ready(b'I')].concat())
            .await
            .expect("reply");
        // Read a few bytes at a time: the refusal and the ReadyForQuery
        // after it come out whole and in order.
        let want = [refusal(SessionStatement::Listen), ready(b'I')].concat();
        let mut back = Vec::new();
        while back.len() < want.len() {
            let mut small = [0; 7];
            let n = driver.read(&mut small).await.expect("read");
            assert!(n > 0, "the stream ended");
            back.extend_from_slice(&small[..n]);
        }
        assert_eq!(back, want);
    }

    #[cfg(feature = "tokio-postgres")]
    #[tokio::test]
    async fn the_rewriting_stream_sends_statements_unnamed_and_hides_its_own_replies() {
        let (mut driver, mut server) = rewriting_pair().await;
        driver
            .write_all(&[parse("s1", "SELECT 1"), sync()].concat())
            .await
            .expect("write");
        driver.flush().await.expect("flush");
        let want = [msg(b'P', &[b"\0SELECT 1\0", &[0, 0]]), sync()].concat();
        let mut got = vec![0; want.len()];
        server.read_exact(&mut got).await.expect("read");
        assert_eq!(got, want);
        server
            .write_all(&[parse_complete(), ready(b'I')].concat())
            .await
            .expect("reply");
        let mut back = vec![0; 11];
        driver.read_exact(&mut back).await.expect("reply read");
        assert_eq!(tags(&back), b"1Z".to_vec());
        // After an idle ReadyForQuery the bind is preceded by the Parse.
        driver
            .write_all(&[bind("s1"), execute(), sync()].concat())
            .await
            .expect("write");
        driver.flush().await.expect("flush");
        let want = [
            msg(b'P', &[b"\0SELECT 1\0", &[0, 0]]),
            bind(""),
            execute(),
            sync(),
        ]
        .concat();
        let mut got = vec![0; want.len()];
        server.read_exact(&mut got).await.expect("read");
        assert_eq!(got, want);
        // The added Parse's reply alone: the driver's read goes past it
        // rather than end as if the pooler had closed.
        server.write_all(&parse_complete()).await.expect("reply");
        let reader = tokio::spawn(async move {
            let rest = [bind_complete(), command_complete("SELECT 1"), ready(b'I')].concat();
            let mut back = vec![0; rest.len()];
            driver.read_exact(&mut back).await.expect("rest");
            assert_eq!(back, rest);
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        server
            .write_all(&[bind_complete(), command_complete("SELECT 1"), ready(b'I')].concat())
            .await
            .expect("rest");
        tokio::time::timeout(std::time::Duration::from_secs(5), reader)
            .await
            .expect("in time")
            .expect("reader");
    }

    #[cfg(feature = "tokio-postgres")]
    #[tokio::test]
    async fn the_rewriting_stream_refuses_tls_itself() {
        let (ours, mut server) = tokio::io::duplex(1024);
        let mut driver = Rewriting::new(ours);
        let ssl_request = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
        driver.write_all(&ssl_request).await.expect("ssl request");
        let mut no = [0; 1];
        driver.read_exact(&mut no).await.expect("answer");
        assert_eq!(&no, b"N");
        driver.write_all(&startup()).await.expect("startup");
        driver.flush().await.expect("flush");
        let mut got = vec![0; startup().len()];
        server.read_exact(&mut got).await.expect("startup read");
        assert_eq!(got, startup(), "the SSLRequest never reached the pooler");
    }

    #[cfg(feature = "tokio-postgres")]
    #[tokio::test]
    async fn the_rewriting_stream_fails_on_a_reply_it_cannot_place() {
        let (mut driver, mut server) = rewriting_pair().await;
        server.write_all(&parse_complete()).await.expect("stray");
        let mut back = [0; 5];
        let error = driver.read_exact(&mut back).await.expect_err("broken");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        // It stays broken both ways.
        let error = driver.write_all(&sync()).await.expect_err("broken");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    }

    #[cfg(feature = "tokio-postgres")]
    #[tokio::test]
    async fn the_rewriting_stream_passes_a_large_row_as_it_comes() {
        let (mut driver, mut server) = rewriting_pair().await;
        driver
            .write_all(&msg(b'Q', &[b"SELECT big\0"]))
            .await
            .expect("query");
        driver.flush().await.expect("flush");
        let row = msg(b'D', &[&[0, 1, 0, 0x60, 0, 0], &vec![b'x'; 6 << 20]]);
        let first = 1 << 20;
        let head = row[..first].to_vec();
        // The first MiB reaches the driver while the rest of the row is
        // not even written (the pipe holds 64 KiB: the writer waits for
        // the reader).
        let writer = tokio::spawn(async move {
            server.write_all(&head).await.expect("first MiB");
            server
        });
        let mut got = vec![0; first];
        tokio::time::timeout(
            std::time::Duration::from_secs(5),
            driver.read_exact(&mut got),
        )
        .await
        .expect("streamed")
        .expect("read");
        assert_eq!(got, row[..first]);
        drop(writer.await.expect("writer"));
    }

    #[test]
    fn a_broken_length_fails_the_connection() {
        let mut rw = logged_in();
        let mut out = Vec::new();
        assert!(rw
            .client_bytes(&[b'P', 0, 0, 0, 1, 9, 9], &mut out)
            .is_err());
        let mut rw = logged_in();
        assert!(rw
            .server_bytes(&[b'D', 0xff, 0xff, 0xff, 0xff], &mut out)
            .is_err());
        let mut rw = logged_in();
        let bad_bind = msg(b'B', &[b"\0no-nul-after-the-name"]);
        assert!(rw.client_bytes(&bad_bind, &mut out).is_err());
    }
}
