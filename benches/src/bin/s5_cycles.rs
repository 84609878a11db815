//! S5's query cycle (get → `SELECT 1` → drop, PostgreSQL) for instruction
//! counts under callgrind: the client's work per query for one database
//! contestant, which timings on a small shared machine cannot show (the
//! server, the load generator and the steal of the VM move those by more
//! than the pools differ).
//!
//! ```text
//! cargo build --release -p pool-benches --features peers --bin s5_cycles
//! valgrind --tool=callgrind --zero-before='s5_cycles::cycles' target/release/s5_cycles 4000 ours-mgr
//! valgrind --tool=callgrind --zero-before='s5_cycles::cycles' target/release/s5_cycles 8000 ours-mgr
//! # per query: (count at 8000 - count at 4000) / 4000; the same for
//! # ours-tp, deadpool-pg, bb8-pg, ours-sqlx and sqlx
//! ```
//!
//! TASKS (third argument, default 16) tasks on a current-thread runtime
//! loop over a pool of 16 connections, opened before the counted function
//! starts; the fourth argument, `on` or `off` (the default), is S5's
//! validation at every checkout. One worker, so nothing is counted twice for cache lines two
//! workers share; the server is not under valgrind, so the client is
//! what waits. The network still decides how often a socket is polled
//! before its answer is there: repeat a count to see its spread (a few
//! per cent, where the S1-S3 counts repeat exactly). The database is
//! `DATABASE_URL`, else `postgres://postgres@127.0.0.1:5432/test`. Run
//! without valgrind, it prints the time per query on that one worker.
//! For `ours-mgr`, `OURS_PG_POOLER` picks the pooler setting and
//! `OURS_PG_QUERY=prepared` runs the query as a cached prepared statement
//! instead of a simple query. Built with `--features peers,sqlx-manager`,
//! `ours-sqlx` with `OURS_PG_POOLER` set runs pool-core's own
//! `SqlxManager<PgConnection>` with that setting (sqlx's default query, a
//! cached prepared statement) instead of the benches' small sqlx manager;
//! with `unnamed`, the relay task and its socket hop run in this process
//! and are counted.

use std::time::Duration;

use pool_benches::contestant::Contestant;
use pool_benches::pools::pg::{DbSpec, Select1};
use pool_benches::runner::current_thread;
use pool_benches::scenarios::db::{database_url, DbKind};
use pool_benches::scenarios::spike::prewarm;
use pool_benches::with_db_pool;

/// The pool's size, as in S5.
const POOL: u32 = 16;

fn fail(msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::exit(2)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = match args.next() {
        None => 10_000,
        Some(s) => s
            .parse()
            .unwrap_or_else(|_| fail(&format!("queries: not a number: {s:?}"))),
    };
    let kind = match args.next() {
        None => DbKind::OursPgManager,
        Some(s) => DbKind::from_short(&s).unwrap_or_else(|e| fail(&e)),
    };
    let tasks: u64 = match args.next() {
        None => 16,
        Some(s) => match s.parse() {
            Ok(t @ 1..=1024) => t,
            _ => fail(&format!("tasks {s:?}: a number in 1..=1024")),
        },
    };
    let validate = match args.next().as_deref() {
        None | Some("off") => false,
        Some("on") => true,
        Some(s) => fail(&format!("validation {s:?}: on or off")),
    };
    let spec = DbSpec {
        url: database_url(),
        max_size: POOL,
        validate,
        acquire_timeout: Duration::from_secs(30),
    };
    let rt = current_thread();
    #[cfg(all(feature = "peers", feature = "sqlx-manager"))]
    if kind == DbKind::OursSqlx && std::env::var_os("OURS_PG_POOLER").is_some() {
        let got = rt.block_on(async {
            let pool = pool_benches::pools::sqlx::OursSqlxManager::build(&spec).await?;
            Ok::<_, String>(measure(pool, n, tasks).await)
        });
        report(got, n, tasks, "ours (pool-core's SqlxManager)");
        return;
    }
    let got =
        rt.block_on(async { with_db_pool!(kind, &spec, |pool| measure(pool, n, tasks).await) });
    report(got, n, tasks, kind.label());
}

/// Warms `pool` up, runs the counted loops, closes it: the errors and the
/// time per query.
async fn measure<P>(pool: P, n: u64, tasks: u64) -> (u64, f64)
where
    P: Contestant,
    P::Conn: Select1,
{
    if let Err(e) = prewarm(&pool, POOL).await {
        fail(&format!("warm-up: {e}"));
    }
    let started = std::time::Instant::now();
    let errors = cycles(pool.clone(), n, tasks).await;
    let ns = started.elapsed().as_nanos() as f64 / n.max(1) as f64;
    pool.shutdown().await;
    (errors, ns)
}

/// Prints the time per query, or fails with what went wrong.
fn report(got: Result<(u64, f64), String>, n: u64, tasks: u64, label: &str) {
    match got {
        Ok((0, ns)) => eprintln!("{n} queries by {tasks} tasks, {ns:.0} ns per query"),
        Ok((errors, _)) => fail(&format!("{errors} queries failed")),
        Err(e) => fail(&format!("{label}: {e}")),
    }
}

/// The measured loops: `n` queries in all, split between the tasks;
/// returns how many failed.
#[inline(never)]
async fn cycles<P>(pool: P, n: u64, tasks: u64) -> u64
where
    P: Contestant,
    P::Conn: Select1,
{
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..tasks {
        let pool = pool.clone();
        set.spawn(async move {
            let mut errors = 0;
            for _ in 0..n / tasks {
                match pool.get().await {
                    Ok(mut conn) => {
                        if P::conn(&mut conn).select1().await.is_err() {
                            errors += 1;
                        }
                    }
                    Err(_) => errors += 1,
                }
            }
            errors
        });
    }
    let mut errors = 0;
    while let Some(done) = set.join_next().await {
        errors += done.unwrap_or(1);
    }
    errors
}
