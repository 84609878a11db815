//! `Pool::new` with sqlx's PostgreSQL manager returns within
//! `acquire_timeout` against a server that accepts TCP and never answers
//! (sqlx has no connect timeout of its own, and the pool's default
//! `connect_timeout`, 10 s, is above the limit), naming where it connected;
//! a refused port fails at once with the refusal. Needs no database: the
//! servers are the test's own, on 127.0.0.1.
#![cfg(feature = "sqlx-postgres")]

use std::time::{Duration, Instant};

use pool_sqlx::SqlxManager;

use pool_core::{PoolConfig, PoolError, TimeoutPhase};
use pool_sqlx::Pool as SqlxPool;

use crate::support::db::bounded;
use crate::support::silent::{refused_port, Silent};

/// The limit each start-up is given.
const LIMIT: Duration = Duration::from_secs(1);
/// What a loaded machine may add to it (a bound, not a measurement).
const MARGIN: Duration = Duration::from_secs(2);

fn manager(port: u16) -> SqlxManager<sqlx::PgConnection> {
    SqlxManager::from_url(&format!("postgres://app@127.0.0.1:{port}/app")).expect("a valid URL")
}

fn config() -> PoolConfig {
    PoolConfig::builder()
        .max_size(2)
        .min_size(2)
        .acquire_timeout(LIMIT)
        .build()
        .expect("config")
}

#[tokio::test]
async fn pool_new_against_a_server_that_never_answers_returns_within_acquire_timeout() {
    bounded(async {
        let server = Silent::start().await;
        let started = Instant::now();
        let err = SqlxPool::new(manager(server.port()), config())
            .await
            .expect_err("nothing answers");
        let took = started.elapsed();
        assert!(took <= LIMIT + MARGIN, "took {took:?}: {err}");
        assert!(
            matches!(
                err,
                PoolError::Timeout {
                    phase: TimeoutPhase::Connect,
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        let expected = format!(
            "opening a connection (0 of 2 open: 0 idle, 0 in use; 0 opening; 0 waiting); \
             last error: connect to 127.0.0.1:{} did not finish within ",
            server.port()
        );
        assert!(
            text.starts_with("timed out after ") && text.contains(&expected),
            "{text}"
        );
    })
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
