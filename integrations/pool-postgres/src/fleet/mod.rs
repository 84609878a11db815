//! A connection budget shared by every process of a fleet, enforced by
//! PostgreSQL itself with session-level advisory locks.
//!
//! Each connection of a budget holds one of `total` tickets: the two-key
//! advisory lock `(key, n)` for some `n` in `0..total`, where `key` is
//! derived from the budget's name. The lock is taken by one query right
//! after connecting (it tries the tickets in turn from a random start and
//! stops at the first free one) and is released by the server when the
//! session ends, however it ends: a clean close, a crashed process, a
//! killed container (once the server notices the dropped socket). No
//! ticket free means the connect fails with [`FleetBudgetExhausted`].
//!
//! The manager-agnostic part lives here; the managers run
//! the claim query (`CLAIM_SQL`) and map "no row" to
//! [`FleetBudgetExhausted`].
//!
//! # Key collisions
//!
//! The key is a 32-bit hash of the name ([`FleetBudget::key`]). Two names
//! that hash to the same key share tickets: both budgets then count each
//! other's connections (each still never exceeds its own total, but they
//! can starve each other). Another application using two-key advisory
//! locks with the same first key collides the same way. Single-key
//! (`bigint`) advisory locks live in a separate space and never collide.
//! Pick distinct, descriptive names; [`FleetBudget::key`] shows the key so
//! a deployment can check.
//!
//! # Fair share
//!
//! Without more, the first processes to connect keep the budget: one that
//! starts after the others filled it (a rolling deploy under load) waits
//! until one of their connections retires. With fair share (on by
//! default for a budget of two tickets or more,
//! [`FleetBudget::with_share_interval`]) each of the `N` live
//! instances of a budget is guaranteed `floor(total / N)` tickets
//! ([`fair_share`]); the remainder, `total % N`, and whatever an instance
//! leaves unused go to whoever claims them first (borrowing), so one
//! instance alone can hold the whole budget (its control session's ticket
//! among them).
//!
//! An instance is one manager value (a sqlx manager and its clones count
//! as one). Each holds a small control session of its own, opened by its
//! first connect. Every session the pool opens for a budget counts against
//! it, and so does this one: it takes a ticket like any connection, and
//! the instance's share includes it (an instance holds its control
//! session's ticket and at most `share - 1` connections before borrowing;
//! with `N` live instances, `N` tickets serve no query, and a share of 1
//! guarantees the instance no connection: give the budget at least two
//! tickets per instance). Holding its
//! ticket, it takes the two-key advisory lock `(control key, id)`, where
//! `id` is a random positive number drawn per instance (drawn again if
//! another instance holds the same); `N` is the count of those locks in
//! `pg_locks`. The server drops the locks with the session, so a crashed
//! or killed instance stops counting once the server notices, exactly as
//! its tickets come back. No table or other server object is created.
//!
//! An instance that finds no ticket free for its control session (it
//! starts while the others hold the whole budget) cannot hold a lock
//! without a session outside the budget, so it knocks instead: the
//! session that found no ticket sends a `NOTIFY` on the channel
//! `pool_fleet_<control key>` with its `id`, and closes at once. Every control session listens on that channel; an `id` heard in
//! the last two intervals and not (yet) holding a member lock counts as
//! one more instance, and a wanting one. The instance tries again five
//! times an interval, and at once when its pool asks for a connection, and
//! until its control session has joined (and counted once), its pool's
//! connects are refused, so that the tickets the others give back go to
//! the control session first. Apart from such a knock (one short session
//! per try) and a connect that finds no ticket free (it asks, then
//! closes), no session of the budget is ever open without a ticket.
//!
//! Every `share_interval` (1 s by default) the control session reads `N`
//! and who is wanting, one query on `pg_locks`; nothing is read on a
//! checkout or a return. An instance below its share whose connect found
//! no ticket signals need by holding `(control key, -pid)` (a "wanting"
//! lock, `(control key, -id)`) until it reaches its share or has had no
//! refusal for three intervals. While any instance wants, an instance at or above its share
//! claims no more tickets (it refuses before connecting, and its claim
//! query also looks for wanting locks in `pg_locks`, in case its own
//! view is one interval old), and one
//! above its share gives the excess back: that many of its connections
//! are closed when they next come back to the pool, or are next checked
//! out idle (the manager's `has_broken` says `true` for them, counted as
//! broken in the pool's metrics; with `ValidationMode::IsValid` each of
//! the instance's other connections is pinged once at its next checkout,
//! as after any broken connection). The new instance's connects then find
//! those tickets free. Time to share: at most one interval for the others
//! to see the need, then the time until their connections come back and
//! the new instance's pool retries its connect (its back-off is at most
//! about a second); an instance whose excess connections sit idle,
//! untouched, gives them back only at their `idle_timeout`.
//!
//! The control key is the FNV-1a hash of the name followed by a zero byte
//! and `fair-share` ([`FleetBudget::control_key`]), made different from
//! the ticket key if the two ever hash alike. It collides like the ticket
//! key: a budget whose ticket or control key equals this one's control
//! key (or another application's two-key advisory locks with that first
//! key) would be miscounted as instances or as wanting. The second keys of
//! control locks are instance ids, positive for members and negated for
//! wanting; they never meet tickets, which live under the other first key.

// A pure core and an I/O shell: the budget and its errors (`budget`), the
// SQL text and key hashing (`sql`), the seat accounting (`ledger`) and the
// fair share decisions (`share`) do no I/O, are tested alone, and never
// name the other two: the state the managers hold (`instance`), which ties
// them together, and the control task (`control`), the only part that
// talks to the server.
mod budget;
mod control;
mod instance;
mod ledger;
mod share;
mod sql;

pub use budget::{
    FleetBudget, FleetBudgetConfigError, FleetBudgetExhausted, DEFAULT_SHARE_INTERVAL,
};
#[doc(hidden)]
pub use control::{BoxError, BoxFuture, ControlSession, OpenControl};
#[doc(hidden)]
pub use instance::{FleetSeat, FleetShare};
#[doc(hidden)]
pub use ledger::Claim;
pub use ledger::FleetShareView;
pub use share::fair_share;
#[doc(hidden)]
pub use sql::CLAIM_SQL;
