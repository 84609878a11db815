//! An unreachable server (port 1 on the loopback refuses connections): `get()`
//! times out naming the connect error, and the password in the URL appears
//! nowhere. Needs no database server.
#![cfg(any(feature = "sqlx-postgres", feature = "sqlx-mysql"))]

use std::error::Error as _;
use std::time::Duration;

use crate::support::db::bounded;
use pool_core::{ManageConnection, PoolConfig, PoolError};
use pool_sqlx::{Pool as SqlxPool, SqlxConnection, SqlxManager};

const SECRET: &str = "Tr0ub4dor-and-3";

async fn times_out_without_the_password<C: SqlxConnection>(url: &str) {
    assert!(url.contains(SECRET));
    let manager = SqlxManager::<C>::from_url(url).unwrap();
    let debug = format!("{manager:?}");
    assert!(!debug.contains(SECRET), "{debug}");
    assert!(
        debug.contains("127.0.0.1") && debug.contains("app"),
        "{debug}"
    );

    // What one connect fails with, to find in the pool's error.
    let direct = manager.connect().await.unwrap_err().to_string();

    let config = PoolConfig::builder()
        .name("unreachable")
        .max_size(2)
        .acquire_timeout(Duration::from_millis(400))
        .connect_timeout(Duration::from_millis(200))
        // The timeout with the cause inside; fail fast is `fail_fast.rs`.
        .fail_fast(false)
        .build()
        .unwrap();
    let pool = SqlxPool::new_lazy(manager, config);
    assert!(!format!("{pool:?}").contains(SECRET));

    let err = match pool.get().await {
        Ok(_) => panic!("nothing listens on port 1"),
        Err(err) => err,
    };
    assert!(matches!(err, PoolError::Timeout { .. }), "{err:?}");
    let display = err.to_string();
    let debug = format!("{err:?}");
    assert!(display.contains(&direct), "{display} should name {direct}");
    let source = err.source().expect("the connect error is the source");
    assert!(source.to_string().contains(&direct));
    for shown in [display, debug, format!("{source:?}")] {
        assert!(!shown.contains(SECRET), "{shown}");
    }
    pool.close().await;
}

#[cfg(feature = "sqlx-postgres")]
#[tokio::test]
async fn postgres_get_times_out_naming_the_connect_error() {
    let url = format!("postgres://app:{SECRET}@127.0.0.1:1/test");
    bounded(times_out_without_the_password::<sqlx::PgConnection>(&url)).await;
}

#[cfg(feature = "sqlx-mysql")]
#[tokio::test]
async fn mysql_get_times_out_naming_the_connect_error() {
    let url = format!("mysql://app:{SECRET}@127.0.0.1:1/test");
    bounded(times_out_without_the_password::<sqlx::MySqlConnection>(
        &url,
    ))
    .await;
}
