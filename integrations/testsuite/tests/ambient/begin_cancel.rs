// `Pool::begin`'s owned transaction cut at every point where it waits, on
// the sqlx version of the module that includes this file (`sqlx` and
// `pool_sqlx` name that version's crate and managers): the next checkout
// is never inside a transaction, by the server's clocks.

use std::time::Duration;

use pool_sqlx::Pool as SqlxPool;
use sqlx::Row;

type P = SqlxPool<sqlx::PgConnection>;

async fn pool() -> P {
    let url = crate::support::db::url("DATABASE_URL");
    let manager = pool_sqlx::SqlxManager::<sqlx::PgConnection>::from_url(&url).unwrap();
    SqlxPool::new(
        manager,
        crate::support::db::named_config("ambient-begin-cancel", 1, Duration::from_secs(30)),
    )
    .await
    .unwrap()
}

async fn checkout_is_outside_a_transaction(pool: &P) -> bool {
    let mut conn = pool.acquire().await.unwrap();
    match sqlx::raw_sql(crate::pg_common::OUTSIDE_A_TRANSACTION)
        .fetch_one(&mut *conn)
        .await
    {
        Ok(row) => row.get::<bool, _>(0),
        Err(_) => false,
    }
}

/// One operation on `Pool::begin`'s transaction; the statement inside
/// takes a transaction id, as a write would.
async fn op(pool: &P, what: &str) {
    let mut tx = pool.begin().await.unwrap();
    tokio::task::yield_now().await;
    if what == "dropped after begin" {
        drop(tx);
        return;
    }
    sqlx::query("SELECT txid_current()")
        .execute(&mut *tx)
        .await
        .unwrap();
    tokio::task::yield_now().await;
    match what {
        "commit" => tx.commit().await.unwrap(),
        "rollback" => tx.rollback().await.unwrap(),
        _ => drop(tx),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn pool_begin_cancelled_at_any_point_leaves_no_transaction() {
    crate::support::db::bounded(async {
        let pool = pool().await;
        for what in ["commit", "rollback", "dropped after begin", "dropped after a query"] {
            crate::pg_common::sweep(
                what,
                |_| op(&pool, what),
                |n, _| {
                    let pool = &pool;
                    async move {
                        assert!(
                            checkout_is_outside_a_transaction(pool).await,
                            "{what} cut at point {n}: the next checkout is inside a transaction"
                        );
                    }
                },
            )
            .await;
        }
    })
    .await;
}
