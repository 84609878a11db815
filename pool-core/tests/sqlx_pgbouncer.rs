//! `SqlxManager<PgConnection>::pooler_mode(PoolerMode::Transaction)` behind a
//! real PgBouncer in transaction mode, started by the test on a free
//! loopback port in front of `DATABASE_URL`'s server: 2 server connections
//! shared by a pool of 8 and 16 tasks. Parameterised queries through `&pool`
//! and through `pool.begin()` transactions (with `.persistent(false)`, as
//! the docs ask) all succeed; without the mode, the same load fails on
//! named prepared statements.
//!
//! `PGBOUNCER` overrides the binary (default `/usr/sbin/pgbouncer`).
#![cfg(feature = "sqlx-postgres")]

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::bounded;
use pool_core::managers::sqlx::SqlxManager;
use pool_core::{Pool, PoolConfig, PoolerMode};
use sqlx::postgres::{PgConnectOptions, PgConnection};

const TASKS: i32 = 16;
const QUERIES: i32 = 30;

/// PgBouncer in transaction mode with two server connections; killed and
/// its directory removed on drop.
struct Bouncer {
    child: Child,
    dir: PathBuf,
    port: u16,
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(1) == Some("0"))
    })
}

impl Bouncer {
    fn start(upstream: &PgConnectOptions) -> Bouncer {
        let bin = std::env::var_os("PGBOUNCER")
            .map_or_else(|| PathBuf::from("/usr/sbin/pgbouncer"), PathBuf::from);
        assert!(
            bin.exists(),
            "{} is missing: this test needs pgbouncer",
            bin.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let dir =
            std::env::temp_dir().join(format!("sqlx-pgbouncer-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the PgBouncer directory");
        let ini = format!(
            "[databases]\n\
             bounced = host={host} port={upstream_port} dbname={db} user={user}\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = any\n\
             pool_mode = transaction\n\
             default_pool_size = 2\n\
             max_client_conn = 100\n\
             ignore_startup_parameters = extra_float_digits,options\n\
             logfile = {log}\n",
            host = upstream.get_host(),
            upstream_port = upstream.get_port(),
            db = upstream.get_database().unwrap_or("postgres"),
            user = upstream.get_username(),
            log = dir.join("pgbouncer.log").display(),
        );
        let ini_path = dir.join("pgbouncer.ini");
        std::fs::File::create(&ini_path)
            .and_then(|mut f| f.write_all(ini.as_bytes()))
            .expect("write pgbouncer.ini");
        let mut command = Command::new(&bin);
        if is_root() {
            // PgBouncer refuses to run as root; `-u` makes it switch user.
            let owned = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(&dir)
                .status()
                .is_ok_and(|s| s.success());
            assert!(owned, "chown the PgBouncer directory to postgres");
            command.args(["-u", "postgres"]);
        }
        let child = command
            .arg(&ini_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        let bouncer = Bouncer { child, dir, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "PgBouncer did not listen within 10 s: {}",
                std::fs::read_to_string(bouncer.dir.join("pgbouncer.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        bouncer
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/bounced", self.port)
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        if let Err(e) = self.child.kill() {
            eprintln!("stopping PgBouncer: {e}");
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How a task runs its queries.
#[derive(Debug, Clone, Copy)]
enum Path {
    /// `fetch_one(&pool)`.
    Pool,
    /// `pool.begin()`, `fetch_one(&mut *tx)` with `.persistent(false)`,
    /// `commit()`.
    Transaction,
    /// `pool.get()`, `fetch_one(&mut *conn)` as sqlx's default persistent
    /// query.
    Connection,
}

/// Runs `TASKS` x `QUERIES` parameterised queries; returns the failures'
/// count and the last failure's text.
async fn load(pool: &Pool<SqlxManager<PgConnection>>, path: Path) -> (usize, String) {
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let pool = pool.clone();
        tasks.spawn(async move {
            let mut failed = (0, String::new());
            for i in 0..QUERIES {
                let query = sqlx::query_scalar::<_, i32>("SELECT $1::int4 + $2::int4")
                    .bind(task)
                    .bind(i);
                let got = match path {
                    Path::Pool => query.fetch_one(&pool).await,
                    Path::Transaction => match pool.begin().await {
                        Ok(mut tx) => match query.persistent(false).fetch_one(&mut *tx).await {
                            Ok(n) => tx.commit().await.map(|()| n),
                            Err(e) => Err(e),
                        },
                        Err(e) => Err(e),
                    },
                    Path::Connection => match pool.get().await {
                        Ok(mut conn) => query.fetch_one(&mut *conn).await,
                        Err(e) => Err(pool_core::managers::sqlx::into_sqlx_error(e)),
                    },
                };
                match got {
                    Ok(n) => assert_eq!(n, task + i),
                    Err(e) => failed = (failed.0 + 1, e.to_string()),
                }
            }
            failed
        });
    }
    let mut failed = (0, String::new());
    while let Some(done) = tasks.join_next().await {
        let (count, last) = done.expect("a query task panicked");
        if count > 0 {
            failed = (failed.0 + count, last);
        }
    }
    failed
}

async fn pool_through(bouncer: &Bouncer, mode: PoolerMode) -> Pool<SqlxManager<PgConnection>> {
    let manager = SqlxManager::<PgConnection>::from_url(&bouncer.url())
        .unwrap()
        .pooler_mode(mode);
    let config = PoolConfig::builder()
        .max_size(8)
        .acquire_timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    Pool::new(manager, config)
        .await
        .expect("PgBouncer is reachable")
}

#[ignore = "needs DATABASE_URL and pgbouncer: set it to a PostgreSQL server, install pgbouncer, and run with --include-ignored"]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transaction_pooler_mode_runs_parameterised_queries_behind_pgbouncer() {
    let url = match std::env::var("DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!("DATABASE_URL is not set: this test needs PostgreSQL (see scripts/test.sh)"),
    };
    let upstream: PgConnectOptions = url.parse().expect("DATABASE_URL parses");
    let bouncer = Bouncer::start(&upstream);
    bounded(async {
        let pool = pool_through(&bouncer, PoolerMode::Transaction).await;
        for path in [Path::Pool, Path::Transaction, Path::Pool] {
            let (failed, last) = load(&pool, path).await;
            assert_eq!(
                failed, 0,
                "{path:?}: {failed} failed, the last with: {last}"
            );
        }
        pool.close().await;

        // What the mode prevents: named statements, numbered from 1 on each
        // client connection, meet on the shared server connections.
        let pool = pool_through(&bouncer, PoolerMode::Session).await;
        let (failed, last) = load(&pool, Path::Connection).await;
        assert!(
            failed > 0,
            "session mode behind a transaction pooler did not fail"
        );
        assert!(last.contains("prepared statement"), "{last}");
        pool.close().await;
    })
    .await;
}
