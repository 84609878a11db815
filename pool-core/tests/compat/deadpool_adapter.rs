//! DeadpoolManager: deadpool managers run unchanged in the pool, with
//! recycle at checkout (deadpool's timing) or at return.
#![cfg(feature = "deadpool")]

use crate::support;
use std::collections::HashSet;
use std::error::Error as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool::managed::{Manager, Metrics, RecycleError, RecycleResult};
use deadpool_postgres::{ManagerConfig, RecyclingMethod};
use pool_core::compat::deadpool::{DeadpoolError, DeadpoolManager, DeadpoolObject, RecycleAt};
use pool_core::{ManageConnection, Pool, PoolConfig, PooledConnection, ValidationMode};
use tokio_postgres::NoTls;

/// A deadpool manager that records what it is asked.
#[derive(Debug, Default)]
struct Fake {
    created: AtomicUsize,
    detached: AtomicUsize,
    /// `recycle_count` of each recycle call, in order.
    recycle_counts: Mutex<Vec<usize>>,
}

#[derive(Debug)]
struct Obj {
    refuse_recycle: bool,
}

impl Manager for Fake {
    type Type = Obj;
    type Error = std::io::Error;

    async fn create(&self) -> Result<Obj, std::io::Error> {
        self.created.fetch_add(1, Ordering::SeqCst);
        Ok(Obj {
            refuse_recycle: false,
        })
    }

    async fn recycle(&self, obj: &mut Obj, metrics: &Metrics) -> RecycleResult<std::io::Error> {
        self.recycle_counts
            .lock()
            .unwrap()
            .push(metrics.recycle_count);
        if obj.refuse_recycle {
            return Err(RecycleError::message("refused"));
        }
        Ok(())
    }

    fn detach(&self, _obj: &mut Obj) {
        self.detached.fetch_add(1, Ordering::SeqCst);
    }
}

fn config(max: u32) -> PoolConfig {
    PoolConfig::builder()
        .max_size(max)
        .validation_mode(ValidationMode::IsValid)
        .validation_bypass(Duration::ZERO)
        .acquire_timeout(Duration::from_secs(5))
        .build()
        .expect("config")
}

#[tokio::test]
async fn recycles_at_checkout_with_deadpool_metrics() {
    let pool = Pool::new(DeadpoolManager::new(Fake::default()), config(1))
        .await
        .expect("pool");
    for _ in 0..3 {
        drop(pool.get().await.expect("get"));
    }
    let fake = pool.manager().get_ref();
    // Every checkout but the first, of a connection opened moments ago, is
    // recycled (bypass 0), as in deadpool.
    assert_eq!(*fake.recycle_counts.lock().unwrap(), vec![0, 1]);
    let conn = pool.get().await.expect("get");
    assert_eq!(DeadpoolObject::metrics(&conn).recycle_count, 3);
    assert!(DeadpoolObject::metrics(&conn).recycled.is_some());
}

#[tokio::test]
async fn recycles_at_return_when_asked() {
    let manager = DeadpoolManager::new(Fake::default()).recycle_at(RecycleAt::Return);
    let pool = Pool::new(manager, config(1)).await.expect("pool");
    drop(pool.get().await.expect("get"));
    // The reset runs in a task after the return; the next checkout waits
    // for it, so after it the recycle has happened.
    let conn = pool.get().await.expect("get");
    assert_eq!(DeadpoolObject::metrics(&conn).recycle_count, 1);
    assert_eq!(
        *pool.manager().get_ref().recycle_counts.lock().unwrap(),
        vec![0]
    );
}

#[tokio::test]
async fn refused_recycle_closes_the_object_and_detaches_it() {
    let pool = Pool::new(DeadpoolManager::new(Fake::default()), config(1))
        .await
        .expect("pool");
    let mut conn = pool.get().await.expect("get");
    conn.refuse_recycle = true;
    drop(conn);
    let conn = pool.get().await.expect("get");
    assert!(
        !conn.refuse_recycle,
        "a new object replaced the refused one"
    );
    let fake = pool.manager().get_ref();
    assert_eq!(fake.created.load(Ordering::SeqCst), 2);
    assert_eq!(fake.detached.load(Ordering::SeqCst), 1, "the refused one");

    // Taken out of the pool, the object is detached when dropped.
    let raw = PooledConnection::detach(conn);
    assert_eq!(fake.detached.load(Ordering::SeqCst), 1);
    drop(raw);
    assert_eq!(fake.detached.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn recycle_errors_map_to_typed_errors() {
    let m = DeadpoolManager::new(Fake::default());
    let mut obj = m.connect().await.expect("create");
    obj.refuse_recycle = true;
    let err = m.is_valid(&mut obj).await.expect_err("refused");
    assert!(
        matches!(err, DeadpoolError::Recycle(ref msg) if msg == "refused"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "deadpool manager refused to recycle: refused"
    );
    assert!(err.source().is_none());

    let backend: DeadpoolError<std::io::Error> =
        DeadpoolError::Backend(std::io::Error::other("socket gone"));
    assert_eq!(backend.to_string(), "deadpool manager failed: socket gone");
    assert_eq!(
        backend.source().map(|e| e.to_string()).as_deref(),
        Some("socket gone")
    );
}

fn deadpool_pg(url: &str, method: RecyclingMethod) -> deadpool_postgres::Manager {
    let config = ManagerConfig {
        recycling_method: method,
    };
    deadpool_postgres::Manager::from_config(support::pg::config(url), NoTls, config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn deadpool_postgres_runs_concurrent_queries_within_the_bound() {
    let url = support::db::url("DATABASE_URL");
    const MAX: u32 = 3;
    let manager = DeadpoolManager::new(deadpool_pg(&url, RecyclingMethod::Verified));
    let pool = Pool::new(manager, config(MAX)).await.expect("pool");
    let pids = Arc::new(Mutex::new(HashSet::new()));
    let mut tasks = Vec::new();
    for t in 0..16i32 {
        let (pool, pids) = (pool.clone(), Arc::clone(&pids));
        tasks.push(tokio::spawn(async move {
            for q in 0..10i32 {
                let conn = pool.get().await.expect("get");
                // deadpool-postgres's own statement cache keeps working.
                let stmt = conn
                    .prepare_cached("SELECT pg_backend_pid(), $1::int")
                    .await
                    .expect("prepare");
                let row = conn
                    .query_one(&stmt, &[&(t * 10 + q)])
                    .await
                    .expect("query");
                assert_eq!(row.get::<_, i32>(1), t * 10 + q);
                pids.lock().unwrap().insert(row.get::<_, i32>(0));
                assert!(pool.metrics().total <= MAX);
            }
        }));
    }
    crate::support::db::join_all(tasks).await;
    let distinct = pids.lock().unwrap().len();
    assert!(
        (1..=MAX as usize).contains(&distinct),
        "{distinct} backends"
    );
    pool.close().await;
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn deadpool_postgres_clean_recycling_and_dead_connections() {
    let url = support::db::url("DATABASE_URL");
    let admin = support::pg::admin(&url).await;
    let manager = DeadpoolManager::new(deadpool_pg(&url, RecyclingMethod::Clean));
    let pool = Pool::new(manager, config(1)).await.expect("pool");

    let conn = pool.get().await.expect("get");
    conn.batch_execute("SET statement_timeout = '4321ms'")
        .await
        .expect("set");
    let pid = support::pg::backend_pid(&conn).await;
    drop(conn);
    // deadpool-postgres's Clean runs RESET ALL at the next checkout.
    let conn = pool.get().await.expect("get");
    let timeout: String = conn
        .query_one("SELECT current_setting('statement_timeout')", &[])
        .await
        .expect("setting")
        .get(0);
    assert_eq!(timeout, "0");
    drop(conn);

    support::pg::terminate(&admin, pid).await;
    // recycle fails on the dead connection; a new one is handed out.
    let conn = pool.get().await.expect("get");
    assert_ne!(support::pg::backend_pid(&conn).await, pid);
}
