//! The relay's protocol state, one per connection: the driver's messages
//! rewritten (`client`), the server's replies placed (`server`), and what
//! the two share about the statements the server holds. Pure: bytes in,
//! bytes out, no I/O.

use std::collections::VecDeque;

use super::replies::Replies;
use super::statements::{Ledger, Loaded, Statements, MAX_STATEMENTS, MAX_STATEMENT_BYTES};
use crate::pooler::SessionStatement;
use client::Framing;

mod client;
#[cfg(test)]
mod proptests;
mod server;
#[cfg(test)]
mod tests;

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
    /// The `Parse`s the server has still to answer, batch by batch.
    ledger: Ledger,
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
            ledger: Ledger::default(),
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

    /// `Parse`s the relay added so far.
    #[cfg(test)]
    fn injected(&self) -> u64 {
        self.injected
    }
}
