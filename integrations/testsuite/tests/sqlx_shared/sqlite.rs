//! `SqlxManager<SqliteConnection>` on embedded SQLite: needs no server.

use std::time::Duration;

use super::drivers::pool_sqlx::{Pool as SqlxPool, ResetMode, SqlxManager};
use super::drivers::sqlx;
use super::drivers::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
use super::drivers::sqlx::{Connection, Executor, SqliteConnection};
use super::probes::server_in_transaction;
use crate::support::db::{bounded, unique};
use pool_core::ManageConnection;

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
        assert!(!server_in_transaction(&mut conn).await);
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
        assert!(!server_in_transaction(&mut conn).await);
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
        assert!(!server_in_transaction(&mut conn).await);
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

/// A database file in the temp dir, removed at the end of the test.
struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.0.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path); // absent files are fine
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_shares_one_file_within_max_size_and_rolls_back_on_return() {
    let file = TempFile(std::env::temp_dir().join(format!("{}.db", unique("pool-core-sqlite"))));
    let options = SqliteConnectOptions::new()
        .filename(&file.0)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(Duration::from_secs(10));
    bounded(async {
        let config = crate::support::db::named_config("sqlite", 3, Duration::from_secs(30));
        let pool = SqlxPool::new(SqlxManager::<SqliteConnection>::new(options), config)
            .await
            .unwrap();
        pool.get()
            .await
            .unwrap()
            .execute("CREATE TABLE items (name TEXT NOT NULL)")
            .await
            .unwrap();

        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let pool = pool.clone();
                tokio::spawn(async move {
                    for _ in 0..5 {
                        let mut conn = pool.get().await.unwrap();
                        let m = pool.metrics();
                        assert!(m.total <= m.max_size, "{m:?}");
                        conn.execute("INSERT INTO items VALUES ('kept')")
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }

        {
            let mut conn = pool.get().await.unwrap();
            let mut tx = conn.begin().await.unwrap();
            tx.execute("INSERT INTO items VALUES ('lost')")
                .await
                .unwrap();
            std::mem::forget(tx);
        }
        // The reset runs in a task of the pool; wait (bounded) for it.
        for _ in 0..500 {
            if pool.metrics().in_use == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let m = pool.metrics();
        assert!(m.total <= 3 && m.in_use == 0, "{m:?}");
        // Whichever of the connections had the leaked transaction, none is
        // inside one now, and its write is gone.
        let mut all = Vec::new();
        for _ in 0..m.total {
            all.push(pool.get().await.unwrap());
        }
        for conn in &mut all {
            assert!(!server_in_transaction(conn).await);
            assert_eq!(rows(conn).await, 16 * 5);
        }
        drop(all);
        pool.close().await;
    })
    .await;
}
