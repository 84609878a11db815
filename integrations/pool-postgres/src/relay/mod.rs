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
//! advisory locks, see
//! [`SessionStatement`](crate::pooler::SessionStatement)) are refused: the relay looks
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
//!
//! The pure protocol core (no I/O) is `wire` (framing), `statements` (what
//! is kept of the driver's statements), `replies` (the framing of the
//! server's replies) and `rewriter` (the rules, both directions); the I/O
//! shell around it is `upstream` (the pooler's socket), `stream` (the
//! rewriting stream) and `task` (the relay task).

use std::sync::atomic::{AtomicUsize, Ordering};

mod replies;
mod rewriter;
mod statements;
#[cfg(feature = "tokio-postgres")]
mod stream;
mod task;
#[cfg(test)]
mod testing;
mod upstream;
mod wire;

pub use task::Relay;
#[cfg(feature = "tokio-postgres")]
pub(crate) use upstream::Keepalive;
#[cfg(feature = "tokio-postgres")]
pub(crate) use upstream::ServerStream;
pub use upstream::{upstream, Upstream};

/// Relays alive in this process (their tasks not yet ended).
static OPEN_RELAYS: AtomicUsize = AtomicUsize::new(0);

/// How many relays are running in this process: one per open connection of
/// a manager in transaction pooler mode, plus any whose connection is being
/// opened. Each ends when its connection (or its server) closes.
pub fn open_relays() -> usize {
    OPEN_RELAYS.load(Ordering::Relaxed)
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
