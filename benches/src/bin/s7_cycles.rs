//! S7's service (`GET /` → get → `SELECT 1` → drop, on a 2-worker
//! runtime) for instruction counts under callgrind: the service's work
//! per HTTP request for one database contestant, which wrk's rates on a
//! small shared machine cannot rank (BENCH.md: the peers swing as widely
//! against each other as against ours).
//!
//! ```text
//! cargo build --release -p pool-benches --features peers --bin s7_cycles
//! valgrind --tool=callgrind --zero-before='s7_cycles::counted' target/release/s7_cycles 2000 ours-mgr
//! valgrind --tool=callgrind --zero-before='s7_cycles::counted' target/release/s7_cycles 4000 ours-mgr
//! # per request: (count at 4000 - count at 2000) / 2000; the same for
//! # ours-tp, deadpool-pg, bb8-pg, ours-sqlx and sqlx
//! ```
//!
//! The load is a second process, this binary started again as the
//! client (valgrind does not follow it: only the service is counted). It
//! sends exactly N requests over CONNS keep-alive connections (third
//! argument, default 16, as one of S7's wrk loads), each waiting for its
//! answer before the next, and fails unless every answer is a 200. The
//! service runs on WORKERS (fourth argument, default 2, as in S7) tokio
//! workers; valgrind runs one thread at a time, so the counts include the
//! runtime's cross-worker wake-ups and steals but not the cache traffic
//! between cores. The pool (16 connections) is opened and warmed before
//! the counted function starts. The database is `DATABASE_URL`, else
//! `postgres://postgres@127.0.0.1:5432/test`. Run without valgrind, it
//! prints the time per request.

use std::time::{Duration, Instant};

use pool_benches::contestant::Contestant;
use pool_benches::pools::pg::{DbSpec, Select1};
use pool_benches::runner::multi_thread;
use pool_benches::scenarios::db::{database_url, DbKind};
use pool_benches::scenarios::http::{fixed_requests, Service};
use pool_benches::scenarios::spike::prewarm;
use pool_benches::with_db_pool;

/// The pool's size, as in S7.
const POOL: u32 = 16;

/// The client's argument that tells it from the service.
const CLIENT: &str = "--client";

/// How long the client may take for all its requests (a service under
/// valgrind serves a few thousand a second).
const CLIENT_LIMIT: Duration = Duration::from_secs(600);

fn fail(msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::exit(2)
}

fn number<T: std::str::FromStr>(arg: Option<String>, default: T, what: &str) -> T {
    match arg {
        None => default,
        Some(s) => s
            .parse()
            .unwrap_or_else(|_| fail(&format!("{what}: not a number: {s:?}"))),
    }
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some(CLIENT) {
        args.next();
        let port: u16 = number(args.next(), 0, "port");
        let n: u64 = number(args.next(), 0, "requests");
        let conns: u64 = number(args.next(), 1, "connections");
        let rt = pool_benches::runner::current_thread();
        match rt.block_on(fixed_requests(port, n, conns)) {
            Ok(()) => return,
            Err(e) => fail(&format!("client: {e}")),
        }
    }
    let n: u64 = number(args.next(), 4000, "requests");
    let kind = match args.next() {
        None => DbKind::OursPgManager,
        Some(s) => DbKind::from_short(&s).unwrap_or_else(|e| fail(&e)),
    };
    let conns: u64 = number(args.next(), 16, "connections");
    if !(1..=1024).contains(&conns) || n < conns {
        fail(&format!(
            "connections {conns}: a number in 1..=1024, and no more than the requests ({n})"
        ));
    }
    let workers: usize = number(args.next(), 2, "workers");
    if !(1..=64).contains(&workers) {
        fail(&format!("workers {workers}: a number in 1..=64"));
    }
    let spec = DbSpec {
        url: database_url(),
        max_size: POOL,
        validate: false,
        acquire_timeout: Duration::from_secs(30),
    };
    let rt = multi_thread(workers);
    let got = rt.block_on(async {
        with_db_pool!(kind, &spec, |pool| {
            if let Err(e) = prewarm(&pool, POOL).await {
                fail(&format!("warm-up: {e}"));
            }
            let got = serve(pool.clone(), n, conns).await;
            pool.shutdown().await;
            got
        })
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    match got {
        Ok(Ok(ns)) => eprintln!("{n} requests over {conns} connections, {ns:.0} ns per request"),
        Ok(Err(e)) => fail(&e),
        Err(e) => fail(&format!("{}: {e}", kind.label())),
    }
}

/// Serves the pool's service on a port of its own while the client
/// process sends its `n` requests; the time per request.
async fn serve<P>(pool: P, n: u64, conns: u64) -> Result<f64, String>
where
    P: Contestant,
    P::Conn: Select1,
{
    let service = Service::start(pool).await?;
    let got = counted(service.port, n, conns).await;
    service.stop().await;
    got
}

/// The measured part: the client process from start to exit.
#[inline(never)]
async fn counted(port: u16, n: u64, conns: u64) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let started = Instant::now();
    let child = tokio::process::Command::new(exe)
        .args([
            CLIENT.to_owned(),
            port.to_string(),
            n.to_string(),
            conns.to_string(),
        ])
        .kill_on_drop(true)
        .status();
    let status = tokio::time::timeout(CLIENT_LIMIT, child)
        .await
        .map_err(|_| format!("the client did not finish within {CLIENT_LIMIT:?}"))?
        .map_err(|e| format!("client: {e}"))?;
    let ns = started.elapsed().as_nanos() as f64 / n as f64;
    if status.success() {
        Ok(ns)
    } else {
        Err(format!("the client failed ({status})"))
    }
}
