//! Routing by role: writes to the primary, reads to the standby, a hard
//! bound and holders per host, the strict and the preferring read targets
//! when the standby stops, and a primary that turns read-only.

use std::time::Duration;

use pool_postgres::hosts::{
    HostConnection, HostEvent, HostPool, HostPoolError, HostStatus, ServerRole, SessionTarget,
};
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;

use super::{addr, assert_split, host_pool, hosts, primary_and_standby, SERIAL};

async fn in_recovery(conn: &pool_postgres::PgClient) -> bool {
    conn.query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .expect("pg_is_in_recovery")
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs initdb: install the PostgreSQL server or set PG_BIN_DIR, and run with --ignored"]
async fn writes_go_to_the_primary_reads_to_the_standby() {
    let _serial = SERIAL.lock().await;
    let (primary, standby) = primary_and_standby().await;
    // The standby listed first: the order must not be what routes.
    let pool = host_pool(hosts(&[&standby, &primary], "hosts_routing"), NoTls, 2).await;
    let statuses: Vec<_> = pool.hosts().into_iter().map(|h| h.status).collect();
    assert_eq!(
        statuses,
        [
            HostStatus::Up(ServerRole::Standby),
            HostStatus::Up(ServerRole::Primary)
        ]
    );
    let mut events = pool.subscribe();

    let w = pool.write().await.expect("a write checkout");
    let r = pool.read().await.expect("a read checkout");
    assert_split(&w, &r, &primary, &standby);
    assert!(
        !in_recovery(&w).await,
        "the write connection is on the primary"
    );
    assert!(
        in_recovery(&r).await,
        "the read connection is on the standby"
    );
    w.execute("INSERT INTO t (port) VALUES (1)", &[])
        .await
        .expect("write on the primary");

    // Holders and bounds are per host.
    let holders = pool.holders();
    assert_eq!(holders.len(), 2);
    for (host, held) in &holders {
        assert_eq!(held.len(), 1, "{host}: {held:?}");
        assert_eq!(held[0].location.file(), file!());
    }
    let w2 = pool.write().await.expect("the primary's second connection");
    let third = pool.get(SessionTarget::Primary);
    let third = tokio::time::timeout(Duration::from_millis(300), third).await;
    assert!(third.is_err(), "the primary's bound of 2 holds");
    let r2 = pool
        .read()
        .await
        .expect("the standby still has room: its bound is its own");
    assert_eq!(HostConnection::host(&r2), addr(&standby));
    let primary_state = pool.host_pool(&addr(&primary)).expect("listed").state();
    assert_eq!((primary_state.in_use, primary_state.max_size), (2, 2));
    drop((w, w2, r, r2));

    // A host whose bound is reached: the checkout waits its own limit out,
    // and the event says which host ran out.
    let tight = HostPool::builder(hosts(&[&primary, &standby], "hosts_tight"), NoTls)
        .pool_config(crate::support::db::named_config(
            "tight",
            1,
            Duration::from_millis(200),
        ))
        .build()
        .await
        .expect("the tight host pool");
    let mut tight_events = tight.subscribe();
    let held = tight.write().await.expect("the one write connection");
    let err = tight.write().await.expect_err("its bound is 1");
    assert!(
        matches!(&err, HostPoolError::Pool { host, error } if **host == *addr(&primary) && error.is_timeout()),
        "{err:?}"
    );
    let exhausted = tight_events.recv().await.expect("an event");
    assert!(
        matches!(&exhausted, HostEvent::Exhausted { host, .. } if **host == *addr(&primary)),
        "{exhausted:?}"
    );
    drop(held);
    tight.close().await;

    // Standby stops: a strict standby read fails fast, a preferring one
    // falls back to the primary.
    tokio::task::block_in_place(|| standby.stop());
    let strict = pool.get(SessionTarget::Standby).await;
    assert!(
        matches!(
            strict,
            Err(HostPoolError::NoHost {
                target: SessionTarget::Standby,
                ..
            })
        ),
        "{strict:?}"
    );
    let fallback = pool.read().await.expect("prefer-standby falls back");
    assert_eq!(HostConnection::host(&fallback), addr(&primary));
    drop(fallback);
    let down = events.recv().await.expect("an event");
    assert!(
        matches!(&down, HostEvent::HostDown { host, .. } if **host == *addr(&standby)),
        "{down:?}"
    );

    // The primary turns read-only: the first write sees 25006, retires the
    // connection, and the next write checkout finds no writable host.
    primary.set_read_only(true).await;
    // The reload reaches each session asynchronously: write until one
    // answers 25006 (bounded).
    let mut saw_read_only = false;
    for _ in 0..100 {
        let w = pool
            .write()
            .await
            .expect("the primary, not yet known read-only");
        match w.execute("INSERT INTO t (port) VALUES (2)", &[]).await {
            Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(err) => {
                assert_eq!(
                    err.code(),
                    Some(&SqlState::READ_ONLY_SQL_TRANSACTION),
                    "{err}"
                );
                assert!(w.is_retired(), "the connection that saw 25006 is retired");
                saw_read_only = true;
                break;
            }
        }
    }
    assert!(saw_read_only, "the primary never turned read-only");
    let refused = pool.write().await;
    assert!(
        matches!(
            refused,
            Err(HostPoolError::NoHost {
                target: SessionTarget::ReadWrite,
                ..
            })
        ),
        "no write checkout on a read-only server: {refused:?}"
    );
    assert_eq!(
        pool.hosts()[1].status,
        HostStatus::Up(ServerRole::ReadOnlyPrimary)
    );
    let mut demoted = false;
    while let Ok(event) = events.try_recv() {
        demoted |= event.is_demotion();
    }
    assert!(demoted, "a role-changed event says so");
    let reads = pool.read().await.expect("reads still served by it");
    assert_eq!(HostConnection::role(&reads), ServerRole::ReadOnlyPrimary);
    drop(reads);

    // Writable again: a recheck finds it, writes come back.
    primary.set_read_only(false).await;
    let mut writable = false;
    for _ in 0..100 {
        let _ = pool.recheck().await;
        if pool.hosts()[1].status == HostStatus::Up(ServerRole::Primary) {
            writable = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(writable, "a recheck finds the primary writable again");
    let w = pool.write().await.expect("writable again");
    w.execute("INSERT INTO t (port) VALUES (3)", &[])
        .await
        .expect("write after the recheck");
    drop(w);
    pool.close().await;
}
