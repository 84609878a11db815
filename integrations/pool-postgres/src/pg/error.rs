//! What [`PostgresManager`](super::PostgresManager) fails with, and the
//! settings it refuses.

use std::error::Error;
use std::fmt;

use tokio_postgres::config::Host;
use tokio_postgres::Config;

use crate::fleet::{FleetBudgetConfigError, FleetBudgetExhausted};
use crate::pooler::SessionStatement;
use crate::settings::PgSettingsError;
use pool_api::error_chain::{ConnectCause, ErrorChain};

use super::ResetMode;

/// A boxed error, as a password provider returns.
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// Why opening, checking or resetting a connection failed.
///
/// `Display` names the cause: for [`Connect`](Self::Connect) where the
/// connect went and the server's or the system's message (`connect to
/// 127.0.0.1:5433 failed: password authentication failed for user "app"`,
/// `connect to 127.0.0.1:5433 failed: Connection refused (os error 111)`),
/// for [`Db`](Self::Db) the driver's text with its causes
/// (`db error: ERROR: relation "t" does not exist`); the other cases say
/// what failed. Never shows a password.
#[derive(Debug)]
#[non_exhaustive]
pub enum PgError {
    /// The driver or the server failed, on an open connection.
    Db(tokio_postgres::Error),
    /// Opening the connection failed (refused, unreachable, a refused login,
    /// a database that does not exist): the driver's error, with where the
    /// connect went. [`as_db`](PgError::as_db) returns the driver's error,
    /// and so does `source()`.
    Connect {
        /// Where the connect went: each host of the settings with its port
        /// (`127.0.0.1:5432`; a Unix socket as its path), comma-separated.
        target: String,
        /// The driver's error.
        error: tokio_postgres::Error,
    },
    /// The password provider failed; its error is the source.
    Password(BoxError),
    /// The connection was opened but no ticket of its fleet budget was free,
    /// so it was closed again. Not a database failure.
    FleetBudget(FleetBudgetExhausted),
    /// The manager's settings do not work together (see [`PgConfigError`]).
    Config(PgConfigError),
    /// [`PgClient::prepare_cached`](super::PgClient::prepare_cached) with
    /// unnamed statements
    /// ([`PoolerStatements::Unnamed`](crate::PoolerStatements::Unnamed)) on
    /// a connection that does not go through the relay (`sslmode=require`):
    /// a cached named statement would outlive its transaction. Query with the text
    /// instead (`conn.query(sql, params)`), which the pooled client runs as
    /// an unnamed statement.
    NamedStatementBehindPooler,
    /// The statement relay of
    /// [`PoolerStatements::Unnamed`](crate::PoolerStatements::Unnamed) could not
    /// reach the pooler (refused, unreachable, timed out) or could not be
    /// set up; the I/O error is the source.
    Relay(std::io::Error),
    /// The connection is retired: a query on it, or on another connection
    /// to the same server opened no later, failed with a SQLSTATE that says
    /// the server turned read-only or is going away (see
    /// [`PgClient::is_retired`](super::PgClient::is_retired)). Returned by
    /// the validation at checkout, so the pool replaces the connection.
    Retired,
    /// Behind a transaction-mode pooler
    /// ([`PoolerMode::Transaction`](crate::PoolerMode::Transaction)), a
    /// query text given to the pooled client or its transaction sets session
    /// state (`SET`, `LISTEN`, a session-level advisory lock), which would
    /// stay on a server connection shared with other clients. Nothing was
    /// sent; the connection is fine. `Display` names the statement and what
    /// to use instead.
    SessionStateBehindPooler(SessionStatement),
}

impl PgError {
    /// The driver's error, if that is what this is (on an open connection
    /// or opening one).
    pub fn as_db(&self) -> Option<&tokio_postgres::Error> {
        match self {
            Self::Db(e) | Self::Connect { error: e, .. } => Some(e),
            _ => None,
        }
    }

    /// A failed connect with `config`: [`Connect`](Self::Connect), naming
    /// the config's hosts.
    pub(crate) fn connect_failed(config: &Config, error: tokio_postgres::Error) -> Self {
        Self::Connect {
            target: target(config),
            error,
        }
    }

    /// The server's error, if this is one: as
    /// [`tokio_postgres::Error::as_db_error`].
    pub fn as_db_error(&self) -> Option<&tokio_postgres::error::DbError> {
        self.as_db().and_then(tokio_postgres::Error::as_db_error)
    }

    /// The SQLSTATE of the server's error, if this is one: as
    /// [`tokio_postgres::Error::code`].
    pub fn code(&self) -> Option<&tokio_postgres::error::SqlState> {
        self.as_db().and_then(tokio_postgres::Error::code)
    }

    /// Whether a fleet budget had no free ticket.
    pub fn is_fleet_budget_exhausted(&self) -> bool {
        matches!(self, Self::FleetBudget(_))
    }
}

impl fmt::Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Db(e) => fmt::Display::fmt(&ErrorChain(e), f),
            Self::Connect { target, error } => {
                write!(f, "connect to {target} failed: {}", ConnectCause(error))
            }
            Self::Password(e) => write!(f, "password provider failed: {e}"),
            Self::FleetBudget(e) => fmt::Display::fmt(e, f),
            Self::Config(e) => fmt::Display::fmt(e, f),
            Self::Relay(e) => write!(
                f,
                "could not reach the pooler through the statement relay: {e}"
            ),
            Self::Retired => f.write_str(
                "the connection is retired: its server turned read-only or is going away \
                 (SQLSTATE 25006, 57P01, 57P02, 57P03 or class 08 on this or an older \
                 connection to it)",
            ),
            Self::SessionStateBehindPooler(statement) => fmt::Display::fmt(statement, f),
            Self::NamedStatementBehindPooler => f.write_str(
                "prepare_cached keeps a named statement across transactions, which a \
                 transaction-mode pooler that keeps no named statements \
                 (PoolerStatements::Unnamed, here without the relay) does not allow; query \
                 with the text instead",
            ),
        }
    }
}

impl Error for PgError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            // Transparent: the driver's error is shown, its cause is next.
            Self::Db(e) => e.source(),
            Self::Connect { error, .. } => Some(error),
            Self::Password(e) => Some(&**e),
            Self::FleetBudget(_)
            | Self::NamedStatementBehindPooler
            | Self::Retired
            | Self::SessionStateBehindPooler(_) => None,
            Self::Config(e) => e.source(),
            Self::Relay(e) => Some(e),
        }
    }
}

impl From<tokio_postgres::Error> for PgError {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Db(e)
    }
}

/// Where `config` connects: each host (or `hostaddr` without a host) with
/// its port, comma-separated, in the order they are tried.
pub(super) fn target(config: &Config) -> String {
    let (hosts, addrs, ports) = (
        config.get_hosts(),
        config.get_hostaddrs(),
        config.get_ports(),
    );
    let targets: Vec<String> = (0..hosts.len().max(addrs.len()))
        .map(|i| {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            match (hosts.get(i), addrs.get(i)) {
                (Some(Host::Unix(dir)), _) => {
                    dir.join(format!(".s.PGSQL.{port}")).display().to_string()
                }
                (Some(Host::Tcp(host)), _) if !host.contains(':') => format!("{host}:{port}"),
                (Some(Host::Tcp(host)), _) => format!("[{host}]:{port}"),
                (None, Some(addr)) => std::net::SocketAddr::new(*addr, port).to_string(),
                (None, None) => format!("localhost:{port}"),
            }
        })
        .collect();
    if targets.is_empty() {
        // The driver refuses a config without a host before any I/O.
        return String::from("no host");
    }
    targets.join(", ")
}

/// Manager settings that cannot work together (or a fleet budget that
/// cannot work at all), reported by
/// [`PostgresManager::validate`](super::PostgresManager::validate) when the
/// pool is built (`Pool::new` fails with it) and by every connect, before
/// any I/O. The setters themselves never fail.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PgConfigError {
    /// A reset that needs a server session (`ResetMode::Clean`:
    /// `DISCARD`, `RESET ALL`, `UNLISTEN`, session authorization) behind a
    /// transaction-mode pooler, where the next transaction may run on
    /// another server connection.
    SessionResetBehindPooler {
        /// The reset mode refused.
        reset_mode: ResetMode,
    },
    /// A fleet budget behind a transaction-mode pooler: its tickets are
    /// advisory session locks, which would be taken on whichever server
    /// connection ran the claim and belong to no client.
    FleetBudgetBehindPooler,
    /// The fleet budget itself is invalid.
    FleetBudget(FleetBudgetConfigError),
    /// [`PoolerStatements::Unnamed`](crate::PoolerStatements::Unnamed)
    /// without [`PoolerMode::Transaction`](crate::PoolerMode::Transaction):
    /// the statement relay is for transaction-mode poolers only.
    UnnamedOutsideTransactionMode,
}

impl From<PgSettingsError> for PgConfigError {
    fn from(clash: PgSettingsError) -> Self {
        match clash {
            PgSettingsError::FleetBudget(e) => Self::FleetBudget(e),
            PgSettingsError::FleetBudgetBehindPooler => Self::FleetBudgetBehindPooler,
            PgSettingsError::UnnamedOutsideTransactionMode => Self::UnnamedOutsideTransactionMode,
        }
    }
}

impl fmt::Display for PgConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SessionResetBehindPooler { reset_mode } => write!(
                f,
                "reset_mode(ResetMode::{reset_mode:?}) cannot work with \
                 pooler_mode(PoolerMode::Transaction): the reset needs a server session, which \
                 a transaction-mode pooler does not keep; use ResetMode::Rollback or \
                 RollbackAlways"
            ),
            Self::FleetBudgetBehindPooler => f.write_str(
                "fleet_budget cannot work with pooler_mode(PoolerMode::Transaction): a fleet \
                 budget holds advisory session locks, which a transaction-mode pooler gives to \
                 other clients; budget the pooler's server connections instead",
            ),
            Self::FleetBudget(e) => fmt::Display::fmt(e, f),
            Self::UnnamedOutsideTransactionMode => f.write_str(
                "pooler_statements(PoolerStatements::Unnamed) needs \
                 pooler_mode(PoolerMode::Transaction): named statements are safe on a direct \
                 connection or a session-mode pooler",
            ),
        }
    }
}

impl Error for PgConfigError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::FleetBudget(e) => Some(e),
            _ => None,
        }
    }
}

impl From<PgConfigError> for PgError {
    fn from(e: PgConfigError) -> Self {
        Self::Config(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(s: &str) -> Config {
        s.parse().expect("a valid connection string")
    }

    #[test]
    fn the_target_names_each_host_with_its_port() {
        assert_eq!(target(&config("host=db1 user=u")), "db1:5432");
        assert_eq!(
            target(&config("host=db1,db2 port=5433,5434 user=u")),
            "db1:5433, db2:5434"
        );
        assert_eq!(
            target(&config("hostaddr=127.0.0.1 port=6000 user=u")),
            "127.0.0.1:6000"
        );
        assert_eq!(target(&config("host=::1 port=6000 user=u")), "[::1]:6000");
        assert_eq!(
            target(&config("host=/run/pg port=5433 user=u")),
            "/run/pg/.s.PGSQL.5433"
        );
        assert_eq!(target(&Config::new()), "no host");
    }
}
