//! The sqlx suite, written once: `sqlx_suite!(#[attributes])` in a
//! backend's module expands to its tests, each with those attributes (the
//! `#[ignore]` of a suite that needs a server). The module provides
//!
//! - `type Conn` (the sqlx connection type),
//! - `async fn pool(max_size: u32) -> P` (a pool on the test database),
//! - `async fn session_id(conn: &mut Conn) -> i64` (the server's id for
//!   the connection),
//! - `async fn monitor() -> P` (a pool of one on the database of the last
//!   `pool()`, for asking the server),
//! - `async fn open_on_server(monitor: &P, id: i64) -> bool` (whether the
//!   server says session `id` is inside a transaction, asked over another
//!   connection; polled, as MariaDB refreshes what it shows every 100 ms),
//! - `const SLOW: &str` (a query that runs for a second or more),
//! - `fn table_guard(name: &str) -> Box<dyn Send>` (drops table `name`
//!   when dropped, on every path, panics included).
//!
//! All SQL here is literal (no placeholders), the same on every backend.

macro_rules! sqlx_suite {
    ($(#[$attr:meta])*) => {
        use std::panic::AssertUnwindSafe;
        use std::sync::{Arc, Mutex};

        use futures::stream::{FuturesUnordered, StreamExt};
        use futures::FutureExt;
        use pool_ambient::{self, AmbientExt, Propagation, TxConn, TxError};
        use sqlx::AssertSqlSafe;

        use crate::support::db::{bounded, eventually, unique};
use crate::{Fail, SERVER_WAIT};

        type P = SqlxPool<Conn>;
        type F = Fail<sqlx::Error>;

        async fn exec(conn: &mut Conn, sql: String) {
            sqlx::query(AssertSqlSafe(sql))
                .execute(conn)
                .await
                .unwrap();
        }

        async fn create(pool: &P, t: &str) {
            sqlx::query(AssertSqlSafe(format!("CREATE TABLE {t} (v BIGINT)")))
                .execute(pool)
                .await
                .unwrap();
        }

        async fn drop_table(pool: &P, t: &str) {
            sqlx::query(AssertSqlSafe(format!("DROP TABLE {t}")))
                .execute(pool)
                .await
                .unwrap();
        }

        /// The committed values, over a connection of its own.
        async fn values(pool: &P, t: &str) -> Vec<i64> {
            sqlx::query_scalar(AssertSqlSafe(format!("SELECT v FROM {t} ORDER BY v")))
                .fetch_all(pool)
                .await
                .unwrap()
        }

        /// The values the current transaction sees.
        async fn values_in_tx(pool: &P, t: &str) -> Vec<i64> {
            let mut conn = pool.current().await.unwrap();
            sqlx::query_scalar(AssertSqlSafe(format!("SELECT v FROM {t} ORDER BY v")))
                .fetch_all(&mut *conn)
                .await
                .unwrap()
        }

        /// Inserts `v` in the current transaction.
        async fn insert(pool: &P, t: &str, v: i64) -> Result<(), F> {
            let mut conn = pool.current().await?;
            exec(&mut conn, format!("INSERT INTO {t} (v) VALUES ({v})")).await;
            Ok(())
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn required_joins_mandatory_joins_never_refuses() {
            bounded(async {
                let pool = pool(2).await;
                let t = unique("ambient_required");
                let _t_guard = table_guard(&t);
                create(&pool, &t).await;

                assert!(matches!(pool.current().await, Err(TxError::NoTransaction)));
                assert!(!pool.in_transaction());
                let mandatory: Result<(), F> = pool
                    .transaction()
                    .propagation(Propagation::Mandatory)
                    .run(async { Ok(()) })
                    .await;
                assert!(matches!(mandatory, Err(Fail::Tx(TxError::NoTransaction))));
                let never: Result<bool, F> = pool
                    .transaction()
                    .propagation(Propagation::Never)
                    .run(async { Ok(pool.in_transaction()) })
                    .await;
                assert!(!never.unwrap(), "never runs without a transaction");
                assert!(!TxConn::in_transaction(&pool.current_or_checkout().await.unwrap()));

                let done: Result<(), F> = pool
                    .transaction()
                    .run(async {
                        insert(&pool, &t, 1).await?;
                        pool.transaction()
                            .run(async {
                                insert(&pool, &t, 2).await?;
                                // Joined: it sees the outer scope's row.
                                assert_eq!(values_in_tx(&pool, &t).await, vec![1, 2]);
                                Ok::<(), F>(())
                            })
                            .await?;
                        pool.transaction()
                            .propagation(Propagation::Mandatory)
                            .run(insert(&pool, &t, 3))
                            .await?;
                        let never: Result<(), F> = pool
                            .transaction()
                            .propagation(Propagation::Never)
                            .run(async { Ok(()) })
                            .await;
                        assert!(matches!(never, Err(Fail::Tx(TxError::AlreadyInTransaction))));
                        assert!(TxConn::in_transaction(&pool.current_or_checkout().await?));
                        // Nothing is committed before the outermost scope ends.
                        assert_eq!(values(&pool, &t).await, Vec::<i64>::new());
                        Ok(())
                    })
                    .await;
                done.unwrap();
                assert_eq!(values(&pool, &t).await, vec![1, 2, 3]);
                drop_table(&pool, &t).await;
            })
            .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn a_failed_joining_scope_rolls_the_transaction_back() {
            bounded(async {
                let pool = pool(2).await;
                let t = unique("ambient_rollback_only");
                let _t_guard = table_guard(&t);
                create(&pool, &t).await;
                let done: Result<(), F> = pool
                    .transaction()
                    .run(async {
                        insert(&pool, &t, 1).await?;
                        let inner: Result<(), F> = pool
                            .transaction()
                            .run(async {
                                insert(&pool, &t, 2).await?;
                                Err(Fail::App("inner"))
                            })
                            .await;
                        assert!(matches!(inner, Err(Fail::App("inner"))));
                        Ok(()) // the inner error swallowed
                    })
                    .await;
                assert!(matches!(done, Err(Fail::Tx(TxError::RollbackOnly))), "{done:?}");
                assert_eq!(values(&pool, &t).await, Vec::<i64>::new());
                drop_table(&pool, &t).await;
            })
            .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn a_nested_savepoint_rolls_back_while_the_outer_commits() {
            bounded(async {
                let pool = pool(2).await;
                let t = unique("ambient_nested");
                let _t_guard = table_guard(&t);
                create(&pool, &t).await;
                let done: Result<(), F> = pool
                    .transaction()
                    .run(async {
                        insert(&pool, &t, 1).await?;
                        let failed: Result<(), F> = pool
                            .transaction()
                            .propagation(Propagation::Nested)
                            .run(async {
                                insert(&pool, &t, 2).await?;
                                assert_eq!(values_in_tx(&pool, &t).await, vec![1, 2]);
                                Err(Fail::App("savepoint"))
                            })
                            .await;
                        assert!(matches!(failed, Err(Fail::App("savepoint"))));
                        assert_eq!(values_in_tx(&pool, &t).await, vec![1]);
                        let panicked = AssertUnwindSafe(
                            pool.transaction()
                                .propagation(Propagation::Nested)
                                .run(async {
                                    insert(&pool, &t, 3).await?;
                                    if t.len() > 1 {
                                        panic!("inside a savepoint");
                                    }
                                    Ok::<(), F>(())
                                }),
                        )
                        .catch_unwind()
                        .await;
                        assert!(panicked.is_err(), "the panic goes on to the caller");
                        pool.transaction()
                            .propagation(Propagation::Nested)
                            .run(insert(&pool, &t, 4))
                            .await?;
                        Ok(())
                    })
                    .await;
                done.unwrap();
                assert_eq!(values(&pool, &t).await, vec![1, 4]);

                // Without a current transaction, nested begins one.
                let began: Result<bool, F> = pool
                    .transaction()
                    .propagation(Propagation::Nested)
                    .run(async { Ok(pool.in_transaction()) })
                    .await;
                assert!(began.unwrap());
                drop_table(&pool, &t).await;
            })
            .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn requires_new_commits_while_the_outer_rolls_back() {
            bounded(async {
                let pool = pool(2).await;
                let t = unique("ambient_requires_new");
                let _t_guard = table_guard(&t);
                create(&pool, &t).await;
                let done: Result<(), F> = pool
                    .transaction()
                    .run(async {
                        pool.transaction()
                            .propagation(Propagation::RequiresNew)
                            .run(async {
                                insert(&pool, &t, 1).await?;
                                assert_eq!(pool.metrics().in_use, 2, "a second connection");
                                Ok::<(), F>(())
                            })
                            .await?;
                        // Committed already, seen from outside.
                        assert_eq!(values(&pool, &t).await, vec![1]);
                        insert(&pool, &t, 2).await?;
                        Err(Fail::App("outer"))
                    })
                    .await;
                assert!(matches!(done, Err(Fail::App("outer"))));
                assert_eq!(values(&pool, &t).await, vec![1]);
                drop_table(&pool, &t).await;
            })
            .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn requires_new_on_a_pool_of_one_fails_at_once_with_the_cause() {
            bounded(async {
                // acquire_timeout is 30 s: an error from waiting would be
                // `Checkout(Timeout)` after it, and trip the test's bound.
                let pool = pool(1).await;
                let done: Result<(), F> = pool
                    .transaction()
                    .run(async {
                        let inner: Result<(), F> = pool
                            .transaction()
                            .propagation(Propagation::RequiresNew)
                            .run(async { Ok(()) })
                            .await;
                        match inner {
                            Err(Fail::Tx(e @ TxError::Exhausted { held: 1, max_size: 1 })) => {
                                let text = e.to_string();
                                assert!(text.contains("requires-new"), "{text}");
                                assert!(text.contains("1 of the pool's 1"), "{text}");
                            }
                            other => panic!("expected Exhausted, got {other:?}"),
                        }
                        Ok(())
                    })
                    .await;
                done.unwrap();
            })
            .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn commit_rollback_and_panic_end_the_transaction() {
            bounded(async {
                let pool = pool(1).await;
                let monitor = monitor().await;
                let t = unique("ambient_outcome");
                let _t_guard = table_guard(&t);
                create(&pool, &t).await;
                let id = Arc::new(Mutex::new(0_i64));

                let committed: Result<(), F> = pool
                    .transaction()
                    .run(async {
                        insert(&pool, &t, 1).await?;
                        let session = session_id(&mut *pool.current().await?).await;
                        *id.lock().unwrap() = session;
                        assert!(eventually(SERVER_WAIT, || async { open_on_server(&monitor, session).await }).await);
                        Ok(())
                    })
                    .await;
                committed.unwrap();
                let session = *id.lock().unwrap();
                assert!(eventually(SERVER_WAIT, || async { !open_on_server(&monitor, session).await }).await);
                assert_eq!(values(&pool, &t).await, vec![1]);

                let rolled_back: Result<(), F> = pool
                    .transaction()
                    .run(async {
                        insert(&pool, &t, 2).await?;
                        Err(Fail::App("roll back"))
                    })
                    .await;
                assert!(matches!(rolled_back, Err(Fail::App("roll back"))));
                assert!(eventually(SERVER_WAIT, || async { !open_on_server(&monitor, session).await }).await);
                assert_eq!(values(&pool, &t).await, vec![1]);

                let panicked = AssertUnwindSafe(pool.transaction().run(async {
                    insert(&pool, &t, 3).await?;
                    if t.len() > 1 {
                        panic!("boom in the scope");
                    }
                    Ok::<(), F>(())
                }))
                .catch_unwind()
                .await;
                let payload = panicked.expect_err("the panic goes on to the caller");
                assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom in the scope"));
                // Rolled back before the panic went on: nothing open now.
                assert!(eventually(SERVER_WAIT, || async { !open_on_server(&monitor, session).await }).await);
                assert_eq!(values(&pool, &t).await, vec![1]);
                drop_table(&pool, &t).await;
            })
            .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn a_scope_dropped_mid_query_leaves_no_transaction_open() {
            bounded(async {
                let pool = pool(1).await;
                let monitor = monitor().await;
                let t = unique("ambient_cancelled");
                let _t_guard = table_guard(&t);
                create(&pool, &t).await;
                let id = Arc::new(Mutex::new(None::<i64>));
                let (started, running) = tokio::sync::oneshot::channel::<()>();
                let scope = pool.transaction().run(async {
                    let mut conn = pool.current().await?;
                    let session = session_id(&mut conn).await;
                    *id.lock().unwrap() = Some(session);
                    exec(&mut conn, format!("INSERT INTO {t} (v) VALUES (1)")).await;
                    started.send(()).unwrap();
                    exec(&mut conn, SLOW.to_owned()).await;
                    std::future::pending::<()>().await;
                    Ok::<(), F>(())
                });
                tokio::select! {
                    _ = scope => panic!("the scope cannot finish"),
                    _ = running => {}
                }
                // The scope future is dropped now, its query in flight.
                let session = id.lock().unwrap().expect("the scope ran");
                assert!(
                    eventually(SERVER_WAIT, || async { !open_on_server(&monitor, session).await }).await,
                    "the server still has the cancelled scope's transaction open"
                );
                assert_eq!(values(&pool, &t).await, Vec::<i64>::new());
                drop_table(&pool, &t).await;
            })
            .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn two_pools_in_one_task_do_not_mix() {
            bounded(async {
                let a = pool(1).await;
                let b = pool(1).await;
                let ta = unique("ambient_pool_a");
                let _ta_guard = table_guard(&ta);
                let tb = unique("ambient_pool_b");
                let _tb_guard = table_guard(&tb);
                create(&a, &ta).await;
                create(&b, &tb).await;
                let done: Result<(), F> = a
                    .transaction()
                    .run(async {
                        insert(&a, &ta, 1).await?;
                        assert!(!b.in_transaction());
                        assert!(matches!(b.current().await, Err(TxError::NoTransaction)));
                        let inner: Result<(), F> = b
                            .transaction()
                            .run(async {
                                insert(&b, &tb, 1).await?;
                                // The other pool's transaction is still reachable.
                                insert(&a, &ta, 2).await?;
                                Err(Fail::App("b rolls back"))
                            })
                            .await;
                        assert!(matches!(inner, Err(Fail::App(_))));
                        Ok(())
                    })
                    .await;
                done.unwrap();
                assert_eq!(values(&a, &ta).await, vec![1, 2]);
                assert_eq!(values(&b, &tb).await, Vec::<i64>::new());
                drop_table(&a, &ta).await;
                drop_table(&b, &tb).await;
            })
            .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn joined_futures_see_the_scope() {
            bounded(async {
                let pool = pool(2).await;
                let t = unique("ambient_joined");
                let _t_guard = table_guard(&t);
                create(&pool, &t).await;
                let done: Result<(), F> = pool
                    .transaction()
                    .run(async {
                        let (x, y) = tokio::join!(insert(&pool, &t, 1), insert(&pool, &t, 2));
                        x?;
                        y?;
                        let mut set: FuturesUnordered<_> =
                            (3..6).map(|v| insert(&pool, &t, v)).collect();
                        while let Some(done) = set.next().await {
                            done?;
                        }
                        assert_eq!(pool.metrics().in_use, 1, "all on the one connection");
                        Err(Fail::App("roll back"))
                    })
                    .await;
                assert!(matches!(done, Err(Fail::App(_))));
                assert_eq!(values(&pool, &t).await, Vec::<i64>::new());
                drop_table(&pool, &t).await;
            })
            .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn a_plain_spawn_does_not_see_the_scope_an_explicit_one_does() {
            bounded(async {
                let pool = pool(2).await;
                let t = unique("ambient_spawned");
                let _t_guard = table_guard(&t);
                create(&pool, &t).await;
                let done: Result<(), F> = pool
                    .transaction()
                    .run(async {
                        let p = pool.clone();
                        let unseen = tokio::spawn(async move {
                            !p.in_transaction()
                                && matches!(p.current().await, Err(TxError::NoTransaction))
                        });
                        assert!(unseen.await.unwrap(), "tokio::spawn inherits nothing");

                        let (p, t2) = (pool.clone(), t.clone());
                        pool_ambient::spawn(async move { insert(&p, &t2, 1).await })
                            .await
                            .unwrap()?;
                        // The scope and a handed task at once, on one connection.
                        let (p, t2) = (pool.clone(), t.clone());
                        let child = pool_ambient::spawn(async move {
                            for v in 10..20 {
                                insert(&p, &t2, v).await?;
                            }
                            Ok::<(), F>(())
                        });
                        for v in 20..30 {
                            insert(&pool, &t, v).await?;
                        }
                        child.await.unwrap()?;
                        assert_eq!(values(&pool, &t).await, Vec::<i64>::new());
                        // Still running when the body returns: the scope waits.
                        let (p, t2) = (pool.clone(), t.clone());
                        drop(pool_ambient::spawn(async move {
                            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                            insert(&p, &t2, 100).await
                        }));
                        Ok(())
                    })
                    .await;
                done.unwrap();
                let committed = values(&pool, &t).await;
                assert_eq!(committed.len(), 22, "{committed:?}");
                assert_eq!(committed.last(), Some(&100));

                // A handed task that fails: nothing of the scope commits.
                let failed: Result<(), F> = pool
                    .transaction()
                    .run(async {
                        insert(&pool, &t, 200).await?;
                        let (p, t2) = (pool.clone(), t.clone());
                        drop(pool_ambient::spawn(async move {
                            insert(&p, &t2, 201).await?;
                            Err::<(), F>(Fail::App("child"))
                        }));
                        Ok(())
                    })
                    .await;
                assert!(matches!(failed, Err(Fail::Tx(TxError::ChildFailed))), "{failed:?}");
                assert_eq!(values(&pool, &t).await.len(), 22);

                // A savepoint while a handed task shares the transaction.
                let shared: Result<(), F> = pool
                    .transaction()
                    .run(async {
                        let (go, wait) = tokio::sync::oneshot::channel::<()>();
                        let child = pool_ambient::spawn(async move {
                            let _ = wait.await;
                            Ok::<(), F>(())
                        });
                        let nested: Result<(), F> = pool
                            .transaction()
                            .propagation(Propagation::Nested)
                            .run(async { Ok(()) })
                            .await;
                        assert!(matches!(nested, Err(Fail::Tx(TxError::Shared))), "{nested:?}");
                        go.send(()).unwrap();
                        child.await.unwrap()
                    })
                    .await;
                shared.unwrap();
                drop_table(&pool, &t).await;
            })
            .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn sibling_savepoints_each_end_their_own() {
            bounded(async {
                let pool = pool(1).await;
                let t = unique("ambient_siblings");
                let _table = table_guard(&t);
                create(&pool, &t).await;
                let done: Result<(), F> = pool
                    .transaction()
                    .run(async {
                        let (b_in, b_in_rx) = tokio::sync::oneshot::channel::<()>();
                        let (a_in, a_in_rx) = tokio::sync::oneshot::channel::<()>();
                        let (b_out, b_out_rx) = tokio::sync::oneshot::channel::<()>();
                        // B opens its savepoint and inserts; A then opens one and
                        // inserts; B fails, A succeeds.
                        let b = async {
                            let r: Result<(), F> = pool
                                .transaction()
                                .propagation(Propagation::Nested)
                                .run(async {
                                    insert(&pool, &t, 1).await?;
                                    let _ = b_in.send(());
                                    // A cannot insert while B's savepoint is open if
                                    // siblings take turns: B then fails on its own.
                                    let _ = tokio::time::timeout(std::time::Duration::from_millis(500), a_in_rx).await;
                                    Err(Fail::App("b fails"))
                                })
                                .await;
                            let _ = b_out.send(());
                            r
                        };
                        let a = async {
                            let _ = b_in_rx.await;
                            pool.transaction()
                                .propagation(Propagation::Nested)
                                .run(async {
                                    insert(&pool, &t, 2).await?;
                                    let _ = a_in.send(());
                                    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), b_out_rx).await;
                                    Ok::<(), F>(())
                                })
                                .await
                        };
                        let (a, b) = tokio::join!(a, b);
                        assert!(matches!(b, Err(Fail::App("b fails"))), "{b:?}");
                        a?;
                        Ok(())
                    })
                    .await;
                done.unwrap();
                assert_eq!(
                    values(&pool, &t).await,
                    vec![2],
                    "A released, B rolled back"
                );

                // A plain statement from a sibling future while B's savepoint is
                // open waits for it to end: it belongs to the outer transaction.
                sqlx::query(AssertSqlSafe(format!("DELETE FROM {t}")))
                    .execute(&pool)
                    .await
                    .unwrap();
                let done: Result<(), F> = pool
                    .transaction()
                    .run(async {
                        let (b_in, b_in_rx) = tokio::sync::oneshot::channel::<()>();
                        let b = pool
                            .transaction()
                            .propagation(Propagation::Nested)
                            .run(async {
                                insert(&pool, &t, 1).await?;
                                let _ = b_in.send(());
                                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                                Err::<(), F>(Fail::App("b fails"))
                            });
                        let a = async {
                            let _ = b_in_rx.await;
                            insert(&pool, &t, 2).await
                        };
                        let (a, b) = tokio::join!(a, b);
                        assert!(matches!(b, Err(Fail::App("b fails"))), "{b:?}");
                        a
                    })
                    .await;
                done.unwrap();
                assert_eq!(values(&pool, &t).await, vec![2], "the outer statement kept");
            })
            .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn after_commit_runs_only_after_its_own_commit() {
            bounded(async {
                let pool = pool(2).await;
                let log = Arc::new(Mutex::new(Vec::<&'static str>::new()));
                let note = |what: &'static str| {
                    let log = log.clone();
                    move || log.lock().unwrap().push(what)
                };
                assert!(matches!(
                    pool.after_commit(note("outside")),
                    Err(TxError::NoTransaction)
                ));

                let done: Result<(), F> = pool
                    .transaction()
                    .run(async {
                        pool.after_commit(note("outer"))?;
                        pool.transaction()
                            .propagation(Propagation::RequiresNew)
                            .run(async {
                                pool.after_commit(note("requires-new"))?;
                                Ok::<(), F>(())
                            })
                            .await?;
                        assert_eq!(*log.lock().unwrap(), vec!["requires-new"]);
                        let _ = pool
                            .transaction()
                            .propagation(Propagation::Nested)
                            .run(async {
                                pool.after_commit(note("rolled-back savepoint"))?;
                                Err::<(), F>(Fail::App("savepoint"))
                            })
                            .await;
                        pool.transaction()
                            .propagation(Propagation::Nested)
                            .run(async {
                                pool.after_commit(note("released savepoint"))?;
                                Ok::<(), F>(())
                            })
                            .await?;
                        assert_eq!(*log.lock().unwrap(), vec!["requires-new"]);
                        Ok(())
                    })
                    .await;
                done.unwrap();
                assert_eq!(
                    *log.lock().unwrap(),
                    vec!["requires-new", "outer", "released savepoint"]
                );

                let rolled_back: Result<(), F> = pool
                    .transaction()
                    .run(async {
                        pool.after_commit(note("never"))?;
                        Err(Fail::App("roll back"))
                    })
                    .await;
                assert!(rolled_back.is_err());
                assert_eq!(log.lock().unwrap().len(), 3);
            })
            .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn a_guard_returned_from_the_body_commits_nothing() {
            bounded(async {
                let pool = pool(1).await;
                let t = unique("ambient_escaped");
                let _t_guard = table_guard(&t);
                create(&pool, &t).await;
                let done = pool
                    .transaction()
                    .run(async {
                        insert(&pool, &t, 1).await?;
                        Ok::<_, F>(pool.current().await?)
                    })
                    .await;
                assert!(matches!(done, Err(Fail::Tx(TxError::Busy))), "{done:?}");
                assert_eq!(values(&pool, &t).await, Vec::<i64>::new());
                drop_table(&pool, &t).await;
            })
            .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn a_closed_pool_fails_the_checkout() {
            bounded(async {
                let pool = pool(1).await;
                pool.close().await;
                let done: Result<(), F> = pool.transaction().run(async { Ok(()) }).await;
                assert!(
                    matches!(done, Err(Fail::Tx(TxError::Checkout(pool_core::PoolError::Closed)))),
                    "{done:?}"
                );
            })
            .await;
        }
    };
}
