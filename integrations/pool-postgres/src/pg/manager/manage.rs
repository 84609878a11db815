//! [`ManageConnection`] for [`PostgresManager`]: connect, check, reset.

use std::borrow::Cow;
use std::future::poll_fn;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::{AsyncMessage, Connection};

use pool_api::{async_trait, ErrorClass, ManageConnection};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::types::Type;
use tokio_postgres::Client;
use tokio_postgres::Socket;

#[cfg(unix)]
use super::relayed::relayed_connect;
use super::{PostgresManager, ResetMode};
use crate::fleet::{self, BoxFuture, ControlSession, OpenControl};
use crate::pg::client::{PgClient, ReportedRole};
use crate::pg::driver::drive;
use crate::pg::error::PgError;

/// The statements of [`ResetMode::Clean`], sent as one simple query. The
/// leading `ROLLBACK` leaves any transaction so the rest runs; each later
/// statement undoes one kind of session state.
const CLEAN_SQL: &str = "ROLLBACK; \
    CLOSE ALL; \
    SET SESSION AUTHORIZATION DEFAULT; \
    RESET ALL; \
    UNLISTEN *; \
    SELECT pg_advisory_unlock_all(); \
    DISCARD TEMP; \
    DISCARD SEQUENCES";

/// The column that says whether [`clean_keeping_ticket`] kept the ticket.
const TICKET_KEPT: &str = "pool_fleet_ticket_kept";

/// [`CLEAN_SQL`] for a connection holding the fleet budget ticket
/// `(key, ticket)`: every advisory lock is released but the ticket, which
/// the session holds without a gap. Inside one transaction the ticket is
/// first taken as a transaction lock (granted at once to the session that
/// holds it as a session lock), `pg_advisory_unlock_all()` then releases
/// the session locks only, the ticket is taken again as a session lock,
/// and `COMMIT` drops the transaction lock: no other session can take the
/// ticket in between. The last row, [`TICKET_KEPT`], is `f` only when
/// another session held the ticket already (the user unlocked it): the
/// connection then holds no ticket and must not stay open. Only integers
/// are written in.
fn clean_keeping_ticket(key: i32, ticket: i32) -> String {
    format!(
        "ROLLBACK; \
         CLOSE ALL; \
         SET SESSION AUTHORIZATION DEFAULT; \
         RESET ALL; \
         UNLISTEN *; \
         BEGIN; \
         SELECT pg_try_advisory_xact_lock(({key})::int4, ({ticket})::int4); \
         SELECT pg_advisory_unlock_all(); \
         SELECT pg_try_advisory_lock(({key})::int4, ({ticket})::int4) AS {TICKET_KEPT}; \
         COMMIT; \
         DISCARD TEMP; \
         DISCARD SEQUENCES"
    )
}

/// The query that names the server a connection reached, when the config
/// lists several hosts (see [`failover`](crate#failover)).
const SERVER_KEY_SQL: &str =
    "SELECT coalesce(host(inet_server_addr()), 'local') || ':' || current_setting('port')";

/// The fair share's control session on `tokio_postgres`: the client, and
/// the payloads of the notifications its connection task received.
struct TokioControl(Client, Arc<Mutex<Vec<String>>>);

/// The most notification payloads a control session keeps between two
/// rechecks; more are dropped (a recheck needs one per knocking instance).
const HEARD_AT_MOST: usize = 1024;

/// Drives a control session's socket, keeping its notifications.
async fn drive_control<S, T>(mut connection: Connection<S, T>, heard: Arc<Mutex<Vec<String>>>)
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: AsyncRead + AsyncWrite + Unpin,
{
    while let Some(message) = poll_fn(|cx| connection.poll_message(cx)).await {
        match message {
            Ok(AsyncMessage::Notification(note)) => {
                if let Ok(mut heard) = heard.lock() {
                    if heard.len() < HEARD_AT_MOST {
                        heard.push(note.payload().to_owned());
                    }
                }
            }
            Ok(_) => {}
            Err(error) => {
                tracing::debug!(%error, "fleet fair share: the control session ended");
                return;
            }
        }
    }
}

impl ControlSession for TokioControl {
    fn execute<'a>(&'a mut self, sql: &'a str) -> BoxFuture<'a, Result<(), fleet::BoxError>> {
        Box::pin(async move { Ok(self.0.batch_execute(sql).await?) })
    }

    fn notifications(&mut self) -> Vec<String> {
        self.1
            .lock()
            .map(|mut heard| std::mem::take(&mut *heard))
            .unwrap_or_default()
    }

    fn row<'a>(&'a mut self, sql: &'a str) -> BoxFuture<'a, Result<Vec<i64>, fleet::BoxError>> {
        Box::pin(async move {
            let rows = self.0.simple_query(sql).await?;
            let row = rows
                .iter()
                .find_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(row) => Some(row),
                    _ => None,
                })
                .ok_or("no row")?;
            (0..row.len())
                .map(|i| Ok(row.get(i).ok_or("a null")?.parse::<i64>()?))
                .collect()
        })
    }
}

impl<Tls> PostgresManager<Tls>
where
    Tls: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
    Tls::Stream: Send,
    Tls::TlsConnect: Send,
    <Tls::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    /// Opens the fair share's control session: the manager's config, TLS
    /// and password provider, no ticket, no statement cache.
    fn control_opener(&self) -> OpenControl {
        let (config, tls, password) =
            (self.config.clone(), self.tls.clone(), self.password.clone());
        Box::new(move || {
            let (mut config, tls, password) = (config.clone(), tls.clone(), password.clone());
            Box::pin(async move {
                if let Some(provider) = password {
                    config.password(provider().await?);
                }
                let (client, connection) = config
                    .connect(tls)
                    .await
                    .map_err(|e| PgError::connect_failed(&config, e))?;
                let heard = Arc::new(Mutex::new(Vec::new()));
                tokio::spawn(drive_control(connection, Arc::clone(&heard)));
                Ok(Box::new(TokioControl(client, heard)) as Box<dyn ControlSession>)
            })
        })
    }
}

#[async_trait]
impl<Tls> ManageConnection for PostgresManager<Tls>
where
    Tls: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
    Tls::Stream: Send,
    Tls::TlsConnect: Send,
    <Tls::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    type Connection = PgClient;
    type Error = PgError;

    /// A connect refused because the fleet budget had no free ticket is
    /// a capacity refusal, not a database failure: fail fast does not
    /// apply (callers keep waiting within `acquire_timeout`). A refused
    /// login, an unknown database or role, and the manager's own settings
    /// that cannot work are permanent: retrying at once does not cure
    /// them, so callers fail fast with the first one. Anything else is
    /// transient.
    fn classify_error(&self, error: &PgError) -> ErrorClass {
        match error {
            PgError::FleetBudget(_) => ErrorClass::CapacityRefusal,
            PgError::Db(e) | PgError::Connect { error: e, .. }
                if e.code().is_some_and(|code| {
                    pool_api::ErrorClass::is_permanent_sqlstate(code.code())
                }) =>
            {
                ErrorClass::Permanent
            }
            PgError::Config(_) => ErrorClass::Permanent,
            _ => ErrorClass::Transient,
        }
    }

    /// Each host of the config with its port (a Unix socket as its path),
    /// comma-separated: what a connect that runs out of time names.
    fn target(&self) -> Option<String> {
        Some(super::super::error::target(&self.config))
    }

    /// [`validate`](PostgresManager::validate): settings that cannot work
    /// together fail `Pool::new` before anything is opened.
    ///
    /// # Errors
    ///
    /// [`PgError::Config`] with what `validate` says.
    fn check(&self) -> Result<(), PgError> {
        Ok(self.validate()?)
    }

    async fn connect(&self) -> Result<PgClient, PgError> {
        self.validate()?;
        // Fair share: the instance counts itself (its control session) from
        // its first connect on, and opens nothing for a ticket it would not
        // take.
        let claim = match self.settings.share() {
            None => None,
            Some(share) => {
                share.start_control(|| self.control_opener());
                Some(share.admit().map_err(PgError::FleetBudget)?)
            }
        };
        let config = match &self.password {
            None => Cow::Borrowed(&self.config),
            Some(provider) => {
                let password = provider().await.map_err(PgError::Password)?;
                let mut config = self.config.clone();
                config.password(password);
                Cow::Owned(config)
            }
        };
        let (client, driver, canceller, reported, relayed) = match self.relays() {
            #[cfg(unix)]
            true => {
                let (client, driver, canceller, reported) =
                    relayed_connect(&config).await.map_err(|e| match e {
                        PgError::Db(e) => PgError::connect_failed(&config, e),
                        e => e,
                    })?;
                (client, driver, canceller, reported, true)
            }
            _ => {
                let (client, connection) = config
                    .connect(self.tls.clone())
                    .await
                    .map_err(|e| PgError::connect_failed(&config, e))?;
                let reported = ReportedRole::from_params(
                    connection.parameter("in_hot_standby"),
                    connection.parameter("default_transaction_read_only"),
                );
                let driver = tokio::spawn(drive(connection));
                (client, driver, Arc::clone(&self.canceller), reported, false)
            }
        };
        // With one host every connection reaches the same server; with
        // several, ask which one this is (one round trip per connect).
        let key = if self.config.get_hosts().len() > 1 {
            let rows = client.simple_query(SERVER_KEY_SQL).await?;
            rows.iter()
                .find_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                    _ => None,
                })
                .unwrap_or_default()
        } else {
            String::new()
        };
        let host = self.hosts.mark(key);
        let mut seat = None;
        let ticket = match (self.current_fleet_budget(), self.settings.share(), claim) {
            (None, _, _) => None,
            (Some(budget), Some(share), Some(claim)) => {
                // One round trip, the claim with its parameters written in.
                let rows = client.simple_query(&share.claim_sql(claim)).await?;
                let taken = rows.iter().find_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                    _ => None,
                });
                match taken.and_then(|t| t.parse::<i32>().ok()) {
                    Some(t) => {
                        seat = Some(share.seat());
                        Some(t)
                    }
                    None => {
                        share.refused(claim);
                        return Err(PgError::FleetBudget(budget.exhausted()));
                    }
                }
            }
            (Some(budget), _, _) => {
                // One round trip, an unnamed statement. On any failure the
                // client is dropped here, which closes the connection.
                let row = client
                    .query_typed_opt(
                        fleet::CLAIM_SQL,
                        &[
                            (&budget.key(), Type::INT4),
                            (&budget.total_i32(), Type::INT4),
                            (&budget.random_start(), Type::INT4),
                        ],
                    )
                    .await?;
                match row {
                    Some(row) => Some(row.try_get::<_, i32>(0)?),
                    None => return Err(PgError::FleetBudget(budget.exhausted())),
                }
            }
        };
        let client = PgClient::new(
            client,
            self.statement_cache_capacity,
            canceller,
            self.cancel_timeout,
            self.settings.pooler_mode(),
            ticket,
            host,
        )
        .with_unnamed_statements(self.unnamed())
        .with_driver(driver)
        .with_reported_role(reported)
        .with_fleet_seat(seat);
        Ok(if relayed { client.relayed() } else { client })
    }

    async fn is_valid(&self, conn: &mut PgClient) -> Result<(), PgError> {
        if conn.is_retired() {
            return Err(PgError::Retired);
        }
        // Abandoned until the server answers: a check dropped at the pool's
        // `validation_timeout` (a half-open socket, a stalled server) leaves
        // the mark, and the pool's close then closes the socket too.
        conn.set_abandoned(true);
        conn.client().simple_query("").await?;
        conn.set_abandoned(false);
        Ok(())
    }

    /// Also `true` for a connection given back to the fleet budget (fair
    /// share: another instance is below its share and this one above).
    fn has_broken(&self, conn: &mut PgClient) -> bool {
        conn.is_closed() || conn.is_abandoned() || conn.is_retired() || conn.gives_back_ticket()
    }

    /// Sends `Terminate` and waits for the socket to close, so the pool
    /// counts the session until the server has it gone.
    async fn close(&self, conn: PgClient) {
        conn.close().await;
    }

    fn awaits_close(&self) -> bool {
        true
    }

    fn needs_reset(&self, conn: &mut PgClient) -> bool {
        match self.reset_mode {
            ResetMode::None => false,
            ResetMode::Rollback => conn.transaction_open(),
            ResetMode::RollbackAlways | ResetMode::Clean => true,
        }
    }

    async fn reset(&self, conn: &mut PgClient) -> Result<(), PgError> {
        let budgeted = match (self.current_fleet_budget(), conn.ticket_key()) {
            (Some(budget), Some(ticket)) => Some((budget, ticket)),
            _ => None,
        };
        let sql = match (self.reset_mode, budgeted) {
            (ResetMode::None, _) => return Ok(()),
            (ResetMode::Rollback | ResetMode::RollbackAlways, _) => Cow::Borrowed("ROLLBACK"),
            (ResetMode::Clean, None) => Cow::Borrowed(CLEAN_SQL),
            (ResetMode::Clean, Some((budget, ticket))) => {
                Cow::Owned(clean_keeping_ticket(budget.key(), ticket))
            }
        };
        // As in `is_valid`: a reset dropped at its timeout closes the socket.
        conn.set_abandoned(true);
        match budgeted.filter(|_| self.reset_mode == ResetMode::Clean) {
            None => conn.client().batch_execute(&sql).await?,
            Some((budget, _)) => {
                let replies = conn.client().simple_query(&sql).await?;
                let kept = replies.iter().any(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(row) => {
                        row.columns().first().map(|c| c.name()) == Some(TICKET_KEPT)
                            && row.get(0) == Some("t")
                    }
                    _ => false,
                });
                if !kept {
                    // Another session holds the ticket now: this one is
                    // outside the budget, and the pool closes it.
                    return Err(PgError::FleetBudget(budget.exhausted()));
                }
            }
        }
        conn.set_abandoned(false);
        conn.mark_reset();
        Ok(())
    }
}
