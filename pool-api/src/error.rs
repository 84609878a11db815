//! What `get()` and the pool's constructors can fail with.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::HolderSites;

/// Which part of an acquisition ran out of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeoutPhase {
    /// Waiting for a connection to come back or to be opened.
    Wait,
    /// Opening a connection (`connect` plus the `after_connect` hook).
    Connect,
    /// Checking a connection at checkout (`is_valid` or the `before_acquire`
    /// hook).
    Validation,
}

impl fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeoutPhase::Wait => "waiting for a connection",
            TimeoutPhase::Connect => "opening a connection",
            TimeoutPhase::Validation => "validating a connection",
        })
    }
}

/// The pool's counts at one moment, carried by [`PoolError::Timeout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct PoolState {
    /// Slots taken: connections idle, in use, being opened and being
    /// closed. (Display counts the open ones apart from those being
    /// opened.)
    pub total: u32,
    /// Connections ready in the pool.
    pub idle: u32,
    /// Connections held by callers.
    pub in_use: u32,
    /// Connections being opened.
    pub opening: u32,
    /// Connections being closed: out of service, their slots taken until
    /// the server has them closed (managers that
    /// [`awaits_close`](crate::ManageConnection::awaits_close)).
    pub closing: u32,
    /// Callers waiting for a connection.
    pub waiting: u32,
    /// The pool's bound.
    pub max_size: u32,
}

impl PoolState {
    /// Makes a state from its counts (`total` is their sum).
    pub fn new(idle: u32, in_use: u32, opening: u32, waiting: u32, max_size: u32) -> Self {
        Self {
            total: idle + in_use + opening,
            idle,
            in_use,
            opening,
            closing: 0,
            waiting,
            max_size,
        }
    }

    /// The same state with `closing` connections being closed (counted in
    /// `total`).
    #[must_use]
    pub fn with_closing(mut self, closing: u32) -> Self {
        self.total = self.total - self.closing + closing;
        self.closing = closing;
        self
    }
}

/// `2 of 4 open: 1 idle, 1 in use; 1 opening; 3 waiting`: the connections
/// open (idle, in use and, when there are any, `, 1 closing`) apart from
/// those still being opened, which may never open: a connect that hangs
/// is `1 opening`, never `1 open`.
impl fmt::Display for PoolState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, None)
    }
}

impl PoolState {
    /// The Display text, with the oldest connect still running said after
    /// the opening count when there is one and the count is not zero.
    fn write(&self, f: &mut fmt::Formatter<'_>, oldest: Option<&ConnectRunning>) -> fmt::Result {
        let open = self.idle + self.in_use + self.closing;
        write!(
            f,
            "{open} of {} open: {} idle, {} in use",
            self.max_size, self.idle, self.in_use
        )?;
        if self.closing != 0 {
            write!(f, ", {} closing", self.closing)?;
        }
        write!(f, "; {} opening", self.opening)?;
        if let Some(oldest) = oldest.filter(|_| self.opening != 0) {
            let which = if self.opening > 1 { "oldest " } else { "" };
            let running = rounded(oldest.running);
            match &oldest.target {
                Some(target) => write!(f, " ({which}to {target}, running {running:?})")?,
                None => write!(f, " ({which}running {running:?})")?,
            }
        }
        write!(f, "; {} waiting", self.waiting)
    }
}

/// The oldest connect still running when a call timed out: where it goes
/// and how long it had been running. Carried by [`PoolError::Timeout`],
/// because a connect that hangs (a server that accepts TCP and never
/// answers) has failed with nothing yet: without it, a wait behind such a
/// connect would name no host.
///
/// Display (inside the timeout's): `1 opening (to 127.0.0.1:5432, running
/// 5s)`, `2 opening (oldest to 127.0.0.1:5432, running 5s)`, or without
/// the `to ...` when the manager names no target
/// ([`ManageConnection::target`](crate::ManageConnection::target)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectRunning {
    /// Where it goes, when the manager says.
    pub target: Option<String>,
    /// How long it had been running.
    pub running: Duration,
}

impl ConnectRunning {
    /// A connect to `target` (when known) that has run for `running`.
    pub fn new(target: Option<String>, running: Duration) -> Self {
        Self { target, running }
    }
}

/// A `connect()` that did not finish in the time it was given
/// (`connect_timeout`, or less: what `Pool::new`'s `acquire_timeout` had
/// left); seen as the last error inside a [`PoolError::Timeout`].
///
/// Display: `connect to 127.0.0.1:5432 did not finish within 5s`, naming
/// where the connect went when the manager says
/// ([`ManageConnection::target`](crate::ManageConnection::target)), else
/// `connect did not finish within 5s`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectTimedOut {
    /// The time the connect was given.
    pub limit: Duration,
    /// Where it went, when the manager says.
    pub target: Option<String>,
}

impl ConnectTimedOut {
    /// A connect to `target` (when known) that ran past `limit`.
    pub fn new(limit: Duration, target: Option<String>) -> Self {
        Self { limit, target }
    }
}

impl fmt::Display for ConnectTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let limit = rounded(self.limit);
        match &self.target {
            Some(target) => write!(f, "connect to {target} did not finish within {limit:?}"),
            None => write!(f, "connect did not finish within {limit:?}"),
        }
    }
}

impl Error for ConnectTimedOut {}

/// What acquiring a connection can fail with.
///
/// Display says what the pool was doing when it failed and, where there is
/// one, the cause's own message, because most applications log `{e}` alone;
/// [`source()`](Error::source) returns the cause as well. (A reporter that
/// walks the `source()` chain therefore shows the cause twice.)
///
/// | variant | Display |
/// |---|---|
/// | [`Timeout`](Self::Timeout) | `timed out after 2s waiting for a connection (4 of 4 open: 0 idle, 4 in use; 0 opening; 3 waiting; 3 taken at src/orders.rs:88:23, held up to 1.9s; 1 at src/report.rs:40:9, held up to 210ms); last error: connection refused` |
/// | [`Timeout`](Self::Timeout), behind a connect that hangs | `timed out after 5s waiting for a connection (0 of 2 open: 0 idle, 0 in use; 1 opening (to 127.0.0.1:5432, running 5s); 1 waiting)` |
/// | [`Closed`](Self::Closed) | `pool is closed` |
/// | [`Backend`](Self::Backend) | `connect failed: connection refused`, or the cause's text alone when it already says it was a connect: `connect to 127.0.0.1:5433 failed: password authentication failed for user "app"` |
///
/// ```
/// use std::error::Error;
/// use pool_api::PoolError;
///
/// let err: PoolError<std::io::Error> =
///     PoolError::Backend(std::io::Error::other("password authentication failed"));
/// assert_eq!(err.to_string(), "connect failed: password authentication failed");
/// assert_eq!(err.source().unwrap().to_string(), "password authentication failed");
/// ```
#[non_exhaustive]
pub enum PoolError<E> {
    /// No connection could be had in time.
    ///
    /// Display says how long it waited, what ran out of time, the pool's
    /// counts at that moment (with, beside the opening count, where the
    /// oldest connect still running goes and for how long it has run), the
    /// busiest holder sites and, as context, the last connect or
    /// validation error; `source()` returns that error too.
    Timeout {
        /// How long the call waited in all.
        waited: Duration,
        /// What ran out of time.
        phase: TimeoutPhase,
        /// The pool's counts when it gave up.
        state: PoolState,
        /// The last error the pool saw opening or validating a connection,
        /// if any: a backend error (`E`, to downcast) or a
        /// [`ConnectTimedOut`].
        last_error: Option<Arc<dyn Error + Send + Sync>>,
        /// The oldest connect still running when it gave up, if any was
        /// (counted in `state.opening`): where it goes and how long it had
        /// run, the only clue to a connect that hangs without failing.
        /// Boxed, so that the error, which every `get()`'s `Result`
        /// carries room for, stays small.
        oldest_connect: Option<Box<ConnectRunning>>,
        /// Who held the connections when it gave up: the busiest sites
        /// that took them, with how long they had been held (empty when
        /// none was held, and for the initial connects of `Pool::new`).
        holders: HolderSites,
    },
    /// The pool was closed (by `close()`) before or while the call waited.
    ///
    /// Display: `pool is closed`; there is no cause.
    Closed,
    /// Opening a connection failed: the manager's `connect` or the
    /// `after_connect` hook returned this error. `Pool::new` returns it when
    /// its first connect fails, and `get()` when the database is known to be
    /// down and nothing open could come back (fail fast).
    ///
    /// Display: `connect failed: ` and the error's own message, or that
    /// message alone when it already says it was a connect (`connect to
    /// 127.0.0.1:5433 failed: ...`, as the managers and adapters of this
    /// workspace write it, alone or behind a driver's own prefix);
    /// `source()` returns the error.
    Backend(E),
    /// Connecting failed and the pool had no open connection that could
    /// come back to this caller (fail fast, see
    /// [`PoolConfigBuilder::fail_fast`](crate::PoolConfigBuilder::fail_fast)):
    /// `get()` returns it at once instead of waiting for its timeout. The
    /// error is shared by every caller the failure reached, hence the
    /// `Arc`.
    ///
    /// Display: as [`Backend`](Self::Backend); `source()` returns the
    /// error.
    ConnectFailed(Arc<E>),
}

impl<E> PoolError<E> {
    /// Whether this is a [`PoolError::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, PoolError::Timeout { .. })
    }
}

impl<E: fmt::Debug> fmt::Debug for PoolError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::Timeout {
                waited,
                phase,
                state,
                last_error,
                oldest_connect,
                holders,
            } => f
                .debug_struct("Timeout")
                .field("waited", waited)
                .field("phase", phase)
                .field("state", state)
                .field("last_error", &last_error.as_ref().map(|e| e.to_string()))
                .field("oldest_connect", oldest_connect)
                .field("holders", &holders.to_string())
                .finish(),
            PoolError::Closed => f.write_str("Closed"),
            PoolError::Backend(e) => f.debug_tuple("Backend").field(e).finish(),
            PoolError::ConnectFailed(e) => f.debug_tuple("ConnectFailed").field(e).finish(),
        }
    }
}

impl<E: fmt::Display> fmt::Display for PoolError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::Timeout {
                waited,
                phase,
                state,
                last_error,
                oldest_connect,
                holders,
            } => {
                let waited = rounded(*waited);
                write!(f, "timed out after {waited:?} {phase} (")?;
                state.write(f, oldest_connect.as_deref())?;
                if !holders.is_empty() {
                    write!(f, "; {holders}")?;
                }
                f.write_str(")")?;
                if let Some(e) = last_error {
                    write!(f, "; last error: {e}")?;
                }
                Ok(())
            }
            PoolError::Closed => f.write_str("pool is closed"),
            PoolError::Backend(e) => connect_failed(f, e),
            PoolError::ConnectFailed(e) => connect_failed(f, &**e),
        }
    }
}

/// `connect failed: ` and `cause`'s text, or the text alone when it
/// already says it was a connect: it starts with `connect ` or holds
/// `: connect to ` (behind a driver's own prefix, as sqlx's `error returned
/// from database: `), so the reader sees one prefix, not two.
fn connect_failed(f: &mut fmt::Formatter<'_>, cause: &dyn fmt::Display) -> fmt::Result {
    let text = cause.to_string();
    if text.starts_with("connect ") || text.contains(": connect to ") {
        f.write_str(&text)
    } else {
        write!(f, "connect failed: {text}")
    }
}

/// A wait as a person reads it: whole milliseconds from a millisecond up
/// (`2.001s`, not `2.000981234s`), whole microseconds below.
pub(crate) fn rounded(d: Duration) -> Duration {
    let unit = if d >= Duration::from_millis(1) {
        Duration::from_millis(1)
    } else {
        Duration::from_micros(1)
    };
    let unit_nanos = unit.as_nanos();
    let units = (d.as_nanos() + unit_nanos / 2) / unit_nanos;
    u32::try_from(units).map_or(d, |n| unit * n)
}

impl<E: Error + 'static> Error for PoolError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            PoolError::Timeout { last_error, .. } => {
                last_error.as_deref().map(|e| e as &(dyn Error + 'static))
            }
            PoolError::Closed => None,
            PoolError::Backend(e) => Some(e),
            PoolError::ConnectFailed(e) => Some(&**e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn timeout_display_has_wait_counts_and_last_error() {
        let err: PoolError<io::Error> = PoolError::Timeout {
            waited: Duration::from_millis(250),
            phase: TimeoutPhase::Wait,
            state: PoolState::new(0, 4, 0, 3, 4),
            last_error: Some(Arc::new(io::Error::other("connection refused"))),
            oldest_connect: None,
            holders: HolderSites::default(),
        };
        assert_eq!(
            err.to_string(),
            "timed out after 250ms waiting for a connection \
             (4 of 4 open: 0 idle, 4 in use; 0 opening; 3 waiting); last error: connection refused"
        );
        assert_eq!(err.source().unwrap().to_string(), "connection refused");
        assert!(err.is_timeout());
    }

    #[test]
    fn state_counts_what_is_being_opened_apart_from_what_is_open() {
        let hanging = PoolState::new(0, 0, 1, 1, 2);
        assert_eq!(hanging.total, 1, "the slot is taken");
        assert_eq!(
            hanging.to_string(),
            "0 of 2 open: 0 idle, 0 in use; 1 opening; 1 waiting"
        );
        let closing = PoolState::new(0, 1, 1, 0, 4).with_closing(1);
        assert_eq!(
            closing.to_string(),
            "2 of 4 open: 0 idle, 1 in use, 1 closing; 1 opening; 0 waiting"
        );
    }

    #[test]
    fn timeout_names_the_oldest_connect_still_running_beside_the_opening_count() {
        let timeout = |opening, oldest: ConnectRunning, last_error: Option<&str>| {
            PoolError::<io::Error>::Timeout {
                waited: Duration::from_millis(200),
                phase: TimeoutPhase::Wait,
                state: PoolState::new(0, 0, opening, 1, 2),
                last_error: last_error
                    .map(|e| Arc::new(io::Error::other(e)) as Arc<dyn Error + Send + Sync>),
                oldest_connect: Some(Box::new(oldest)),
                holders: HolderSites::default(),
            }
            .to_string()
        };
        let at = |target: Option<&str>, ms| {
            ConnectRunning::new(target.map(String::from), Duration::from_millis(ms))
        };
        assert_eq!(
            timeout(1, at(Some("127.0.0.1:5999"), 200), None),
            "timed out after 200ms waiting for a connection (0 of 2 open: 0 idle, 0 in use; \
             1 opening (to 127.0.0.1:5999, running 200ms); 1 waiting)"
        );
        assert_eq!(
            timeout(2, at(Some("db1:5432"), 300), Some("connection refused")),
            "timed out after 200ms waiting for a connection (0 of 2 open: 0 idle, 0 in use; \
             2 opening (oldest to db1:5432, running 300ms); 1 waiting); \
             last error: connection refused"
        );
        // A running time cut from clock readings reads rounded.
        let cut = ConnectRunning::new(None, Duration::from_nanos(199_999_871));
        assert!(
            timeout(1, cut, None).contains("; 1 opening (running 200ms); 1 waiting)"),
            "no target: the time alone"
        );
        // Nothing counted as opening (a connect that ended as the count was
        // taken): the count is the truth, and nothing is said beside it.
        assert!(timeout(0, at(Some("db1:5432"), 200), None).contains("; 0 opening; 1 waiting)"));
    }

    #[test]
    fn timeout_names_the_busiest_holder_sites() {
        let here = std::panic::Location::caller();
        let holders = [crate::Holder::new(here, Duration::from_millis(4_900))];
        let err: PoolError<io::Error> = PoolError::Timeout {
            waited: Duration::from_secs(5),
            phase: TimeoutPhase::Wait,
            state: PoolState::new(0, 1, 0, 1, 1),
            last_error: None,
            oldest_connect: None,
            holders: HolderSites::from_holders(&holders, 3),
        };
        assert_eq!(
            err.to_string(),
            format!(
                "timed out after 5s waiting for a connection (1 of 1 open: 0 idle, 1 in use; \
                 0 opening; 1 waiting; 1 taken at {here}, held up to 4.9s)"
            )
        );
    }

    #[test]
    fn timeout_in_each_phase_says_what_ran_out_of_time() {
        let cases = [
            (TimeoutPhase::Wait, "waiting for a connection"),
            (TimeoutPhase::Connect, "opening a connection"),
            (TimeoutPhase::Validation, "validating a connection"),
        ];
        for (phase, words) in cases {
            let err: PoolError<io::Error> = PoolError::Timeout {
                waited: Duration::from_secs(5),
                phase,
                state: PoolState::new(1, 2, 1, 0, 4),
                last_error: None,
                oldest_connect: None,
                holders: HolderSites::default(),
            };
            assert_eq!(
                err.to_string(),
                format!(
                    "timed out after 5s {words} \
                     (3 of 4 open: 1 idle, 2 in use; 1 opening; 0 waiting)"
                )
            );
            assert!(err.source().is_none());
        }
    }

    #[test]
    fn timeout_names_a_connect_that_timed_out() {
        let err: PoolError<io::Error> = PoolError::Timeout {
            waited: Duration::from_millis(10_000),
            phase: TimeoutPhase::Connect,
            state: PoolState::new(0, 0, 0, 1, 2),
            last_error: Some(Arc::new(ConnectTimedOut::new(
                Duration::from_secs(10),
                None,
            ))),
            oldest_connect: None,
            holders: HolderSites::default(),
        };
        assert!(
            err.to_string()
                .ends_with("; last error: connect did not finish within 10s"),
            "{err}"
        );
        let source = err.source().unwrap();
        assert_eq!(
            source.downcast_ref::<ConnectTimedOut>(),
            Some(&ConnectTimedOut::new(Duration::from_secs(10), None))
        );
    }

    #[test]
    fn a_connect_timeout_names_where_the_connect_went() {
        // A limit cut from what was left of a deadline reads rounded.
        let cut = Duration::from_nanos(4_999_871_002);
        let err = ConnectTimedOut::new(cut, Some("127.0.0.1:5433".into()));
        assert_eq!(
            err.to_string(),
            "connect to 127.0.0.1:5433 did not finish within 5s"
        );
    }

    #[test]
    fn timeout_rounds_the_wait_for_people() {
        let wait = |waited| {
            PoolError::<io::Error>::Timeout {
                waited,
                phase: TimeoutPhase::Wait,
                state: PoolState::default(),
                last_error: None,
                oldest_connect: None,
                holders: HolderSites::default(),
            }
            .to_string()
        };
        assert!(wait(Duration::from_nanos(2_000_981_234)).starts_with("timed out after 2.001s "));
        assert!(wait(Duration::from_nanos(30_000_400_000)).starts_with("timed out after 30s "));
        assert!(wait(Duration::from_nanos(41_600)).starts_with("timed out after 42µs "));
        let max = format!("timed out after {:?} ", Duration::MAX);
        assert!(wait(Duration::MAX).starts_with(&max));
    }

    #[test]
    fn backend_is_a_connect_failure_with_its_cause() {
        let err: PoolError<io::Error> = PoolError::Backend(io::Error::other("connection refused"));
        assert_eq!(err.to_string(), "connect failed: connection refused");
        let source = err.source().unwrap();
        assert_eq!(source.to_string(), "connection refused");
        assert!(source.downcast_ref::<io::Error>().is_some());
        assert!(!err.is_timeout());
    }

    #[test]
    fn a_cause_that_already_says_connect_gets_no_second_prefix() {
        let said = "connect to 127.0.0.1:5433 failed: password authentication failed";
        let err: PoolError<io::Error> = PoolError::Backend(io::Error::other(said));
        assert_eq!(err.to_string(), said);
        let err: PoolError<io::Error> = PoolError::ConnectFailed(Arc::new(io::Error::other(said)));
        assert_eq!(err.to_string(), said);
        // Behind a driver's own prefix (sqlx's), the same.
        let wrapped = format!("error returned from database: {said}");
        let err: PoolError<io::Error> = PoolError::Backend(io::Error::other(wrapped.clone()));
        assert_eq!(err.to_string(), wrapped);
    }

    #[test]
    fn closed_has_no_cause() {
        let closed: PoolError<io::Error> = PoolError::Closed;
        assert_eq!(closed.to_string(), "pool is closed");
        assert!(closed.source().is_none());
        assert!(!closed.is_timeout());
    }

    #[test]
    fn display_text_is_lowercase() {
        let errors: [PoolError<io::Error>; 3] = [
            PoolError::Closed,
            PoolError::Backend(io::Error::other("x")),
            PoolError::Timeout {
                waited: Duration::ZERO,
                phase: TimeoutPhase::Wait,
                state: PoolState::default(),
                last_error: None,
                oldest_connect: None,
                holders: HolderSites::default(),
            },
        ];
        for err in errors {
            let text = err.to_string();
            assert!(text.starts_with(|c: char| c.is_lowercase()), "{text}");
        }
    }
}
