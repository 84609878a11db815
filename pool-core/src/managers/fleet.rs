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
//! [`CLAIM_SQL`] and map "no row" to [`FleetBudgetExhausted`].
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

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// The query that claims a ticket. Parameters: `$1` the key (`int4`), `$2`
/// the total (`int4`), `$3` the first ticket to try (`int4`, in
/// `0..total`). Returns the ticket taken, or no row when all are held.
///
/// The tickets are tried in order from `$3`, wrapping around, and the scan
/// stops at the first lock taken (`LIMIT 1`), so at most one ticket is
/// held per connection.
pub const CLAIM_SQL: &str = "SELECT t FROM \
    (SELECT (($3::int4 + n) % $2::int4)::int4 AS t FROM generate_series(0, $2::int4 - 1) AS n) AS tickets \
    WHERE pg_try_advisory_lock($1::int4, t) LIMIT 1";

/// A named budget of server connections.
///
/// ```
/// use pool_core::managers::fleet::FleetBudget;
///
/// let budget = FleetBudget::new("orders-api", 40)?;
/// assert_eq!(budget.total(), 40);
/// // The key is the same in every process and every build.
/// assert_eq!(budget.key(), FleetBudget::new("orders-api", 1)?.key());
/// # Ok::<(), pool_core::managers::fleet::FleetBudgetConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetBudget {
    name: Arc<str>,
    key: i32,
    total: u32,
}

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
        Ok(Self {
            name: name.into(),
            key: key_of(name),
            total,
        })
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
    pub fn total_i32(&self) -> i32 {
        // Checked in `new`.
        i32::try_from(self.total).unwrap_or(i32::MAX)
    }

    /// A random first ticket for [`CLAIM_SQL`]'s `$3`, so that connects
    /// spread over the tickets instead of all scanning from zero.
    pub fn random_start(&self) -> i32 {
        i32::try_from(fastrand::u32(0..self.total)).unwrap_or(0)
    }

    /// [`CLAIM_SQL`] with this budget's key and total and the first ticket
    /// `start` written in as literals, for drivers that send a query without
    /// parameters in one round trip (PostgreSQL's simple query protocol)
    /// but need two for one with parameters. Only integers are written in,
    /// so nothing from the name reaches the SQL text.
    ///
    /// ```
    /// use pool_core::managers::fleet::FleetBudget;
    ///
    /// let budget = FleetBudget::new("orders-api", 40)?;
    /// let sql = budget.claim_sql_literal(7);
    /// assert!(sql.contains("pg_try_advisory_lock") && !sql.contains('$'));
    /// # Ok::<(), pool_core::managers::fleet::FleetBudgetConfigError>(())
    /// ```
    pub fn claim_sql_literal(&self, start: i32) -> String {
        // In parentheses: `-2147483648::int4` would cast before negating,
        // and overflow.
        CLAIM_SQL
            .replace("$1", &format!("({})", self.key))
            .replace("$2", &format!("({})", self.total_i32()))
            .replace("$3", &format!("({start})"))
    }

    /// The error for a connect that found no free ticket.
    pub fn exhausted(&self) -> FleetBudgetExhausted {
        FleetBudgetExhausted {
            name: self.name.clone(),
            total: self.total,
        }
    }
}

/// 32-bit FNV-1a: stable across processes, builds and platforms.
fn key_of(name: &str) -> i32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in name.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    i32::from_ne_bytes(hash.to_ne_bytes())
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
        }
    }
}

impl Error for FleetBudgetConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

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
}
