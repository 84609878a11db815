//! The host pool over sqlx's `PgConnection` through the same failover: the
//! primary stops, the standby is promoted, under writers and readers.
//! sqlx connections are not watched for SQLSTATEs, so the old primary is
//! found down by a connect or a role check.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pool_postgres::hosts::{HostConnection, HostEvent};
use pool_sqlx::SqlxManager;
use sqlx::postgres::PgConnectOptions;
use sqlx::PgConnection;
use tokio_postgres::error::SqlState;

use super::failover::{
    assert_failover_clean, finish_load, first_write_on, load_config, spawn_host_loop, summary, Log,
    Outcome, Side, READERS, WRITERS,
};
use super::{assert_checkouts_split, primary_and_standby, SERIAL};

fn sqlx_outcome(r: Result<i32, sqlx::Error>) -> Outcome {
    match r {
        Ok(port) => Outcome::Ok(port),
        Err(sqlx::Error::Database(e)) => Outcome::Query(e.code().map(|c| SqlState::from_code(&c))),
        Err(_) => Outcome::Query(None),
    }
}

/// A sqlx host connection's outcome for `sql`.
async fn sqlx_query(
    mut conn: HostConnection<SqlxManager<PgConnection>>,
    sql: &'static str,
) -> Outcome {
    sqlx_outcome(
        sqlx::query_scalar::<_, i32>(sql)
            .fetch_one(&mut *conn)
            .await,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs initdb: install the PostgreSQL server or set PG_BIN_DIR, and run with --ignored"]
async fn sqlx_hosts_follow_a_promotion_under_load() {
    let _serial = SERIAL.lock().await;
    let (primary, standby) = primary_and_standby().await;
    let s_port = i32::from(standby.port());
    let options = PgConnectOptions::new()
        .username("postgres")
        .database("postgres");
    let pool = pool_sqlx::hosts::builder(
        options,
        [("127.0.0.1", primary.port()), ("127.0.0.1", standby.port())],
    )
    .pool_config(load_config("sqlx-hosts"))
    .recheck_interval(Duration::from_secs(1))
    .recheck_gap(Duration::from_millis(50))
    .build()
    .await
    .expect("the sqlx host pool");
    let mut events = pool.subscribe();
    assert_checkouts_split(&pool, &primary, &standby).await;

    let log: Log = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..WRITERS {
        tasks.push(spawn_host_loop(&pool, Side::Write, sqlx_query, &log, &stop));
    }
    for _ in 0..READERS {
        tasks.push(spawn_host_loop(&pool, Side::Read, sqlx_query, &log, &stop));
    }

    tokio::time::sleep(Duration::from_secs(1)).await;
    let stopped_at = Instant::now();
    tokio::task::block_in_place(|| primary.stop());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let promote_from = Instant::now();
    tokio::task::block_in_place(|| standby.promote());

    let first_new_write = first_write_on(&log, s_port, "sqlx write").await;
    finish_load(&stop, tasks).await;

    let ops = log.lock().unwrap().clone();
    eprintln!(
        "sqlx failover figures: first write on the new primary {:?} after `pg_ctl promote` \
         began ({:?} after the stop began)",
        first_new_write.saturating_duration_since(promote_from),
        first_new_write - stopped_at
    );
    eprintln!("sqlx host pool writes: {}", summary(&ops, Side::Write));
    eprintln!("sqlx host pool reads:  {}", summary(&ops, Side::Read));

    assert_failover_clean(&ops, s_port, promote_from);
    let failed: Vec<_> = ops
        .iter()
        .filter(|o| o.side == Side::Read && !matches!(o.outcome, Outcome::Ok(_)))
        .collect();
    assert!(failed.is_empty(), "reads failed: {failed:?}");
    let mut promoted = false;
    while let Ok(event) = events.try_recv() {
        promoted |= matches!(event, HostEvent::RoleChanged { .. }) && event.is_promotion();
    }
    assert!(promoted, "the promotion was reported");
    pool.close().await;
}
