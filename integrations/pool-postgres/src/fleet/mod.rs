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

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

mod share;

/// The query that claims a ticket. Parameters: `$1` the key (`int4`), `$2`
/// the total (`int4`), `$3` the first ticket to try (`int4`, in
/// `0..total`). Returns the ticket taken, or no row when all are held.
///
/// The tickets are tried in order from `$3`, wrapping around, and the scan
/// stops at the first lock taken (`LIMIT 1`), so at most one ticket is
/// held per connection.
#[doc(hidden)]
pub const CLAIM_SQL: &str = "SELECT t FROM \
    (SELECT (($3::int4 + n) % $2::int4)::int4 AS t FROM generate_series(0, $2::int4 - 1) AS n) AS tickets \
    WHERE pg_try_advisory_lock($1::int4, t) LIMIT 1";

/// A named budget of server connections.
///
/// ```
/// use pool_postgres::fleet::FleetBudget;
///
/// let budget = FleetBudget::new("orders-api", 40)?;
/// assert_eq!(budget.total(), 40);
/// // The key is the same in every process and every build.
/// assert_eq!(budget.key(), FleetBudget::new("orders-api", 1)?.key());
/// # Ok::<(), pool_postgres::fleet::FleetBudgetConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetBudget {
    name: Arc<str>,
    key: i32,
    control_key: i32,
    total: u32,
    /// `None`: fair share off.
    share_interval: Option<Duration>,
}

/// How often an instance rechecks the count of instances and who wants
/// tickets, by default: see [`FleetBudget::with_share_interval`].
pub const DEFAULT_SHARE_INTERVAL: Duration = Duration::from_secs(1);

impl FleetBudget {
    /// A budget of `total` connections named `name`.
    ///
    /// # Errors
    ///
    /// [`FleetBudgetConfigError`] for an empty name, a total of zero, or a
    /// total above `i32::MAX`.
    pub fn new(name: &str, total: u32) -> Result<Self, FleetBudgetConfigError> {
        if name.is_empty() {
            return Err(FleetBudgetConfigError::EmptyName);
        }
        if total == 0 {
            return Err(FleetBudgetConfigError::ZeroTotal);
        }
        if i32::try_from(total).is_err() {
            return Err(FleetBudgetConfigError::TotalTooLarge { total });
        }
        let key = key_of(name);
        Ok(Self {
            name: name.into(),
            key,
            control_key: control_key_of(name, key),
            total,
            // One ticket leaves nothing to share: the control session
            // would hold it, and no connection could ever open.
            share_interval: (total > 1).then_some(DEFAULT_SHARE_INTERVAL),
        })
    }

    /// Sets how often each instance rechecks how many instances share the
    /// budget and whether one of them wants tickets ([fair
    /// share](self#fair-share)), or turns fair share off with `None` (no
    /// control session; the first to connect keep the budget). Defaults to
    /// [`DEFAULT_SHARE_INTERVAL`], 1 s (off for a budget of one ticket,
    /// which the control session would hold): one query on `pg_locks` per
    /// instance per interval. A shorter interval moves tickets to a new
    /// instance sooner, for more of those queries.
    ///
    /// ```
    /// use std::time::Duration;
    /// use pool_postgres::fleet::{FleetBudget, FleetBudgetConfigError};
    ///
    /// let budget = FleetBudget::new("orders-api", 40)?.with_share_interval(Some(Duration::from_millis(250)))?;
    /// assert_eq!(budget.share_interval(), Some(Duration::from_millis(250)));
    /// assert_eq!(
    ///     budget.with_share_interval(Some(Duration::ZERO)),
    ///     Err(FleetBudgetConfigError::ZeroShareInterval)
    /// );
    /// # Ok::<(), pool_postgres::fleet::FleetBudgetConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`FleetBudgetConfigError::ZeroShareInterval`] for a zero interval,
    /// [`FleetBudgetConfigError::ShareOfOneTicket`] for an interval on a
    /// budget of one ticket.
    pub fn with_share_interval(
        mut self,
        interval: Option<Duration>,
    ) -> Result<Self, FleetBudgetConfigError> {
        if interval == Some(Duration::ZERO) {
            return Err(FleetBudgetConfigError::ZeroShareInterval);
        }
        if interval.is_some() && self.total < 2 {
            return Err(FleetBudgetConfigError::ShareOfOneTicket);
        }
        self.share_interval = interval;
        Ok(self)
    }

    /// The fair share's recheck interval; `None` when fair share is off.
    pub fn share_interval(&self) -> Option<Duration> {
        self.share_interval
    }

    /// The first key of the fair share's control locks (see [fair
    /// share](self#fair-share)): the 32-bit FNV-1a hash of the name, a zero
    /// byte and `fair-share`, never equal to [`key`](Self::key).
    pub fn control_key(&self) -> i32 {
        self.control_key
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The advisory lock's first key: the 32-bit FNV-1a hash of the name's
    /// UTF-8 bytes, as a signed integer. `pg_locks` shows it in `classid`
    /// (as an unsigned number) with `objsubid = 2`.
    pub fn key(&self) -> i32 {
        self.key
    }

    /// How many connections the whole fleet may hold.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// The total as the `int4` [`CLAIM_SQL`] takes.
    #[doc(hidden)]
    pub fn total_i32(&self) -> i32 {
        // Checked in `new`.
        i32::try_from(self.total).unwrap_or(i32::MAX)
    }

    /// A random first ticket for [`CLAIM_SQL`]'s `$3`, so that connects
    /// spread over the tickets instead of all scanning from zero.
    #[doc(hidden)]
    pub fn random_start(&self) -> i32 {
        i32::try_from(fastrand::u32(0..self.total)).unwrap_or(0)
    }

    /// [`CLAIM_SQL`] with this budget's key and total and the first ticket
    /// `start` written in as literals, for drivers that send a query without
    /// parameters in one round trip (PostgreSQL's simple query protocol)
    /// but need two for one with parameters. Only integers are written in,
    /// so nothing from the name reaches the SQL text.
    #[doc(hidden)]
    pub fn claim_sql_literal(&self, start: i32) -> String {
        // In parentheses: `-2147483648::int4` would cast before negating,
        // and overflow.
        CLAIM_SQL
            .replace("$1", &format!("({})", self.key))
            .replace("$2", &format!("({})", self.total_i32()))
            .replace("$3", &format!("({start})"))
    }

    /// The error for a connect that found no free ticket.
    #[doc(hidden)]
    pub fn exhausted(&self) -> FleetBudgetExhausted {
        FleetBudgetExhausted {
            name: self.name.clone(),
            total: self.total,
        }
    }
}

/// 32-bit FNV-1a: stable across processes, builds and platforms.
fn key_of(name: &str) -> i32 {
    fnv1a(name.bytes())
}

fn fnv1a(bytes: impl Iterator<Item = u8>) -> i32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in bytes {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    i32::from_ne_bytes(hash.to_ne_bytes())
}

/// The control key: FNV-1a of the name, `\0` and `fair-share`; flipped
/// if it equals the ticket key, so a budget's two spaces never meet.
fn control_key_of(name: &str, key: i32) -> i32 {
    let control = fnv1a(name.bytes().chain(*b"\0fair-share"));
    if control == key {
        !control
    } else {
        control
    }
}

/// An `int4` key as `pg_locks` shows it (`classid`, `objid`: an oid).
fn as_oid(key: i32) -> i64 {
    i64::from(u32::from_ne_bytes(key.to_ne_bytes()))
}

/// A connect found every ticket of its fleet budget held.
///
/// Not a database failure: the pool keeps retrying with back-off while
/// callers wait for one of its own connections or a ticket, and a timeout
/// names the budget through this error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetBudgetExhausted {
    name: Arc<str>,
    total: u32,
}

impl FleetBudgetExhausted {
    /// The budget's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The budget's total.
    pub fn total(&self) -> u32 {
        self.total
    }
}

impl fmt::Display for FleetBudgetExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "fleet budget \"{}\" exhausted: all {} connections of the budget are open",
            self.name, self.total
        )
    }
}

impl Error for FleetBudgetExhausted {}

/// A fleet budget that cannot work.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FleetBudgetConfigError {
    /// The name is empty.
    EmptyName,
    /// The total is zero: no connection could ever open.
    ZeroTotal,
    /// The total does not fit PostgreSQL's `int4` lock key.
    TotalTooLarge {
        /// The total asked for.
        total: u32,
    },
    /// A budget together with a transaction-mode pooler
    /// ([`PoolerMode::Transaction`](crate::PoolerMode::Transaction)): the
    /// pooler hands the server session to other clients between
    /// transactions, so the session lock would count a connection that is
    /// not the pool's, and be released or held at the pooler's whim.
    BehindTransactionPooler,
    /// A fair share recheck interval of zero: the recheck would never
    /// pause.
    ZeroShareInterval,
    /// Fair share asked of a budget of one ticket: the instance's control
    /// session holds a ticket, so no connection could ever open.
    ShareOfOneTicket,
    /// A fair share interval set on a manager with no fleet budget to
    /// apply it to: set `fleet_budget` first.
    ShareIntervalWithoutBudget,
}

impl fmt::Display for FleetBudgetConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptyName => f.write_str("fleet budget: the name must not be empty"),
            Self::ZeroTotal => f.write_str("fleet budget: the total must be at least 1"),
            Self::TotalTooLarge { total } => write!(
                f,
                "fleet budget: a total of {total} is more than {}",
                i32::MAX
            ),
            Self::BehindTransactionPooler => f.write_str(
                "fleet budget: fleet_budget cannot work with pooler_mode(PoolerMode::Transaction): \
                 its tickets are session locks, which a transaction-mode pooler gives to \
                 other clients; budget the pooler's server connections instead",
            ),
            Self::ShareOfOneTicket => f.write_str(
                "fleet budget: fair share needs a total of at least 2 (its control session \
                 holds a ticket); a budget of 1 has fair share off",
            ),
            Self::ZeroShareInterval => f.write_str(
                "fleet budget: the fair share interval must be above zero (None turns fair share off)",
            ),
            Self::ShareIntervalWithoutBudget => f.write_str(
                "fleet budget: fleet_share_interval was set before any fleet_budget; set the budget first",
            ),
        }
    }
}

impl Error for FleetBudgetConfigError {}

pub(crate) use share::decide;
pub use share::fair_share;

/// A boxed future, as the control session's driver code returns.
#[doc(hidden)]
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
/// An error of the control session (it is only logged).
#[doc(hidden)]
pub type BoxError = Box<dyn Error + Send + Sync>;

mod control {
    use super::{BoxError, BoxFuture};

    /// A driver's connection used as the fair share's control session.
    /// Public in a private module: nameable only inside the crate, yet
    /// usable in the sealed sqlx driver trait (without a sqlx feature
    /// nothing outside the crate could reach it anyway).
    #[allow(unreachable_pub)]
    pub trait ControlSession: Send {
        /// Runs one statement of literal SQL (one round trip, PostgreSQL's
        /// simple query protocol) and returns its first row's columns, each
        /// an `int8`.
        fn row<'a>(&'a mut self, sql: &'a str) -> BoxFuture<'a, Result<Vec<i64>, BoxError>>;

        /// Runs statements of literal SQL that return no row (`LISTEN`).
        fn execute<'a>(&'a mut self, sql: &'a str) -> BoxFuture<'a, Result<(), BoxError>>;

        /// The payloads of the notifications received on this session
        /// since the last call (those of a `LISTEN` the session runs),
        /// oldest first. No I/O: what the driver has read already.
        fn notifications(&mut self) -> Vec<String>;
    }
}
#[doc(hidden)]
pub use control::ControlSession;

/// Opens a control session: the manager's connect settings, without a
/// ticket.
#[doc(hidden)]
pub type OpenControl =
    Box<dyn Fn() -> BoxFuture<'static, Result<Box<dyn ControlSession>, BoxError>> + Send + Sync>;

/// How a connect claims its ticket under fair share, decided before it
/// connects ([`FleetShare::admit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[doc(hidden)]
pub struct Claim {
    /// At or above its share: the ticket would be borrowed, and is not
    /// taken while another instance wants.
    borrowing: bool,
}

/// One instance's fair share state: counts and decisions the control task
/// writes once per interval, read without I/O on connect and return.
///
/// Every atomic here is a counter or a flag read as a hint (Relaxed
/// throughout): nothing else is published through them, and a stale value
/// costs at most one interval's delay in a decision that the next recheck
/// makes again.
#[doc(hidden)]
pub struct FleetShare {
    budget: FleetBudget,
    interval: Duration,
    /// Connections of this instance holding a ticket.
    held: AtomicU32,
    /// Given back by `has_broken`, not yet closed (managers that count
    /// closes, not seats: `note_closed`).
    #[doc(hidden)]
    closing: AtomicU32,
    /// The guaranteed share, as last computed.
    share: AtomicU32,
    /// Live instances, as last counted (0: not yet).
    members: AtomicU32,
    /// Another instance holds its wanting lock (as last read).
    others_want: AtomicBool,
    /// Connections still to close on return.
    give_back: AtomicU32,
    /// A claim under the share found no ticket since the last recheck.
    refused: AtomicBool,
    /// This instance holds its wanting lock.
    wanting: AtomicBool,
    /// The control session's backend pid (0: none).
    control_pid: AtomicI32,
    /// This instance's id: the second key of its member lock, and what it
    /// notifies when it cannot join. Random, positive; drawn again if
    /// another instance holds the same.
    id: AtomicI32,
    /// The control session holds its ticket and its member lock: the
    /// instance counts one more ticket than its connections hold.
    joined: AtomicBool,
    /// The control session found no ticket to join with and knocked: the
    /// instance's connects wait until it has joined (and counted once), so
    /// that the tickets the others give back go to the control session
    /// first.
    knocked: AtomicBool,
    /// A control task is running for this instance.
    running: AtomicBool,
    /// Wakes the control task: a refusal to signal, or this state dropped.
    wake: Arc<Notify>,
}

impl fmt::Debug for FleetShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetShare")
            .field("budget", &self.budget.name())
            .field("held", &self.held.load(Ordering::Relaxed))
            .field("share", &self.share.load(Ordering::Relaxed))
            .field("members", &self.members.load(Ordering::Relaxed))
            .field("wanting", &self.wanting.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Drop for FleetShare {
    fn drop(&mut self) {
        // The control task holds only a `Weak`: woken, it finds this gone,
        // closes its session and ends.
        self.wake.notify_one();
    }
}

impl FleetShare {
    /// The state for `budget`; `None` when its fair share is off.
    #[doc(hidden)]
    pub fn new(budget: &FleetBudget) -> Option<Arc<Self>> {
        let interval = budget.share_interval()?;
        Some(Arc::new(Self {
            budget: budget.clone(),
            interval,
            held: AtomicU32::new(0),
            closing: AtomicU32::new(0),
            // Until the first count: the whole budget, as without fair
            // share.
            share: AtomicU32::new(budget.total()),
            members: AtomicU32::new(0),
            others_want: AtomicBool::new(false),
            give_back: AtomicU32::new(0),
            refused: AtomicBool::new(false),
            wanting: AtomicBool::new(false),
            control_pid: AtomicI32::new(0),
            id: AtomicI32::new(random_id()),
            joined: AtomicBool::new(false),
            knocked: AtomicBool::new(false),
            running: AtomicBool::new(false),
            wake: Arc::new(Notify::new()),
        }))
    }

    /// Before a connect: `Err` when the instance is at or above its share
    /// while another wants (no connection is opened for a ticket it would
    /// not take), else how to claim.
    ///
    /// # Errors
    ///
    /// [`FleetBudgetExhausted`], as when no ticket is free.
    #[doc(hidden)]
    pub fn admit(&self) -> Result<Claim, FleetBudgetExhausted> {
        if self.knocked.load(Ordering::Relaxed) {
            // The control session tries to join again now.
            self.wake.notify_one();
            return Err(self.budget.exhausted());
        }
        let borrowing = self.tickets() >= self.share.load(Ordering::Relaxed);
        if borrowing && self.others_want.load(Ordering::Relaxed) {
            return Err(self.budget.exhausted());
        }
        Ok(Claim { borrowing })
    }

    /// The tickets this instance holds: its connections', and its control
    /// session's once it has joined.
    fn tickets(&self) -> u32 {
        self.held.load(Ordering::Relaxed) + u32::from(self.joined.load(Ordering::Relaxed))
    }

    /// The claim query for `claim`, parameters written in: a borrowing
    /// claim takes no ticket while another instance holds its wanting lock.
    #[doc(hidden)]
    pub fn claim_sql(&self, claim: Claim) -> String {
        let budget = &self.budget;
        let tickets = format!(
            "SELECT t FROM (SELECT ((({start})::int4 + n) % ({total})::int4)::int4 AS t \
             FROM generate_series(0, ({total})::int4 - 1) AS n) AS tickets",
            start = budget.random_start(),
            total = budget.total_i32(),
        );
        let lock = format!("pg_try_advisory_lock(({})::int4, t)", budget.key());
        if !claim.borrowing {
            return format!("{tickets} WHERE {lock} LIMIT 1");
        }
        // CASE fixes the order: the lock is tried only when nobody wants
        // (an AND could be evaluated lock first). The EXISTS is an
        // uncorrelated sub-select, evaluated once per query.
        format!(
            "{tickets} WHERE CASE WHEN EXISTS (SELECT 1 FROM pg_locks l \
             WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted \
             AND l.classid::int8 = {control} AND l.objid::int8 >= 2147483648 \
             AND l.pid <> {pid} AND {here}) THEN false ELSE {lock} END LIMIT 1",
            control = as_oid(budget.control_key()),
            pid = self.control_pid.load(Ordering::Relaxed),
            here = THIS_DATABASE,
        )
    }

    /// A claim took its ticket: counted until the returned seat drops.
    #[cfg_attr(not(feature = "tokio-postgres"), allow(dead_code))]
    #[doc(hidden)]
    pub fn seat(self: &Arc<Self>) -> FleetSeat {
        self.note_claimed();
        FleetSeat(Arc::clone(self))
    }

    /// A claim took its ticket, for a manager that calls
    /// [`note_closed`](Self::note_closed) when the connection closes.
    #[doc(hidden)]
    pub fn note_claimed(&self) {
        self.held.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection counted by [`note_claimed`](Self::note_claimed) closes
    /// (one given back by [`give_back_counted`](Self::give_back_counted)
    /// was counted out already).
    #[doc(hidden)]
    pub fn note_closed(&self) {
        let closing = self
            .closing
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        if closing.is_err() {
            let _ = self
                .held
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        }
    }

    /// A claim found no ticket: below the share, that is need, signalled
    /// at once (the control task wakes and takes the wanting lock).
    #[doc(hidden)]
    pub fn refused(&self, claim: Claim) {
        if claim.borrowing {
            return;
        }
        self.refused.store(true, Ordering::Relaxed);
        if !self.wanting.load(Ordering::Relaxed) {
            self.wake.notify_one();
        }
    }

    /// Whether one more connection is to be given back now; takes it from
    /// the count. No I/O: one load when there is nothing to give back.
    #[doc(hidden)]
    pub fn take_give_back(&self) -> bool {
        self.give_back.load(Ordering::Relaxed) != 0
            && self
                .give_back
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
    }

    /// [`take_give_back`](Self::take_give_back) for a manager that counts
    /// closes: the connection given back is counted out now, and its close
    /// later is not counted again.
    #[doc(hidden)]
    pub fn give_back_counted(&self) -> bool {
        if !self.take_give_back() {
            return false;
        }
        self.closing.fetch_add(1, Ordering::Relaxed);
        let _ = self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        true
    }

    /// Starts the control task unless one runs; `open` makes its session
    /// opener, called only when it starts. Outside a tokio runtime nothing
    /// starts (the next connect tries again).
    #[doc(hidden)]
    pub fn start_control(self: &Arc<Self>, open: impl FnOnce() -> OpenControl) {
        // Relaxed: a flag only this function sets, and the task's guard
        // clears; two starts racing see one `true` from the swap.
        if self.running.swap(true, Ordering::Relaxed) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.running.store(false, Ordering::Relaxed);
            return;
        };
        // The guard goes into the task's future, so that a future dropped
        // before its first poll (a runtime shutting down) clears the flag
        // too.
        let running = Running(Arc::downgrade(self));
        runtime.spawn(control(
            running,
            Arc::downgrade(self),
            Arc::clone(&self.wake),
            open(),
        ));
    }

    /// This instance's view: (live instances, share, held, wanting).
    #[doc(hidden)]
    pub fn view(&self) -> FleetShareView {
        FleetShareView {
            members: self.members.load(Ordering::Relaxed),
            share: self.share.load(Ordering::Relaxed),
            held: self.tickets(),
            wanting: self.wanting.load(Ordering::Relaxed),
        }
    }

    /// The control session's ticket: the one taken (`0..total`) or `-1`
    /// when none is free, and the session's backend pid.
    fn join_sql(&self) -> String {
        format!(
            "SELECT coalesce(({}), -1)::int8, pg_backend_pid()::int8",
            self.budget.claim_sql_literal(self.budget.random_start())
        )
    }

    /// The member lock, on a session holding its ticket: `1` when taken.
    fn member_sql(&self) -> String {
        format!(
            "SELECT pg_try_advisory_lock(({})::int4, ({})::int4)::int4::int8",
            self.budget.control_key(),
            self.id.load(Ordering::Relaxed)
        )
    }

    /// The channel on which an instance that cannot join says so.
    fn channel(&self) -> String {
        format!("pool_fleet_{}", as_oid(self.budget.control_key()))
    }

    /// Run by a session that found no ticket for the control session,
    /// before it closes: tells the members that this instance wants in.
    fn knock_sql(&self) -> String {
        format!(
            "SELECT (pg_notify('{}', '{}') IS NULL)::int4::int8",
            self.channel(),
            self.id.load(Ordering::Relaxed)
        )
    }

    /// Members, others wanting, and how many of `knocking` (ids that asked
    /// to join lately) are members now.
    fn count_sql(&self, knocking: &[i32]) -> String {
        let ids: Vec<String> = knocking.iter().map(|id| as_oid(*id).to_string()).collect();
        format!(
            "SELECT count(*) FILTER (WHERE l.objid::int8 < 2147483648)::int8, \
             count(*) FILTER (WHERE l.objid::int8 >= 2147483648 \
               AND l.pid <> pg_backend_pid())::int8, \
             count(*) FILTER (WHERE l.objid::int8 = ANY (ARRAY[{}]::int8[]))::int8 \
             FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 2 \
             AND l.granted AND l.classid::int8 = {} AND {THIS_DATABASE}",
            ids.join(", "),
            as_oid(self.budget.control_key())
        )
    }

    fn want_sql(&self, want: bool) -> String {
        let f = if want {
            "pg_try_advisory_lock"
        } else {
            "pg_advisory_unlock"
        };
        format!(
            "SELECT {f}(({})::int4, ({})::int4)::int4::int8",
            self.budget.control_key(),
            -self.id.load(Ordering::Relaxed)
        )
    }

    /// One recheck on the control session: count, decide, and take or
    /// drop the wanting lock.
    async fn recheck(
        &self,
        session: &mut Control,
        last_refused: &mut Option<Instant>,
    ) -> Result<(), BoxError> {
        // Knocks read by the last query (or the driver since): the ids of
        // instances that found no ticket to join with, each remembered for
        // two intervals (a knocker knocks again at least once an interval)
        // or until every knocker is a member.
        let own = self.id.load(Ordering::Relaxed);
        for payload in session.session.notifications() {
            if let Ok(id) = payload.parse::<i32>() {
                if id != own {
                    session.knocking.retain(|(known, _)| *known != id);
                    session.knocking.push((id, Instant::now()));
                }
            }
        }
        let remember = self.interval * 2;
        session.knocking.retain(|(_, at)| at.elapsed() < remember);
        let ids: Vec<i32> = session.knocking.iter().map(|(id, _)| *id).collect();
        let row = session.session.row(&self.count_sql(&ids)).await?;
        let count = |i: usize| {
            row.get(i)
                .and_then(|&n| u32::try_from(n).ok())
                .ok_or("the fair share count returned no count")
        };
        let (joined, others, knocked_in) = (count(0)?, count(1)?, count(2)?);
        // An instance knocking is a member still outside, and it wants.
        let knocking = u32::try_from(ids.len())
            .unwrap_or(u32::MAX)
            .saturating_sub(knocked_in);
        if knocking == 0 {
            // All in: none of them is to be counted again should it leave.
            session.knocking.clear();
        }
        let members = joined.saturating_add(knocking);
        let others_want = others > 0 || knocking > 0;
        if self.refused.swap(false, Ordering::Relaxed) {
            *last_refused = Some(Instant::now());
        }
        let refused_lately = last_refused.is_some_and(|at| at.elapsed() < self.interval * 3);
        let held = self.held.load(Ordering::Relaxed);
        let decision = decide(
            self.budget.total(),
            members,
            held + 1,
            others_want,
            refused_lately,
        );
        self.members.store(members, Ordering::Relaxed);
        self.share.store(decision.share, Ordering::Relaxed);
        self.others_want.store(others_want, Ordering::Relaxed);
        // The control session's own ticket is not given back.
        self.give_back
            .store(decision.give_back.min(held), Ordering::Relaxed);
        if decision.want != session.wanting {
            session.session.row(&self.want_sql(decision.want)).await?;
            session.wanting = decision.want;
            self.wanting.store(decision.want, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The control session is gone: forget what it read, so that this
    /// instance neither gives back nor holds back on stale news.
    fn forget(&self) {
        self.joined.store(false, Ordering::Relaxed);
        self.knocked.store(false, Ordering::Relaxed);
        self.others_want.store(false, Ordering::Relaxed);
        self.give_back.store(0, Ordering::Relaxed);
        self.wanting.store(false, Ordering::Relaxed);
        self.control_pid.store(0, Ordering::Relaxed);
    }
}

/// What an instance knows of its fair share, as of its last recheck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetShareView {
    /// Live instances of the budget counted (0 before the first count).
    pub members: u32,
    /// This instance's guaranteed share (`fair_share(total, members)`).
    pub share: u32,
    /// This instance's connections holding a ticket.
    pub held: u32,
    /// Whether this instance signals need (holds its wanting lock).
    pub wanting: bool,
}

/// The filter on `pg_locks` for this database's locks (advisory locks are
/// per database).
const THIS_DATABASE: &str =
    "l.database = (SELECT oid FROM pg_database WHERE datname = current_database())";

/// One ticket counted for its instance; dropped with its connection.
#[cfg_attr(not(feature = "tokio-postgres"), allow(dead_code))]
#[doc(hidden)]
pub struct FleetSeat(Arc<FleetShare>);

impl FleetSeat {
    /// Whether this connection is to be given back (closed on return).
    #[cfg_attr(not(feature = "tokio-postgres"), allow(dead_code))]
    #[doc(hidden)]
    pub fn give_back(&self) -> bool {
        self.0.take_give_back()
    }
}

impl fmt::Debug for FleetSeat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FleetSeat")
    }
}

impl Drop for FleetSeat {
    fn drop(&mut self) {
        let _ = self
            .0
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}

/// Clears `running` however the control task ends (a runtime shutting
/// down drops it mid-await, or before it ever ran), so the next connect
/// starts another.
struct Running(Weak<FleetShare>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(share) = self.0.upgrade() {
            share.forget();
            share.running.store(false, Ordering::Relaxed);
        }
    }
}

struct Control {
    session: Box<dyn ControlSession>,
    wanting: bool,
    /// Instances that knocked lately, and when.
    knocking: Vec<(i32, Instant)>,
}

/// A random instance id: positive, so that its negation (the wanting
/// lock) never meets a member lock.
fn random_id() -> i32 {
    fastrand::i32(1..=i32::MAX)
}

/// Opens a control session and joins: takes a ticket, then the member
/// lock, then listens for knocks. `None` when it could not: without a
/// free ticket it knocks first, and the session closes (dropped here), so
/// that no session outside the budget stays open.
async fn join(state: &FleetShare, open: &OpenControl) -> Result<Option<Control>, BoxError> {
    let mut session = open().await?;
    let row = session.row(&state.join_sql()).await?;
    let ticket = row.first().copied().unwrap_or(-1);
    if ticket < 0 {
        session.row(&state.knock_sql()).await?;
        state.knocked.store(true, Ordering::Relaxed);
        return Ok(None);
    }
    if session.row(&state.member_sql()).await?.first() != Some(&1) {
        // Another instance drew the same id: draw again, and join on the
        // next try (this session, and its ticket, close here).
        state.id.store(random_id(), Ordering::Relaxed);
        return Ok(None);
    }
    session
        .execute(&format!("LISTEN \"{}\"", state.channel()))
        .await?;
    let pid = row.get(1).and_then(|&p| i32::try_from(p).ok());
    state.control_pid.store(pid.unwrap_or(0), Ordering::Relaxed);
    state.joined.store(true, Ordering::Relaxed);
    Ok(Some(Control {
        session,
        wanting: false,
        knocking: Vec::new(),
    }))
}

/// The control task: opens the session, rechecks every interval (or at
/// once when woken by a refusal), and ends when the instance's state is
/// dropped, closing the session (which releases its locks).
async fn control(_running: Running, share: Weak<FleetShare>, wake: Arc<Notify>, open: OpenControl) {
    let mut session: Option<Control> = None;
    let mut last_refused = None;
    loop {
        let Some(state) = share.upgrade() else {
            return;
        };
        if session.is_none() {
            match join(&state, &open).await {
                Ok(joined) => session = joined,
                Err(e) => {
                    // Not shut out but failing (the server unreachable, say):
                    // the connects go on, and report what they meet.
                    state.knocked.store(false, Ordering::Relaxed);
                    tracing::debug!(budget = state.budget.name(), error = %e, "fleet fair share: joining failed");
                }
            }
        }
        if let Some(open_session) = session.as_mut() {
            match state.recheck(open_session, &mut last_refused).await {
                // Joined and counted: the connects may claim again.
                Ok(()) => state.knocked.store(false, Ordering::Relaxed),
                Err(e) => {
                    tracing::debug!(budget = state.budget.name(), error = %e, "fleet fair share: recheck failed");
                    session = None;
                    state.forget();
                }
            }
        }
        // Shut out, it tries again five times an interval (the others
        // give tickets back within about one, as their connections come
        // back): one short session each.
        let wait = if state.knocked.load(Ordering::Relaxed) {
            state.interval / 5
        } else {
            state.interval
        };
        drop(state);
        // Woken early by a refusal to signal, or by the state's drop.
        let _ = tokio::time::timeout(wait, wake.notified()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_literal_claim_query_has_no_parameters_left() {
        let budget = FleetBudget::new("orders-api", 40).unwrap();
        let sql = budget.claim_sql_literal(7);
        assert!(sql.contains("pg_try_advisory_lock") && !sql.contains('$'));
    }

    #[test]
    fn keys_are_stable_and_differ_by_name() {
        // FNV-1a of "a" is 0xe40c292c: fixed, whatever the platform.
        assert_eq!(key_of("a"), 0xe40c_292c_u32 as i32);
        assert_eq!(key_of(""), 0x811c_9dc5_u32 as i32);
        assert_ne!(key_of("orders"), key_of("billing"));
    }

    #[test]
    fn bad_budgets_are_typed_errors() {
        assert_eq!(
            FleetBudget::new("", 1),
            Err(FleetBudgetConfigError::EmptyName)
        );
        assert_eq!(
            FleetBudget::new("x", 0),
            Err(FleetBudgetConfigError::ZeroTotal)
        );
        assert_eq!(
            FleetBudget::new("x", u32::MAX),
            Err(FleetBudgetConfigError::TotalTooLarge { total: u32::MAX })
        );
    }

    #[test]
    fn the_start_is_within_the_total_and_the_error_names_the_budget() {
        let budget = FleetBudget::new("api", 3).expect("valid");
        for _ in 0..100 {
            assert!((0..3).contains(&budget.random_start()));
        }
        let text = budget.exhausted().to_string();
        assert!(text.contains("fleet budget") && text.contains("\"api\"") && text.contains('3'));
    }

    #[test]
    fn the_literal_claim_is_the_claim_with_its_parameters_written_in() {
        let budget = FleetBudget::new("a", 3).expect("valid");
        let sql = budget.claim_sql_literal(2);
        assert!(!sql.contains('$'), "{sql}");
        assert!(
            sql.contains("pg_try_advisory_lock((-468965076)::int4, t)"),
            "{sql}"
        );
        assert!(sql.contains("(((2)::int4 + n) % (3)::int4)"), "{sql}");
        assert!(sql.contains("generate_series(0, (3)::int4 - 1)"), "{sql}");
    }

    #[test]
    fn a_budget_behind_a_pooler_says_why_it_is_refused() {
        let text = FleetBudgetConfigError::BehindTransactionPooler.to_string();
        assert!(
            text.contains("fleet budget") && text.contains("pooler"),
            "{text}"
        );
    }

    #[test]
    fn the_control_key_is_stable_and_never_the_ticket_key() {
        let budget = FleetBudget::new("orders", 4).expect("valid");
        assert_ne!(budget.control_key(), budget.key());
        assert_eq!(
            budget.control_key(),
            control_key_of("orders", key_of("orders"))
        );
        // Equal hashes are pulled apart.
        assert_eq!(
            control_key_of("x", control_key_of("x", 0)),
            !control_key_of("x", 0)
        );
        assert_eq!(as_oid(-1), 4_294_967_295);
        assert_eq!(as_oid(7), 7);
    }

    #[test]
    fn bad_share_settings_are_typed_errors() {
        let budget = FleetBudget::new("x", 3).expect("valid");
        assert_eq!(budget.share_interval(), Some(DEFAULT_SHARE_INTERVAL));
        assert_eq!(
            budget.clone().with_share_interval(Some(Duration::ZERO)),
            Err(FleetBudgetConfigError::ZeroShareInterval)
        );
        // One ticket: off by default, and refused when asked for.
        let one = FleetBudget::new("x", 1).expect("valid");
        assert_eq!(one.share_interval(), None);
        assert_eq!(
            one.with_share_interval(Some(DEFAULT_SHARE_INTERVAL)),
            Err(FleetBudgetConfigError::ShareOfOneTicket)
        );
        assert!(FleetBudgetConfigError::ShareOfOneTicket
            .to_string()
            .contains("at least 2"));
        let off = budget.clone().with_share_interval(None).expect("off");
        assert!(FleetShare::new(&off).is_none());
        assert!(FleetShare::new(&budget).is_some());
        for e in [
            FleetBudgetConfigError::ZeroShareInterval,
            FleetBudgetConfigError::ShareIntervalWithoutBudget,
        ] {
            let text = e.to_string();
            assert!(
                text.contains("fleet budget") && text.contains("interval"),
                "{text}"
            );
        }
    }

    #[test]
    fn claims_borrow_politely_and_accounting_counts_each_connection_once() {
        let budget = FleetBudget::new("a", 4).expect("valid");
        let share = FleetShare::new(&budget).expect("on");
        // Before the first count the share is the whole budget.
        let claim = share.admit().expect("admitted");
        assert!(!claim.borrowing);
        let sql = share.claim_sql(claim);
        assert!(!sql.contains('$') && !sql.contains("CASE"), "{sql}");
        assert!(
            sql.contains("pg_try_advisory_lock((-468965076)::int4, t)"),
            "{sql}"
        );

        let seats: Vec<FleetSeat> = (0..3).map(|_| share.seat()).collect();
        assert_eq!(share.view().held, 3);
        // A count of 2 instances: share 2, this one borrows one.
        share.share.store(2, Ordering::Relaxed);
        let claim = share.admit().expect("nobody wants");
        assert!(claim.borrowing);
        let sql = share.claim_sql(claim);
        assert!(
            sql.contains("CASE WHEN EXISTS") && sql.contains("ELSE pg_try_advisory_lock"),
            "{sql}"
        );
        assert!(
            sql.contains(&as_oid(budget.control_key()).to_string()),
            "{sql}"
        );
        // Another wants: no connect, and one connection to give back.
        share.others_want.store(true, Ordering::Relaxed);
        assert_eq!(share.admit(), Err(budget.exhausted()));
        share.give_back.store(1, Ordering::Relaxed);
        assert!(seats[0].give_back());
        assert!(!seats[1].give_back(), "only the excess");
        drop(seats);
        assert_eq!(share.view().held, 0);

        // Counted by closes (sqlx): a connection given back counts out at
        // once, and its close does not count it again.
        share.note_claimed();
        share.note_claimed();
        share.give_back.store(1, Ordering::Relaxed);
        assert!(share.give_back_counted());
        assert!(!share.give_back_counted());
        assert_eq!(share.view().held, 1);
        share.note_closed();
        assert_eq!(share.view().held, 1);
        share.note_closed();
        assert_eq!(share.view().held, 0);
        share.note_closed();
        assert_eq!(share.view().held, 0, "never below zero");

        // A refused claim under the share signals; a borrowing one does not.
        share.refused(Claim { borrowing: true });
        assert!(!share.refused.load(Ordering::Relaxed));
        share.refused(Claim { borrowing: false });
        assert!(share.refused.load(Ordering::Relaxed));
    }

    /// What a [`Scripted`] session answers and logs.
    #[derive(Default)]
    struct Script {
        /// Members and others wanting, as the count reads them.
        members: i64,
        others: i64,
        /// The ticket the join takes (`-1`: none free).
        ticket: i64,
        /// Notification payloads still to deliver.
        knocks: Vec<String>,
        /// The statements run, but the counts.
        log: Vec<String>,
    }

    /// A control session that answers from a script the test sets.
    #[derive(Clone, Default)]
    struct Scripted(Arc<std::sync::Mutex<Script>>);

    impl ControlSession for Scripted {
        fn row<'a>(&'a mut self, sql: &'a str) -> BoxFuture<'a, Result<Vec<i64>, BoxError>> {
            Box::pin(async move {
                let mut state = self.0.lock().map_err(|_| "poisoned")?;
                if sql.contains("count(*)") {
                    // Knocks are never members yet here.
                    return Ok(vec![state.members, state.others, 0]);
                }
                state.log.push(sql.to_owned());
                if sql.contains("coalesce") {
                    return Ok(vec![state.ticket, 42]);
                }
                Ok(vec![1])
            })
        }

        fn execute<'a>(&'a mut self, sql: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
            Box::pin(async move {
                self.0
                    .lock()
                    .map_err(|_| "poisoned")?
                    .log
                    .push(sql.to_owned());
                Ok(())
            })
        }

        fn notifications(&mut self) -> Vec<String> {
            self.0
                .lock()
                .map(|mut s| std::mem::take(&mut s.knocks))
                .unwrap_or_default()
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_control_task_wants_when_refused_and_gives_back_when_others_want() {
        let budget = FleetBudget::new("ctl", 20)
            .and_then(|b| b.with_share_interval(Some(Duration::from_millis(10))))
            .expect("valid");
        let share = FleetShare::new(&budget).expect("on");
        let script = Scripted::default();
        script.0.lock().expect("lock").members = 5;
        let opened = script.clone();
        share.start_control(move || {
            Box::new(move || {
                let session = opened.clone();
                Box::pin(async move { Ok(Box::new(session) as Box<dyn ControlSession>) })
            })
        });
        // Bounded polls: 500 × 5 ms.
        async fn until(what: &str, done: impl Fn() -> bool) {
            for _ in 0..500 {
                if done() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            panic!("never: {what}");
        }
        let logged = |what: &dyn Fn(&str) -> bool| {
            script.0.lock().expect("lock").log.iter().any(|q| what(q))
        };
        until("the first count", || share.view().members == 5).await;
        assert_eq!(share.view().share, 4);
        assert_eq!(share.control_pid.load(Ordering::Relaxed), 42);
        // The control session holds a ticket (counted for the instance),
        // its member lock, and listens for knocks.
        assert_eq!(share.view().held, 1);
        let id = share.id.load(Ordering::Relaxed);
        assert!(id > 0);
        assert!(logged(
            &|q| q.contains("coalesce") && q.contains("pg_try_advisory_lock")
        ));
        assert!(logged(&|q| q.contains(&format!(", ({id})::int4)"))));
        assert!(logged(&|q| q.starts_with("LISTEN \"pool_fleet_")));

        // Refused below the share: the wanting lock is taken.
        share.refused(Claim { borrowing: false });
        until("wanting", || share.view().wanting).await;
        assert!(logged(
            &|q| q.contains("pg_try_advisory_lock") && q.contains(&format!("({})::int4)", -id))
        ));
        // At its share (and no refusal for three intervals) it lets go.
        let seats: Vec<FleetSeat> = (0..5).map(|_| share.seat()).collect();
        until("not wanting", || !share.view().wanting).await;
        assert!(logged(&|q| q.contains("pg_advisory_unlock")));

        // Another wants: 5 held and the control session's ticket, share 4,
        // two to give back, and no borrowing connect meanwhile.
        script.0.lock().expect("lock").others = 1;
        until("a give-back", || {
            share.give_back.load(Ordering::Relaxed) == 2
        })
        .await;
        assert!(share.admit().is_err());
        assert!(seats[0].give_back() && seats[1].give_back() && !seats[2].give_back());
        // Nobody wants any more: nothing to give back, borrowing allowed.
        script.0.lock().expect("lock").others = 0;
        until("no give-back", || {
            !share.others_want.load(Ordering::Relaxed)
        })
        .await;
        assert_eq!(share.give_back.load(Ordering::Relaxed), 0);
        assert!(share.admit().is_ok());

        // An instance that found no ticket to join with knocks: it counts
        // as a member that wants (6 members, share 3: with 3 seats and the
        // control ticket, one to give back), until it has not knocked for
        // two intervals.
        drop(seats);
        let seats: Vec<FleetSeat> = (0..3).map(|_| share.seat()).collect();
        script.0.lock().expect("lock").knocks.push("7".to_owned());
        until("the knock counted", || share.view().members == 6).await;
        assert!(share.others_want.load(Ordering::Relaxed));
        until("its give-back", || {
            share.give_back.load(Ordering::Relaxed) == 1
        })
        .await;
        until("the knock forgotten", || share.view().members == 5).await;
        // Its own knock, were it to hear one, is not another instance.
        script.0.lock().expect("lock").knocks.push(id.to_string());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(share.view().members, 5);
        drop(seats);

        // Dropping the state ends the task, which drops its session (and
        // its opener): only the test's handle on the script is left.
        drop(share);
        until("the task's end", || Arc::strong_count(&script.0) == 1).await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_instance_without_a_ticket_to_join_knocks_and_keeps_no_session() {
        let budget = FleetBudget::new("full", 3)
            .and_then(|b| b.with_share_interval(Some(Duration::from_millis(10))))
            .expect("valid");
        let share = FleetShare::new(&budget).expect("on");
        let script = Scripted::default();
        script.0.lock().expect("lock").ticket = -1;
        let opened = script.clone();
        share.start_control(move || {
            Box::new(move || {
                let session = opened.clone();
                Box::pin(async move { Ok(Box::new(session) as Box<dyn ControlSession>) })
            })
        });
        let id = share.id.load(Ordering::Relaxed);
        for _ in 0..500 {
            if script
                .0
                .lock()
                .expect("lock")
                .log
                .iter()
                .filter(|q| q.contains("pg_notify"))
                .count()
                >= 2
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let log = std::mem::take(&mut script.0.lock().expect("lock").log);
        let knock = format!(
            "pg_notify('pool_fleet_{}', '{id}')",
            as_oid(budget.control_key())
        );
        assert!(
            log.iter().filter(|q| q.contains(&knock)).count() >= 2,
            "{log:?}"
        );
        // No member lock, no LISTEN, no count: the session was dropped.
        assert!(
            !log.iter()
                .any(|q| q.contains("LISTEN") || q.contains(&format!(", ({id})::int4)"))),
            "{log:?}"
        );
        assert_eq!(share.view().held, 0);
        assert!(!share.joined.load(Ordering::Relaxed));
        // Until it joins, its connects wait: the tickets the others give
        // back go to the control session first.
        assert!(share.knocked.load(Ordering::Relaxed));
        assert_eq!(share.admit(), Err(budget.exhausted()));
        script.0.lock().expect("lock").ticket = 2;
        for _ in 0..500 {
            if share.view().held == 1 && !share.knocked.load(Ordering::Relaxed) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(share.view().held, 1, "joined");
        assert!(share.admit().is_ok());
        drop(share);
    }
}
