//! The sqlx suite on PostgreSQL (`DATABASE_URL`), and what only
//! PostgreSQL shows: isolation and read-only on the server, a `COMMIT`, a
//! `BEGIN`, a `SAVEPOINT` and a `RELEASE` that fail, and the scope's call
//! site in `holders()`.

use std::time::Duration;

use pool_sqlx::{Pool as SqlxPool, SqlxManager};

use pool_core::{PoolConfig, ValidationMode};

type Conn = sqlx::PgConnection;

const SLOW: &str = "SELECT pg_sleep(2)";

fn config(max_size: u32) -> PoolConfig {
    crate::support::db::named_config("ambient-sqlx-pg", max_size, Duration::from_secs(30))
}

async fn pool(max_size: u32) -> P {
    let url = crate::support::db::url("DATABASE_URL");
    let manager = SqlxManager::<Conn>::from_url(&url).unwrap();
    SqlxPool::new(manager, config(max_size)).await.unwrap()
}

/// A pool of one on the same server.
async fn monitor() -> P {
    pool(1).await
}

async fn session_id(conn: &mut Conn) -> i64 {
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn)
        .await
        .unwrap();
    pid.into()
}

/// Whether backend `id` is in a transaction, or still busy, by
/// `pg_stat_activity` (a closed backend has no row: not open).
async fn open_on_server(monitor: &P, id: i64) -> bool {
    let sql = format!(
        "SELECT COUNT(*) FROM pg_stat_activity \
         WHERE pid = {id} AND (xact_start IS NOT NULL OR state <> 'idle')"
    );
    let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_one(monitor)
        .await
        .unwrap();
    n > 0
}

/// Drops table `name` when dropped, on every path.
fn table_guard(name: &str) -> Box<dyn Send> {
    Box::new(crate::pg_common::TableGuard {
        name: name.to_owned(),
    })
}

sqlx_suite!(#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]);

async fn show(pool: &P, setting: &'static str) -> String {
    let mut conn = pool.current().await.unwrap();
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SHOW {setting}")))
        .fetch_one(&mut *conn)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn isolation_and_read_only_reach_the_server() {
    bounded(async {
        let pool = pool(2).await;
        let done: Result<(), F> = pool
            .transaction()
            .isolation(pool_ambient::Isolation::Serializable)
            .read_only(true)
            .run(async {
                assert_eq!(show(&pool, "transaction_isolation").await, "serializable");
                assert_eq!(show(&pool, "transaction_read_only").await, "on");
                // Joining keeps the outer settings; requires-new has its own.
                pool.transaction()
                    .isolation(pool_ambient::Isolation::ReadCommitted)
                    .run(async {
                        assert_eq!(show(&pool, "transaction_isolation").await, "serializable");
                        Ok::<(), F>(())
                    })
                    .await?;
                pool.transaction()
                    .propagation(Propagation::RequiresNew)
                    .isolation(pool_ambient::Isolation::RepeatableRead)
                    .run(async {
                        assert_eq!(
                            show(&pool, "transaction_isolation").await,
                            "repeatable read"
                        );
                        assert_eq!(show(&pool, "transaction_read_only").await, "off");
                        Ok::<(), F>(())
                    })
                    .await?;
                let mut conn = pool.current().await?;
                let write = sqlx::query("CREATE TEMP TABLE ambient_refused (v INT)")
                    .execute(&mut *conn)
                    .await;
                assert!(write.is_err(), "a read-only transaction refuses writes");
                Err(Fail::App("aborted by the refused write"))
            })
            .await;
        assert!(matches!(done, Err(Fail::App(_))));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn a_failed_commit_is_the_callers_error() {
    bounded(async {
        let pool = pool(1).await;
        let monitor = monitor().await;
        let parent = unique("ambient_parent");
        let child = unique("ambient_child");
        // The child's guard goes first (last declared), then the parent's.
        let _parent_guard = table_guard(&parent);
        let _child_guard = table_guard(&child);
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "CREATE TABLE {parent} (v BIGINT PRIMARY KEY)"
        )))
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "CREATE TABLE {child} (v BIGINT REFERENCES {parent} (v) DEFERRABLE INITIALLY DEFERRED)"
        )))
        .execute(&pool)
        .await
        .unwrap();
        let id = Arc::new(Mutex::new(0));
        let done: Result<(), F> = pool
            .transaction()
            .run(async {
                // Checked only at COMMIT: no parent row 7.
                insert(&pool, &child, 7).await?;
                let session = session_id(&mut *pool.current().await?).await;
                *id.lock().unwrap() = session;
                Ok(())
            })
            .await;
        match done {
            Err(Fail::Tx(TxError::Commit(sqlx::Error::Database(e)))) => {
                assert_eq!(e.code().as_deref(), Some("23503"), "{e}");
            }
            other => panic!("expected a failed commit, got {other:?}"),
        }
        let session = *id.lock().unwrap();
        assert!(
            eventually(SERVER_WAIT, || async {
                !open_on_server(&monitor, session).await
            })
            .await
        );
        assert_eq!(values(&pool, &child).await, Vec::<i64>::new());
        drop_table(&pool, &child).await;
        drop_table(&pool, &parent).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn savepoint_and_release_errors_roll_the_transaction_back() {
    bounded(async {
        let pool = pool(1).await;
        let t = unique("ambient_aborted");
        let _t_guard = table_guard(&t);
        create(&pool, &t).await;
        // A statement fails and the body carries on: the transaction is
        // aborted, so the next SAVEPOINT fails.
        let done: Result<(), F> = pool
            .transaction()
            .run(async {
                insert(&pool, &t, 1).await?;
                let mut conn = pool.current().await?;
                assert!(sqlx::query("SELECT 1 / 0")
                    .execute(&mut *conn)
                    .await
                    .is_err());
                drop(conn);
                let nested: Result<(), F> = pool
                    .transaction()
                    .propagation(Propagation::Nested)
                    .run(async { Ok(()) })
                    .await;
                assert!(
                    matches!(nested, Err(Fail::Tx(TxError::Savepoint(_)))),
                    "{nested:?}"
                );
                Ok(())
            })
            .await;
        assert!(
            matches!(done, Err(Fail::Tx(TxError::RollbackOnly))),
            "{done:?}"
        );

        // The same inside a savepoint whose body returns `Ok`: RELEASE fails.
        let done: Result<(), F> = pool
            .transaction()
            .run(async {
                insert(&pool, &t, 2).await?;
                let nested: Result<(), F> = pool
                    .transaction()
                    .propagation(Propagation::Nested)
                    .run(async {
                        let mut conn = pool.current().await?;
                        assert!(sqlx::query("SELECT 1 / 0")
                            .execute(&mut *conn)
                            .await
                            .is_err());
                        Ok(())
                    })
                    .await;
                assert!(
                    matches!(nested, Err(Fail::Tx(TxError::Release(_)))),
                    "{nested:?}"
                );
                Ok(())
            })
            .await;
        assert!(
            matches!(done, Err(Fail::Tx(TxError::RollbackOnly))),
            "{done:?}"
        );
        assert_eq!(values(&pool, &t).await, Vec::<i64>::new());
        drop_table(&pool, &t).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn a_failed_begin_is_the_callers_error() {
    bounded(async {
        let url = crate::support::db::url("DATABASE_URL");
        let config = PoolConfig::builder()
            .max_size(1)
            .validation_mode(ValidationMode::None)
            .build()
            .unwrap();
        let pool = SqlxPool::new(SqlxManager::<Conn>::from_url(&url).unwrap(), config)
            .await
            .unwrap();
        let monitor = monitor().await;
        let session = session_id(&mut pool.get().await.unwrap()).await;
        let killed: bool = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT pg_terminate_backend({session})"
        )))
        .fetch_one(&monitor)
        .await
        .unwrap();
        assert!(killed);
        let gone = || async {
            let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE pid = {session}"
            )))
            .fetch_one(&monitor)
            .await
            .unwrap();
            n == 0
        };
        assert!(eventually(SERVER_WAIT, gone).await);
        // Not validated at checkout: the scope's BEGIN meets the dead socket.
        let done: Result<(), F> = pool.transaction().run(async { Ok(()) }).await;
        assert!(matches!(done, Err(Fail::Tx(TxError::Begin(_)))), "{done:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn holders_name_the_scope_site() {
    bounded(async {
        let pool = pool(2).await;
        let line = line!() + 2;
        let done: Result<(), F> = pool
            .transaction()
            .run(async {
                let holders = pool.holders();
                assert_eq!(holders.len(), 1);
                assert_eq!(holders[0].location.file(), file!());
                assert_eq!(holders[0].location.line(), line);
                let inner_line = line!() + 1;
                pool.transaction()
                    .propagation(Propagation::RequiresNew)
                    .run(async {
                        let mut lines: Vec<u32> =
                            pool.holders().iter().map(|h| h.location.line()).collect();
                        lines.sort_unstable();
                        assert_eq!(lines, vec![line, inner_line]);
                        Ok::<(), F>(())
                    })
                    .await
            })
            .await;
        done.unwrap();
    })
    .await;
}

/// Whether the next checkout's session is outside any transaction, by the
/// server's clocks.
async fn checkout_is_outside_a_transaction(pool: &P) -> bool {
    use sqlx::Row;
    let mut conn = pool.get().await.unwrap();
    match sqlx::raw_sql(crate::pg_common::OUTSIDE_A_TRANSACTION)
        .fetch_one(&mut *conn)
        .await
    {
        Ok(row) => row.get::<bool, _>(0),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn a_commit_the_server_turned_into_a_rollback_is_an_error() {
    bounded(async {
        let pool = pool(1).await;
        let table = crate::pg_common::TableGuard::new("ambient_swallowed");
        let t = table.name.clone();
        create(&pool, &t).await;
        let done: Result<(), F> = pool
            .transaction()
            .run(async {
                insert(&pool, &t, 1).await?;
                let mut conn = pool.current().await?;
                // Caught and swallowed: the transaction is aborted now.
                assert!(sqlx::query("SELECT 1 / 0")
                    .execute(&mut *conn)
                    .await
                    .is_err());
                Ok(())
            })
            .await;
        assert!(
            matches!(done, Err(Fail::Tx(TxError::CommitRolledBack))),
            "{done:?}"
        );
        assert_eq!(values(&pool, &t).await, Vec::<i64>::new());
        assert!(checkout_is_outside_a_transaction(&pool).await);
        // A failed statement inside a savepoint that rolls back is undone
        // with it: the outer transaction commits.
        let done: Result<(), F> = pool
            .transaction()
            .run(async {
                insert(&pool, &t, 2).await?;
                let _ = pool
                    .transaction()
                    .propagation(Propagation::Nested)
                    .run(async {
                        let mut conn = pool.current().await?;
                        assert!(sqlx::query("SELECT 1 / 0")
                            .execute(&mut *conn)
                            .await
                            .is_err());
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
        _ => unreachable!("{what}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn cancelled_at_any_point_the_next_checkout_is_outside_a_transaction() {
    bounded(async {
        let pool = pool(1).await;
        let table = crate::pg_common::TableGuard::new("ambient_cancel");
        let t = table.name.clone();
        create(&pool, &t).await;
        for what in ["scope commit", "scope rollback", "savepoints"] {
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
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn a_savepoint_scope_cancelled_anywhere_rolls_the_transaction_back() {
    bounded(async {
        let pool = pool(1).await;
        let table = crate::pg_common::TableGuard::new("ambient_cancel_sp");
        let t = table.name.clone();
        create(&pool, &t).await;
        // The inner scope is cut at its n-th suspension; the outer goes on.
        let mut finished = false;
        for n in 0..crate::pg_common::MAX_POINTS {
            let cancelled = Arc::new(Mutex::new(false));
            let done: Result<(), F> = pool
                .transaction()
                .run(async {
                    insert(&pool, &t, 1).await?;
                    let inner = pool
                        .transaction()
                        .propagation(Propagation::Nested)
                        .run(async {
                            tokio::task::yield_now().await;
                            insert(&pool, &t, 2).await?;
                            tokio::task::yield_now().await;
                            Ok::<(), F>(())
                        });
                    match crate::pg_common::cancel_at_pending(inner, n).await {
                        None => *cancelled.lock().unwrap() = true,
                        Some(r) => r?,
                    }
                    insert(&pool, &t, 3).await?;
                    Ok(())
                })
                .await;
            let cancelled = *cancelled.lock().unwrap();
            let kept = values(&pool, &t).await;
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
            assert!(checkout_is_outside_a_transaction(&pool).await, "cut at {n}");
            sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM {t}")))
                .execute(&pool)
                .await
                .unwrap();
            if !cancelled {
                finished = true;
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
        create(&pool, &t).await;
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
