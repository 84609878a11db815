//! `SqlxManager<PgConnection>::pooler_mode(PoolerMode::Transaction)` with
//! `pooler_statements(PoolerStatements::Unnamed)` behind a real PgBouncer
//! in transaction mode (1.18 in CI, which keeps no named statement),
//! started by the test on a free loopback port in front of `DATABASE_URL`'s
//! server: 2 server connections shared by a pool of 8. Parameterised queries, as sqlx runs them by
//! default (persistent, cached), through every path: `&pool`, `&mut *conn`,
//! `&mut *tx` from `pool.begin()` and from sqlx's `conn.begin()`, and a
//! statement from `prepare`; then a mixed load of 32 tasks, one query in
//! five inside a transaction. All succeed; without the mode, the same
//! queries fail on named prepared statements. Directly on the server, the
//! mode leaves no named statement in `pg_prepared_statements`; COPY in and
//! out leave the connection usable. With statements passed through (the
//! default of transaction mode), every path runs on the direct path,
//! directly and behind PgBouncer in session mode.
//!
//! `PGBOUNCER` overrides the binary (default `/usr/sbin/pgbouncer`).
#![cfg(feature = "sqlx-postgres")]

use std::time::{Duration, Instant};

use crate::support::db::bounded;
use crate::support::pgbouncer::{Bouncer, Upstream};
use pool_core::PoolConfig;
use pool_postgres::pooler::{PoolerMode, PoolerStatements};
use pool_sqlx::Pool as SqlxPool;
use pool_sqlx::SqlxManager;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{Connection, Executor, Row, Statement};

/// The tests of this file share the count of open relays: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// PgBouncer in front of `upstream` with two server connections.
fn start_bouncer(upstream: &PgConnectOptions) -> Bouncer {
    let upstream = Upstream {
        host: upstream.get_host(),
        port: upstream.get_port(),
        dbname: upstream.get_database().unwrap_or("postgres"),
        user: upstream.get_username(),
    };
    Bouncer::start(upstream, "default_pool_size = 2\nmax_client_conn = 100\n")
}

/// How a query runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// `fetch_one(&pool)`.
    Pool,
    /// `pool.get()`, `fetch_one(&mut *conn)`.
    Connection,
    /// `pool.begin()`, `fetch_one(&mut *tx)`, `commit()`.
    PoolBegin,
    /// `pool.get()`, sqlx's `conn.begin()`, `fetch_one(&mut *tx)`,
    /// `commit()`.
    ConnBegin,
    /// `pool.get()`, `conn.prepare(sql)`, then the statement's query on
    /// `&mut *conn`.
    Prepared,
    /// `pool.begin()`, `fetch_one(&mut *tx)` with `.persistent(false)`:
    /// the way around named statements without the relay, for the cost
    /// report.
    PoolBeginUnnamed,
}

const PATHS: [Path; 5] = [
    Path::Pool,
    Path::Connection,
    Path::PoolBegin,
    Path::ConnBegin,
    Path::Prepared,
];

const SQL: &str = "SELECT $1::int4 + $2::int4";

/// One parameterised query through `path`; its answer.
async fn one(
    pool: &SqlxPool<PgConnection>,
    path: Path,
    a: i32,
    b: i32,
) -> Result<i32, sqlx::Error> {
    let query = sqlx::query_scalar::<_, i32>(SQL).bind(a).bind(b);
    let checkout = |e| pool_sqlx::into_sqlx_error(e);
    match path {
        Path::Pool => query.fetch_one(pool).await,
        Path::Connection => {
            let mut conn = pool.get().await.map_err(checkout)?;
            query.fetch_one(&mut *conn).await
        }
        Path::PoolBegin | Path::PoolBeginUnnamed => {
            let query = query.persistent(path == Path::PoolBegin);
            let mut tx = pool.begin().await?;
            let n = query.fetch_one(&mut *tx).await?;
            tx.commit().await?;
            Ok(n)
        }
        Path::ConnBegin => {
            let mut conn = pool.get().await.map_err(checkout)?;
            let mut tx = conn.begin().await?;
            let n = query.fetch_one(&mut *tx).await?;
            tx.commit().await?;
            Ok(n)
        }
        Path::Prepared => {
            let mut conn = pool.get().await.map_err(checkout)?;
            let statement = (&mut *conn)
                .prepare(sqlx::SqlSafeStr::into_sql_str(SQL))
                .await?;
            let row = statement
                .query()
                .bind(a)
                .bind(b)
                .fetch_one(&mut *conn)
                .await?;
            row.try_get(0)
        }
    }
}

/// Runs `tasks` x `queries` parameterised queries, each through the path
/// `pick(task, i)`; returns the failures' count and the last failure's text.
async fn load(
    pool: &SqlxPool<PgConnection>,
    tasks: i32,
    queries: i32,
    pick: impl Fn(i32, i32) -> Path + Copy + Send + 'static,
) -> (usize, String) {
    let mut set = tokio::task::JoinSet::new();
    for task in 0..tasks {
        let pool = pool.clone();
        set.spawn(async move {
            let mut failed = (0, String::new());
            for i in 0..queries {
                let path = pick(task, i);
                match one(&pool, path, task, i).await {
                    Ok(n) => assert_eq!(n, task + i, "{path:?}"),
                    Err(e) => failed = (failed.0 + 1, format!("{path:?}: {e}")),
                }
            }
            failed
        });
    }
    let mut failed = (0, String::new());
    while let Some(done) = set.join_next().await {
        let (count, last) = done.expect("a query task panicked");
        if count > 0 {
            failed = (failed.0 + count, last);
        }
    }
    failed
}

fn manager(url: &str, mode: PoolerMode) -> SqlxManager<PgConnection> {
    SqlxManager::<PgConnection>::from_url(url)
        .expect("the URL parses")
        .pooler_mode(mode)
}

/// Transaction mode with unnamed statements: through the relay.
fn unnamed(url: &str) -> SqlxManager<PgConnection> {
    manager(url, PoolerMode::Transaction).pooler_statements(PoolerStatements::Unnamed)
}

async fn pool_of(manager: SqlxManager<PgConnection>, size: u32) -> SqlxPool<PgConnection> {
    let config = crate::support::db::pool_config(size, 0, Duration::from_secs(20));
    SqlxPool::new(manager, config)
        .await
        .expect("the server is reachable")
}

fn database_url() -> String {
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!("DATABASE_URL is not set: this test needs PostgreSQL (see scripts/test.sh)"),
    }
}

/// Waits (bounded) until every relay of this process has ended.
async fn relays_end() {
    for _ in 0..500 {
        if pool_postgres::open_relays() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "{} relays still running after their pool closed",
        pool_postgres::open_relays()
    );
}

#[ignore = "needs DATABASE_URL and pgbouncer: set it to a PostgreSQL server, install pgbouncer, and run with --include-ignored"]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transaction_pooler_mode_runs_every_path_behind_pgbouncer() {
    let _one = ONE_AT_A_TIME.lock().await;
    let upstream: PgConnectOptions = database_url().parse().expect("DATABASE_URL parses");
    let bouncer = start_bouncer(&upstream);
    bounded(async {
        let pool = pool_of(unnamed(&bouncer.url()), 8).await;
        assert!(pool_postgres::open_relays() >= 1);
        for path in PATHS {
            let (failed, last) = load(&pool, 16, 30, move |_, _| path).await;
            assert_eq!(
                failed, 0,
                "{path:?}: {failed} failed, the last with: {last}"
            );
        }

        // The mixed load: 32 tasks x 50 queries, one in five inside a
        // transaction (from the pool or from the connection), the others
        // through the pool or a checked-out connection.
        let (failed, last) = load(&pool, 32, 50, |task, i| match (task + i) % 10 {
            0 => Path::PoolBegin,
            5 => Path::ConnBegin,
            n if n % 2 == 0 => Path::Pool,
            _ => Path::Connection,
        })
        .await;
        assert_eq!(
            failed, 0,
            "mixed: {failed} of 1600 failed, the last with: {last}"
        );
        pool.close().await;
        relays_end().await;

        // What the mode prevents: named statements, numbered from 1 on each
        // client connection, meet on the shared server connections.
        let pool = pool_of(manager(&bouncer.url(), PoolerMode::Session), 8).await;
        assert_eq!(pool_postgres::open_relays(), 0);
        let (failed, last) = load(&pool, 16, 30, |_, _| Path::PoolBegin).await;
        assert!(
            failed > 0,
            "session mode behind a transaction pooler did not fail"
        );
        assert!(last.contains("prepared statement"), "{last}");
        pool.close().await;
    })
    .await;
}

/// How many named statements the connection's server session holds.
async fn named_statements(conn: &mut PgConnection) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pg_prepared_statements")
        .persistent(false)
        .fetch_one(conn)
        .await
        .expect("count the prepared statements")
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_pooler_mode_names_no_statement_on_the_server() {
    let _one = ONE_AT_A_TIME.lock().await;
    let url = database_url();
    bounded(async {
        for (mode, named) in [
            (Some(PoolerStatements::Unnamed), false),
            (Some(PoolerStatements::PassThrough), true),
            (None, true),
        ] {
            let manager = match mode {
                Some(statements) => {
                    manager(&url, PoolerMode::Transaction).pooler_statements(statements)
                }
                None => manager(&url, PoolerMode::Session),
            };
            let pool = pool_of(manager, 2).await;
            for path in PATHS {
                assert_eq!(one(&pool, path, 2, 3).await.expect("query"), 5, "{path:?}");
            }
            let mut conn = pool.get().await.expect("get");
            // A column of a type sqlx does not know: sqlx looks it up with
            // queries of its own between the statement's prepare and its
            // bind, which the relay must not let the bind see.
            sqlx::raw_sql("CREATE TYPE pg_temp.relay_mood AS ENUM ('calm', 'happy')")
                .execute(&mut *conn)
                .await
                .expect("create the type");
            for _ in 0..3 {
                let row = sqlx::query("SELECT 'happy'::pg_temp.relay_mood, $1::int4 * 2")
                    .bind(21)
                    .fetch_one(&mut *conn)
                    .await
                    .expect("a query with a type sqlx looks up");
                assert_eq!(row.try_get::<i32, _>(1).expect("int4"), 42);
            }
            let count = named_statements(&mut conn).await;
            assert_eq!(count > 0, named, "{mode:?}: {count} named statements");
            drop(conn);
            pool.close().await;
            relays_end().await;
        }
    })
    .await;
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_whose_connect_fails_ends_with_it() {
    let _one = ONE_AT_A_TIME.lock().await;
    let url = database_url();
    bounded(async {
        // A database that does not exist: the login fails through the
        // relay, the error is the server's, and the relay ends.
        let mut options: PgConnectOptions = url.parse().expect("DATABASE_URL parses");
        options = options.database("pool_core_no_such_database");
        let manager = SqlxManager::<PgConnection>::new(options)
            .pooler_mode(PoolerMode::Transaction)
            .pooler_statements(PoolerStatements::Unnamed);
        let config = PoolConfig::builder().max_size(1).build().unwrap();
        match SqlxPool::new(manager, config).await {
            Err(pool_core::PoolError::Backend(sqlx::Error::Database(e))) => {
                assert_eq!(e.code().as_deref(), Some("3D000"), "{e}")
            }
            Err(other) => panic!("expected the server's refusal, got {other}"),
            Ok(_) => panic!("a database that does not exist was opened"),
        }
        relays_end().await;

        // A pooler that is not there: the I/O error, before any relay.
        let manager = unnamed("postgres://app@127.0.0.1:1/app");
        let config = PoolConfig::builder().max_size(1).build().unwrap();
        assert!(matches!(
            SqlxPool::new(manager, config).await,
            Err(pool_core::PoolError::Backend(sqlx::Error::Io(_)))
        ));
        assert_eq!(pool_postgres::open_relays(), 0);
    })
    .await;
}

/// Rows of `relay_copy` written by `COPY FROM STDIN`, read back by `COPY TO
/// STDOUT`.
const COPY_ROWS: &[u8] = b"1\tone\n2\ttwo\n3\tthree\n";

#[ignore = "needs DATABASE_URL and pgbouncer: set it to a PostgreSQL server, install pgbouncer, and run with --include-ignored"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_in_and_out_leave_the_connection_usable_behind_pgbouncer() {
    use futures::TryStreamExt;
    let _one = ONE_AT_A_TIME.lock().await;
    let upstream: PgConnectOptions = database_url().parse().expect("DATABASE_URL parses");
    let bouncer = start_bouncer(&upstream);
    bounded(async {
        // One connection: every query after a copy runs on the one that
        // copied.
        let pool = pool_of(unnamed(&bouncer.url()), 1).await;
        for round in 0..3 {
            let mut conn = pool.get().await.expect("get");
            let mut tx = conn.begin().await.expect("begin");
            sqlx::raw_sql("CREATE TEMP TABLE relay_copy (n int4, s text) ON COMMIT DROP")
                .execute(&mut *tx)
                .await
                .expect("create");
            let mut copy = tx
                .copy_in_raw("COPY relay_copy FROM STDIN")
                .await
                .expect("copy in");
            copy.send(&COPY_ROWS[..7]).await.expect("send");
            copy.send(&COPY_ROWS[7..]).await.expect("send");
            assert_eq!(copy.finish().await.expect("finish"), 3);
            let n: i64 = sqlx::query_scalar("SELECT count(*) FROM relay_copy WHERE n > $1")
                .bind(0_i32)
                .fetch_one(&mut *tx)
                .await
                .expect("count");
            assert_eq!(n, 3);
            let out: Vec<_> = tx
                .copy_out_raw("COPY relay_copy TO STDOUT")
                .await
                .expect("copy out")
                .try_collect()
                .await
                .expect("copy data");
            let out: Vec<u8> = out.iter().flat_map(|b| b.iter().copied()).collect();
            assert_eq!(out, COPY_ROWS);
            tx.commit().await.expect("commit");
            drop(conn);
            for path in PATHS {
                assert_eq!(
                    one(&pool, path, round, 3)
                        .await
                        .expect("a query after a copy"),
                    round + 3,
                    "{path:?}"
                );
            }
        }
        pool.close().await;
        relays_end().await;
    })
    .await;
}

#[ignore = "needs DATABASE_URL and pgbouncer: set it to a PostgreSQL server, install pgbouncer, and run with --include-ignored"]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn passed_through_statements_take_the_direct_path() {
    let _one = ONE_AT_A_TIME.lock().await;
    let url = database_url();
    let upstream: PgConnectOptions = url.parse().expect("DATABASE_URL parses");
    let bouncer = Bouncer::start(
        Upstream {
            host: upstream.get_host(),
            port: upstream.get_port(),
            dbname: upstream.get_database().unwrap_or("postgres"),
            user: upstream.get_username(),
        },
        "default_pool_size = 10\nmax_client_conn = 100\npool_mode = session\n",
    );
    bounded(async {
        // Directly on the server, then behind PgBouncer in session mode:
        // sqlx's named statements reach the server as they are, through no
        // relay, on every path and in the mixed load.
        for target in [url.clone(), bouncer.url()] {
            let pool = pool_of(manager(&target, PoolerMode::Transaction), 8).await;
            assert_eq!(pool_postgres::open_relays(), 0);
            for path in PATHS {
                let (failed, last) = load(&pool, 8, 10, move |_, _| path).await;
                assert_eq!(
                    failed, 0,
                    "{target}: {path:?}: {failed} failed, the last with: {last}"
                );
            }
            let (failed, last) = load(&pool, 32, 20, |task, i| match (task + i) % 10 {
                0 => Path::PoolBegin,
                5 => Path::ConnBegin,
                3 => Path::Prepared,
                n if n % 2 == 0 => Path::Pool,
                _ => Path::Connection,
            })
            .await;
            assert_eq!(
                failed, 0,
                "{target}: mixed: {failed} of 640 failed, the last with: {last}"
            );
            let mut conn = pool.get().await.expect("get");
            assert!(
                named_statements(&mut conn).await > 0,
                "{target}: no named statement"
            );
            drop(conn);
            pool.close().await;
        }
    })
    .await;
}

/// What the relay costs, printed: queries per second of `SELECT $1 + $2`
/// from 16 tasks on a pool of 8, directly on the server with and without
/// the relay, and through PgBouncer with the relay and without (session
/// mode, `.persistent(false)`, each query in a transaction: what users had
/// to write before). A report, not a timed assertion: it checks only that
/// every query succeeds.
#[ignore = "a measurement: run alone with --ignored --nocapture, DATABASE_URL set"]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn relay_cost_report() {
    let _one = ONE_AT_A_TIME.lock().await;
    let url = database_url();
    let upstream: PgConnectOptions = url.parse().expect("DATABASE_URL parses");
    let bouncer = start_bouncer(&upstream);
    const TASKS: i32 = 16;
    const QUERIES: i32 = 500;
    async fn rate(pool: SqlxPool<PgConnection>, path: Path) -> f64 {
        // Warm every connection first.
        let (failed, last) = load(&pool, TASKS, 10, move |_, _| path).await;
        assert_eq!(failed, 0, "{last}");
        let started = Instant::now();
        let (failed, last) = load(&pool, TASKS, QUERIES, move |_, _| path).await;
        let elapsed = started.elapsed().as_secs_f64();
        assert_eq!(failed, 0, "{last}");
        pool.close().await;
        f64::from(TASKS * QUERIES) / elapsed
    }
    for round in 0..3 {
        let direct_session = rate(
            pool_of(manager(&url, PoolerMode::Session), 8).await,
            Path::Pool,
        )
        .await;
        let direct_relay = rate(pool_of(unnamed(&url), 8).await, Path::Pool).await;
        let bounced_relay = rate(pool_of(unnamed(&bouncer.url()), 8).await, Path::Pool).await;
        let bounced_relay_tx =
            rate(pool_of(unnamed(&bouncer.url()), 8).await, Path::PoolBegin).await;
        let bounced_unnamed_tx = rate(
            pool_of(manager(&bouncer.url(), PoolerMode::Session), 8).await,
            Path::PoolBeginUnnamed,
        )
        .await;
        println!(
            "round {round}: direct: session {direct_session:.0} q/s, relay {direct_relay:.0} q/s; \
             pgbouncer: relay &pool {bounced_relay:.0} q/s, relay pool.begin {bounced_relay_tx:.0} q/s, \
             no relay pool.begin + persistent(false) {bounced_unnamed_tx:.0} q/s"
        );
    }
}

/// Statements that set session state, which a transaction-mode pooler
/// would leave on a shared server connection.
const SESSION_STATE: [&str; 3] = [
    "SET search_path TO public",
    "LISTEN pool_core_test",
    "SELECT pg_advisory_lock(1)",
];

/// Statements that look alike but set no session state.
const TRANSACTION_SCOPED: [&str; 4] = [
    "SET LOCAL statement_timeout = 1000",
    "SELECT pg_advisory_xact_lock(1)",
    "UNLISTEN *",
    "SELECT 'SET'",
];

/// `result` is the relay's refusal of `sql`: a database error with
/// SQLSTATE 0A000 and a message that says why.
fn assert_refused<T>(result: Result<T, sqlx::Error>, sql: &str, path: &str) {
    match result {
        Ok(_) => panic!("{path}: `{sql}` was not refused"),
        Err(sqlx::Error::Database(e)) => {
            assert_eq!(e.code().as_deref(), Some("0A000"), "{path}: `{sql}`: {e}");
            assert!(
                e.message()
                    .contains("cannot work behind a transaction-mode pooler"),
                "{path}: `{sql}`: {e}"
            );
        }
        Err(e) => panic!("{path}: `{sql}`: not a database error: {e}"),
    }
}

#[ignore = "needs DATABASE_URL and pgbouncer: set it to a PostgreSQL server, install pgbouncer, and run with --include-ignored"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_state_is_refused_through_the_relay() {
    let _one = ONE_AT_A_TIME.lock().await;
    let upstream: PgConnectOptions = database_url().parse().expect("DATABASE_URL parses");
    let bouncer = start_bouncer(&upstream);
    bounded(async {
        let pool = pool_of(unnamed(&bouncer.url()), 1).await;
        for sql in SESSION_STATE {
            // The simple protocol, then the extended one (parsed, then run).
            assert_refused(sqlx::raw_sql(sql).execute(&pool).await, sql, "raw_sql");
            assert_refused(sqlx::query(sql).execute(&pool).await, sql, "query");
            let mut conn = pool.get().await.expect("get");
            assert_refused((&mut *conn).execute(sql).await, sql, "conn.execute");
            assert_refused(
                sqlx::query(sql)
                    .persistent(false)
                    .fetch_all(&mut *conn)
                    .await,
                sql,
                "unprepared",
            );
            let mut tx = conn.begin().await.expect("begin");
            assert_refused(
                sqlx::query(sql).execute(&mut *tx).await,
                sql,
                "in a transaction",
            );
            tx.rollback().await.expect("rollback");
            drop(conn);
            for path in PATHS {
                assert_eq!(
                    one(&pool, path, 1, 2)
                        .await
                        .expect("a query after a refusal"),
                    3,
                    "{path:?} after `{sql}`"
                );
            }
        }
        // Inside a transaction, only the refused statement fails: nothing
        // of it reached the server.
        let mut conn = pool.get().await.expect("get");
        let mut tx = conn.begin().await.expect("begin");
        for (i, sql) in SESSION_STATE.into_iter().enumerate() {
            let i = i32::try_from(i).expect("small");
            let n: i32 = sqlx::query_scalar(SQL)
                .bind(i)
                .bind(1)
                .fetch_one(&mut *tx)
                .await
                .expect("before");
            assert_eq!(n, i + 1);
            assert_refused(sqlx::query(sql).execute(&mut *tx).await, sql, "between two");
        }
        tx.commit().await.expect("commit");
        for sql in TRANSACTION_SCOPED {
            sqlx::raw_sql(sql).execute(&mut *conn).await.expect(sql);
            sqlx::query(sql).execute(&mut *conn).await.expect(sql);
        }
        drop(conn);
        pool.close().await;
        relays_end().await;
    })
    .await;
}
