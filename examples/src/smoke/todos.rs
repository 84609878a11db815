//! The to-do example (a `PgPool` program ported to the pool) against
//! `DATABASE_URL`: the demo run end to end, then each step on its own, every
//! run in a schema of its own that is dropped at the end.

use std::time::Duration;

use crate::todos;

fn url() -> String {
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!("DATABASE_URL is not set: this test needs PostgreSQL (see scripts/test.sh)"),
    }
}

/// A schema no other run uses.
fn schema(test: &str) -> String {
    format!(
        "pool_core_todos_{test}_{}_{}",
        std::process::id(),
        fastrand::u32(..)
    )
}

async fn schema_exists(conn: &mut sqlx::PgConnection, schema: &str) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
        .bind(schema)
        .fetch_one(conn)
        .await
        .unwrap()
}

async fn bounded<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .expect("the test finished within its time bound")
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn the_demo_runs_and_drops_its_schema() {
    bounded(async {
        let schema = schema("demo");
        let _cleanup =
            super::Cleanup::new(&url(), format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
        let mut out = Vec::new();
        todos::demo(&url(), &schema, &mut out).await.unwrap();
        let out = String::from_utf8(out).unwrap();
        for line in [
            "- [x] ",
            ": buy milk",
            ": water the plants",
            "2 open",
            "archived 1",
            "archive: [\"buy milk\"]",
        ] {
            assert!(out.contains(line), "{line:?} missing from:\n{out}");
        }
        assert!(
            out.ends_with(&format!("dropped schema {schema}\n")),
            "{out}"
        );
        // A plain connection: `todos::connect` would run the migrations
        // into the schema it is given.
        let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&url())
            .await
            .unwrap();
        assert!(
            !schema_exists(&mut conn, &schema).await,
            "the demo left {schema}"
        );
    })
    .await;
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn each_step_as_a_pgpool_program_writes_it() {
    bounded(async {
        let schema = schema("steps");
        let _cleanup =
            super::Cleanup::new(&url(), format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
        let pool = todos::connect(&url(), &schema).await.unwrap();
        let result = steps(&pool).await;
        todos::drop_schema(&pool, &schema).await.unwrap();
        assert!(!schema_exists(&mut pool.get().await.unwrap(), &schema).await);
        pool.close().await;
        result.unwrap();
    })
    .await;
}

async fn steps(pool: &todos::PgPool) -> anyhow::Result<()> {
    // The migrations ran once, into the schema; running them again does
    // nothing.
    todos::migrate(pool).await?;
    let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations")
        .fetch_one(pool)
        .await?;
    assert_eq!(applied, 2);

    let first = todos::add(pool, "one").await?;
    assert!(todos::complete(pool, first).await?);
    assert!(!todos::complete(pool, first + 1000).await?);

    // `Acquire` through a checked-out connection: a transaction of its own.
    let mut conn = pool.acquire().await?;
    let ids = todos::add_all(&mut conn, &["two", "three"]).await?;
    assert_eq!(ids.len(), 2);
    // An executor: the connection, then the pool.
    assert_eq!(todos::count_open(&mut *conn).await?, 2);
    drop(conn);
    assert_eq!(todos::count_open(pool).await?, 2);

    // `Acquire` through a transaction: a savepoint, undone with it.
    let mut tx = pool.begin().await?;
    todos::add_all(&mut tx, &["four"]).await?;
    assert_eq!(todos::count_open(&mut *tx).await?, 3);
    tx.rollback().await?;
    assert_eq!(todos::count_open(pool).await?, 2);

    // An insert the table refuses undoes the whole batch, including the
    // items inserted before it.
    todos::add_all(&mut pool.acquire().await?, &["five"]).await?;
    sqlx::query("ALTER TABLE todos ADD CONSTRAINT no_six CHECK (description <> 'six')")
        .execute(pool)
        .await?;
    let before = todos::count_open(pool).await?;
    let refused = todos::add_all(&mut pool.acquire().await?, &["seven", "six"]).await;
    assert!(
        matches!(refused, Err(sqlx::Error::Database(_))),
        "{refused:?}"
    );
    assert_eq!(todos::count_open(pool).await?, before);

    let listed: Vec<String> = todos::list(pool)
        .await?
        .into_iter()
        .map(|t| t.description)
        .collect();
    assert_eq!(listed, ["one", "two", "three", "five"]);
    assert_eq!(todos::archive_done(pool).await?, 1);
    assert_eq!(todos::archived(pool).await?, ["one"]);
    assert_eq!(todos::list(pool).await?.len(), 3);
    // A connection's return finishes just after the query that used it
    // resolved: wait (bounded) for the last one to land.
    for _ in 0..1000 {
        if pool.size() == pool.num_idle() as u32 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    assert_eq!(
        pool.size(),
        pool.num_idle() as u32,
        "every connection came back"
    );
    Ok(())
}

#[test]
fn schema_names_are_checked_before_they_reach_sql() {
    assert!(todos::valid_schema("pool_core_todos"));
    for bad in ["", "1abc", "a-b", "a; DROP SCHEMA public", &"s".repeat(64)] {
        assert!(!todos::valid_schema(bad), "{bad:?}");
    }
}
