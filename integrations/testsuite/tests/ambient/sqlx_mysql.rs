//! The sqlx suite on MariaDB/MySQL (`MYSQL_URL`), with the server's
//! `information_schema.innodb_trx` as the judge of open transactions, and
//! isolation and read-only there.

use std::time::Duration;

use pool_sqlx::{Pool as SqlxPool, SqlxManager};

type Conn = sqlx::MySqlConnection;

const SLOW: &str = "SELECT SLEEP(2)";

async fn pool(max_size: u32) -> P {
    let url = crate::support::db::url("MYSQL_URL");
    let config =
        crate::support::db::named_config("ambient-sqlx-mysql", max_size, Duration::from_secs(30));
    SqlxPool::new(SqlxManager::<Conn>::from_url(&url).unwrap(), config)
        .await
        .unwrap()
}

/// A pool of one on the same server.
async fn monitor() -> P {
    pool(1).await
}

async fn session_id(conn: &mut Conn) -> i64 {
    let id: u64 = sqlx::query_scalar("SELECT CONNECTION_ID()")
        .fetch_one(conn)
        .await
        .unwrap();
    i64::try_from(id).unwrap()
}

/// One reader of `information_schema.innodb_trx` at a time, each after a
/// pause: InnoDB refreshes that table's cache only when nobody read it for
/// 100 ms, so readers polling faster would see a stale list forever.
static INNODB_TRX: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn innodb_trx_settled() -> tokio::sync::MutexGuard<'static, ()> {
    let gate = INNODB_TRX.lock().await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    gate
}

/// Whether session `id` has an InnoDB transaction open.
async fn open_on_server(monitor: &P, id: i64) -> bool {
    let sql = format!(
        "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = {id}"
    );
    let _gate = innodb_trx_settled().await;
    let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_one(monitor)
        .await
        .unwrap();
    n > 0
}

/// Drops a table when dropped, on every path: on a thread of its own
/// with a fresh connection, so it works in a panicking test.
struct MySqlTable(String);

impl Drop for MySqlTable {
    fn drop(&mut self) {
        let sql = format!("DROP TABLE IF EXISTS {}", self.0);
        let url = crate::support::db::url("MYSQL_URL");
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the drop");
            rt.block_on(async {
                use sqlx::Connection;
                let mut conn = Conn::connect(&url).await.map_err(|e| e.to_string())?;
                let done = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                    .execute(&mut conn)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string());
                let _ = conn.close().await;
                done
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) && !std::thread::panicking() {
            panic!("dropping table {} failed: {dropped:?}", self.0);
        }
    }
}

/// Drops table `name` when dropped, on every path.
fn table_guard(name: &str) -> Box<dyn Send> {
    Box::new(MySqlTable(name.to_owned()))
}

sqlx_suite!(#[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]
async fn isolation_and_read_only_reach_the_server() {
    bounded(async {
        let pool = pool(2).await;
        let t = unique("ambient_mysql_isolation");
        let _t_guard = table_guard(&t);
        create(&pool, &t).await;
        let done: Result<(), F> = pool
            .transaction()
            .isolation(pool_ambient::Isolation::Serializable)
            .run(async {
                insert(&pool, &t, 1).await?;
                let mut conn = pool.current().await?;
                let gate = innodb_trx_settled().await;
                let level: String = sqlx::query_scalar(
                    "SELECT trx_isolation_level FROM information_schema.innodb_trx \
                     WHERE trx_mysql_thread_id = CONNECTION_ID()",
                )
                .fetch_one(&mut *conn)
                .await
                .unwrap();
                drop(gate);
                assert_eq!(level, "SERIALIZABLE");
                Ok(())
            })
            .await;
        done.unwrap();

        let done: Result<(), F> = pool
            .transaction()
            .read_only(true)
            .run(async {
                let mut conn = pool.current().await?;
                let write = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO {t} (v) VALUES (2)"
                )))
                .execute(&mut *conn)
                .await;
                assert!(write.is_err(), "a read-only transaction refuses writes");
                Ok(())
            })
            .await;
        done.unwrap();
        assert_eq!(values(&pool, &t).await, vec![1]);
        drop_table(&pool, &t).await;
    })
    .await;
}
