//! The sqlx suite on SQLite: one database file per test (named after the
//! test's thread, which libtest names after the test), judged open while
//! another connection cannot take its write lock. SQLite has no isolation
//! levels but serializable and no read-only transactions: asking for them
//! is a typed error.

use std::time::Duration;

use pool_sqlx::{Pool as SqlxPool, SqlxManager};
use sqlx::sqlite::SqliteConnectOptions;

type Conn = sqlx::SqliteConnection;

const SLOW: &str = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c \
                    WHERE x < 2000000) SELECT COUNT(*) FROM c";

/// The database files this test's thread made, removed when it ends.
#[derive(Default)]
struct Files {
    made: Vec<std::path::PathBuf>,
}

impl Drop for Files {
    fn drop(&mut self) {
        for path in &self.made {
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let mut name = path.clone().into_os_string();
                name.push(suffix);
                let _ = std::fs::remove_file(name);
            }
        }
    }
}

thread_local! {
    static FILES: std::cell::RefCell<Files> = std::cell::RefCell::default();
}

/// A new database file for this test: named after the test's thread (which
/// libtest names after the test) and a count.
fn new_path() -> std::path::PathBuf {
    let thread = std::thread::current();
    let name: String = thread
        .name()
        .unwrap_or("unnamed")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    FILES.with(|files| {
        let mut files = files.borrow_mut();
        let path = std::env::temp_dir().join(format!(
            "pool-core-ambient-{}-{name}-{}.db",
            std::process::id(),
            files.made.len()
        ));
        let _ = std::fs::remove_file(&path);
        files.made.push(path.clone());
        path
    })
}

/// The last file [`new_path`] made on this thread.
fn last_path() -> std::path::PathBuf {
    FILES.with(|files| files.borrow().made.last().cloned().expect("a pool() first"))
}

async fn open(path: std::path::PathBuf, max_size: u32) -> P {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .busy_timeout(Duration::from_millis(100));
    let config =
        crate::support::db::named_config("ambient-sqlx-sqlite", max_size, Duration::from_secs(30));
    SqlxPool::new(SqlxManager::<Conn>::new(options), config)
        .await
        .unwrap()
}

/// A pool on a database file of its own (SQLite: one writer at a time per
/// file, so two pools of one test must not share one).
async fn pool(max_size: u32) -> P {
    open(new_path(), max_size).await
}

/// A pool of one on the last `pool()`'s file.
async fn monitor() -> P {
    open(last_path(), 1).await
}

async fn session_id(_conn: &mut Conn) -> i64 {
    0
}

/// Whether some connection holds the database's write lock: another
/// cannot begin an immediate transaction then.
async fn open_on_server(monitor: &P, _id: i64) -> bool {
    let mut conn = monitor.get().await.unwrap();
    match sqlx::query("BEGIN IMMEDIATE").execute(&mut *conn).await {
        Ok(_) => {
            sqlx::query("ROLLBACK").execute(&mut *conn).await.unwrap();
            false
        }
        Err(_) => true,
    }
}

/// The table goes with the test's database file ([`Files`]).
fn table_guard(_name: &str) -> Box<dyn Send> {
    Box::new(())
}

sqlx_suite!();

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_sqlite_lacks_are_typed_errors() {
    bounded(async {
        let pool = pool(1).await;
        let read_only: Result<(), F> = pool
            .transaction()
            .read_only(true)
            .run(async { Ok(()) })
            .await;
        assert!(
            matches!(read_only, Err(Fail::Tx(TxError::Unsupported(_)))),
            "{read_only:?}"
        );
        let level: Result<(), F> = pool
            .transaction()
            .isolation(pool_ambient::Isolation::ReadCommitted)
            .run(async { Ok(()) })
            .await;
        assert!(
            matches!(level, Err(Fail::Tx(TxError::Unsupported(_)))),
            "{level:?}"
        );
        let serializable: Result<bool, F> = pool
            .transaction()
            .isolation(pool_ambient::Isolation::Serializable)
            .run(async { Ok(pool.in_transaction()) })
            .await;
        assert!(serializable.unwrap());
    })
    .await;
}
