//! sqlx's pool tests that run against a database (`tests/postgres/postgres.rs`
//! and `tests/any/pool.rs`), named as there, with `SqlxManager<PgConnection>`
//! against PostgreSQL (`DATABASE_URL`). Their runs on the mock are in
//! pool-core's `compat` tests.

/// The scenarios sqlx runs against a database, with the sqlx manager.
#[cfg(feature = "sqlx-postgres")]
mod postgres {
    use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use ::sqlx::postgres::PgAdvisoryLock;
    use ::sqlx::{Executor, PgConnection};
    use pool_core::{async_trait, ConnectionInfo, Hooks, PoolConfig, PoolConfigBuilder};
    use pool_sqlx::{Pool as SqlxPool, SqlxManager};
    use tokio::time::{sleep, timeout};

    use crate::support::eventually;
    use crate::support::sqlx_rules::{maintained, renewed, Seen, CALLBACK_PATTERN};

    type PgPool = SqlxPool<PgConnection>;
    type Manager = SqlxManager<PgConnection>;

    /// Bound on one test, so a hung server fails it instead of the run.
    const BOUND: Duration = Duration::from_secs(60);

    fn manager() -> Manager {
        let url = match std::env::var("DATABASE_URL") {
            Ok(url) if !url.trim().is_empty() => url,
            _ => panic!("DATABASE_URL is not set: this test needs PostgreSQL"),
        };
        SqlxManager::from_url(&url).expect("a valid DATABASE_URL")
    }

    /// sqlx's defaults: ten connections, 30 s to acquire, checked at every
    /// checkout.
    fn options() -> PoolConfigBuilder {
        PoolConfig::builder()
            .name("peers-sqlx")
            .max_size(10)
            .validation_bypass(Duration::ZERO)
    }

    async fn connect(config: PoolConfigBuilder) -> PgPool {
        SqlxPool::new(manager(), config.build().unwrap())
            .await
            .expect("PostgreSQL is reachable")
    }

    async fn bounded<T>(fut: impl std::future::Future<Output = T>) -> T {
        timeout(BOUND, fut)
            .await
            .expect("finished within its bound")
    }

    #[derive(Debug, Default, Clone)]
    struct CountConnects(Arc<AtomicU64>);

    #[async_trait]
    impl Hooks<Manager> for CountConnects {
        async fn after_connect(&self, _: &mut PgConnection) -> Result<(), ::sqlx::Error> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn uses_before_acquire(&self) -> bool {
            false
        }
        fn uses_after_release(&self) -> bool {
            false
        }
    }

    /// `after_connect` runs on the connections the pool opens.
    #[tokio::test]
    #[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
    async fn pool_should_invoke_after_connect() {
        bounded(async {
            let counter = CountConnects::default();
            let pool =
                SqlxPool::new_with_hooks(manager(), options().build().unwrap(), counter.clone())
                    .await
                    .unwrap();
            for _ in 0..4 {
                drop(pool.get().await.unwrap());
            }
            assert!(counter.0.load(Ordering::SeqCst) >= 1);
            pool.close().await;
        })
        .await;
    }

    /// Transactions left after a failed statement come back to the pool:
    /// three in a row on a pool of two do not run it dry.
    #[tokio::test]
    #[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
    async fn pool_should_be_returned_failed_transactions() {
        bounded(async {
            let pool = connect(
                options()
                    .max_size(2)
                    .acquire_timeout(Duration::from_secs(3)),
            )
            .await;
            for _ in 0..3 {
                let mut tx = pool.begin().await.expect("a connection within 3 s");
                let res = ::sqlx::query("blah blah").execute(&mut *tx).await;
                assert!(res.is_err());
                drop(tx);
            }
            pool.close().await;
        })
        .await;
    }

    /// sqlx's hook rules, counted in a temporary table of each session.
    #[derive(Debug, Default, Clone)]
    struct TableCounting(Arc<Counts>);

    #[derive(Debug, Default)]
    struct Counts {
        next_id: AtomicI32,
        /// A callback saw what sqlx says it must not.
        odd_info: AtomicBool,
    }

    const COUNTS: &str = "SELECT id, before_acquire_calls, after_release_calls FROM conn_stats";

    #[async_trait]
    impl Hooks<Manager> for TableCounting {
        async fn after_connect(&self, conn: &mut PgConnection) -> Result<(), ::sqlx::Error> {
            let id = self.0.next_id.fetch_add(1, Ordering::SeqCst);
            let ddl = format!(
                "CREATE TEMPORARY TABLE conn_stats (id int PRIMARY KEY, \
                 before_acquire_calls int DEFAULT 0, after_release_calls int DEFAULT 0); \
                 INSERT INTO conn_stats (id) VALUES ({id})"
            );
            conn.execute(::sqlx::AssertSqlSafe(ddl)).await.map(drop)
        }
        async fn before_acquire(
            &self,
            conn: &mut PgConnection,
            info: ConnectionInfo,
        ) -> Result<bool, ::sqlx::Error> {
            if info.age.is_zero() || info.since_last_use.is_zero() {
                self.0.odd_info.store(true, Ordering::SeqCst);
            }
            conn.execute("UPDATE conn_stats SET before_acquire_calls = before_acquire_calls + 1")
                .await?;
            let (id, before, _): (i32, i32, i32) =
                ::sqlx::query_as(COUNTS).fetch_one(&mut *conn).await?;
            Ok(id % 2 == 1 || before < 3)
        }
        async fn after_release(
            &self,
            conn: &mut PgConnection,
            info: ConnectionInfo,
        ) -> Result<bool, ::sqlx::Error> {
            if info.age.is_zero() {
                self.0.odd_info.store(true, Ordering::SeqCst);
            }
            conn.execute("UPDATE conn_stats SET after_release_calls = after_release_calls + 1")
                .await?;
            let (id, _, after): (i32, i32, i32) =
                ::sqlx::query_as(COUNTS).fetch_one(&mut *conn).await?;
            Ok(id % 2 == 0 || after < 4)
        }
    }

    /// The pattern of `super::test_pool_callbacks`, through `&pool` as an
    /// executor, one checkout per query.
    #[tokio::test]
    #[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
    async fn test_pool_callbacks() {
        bounded(async {
            let hooks = TableCounting::default();
            let pool = SqlxPool::new_lazy_with_hooks(
                manager(),
                options()
                    .max_size(1)
                    .acquire_timeout(Duration::from_secs(5))
                    .build()
                    .unwrap(),
                hooks.clone(),
            );
            for (i, (id, before, after)) in CALLBACK_PATTERN.into_iter().enumerate() {
                let seen: (i32, i32, i32) =
                    ::sqlx::query_as(COUNTS).fetch_one(&pool).await.unwrap();
                let expected = (id as i32, before as i32, after as i32);
                assert_eq!(seen, expected, "checkout {i}");
            }
            assert!(
                !hooks.0.odd_info.load(Ordering::SeqCst),
                "a zero age or idle time"
            );
            pool.close().await;
        })
        .await;
    }

    #[derive(Debug, Default, Clone)]
    struct Recording(Seen);

    #[async_trait]
    impl Hooks<Manager> for Recording {
        async fn before_acquire(
            &self,
            _: &mut PgConnection,
            info: ConnectionInfo,
        ) -> Result<bool, ::sqlx::Error> {
            *self.0.lock().unwrap() = Some(info);
            Ok(true)
        }
        fn uses_after_release(&self) -> bool {
            false
        }
    }

    /// `super::test_connection_maintenance` against PostgreSQL, on real
    /// time (sqlx keeps its own copy ignored; here it runs with the
    /// database suites).
    #[tokio::test]
    #[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
    async fn test_connection_maintenance() {
        bounded(async {
            let seen = Recording::default();
            let pool = SqlxPool::new_lazy_with_hooks(
                manager(),
                maintained(options()).build().unwrap(),
                seen.clone(),
            );
            let mut five = Vec::new();
            for _ in 0..5 {
                five.push(pool.get().await.unwrap());
            }
            assert_eq!((pool.state().total, pool.state().idle), (5, 0));
            drop(five);
            eventually("all back", || pool.state().idle == 5).await;
            sleep(Duration::from_millis(2_500)).await;
            eventually("a renewed idle set", || renewed(&pool)).await;
            assert!(pool.metrics().evictions.max_lifetime >= 5);
            let total = pool.state().total;
            assert!((2..=3).contains(&total), "{:?}", pool.state());
            for _ in 0..2 {
                drop(pool.get().await.unwrap());
                let info = seen
                    .0
                    .lock()
                    .unwrap()
                    .take()
                    .expect("before_acquire ran on the connection taken from idle");
                assert!(info.age < Duration::from_secs(2), "a new one: {info:?}");
            }
            pool.close().await;
        })
        .await;
    }

    /// A multi-statement simple query through `&pool` returns every row.
    #[tokio::test]
    #[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
    async fn it_executes_with_pool() {
        bounded(async {
            let pool = connect(options()).await;
            let rows = (&pool).fetch_all("SELECT 1; SELECT 2").await.unwrap();
            assert_eq!(rows.len(), 2);
            pool.close().await;
        })
        .await;
    }

    /// A failed statement through `&pool` leaves the pool usable, ten times
    /// over.
    #[tokio::test]
    #[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
    async fn it_can_fail_and_recover_with_pool() {
        bounded(async {
            let pool = connect(options()).await;
            for i in 0..10 {
                let res = (&pool)
                    .execute("INSERT INTO pool_core_no_such_table (x) VALUES (10)")
                    .await;
                assert!(res.is_err());
                let got: i32 = ::sqlx::query_scalar("SELECT $1::int4")
                    .bind(i)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
                assert_eq!(got, i);
            }
            pool.close().await;
        })
        .await;
    }

    /// Two hundred tasks query a pool of one while fifty more start
    /// `get()`s and drop them after one poll; nobody starves, nothing
    /// deadlocks, and `close()` ends it. (sqlx runs it for 30 s by hand;
    /// here 2 s, every loop bounded.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
    async fn pool_smoke_test() {
        use std::future::Future;
        use std::pin::pin;
        use std::task::Poll;

        bounded(async {
            let pool = connect(
                options()
                    .min_size(1)
                    .max_size(1)
                    .acquire_timeout(Duration::from_secs(5)),
            )
            .await;
            let mut queries = Vec::new();
            for _ in 0..200 {
                let pool = pool.clone();
                queries.push(tokio::spawn(async move {
                    for _ in 0..100_000 {
                        match ::sqlx::query("SELECT 1 + 1").execute(&pool).await {
                            Ok(_) => {}
                            Err(::sqlx::Error::PoolClosed) => return Ok(()),
                            Err(e) => return Err(e.to_string()),
                        }
                    }
                    Ok(())
                }));
            }
            let mut quitters = Vec::new();
            for _ in 0..50 {
                let pool = pool.clone();
                quitters.push(tokio::spawn(async move {
                    for _ in 0..1_000_000 {
                        if pool.is_closed() {
                            break;
                        }
                        let mut get = pin!(pool.get());
                        std::future::poll_fn(|cx| {
                            let _ = get.as_mut().poll(cx);
                            Poll::Ready(())
                        })
                        .await;
                        tokio::task::yield_now().await;
                    }
                }));
            }
            sleep(Duration::from_secs(2)).await;
            timeout(Duration::from_secs(30), pool.close())
                .await
                .expect("closed within 30 s");
            for q in queries {
                q.await.unwrap().expect("no error but the pool closing");
            }
            for q in quitters {
                q.await.unwrap();
            }
        })
        .await;
    }

    /// Three tasks on a pool of one each take a connection, query, give it
    /// back, and take one again: all are served.
    #[tokio::test]
    #[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
    async fn test_issue_622() {
        bounded(async {
            let pool = connect(options().max_size(1)).await;
            let tasks: Vec<_> = (0..3)
                .map(|_| {
                    let pool = pool.clone();
                    tokio::spawn(async move {
                        {
                            let mut conn = pool.get().await.unwrap();
                            let _: i32 = ::sqlx::query_scalar("SELECT 1")
                                .fetch_one(&mut *conn)
                                .await
                                .unwrap();
                        }
                        pool.get().await.map(drop)
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap().expect("served again");
            }
            pool.close().await;
        })
        .await;
    }

    /// Session advisory locks on pooled connections: taken, taken again
    /// recursively, refused to another session, force-released, released
    /// by dropping their guards; the unlocks a dropped guard queues are
    /// sent when its connection comes back to the pool.
    #[tokio::test]
    #[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
    async fn test_advisory_locks() {
        bounded(async {
            let pool = connect(options().max_size(2)).await;
            let pid = std::process::id();
            let lock1 = Arc::new(PgAdvisoryLock::new(format!("pool-core-peers-1-{pid}")));
            let lock2 = Arc::new(PgAdvisoryLock::new(format!("pool-core-peers-2-{pid}")));

            let mut conn1 = pool.get().await.unwrap();
            let mut held1 = lock1.acquire(&mut *conn1).await.unwrap();
            // Recursive, through the guard; its drop queues one unlock.
            drop(lock1.acquire(&mut held1).await.unwrap());

            let (has2_tx, has2_rx) = tokio::sync::oneshot::channel();
            let other = tokio::spawn({
                let pool = pool.clone();
                let (lock1, lock2) = (lock1.clone(), lock2.clone());
                async move {
                    let mut conn2 = pool.get().await.unwrap();
                    let held2 = lock2.acquire(&mut *conn2).await.unwrap();
                    has2_tx.send(()).unwrap();
                    let tried = lock1.try_acquire(held2).await.unwrap();
                    let held2 =
                        tried.right_or_else(|_| panic!("lock1 is held by the other session"));
                    let (conn2, released) = lock2.force_release(held2).await.unwrap();
                    assert!(released);
                    // Both, then dropped: the pool sends the unlocks.
                    let both = lock1.acquire(conn2).await.unwrap();
                    let _both = lock2.acquire(both).await.unwrap();
                }
            });

            has2_rx.await.unwrap();
            // Waits for the other session's force-release of lock2.
            let both = lock2.acquire(held1.leak()).await.unwrap();
            let (only2, released) = lock1.force_release(both).await.unwrap();
            assert!(released);
            only2.release_now().await.unwrap();
            other.await.unwrap();

            // Free again: the other connection's unlocks were sent.
            let again = lock1.acquire(&mut *conn1).await.unwrap();
            let _again = lock2.acquire(again).await.unwrap();
            drop(_again);
            drop(conn1);
            pool.close().await;
        })
        .await;
    }
}
