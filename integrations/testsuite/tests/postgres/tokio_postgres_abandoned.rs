//! A query that runs out of time under `PgClient::with_timeout` is
//! cancelled on the server and its connection is retired.
#![cfg(feature = "tokio-postgres")]

use crate::support;
use std::error::Error as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pool_core::ManageConnection;
use pool_postgres::{PostgresManager, QueryError};
use tokio_postgres::NoTls;

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn timed_out_query_is_cancelled_on_the_server_and_the_connection_retired() {
    let (m, mut conn, admin) = support::pg::connected_manager().await;
    let pid = support::pg::backend_pid(&conn).await;

    let err = support::pg::outlived_query(&conn, 5).await;
    assert!(
        matches!(err, QueryError::TimedOut { limit } if limit == Duration::from_millis(100)),
        "{err:?}"
    );
    assert!(err.is_timeout());
    assert_eq!(
        err.to_string(),
        "query did not finish within 100ms and was cancelled"
    );
    assert!(conn.is_abandoned());
    assert!(m.has_broken(&mut conn), "the pool will close it on return");

    // The server stopped the sleep: the backend goes idle long before 5 s.
    let started = Instant::now();
    let idle = support::db::eventually(Duration::from_secs(3), || {
        let admin = &admin;
        async move { support::pg::backend_state(admin, pid).await.as_deref() == Some("idle") }
    })
    .await;
    assert!(
        idle,
        "backend still busy {:?} after the cancel",
        started.elapsed()
    );
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn query_within_the_limit_passes_through() {
    let url = support::db::url("DATABASE_URL");
    let m = PostgresManager::new(support::pg::config(&url), NoTls);
    let mut conn = m.connect().await.expect("connect");
    let row = conn
        .with_timeout(Duration::from_secs(5), conn.query_one("SELECT 41 + 1", &[]))
        .await
        .expect("fast query");
    assert_eq!(row.get::<_, i32>(0), 42);

    let err = conn
        .with_timeout(Duration::from_secs(5), conn.query_one("SELECT 1/0", &[]))
        .await
        .expect_err("division by zero");
    assert!(matches!(err, QueryError::Db(_)), "{err:?}");
    assert!(!err.is_timeout());
    assert_eq!(err.to_string(), "query failed");
    assert!(err.source().is_some(), "the driver error is the source");
    assert!(!conn.is_abandoned());
    assert!(!m.has_broken(&mut conn));
}

/// What a one-shot proxy does with its listening socket after forwarding
/// its one connection.
#[derive(Clone, Copy, PartialEq)]
enum AfterFirst {
    /// Stop listening: a later connection is refused.
    Close,
    /// Keep listening but never accept: once the accept queue is full, a
    /// later connection hangs.
    Stall,
}

/// Forwards exactly one TCP connection to the server behind `config`. A
/// cancel request opens a new connection to the same address, so what
/// happens to the listener afterwards decides the cancel's fate.
async fn one_shot_proxy(config: &tokio_postgres::Config, after: AfterFirst) -> u16 {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind proxy");
    let listener = socket.listen(1).expect("listen");
    let proxy_port = listener.local_addr().expect("proxy addr").port();
    tokio::spawn(async move {
        let Ok((mut inbound, _)) = listener.accept().await else {
            return;
        };
        let _stalled = match after {
            AfterFirst::Close => {
                drop(listener);
                None
            }
            AfterFirst::Stall => Some(listener),
        };
        let Ok(mut outbound) = tokio::net::TcpStream::connect((host.as_str(), port)).await else {
            return;
        };
        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
    });
    proxy_port
}

/// A config for the proxy on `port`, with the user, password and database
/// of `direct`. (`host`/`port` append to a config's lists, so it starts
/// from an empty one.)
fn via_proxy(direct: &tokio_postgres::Config, port: u16) -> tokio_postgres::Config {
    let mut config = tokio_postgres::Config::new();
    config.host("127.0.0.1").port(port);
    if let Some(user) = direct.get_user() {
        config.user(user);
    }
    if let Some(password) = direct.get_password() {
        config.password(password);
    }
    if let Some(dbname) = direct.get_dbname() {
        config.dbname(dbname);
    }
    config
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn cancel_that_cannot_reach_the_server_is_reported() {
    let url = support::db::url("DATABASE_URL");
    let direct = support::pg::config(&url);
    let proxy_port = one_shot_proxy(&direct, AfterFirst::Close).await;
    let m = PostgresManager::new(via_proxy(&direct, proxy_port), NoTls);
    let mut conn = m.connect().await.expect("connect through the proxy");
    let err = support::pg::outlived_query(&conn, 2).await;
    assert!(
        matches!(err, QueryError::CancelFailed { error: Some(_), .. }),
        "{err:?}"
    );
    assert!(err.is_timeout());
    assert_eq!(
        err.to_string(),
        "query did not finish within 100ms; the cancel request failed"
    );
    assert!(err.source().is_some(), "the cancel's error is the source");
    assert!(m.has_broken(&mut conn), "retired all the same");
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn cancel_that_hangs_is_bounded_by_cancel_timeout() {
    let url = support::db::url("DATABASE_URL");
    let direct = support::pg::config(&url);
    let proxy_port = one_shot_proxy(&direct, AfterFirst::Stall).await;
    let m = PostgresManager::new(via_proxy(&direct, proxy_port), NoTls)
        .cancel_timeout(Duration::from_millis(300));
    let mut conn = m.connect().await.expect("connect through the proxy");
    // Fill the proxy's accept queue (never accepted), so that the cancel
    // request's connection attempt gets no answer.
    let connected = Arc::new(AtomicUsize::new(0));
    let fillers: Vec<_> = (0..4)
        .map(|_| {
            let connected = connected.clone();
            tokio::spawn(async move {
                let stream = tokio::net::TcpStream::connect(("127.0.0.1", proxy_port)).await;
                connected.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(10)).await;
                drop(stream);
            })
        })
        .collect();
    // Bounded polling until the queue is full: Linux queues backlog + 1 = 2
    // connections (their connects return); the other fillers' connects hang.
    let filled = support::db::eventually(Duration::from_secs(5), || {
        let connected = connected.clone();
        async move { connected.load(Ordering::SeqCst) >= 2 }
    })
    .await;
    assert!(filled, "the proxy's accept queue did not fill within 5 s");

    let err = support::pg::outlived_query(&conn, 2).await;
    for filler in fillers {
        filler.abort();
    }
    assert!(
        matches!(err, QueryError::CancelFailed { error: None, .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "query did not finish within 100ms; the cancel request timed out or could not reach \
         the server"
    );
    assert!(err.source().is_none());
    assert!(m.has_broken(&mut conn), "retired all the same");
}
