//! `Pool::new` with sqlx's PostgreSQL manager returns within
//! `acquire_timeout` against a server that accepts TCP and never answers
//! (sqlx has no connect timeout of its own, and the pool's default
//! `connect_timeout`, 10 s, is above the limit), naming where it connected;
//! a refused port fails at once with the refusal. Needs no database: the
//! servers are the test's own, on 127.0.0.1.
#![cfg(feature = "sqlx-postgres")]

use std::time::Instant;

use pool_sqlx::SqlxManager;

use pool_core::{PoolConfig, PoolError};
use pool_sqlx::Pool as SqlxPool;

use crate::support::db::bounded;
use crate::support::silent::{
    assert_start_up_is_bounded, refused_port, start_up_config, LIMIT, MARGIN,
};

fn manager(port: u16) -> SqlxManager<sqlx::PgConnection> {
    SqlxManager::from_url(&format!("postgres://app@127.0.0.1:{port}/app")).expect("a valid URL")
}

fn config() -> PoolConfig {
    start_up_config()
}

#[tokio::test]
async fn pool_new_against_a_server_that_never_answers_returns_within_acquire_timeout() {
    bounded(assert_start_up_is_bounded(|port| {
        SqlxPool::new(manager(port), config())
    }))
    .await;
}

#[tokio::test]
async fn pool_new_against_a_refused_port_fails_at_once() {
    bounded(async {
        let port = refused_port();
        let started = Instant::now();
        let err = SqlxPool::new(manager(port), config())
            .await
            .expect_err("the port refuses");
        let took = started.elapsed();
        assert!(took <= LIMIT + MARGIN, "took {took:?}: {err}");
        assert!(matches!(err, PoolError::Backend(_)), "{err:?}");
        assert!(err.to_string().to_lowercase().contains("refused"), "{err}");
    })
    .await;
}
