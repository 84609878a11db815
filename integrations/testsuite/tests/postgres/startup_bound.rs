//! `Pool::new` with `PostgresManager` returns within `acquire_timeout`
//! against a server that accepts TCP and never answers (the default
//! `connect_timeout`, 10 s, is above it), naming where it connected; a
//! lazy pool's wait behind such a connect counts it as opening, not open,
//! and names where it hangs; a refused port fails at once, naming the
//! host. Needs no database: the
//! servers are the test's own, on 127.0.0.1.
#![cfg(feature = "tokio-postgres")]

use std::time::Instant;

use pool_core::{Pool, PoolConfig};
use pool_postgres::PostgresManager;
use tokio_postgres::NoTls;

use crate::support::db::bounded;
use crate::support::silent::{
    assert_start_up_is_bounded, refused_port, start_up_config, Silent, LIMIT, MARGIN,
};

fn manager(port: u16) -> PostgresManager<NoTls> {
    let pg = format!("host=127.0.0.1 port={port} user=app dbname=app")
        .parse()
        .expect("a valid config");
    PostgresManager::new(pg, NoTls)
}

fn config() -> PoolConfig {
    start_up_config()
}

#[tokio::test]
async fn pool_new_against_a_server_that_never_answers_returns_within_acquire_timeout() {
    bounded(assert_start_up_is_bounded(|port| {
        Pool::new(manager(port), config())
    }))
    .await;
}

#[tokio::test]
async fn a_lazy_wait_behind_a_hanging_connect_counts_it_as_opening() {
    bounded(async {
        let server = Silent::start().await;
        let pool = Pool::new_lazy(manager(server.port()), config());
        let started = Instant::now();
        let err = pool.get().await.expect_err("nothing answers");
        let took = started.elapsed();
        assert!(took <= LIMIT + MARGIN, "took {took:?}: {err}");
        assert!(
            err.to_string()
                .contains("waiting for a connection (0 of 2 open: 0 idle, 0 in use; "),
            "{err}"
        );
        // Dropped, not closed: `close().await` would wait for the connect
        // still hanging (up to its 10 s).
        drop(pool);
    })
    .await;
}

#[tokio::test]
async fn a_lazy_wait_behind_a_hanging_connect_names_the_host() {
    bounded(async {
        let server = Silent::start().await;
        let pool = Pool::new_lazy(
            manager(server.port()),
            PoolConfig::builder()
                .max_size(2)
                .acquire_timeout(LIMIT)
                .build()
                .expect("config"),
        );
        let err = pool.get().await.expect_err("nothing answers");
        // No connect has failed: the one still running says where.
        let text = err.to_string();
        let opening = format!(
            "(0 of 2 open: 0 idle, 0 in use; 1 opening (to 127.0.0.1:{}, running ",
            server.port()
        );
        assert!(
            text.starts_with("timed out after ")
                && text.contains(&opening)
                && text.ends_with("); 1 waiting)"),
            "{text}"
        );
        drop(pool);
    })
    .await;
}

#[tokio::test]
async fn pool_new_against_a_refused_port_fails_at_once_naming_the_host() {
    bounded(async {
        let port = refused_port();
        let started = Instant::now();
        let err = Pool::new(manager(port), config())
            .await
            .expect_err("the port refuses");
        let took = started.elapsed();
        assert!(took <= LIMIT + MARGIN, "took {took:?}: {err}");
        let text = err.to_string();
        assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
        assert!(text.to_lowercase().contains("refused"), "{text}");
    })
    .await;
}
