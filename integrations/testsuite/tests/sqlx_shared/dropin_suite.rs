//! The drop-in tests every sqlx backend runs, written once: `&pool` as an
//! executor (one checkout per query), `pool.begin()` with commit, rollback,
//! drop in another task and cancellation at any point, and sqlx's own
//! errors for a closed pool and a checkout timeout.
//!
//! `dropin_suite!` expands to those tests in the module that invokes it
//! (`*_dropin.rs`), on a pool of one connection, so every checkout gets the
//! same backend. The SQL differs by backend only in its placeholders and in
//! the table the tests write to (each test a table of its own, whose name
//! starts with the prefix given to the macro); what differs more is left to
//! the invoking module, which has in scope:
//!
//! * `Conn`, the connection type, and `P`, the pool over it;
//! * `async fn open(config: PoolConfig) -> P`;
//! * `Table`, a table's guard (`fn name(&self) -> &'static str`),
//!   `fn new_table(prefix: &str) -> Table` and
//!   `async fn create_table(&P, &Table)`;
//! * `async fn backend_id(&mut Conn) -> Id`, what tells one backend from
//!   another, and `async fn assert_same_backend(&mut Conn, Id)`;
//! * `async fn server_in_transaction(&mut Conn) -> bool`, asked of the
//!   server, not of sqlx's bookkeeping;
//! * `KEEPS_CONNECTION_ON_CANCEL`: whether a `begin()` cancelled mid-way
//!   keeps its connection (SQLite must: closing it would lose the
//!   database) or may close it (a server backend);
//! * `sqlx`, `Duration`, `PoolConfig`, `Transaction`, `Connection`,
//!   `bounded`, `unique` and `sql` imported.

macro_rules! dropin_suite {
    (
        $(#[$attr:meta])*
        name: $name:literal,
        table: $prefix:literal,
        placeholders: ($p1:literal, $p2:literal),
        int: $int:ty,
        select_none: $none:literal $(,)?
    ) => {
        /// The table the tests write to (its guard, which drops it, comes
        /// first: bound as `let (table, pool)`, it goes after the pool) and
        /// a pool of one connection.
        async fn single() -> (Table, P) {
            let table = new_table($prefix);
            let config = crate::support::db::named_config($name, 1, Duration::from_secs(10));
            let pool = open(config).await;
            create_table(&pool, &table).await;
            (table, pool)
        }

        async fn rows(pool: &P, table: &str, tag: &str) -> i64 {
            let count = format!(concat!("SELECT COUNT(*) FROM {} WHERE tag = ", $p1), table);
            sqlx::query_scalar(sql(count))
                .bind(tag)
                .fetch_one(pool)
                .await
                .unwrap()
        }

        async fn insert(conn: &mut Conn, table: &str, tag: &str) {
            let insert = format!(concat!("INSERT INTO {} (tag) VALUES (", $p1, ")"), table);
            sqlx::query(sql(insert))
                .bind(tag)
                .execute(conn)
                .await
                .unwrap();
        }

        /// The next checkout gets the backend `id` outside any transaction.
        async fn assert_next_checkout_clean(pool: &P, id: Id) {
            let mut conn = pool.get().await.unwrap();
            assert_same_backend(&mut conn, id).await;
            assert!(!conn.is_in_transaction());
            assert!(!server_in_transaction(&mut conn).await);
        }

        fn owned<T: Send + 'static>(value: T) -> T {
            value
        }

        $(#[$attr])*
        #[tokio::test]
        async fn pool_is_an_executor_with_one_checkout_per_query() {
            bounded(async {
                let (table, pool) = single().await;
                let one: $int = sqlx::query_scalar("SELECT 1")
                    .fetch_one(&pool)
                    .await
                    .unwrap();
                assert_eq!(one, 1);
                let tag = unique(concat!($name, "-executor"));
                let two = format!(
                    concat!("INSERT INTO {} (tag) VALUES (", $p1, "), (", $p2, ")"),
                    table.name()
                );
                let done = sqlx::query(sql(two))
                    .bind(&tag)
                    .bind(&tag)
                    .execute(&pool)
                    .await
                    .unwrap();
                assert_eq!(done.rows_affected(), 2);
                let all = format!(concat!("SELECT tag FROM {} WHERE tag = ", $p1), table.name());
                let all = sqlx::query(sql(all))
                    .bind(&tag)
                    .fetch_all(&pool)
                    .await
                    .unwrap();
                assert_eq!(all.len(), 2);
                let none: Option<$int> = sqlx::query_scalar($none)
                    .fetch_optional(&pool)
                    .await
                    .unwrap();
                assert_eq!(none, None);
                // Each query gave its connection back: with one connection,
                // the next query would otherwise have timed out.
                assert_eq!(pool.state().idle, 1);
                assert_eq!(pool.state().in_use, 0);
                let failed = sqlx::query("SELECT * FROM no_such_table_here")
                    .execute(&pool)
                    .await;
                assert!(
                    matches!(failed, Err(sqlx::Error::Database(_))),
                    "{failed:?}"
                );
                assert_eq!(rows(&pool, table.name(), &tag).await, 2);
                pool.close().await;
            })
            .await;
        }

        $(#[$attr])*
        #[tokio::test]
        async fn begin_then_commit_keeps_the_rows() {
            bounded(async {
                let (table, pool) = single().await;
                let tag = unique(concat!($name, "-commit"));
                let mut tx: Transaction<Conn> = owned(pool.begin().await.unwrap());
                assert!(tx.is_in_transaction());
                insert(&mut tx, table.name(), &tag).await;
                assert!(server_in_transaction(&mut tx).await);
                let id = backend_id(&mut tx).await;
                tx.commit().await.unwrap();
                assert_eq!(rows(&pool, table.name(), &tag).await, 1);
                assert_next_checkout_clean(&pool, id).await;
                pool.close().await;
            })
            .await;
        }

        $(#[$attr])*
        #[tokio::test]
        async fn begin_then_rollback_drops_the_rows() {
            bounded(async {
                let (table, pool) = single().await;
                let tag = unique(concat!($name, "-rollback"));
                let mut tx = pool.begin().await.unwrap();
                insert(&mut tx, table.name(), &tag).await;
                let id = backend_id(&mut tx).await;
                tx.rollback().await.unwrap();
                assert_eq!(rows(&pool, table.name(), &tag).await, 0);
                assert_next_checkout_clean(&pool, id).await;
                pool.close().await;
            })
            .await;
        }

        $(#[$attr])*
        #[tokio::test]
        async fn transaction_dropped_in_another_task_is_rolled_back_before_reuse() {
            bounded(async {
                let (table, pool) = single().await;
                let tag = unique(concat!($name, "-drop"));
                let tx = pool.begin().await.unwrap();
                let task_tag = tag.clone();
                let task_table = table.name();
                let id = tokio::spawn(async move {
                    let mut tx = tx;
                    insert(&mut tx, task_table, &task_tag).await;
                    let id = backend_id(&mut tx).await;
                    drop(tx);
                    id
                })
                .await
                .unwrap();
                assert_next_checkout_clean(&pool, id).await;
                assert_eq!(rows(&pool, table.name(), &tag).await, 0);
                pool.close().await;
            })
            .await;
        }

        $(#[$attr])*
        #[tokio::test]
        async fn begin_on_a_closed_pool_is_pool_closed() {
            bounded(async {
                let (_table, pool) = single().await;
                pool.close().await;
                assert!(matches!(pool.begin().await, Err(sqlx::Error::PoolClosed)));
                let err = sqlx::query("SELECT 1").execute(&pool).await.unwrap_err();
                assert!(matches!(err, sqlx::Error::PoolClosed), "{err:?}");
            })
            .await;
        }

        $(#[$attr])*
        #[tokio::test]
        async fn checkout_timeout_through_the_pool_is_pool_timed_out() {
            bounded(async {
                let config = crate::support::db::pool_config(1, 0, Duration::from_millis(200));
                let pool = open(config).await;
                let held = pool.begin().await.unwrap();
                let err = sqlx::query("SELECT 1").execute(&pool).await.unwrap_err();
                assert!(matches!(err, sqlx::Error::PoolTimedOut), "{err:?}");
                assert!(matches!(pool.begin().await, Err(sqlx::Error::PoolTimedOut)));
                drop(held);
                pool.close().await;
            })
            .await;
        }

        /// `pool.begin()` dropped after 0 to 5 polls (with the reply given
        /// time to arrive in between): whether it was waiting, had its
        /// `BEGIN` in flight or had it answered, the next checkout is outside
        /// any transaction, on the same connection where the backend must
        /// keep it.
        $(#[$attr])*
        #[tokio::test]
        async fn begin_cancelled_at_any_point_leaves_no_transaction() {
            bounded(async {
                let (_table, pool) = single().await;
                let id = backend_id(&mut pool.get().await.unwrap()).await;
                for polls in 0..6 {
                    let mut begin = Box::pin(pool.begin());
                    for _ in 0..polls {
                        if futures::poll!(&mut begin).is_ready() {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    drop(begin);
                    let mut conn = pool.get().await.unwrap();
                    if KEEPS_CONNECTION_ON_CANCEL {
                        assert_same_backend(&mut conn, id).await;
                    }
                    assert!(!conn.is_in_transaction(), "after {polls} polls");
                    assert!(
                        !server_in_transaction(&mut conn).await,
                        "after {polls} polls"
                    );
                }
                pool.close().await;
            })
            .await;
        }
    };
}
