//! The fault comparison: the same faults, side by side, for our
//! pool (`PostgresManager`, default validation; with the `sqlx-manager`
//! feature also `SqlxManager<PgConnection>`, `--pools ours-sqlx`),
//! deadpool-postgres (fast
//! recycling), bb8-postgres (its defaults) and sqlx's `PgPool` (its
//! defaults), against a PostgreSQL cluster this binary starts (`initdb` in
//! a temp dir, its own port; never the shared server). Prints a Markdown
//! table of the fault figures (errors per kill, dead connections handed
//! out, time to the first success and to 90 % throughput) for BENCH.md's
//! "faults" section.
//!
//! ```text
//! cargo run --release -p pool-benches --features peers,sqlx-manager --bin faults -- [--quick]
//!     [--pools ours,ours-sqlx,deadpool,bb8,sqlx] [--faults terminate,stop,kill9,none]
//!     [--repeats N] [--connects N] [--reconnects N] [--connect-delay-ms N]
//!     [--timeline] [--server-cpus LIST] [--sqlx-simple]
//! ```
//!
//! `--sqlx-simple` makes the sqlx contestants send their `SELECT 1` as a
//! simple query, as the tokio-postgres ones do, instead of sqlx's prepared
//! statement: a restarted server runs prepared statements slower for a
//! while, and this tells that apart from the pool.
//!
//! `--server-cpus LIST` starts the cluster (and restarts it after a fault)
//! under `taskset -c LIST`, so that its processes stay on those cores; run
//! the binary itself under `taskset` on the other cores to keep the server
//! off the client's, e.g. `taskset -c 1 target/release/faults
//! --server-cpus 0` on two cores.
//!
//! `--connect-delay-ms N` puts every pool behind a TCP proxy on 127.0.0.1
//! that holds each new connection N ms before forwarding it (the
//! handshake of a database on another host), while an open connection's
//! bytes flow at once: a connect then waits on the "network" instead of
//! being CPU work on the same cores.
//!
//! `--connects N` and `--reconnects N` set our pool's
//! `max_concurrent_connects` and `max_concurrent_reconnects` (default: the
//! pool's defaults), for A/B runs of how fast it reopens after a fault
//! (`--reconnects 1`: two connects at a time, as before the reopening
//! bound).
//! `--timeline` prints, for every run, the successes and failures per
//! 10 ms from 50 ms before the server is back to 700 ms after, and for our
//! pool its counts (idle, in use, opening, closing, waiting, connects and
//! failed connects so far) sampled every 10 ms over the same window: what
//! paces the recovery.
//!
//! Each run: 64 tasks looping checkout + `SELECT 1` through a pool of 16
//! (acquire timeout 2 s) for 1.5 s, the fault, 2 s more. A task pauses
//! [`FAIL_PAUSE`] after every failed call, whatever the pool: a pool that
//! fails fast would otherwise spin its callers through millions of errors
//! while the server is down, and what is measured is its recovery, not how
//! fast it can say no. The tasks run until told to stop (time, not a count,
//! ends a run); the per-task count bound only caps memory, and a run that
//! reaches it says so. Faults: terminate
//! every backend of the pool once; stop the server for 3 s (1 s with
//! `--quick`) and start it; `kill -9` the postmaster and restart; and, only
//! when asked for (`--faults none`), the control: no fault, the load running
//! on through the same pause, its end taken as "up" (how often the 90 %
//! mark is missed from the run's own drift). Needs the
//! PostgreSQL server binaries (`PG_BIN_DIR`, else the newest
//! `/usr/lib/postgresql/*/bin`, else `pg_config --bindir`); run as root,
//! the server runs as `postgres`. About a minute in all.

// The fault suite's own cluster and figures, shared with its tests; this
// binary uses a part of them.
#[allow(dead_code)]
#[path = "../../../pool-core/tests/support/cluster.rs"]
mod cluster;
#[allow(dead_code)]
#[path = "../../../pool-core/tests/support/faults.rs"]
mod fault_support;

#[path = "faults/contestants.rs"]
mod contestants;
#[path = "faults/report.rs"]
mod report;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster::Cluster;
use contestants::{AnyPool, Bounds, Fault, Kind};
use fault_support::{start_sampler, terminate_all, Figures, Op, Outcome, Timeline};
use pool_postgres::PostgresManager;
use report::{ms, print_timeline, Rates};
use tokio_postgres::NoTls;

const PASSWORD: &str = "faults-pw";
const MAX: u32 = 16;
const TASKS: usize = 64;
const ACQUIRE: Duration = Duration::from_secs(2);
const BEFORE: Duration = Duration::from_millis(1500);
const AFTER: Duration = Duration::from_secs(2);
/// Bound on one checkout and query.
const OP_BOUND: Duration = Duration::from_secs(15);
/// A task's pause after a failed call (a `get()` error or timeout, a query
/// error, an operation past its bound), the same for every pool. Tokio's
/// timer rounds it up to the next millisecond tick, so 1–2 ms.
const FAIL_PAUSE: Duration = Duration::from_millis(1);
/// Most operations one task records: a memory bound far above what a run
/// reaches with failures paced (at most ~1 000 failed calls a second per
/// task, and a few thousand successes a second per task at full speed).
/// A run in which a task reaches it is reported: its later figures would
/// be cut short, as the first run's "never" rows were.
const MAX_OPS_PER_TASK: usize = 200_000;

/// Runs the load, applies `fault` after [`BEFORE`], keeps going for
/// [`AFTER`] once the server is back; returns the figures.
async fn run(
    cluster: &Cluster,
    admin: &tokio_postgres::Client,
    kind: Kind,
    fault: Fault,
    n: usize,
    connects: Bounds,
    timeline: bool,
) -> Result<(Figures, Rates), String> {
    let app = format!("faults_{n}");
    // Behind the delaying proxy, when asked for; it lives as long as the run.
    let proxy = match connects.connect_delay {
        Some(delay) => {
            let upstream = std::net::SocketAddr::from(([127, 0, 0, 1], cluster.port()));
            Some(fault_support::proxy::Proxy::with_connect_delay(upstream, delay).await)
        }
        None => None,
    };
    let port = proxy.as_ref().map_or(cluster.port(), |p| p.addr().port());
    let mut pg = cluster::tcp_config_at(port, "postgres", "postgres");
    pg.password(PASSWORD)
        .application_name(&app)
        .connect_timeout(ACQUIRE);
    let pool = AnyPool::build(kind, pg, port, &app, connects).await?;
    let sampler = start_sampler(cluster.admin_config(), &app, MAX);
    let states = Arc::new(std::sync::Mutex::new(Vec::new()));
    let state_stop = Arc::new(AtomicBool::new(false));
    let state_task = match (pool.metrics().is_some(), timeline) {
        (true, true) => {
            let (p, states, stop) = (pool.clone(), Arc::clone(&states), Arc::clone(&state_stop));
            // Bounded by the stop flag and a count: at most one sample per
            // 10 ms over a run of a few seconds.
            Some(tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(10));
                for _ in 0..2_000 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    tick.tick().await;
                    let Some(m) = p.metrics() else { break };
                    states
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((Instant::now(), m));
                }
            }))
        }
        _ => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let pool = pool.clone();
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let mut ops = Vec::new();
                while !stop.load(Ordering::Relaxed) && ops.len() < MAX_OPS_PER_TASK {
                    let start = Instant::now();
                    let (outcome, got) =
                        tokio::time::timeout(OP_BOUND, pool.op(connects.sqlx_simple))
                            .await
                            .unwrap_or((Outcome::OverBound, None));
                    ops.push(Op {
                        start,
                        got,
                        end: Instant::now(),
                        outcome,
                    });
                    if outcome != Outcome::Ok {
                        tokio::time::sleep(FAIL_PAUSE).await;
                    }
                }
                let capped = ops.len() >= MAX_OPS_PER_TASK;
                (ops, capped)
            })
        })
        .collect();
    tokio::time::sleep(BEFORE).await;
    let at = Instant::now();
    let mut killed = 0;
    let mut down_at = at;
    match fault {
        Fault::TerminateOnce => killed = terminate_all(admin, &app).await,
        Fault::Stop(down) => {
            tokio::task::block_in_place(|| cluster.stop());
            down_at = Instant::now();
            tokio::time::sleep(down).await;
            tokio::task::block_in_place(|| cluster.restart());
        }
        Fault::Kill9 => {
            tokio::task::block_in_place(|| cluster.kill9());
            down_at = Instant::now();
            tokio::task::block_in_place(|| cluster.restart());
        }
        Fault::Control(pause) => tokio::time::sleep(pause).await,
    }
    let up = match fault {
        Fault::TerminateOnce => at,
        _ => Instant::now(),
    };
    tokio::time::sleep(AFTER).await;
    stop.store(true, Ordering::Relaxed);
    state_stop.store(true, Ordering::Relaxed);
    if let Some(t) = state_task {
        let _ = t.await;
    }
    let mut ops = Vec::new();
    let mut capped = 0;
    for task in tasks {
        match tokio::time::timeout(Duration::from_secs(20), task).await {
            Ok(Ok((more, hit_cap))) => {
                ops.extend(more);
                capped += usize::from(hit_cap);
            }
            _ => return Err(format!("{}: a task is stuck", kind.name())),
        }
    }
    if capped > 0 {
        eprintln!(
            "WARNING {} / {}: {capped} of {TASKS} tasks reached {MAX_OPS_PER_TASK} operations \
             before the end of the run; the figures after that are cut short",
            kind.name(),
            fault.name()
        );
    }
    ops.sort_by_key(|op| op.start);
    let seen = sampler.finish().await;
    pool.close().await;
    let label = format!("{} / {}", kind.name(), fault.name());
    if timeline {
        print_timeline(
            &label,
            &ops,
            up,
            &states
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
    }
    let rates = Rates::of(&ops, at, up + AFTER);
    let figures = Figures::compute(
        &label,
        &ops,
        Timeline {
            fault: at,
            down: down_at,
            up,
        },
        killed,
        seen,
        MAX,
    );
    Ok((figures, rates))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let timeline = args.iter().any(|a| a == "--timeline");
    let value = |flag: &str| {
        args.iter().position(|a| a == flag).map(|i| {
            args.get(i + 1)
                .cloned()
                .unwrap_or_else(|| panic!("{flag} needs a value"))
        })
    };
    let list =
        |flag: &str| value(flag).map(|v| v.split(',').map(str::to_owned).collect::<Vec<_>>());
    let pools = list("--pools");
    let faults = list("--faults");
    let repeats: usize = value("--repeats").map_or(1, |v| v.parse().expect("--repeats N"));
    let server_cpus = value("--server-cpus");
    if let Some(Err(e)) = server_cpus
        .as_deref()
        .map(|list| pool_benches::runner::check_core_list("--server-cpus", list))
    {
        eprintln!("{e}");
        std::process::exit(2);
    }
    let connects = Bounds {
        connects: value("--connects").map(|v| v.parse().expect("--connects N")),
        reconnects: value("--reconnects").map(|v| v.parse().expect("--reconnects N")),
        connect_delay: value("--connect-delay-ms")
            .map(|v| Duration::from_millis(v.parse().expect("--connect-delay-ms N"))),
        sqlx_simple: args.iter().any(|a| a == "--sqlx-simple"),
    };
    let wanted = |chosen: &Option<Vec<String>>, key: &str| {
        chosen.as_ref().is_none_or(|c| c.iter().any(|k| k == key))
    };
    let down = if quick {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(3)
    };
    let cpus = server_cpus.clone();
    let cluster = tokio::task::spawn_blocking(move || Cluster::start_on(cpus.as_deref()))
        .await
        .expect("start the cluster");
    cluster.set_postgres_password(PASSWORD).await;
    cluster.trust_tcp().await;
    let mut rows = Vec::new();
    let mut n = 0;
    let all = [
        Fault::TerminateOnce,
        Fault::Stop(down),
        Fault::Kill9,
        Fault::Control(down),
    ];
    for fault in all {
        // The control runs only when asked for (`--faults none`).
        let asked = match fault {
            Fault::Control(_) => faults
                .as_ref()
                .is_some_and(|f| f.iter().any(|k| k == "none")),
            _ => wanted(&faults, fault.key()),
        };
        if !asked {
            continue;
        }
        for _ in 0..repeats {
            for &kind in Kind::ALL {
                if !wanted(&pools, kind.key()) {
                    continue;
                }
                n += 1;
                // A fresh admin connection: the last fault may have ended the old one.
                let admin = cluster.admin().await;
                match run(&cluster, &admin, kind, fault, n, connects, timeline).await {
                    Ok((f, rates)) => {
                        f.print();
                        rows.push((kind, fault, f, rates));
                    }
                    Err(e) => eprintln!("{} / {}: {e}", kind.name(), fault.name()),
                }
            }
        }
    }
    println!();
    println!(
        "Pool of {MAX}, {TASKS} tasks of checkout + `SELECT 1`, acquire timeout {} s; each pool at its defaults (ours: `IsValid`, 500 ms bypass; deadpool: fast recycling). Every task pauses {} ms after a failed call, whatever the pool.",
        ACQUIRE.as_secs(),
        FAIL_PAUSE.as_millis()
    );
    if let Some(n) = connects.connects {
        println!();
        println!("Ours with `max_concurrent_connects({n})`.");
    }
    if let Some(n) = connects.reconnects {
        println!();
        println!("Ours with `max_concurrent_reconnects({n})`.");
    }
    if let Some(list) = &server_cpus {
        println!();
        println!("The server on cores {list} (`taskset -c {list}`).");
    }
    if let Some(d) = connects.connect_delay {
        println!();
        println!(
            "Every pool behind a proxy holding each new connection {} ms.",
            d.as_millis()
        );
    }
    println!();
    println!("| fault | pool | query errors / in flight (killed) | dead handed out after up | first success after up | 90 % throughput after up | ok/s: second before the fault / last second | callers while down: timed out / errors / ok | wait while down (mean / max) | max server sessions |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (kind, fault, f, rates) in &rows {
        println!(
            "| {} | {} | {} / {} ({}) | {} | {} | {} | {} / {} | {} / {} / {} | {} / {} | {} / {} |",
            fault.name(),
            kind.name(),
            f.query_errors,
            f.in_flight,
            f.killed,
            f.dead_after_up,
            ms(f.first_success),
            ms(f.to_90pct),
            rates.before,
            rates.last,
            f.down.timeouts,
            f.down.errors,
            f.down.ok,
            ms(Some(f.down.wait_mean)),
            ms(Some(f.down.wait_max)),
            f.sessions.max,
            MAX
        );
    }
}
