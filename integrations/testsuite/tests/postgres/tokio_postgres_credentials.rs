//! Rotating a password with `PostgresManager::with_password_provider` and
//! `soft_evict_all()`, against a cluster the test starts itself (SCRAM
//! passwords over TCP, see `cluster/mod.rs`): old connections keep working
//! after `ALTER ROLE ... PASSWORD`, new ones use what the provider returns,
//! and after a soft evict every connection has logged in again, all in one
//! pool that is never rebuilt.
#![cfg(feature = "tokio-postgres")]

use crate::support::cluster;
use crate::support::pg::backend_pid;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use pool_core::{ManageConnection, Pool};
use pool_postgres::{PgError, PostgresManager};
use tokio_postgres::NoTls;

/// A manager for `rotor` over TCP whose password comes from `secret`;
/// `calls` counts the provider's calls.
fn manager(
    cluster: &cluster::Cluster,
    secret: &Arc<RwLock<String>>,
    calls: &Arc<AtomicU32>,
) -> PostgresManager<NoTls> {
    let secret = Arc::clone(secret);
    let calls = Arc::clone(calls);
    PostgresManager::new(cluster.tcp_config("rotor", "postgres"), NoTls).with_password_provider(
        move || {
            calls.fetch_add(1, Ordering::Relaxed);
            let password = secret.read().expect("secret").clone();
            async move { Ok(password) }
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs initdb: install the PostgreSQL server or set PG_BIN_DIR, and run with --ignored"]
async fn rotating_the_password_needs_no_restart() {
    let cluster = cluster::Cluster::spawn().await;
    let admin = cluster.admin_with_login("rotor", "first-secret").await;

    let secret = Arc::new(RwLock::new(String::from("first-secret")));
    let calls = Arc::new(AtomicU32::new(0));
    let config = crate::support::db::pool_config(2, 2, Duration::from_secs(10));
    let pool = Pool::new(manager(&cluster, &secret, &calls), config)
        .await
        .expect("pool logs in with the first password");
    let a = pool.get().await.expect("get");
    let b = pool.get().await.expect("get");
    let old: HashSet<i32> = [backend_pid(&a).await, backend_pid(&b).await].into();
    assert_eq!(old.len(), 2);
    assert_eq!(
        calls.load(Ordering::Relaxed),
        2,
        "one provider call per connection"
    );

    admin
        .batch_execute("ALTER ROLE rotor PASSWORD 'second-secret'")
        .await
        .expect("alter role");

    // Old connections keep working: the server checks passwords at login.
    assert!(old.contains(&backend_pid(&a).await) && old.contains(&backend_pid(&b).await));

    // A new connection with the old password is refused ...
    let direct = manager(&cluster, &secret, &calls);
    let refused = direct.connect().await.expect_err("old password refused");
    let message = refused
        .as_db()
        .and_then(tokio_postgres::Error::as_db_error)
        .map(|db| db.message().to_owned())
        .unwrap_or_else(|| refused.to_string());
    assert!(
        message.contains("password authentication failed"),
        "{message}"
    );
    assert!(
        !format!("{refused:?}").contains("first-secret"),
        "no password in errors"
    );

    // ... and once the provider returns the new one, new connections work.
    *secret.write().expect("secret") = String::from("second-secret");
    let fresh = direct.connect().await.expect("new password accepted");
    drop(fresh);

    // Rotate the pool's connections without rebuilding it.
    drop((a, b));
    pool.soft_evict_all();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut now: HashSet<i32>;
    loop {
        let c = pool.get().await.expect("get after the soft evict");
        let d = pool.get().await.expect("get after the soft evict");
        now = [backend_pid(&c).await, backend_pid(&d).await].into();
        if now.is_disjoint(&old) || Instant::now() > deadline {
            break;
        }
        drop((c, d));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        now.is_disjoint(&old),
        "every connection logged in again: {old:?} -> {now:?}"
    );

    // The server agrees: rotor's sessions are exactly the new ones.
    let sessions: HashSet<i32> = admin
        .query(
            "SELECT pid FROM pg_stat_activity WHERE usename = 'rotor'",
            &[],
        )
        .await
        .expect("pg_stat_activity")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(sessions, now);
    pool.close().await;
}

#[tokio::test]
async fn the_providers_error_is_the_connect_error() {
    let manager = PostgresManager::new(tokio_postgres::Config::new(), NoTls)
        .with_password_provider(|| async { Err("token service unavailable".into()) });
    let err = manager.connect().await.expect_err("provider failed");
    assert!(matches!(err, PgError::Password(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "password provider failed: token service unavailable"
    );
    assert!(format!("{manager:?}").contains("password_provider: true"));
}
