//! `SqlxManager<SqliteConnection>` on embedded SQLite: needs no server.
#![cfg(feature = "sqlx-sqlite")]

mod common;

use common::bounded;
use pool_core::managers::sqlx::{ResetMode, SqlxManager};
use pool_core::ManageConnection;
use sqlx::{Connection, Executor, SqliteConnection};

fn manager(mode: ResetMode) -> SqlxManager<SqliteConnection> {
    SqlxManager::<SqliteConnection>::from_url("sqlite::memory:")
        .unwrap()
        .reset_mode(mode)
}

async fn connect_with_table(manager: &SqlxManager<SqliteConnection>) -> SqliteConnection {
    let mut conn = manager.connect().await.unwrap();
    conn.execute("CREATE TABLE items (name TEXT NOT NULL)")
        .await
        .unwrap();
    conn
}

async fn rows(conn: &mut SqliteConnection) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM items")
        .fetch_one(conn)
        .await
        .unwrap()
}

/// SQLite refuses a `BEGIN` inside a transaction.
async fn in_transaction(conn: &mut SqliteConnection) -> bool {
    match conn.execute(sqlx::raw_sql("BEGIN")).await {
        Ok(_) => {
            conn.execute(sqlx::raw_sql("ROLLBACK")).await.unwrap();
            false
        }
        Err(_) => true,
    }
}

async fn give_back(manager: &SqlxManager<SqliteConnection>, conn: &mut SqliteConnection) -> bool {
    let dirty = manager.needs_reset(conn);
    if dirty {
        manager.reset(conn).await.expect("reset succeeds");
    }
    dirty
}

#[tokio::test]
async fn clean_returns_need_no_reset() {
    let manager = manager(ResetMode::Tracked);
    bounded(async {
        let mut conn = connect_with_table(&manager).await;
        manager.is_valid(&mut conn).await.unwrap();
        assert!(!manager.needs_reset(&mut conn));
        let mut tx = conn.begin().await.unwrap();
        tx.execute("INSERT INTO items VALUES ('kept')")
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert!(!manager.needs_reset(&mut conn));
        assert_eq!(rows(&mut conn).await, 1);
    })
    .await;
}

#[tokio::test]
async fn forgotten_nested_transactions_are_rolled_back() {
    let manager = manager(ResetMode::Tracked);
    bounded(async {
        let mut conn = connect_with_table(&manager).await;
        let mut tx = conn.begin().await.unwrap();
        tx.execute("INSERT INTO items VALUES ('lost')")
            .await
            .unwrap();
        let inner = tx.begin().await.unwrap();
        std::mem::forget(inner);
        std::mem::forget(tx);
        assert!(conn.is_in_transaction());

        assert!(give_back(&manager, &mut conn).await);
        assert!(!conn.is_in_transaction());
        assert!(!in_transaction(&mut conn).await);
        assert_eq!(rows(&mut conn).await, 0);
    })
    .await;
}

#[tokio::test]
async fn dropped_transaction_is_rolled_back() {
    let manager = manager(ResetMode::Tracked);
    bounded(async {
        let mut conn = connect_with_table(&manager).await;
        let mut tx = conn.begin().await.unwrap();
        tx.execute("INSERT INTO items VALUES ('lost')")
            .await
            .unwrap();
        drop(tx);

        // The worker may or may not have run the queued rollback yet; either
        // way nothing is left open once the connection is back.
        give_back(&manager, &mut conn).await;
        assert!(!in_transaction(&mut conn).await);
        assert_eq!(rows(&mut conn).await, 0);
    })
    .await;
}

#[tokio::test]
async fn raw_begin_is_caught_in_strict_mode() {
    let manager = manager(ResetMode::Strict);
    bounded(async {
        let mut conn = connect_with_table(&manager).await;
        conn.execute("BEGIN").await.unwrap();
        conn.execute("INSERT INTO items VALUES ('lost')")
            .await
            .unwrap();
        assert!(!conn.is_in_transaction(), "sqlx does not see a raw BEGIN");

        assert!(give_back(&manager, &mut conn).await);
        assert!(!in_transaction(&mut conn).await);
        assert_eq!(rows(&mut conn).await, 0);

        // On a clean connection the strict reset changes nothing.
        conn.execute("INSERT INTO items VALUES ('kept')")
            .await
            .unwrap();
        assert!(give_back(&manager, &mut conn).await);
        assert_eq!(rows(&mut conn).await, 1);
    })
    .await;
}

#[test]
fn debug_names_the_file_and_bad_urls_are_errors() {
    let manager = SqlxManager::<SqliteConnection>::from_url("sqlite:///tmp/app.db").unwrap();
    let debug = format!("{manager:?}");
    assert!(
        debug.contains("app.db") && debug.contains("Tracked"),
        "{debug}"
    );

    let err =
        SqlxManager::<SqliteConnection>::from_url("sqlite:app.db?mode=sometimes").unwrap_err();
    assert!(matches!(err, sqlx::Error::Configuration(_)), "{err:?}");
}
