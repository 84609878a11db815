//! An axum service on `Pool<PgConnection>`, used the way an
//! app uses sqlx's `PgPool`: the pool is the axum state, handlers query
//! through `&pool` or a `pool.begin()` transaction, and the pool's metrics
//! are served by the Prometheus exporter's own HTTP listener.
//!
//! | route | what it does |
//! |---|---|
//! | `GET /health` | `SELECT 1` through `&pool` |
//! | `POST /notes` | inserts the body as a note inside a transaction, returns its id and the count |
//! | `GET /notes/{id}` | one note through `&pool`, or 404 |
//! | `GET /pool` | the pool's counts (`Pool::state`, no locks) |
//! | `POST /scoped/notes` | inserts the body as a note in the request's transaction; an empty body answers 422, and the insert is rolled back |
//!
//! The `/scoped` routes run each request inside a transaction scope
//! ([`request_transaction`]): handlers and the functions they call ask the
//! pool for the current transaction (`pool.current()`) instead of being
//! handed one; a 2xx or 3xx answer commits it, any other rolls it back.
//!
//! Its notes live in a table of the process's own ([`notes_table`]),
//! dropped when the service stops ([`run`]), so a run leaves nothing behind
//! in a shared database.
//!
//! `examples/axum_service.rs` runs it; `examples/src/smoke/axum_service.rs`
//! smoke-tests it.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use metrics_exporter_prometheus::PrometheusBuilder;
use pool_ambient::{AmbientExt, TxError};
use pool_core::PoolConfig;
use pool_sqlx::{Pool, SqlxManager};
use serde::Serialize;
use sqlx::{AssertSqlSafe, PgConnection};
use tokio::net::TcpListener;

/// The pool the service runs on.
pub type PgPool = Pool<PgConnection>;

/// Bucket bounds, in seconds, for the pool's timing histograms.
const BUCKETS: &[f64] = &[
    0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0,
];

/// Installs the Prometheus recorder as the process's `metrics` recorder and
/// starts its HTTP listener on `addr` (`GET /metrics`, or any path).
///
/// # Errors
///
/// When a recorder is already installed or the buckets are refused.
pub fn install_metrics(addr: SocketAddr) -> anyhow::Result<()> {
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets(BUCKETS)?
        .install()?;
    Ok(())
}

/// The notes table: `axum_notes_` and the process id, so two runs on one
/// database (the example and its smoke test, say) never share a table and
/// each drops only its own.
pub fn notes_table() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| format!("axum_notes_{}", std::process::id()))
}

/// Opens the pool on `url` (named `axum-service`, up to 8 connections) and
/// creates the notes table ([`notes_table`]) if it is missing.
///
/// # Errors
///
/// A malformed URL, an unreachable server, or the `CREATE TABLE`'s error.
pub async fn connect(url: &str) -> anyhow::Result<PgPool> {
    let config = PoolConfig::builder()
        .name("axum-service")
        .max_size(8)
        .acquire_timeout(Duration::from_secs(5))
        .build()?;
    let pool = Pool::new(SqlxManager::<PgConnection>::from_url(url)?, config).await?;
    sqlx::query(AssertSqlSafe(format!(
        "CREATE TABLE IF NOT EXISTS {} (id BIGSERIAL PRIMARY KEY, body TEXT NOT NULL)",
        notes_table()
    )))
    .execute(&pool)
    .await?;
    Ok(pool)
}

/// Drops the notes table: the example's and its smoke test's last step,
/// so a run leaves nothing behind in a shared database (a real service
/// keeps its table).
///
/// # Errors
///
/// The `DROP TABLE`'s error.
pub async fn drop_notes(pool: &PgPool) -> Result<(), sqlx::Error> {
    sqlx::query(AssertSqlSafe(format!(
        "DROP TABLE IF EXISTS {}",
        notes_table()
    )))
    .execute(pool)
    .await?;
    Ok(())
}

/// A future that resolves when the process is asked to stop: Ctrl-C, or on
/// Unix SIGTERM, what `kill`, service managers and container runtimes send
/// (without a handler for it the process would die on the spot, its table
/// left behind). The handlers are installed when this returns, so a signal
/// sent after that is never missed.
///
/// # Errors
///
/// When a signal handler cannot be installed.
pub fn stop_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        Ok(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

/// The example program: the metrics listener on `metrics_addr`, the pool on
/// `url`, the service on `app_addr` (port 0 picks a free one, printed as
/// `listening on http://ADDR`) until `stop` resolves; then the notes table
/// is dropped and the pool closed.
///
/// # Errors
///
/// A metrics recorder already installed, an unreachable server, an address
/// that cannot be bound, the server's I/O error, or the `DROP TABLE`'s.
pub async fn run(
    url: &str,
    app_addr: SocketAddr,
    metrics_addr: SocketAddr,
    stop: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    use anyhow::Context;
    install_metrics(metrics_addr).context("starting the metrics listener")?;
    let pool = connect(url)
        .await
        .context("connecting (is PostgreSQL running?)")?;
    let listener = TcpListener::bind(app_addr).await?;
    println!(
        "listening on http://{}, metrics on http://{metrics_addr}/metrics",
        listener.local_addr()?
    );
    let served = serve(listener, pool.clone(), stop).await;
    drop_notes(&pool).await?;
    pool.close().await;
    served?;
    Ok(())
}

/// The service's routes, with the pool as state.
pub fn router(pool: PgPool) -> Router {
    let scoped = Router::new()
        .route("/scoped/notes", post(add_note_scoped))
        .route_layer(middleware::from_fn_with_state(
            pool.clone(),
            request_transaction,
        ));
    Router::new()
        .route("/health", get(health))
        .route("/notes", post(add_note))
        .route("/notes/{id}", get(note))
        .route("/pool", get(pool_state))
        .merge(scoped)
        .with_state(pool)
}

/// Why a request's transaction did not commit.
enum Uncommitted {
    /// The handler answered with neither 2xx nor 3xx: that answer goes out.
    Refused(Response),
    /// The scope failed (no connection, or `COMMIT` failed).
    Scope(TxError<sqlx::Error>),
}

impl From<TxError<sqlx::Error>> for Uncommitted {
    fn from(e: TxError<sqlx::Error>) -> Self {
        Self::Scope(e)
    }
}

/// Middleware: runs the rest of the request inside a transaction scope on
/// `pool`, committed when the answer is 2xx or 3xx and rolled back
/// otherwise (and when the handler panics or the client goes away, which
/// drops the scope). A failed checkout answers 503, a failed `COMMIT` 500.
pub async fn request_transaction(
    State(pool): State<PgPool>,
    request: Request,
    next: Next,
) -> Response {
    let scoped = pool
        .transaction()
        .run(async {
            let response = next.run(request).await;
            let status = response.status();
            if status.is_success() || status.is_redirection() {
                Ok(response)
            } else {
                Err(Uncommitted::Refused(response))
            }
        })
        .await;
    match scoped {
        Ok(response) | Err(Uncommitted::Refused(response)) => response,
        Err(Uncommitted::Scope(e @ TxError::Checkout(_))) => {
            (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response()
        }
        Err(Uncommitted::Scope(e)) => {
            (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
        }
    }
}

/// Serves `router(pool)` on `listener` until `shutdown` completes, then
/// lets requests in flight finish.
///
/// # Errors
///
/// The listener's I/O error.
pub async fn serve(
    listener: TcpListener,
    pool: PgPool,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(pool))
        .with_graceful_shutdown(shutdown)
        .await
}

/// A database error as a 500 with its message (503 when no connection
/// came in time).
#[derive(Debug)]
enum AppError {
    Db(sqlx::Error),
    Tx(TxError<sqlx::Error>),
}

impl From<sqlx::Error> for AppError {
    fn from(e: sqlx::Error) -> Self {
        Self::Db(e)
    }
}

impl From<TxError<sqlx::Error>> for AppError {
    fn from(e: TxError<sqlx::Error>) -> Self {
        Self::Tx(e)
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let (status, text) = match self {
            Self::Db(sqlx::Error::PoolTimedOut) => {
                (StatusCode::SERVICE_UNAVAILABLE, "timed out".to_owned())
            }
            Self::Db(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
            Self::Tx(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        };
        (status, text).into_response()
    }
}

async fn health(State(pool): State<PgPool>) -> Result<&'static str, AppError> {
    let one: i32 = sqlx::query_scalar("SELECT 1").fetch_one(&pool).await?;
    Ok(if one == 1 { "ok" } else { "unexpected" })
}

/// What `POST /notes` answers.
#[derive(Debug, Serialize)]
struct Added {
    id: i64,
    notes: i64,
}

async fn add_note(State(pool): State<PgPool>, body: String) -> Result<Json<Added>, AppError> {
    // An owned transaction: it could be moved into a task or kept in a
    // struct. Returning early with `?` drops it, and the pool rolls it back.
    let mut tx = pool.begin().await?;
    let id: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
        "INSERT INTO {} (body) VALUES ($1) RETURNING id",
        notes_table()
    )))
    .bind(&body)
    .fetch_one(&mut *tx)
    .await?;
    let notes: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM {}",
        notes_table()
    )))
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Json(Added { id, notes }))
}

/// `POST /scoped/notes`: runs in the request's transaction (see
/// [`request_transaction`]); the insert happens before the check, so a
/// refused note shows the rollback.
async fn add_note_scoped(State(pool): State<PgPool>, body: String) -> Result<Response, AppError> {
    let id = store_note(&pool, &body).await?;
    if body.trim().is_empty() {
        let answer = format!("note {id} is empty: rolled back");
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, answer).into_response());
    }
    Ok((StatusCode::CREATED, id.to_string()).into_response())
}

/// Inserts a note in the current transaction, wherever it was begun.
async fn store_note(pool: &PgPool, body: &str) -> Result<i64, AppError> {
    let mut tx = pool.current().await?;
    let id = sqlx::query_scalar(AssertSqlSafe(format!(
        "INSERT INTO {} (body) VALUES ($1) RETURNING id",
        notes_table()
    )))
    .bind(body)
    .fetch_one(&mut *tx)
    .await?;
    Ok(id)
}

async fn note(State(pool): State<PgPool>, Path(id): Path<i64>) -> Result<Response, AppError> {
    let body: Option<String> = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT body FROM {} WHERE id = $1",
        notes_table()
    )))
    .bind(id)
    .fetch_optional(&pool)
    .await?;
    Ok(match body {
        Some(body) => body.into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    })
}

async fn pool_state(State(pool): State<PgPool>) -> String {
    pool.state().to_string()
}
