//! [`SqlxManager`]: opens, checks and cleans sqlx connections for the pool.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use async_trait::async_trait;

use super::backend::Provider;
use super::backend::SqlxConnection;
use super::connect_error;
use super::driver::Error;
use super::password::PasswordProviderError;
use super::reset::{self, ResetMode};
use pool_core::{ErrorClass, ManageConnection};
use pool_postgres::fleet::{FleetBudget, FleetBudgetConfigError};
use pool_postgres::pooler::TransactionPoolerError;
use pool_postgres::settings::{PgSettings, PgSettingsError};

/// Opens, checks and cleans sqlx connections of type `C`
/// (`sqlx::PgConnection`, `sqlx::MySqlConnection` or
/// `sqlx::SqliteConnection`).
///
/// - **connect**: `C::connect_with(options)`, i.e. the options' `connect()`,
///   with the password from the
///   [provider](Self::with_password_provider) if one is set and, on
///   PostgreSQL, through a statement relay with unnamed statements behind
///   a transaction-mode pooler (set with `pooler_mode` and
///   `pooler_statements`); sqlx's statement cache
///   (`statement_cache_capacity` in the options) lives as long as the
///   connection and is never cleared by the pool. On PostgreSQL with a
///   fleet budget (`fleet_budget`), one more round trip takes the
///   connection's ticket.
/// - **is_valid**: sqlx's `ping` (PostgreSQL: a `Sync` message; MySQL:
///   `COM_PING`; SQLite: a round trip to the connection's worker thread).
/// - **has_broken**: `false`, but for a connection given back to a fleet
///   budget's fair share; sqlx has no cheap way to tell a closed socket. A connection that died while idle fails validation at
///   checkout; one that died with a reply pending fails its reset at return;
///   either way the pool closes it.
/// - **needs_reset** and **reset**: see [`ResetMode`] and the
///   [crate docs](crate).
///
/// `Debug` shows where the options point (host, port, database, user, or
/// the SQLite file) and never a password.
///
/// # Example
///
/// ```
/// # #[cfg(feature = "sqlx-sqlite")]
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use pool_sqlx::SqlxManager;
/// use pool_core::{Pool, PoolConfig};
/// use sqlx::{Connection, SqliteConnection};
///
/// let manager = SqlxManager::<SqliteConnection>::from_url("sqlite::memory:")?;
/// let pool = Pool::new(manager, PoolConfig::builder().max_size(1).build()?).await?;
///
/// let mut conn = pool.get().await?;
/// sqlx::query("CREATE TABLE t (x INTEGER)").execute(&mut *conn).await?;
/// let mut tx = conn.begin().await?;
/// sqlx::query("INSERT INTO t VALUES (1)").execute(&mut *tx).await?;
/// drop(tx); // never committed: rolled back
/// drop(conn); // back to the pool, clean
///
/// let mut conn = pool.get().await?;
/// let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM t").fetch_one(&mut *conn).await?;
/// assert_eq!(rows, 0);
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "sqlx-sqlite"))]
/// # fn main() {}
/// ```
///
/// Built from options, `Debug` shows no password:
///
/// ```
/// # #[cfg(feature = "sqlx-postgres")]
/// # {
/// use pool_sqlx::SqlxManager;
/// use sqlx::postgres::PgConnectOptions;
///
/// let options = PgConnectOptions::new()
///     .host("db.internal")
///     .username("app")
///     .password("secret")
///     .database("app");
/// let manager = SqlxManager::<sqlx::PgConnection>::new(options);
/// assert!(!format!("{manager:?}").contains("secret"));
/// # }
/// ```
pub struct SqlxManager<C: SqlxConnection> {
    options: C::Options,
    reset_mode: ResetMode,
    /// The pooler and fleet budget settings (a budget is set only on
    /// PostgreSQL), shared with `PostgresManager`; clones share one fair
    /// share instance.
    pub(super) settings: PgSettings,
    pub(super) password_provider: Option<Provider>,
    _connection: PhantomData<fn() -> C>,
}

impl<C: SqlxConnection> SqlxManager<C> {
    /// Makes a manager that opens connections with these options, in
    /// [`ResetMode::Tracked`].
    pub fn new(options: C::Options) -> Self {
        Self {
            options,
            reset_mode: ResetMode::default(),
            settings: PgSettings::default(),
            password_provider: None,
            _connection: PhantomData,
        }
    }

    /// Makes a manager from a connection URL, parsed by the driver
    /// (`postgres://`, `mysql://`, `sqlite:`), in [`ResetMode::Tracked`].
    ///
    /// # Errors
    ///
    /// The driver's parse error (`sqlx::Error::Configuration`) when the URL
    /// is malformed, has another scheme, or carries an unknown or invalid
    /// parameter. Nothing is connected here.
    ///
    /// # Example
    ///
    /// ```
    /// # #[cfg(feature = "sqlx-sqlite")]
    /// # fn demo() -> Result<(), sqlx::Error> {
    /// use pool_sqlx::SqlxManager;
    ///
    /// let manager = SqlxManager::<sqlx::SqliteConnection>::from_url("sqlite::memory:")?;
    /// assert!(SqlxManager::<sqlx::SqliteConnection>::from_url("sqlite:x.db?mode=bogus").is_err());
    /// # Ok(())
    /// # }
    /// # #[cfg(feature = "sqlx-sqlite")]
    /// # demo().unwrap();
    /// ```
    pub fn from_url(url: &str) -> Result<Self, Error> {
        Ok(Self::new(url.parse()?))
    }

    /// Sets how much work is done to be sure a returned connection is not
    /// inside a transaction. Defaults to [`ResetMode::Tracked`], which costs
    /// nothing on a clean return.
    #[must_use]
    pub fn reset_mode(mut self, mode: ResetMode) -> Self {
        self.reset_mode = mode;
        self
    }

    /// The options connections are opened with, as given (the pooler mode
    /// and the password provider apply on top of them at each connect).
    /// Mind that sqlx's own `Debug` for them prints the password; this
    /// manager's does not.
    pub fn connect_options(&self) -> &C::Options {
        &self.options
    }

    /// The options one connect uses: the manager's, adjusted for the pooler
    /// mode, with `password` if given.
    pub(super) fn options_for_connect(&self, password: Option<&str>) -> Cow<'_, C::Options> {
        let mut options = match C::for_pooler(&self.options, self.unnamed()) {
            Some(adjusted) => Cow::Owned(adjusted),
            None => Cow::Borrowed(&self.options),
        };
        if let Some(password) = password {
            options = Cow::Owned(C::with_password(options.into_owned(), password));
        }
        options
    }

    /// Checks that the settings work together: the fleet budget is valid
    /// and not behind a transaction-mode pooler, unnamed statements only
    /// behind one, and the connect options suit them (no TLS required with
    /// [`PoolerStatements::Unnamed`](pool_postgres::pooler::PoolerStatements::Unnamed)). The pool runs it when it is built
    /// ([`ManageConnection::check`]: `Pool::new` fails with it), and every
    /// connect runs it before any I/O (so a lazy pool's first connect
    /// reports it).
    ///
    /// # Errors
    ///
    /// `sqlx::Error::Configuration` holding a [`FleetBudgetConfigError`]
    /// (an empty name, a total of 0 or above `i32::MAX`, or
    /// [`BehindTransactionPooler`](FleetBudgetConfigError::BehindTransactionPooler))
    /// or a [`TransactionPoolerError`](pool_postgres::pooler::TransactionPoolerError);
    /// each says which settings clash.
    pub fn validate(&self) -> Result<(), Error> {
        self.settings.check().map_err(|clash| {
            Error::Configuration(match clash {
                PgSettingsError::FleetBudget(e) => Box::new(e),
                PgSettingsError::FleetBudgetBehindPooler => {
                    Box::new(FleetBudgetConfigError::BehindTransactionPooler)
                }
                PgSettingsError::UnnamedOutsideTransactionMode => {
                    Box::new(TransactionPoolerError::UnnamedOutsideTransactionMode)
                }
                other => Box::new(other),
            })
        })?;
        C::check_pooler(&self.options, self.unnamed())
            .map_err(|e| Error::Configuration(Box::new(e)))
    }

    /// Whether statements reach the server unnamed, through the statement
    /// relay.
    pub(super) fn unnamed(&self) -> bool {
        self.settings.unnamed()
    }

    /// The fleet budget, if one is set and valid.
    pub(super) fn budget(&self) -> Option<&FleetBudget> {
        self.settings.fleet_budget()
    }
}

impl<C: SqlxConnection> Clone for SqlxManager<C> {
    fn clone(&self) -> Self {
        Self {
            options: self.options.clone(),
            reset_mode: self.reset_mode,
            settings: self.settings.clone(),
            password_provider: self.password_provider.clone(),
            _connection: PhantomData,
        }
    }
}

impl<C: SqlxConnection> fmt::Debug for SqlxManager<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("SqlxManager");
        C::describe(&self.options, &mut out);
        out.field("reset_mode", &self.reset_mode)
            .field("pooler_mode", &self.settings.pooler_mode())
            .field("pooler_statements", &self.settings.pooler_statements())
            .field("password_provider", &self.password_provider.is_some())
            .field("fleet_budget", &self.settings.fleet_setting())
            .finish()
    }
}

#[async_trait]
impl<C: SqlxConnection> ManageConnection for SqlxManager<C> {
    type Connection = C;
    type Error = Error;

    /// [`validate`](SqlxManager::validate): settings that cannot work
    /// together fail `Pool::new` before anything is opened.
    ///
    /// # Errors
    ///
    /// As [`validate`](SqlxManager::validate).
    fn check(&self) -> Result<(), Error> {
        self.validate()
    }

    /// `host:port` or the socket's path (PostgreSQL, MySQL); `None` for
    /// SQLite.
    fn target(&self) -> Option<String> {
        C::target(&self.options)
    }

    /// A connect refused for want of a fleet budget ticket is a capacity
    /// refusal, not a database failure: callers keep waiting (within
    /// `acquire_timeout`) instead of failing fast (a fleet budget is a
    /// limit, not a fault). A refused login, an unknown database or role,
    /// and the manager's own settings that cannot work are permanent:
    /// retrying at once does not cure them, so callers fail fast with the
    /// first one. Anything else is transient.
    fn classify_error(&self, error: &Error) -> ErrorClass {
        classify(error)
    }

    /// Opens a connection with the manager's options, after fetching the
    /// password if a provider is set, and takes its fleet budget ticket if
    /// a budget is set.
    ///
    /// # Errors
    ///
    /// Whatever sqlx's connect fails with: `sqlx::Error::Io` for an
    /// unreachable server, `sqlx::Error::Database` for a refused login, `Tls`,
    /// `Configuration`. None of them carries the password. The driver's
    /// errors (`Database`, `Io`, `Tls`, `Protocol`) name where the connect
    /// went in their text (`error returned from database: connect to
    /// 127.0.0.1:5433 failed: password authentication failed for user
    /// "app"`) and keep all else: a `Database` error its `code()`, `kind()`
    /// and, for a downcast, the driver's own type; an `Io` error its
    /// `kind()`. A failed password
    /// provider is `Configuration` holding a [`PasswordProviderError`]; no
    /// free ticket in the fleet budget is `Configuration` holding a
    /// [`FleetBudgetExhausted`](pool_postgres::fleet::FleetBudgetExhausted),
    /// and settings that cannot work together are what
    /// [`validate`](SqlxManager::validate) says, before any I/O.
    async fn connect(&self) -> Result<C, Error> {
        self.validate()?;
        // Fair share: the instance counts itself (its control session) from
        // its first connect on, and opens nothing for a ticket it would not
        // take.
        let claim = match self.settings.share() {
            None => None,
            Some(share) => {
                share.start_control(|| {
                    C::control_opener(
                        self.options_for_connect(None).into_owned(),
                        self.password_provider.clone(),
                    )
                });
                Some(
                    share
                        .admit()
                        .map_err(|e| Error::Configuration(Box::new(e)))?,
                )
            }
        };
        let password = match &self.password_provider {
            Some(provider) => Some(
                provider()
                    .await
                    .map_err(|e| Error::Configuration(Box::new(PasswordProviderError(e))))?,
            ),
            None => None,
        };
        let options = self.options_for_connect(password.as_deref());
        let mut conn = C::connect_pooled(&options, self.unnamed())
            .await
            .map_err(|e| connect_error::at_target(e, C::target(&self.options)))?;
        if let Some(budget) = self.budget() {
            // One round trip. On an error `conn` is dropped here, which
            // closes its socket and so ends the session on the server.
            let sql = match (self.settings.share(), claim) {
                (Some(share), Some(claim)) => share.claim_sql(claim),
                _ => budget.claim_sql_literal(budget.random_start()),
            };
            if !C::claim_ticket(&mut conn, &sql).await? {
                if let Err(e) = conn.close().await {
                    tracing::debug!(error = %e, "closing a connection that found no fleet budget ticket");
                }
                if let (Some(share), Some(claim)) = (self.settings.share(), claim) {
                    share.refused(claim);
                }
                return Err(Error::Configuration(Box::new(budget.exhausted())));
            }
            if let Some(share) = self.settings.share() {
                share.note_claimed();
            }
        }
        Ok(conn)
    }

    /// Pings the server.
    ///
    /// # Errors
    ///
    /// The ping's error: the connection is unusable.
    async fn is_valid(&self, conn: &mut C) -> Result<(), Error> {
        conn.ping().await
    }

    /// `true` only for a connection given back to the fleet budget (fair
    /// share: another instance is below its share and this one above); no
    /// I/O, one atomic load otherwise.
    fn has_broken(&self, _conn: &mut C) -> bool {
        self.settings
            .share()
            .is_some_and(|share| share.give_back_counted())
    }

    /// See [`ResetMode`]: no I/O in [`ResetMode::Tracked`], `true` always in
    /// [`ResetMode::Strict`].
    fn needs_reset(&self, conn: &mut C) -> bool {
        reset::needs_reset(self.reset_mode, conn)
    }

    /// Sends what is queued, rolls back every transaction level sqlx
    /// tracks, and then whatever the server says is still open.
    ///
    /// # Errors
    ///
    /// Any error of those statements (the socket died, the server refused the
    /// rollback); the pool then closes the connection.
    async fn reset(&self, conn: &mut C) -> Result<(), Error> {
        C::reset_transaction(conn).await
    }

    /// sqlx's own `close`: tells the server (`Terminate` on PostgreSQL,
    /// `COM_QUIT` on MySQL) and waits for the socket (or SQLite's worker)
    /// to close, so the pool counts the session until it is gone.
    async fn close(&self, conn: C) {
        if let Some(share) = self.settings.share() {
            share.note_closed();
        }
        if let Err(e) = conn.close().await {
            tracing::debug!(error = %e, "closing a connection");
        }
    }

    fn awaits_close(&self) -> bool {
        true
    }
}

/// [`ManageConnection::classify_error`] for every sqlx manager: a fleet
/// budget with no free ticket is a capacity refusal; the manager's own
/// settings, a refused login and an unknown database or role are
/// permanent; anything else is transient.
fn classify(error: &Error) -> ErrorClass {
    match error {
        Error::Configuration(cause) if cause.is::<pool_postgres::fleet::FleetBudgetExhausted>() => {
            ErrorClass::CapacityRefusal
        }
        Error::Configuration(_) => ErrorClass::Permanent,
        Error::Database(e)
            if e.code()
                .is_some_and(|code| ErrorClass::is_permanent_sqlstate(&code)) =>
        {
            ErrorClass::Permanent
        }
        _ => ErrorClass::Transient,
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::error::Error as StdError;
    use std::fmt;

    use pool_postgres::fleet::FleetBudget;

    use super::super::driver::error::{DatabaseError, ErrorKind};
    use super::*;

    /// A server error with a SQLSTATE, as a driver reports one.
    #[derive(Debug)]
    struct Coded(Option<&'static str>);

    impl fmt::Display for Coded {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "server error {:?}", self.0)
        }
    }

    impl StdError for Coded {}

    impl DatabaseError for Coded {
        fn message(&self) -> &str {
            "server error"
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            self.0.map(Cow::Borrowed)
        }
        fn as_error(&self) -> &(dyn StdError + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn StdError + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn StdError + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> ErrorKind {
            ErrorKind::Other
        }
    }

    fn database(code: Option<&'static str>) -> Error {
        Error::Database(Box::new(Coded(code)))
    }

    #[test]
    fn a_refused_login_or_unknown_database_is_permanent() {
        for code in ["28P01", "28000", "3D000", "42501", "42000"] {
            assert_eq!(
                classify(&database(Some(code))),
                ErrorClass::Permanent,
                "{code}"
            );
        }
    }

    #[test]
    fn a_server_starting_up_or_full_is_transient() {
        for code in [Some("57P03"), Some("53300"), Some("08006"), None] {
            assert_eq!(classify(&database(code)), ErrorClass::Transient, "{code:?}");
        }
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(classify(&Error::Io(refused)), ErrorClass::Transient);
    }

    #[test]
    fn no_free_fleet_ticket_is_a_capacity_refusal_and_other_settings_are_permanent() {
        let budget = FleetBudget::new("orders", 2).expect("a valid budget");
        let exhausted = Error::Configuration(Box::new(budget.exhausted()));
        assert_eq!(classify(&exhausted), ErrorClass::CapacityRefusal);
        let setting = Error::Configuration("sslmode=require behind the relay".into());
        assert_eq!(classify(&setting), ErrorClass::Permanent);
    }
}
