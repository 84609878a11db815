//! `PoolerMode::Transaction` with `PoolerStatements::Unnamed` behind a real
//! PgBouncer in transaction mode (1.18 in CI, which keeps no named
//! statement): the test starts `pgbouncer` on a free loopback port in front
//! of `DATABASE_URL`'s server, with 2 server connections shared by a pool of
//! 8 and 32 tasks. With unnamed statements, parameterised queries all
//! succeed through every path (text through the pooled client, statements
//! from `prepare` and `prepare_cached`, tokio-postgres's own `Client`,
//! transactions from `transaction()` and `build_transaction()`), and a mixed
//! load of 1,600 queries, one in five in a transaction, has no error; with
//! it off, the same load fails on named prepared statements, which is what
//! the mode prevents.
//!
//! `PGBOUNCER` overrides the binary (default `/usr/sbin/pgbouncer`).
#![cfg(feature = "tokio-postgres")]

use crate::support::cluster;
use crate::support::pgbouncer::{Bouncer, Upstream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pool_core::{ManageConnection, Pool, PoolConfig, PoolError};
use pool_postgres::fleet::FleetBudgetConfigError;
use pool_postgres::pooler::{PoolerMode, PoolerStatements};
use pool_postgres::{PgConfigError, PgError, PostgresManager, ResetMode};
use tokio_postgres::NoTls;

/// The tests that open relayed connections, one at a time: they count the
/// relays left running.
static RELAYS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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

const TASKS: i32 = 32;
const QUERIES: i32 = 20;
const POOL: u32 = 8;
const BOUNCER_POOL: u32 = 2;

/// PgBouncer in front of `upstream` with `BOUNCER_POOL` server
/// connections, no reserve and no reset query.
fn start_bouncer(upstream: &tokio_postgres::Config) -> Bouncer {
    let host = match upstream.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => panic!("DATABASE_URL must name a TCP host for the PgBouncer test"),
    };
    let user = upstream.get_user().unwrap_or("postgres");
    let upstream = Upstream {
        host: &host,
        port: upstream.get_ports().first().copied().unwrap_or(5432),
        dbname: upstream.get_dbname().unwrap_or(user),
        user,
    };
    Bouncer::start(
        upstream,
        &format!(
            "default_pool_size = {BOUNCER_POOL}\n\
             min_pool_size = 0\n\
             reserve_pool_size = 0\n\
             max_client_conn = 200\n\
             server_reset_query =\n"
        ),
    )
}

/// The bounced database, as `postgres`, with `tag` as the application name.
fn bounced_config(bouncer: &Bouncer, tag: &str) -> tokio_postgres::Config {
    let mut c = cluster::tcp_config_at(bouncer.port(), "postgres", "bounced");
    c.application_name(tag);
    c
}

fn pool_config() -> PoolConfig {
    crate::support::db::pool_config(POOL, 0, Duration::from_secs(20))
}

/// The server's message for a database error, else the driver's text.
fn text(e: impl Into<PgError>) -> String {
    let e = e.into();
    e.as_db_error()
        .map_or_else(|| e.to_string(), |db| db.message().to_owned())
}

/// 32 tasks, each running 20 parameterised queries of four kinds; returns
/// the errors' texts.
async fn load(pool: &Pool<PostgresManager<NoTls>>) -> Vec<String> {
    let errors = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let pool = pool.clone();
        let errors = errors.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..QUERIES {
                let result: Result<(), String> = async {
                    let mut conn = pool.get().await.map_err(|e| e.to_string())?;
                    match i % 4 {
                        0 => {
                            let v: i32 = conn
                                .query_one("SELECT $1::int4 + $2::int4", &[&t, &i])
                                .await
                                .map_err(text)?
                                .get(0);
                            assert_eq!(v, t + i);
                        }
                        1 => {
                            let s = format!("task {t}");
                            let rows = conn
                                .query(
                                    "SELECT $1::text || '!', generate_series(1, $2::int4)",
                                    &[&s, &3_i32],
                                )
                                .await
                                .map_err(text)?;
                            assert_eq!(rows.len(), 3);
                            assert_eq!(rows[0].get::<_, String>(0), format!("task {t}!"));
                        }
                        2 => {
                            let n = conn
                                .execute("SELECT generate_series(1, $1::int4)", &[&(i + 1)])
                                .await
                                .map_err(text)?;
                            assert_eq!(n, u64::try_from(i + 1).expect("positive"));
                        }
                        _ => {
                            // A transaction: its statements stay on one
                            // server connection until COMMIT.
                            let tx = conn.transaction().await.map_err(text)?;
                            let v: i64 = tx
                                .query_one("SELECT $1::int8 * 2", &[&i64::from(t)])
                                .await
                                .map_err(text)?
                                .get(0);
                            assert_eq!(v, i64::from(t) * 2);
                            tx.commit().await.map_err(text)?;
                        }
                    }
                    Ok(())
                }
                .await;
                if let Err(e) = result {
                    errors.lock().expect("errors").push(e);
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("task panicked");
    }
    let errors = errors.lock().expect("errors").clone();
    errors
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL and pgbouncer: set it to a PostgreSQL server, install pgbouncer, and run with --include-ignored"]
async fn transaction_pooler_mode_works_behind_pgbouncer() {
    let _one = RELAYS.lock().await;
    let upstream: tokio_postgres::Config = crate::support::db::url("DATABASE_URL")
        .parse()
        .expect("DATABASE_URL");
    let bouncer = start_bouncer(&upstream);
    let manager = PostgresManager::new(bounced_config(&bouncer, "pc_bouncer_on"), NoTls)
        .pooler_mode(PoolerMode::Transaction)
        .pooler_statements(PoolerStatements::Unnamed);
    let pool = Pool::new(manager, pool_config()).await.expect("pool");

    let errors = load(&pool).await;
    assert!(
        errors.is_empty(),
        "{} errors, first: {:?}",
        errors.len(),
        errors.first()
    );

    // Each connection described each of the three text queries once.
    let conn = pool.get().await.expect("get");
    let stats = conn.statement_cache_stats();
    assert!(stats.len <= 3 && stats.hits > 0, "{stats:?}");
    // Relayed, a cached statement is safe: the server only ever sees it
    // unnamed.
    assert!(conn.is_relayed());
    let before = conn.statement_cache_len();
    let first = conn
        .prepare_cached("SELECT 1")
        .await
        .expect("prepare_cached");
    let again = conn
        .prepare_cached("SELECT 1")
        .await
        .expect("prepare_cached");
    assert_eq!(conn.statement_cache_len(), before + 1, "cached once");
    drop((first, again));
    drop(conn);
    pool.close().await;
    relays_end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL and pgbouncer: set it to a PostgreSQL server, install pgbouncer, and run with --include-ignored"]
async fn session_mode_behind_pgbouncer_breaks_on_named_statements() {
    let upstream: tokio_postgres::Config = crate::support::db::url("DATABASE_URL")
        .parse()
        .expect("DATABASE_URL");
    let bouncer = start_bouncer(&upstream);
    let manager = PostgresManager::new(bounced_config(&bouncer, "pc_bouncer_off"), NoTls);
    let pool = Pool::new(manager, pool_config()).await.expect("pool");

    let errors = load(&pool).await;
    let named = errors
        .iter()
        .filter(|e| e.contains("prepared statement"))
        .count();
    assert!(
        named > 0,
        "expected \"prepared statement ... does not exist\" errors without the pooler mode; \
         got {} errors: {:?}",
        errors.len(),
        errors.iter().take(3).collect::<Vec<_>>()
    );
    pool.close().await;
}

/// Statements that set session state, which a transaction-mode pooler
/// would leave on a shared server connection, with what the refusal names.
const SESSION_STATE: [(&str, &str); 3] = [
    ("SET search_path TO public", "SET"),
    ("LISTEN pool_core_test", "LISTEN"),
    ("SELECT pg_advisory_lock(1)", "pg_advisory_lock"),
];

/// Statements that look alike but set no session state.
const TRANSACTION_SCOPED: [&str; 4] = [
    "SET LOCAL statement_timeout = 1000",
    "SELECT pg_advisory_xact_lock(1)",
    "UNLISTEN *",
    "SELECT 'SET'",
];

/// `result` is the refusal of `sql`, naming `names`.
fn assert_refused<T>(result: Result<T, PgError>, sql: &str, names: &str, path: &str) {
    match result {
        Ok(_) => panic!("{path}: `{sql}` was not refused"),
        Err(e) => {
            assert!(
                matches!(e, PgError::SessionStateBehindPooler(_)),
                "{path}: `{sql}`: {e:?}"
            );
            let text = e.to_string();
            assert!(
                text.contains("cannot work behind a transaction-mode pooler")
                    && text.contains(names),
                "{path}: `{sql}`: {text}"
            );
        }
    }
}

/// Every text-taking method of the pooled client and of its transactions
/// refuses session state, sends nothing, and the connection goes on.
async fn session_state_is_refused_on(conn: &mut pool_postgres::PgClient) {
    for (sql, names) in SESSION_STATE {
        assert_refused(conn.batch_execute(sql).await, sql, names, "batch_execute");
        assert_refused(conn.simple_query(sql).await, sql, names, "simple_query");
        assert_refused(conn.query(sql, &[]).await, sql, names, "query");
        assert_refused(conn.query_one(sql, &[]).await, sql, names, "query_one");
        assert_refused(conn.query_opt(sql, &[]).await, sql, names, "query_opt");
        assert_refused(conn.execute(sql, &[]).await, sql, names, "execute");
        assert_refused(conn.prepare(sql).await, sql, names, "prepare");
        assert_refused(conn.prepare_cached(sql).await, sql, names, "prepare_cached");
        let timed = conn
            .with_timeout(Duration::from_secs(30), conn.batch_execute(sql))
            .await;
        assert!(
            matches!(
                timed,
                Err(pool_postgres::QueryError::Refused(
                    PgError::SessionStateBehindPooler(_)
                ))
            ),
            "with_timeout: `{sql}`: {timed:?}"
        );
        let tx = conn.transaction().await.expect("begin");
        assert_refused(tx.batch_execute(sql).await, sql, names, "tx.batch_execute");
        assert_refused(tx.simple_query(sql).await, sql, names, "tx.simple_query");
        assert_refused(tx.query(sql, &[]).await, sql, names, "tx.query");
        assert_refused(tx.query_one(sql, &[]).await, sql, names, "tx.query_one");
        assert_refused(tx.query_opt(sql, &[]).await, sql, names, "tx.query_opt");
        assert_refused(tx.execute(sql, &[]).await, sql, names, "tx.execute");
        assert_refused(tx.prepare(sql).await, sql, names, "tx.prepare");
        // Nothing was sent: the transaction is still good.
        let one: i32 = tx
            .query_one("SELECT 1", &[])
            .await
            .expect("in the transaction")
            .get(0);
        assert_eq!(one, 1);
        tx.commit().await.expect("commit");
        let one: i32 = conn.query_one("SELECT 1", &[]).await.expect("after").get(0);
        assert_eq!(one, 1, "after `{sql}`");
    }
    for sql in TRANSACTION_SCOPED {
        conn.batch_execute(sql).await.expect(sql);
        conn.simple_query(sql).await.expect(sql);
        conn.query(sql, &[]).await.expect(sql);
        conn.execute(sql, &[]).await.expect(sql);
        conn.prepare(sql).await.expect(sql);
        let tx = conn.transaction().await.expect("begin");
        tx.batch_execute(sql).await.expect(sql);
        tx.query(sql, &[]).await.expect(sql);
        tx.commit().await.expect("commit");
    }
    assert!(!conn.transaction_open());
}

#[tokio::test]
#[ignore = "needs DATABASE_URL and pgbouncer: set it to a PostgreSQL server, install pgbouncer, and run with --include-ignored"]
async fn session_state_through_the_pooled_client_is_refused() {
    let _one = RELAYS.lock().await;
    // One server connection: the passed-through statements of this one
    // client always find the server that holds them.
    let bouncer = start_bouncer_with(&database_config(), 1, "");
    for statements in [PoolerStatements::PassThrough, PoolerStatements::Unnamed] {
        let manager = PostgresManager::new(bounced_config(&bouncer, "pc_bouncer_refuse"), NoTls)
            .pooler_mode(PoolerMode::Transaction)
            .pooler_statements(statements);
        let mut conn = manager.connect().await.expect("connect through PgBouncer");
        session_state_is_refused_on(&mut conn).await;
    }
    relays_end().await;
}

/// With unnamed statements the relay refuses session state too, for what
/// the pooled client does not see (the driver's own `Client`): the driver
/// gets an error with SQLSTATE 0A000, and the connection stays in step.
#[tokio::test]
#[ignore = "needs DATABASE_URL and pgbouncer: set it to a PostgreSQL server, install pgbouncer, and run with --include-ignored"]
async fn the_relay_refuses_session_state_sent_past_the_pooled_client() {
    let _one = RELAYS.lock().await;
    let bouncer = start_bouncer(&database_config());
    let conn = unnamed(bounced_config(&bouncer, "pc_relay_refuse"))
        .connect()
        .await
        .expect("connect");
    let client = conn.client();
    let refused = |e: tokio_postgres::Error, sql: &str| {
        assert_eq!(
            e.code(),
            Some(&tokio_postgres::error::SqlState::FEATURE_NOT_SUPPORTED),
            "`{sql}`: {e}"
        );
        assert!(
            text(e).contains("cannot work behind a transaction-mode pooler"),
            "`{sql}`"
        );
    };
    for (sql, _) in SESSION_STATE {
        refused(client.batch_execute(sql).await.expect_err(sql), sql);
        refused(client.simple_query(sql).await.expect_err(sql), sql);
        refused(client.prepare(sql).await.expect_err(sql), sql);
        refused(client.query(sql, &[]).await.expect_err(sql), sql);
        let one: i32 = client
            .query_one("SELECT 1", &[])
            .await
            .expect("after")
            .get(0);
        assert_eq!(one, 1);
    }
    // Pipelined: a refused statement between two that run, each with its
    // own answer.
    for round in 0..5_i32 {
        type Params<'a> = [&'a (dyn tokio_postgres::types::ToSql + Sync); 1];
        let (before, lock, after): (Params<'_>, Params<'_>, Params<'_>) =
            ([&round], [&1_i64], [&round]);
        let (a, b, c, d) = futures::join!(
            client.query_one("SELECT $1::int4", &before),
            client.simple_query("LISTEN pool_core_test"),
            client.query("SELECT pg_advisory_lock($1)", &lock),
            client.query_one("SELECT $1::int4 + 1", &after),
        );
        assert_eq!(a.expect("before").get::<_, i32>(0), round);
        refused(b.expect_err("LISTEN"), "LISTEN");
        refused(c.expect_err("lock"), "lock");
        assert_eq!(d.expect("after").get::<_, i32>(0), round + 1);
    }
    for sql in TRANSACTION_SCOPED {
        client.batch_execute(sql).await.expect(sql);
        client.query(sql, &[]).await.expect(sql);
    }
    assert!(!conn.is_closed());
    drop(conn);
    relays_end().await;
}

#[tokio::test]
async fn session_resets_and_fleet_budgets_are_refused_behind_a_pooler() {
    let pg = tokio_postgres::Config::new();
    // Every setter chains; the clash is reported by `validate`, in
    // whichever order the settings were given.
    for clean in [
        PostgresManager::new(pg.clone(), NoTls)
            .reset_mode(ResetMode::Clean)
            .pooler_mode(PoolerMode::Transaction),
        PostgresManager::new(pg.clone(), NoTls)
            .pooler_mode(PoolerMode::Transaction)
            .reset_mode(ResetMode::Clean),
    ] {
        assert_eq!(
            clean.validate(),
            Err(PgConfigError::SessionResetBehindPooler {
                reset_mode: ResetMode::Clean
            })
        );
    }
    for budget in [
        PostgresManager::new(pg.clone(), NoTls)
            .fleet_budget("api", 10)
            .pooler_mode(PoolerMode::Transaction),
        PostgresManager::new(pg.clone(), NoTls)
            .pooler_mode(PoolerMode::Transaction)
            .fleet_budget("api", 10),
    ] {
        assert_eq!(
            budget.validate(),
            Err(PgConfigError::FleetBudgetBehindPooler)
        );
        let text = budget.validate().expect_err("refused").to_string();
        assert!(
            text.contains("fleet_budget") && text.contains("pooler_mode(PoolerMode::Transaction)"),
            "{text}"
        );
    }
    // Unnamed statements are for transaction mode only, in whichever
    // order the two are set.
    for unnamed in [
        PostgresManager::new(pg.clone(), NoTls).pooler_statements(PoolerStatements::Unnamed),
        PostgresManager::new(pg.clone(), NoTls)
            .pooler_statements(PoolerStatements::Unnamed)
            .pooler_mode(PoolerMode::Transaction)
            .pooler_mode(PoolerMode::Session),
    ] {
        assert_eq!(
            unnamed.validate(),
            Err(PgConfigError::UnnamedOutsideTransactionMode)
        );
        let text = unnamed.validate().expect_err("refused").to_string();
        assert!(
            text.contains("pooler_statements") && text.contains("pooler_mode"),
            "{text}"
        );
    }
    assert_eq!(
        PostgresManager::new(pg.clone(), NoTls)
            .pooler_statements(PoolerStatements::Unnamed)
            .pooler_mode(PoolerMode::Transaction)
            .validate(),
        Ok(())
    );
    let bad = PostgresManager::new(pg.clone(), NoTls).fleet_budget("", 10);
    assert_eq!(
        bad.validate(),
        Err(PgConfigError::FleetBudget(
            FleetBudgetConfigError::EmptyName
        ))
    );
    assert!(bad.current_fleet_budget().is_none());
    assert_eq!(
        PostgresManager::new(pg.clone(), NoTls)
            .fleet_budget("api", 0)
            .validate(),
        Err(PgConfigError::FleetBudget(
            FleetBudgetConfigError::ZeroTotal
        ))
    );

    // `Pool::new` refuses it before any network traffic (the config points
    // nowhere), and so does a lazy pool's first checkout.
    let late = PostgresManager::new(pg.clone(), NoTls)
        .pooler_mode(PoolerMode::Transaction)
        .reset_mode(ResetMode::Clean);
    let err = Pool::new(late, pool_config()).await.expect_err("refused");
    assert!(
        matches!(
            err,
            PoolError::Backend(PgError::Config(
                PgConfigError::SessionResetBehindPooler { .. }
            ))
        ),
        "{err:?}"
    );
    let cause = std::error::Error::source(&err).map(ToString::to_string);
    assert!(
        cause
            .as_deref()
            .is_some_and(|c| c.contains("reset_mode(ResetMode::Clean)")
                && c.contains("pooler_mode(PoolerMode::Transaction)")),
        "{cause:?}"
    );
    let lazy = Pool::new_lazy(
        PostgresManager::new(pg, NoTls)
            .fleet_budget("api", 1)
            .pooler_mode(PoolerMode::Transaction),
        crate::support::db::pool_config(1, 0, Duration::from_secs(5)),
    );
    let err = lazy.get().await.expect_err("refused");
    let text = format!("{err}");
    assert!(text.contains("fleet_budget"), "{text}");
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn transaction_pooler_mode_leaves_no_named_statement_on_the_server() {
    let _one = RELAYS.lock().await;
    // Directly on the server, so pg_prepared_statements shows this session.
    let pg: tokio_postgres::Config = crate::support::db::url("DATABASE_URL")
        .parse()
        .expect("DATABASE_URL");
    let manager = PostgresManager::new(pg, NoTls)
        .pooler_mode(PoolerMode::Transaction)
        .pooler_statements(PoolerStatements::Unnamed);
    let mut conn = manager.connect().await.expect("connect");
    let prepared = |rows: Vec<tokio_postgres::Row>| rows[0].get::<_, i64>(0);
    const COUNT: &str = "SELECT count(*) FROM pg_prepared_statements";

    for i in 0..3_i32 {
        let v: i32 = conn
            .query_one("SELECT $1::int4 * 3", &[&i])
            .await
            .expect("query")
            .get(0);
        assert_eq!(v, i * 3);
        conn.execute("SELECT $1::text", &[&"x"])
            .await
            .expect("execute");
    }
    assert_eq!(prepared(conn.query(COUNT, &[]).await.expect("count")), 0);

    // A transaction begun as text: the describe runs inside it.
    conn.batch_execute("BEGIN").await.expect("BEGIN");
    assert!(conn.transaction_open(), "a BEGIN sent as text is followed");
    let v: i64 = conn
        .query_one("SELECT $1::int8 + 1", &[&41_i64])
        .await
        .expect("query in a raw transaction")
        .get(0);
    assert_eq!(v, 42);
    conn.batch_execute("COMMIT").await.expect("COMMIT");
    assert!(!conn.transaction_open());
    assert_eq!(prepared(conn.query(COUNT, &[]).await.expect("count")), 0);

    // A tracked transaction: tokio-postgres's statements, closed inside it.
    let tx = conn.transaction().await.expect("begin");
    tx.query("SELECT $1::int4", &[&1_i32])
        .await
        .expect("query in tx");
    tx.commit().await.expect("commit");
    assert_eq!(prepared(conn.query(COUNT, &[]).await.expect("count")), 0);

    // The describe's failure is the query's error, and leaves no transaction.
    let err = conn
        .query("SELECT $1::int4 FROM no_such_table", &[&1_i32])
        .await
        .expect_err("no such table");
    assert!(
        err.as_db_error()
            .is_some_and(|db| db.message().contains("no_such_table")),
        "{err}"
    );
    assert!(!conn.transaction_open());
    let stats = conn.statement_cache_stats();
    assert_eq!((stats.len, stats.capacity), (3, 256), "{stats:?}");

    // Statements the driver names: prepared through the client (outside a
    // transaction), cached, prepared inside a transaction, and
    // tokio-postgres's own text queries. The relay sends each unnamed.
    assert!(conn.is_relayed());
    let statement = conn.prepare("SELECT $1::int4 + 1").await.expect("prepare");
    for i in 0..3_i32 {
        let v: i32 = conn.query_one(&statement, &[&i]).await.expect("run").get(0);
        assert_eq!(v, i + 1);
    }
    let cached = conn
        .prepare_cached("SELECT $1::int4 + 2")
        .await
        .expect("cache");
    let v: i32 = conn
        .query_one(&cached, &[&1_i32])
        .await
        .expect("run")
        .get(0);
    assert_eq!(v, 3);
    let v: i32 = conn
        .client()
        .query_one("SELECT $1::int4 + 3", &[&1_i32])
        .await
        .expect("the driver's own query")
        .get(0);
    assert_eq!(v, 4);
    {
        let tx = conn.transaction().await.expect("begin");
        let inner = tx
            .prepare("SELECT $1::int4 + 4")
            .await
            .expect("prepare in tx");
        let v: i32 = tx.query_one(&inner, &[&1_i32]).await.expect("run").get(0);
        assert_eq!(v, 5);
        assert_eq!(prepared(tx.query(COUNT, &[]).await.expect("count")), 0);
        tx.commit().await.expect("commit");
    }
    assert_eq!(prepared(conn.query(COUNT, &[]).await.expect("count")), 0);

    // A type the driver does not know: it looks it up with statements of
    // its own between the query's prepare and its bind.
    conn.batch_execute("CREATE TYPE pg_temp.relay_mood AS ENUM ('calm', 'happy')")
        .await
        .expect("create the type");
    for _ in 0..3 {
        let rows = conn
            .client()
            .query(
                "SELECT $1::text::pg_temp.relay_mood, $2::int4 * 2",
                &[&"happy", &21_i32],
            )
            .await
            .expect("a query with a type the driver looks up");
        assert_eq!(rows[0].get::<_, i32>(1), 42);
    }
    assert_eq!(prepared(conn.query(COUNT, &[]).await.expect("count")), 0);
    drop((statement, cached));
    drop(conn);
    relays_end().await;
}

/// How a query runs through the pooled client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// `conn.query_one(text, ..)`: the pooled client's unnamed statement.
    Text,
    /// `conn.prepare(text)` (the driver's `Client::prepare`), then
    /// `conn.query_one(&statement, ..)`, outside any transaction.
    Prepared,
    /// `conn.prepare_cached(text)`, then `conn.query_one(&statement, ..)`.
    Cached,
    /// `conn.client().query_one(text, ..)`: the driver's own query, which
    /// prepares a named statement.
    Client,
    /// `conn.transaction()`, `tx.query_one(text, ..)`, `commit()`.
    Transaction,
    /// `conn.build_transaction()` (read only, repeatable read),
    /// `tx.prepare(text)`, `tx.query_one(&statement, ..)`, `commit()`.
    BuildTransaction,
}

const PATHS: [Path; 6] = [
    Path::Text,
    Path::Prepared,
    Path::Cached,
    Path::Client,
    Path::Transaction,
    Path::BuildTransaction,
];

/// One parameterised query through `path`; its answer.
async fn one(
    pool: &Pool<PostgresManager<NoTls>>,
    path: Path,
    a: i32,
    b: i32,
) -> Result<i32, String> {
    const SQL: &str = "SELECT $1::int4 + $2::int4";
    let mut conn = pool.get().await.map_err(|e| e.to_string())?;
    let row = match path {
        Path::Text => conn.query_one(SQL, &[&a, &b]).await,
        Path::Prepared => match conn.prepare(SQL).await {
            Ok(statement) => conn.query_one(&statement, &[&a, &b]).await,
            Err(e) => Err(e),
        },
        Path::Cached => {
            let statement = conn.prepare_cached(SQL).await.map_err(|e| e.to_string())?;
            conn.query_one(&statement, &[&a, &b]).await
        }
        Path::Client => conn
            .client()
            .query_one(SQL, &[&a, &b])
            .await
            .map_err(PgError::from),
        Path::Transaction => {
            let tx = conn.transaction().await.map_err(text)?;
            let row = tx.query_one(SQL, &[&a, &b]).await.map_err(text)?;
            tx.commit().await.map(|()| row).map_err(PgError::from)
        }
        Path::BuildTransaction => {
            let tx = conn
                .build_transaction()
                .read_only(true)
                .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
                .start()
                .await
                .map_err(text)?;
            let statement = tx.prepare(SQL).await.map_err(text)?;
            let row = tx.query_one(&statement, &[&a, &b]).await.map_err(text)?;
            tx.commit().await.map(|()| row).map_err(PgError::from)
        }
    };
    row.map(|row| row.get(0)).map_err(text)
}

/// `tasks` x `queries` queries, each through `pick(task, i)`; the errors.
async fn load_paths(
    pool: &Pool<PostgresManager<NoTls>>,
    tasks: i32,
    queries: i32,
    pick: impl Fn(i32, i32) -> Path + Copy + Send + 'static,
) -> Vec<String> {
    let mut set = tokio::task::JoinSet::new();
    for task in 0..tasks {
        let pool = pool.clone();
        set.spawn(async move {
            let mut errors = Vec::new();
            for i in 0..queries {
                let path = pick(task, i);
                match one(&pool, path, task, i).await {
                    Ok(n) => assert_eq!(n, task + i, "{path:?}"),
                    Err(e) => errors.push(format!("{path:?}: {e}")),
                }
            }
            errors
        });
    }
    let mut errors = Vec::new();
    while let Some(done) = set.join_next().await {
        errors.extend(done.expect("a query task panicked"));
    }
    errors
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs DATABASE_URL and pgbouncer: set it to a PostgreSQL server, install pgbouncer, and run with --include-ignored"]
async fn transaction_pooler_mode_runs_every_path_behind_pgbouncer() {
    let _one = RELAYS.lock().await;
    let upstream: tokio_postgres::Config = crate::support::db::url("DATABASE_URL")
        .parse()
        .expect("DATABASE_URL");
    let bouncer = start_bouncer(&upstream);
    let manager = PostgresManager::new(bounced_config(&bouncer, "pc_bouncer_paths"), NoTls)
        .pooler_mode(PoolerMode::Transaction)
        .pooler_statements(PoolerStatements::Unnamed);
    let pool = Pool::new(manager, pool_config()).await.expect("pool");
    for path in PATHS {
        let errors = load_paths(&pool, 16, 30, move |_, _| path).await;
        assert!(
            errors.is_empty(),
            "{path:?}: {} of 480 failed, first: {:?}",
            errors.len(),
            errors.first()
        );
    }
    // The mixed load: 32 tasks x 50 queries, one in five inside a
    // transaction, the others spread over the paths that name statements
    // and the pooled client's text.
    let errors = load_paths(&pool, 32, 50, |task, i| match (task + i) % 10 {
        0 => Path::Transaction,
        5 => Path::BuildTransaction,
        1 | 6 => Path::Prepared,
        2 | 7 => Path::Cached,
        3 => Path::Client,
        _ => Path::Text,
    })
    .await;
    assert!(
        errors.is_empty(),
        "mixed: {} of 1600 failed, first: {:?}",
        errors.len(),
        errors.first()
    );
    pool.close().await;
    relays_end().await;

    // Without the mode, the driver's named statements meet on the shared
    // server connections.
    let manager = PostgresManager::new(bounced_config(&bouncer, "pc_bouncer_paths_off"), NoTls);
    let pool = Pool::new(manager, pool_config()).await.expect("pool");
    let errors = load_paths(&pool, 16, 30, |_, _| Path::Prepared).await;
    assert!(
        errors.iter().any(|e| e.contains("prepared statement")),
        "session mode behind a transaction pooler did not fail: {:?}",
        errors.first()
    );
    pool.close().await;
}

/// The name the driver gave `statement` (its `Debug` shows it).
fn statement_name(statement: &tokio_postgres::Statement) -> String {
    let debug = format!("{statement:?}");
    let start = debug.find("name: \"").expect("a name in the Debug output") + 7;
    let len = debug[start..].find('"').expect("the name's end");
    debug[start..start + len].to_owned()
}

/// PgBouncer in front of `upstream` with `servers` server connections
/// and `more` settings lines.
fn start_bouncer_with(upstream: &tokio_postgres::Config, servers: u32, more: &str) -> Bouncer {
    let host = match upstream.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => panic!("DATABASE_URL must name a TCP host for the PgBouncer test"),
    };
    let user = upstream.get_user().unwrap_or("postgres");
    let upstream = Upstream {
        host: &host,
        port: upstream.get_ports().first().copied().unwrap_or(5432),
        dbname: upstream.get_dbname().unwrap_or(user),
        user,
    };
    Bouncer::start(
        upstream,
        &format!(
            "default_pool_size = {servers}\n\
             min_pool_size = 0\n\
             reserve_pool_size = 0\n\
             max_client_conn = 200\n\
             server_reset_query =\n\
             {more}"
        ),
    )
}

fn database_config() -> tokio_postgres::Config {
    crate::support::db::url("DATABASE_URL")
        .parse()
        .expect("DATABASE_URL")
}

/// A manager for `config` with unnamed statements behind a transaction
/// pooler.
fn unnamed(config: tokio_postgres::Config) -> PostgresManager<NoTls> {
    PostgresManager::new(config, NoTls)
        .pooler_mode(PoolerMode::Transaction)
        .pooler_statements(PoolerStatements::Unnamed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL and pgbouncer: set it to a PostgreSQL server, install pgbouncer, and run with --include-ignored"]
async fn a_held_statement_never_runs_another_clients_statement_of_its_name() {
    let _one = RELAYS.lock().await;
    // One server connection, which every client of the pooler shares.
    let bouncer = start_bouncer_with(&database_config(), 1, "");
    let manager = unnamed(bounced_config(&bouncer, "pc_relay_names")).statement_cache_capacity(0);
    let conn = manager.connect().await.expect("connect through PgBouncer");
    let ours = conn.prepare("SELECT 'ours 0'").await.expect("prepare");
    // Many more statements held than any statement cache keeps.
    let mut held = Vec::new();
    for i in 1..=300 {
        held.push(
            conn.prepare(&format!("SELECT 'ours {i}'"))
                .await
                .expect("prepare"),
        );
    }
    // Another client of the pooler leaves a statement of the same name on
    // the shared server connection.
    let (other, connection) = bounced_config(&bouncer, "pc_relay_other")
        .connect(NoTls)
        .await
        .expect("another client");
    let driver = tokio::spawn(connection);
    other
        .batch_execute(&format!(
            "PREPARE {} AS SELECT 'theirs'",
            statement_name(&ours)
        ))
        .await
        .expect("PREPARE");
    let got: String = conn.query_one(&ours, &[]).await.expect("run").get(0);
    assert_eq!(got, "ours 0", "our statement ran another client's");
    let last: String = conn.query_one(&held[299], &[]).await.expect("run").get(0);
    assert_eq!(last, "ours 300");
    drop((ours, held, conn, other));
    let _ = driver.await;
    relays_end().await;
}

/// Rows of `relay_copy` written by `copy_in`, read back by `copy_out`.
const COPY_ROWS: &[u8] = b"1\tone\n2\ttwo\n3\tthree\n";

/// In one transaction of `conn`: a temporary table, `copy_in` into it,
/// `copy_out` of it, then prepared statements and text queries.
async fn copy_round(conn: &mut pool_postgres::PgClient) {
    use futures::{SinkExt, TryStreamExt};
    let tx = conn.transaction().await.expect("begin");
    tx.batch_execute("CREATE TEMP TABLE relay_copy (n int4, s text) ON COMMIT DROP")
        .await
        .expect("create");
    let sink = tx
        .copy_in::<_, &'static [u8]>("COPY relay_copy FROM STDIN")
        .await
        .expect("copy_in");
    let mut sink = std::pin::pin!(sink);
    sink.send(&COPY_ROWS[..7]).await.expect("send");
    sink.send(&COPY_ROWS[7..]).await.expect("send");
    let copied = sink.finish().await.expect("finish");
    assert_eq!(copied, 3);
    let n: i64 = tx
        .query_one("SELECT count(*) FROM relay_copy WHERE n > $1", &[&0_i32])
        .await
        .expect("count")
        .get(0);
    assert_eq!(n, 3);
    let out: Vec<_> = tx
        .copy_out("COPY relay_copy TO STDOUT")
        .await
        .expect("copy_out")
        .try_collect()
        .await
        .expect("copy data");
    let out: Vec<u8> = out.iter().flat_map(|b| b.iter().copied()).collect();
    assert_eq!(out, COPY_ROWS);
    tx.commit().await.expect("commit");
}

/// Statements and text queries on `conn`, all of which must succeed.
async fn statements_work(conn: &pool_postgres::PgClient, round: i32) {
    let statement = conn.prepare("SELECT $1::int4 + 1").await.expect("prepare");
    let v: i32 = conn
        .query_one(&statement, &[&round])
        .await
        .expect("run a prepared statement")
        .get(0);
    assert_eq!(v, round + 1);
    let v: i32 = conn
        .query_one("SELECT $1::int4 * 2", &[&round])
        .await
        .expect("a text query")
        .get(0);
    assert_eq!(v, round * 2);
    let cached = conn
        .prepare_cached("SELECT $1::int4 - 1")
        .await
        .expect("prepare_cached");
    let v: i32 = conn
        .query_one(&cached, &[&round])
        .await
        .expect("run a cached statement")
        .get(0);
    assert_eq!(v, round - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL and pgbouncer: set it to a PostgreSQL server, install pgbouncer, and run with --include-ignored"]
async fn copy_in_and_out_leave_the_connection_usable_behind_pgbouncer() {
    let _one = RELAYS.lock().await;
    let bouncer = start_bouncer(&database_config());
    let manager = unnamed(bounced_config(&bouncer, "pc_relay_copy"));
    // One connection: the next caller gets the one that copied.
    let pool = Pool::new(
        manager,
        crate::support::db::pool_config(1, 0, Duration::from_secs(10)),
    )
    .await
    .expect("pool");
    for round in 0..3 {
        let mut conn = pool.get().await.expect("get");
        copy_round(&mut conn).await;
        statements_work(&conn, round).await;
        drop(conn);
        let conn = pool.get().await.expect("get again");
        statements_work(&conn, round + 10).await;
    }
    pool.close().await;
    relays_end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL and pgbouncer: set it to a PostgreSQL server, install pgbouncer, and run with --include-ignored"]
async fn pipelines_with_an_error_in_the_middle_run_behind_pgbouncer() {
    let _one = RELAYS.lock().await;
    let bouncer = start_bouncer(&database_config());
    let conn = unnamed(bounced_config(&bouncer, "pc_relay_pipeline"))
        .connect()
        .await
        .expect("connect");
    let double = conn.prepare("SELECT $1::int4 * 2").await.expect("prepare");
    let divide = conn.prepare("SELECT 10 / $1::int4").await.expect("prepare");
    // The pooled client learns a text query's parameter types in a
    // transaction of its own the first time: outside the pipeline, where
    // another query's error would end that transaction.
    conn.query_one("SELECT $1::int4 * 2", &[&0_i32])
        .await
        .expect("describe");
    for round in 0..20_i32 {
        // Sixteen queries written before any reply is read, the driver's
        // own and the pooled client's text, one dividing by zero.
        let queries = (0..16_i32).map(|i| {
            let (conn, double, divide) = (&conn, &double, &divide);
            async move {
                let row = match i {
                    5 => conn
                        .client()
                        .query_one(divide, &[&0_i32])
                        .await
                        .map_err(PgError::from),
                    i if i % 3 == 0 => conn.query_one("SELECT $1::int4 * 2", &[&(round + i)]).await,
                    _ => conn
                        .client()
                        .query_one(double, &[&(round + i)])
                        .await
                        .map_err(PgError::from),
                };
                (i, row.map(|row| row.get::<_, i32>(0)))
            }
        });
        for (i, got) in futures::future::join_all(queries).await {
            if i == 5 {
                let err = got.expect_err("division by zero");
                assert_eq!(
                    err.code(),
                    Some(&tokio_postgres::error::SqlState::DIVISION_BY_ZERO),
                    "{err}"
                );
            } else {
                assert_eq!(got.expect("query"), (round + i) * 2, "query {i}");
            }
        }
    }
    assert!(!conn.is_closed());
    drop((double, divide, conn));
    relays_end().await;
}

/// With unnamed statements, a query the driver sends while the pooled
/// client looks up a new text query's parameter types runs on its own, not
/// inside a transaction of that lookup: an `INSERT` sent alongside a text
/// query that fails is kept, and an error alongside a new text query is not
/// that query's error. Directly on the server (through the relay), where a
/// temporary table lives for the connection.
#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn a_query_sent_during_a_parameter_type_lookup_runs_outside_it() {
    let _one = RELAYS.lock().await;
    let conn = unnamed(database_config()).connect().await.expect("connect");
    assert!(conn.is_relayed());
    conn.batch_execute("CREATE TEMP TABLE pc_lookup_alongside (v int4)")
        .await
        .expect("create");
    for round in 1..=3_i64 {
        // The lookup of a text query that fails, and an INSERT sent while
        // it runs (polled in this order, so the INSERT is written after the
        // lookup's first message).
        let failing = format!("SELECT $1::int4 FROM pc_no_such_table_{round}");
        let (failed, inserted) = futures::join!(
            conn.query(&failing, &[&1_i32]),
            conn.execute("INSERT INTO pc_lookup_alongside VALUES (1)", &[]),
        );
        let err = failed.expect_err("no such table");
        assert!(
            err.as_db_error()
                .is_some_and(|db| db.message().contains("pc_no_such_table")),
            "{err}"
        );
        assert_eq!(inserted.expect("insert"), 1);
        let kept: i64 = conn
            .query_one("SELECT count(*) FROM pc_lookup_alongside", &[])
            .await
            .expect("count")
            .get(0);
        assert_eq!(
            kept, round,
            "the INSERT sent during the lookup was rolled back"
        );
        assert!(!conn.transaction_open());

        // A new text query, and the driver's own query failing while its
        // lookup runs: each gets its own answer.
        let new_text = format!("SELECT $1::int8 + {round}");
        let (described, divided) = futures::join!(
            conn.query_one(&new_text, &[&1_i64]),
            conn.client().query_one("SELECT 1 / 0", &[]),
        );
        let divided = divided.expect_err("division by zero");
        assert_eq!(
            divided.code(),
            Some(&tokio_postgres::error::SqlState::DIVISION_BY_ZERO),
            "{divided}"
        );
        let sum: i64 = described
            .expect("a query whose lookup ran beside an error")
            .get(0);
        assert_eq!(sum, 1 + round);
        assert!(!conn.transaction_open());
    }
    drop(conn);
    relays_end().await;
}

/// The query paths with named statements passed through, on `pool`: each
/// path alone, then the mixed load (32 tasks, one in five in a
/// transaction). No relay runs.
async fn pass_through_paths(pool: &Pool<PostgresManager<NoTls>>) {
    for path in PATHS {
        let errors = load_paths(pool, 8, 10, move |_, _| path).await;
        assert!(
            errors.is_empty(),
            "{path:?}: {} of 80 failed, first: {:?}",
            errors.len(),
            errors.first()
        );
    }
    let errors = load_paths(pool, 32, 20, |task, i| match (task + i) % 10 {
        0 => Path::Transaction,
        5 => Path::BuildTransaction,
        1 | 6 => Path::Prepared,
        2 | 7 => Path::Cached,
        3 => Path::Client,
        _ => Path::Text,
    })
    .await;
    assert!(
        errors.is_empty(),
        "mixed: {} of 640 failed, first: {:?}",
        errors.len(),
        errors.first()
    );
    let conn = pool.get().await.expect("get");
    assert!(!conn.is_relayed());
    assert_eq!(conn.pooler_mode(), PoolerMode::Transaction);
    let mut conn = conn;
    copy_round(&mut conn).await;
    statements_work(&conn, 7).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs DATABASE_URL and pgbouncer: set it to a PostgreSQL server, install pgbouncer, and run with --include-ignored"]
async fn passed_through_statements_take_the_direct_path() {
    let _one = RELAYS.lock().await;
    // Directly on the server: the driver's named statements reach it as
    // they are (the session holds them), through no relay.
    let manager =
        PostgresManager::new(database_config(), NoTls).pooler_mode(PoolerMode::Transaction);
    let pool = Pool::new(manager, pool_config()).await.expect("pool");
    assert_eq!(pool_postgres::open_relays(), 0);
    pass_through_paths(&pool).await;
    let conn = pool.get().await.expect("get");
    let cached = conn.prepare_cached("SELECT $1::int4").await.expect("cache");
    let named: i64 = conn
        .query_one(
            "SELECT count(*) FROM pg_prepared_statements WHERE name = $1",
            &[&statement_name(&cached)],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(named, 1, "the statement reached the server by its name");
    assert_eq!(conn.statement_cache_stats().capacity, 256);
    drop((cached, conn));
    pool.close().await;

    // Behind PgBouncer in session mode: the same.
    let bouncer = start_bouncer_with(&database_config(), POOL + 2, "pool_mode = session\n");
    let manager = PostgresManager::new(bounced_config(&bouncer, "pc_pass_session"), NoTls)
        .pooler_mode(PoolerMode::Transaction)
        .pooler_statements(PoolerStatements::PassThrough);
    let pool = Pool::new(manager, pool_config()).await.expect("pool");
    assert_eq!(pool_postgres::open_relays(), 0);
    pass_through_paths(&pool).await;
    pool.close().await;
}

/// The differential test's workload: what one step does on a connection.
#[derive(Debug, Clone)]
enum Op {
    /// `prepare(DIFF_SQL[sql])` into `slot` (dropping, so closing, what
    /// was there).
    Prepare { slot: usize, sql: usize },
    /// The driver's own query of the statement in `slot`, if any.
    Run { slot: usize, arg: i32 },
    /// Drops the statement in `slot`: the driver closes it.
    Close { slot: usize },
    /// The pooled client's query of a text.
    Text { sql: usize, arg: i32 },
    /// The statements in these slots run with these arguments, all written
    /// before any reply is read.
    Pipeline(Vec<(usize, i32)>),
    /// `COPY pc_diff FROM STDIN` of these values.
    CopyIn(Vec<i32>),
    /// `COPY pc_diff TO STDOUT`.
    CopyOut,
    /// A `Parse` the server refuses.
    BadParse,
    /// `BEGIN`, `COMMIT` or `ROLLBACK` as text.
    Tx(&'static str),
}

/// Each takes one `int4` parameter; the second fails on 0.
const DIFF_SQL: [&str; 5] = [
    "SELECT $1::int4 + 1",
    "SELECT 10 / $1::int4",
    "SELECT n FROM pc_diff WHERE n > $1::int4 ORDER BY n",
    "SELECT count(*)::int4 FROM pc_diff WHERE n <> $1::int4",
    "INSERT INTO pc_diff VALUES ($1::int4) RETURNING n",
];

const SLOTS: usize = 4;

fn op_strategy() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    let arg = -2_i32..5;
    prop_oneof![
        3 => (0..SLOTS, 0..DIFF_SQL.len()).prop_map(|(slot, sql)| Op::Prepare { slot, sql }),
        4 => (0..SLOTS, arg.clone()).prop_map(|(slot, arg)| Op::Run { slot, arg }),
        1 => (0..SLOTS).prop_map(|slot| Op::Close { slot }),
        2 => (0..DIFF_SQL.len(), arg.clone()).prop_map(|(sql, arg)| Op::Text { sql, arg }),
        2 => proptest::collection::vec((0..SLOTS, arg.clone()), 1..6).prop_map(Op::Pipeline),
        1 => proptest::collection::vec(arg, 0..5).prop_map(Op::CopyIn),
        1 => Just(Op::CopyOut),
        1 => Just(Op::BadParse),
        1 => prop_oneof![Just("BEGIN"), Just("COMMIT"), Just("ROLLBACK")].prop_map(Op::Tx),
    ]
}

/// A query's outcome as text: its rows' first values, or its SQLSTATE.
fn outcome(result: Result<Vec<tokio_postgres::Row>, impl Into<PgError>>) -> String {
    match result.map_err(Into::into) {
        Ok(rows) => rows
            .iter()
            .map(|row| row.get::<_, i32>(0).to_string())
            .collect::<Vec<_>>()
            .join(","),
        Err(e) => format!("E:{}", e.code().map_or("none", |c| c.code())),
    }
}

/// Runs `ops` on a fresh connection of `manager`; every step's outcome.
async fn run_ops(manager: &PostgresManager<NoTls>, ops: &[Op]) -> Vec<String> {
    use futures::{SinkExt, TryStreamExt};
    let conn = manager.connect().await.expect("connect");
    conn.batch_execute("CREATE TEMP TABLE pc_diff (n int4)")
        .await
        .expect("create the temporary table");
    let mut slots: Vec<Option<tokio_postgres::Statement>> = vec![None; SLOTS];
    let mut seen = Vec::new();
    for op in ops {
        let got = match op {
            Op::Prepare { slot, sql } => match conn.prepare(DIFF_SQL[*sql]).await {
                Ok(statement) => {
                    slots[*slot] = Some(statement);
                    "prepared".to_owned()
                }
                Err(e) => outcome(Err::<Vec<_>, _>(e)),
            },
            Op::Run { slot, arg } => match &slots[*slot] {
                Some(statement) => outcome(conn.client().query(statement, &[arg]).await),
                None => "empty".to_owned(),
            },
            Op::Close { slot } => {
                slots[*slot] = None;
                "closed".to_owned()
            }
            Op::Text { sql, arg } => outcome(conn.query(DIFF_SQL[*sql], &[arg]).await),
            Op::Pipeline(steps) => {
                let queries = steps.iter().map(|(slot, arg)| {
                    let statement = slots[*slot].clone();
                    let conn = &conn;
                    async move {
                        match statement {
                            Some(statement) => {
                                outcome(conn.client().query(&statement, &[arg]).await)
                            }
                            None => "empty".to_owned(),
                        }
                    }
                });
                futures::future::join_all(queries).await.join(";")
            }
            Op::CopyIn(values) => {
                let copied = async {
                    let sink = conn
                        .client()
                        .copy_in::<_, std::io::Cursor<Vec<u8>>>("COPY pc_diff FROM STDIN")
                        .await?;
                    let mut sink = std::pin::pin!(sink);
                    let data: String = values.iter().map(|v| format!("{v}\n")).collect();
                    sink.send(std::io::Cursor::new(data.into_bytes())).await?;
                    sink.finish().await
                }
                .await;
                match copied {
                    Ok(n) => format!("copied {n}"),
                    Err(e) => outcome(Err::<Vec<_>, _>(e)),
                }
            }
            Op::CopyOut => {
                let out = async {
                    let chunks: Vec<_> = conn
                        .client()
                        .copy_out("COPY pc_diff TO STDOUT")
                        .await?
                        .try_collect()
                        .await?;
                    Ok::<_, tokio_postgres::Error>(
                        chunks
                            .iter()
                            .map(|b| String::from_utf8_lossy(b).into_owned())
                            .collect::<String>(),
                    )
                }
                .await;
                match out {
                    Ok(text) => text,
                    Err(e) => outcome(Err::<Vec<_>, _>(e)),
                }
            }
            Op::BadParse => match conn.prepare("SELEC $1::int4").await {
                Ok(_) => "parsed".to_owned(),
                Err(e) => outcome(Err::<Vec<_>, _>(e)),
            },
            Op::Tx(sql) => match conn.batch_execute(sql).await {
                Ok(()) => (*sql).to_owned(),
                Err(e) => outcome(Err::<Vec<_>, _>(e)),
            },
        };
        seen.push(got);
    }
    drop(slots);
    assert!(!conn.is_closed(), "the connection failed: {seen:?}");
    seen
}

#[test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
fn the_relay_gives_the_same_results_as_a_direct_connection() {
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    let _one = RELAYS.blocking_lock();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let direct = PostgresManager::new(database_config(), NoTls);
    let relayed = unnamed(database_config());
    let mut runner = TestRunner::new(Config {
        cases: 24,
        failure_persistence: None,
        ..Config::default()
    });
    let workload = proptest::collection::vec(op_strategy(), 1..40);
    runner
        .run(&workload, |ops| {
            let (want, got) = runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(60), async {
                    (run_ops(&direct, &ops).await, run_ops(&relayed, &ops).await)
                })
                .await
                .expect("a case ran past 60 s")
            });
            if want == got {
                Ok(())
            } else {
                Err(TestCaseError::fail(format!(
                    "direct {want:?}\nrelayed {got:?}"
                )))
            }
        })
        .expect("the relay changed a result");
    runtime.block_on(relays_end());
}
