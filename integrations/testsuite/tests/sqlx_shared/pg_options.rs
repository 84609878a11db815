//! The manager's connect options on PostgreSQL: a password provider called
//! once per connect whose failure is the connect error, and the
//! transaction pooler mode's statement cache.

use std::error::Error as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::drivers::pool_sqlx::{BoxError, PasswordProviderError, Pool as SqlxPool, SqlxManager};
use super::drivers::sqlx;
use super::drivers::sqlx::{Connection, PgConnection};
use crate::support::db::bounded;
use pool_core::{ManageConnection, PoolConfig, PoolError};
use pool_postgres::pooler::{PoolerMode, PoolerStatements};

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_provider_is_called_once_per_connect() {
    bounded(async {
        let url = crate::support::db::url("DATABASE_URL");
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        // The test server trusts local logins, so any password is taken.
        let manager = SqlxManager::<PgConnection>::from_url(&url)
            .unwrap()
            .with_password_provider(move || {
                let counted = Arc::clone(&counted);
                async move {
                    counted.fetch_add(1, Ordering::Relaxed);
                    Ok::<_, BoxError>("rotated".to_owned())
                }
            });

        let mut direct = manager.connect().await.unwrap();
        direct.ping().await.unwrap();
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        direct.close().await.unwrap();

        let config = crate::support::db::pool_config(3, 0, Duration::from_secs(10));
        let pool = SqlxPool::new(manager, config).await.unwrap();
        let opened_by_new = calls.load(Ordering::Relaxed) - 1;
        assert!(opened_by_new >= 1, "Pool::new opens a connection");
        let held = [
            pool.get().await.unwrap(),
            pool.get().await.unwrap(),
            pool.get().await.unwrap(),
        ];
        assert_eq!(pool.state().total, 3);
        assert_eq!(
            calls.load(Ordering::Relaxed),
            1 + 3,
            "one call per connection opened"
        );
        drop(held);
        // Checkouts of open connections call nothing.
        for _ in 0..5 {
            let one: i32 = sqlx::query_scalar("SELECT 1")
                .fetch_one(&pool)
                .await
                .unwrap();
            assert_eq!(one, 1);
        }
        assert_eq!(calls.load(Ordering::Relaxed), 4);
        pool.close().await;
    })
    .await;
}

/// Needs no server: the provider fails before anything is connected.
#[tokio::test]
async fn password_provider_error_is_the_connect_error() {
    bounded(async {
        let manager = SqlxManager::<PgConnection>::from_url("postgres://app@127.0.0.1:1/app")
            .unwrap()
            .with_password_provider(|| async { Err::<String, BoxError>("vault is sealed".into()) });

        let err = manager.connect().await.unwrap_err();
        let sqlx::Error::Configuration(cause) = &err else {
            panic!("expected a configuration error, got {err:?}");
        };
        let provider = cause
            .downcast_ref::<PasswordProviderError>()
            .expect("the cause is the provider's failure");
        assert_eq!(
            provider.to_string(),
            "password provider failed: vault is sealed"
        );
        assert_eq!(provider.source().unwrap().to_string(), "vault is sealed");
        assert!(err.to_string().contains("vault is sealed"), "{err}");

        let config = PoolConfig::builder()
            .max_size(1)
            .acquire_timeout(Duration::from_secs(1))
            .connect_timeout(Duration::from_millis(500))
            .build()
            .unwrap();
        match SqlxPool::new(manager, config).await {
            Err(PoolError::Backend(sqlx::Error::Configuration(cause))) => {
                assert!(cause.downcast_ref::<PasswordProviderError>().is_some());
            }
            other => panic!("expected the provider's error from Pool::new, got {other:?}"),
        }
    })
    .await;
}

/// Named statements the server holds for this session.
async fn server_statements(conn: &mut PgConnection) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM pg_prepared_statements")
        .persistent(false)
        .fetch_one(conn)
        .await
        .unwrap()
}

/// Runs `SELECT $1` three times on `conn`, as sqlx's default persistent
/// query or not.
async fn three_queries(conn: &mut PgConnection, persistent: bool) {
    for n in 0..3 {
        let got: i32 = sqlx::query_scalar("SELECT $1::int4")
            .bind(n)
            .persistent(persistent)
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(got, n);
    }
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn transaction_pooler_mode_keeps_no_prepared_statements() {
    bounded(async {
        let url = crate::support::db::url("DATABASE_URL");
        // Session mode: sqlx caches the statement, under one name.
        let session = SqlxManager::<PgConnection>::from_url(&url).unwrap();
        let mut conn = session.connect().await.unwrap();
        three_queries(&mut conn, true).await;
        assert_eq!(conn.cached_statements_size(), 1);
        assert_eq!(server_statements(&mut conn).await, 1);
        conn.close().await.unwrap();

        let manager = SqlxManager::<PgConnection>::from_url(&url)
            .unwrap()
            .pooler_mode(PoolerMode::Transaction)
            .pooler_statements(PoolerStatements::Unnamed);
        // Through a connection, a persistent query is cached by sqlx under
        // its name, and the relay sends it to the server unnamed.
        let mut conn = manager.connect().await.unwrap();
        three_queries(&mut conn, true).await;
        assert_eq!(conn.cached_statements_size(), 1);
        assert_eq!(server_statements(&mut conn).await, 0);
        conn.close().await.unwrap();
        let mut conn = manager.connect().await.unwrap();
        three_queries(&mut conn, false).await;
        assert_eq!(server_statements(&mut conn).await, 0);
        conn.close().await.unwrap();

        // Through `&pool`, every query is unnamed: none stays on the server.
        let config = PoolConfig::builder().max_size(1).build().unwrap();
        let pool = SqlxPool::new(manager, config).await.unwrap();
        for n in 0..3 {
            let got: i32 = sqlx::query_scalar("SELECT $1::int4")
                .bind(n)
                .fetch_one(&pool)
                .await
                .unwrap();
            assert_eq!(got, n);
        }
        let mut conn = pool.get().await.unwrap();
        assert_eq!(server_statements(&mut conn).await, 0);
        drop(conn);
        pool.close().await;
    })
    .await;
}
