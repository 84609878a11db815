//! A fleet budget's configuration: its name, total and fair share
//! interval, the keys derived from the name, and the two errors a budget
//! can meet (one that cannot work, and a connect that found every ticket
//! held). Pure: no I/O.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::sql::{self, control_key_of, key_of};

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
    /// share](super#fair-share)), or turns fair share off with `None` (no
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
    /// share](super#fair-share)): the 32-bit FNV-1a hash of the name, a zero
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

    /// The total as the `int4` [`CLAIM_SQL`](super::CLAIM_SQL) takes.
    #[doc(hidden)]
    pub fn total_i32(&self) -> i32 {
        // Checked in `new`.
        i32::try_from(self.total).unwrap_or(i32::MAX)
    }

    /// A random first ticket for [`CLAIM_SQL`](super::CLAIM_SQL)'s `$3`,
    /// so that connects spread over the tickets instead of all scanning
    /// from zero.
    #[doc(hidden)]
    pub fn random_start(&self) -> i32 {
        i32::try_from(fastrand::u32(0..self.total)).unwrap_or(0)
    }

    /// [`CLAIM_SQL`](super::CLAIM_SQL) with this budget's key and total and
    /// the first ticket `start` written in as literals, for drivers that
    /// send a query without parameters in one round trip (PostgreSQL's
    /// simple query protocol) but need two for one with parameters. Only integers are written in,
    /// so nothing from the name reaches the SQL text.
    #[doc(hidden)]
    pub fn claim_sql_literal(&self, start: i32) -> String {
        sql::claim_literal(self.key, self.total_i32(), start)
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
        let off = budget.with_share_interval(None).expect("off");
        assert_eq!(off.share_interval(), None);
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
}
