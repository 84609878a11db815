//! PostgreSQL for pool-core: [`PostgresManager`] pools `tokio_postgres`
//! clients (feature `tokio-postgres`, on by default), and beside it what a
//! PostgreSQL service meets in production, for this manager and pool-sqlx's:
//!
//! - [`hosts`]: a primary and its standbys behind one handle, routed by
//!   role, with failover and events ([`guide::hosts`]);
//! - [`fleet`]: one connection budget for every instance of a service,
//!   enforced by PostgreSQL, with fair share ([`guide::fleet_budget`]);
//! - [`pooler`]: transaction-mode poolers such as PgBouncer, their session
//!   rules and what happens to named statements ([`guide::pgbouncer`]).
//!
//! # The tokio-postgres manager
//!
//! The pool hands out a [`PgClient`], a thin wrapper that dereferences to
//! [`tokio_postgres::Client`] and adds what a pooled client needs: transaction
//! tracking for the reset on return ([`PgTransaction`]), a per-connection prepared-statement
//! cache, least recently used evicted first ([`PgClient::prepare_cached`]) and a query timeout that cancels the
//! query on the server ([`PgClient::with_timeout`]).
//!
//! ```no_run
//! use pool_postgres::{PostgresManager, ResetMode};
//! use pool_core::{Pool, PoolConfig};
//! use tokio_postgres::NoTls;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let pg: tokio_postgres::Config = "postgres://postgres@127.0.0.1:5432/test".parse()?;
//! let manager = PostgresManager::new(pg, NoTls).reset_mode(ResetMode::Rollback);
//! let pool = Pool::new(manager, PoolConfig::builder().max_size(8).build()?).await?;
//!
//! let conn = pool.get().await?;
//! let one: i32 = conn.query_one("SELECT 1", &[]).await?.get(0);
//! assert_eq!(one, 1);
//! # Ok(())
//! # }
//! ```
//!
//! # Reset on return, and what it costs
//!
//! `tokio_postgres` does not expose the server's transaction status. What it
//! does is queue a `ROLLBACK` when a `Transaction` is dropped without
//! commit, or when a `transaction()` call is cancelled after `START
//! TRANSACTION` went out; that message reaches the server before anything
//! the next user sends. What it cannot cover is a transaction that is never
//! dropped (`mem::forget`) or one opened with raw SQL. So the pooled client
//! tracks its own transactions: [`PgClient::transaction`] and
//! [`PgClient::build_transaction`] return a [`PgTransaction`] that marks the
//! connection dirty until it is committed or rolled back. The modes, set
//! with [`PostgresManager::reset_mode`]:
//!
//! | [`ResetMode`] | statement sent on return | round trips per return |
//! |---|---|---|
//! | `None` | nothing | 0 |
//! | `Rollback` (default) | `ROLLBACK`, only if a [`PgTransaction`] was left without `commit`/`rollback` (dropped, leaked, or its end failed or was cancelled) | 0 for a clean return or a finished transaction, 1 otherwise |
//! | `RollbackAlways` | `ROLLBACK` | 1 on every return |
//! | `Clean` | `ROLLBACK`, `CLOSE ALL`, `SET SESSION AUTHORIZATION DEFAULT`, `RESET ALL`, `UNLISTEN *`, `SELECT pg_advisory_unlock_all()`, `DISCARD TEMP`, `DISCARD SEQUENCES` in one simple query | 1 on every return, and the most server work |
//!
//! With a [fleet budget](PostgresManager::fleet_budget), `Clean` releases
//! every advisory lock but the connection's ticket, which it holds
//! throughout: the unlock runs in a transaction that holds the ticket as a
//! transaction lock while the session lock is released and taken again (in
//! the same simple query). A connection whose ticket another session took
//! meanwhile (the user unlocked it by hand) fails its reset and is closed.
//!
//! `Rollback` waits for the server's answer, so once the connection is idle
//! in the pool it is known to be out of the transaction. A transaction
//! opened with raw SQL (`batch_execute("BEGIN")`) is invisible to it: use
//! `RollbackAlways` or `Clean` for code that does that. A reset that fails
//! closes the connection. A `ROLLBACK` outside a transaction makes the
//! server send a warning, which the connection task logs at `debug`.
//!
//! [`PgClient`] dereferences to `Client` immutably only: `Client`'s `&mut`
//! methods are exactly the ones that start transactions, and going through
//! the wrapper is what lets `Rollback` see them.
//!
//! # Behind a transaction-mode pooler
//!
//! Behind PgBouncer, pgdog, pgcat or Supavisor in transaction mode, each
//! transaction (or each statement outside one) may run on a different
//! server connection. [`PostgresManager::pooler_mode`]`(`[`PoolerMode::Transaction`]`)`
//! sets the session rules, and
//! [`PostgresManager::pooler_statements`] says what reaches the pooler of
//! the driver's named statements (see [`PoolerStatements`]
//! for which pooler needs which):
//!
//! - **Passed through** ([`PoolerStatements::PassThrough`],
//!   the default): for poolers that keep named statements themselves
//!   (PgBouncer 1.21 or later with `max_prepared_statements` above 0,
//!   pgdog). The connection is the direct one, with the manager's TLS
//!   connector; statements are cached as without a pooler. Nothing is
//!   added per query but the session-state check below on text queries.
//! - **Unnamed** ([`PoolerStatements::Unnamed`]):
//!   for poolers that do not (PgBouncer before 1.21 or with
//!   `max_prepared_statements = 0`), where `tokio_postgres`'s named
//!   statements fail ("prepared statement \"s12\" does not exist", or
//!   "already exists" when another client's leftover has the same name).
//!   Each connection is opened (with the driver's `connect_raw`) over a
//!   stream that rewrites what passes (no socket or task in between) to the
//!   config's first host that answers (with the config's TCP keepalive and
//!   `connect_timeout`), which sends every statement of `Parse`, `Bind`,
//!   `Describe` and `Close` as the unnamed statement, parsing it again, in
//!   the same round trip, before a `Bind` that may reach another server
//!   connection. So `prepare`, [`PgClient::prepare_cached`], the driver's
//!   own `Client` methods through `Deref`, `copy_in`/`copy_out`, pipelined
//!   queries, its lookups of custom types (enums, composites) and the
//!   statements of a [`PgTransaction`] are all safe, and the relay ends
//!   when the connection closes. The relay keeps every statement the driver
//!   holds until the driver closes it, never sends a statement by a name
//!   it does not hold, and closes the connection (which the pool then
//!   drops) rather than guess at a reply it cannot place. A
//!   [`PgClient::with_timeout`] cancel request goes straight to that host.
//!   The relay reads the plaintext protocol: the driver talks to it
//!   without TLS, and under `sslmode=prefer` the connection to the pooler
//!   is plaintext too (the manager's TLS connector is not used). Keep the
//!   pooler on loopback or a private network. `target_session_attrs` is
//!   not checked. Unix platforms only ([`PgClient::is_relayed`] says).
//!   `query`, `query_one`, `query_opt` and `execute` on the [`PgClient`],
//!   given the query as text, run it as an unnamed statement with typed
//!   parameters (one round trip, nothing left on the server). The
//!   parameter types come from a describe the first time a connection sees
//!   a query text: a statement prepared and closed inside a
//!   `BEGIN`/`COMMIT` of its own (the pooler keeps one server connection
//!   for a transaction), cached per connection like statements (LRU,
//!   [`PostgresManager::statement_cache_capacity`]). A query without
//!   parameters needs no describe. With `sslmode=require` the manager
//!   connects as usual, with TLS and without the relay: then only those
//!   text queries are unnamed; other `Client` methods reached through
//!   `Deref` (`query_raw`, `copy_in`, ...) and [`PgClient::prepare`] are
//!   the driver's, unchanged, so a statement you `prepare` yourself is valid only until
//!   the end of its transaction, [`PgClient::prepare_cached`] fails with
//!   [`PgError::NamedStatementBehindPooler`], and custom-type lookups are
//!   not safe.
//!
//! The session rules, either way:
//!
//! - [`ResetMode::Clean`] (`RESET ALL`, `UNLISTEN`, `DISCARD ...`) and a
//!   [fleet budget](PostgresManager::fleet_budget) need a session:
//!   [`PostgresManager::validate`] and `Pool::new` refuse them
//!   ([`PgConfigError`]).
//! - `SET` without `LOCAL`, `LISTEN` and session-level advisory locks
//!   given as text to the pooled client (`query`, `query_one`,
//!   `query_opt`, `execute`, `batch_execute`, `simple_query`, `prepare`,
//!   `prepare_cached`) or to a [`PgTransaction`] (the same methods) fail
//!   with [`PgError::SessionStateBehindPooler`] before anything is sent;
//!   the connection stays usable. Use `SET LOCAL` and
//!   `pg_advisory_xact_lock` inside a transaction, and a direct or
//!   session-mode connection for `LISTEN`. `PREPARE`, `DECLARE ... WITH
//!   HOLD` and `CREATE TEMP` are logged at `WARN` only. The check reads the
//!   leading words of each `;`-separated statement; it is a guard against
//!   common mistakes, not a parser. Calls on the bare `Client`
//!   (`conn.client()`, or its methods reached through `Deref`) are not
//!   seen by it; with unnamed statements through the relay, the relay
//!   refuses those too (an error with SQLSTATE `0A000`).
//!
//! The cost of unnamed statements: a describe (two round trips and a short
//! transaction) once per query text and connection, then one round trip
//! per text query, against `tokio_postgres`'s two per uncached query;
//! through the relay, each message read once more as it passes, and a
//! statement parsed again by the server each time it runs outside the
//! transaction that parsed it. Passed through, none of this.
//!
//! # Abandoned queries
//!
//! A query whose future is dropped (a request timeout) keeps running on the
//! server, and the next user of the connection waits behind it.
//! [`PgClient::with_timeout`] runs a query under a time limit and, when the
//! limit passes, sends the server-side cancel and marks the connection so
//! that the pool closes it on return instead of handing it out again.
//!
//! # Half-open connections and failover
//!
//! TCP keepalive is on by default (first probe after 30 s idle, every 10 s,
//! 3 probes; [`PostgresManager::tcp_keepalive`] says which setting wins), so
//! an idle connection whose peer vanished without closing it is found and
//! closed within about a minute. A connection checked out in that window is
//! caught by the pool's validation, bounded by `validation_timeout`, and
//! closed rather than returned.
//!
//! For a primary and its standbys, list every host and ask for a writable
//! one: `host=db1,db2 target_session_attrs=read-write` (or
//! `Config::host` twice and `Config::target_session_attrs`). A connect
//! tries the hosts in order and skips one that is read-only. When a query
//! through the [`PgClient`] fails with a SQLSTATE that says its server
//! turned read-only (`25006`, after a demotion) or is shutting down or gone
//! (`57P01`, `57P02`, `57P03`, class `08`), that connection is retired
//! ([`PgClient::is_retired`]) and so is every connection to the same server
//! opened before the error: the pool closes them on return and refuses them
//! at validation ([`PgError::Retired`]), and their replacements connect to
//! whichever host accepts writes now. With several hosts, each connect asks
//! the server for its address and port (one more round trip) to know which
//! connections share it. Note that `57P01` is also what a backend ended by
//! `pg_terminate_backend` reports, so terminating one backend that is
//! running a query retires the other connections to that server too.
//!
//! To route reads to standbys and writes to the primary from one handle,
//! with one bound, metrics and holders per host and events on failover,
//! use a [`HostPool`](crate::hosts::HostPool) instead of a
//! multi-host config in one pool.
//!
//! Queries run inside a [`PgTransaction`] or on the bare `Client`
//! (`conn.client()`, or methods reached through `Deref` that the wrapper
//! does not have) are not watched: their errors retire nothing, and the
//! connection is caught at its next validation or when it is closed.
//!
//! # Credentials and fleet budgets
//!
//! [`PostgresManager::with_password_provider`] asks for the password of each
//! new connection (rotate, then `Pool::soft_evict_all()`).
//! [`PostgresManager::fleet_budget`] caps the connections of every process
//! sharing a budget name with advisory-lock tickets; see
//! [`fleet`].
//!
//! # Notices and notifications
//!
//! The connection task logs server notices (`WARNING`, `NOTICE`) at `debug`
//! level through `tracing` and connection errors at `warn`; `LISTEN`/`NOTIFY`
//! notifications are not delivered to pooled clients (they are dropped and
//! logged at `trace`).
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
#![deny(rustdoc::broken_intra_doc_links)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod fleet;
pub mod hosts;
#[cfg(feature = "tokio-postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio-postgres")))]
mod pg;
pub mod pooler;
// For pool-sqlx's PostgreSQL manager, which runs the same relay; hidden
// from the docs and not a supported API (the sibling crates require each
// other's exact version).
#[doc(hidden)]
pub mod relay;
pub mod settings;
// The look at statements sent as text behind a transaction-mode pooler:
// the pooled tokio-postgres client's and the relay's. Only the former
// follows transactions.
#[cfg_attr(not(feature = "tokio-postgres"), allow(dead_code))]
mod session;

#[cfg(feature = "tokio-postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio-postgres")))]
pub use pg::*;
#[doc(hidden)]
pub use relay::open_relays;

/// Guides: PostgreSQL in the situations a service meets, each page with an
/// example that compiles.
pub mod guide {
    #[doc = include_str!("../docs/pgbouncer.md")]
    pub mod pgbouncer {}
    #[doc = include_str!("../docs/fleet_budget.md")]
    pub mod fleet_budget {}
    #[doc = include_str!("../docs/hosts.md")]
    pub mod hosts {}
}

// The crate's own short paths to the pool's items and the pooler settings.
#[allow(unused_imports)]
use pool_core::{ErrorClass, ManageConnection, Pool, PoolConfig, PoolError, PooledConnection};
#[allow(unused_imports)]
pub(crate) use pooler::{PoolerMode, PoolerStatements};
