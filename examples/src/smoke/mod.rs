//! The examples' smoke tests, one module per example, run as the
//! library's unit tests (one test binary): the axum service, the key-value
//! store, and the to-do program ported from `PgPool`.

#[cfg(feature = "axum")]
mod axum_service;
#[cfg(feature = "kv")]
mod kv_store;
#[cfg(feature = "todos")]
mod todos;

/// Runs a cleanup statement (a `DROP TABLE` or `DROP SCHEMA`) on the
/// PostgreSQL or MariaDB server at `url` when dropped, however the test
/// ends (a panic included): on a thread of its own, with a fresh connection
/// and runtime, so it works in a panicking test. Declare it before the
/// pools that use what it drops, so they go first.
#[cfg(any(feature = "axum", feature = "todos"))]
#[derive(Debug)]
struct Cleanup {
    url: String,
    statement: String,
}

#[cfg(any(feature = "axum", feature = "todos"))]
impl Cleanup {
    fn new(url: &str, statement: String) -> Self {
        Self {
            url: url.to_owned(),
            statement,
        }
    }
}

#[cfg(any(feature = "axum", feature = "todos"))]
impl Drop for Cleanup {
    fn drop(&mut self) {
        let (url, statement) = (self.url.clone(), self.statement.clone());
        let done = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let bound = std::time::Duration::from_secs(15);
                match tokio::time::timeout(bound, run_on(&url, statement)).await {
                    Ok(done) => done,
                    Err(_) => Err(format!("not done within {bound:?}")),
                }
            })
        })
        .join();
        if !matches!(done, Ok(Ok(()))) && !std::thread::panicking() {
            panic!("cleanup `{}` failed: {done:?}", self.statement);
        }
    }
}

#[cfg(any(feature = "axum", feature = "todos"))]
async fn run_on(url: &str, statement: String) -> Result<(), String> {
    use sqlx::Connection;
    let statement = sqlx::AssertSqlSafe(statement);
    if url.starts_with("postgres") {
        let mut conn = sqlx::PgConnection::connect(url)
            .await
            .map_err(|e| e.to_string())?;
        let done = sqlx::raw_sql(statement).execute(&mut conn).await;
        let _ = conn.close().await;
        return done.map(drop).map_err(|e| e.to_string());
    }
    #[cfg(feature = "kv")]
    if url.starts_with("mysql") || url.starts_with("mariadb") {
        let mut conn = sqlx::MySqlConnection::connect(url)
            .await
            .map_err(|e| e.to_string())?;
        let done = sqlx::raw_sql(statement).execute(&mut conn).await;
        let _ = conn.close().await;
        return done.map(drop).map_err(|e| e.to_string());
    }
    Err(format!("no cleanup for {url}"))
}
