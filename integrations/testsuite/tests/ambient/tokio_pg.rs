//! Ambient transactions on tokio-postgres (`DATABASE_URL`): the same
//! outcomes as the sqlx suite, with `pg_stat_activity` as the judge of
//! what the server still has open, queries from a scope and a handed task
//! pipelined on the one client, and a cancelled scope on a pool that does
//! not reset (`ResetMode::None`), whose connection is closed instead.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use pool_ambient::AmbientExt;
use pool_ambient::{self, Isolation, Propagation, TxError};
use pool_core::Pool;
use pool_postgres::{PgError, PostgresManager, ResetMode};
use tokio_postgres::NoTls;

use crate::support::db::{bounded, eventually, unique};
use crate::{Fail, SERVER_WAIT};

type P = Pool<PostgresManager<NoTls>>;
type F = Fail<PgError>;

async fn pool_with(max_size: u32, mode: ResetMode) -> P {
    let url = crate::support::db::url("DATABASE_URL");
    let config: tokio_postgres::Config = url.parse().unwrap();
    let pool_config = crate::support::db::named_config(
        "ambient-tokio-postgres",
        max_size,
        Duration::from_secs(30),
    );
    Pool::new(
        PostgresManager::new(config, NoTls).reset_mode(mode),
        pool_config,
    )
    .await
    .unwrap()
}

async fn pool(max_size: u32) -> P {
    pool_with(max_size, ResetMode::default()).await
}

/// A pool of one for asking the server.
async fn monitor() -> P {
    pool(1).await
}

/// Runs `sql` in the current transaction.
async fn exec(pool: &P, sql: String) -> Result<(), F> {
    let conn = pool.current().await?;
    conn.batch_execute(&sql).await.unwrap();
    Ok(())
}

async fn insert(pool: &P, t: &str, v: i64) -> Result<(), F> {
    exec(pool, format!("INSERT INTO {t} (v) VALUES ({v})")).await
}

async fn plain(pool: &P, sql: &str) {
    pool.get().await.unwrap().batch_execute(sql).await.unwrap();
}

async fn values(pool: &P, t: &str) -> Vec<i64> {
    let conn = pool.get().await.unwrap();
    let rows = conn
        .query(format!("SELECT v FROM {t} ORDER BY v").as_str(), &[])
        .await
        .unwrap();
    rows.iter().map(|row| row.get(0)).collect()
}

async fn pid(pool: &P) -> i32 {
    let conn = pool.current().await.unwrap();
    conn.query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0)
}

/// Whether backend `pid` is in a transaction or busy (no row: closed).
async fn open_on_server(monitor: &P, pid: i32) -> bool {
    let conn = monitor.get().await.unwrap();
    let n: i64 = conn
        .query_one(
            "SELECT COUNT(*) FROM pg_stat_activity \
             WHERE pid = $1 AND (xact_start IS NOT NULL OR state <> 'idle')",
            &[&pid],
        )
        .await
        .unwrap()
        .get(0);
    n > 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn every_propagation_mode() {
    bounded(async {
        let pool = pool(2).await;
        let t = unique("ambient_tp_modes");
        let _table = crate::pg_common::TableGuard { name: t.clone() };
        plain(&pool, &format!("CREATE TABLE {t} (v BIGINT)")).await;
        assert!(matches!(pool.current().await, Err(TxError::NoTransaction)));
        let mandatory: Result<(), F> = pool
            .transaction()
            .propagation(Propagation::Mandatory)
            .run(async { Ok(()) })
            .await;
        assert!(matches!(mandatory, Err(Fail::Tx(TxError::NoTransaction))));

        let done: Result<(), F> = pool
            .transaction()
            .run(async {
                insert(&pool, &t, 1).await?;
                pool.transaction().run(insert(&pool, &t, 2)).await?;
                pool.transaction()
                    .propagation(Propagation::Mandatory)
                    .run(insert(&pool, &t, 3))
                    .await?;
                let never: Result<(), F> = pool
                    .transaction()
                    .propagation(Propagation::Never)
                    .run(async { Ok(()) })
                    .await;
                assert!(matches!(
                    never,
                    Err(Fail::Tx(TxError::AlreadyInTransaction))
                ));
                let savepoint: Result<(), F> = pool
                    .transaction()
                    .propagation(Propagation::Nested)
                    .run(async {
                        insert(&pool, &t, 4).await?;
                        Err(Fail::App("savepoint"))
                    })
                    .await;
                assert!(matches!(savepoint, Err(Fail::App(_))));
                pool.transaction()
                    .propagation(Propagation::Nested)
                    .run(insert(&pool, &t, 5))
                    .await?;
                pool.transaction()
                    .propagation(Propagation::RequiresNew)
                    .run(insert(&pool, &t, 6))
                    .await?;
                assert_eq!(values(&pool, &t).await, vec![6], "requires-new committed");
                Ok(())
            })
            .await;
        done.unwrap();
        assert_eq!(values(&pool, &t).await, vec![1, 2, 3, 5, 6]);

        // Requires-new commits while the outer rolls back.
        let done: Result<(), F> = pool
            .transaction()
            .run(async {
                insert(&pool, &t, 7).await?;
                pool.transaction()
                    .propagation(Propagation::RequiresNew)
                    .run(insert(&pool, &t, 8))
                    .await?;
                Err(Fail::App("outer"))
            })
            .await;
        assert!(matches!(done, Err(Fail::App(_))));
        assert_eq!(values(&pool, &t).await, vec![1, 2, 3, 5, 6, 8]);

        // Isolation and read-only reach the server.
        let done: Result<(), F> = pool
            .transaction()
            .isolation(Isolation::RepeatableRead)
            .read_only(true)
            .run(async {
                let conn = pool.current().await?;
                let level: String = conn
                    .query_one("SHOW transaction_isolation", &[])
                    .await
                    .unwrap()
                    .get(0);
                let read_only: String = conn
                    .query_one("SHOW transaction_read_only", &[])
                    .await
                    .unwrap()
                    .get(0);
                assert_eq!(
                    (level.as_str(), read_only.as_str()),
                    ("repeatable read", "on")
                );
                Ok(())
            })
            .await;
        done.unwrap();
        plain(&pool, &format!("DROP TABLE {t}")).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn commit_rollback_panic_and_cancellation_leave_nothing_open() {
    bounded(async {
        let pool = pool(1).await;
        let monitor = monitor().await;
        let t = unique("ambient_tp_outcome");
        let _table = crate::pg_common::TableGuard { name: t.clone() };
        plain(&pool, &format!("CREATE TABLE {t} (v BIGINT)")).await;
        let backend = Arc::new(Mutex::new(0));

        let done: Result<(), F> = pool
            .transaction()
            .run(async {
                insert(&pool, &t, 1).await?;
                let id = pid(&pool).await;
                *backend.lock().unwrap() = id;
                assert!(open_on_server(&monitor, id).await);
                Ok(())
            })
            .await;
        done.unwrap();
        let id = *backend.lock().unwrap();
        assert!(!open_on_server(&monitor, id).await);

        let done: Result<(), F> = pool
            .transaction()
            .run(async {
                insert(&pool, &t, 2).await?;
                Err(Fail::App("roll back"))
            })
            .await;
        assert!(matches!(done, Err(Fail::App(_))));
        assert!(!open_on_server(&monitor, id).await);

        let panicked = AssertUnwindSafe(pool.transaction().run(async {
            insert(&pool, &t, 3).await?;
            if t.len() > 1 {
                panic!("boom in the scope");
            }
            Ok::<(), F>(())
        }))
        .catch_unwind()
        .await;
        assert!(panicked.is_err(), "the panic goes on to the caller");
        assert!(!open_on_server(&monitor, id).await);

        let (started, running) = tokio::sync::oneshot::channel::<()>();
        let scope = pool.transaction().run(async {
            insert(&pool, &t, 4).await?;
            started.send(()).unwrap();
            exec(&pool, "SELECT pg_sleep(2)".to_owned()).await?;
            std::future::pending::<()>().await;
            Ok::<(), F>(())
        });
        tokio::select! {
            _ = scope => panic!("the scope cannot finish"),
            _ = running => {}
        }
        assert!(
            eventually(SERVER_WAIT, || async {
                !open_on_server(&monitor, id).await
            })
            .await,
            "the cancelled scope's transaction is still open on the server"
        );
        assert_eq!(values(&pool, &t).await, vec![1]);
        plain(&pool, &format!("DROP TABLE {t}")).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn a_cancelled_scope_on_a_pool_that_does_not_reset_closes_its_connection() {
    bounded(async {
        let pool = pool_with(1, ResetMode::None).await;
        let monitor = monitor().await;
        let t = unique("ambient_tp_no_reset");
        let _table = crate::pg_common::TableGuard { name: t.clone() };
        plain(&pool, &format!("CREATE TABLE {t} (v BIGINT)")).await;
        let backend = Arc::new(Mutex::new(0));
        let (started, running) = tokio::sync::oneshot::channel::<()>();
        let scope = pool.transaction().run(async {
            insert(&pool, &t, 1).await?;
            let id = pid(&pool).await;
            *backend.lock().unwrap() = id;
            started.send(()).unwrap();
            std::future::pending::<()>().await;
            Ok::<(), F>(())
        });
        tokio::select! {
            _ = scope => panic!("the scope cannot finish"),
            _ = running => {}
        }
        let id = *backend.lock().unwrap();
        assert!(
            eventually(SERVER_WAIT, || async {
                !open_on_server(&monitor, id).await
            })
            .await
        );
        assert_eq!(values(&pool, &t).await, Vec::<i64>::new());
        plain(&pool, &format!("DROP TABLE {t}")).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn two_pools_and_handed_tasks() {
    bounded(async {
        let a = pool(2).await;
        let b = pool(1).await;
        let t = unique("ambient_tp_tasks");
        let _table = crate::pg_common::TableGuard { name: t.clone() };
        plain(&a, &format!("CREATE TABLE {t} (v BIGINT)")).await;
        let done: Result<(), F> = a
            .transaction()
            .run(async {
                assert!(matches!(b.current().await, Err(TxError::NoTransaction)));
                let inner: Result<(), F> = b
                    .transaction()
                    .run(async {
                        exec(&b, format!("INSERT INTO {t} (v) VALUES (-1)")).await?;
                        insert(&a, &t, 1).await?;
                        Err(Fail::App("b rolls back"))
                    })
                    .await;
                assert!(matches!(inner, Err(Fail::App(_))));

                let p = a.clone();
                let unseen = tokio::spawn(async move { !p.in_transaction() });
                assert!(unseen.await.unwrap(), "tokio::spawn inherits nothing");

                // The scope and a handed task at once: pipelined on one client.
                let (p, t2) = (a.clone(), t.clone());
                let child = pool_ambient::spawn(async move {
                    for v in 10..20 {
                        insert(&p, &t2, v).await?;
                    }
                    Ok::<(), F>(())
                });
                for v in 20..30 {
                    insert(&a, &t, v).await?;
                }
                child.await.unwrap()?;
                assert_eq!(a.metrics().in_use, 1);
                Ok(())
            })
            .await;
        done.unwrap();
        let committed = values(&a, &t).await;
        assert_eq!(committed.len(), 21, "{committed:?}");
        assert_eq!(committed.first(), Some(&1), "b's row rolled back with b");
        plain(&a, &format!("DROP TABLE {t}")).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn requires_new_on_a_pool_of_one_fails_at_once_and_holders_name_the_scope() {
    bounded(async {
        let pool = pool(1).await;
        let line = line!() + 1;
        let done = pool.transaction().run(async {
            let holders = pool.holders();
            assert_eq!(holders.len(), 1);
            assert_eq!(
                (holders[0].location.file(), holders[0].location.line()),
                (file!(), line)
            );
            let inner: Result<(), F> = pool
                .transaction()
                .propagation(Propagation::RequiresNew)
                .run(async { Ok(()) })
                .await;
            assert!(
                matches!(
                    inner,
                    Err(Fail::Tx(TxError::Exhausted {
                        held: 1,
                        max_size: 1
                    }))
                ),
                "{inner:?}"
            );
            Ok::<(), F>(())
        });
        done.await.unwrap();
    })
    .await;
}

/// Whether the next checkout's session is outside any transaction, by the
/// server's clocks.
async fn checkout_is_outside_a_transaction(pool: &P) -> bool {
    let conn = pool.get().await.unwrap();
    match conn
        .simple_query(crate::pg_common::OUTSIDE_A_TRANSACTION)
        .await
    {
        Ok(messages) => messages.iter().any(|m| {
            matches!(m, tokio_postgres::SimpleQueryMessage::Row(row) if row.get(0) == Some("t"))
        }),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn sibling_savepoints_each_end_their_own() {
    bounded(async {
        let pool = pool(1).await;
        let table = crate::pg_common::TableGuard::new("ambient_tp_siblings");
        let t = table.name.clone();
        plain(&pool, &format!("CREATE TABLE {t} (v BIGINT)")).await;
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
                            let _ = tokio::time::timeout(Duration::from_millis(500), a_in_rx).await;
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
                            let _ = tokio::time::timeout(Duration::from_secs(5), b_out_rx).await;
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
        plain(&pool, &format!("DELETE FROM {t}")).await;
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
                        tokio::time::sleep(Duration::from_millis(200)).await;
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
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn a_commit_the_server_turned_into_a_rollback_is_an_error() {
    bounded(async {
        let pool = pool(1).await;
        let table = crate::pg_common::TableGuard::new("ambient_tp_swallowed");
        let t = table.name.clone();
        plain(&pool, &format!("CREATE TABLE {t} (v BIGINT)")).await;
        let done: Result<(), F> = pool
            .transaction()
            .run(async {
                insert(&pool, &t, 1).await?;
                let conn = pool.current().await?;
                // Caught and swallowed: the transaction is aborted now.
                assert!(conn.batch_execute("SELECT 1 / 0").await.is_err());
                Ok(())
            })
            .await;
        assert!(
            matches!(done, Err(Fail::Tx(TxError::CommitRolledBack))),
            "{done:?}"
        );
        let text = TxError::<PgError>::CommitRolledBack.to_string();
        assert!(text.contains("rolled back"), "{text}");
        assert_eq!(values(&pool, &t).await, Vec::<i64>::new());
        assert!(checkout_is_outside_a_transaction(&pool).await);
        // The same inside a savepoint that rolls back recovers: committed.
        let done: Result<(), F> = pool
            .transaction()
            .run(async {
                insert(&pool, &t, 2).await?;
                let _ = pool
                    .transaction()
                    .propagation(Propagation::Nested)
                    .run(async {
                        let conn = pool.current().await?;
                        assert!(conn.batch_execute("SELECT 1 / 0").await.is_err());
                        Err::<(), F>(Fail::App("failed statement"))
                    })
                    .await;
                Ok(())
            })
            .await;
        done.unwrap();
        assert_eq!(values(&pool, &t).await, vec![2]);
    })
    .await;
}

/// One operation of the cancellation sweeps: `what` names it.
async fn cancel_op(pool: &P, t: &str, what: &str, n: usize) -> Result<(), F> {
    let v = i64::try_from(n).unwrap();
    match what {
        "scope commit" => {
            pool.transaction()
                .run(async {
                    tokio::task::yield_now().await;
                    insert(pool, t, v).await?;
                    tokio::task::yield_now().await;
                    Ok(())
                })
                .await
        }
        "scope rollback" => {
            pool.transaction()
                .run(async {
                    insert(pool, t, v).await?;
                    Err(Fail::App("roll back"))
                })
                .await
        }
        "savepoints" => {
            pool.transaction()
                .run(async {
                    insert(pool, t, v).await?;
                    pool.transaction()
                        .propagation(Propagation::Nested)
                        .run(async {
                            tokio::task::yield_now().await;
                            insert(pool, t, v).await
                        })
                        .await?;
                    let _ = pool
                        .transaction()
                        .propagation(Propagation::Nested)
                        .run(async {
                            insert(pool, t, v).await?;
                            Err::<(), F>(Fail::App("savepoint"))
                        })
                        .await;
                    Err(Fail::App("outer rolls back"))
                })
                .await
        }
        "client commit" | "client rollback" | "client dropped" => {
            let mut conn = pool.get().await.unwrap();
            let tx = conn.transaction().await.unwrap();
            tokio::task::yield_now().await;
            if what == "client dropped" {
                drop(tx);
                return Ok(());
            }
            tx.execute(format!("INSERT INTO {t} (v) VALUES ({v})").as_str(), &[])
                .await
                .unwrap();
            if what == "client commit" {
                tx.commit().await.unwrap();
            } else {
                tx.rollback().await.unwrap();
            }
            Ok(())
        }
        _ => unreachable!("{what}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn cancelled_at_any_point_the_next_checkout_is_outside_a_transaction() {
    bounded(async {
        let pool = pool(1).await;
        let table = crate::pg_common::TableGuard::new("ambient_tp_cancel");
        let t = table.name.clone();
        plain(&pool, &format!("CREATE TABLE {t} (v BIGINT)")).await;
        for what in [
            "scope commit",
            "scope rollback",
            "savepoints",
            "client commit",
            "client rollback",
            "client dropped",
        ] {
            crate::pg_common::sweep(
                what,
                |n| cancel_op(&pool, &t, what, n),
                |n, _| {
                    let pool = &pool;
                    async move {
                        assert!(
                            checkout_is_outside_a_transaction(pool).await,
                            "{what} cancelled at point {n}: the next checkout is inside a transaction"
                        );
                    }
                },
            )
            .await;
        }
        // Nothing that was to roll back was kept.
        plain(&pool, &format!("DELETE FROM {t}")).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn a_savepoint_scope_cancelled_anywhere_rolls_the_transaction_back() {
    bounded(async {
        let pool = pool(1).await;
        let table = crate::pg_common::TableGuard::new("ambient_tp_cancel_sp");
        let t = table.name.clone();
        plain(&pool, &format!("CREATE TABLE {t} (v BIGINT)")).await;
        // The inner scope is cut at its n-th suspension; the outer goes on.
        let mut finished = false;
        for n in 0..crate::pg_common::MAX_POINTS {
            finished = {
                let (pool, t) = (&pool, &t);
                async move {
                    let cancelled = Arc::new(Mutex::new(false));
                    let done: Result<(), F> = pool
                        .transaction()
                        .run(async {
                            insert(pool, t, 1).await?;
                            let inner =
                                pool.transaction()
                                    .propagation(Propagation::Nested)
                                    .run(async {
                                        tokio::task::yield_now().await;
                                        insert(pool, t, 2).await?;
                                        tokio::task::yield_now().await;
                                        Ok::<(), F>(())
                                    });
                            match crate::pg_common::cancel_at_pending(inner, n).await {
                                None => *cancelled.lock().unwrap() = true,
                                Some(r) => r?,
                            }
                            insert(pool, t, 3).await?;
                            Ok(())
                        })
                        .await;
                    let cancelled = *cancelled.lock().unwrap();
                    let kept = values(pool, t).await;
                    if cancelled {
                        assert!(
                            matches!(done, Err(Fail::Tx(TxError::RollbackOnly))),
                            "cut at {n}: {done:?}"
                        );
                        assert_eq!(kept, Vec::<i64>::new(), "cut at {n}");
                    } else {
                        done.unwrap();
                        assert_eq!(kept, vec![1, 2, 3]);
                    }
                    assert!(checkout_is_outside_a_transaction(pool).await, "cut at {n}");
                    plain(pool, &format!("DELETE FROM {t}")).await;
                    !cancelled
                }
            }
            .await;
            if finished {
                break;
            }
        }
        assert!(finished, "the savepoint scope never finished");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn a_handed_task_that_outlives_its_cancelled_scope_sends_nothing() {
    bounded(async {
        let pool = pool(2).await;
        let table = crate::pg_common::TableGuard::new("ambient_outlived");
        let t = table.name.clone();
        plain(&pool, &format!("CREATE TABLE {t} (v BIGINT)")).await;
        let (report, reported) = tokio::sync::oneshot::channel::<Result<(), F>>();
        let done: Result<(), F> = pool
            .transaction()
            .run(async {
                let joined = pool.transaction().run(async {
                    let (p, t2) = (pool.clone(), t.clone());
                    drop(pool_ambient::spawn(async move {
                        // The outer scope ends meanwhile.
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        let _ = report.send(insert(&p, &t2, 1).await);
                        Ok::<(), F>(())
                    }));
                    std::future::pending::<()>().await;
                    Ok::<(), F>(())
                });
                // The joined scope is cut; its task runs on.
                let _ = tokio::time::timeout(Duration::from_millis(50), joined).await;
                Ok(())
            })
            .await;
        assert!(
            matches!(done, Err(Fail::Tx(TxError::RollbackOnly))),
            "{done:?}"
        );
        let sent = reported.await.unwrap();
        assert!(matches!(sent, Err(Fail::Tx(TxError::Ended))), "{sent:?}");
        assert_eq!(
            values(&pool, &t).await,
            Vec::<i64>::new(),
            "nothing ran outside it"
        );
    })
    .await;
}
