//! A PostgreSQL client outside any pool, to watch the pool's connections
//! from the server's side (`pg_stat_activity`, `pg_terminate_backend`).

/// Parsed connection settings for `url`.
///
/// # Panics
///
/// When `url` is not a valid connection string.
pub fn config(url: &str) -> tokio_postgres::Config {
    url.parse()
        .unwrap_or_else(|e| panic!("DATABASE_URL is not a valid connection string: {e}"))
}

/// A plain client on `url`, its connection driven by a task of its own.
///
/// # Panics
///
/// When it cannot connect.
pub async fn admin(url: &str) -> tokio_postgres::Client {
    let (client, connection) = config(url)
        .connect(tokio_postgres::NoTls)
        .await
        .expect("admin connection to DATABASE_URL");
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("admin connection ended: {e}");
        }
    });
    client
}

/// `DATABASE_URL`'s settings and an [`admin`] client on it: what a test
/// that watches its connections from the server's side starts with.
///
/// # Panics
///
/// When `DATABASE_URL` is unset or invalid, or the admin cannot connect.
pub async fn server() -> (tokio_postgres::Config, tokio_postgres::Client) {
    let url = super::db::url("DATABASE_URL");
    (config(&url), admin(&url).await)
}

/// A [`PostgresManager`] on `DATABASE_URL`, a connection it opened, and an
/// [`admin`] client to watch that connection from the server's side.
///
/// # Panics
///
/// As [`server`] does, and when the manager cannot connect.
#[cfg(feature = "tokio-postgres")]
pub async fn connected_manager() -> (
    pool_postgres::PostgresManager<tokio_postgres::NoTls>,
    pool_postgres::PgClient,
    tokio_postgres::Client,
) {
    use pool_core::ManageConnection;
    let (config, admin) = server().await;
    let manager = pool_postgres::PostgresManager::new(config, tokio_postgres::NoTls);
    let conn = manager.connect().await.expect("connect");
    (manager, conn, admin)
}

/// Runs `SELECT pg_sleep(secs)` on `conn` under a 100 ms time limit and
/// returns the error it ends in.
///
/// # Panics
///
/// When the query finishes within the limit.
#[cfg(feature = "tokio-postgres")]
pub async fn outlived_query(
    conn: &pool_postgres::PgClient,
    secs: u32,
) -> pool_postgres::QueryError {
    let sql = format!("SELECT pg_sleep({secs})");
    conn.with_timeout(std::time::Duration::from_millis(100), conn.query(&sql, &[]))
        .await
        .expect_err("pg_sleep outlives 100 ms")
}

/// The server process id behind a client.
pub async fn backend_pid(client: &tokio_postgres::Client) -> i32 {
    client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pg_backend_pid()")
        .get(0)
}

/// `pg_stat_activity.state` of a backend (`None` once it has exited).
pub async fn backend_state(admin: &tokio_postgres::Client, pid: i32) -> Option<String> {
    admin
        .query_opt("SELECT state FROM pg_stat_activity WHERE pid = $1", &[&pid])
        .await
        .expect("pg_stat_activity")
        .and_then(|row| row.get::<_, Option<String>>(0))
}

/// Ends the backend `pid` from `admin`'s session and waits (bounded) until
/// the server no longer lists it.
///
/// # Panics
///
/// When the terminate fails or the backend is still listed 5 s later.
pub async fn terminate(admin: &tokio_postgres::Client, pid: i32) {
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .expect("terminate");
    let gone = super::db::eventually(std::time::Duration::from_secs(5), || async move {
        backend_state(admin, pid).await.is_none()
    })
    .await;
    assert!(gone, "backend {pid} exited");
}

/// The sessions the server has open for `application_name` `app`.
pub async fn sessions(admin: &tokio_postgres::Client, app: &str) -> i64 {
    admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .await
        .expect("pg_stat_activity")
        .get(0)
}
