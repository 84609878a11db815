//! The fleet budget across real processes: four processes (this test
//! binary, re-run as children), each with a pool of 16, share one budget
//! of 20 connections on `DATABASE_URL`'s server. A sampler reads the
//! budget's advisory locks every 10 ms and checks that the budget's
//! connections never exceed 20, that every process gets connections and
//! makes progress, that a killed process's share is picked up by the others
//! within about 2 s, and that a process gone idle (`idle_timeout`) lets the
//! busy ones grow.
#![cfg(feature = "tokio-postgres")]

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pool_core::managers::fleet::FleetBudget;
use pool_core::managers::tokio_postgres::{PgError, PostgresManager};
use pool_core::{ManageConnection, Pool, PoolConfig};
use tokio_postgres::NoTls;

/// Set in a child: `index,budget name,busy ms,run ms,start dir`.
const CHILD_ENV: &str = "POOL_CORE_FLEET_CHILD";
/// The test's full name in its binary (module path included), for the
/// children to run it alone.
const TEST_NAME: &str = "tokio_postgres_fleet::a_fleet_budget_holds_across_processes";
const PROCESSES: usize = 4;
const PER_PROCESS: u32 = 16;
const BUDGET: u32 = 20;
const TASKS: usize = 32;

/// How long the parent waits for every child to be ready (see `RUN`).
const READY_WITHIN: Duration = Duration::from_secs(60);
/// When things happen, from the children's start. The start is a barrier:
/// each child builds its pool, says it is ready and starts when the parent
/// says go, so a process that took longer to start (a loaded machine) does
/// not find the budget already taken by the others.
const RUN: Duration = Duration::from_millis(9_500);
const KILL_AT: Duration = Duration::from_millis(3_000);
const IDLE_AT: Duration = Duration::from_millis(5_500);
/// The child killed, and the child that goes idle.
const KILLED: usize = 3;
const IDLER: usize = 0;

fn app_name(budget: &str, index: usize) -> String {
    format!("{budget}-{index}")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

#[test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
fn a_fleet_budget_holds_across_processes() {
    match std::env::var(CHILD_ENV) {
        Ok(spec) => runtime().block_on(child(&spec)),
        Err(_) => parent(),
    }
}

/// One process of the fleet: 32 tasks query through a pool of 16 until
/// `busy` has passed, then the process idles until `run` has passed and
/// prints its count.
async fn child(spec: &str) {
    let fields: Vec<&str> = spec.split(',').collect();
    let [index, budget, busy_ms, run_ms, dir] = fields[..] else {
        panic!("bad {CHILD_ENV}: {spec}");
    };
    let index: usize = index.parse().expect("index");
    let busy = Duration::from_millis(busy_ms.parse().expect("busy ms"));
    let run = Duration::from_millis(run_ms.parse().expect("run ms"));
    let dir = std::path::Path::new(dir);

    let mut pg: tokio_postgres::Config = crate::support::db::url("DATABASE_URL")
        .parse()
        .expect("DATABASE_URL");
    pg.application_name(app_name(budget, index));
    let manager = PostgresManager::new(pg, NoTls).fleet_budget(budget, BUDGET);
    let config = PoolConfig::builder()
        .max_size(PER_PROCESS)
        .min_size(0)
        .idle_timeout(Duration::from_millis(300))
        .housekeeping_period(Duration::from_millis(50))
        .acquire_timeout(Duration::from_secs(2))
        .build()
        .expect("config");
    let pool = Pool::new(manager, config).await.expect("pool");
    // The start barrier (`min_size(0)`: the pool holds no ticket yet).
    std::fs::write(dir.join(format!("ready-{index}")), b"").expect("say ready");
    let wait_from = Instant::now();
    while !dir.join("go").exists() {
        assert!(wait_from.elapsed() < READY_WITHIN, "child {index}: no go");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let started = Instant::now();
    let done = Arc::new(AtomicU64::new(0));
    let timeouts = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (pool, done, timeouts) = (pool.clone(), done.clone(), timeouts.clone());
        tasks.push(tokio::spawn(async move {
            while started.elapsed() < busy {
                match pool.get().await {
                    Ok(conn) => {
                        conn.batch_execute("SELECT pg_sleep(0.005)")
                            .await
                            .expect("query");
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    // A wait past acquire_timeout while the budget is
                    // full: counted, and tried again.
                    Err(_) => {
                        timeouts.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    tokio::time::sleep(run.saturating_sub(started.elapsed())).await;
    println!(
        "fleet-child {index} queries={} timeouts={}",
        done.load(Ordering::Relaxed),
        timeouts.load(Ordering::Relaxed)
    );
    pool.close().await;
}

/// One sample: connections holding a ticket, by child.
struct Sample {
    at: Duration,
    by_child: [i64; PROCESSES],
}

impl Sample {
    fn total(&self) -> i64 {
        self.by_child.iter().sum()
    }
}

fn parent() {
    let url = crate::support::db::url("DATABASE_URL");
    let budget_name = format!("pc_fleet_{}", std::process::id());
    let budget = FleetBudget::new(&budget_name, BUDGET).expect("budget");
    let exe = std::env::current_exe().expect("the test binary");
    let dir = std::env::temp_dir().join(&budget_name);
    std::fs::create_dir_all(&dir).expect("the start barrier's dir");
    let spawn = |index: usize| -> Child {
        let busy = if index == IDLER { IDLE_AT } else { RUN };
        Command::new(&exe)
            .args([TEST_NAME, "--exact", "--include-ignored", "--nocapture"])
            .env(
                CHILD_ENV,
                format!(
                    "{index},{budget_name},{},{},{}",
                    busy.as_millis(),
                    RUN.as_millis(),
                    dir.display()
                ),
            )
            .env("DATABASE_URL", &url)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn a child process")
    };
    let mut children: Vec<Child> = (0..PROCESSES).map(spawn).collect();
    let wait_from = Instant::now();
    while !(0..PROCESSES).all(|i| dir.join(format!("ready-{i}")).exists()) {
        if wait_from.elapsed() > READY_WITHIN {
            for child in &mut children {
                let _ = child.kill();
            }
            panic!("the children were not ready within {READY_WITHIN:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    std::fs::write(dir.join("go"), b"").expect("say go");
    let started = Instant::now();

    let samples = runtime().block_on(sample(&url, &budget, started, &mut children));

    let mut outputs = BTreeMap::new();
    for (index, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("child output");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if index != KILLED {
            assert!(
                out.status.success(),
                "child {index} failed: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        outputs.insert(index, stdout);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let queries = |index: usize| -> u64 {
        outputs[&index]
            .lines()
            .find_map(|l| l.strip_prefix(&format!("fleet-child {index} queries=")))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("child {index} printed no count: {}", outputs[&index]))
    };

    assert!(
        samples.len() > 100,
        "the sampler ran: {} samples",
        samples.len()
    );
    // The bound, in every sample.
    let peak = samples.iter().map(Sample::total).max().unwrap_or(0);
    assert!(
        peak <= i64::from(BUDGET),
        "the budget's connections reached {peak}"
    );
    // Everyone got connections before the kill, and made progress.
    for index in 0..PROCESSES {
        assert!(
            samples
                .iter()
                .any(|s| s.at < KILL_AT && s.by_child[index] > 0),
            "child {index} never held a connection"
        );
    }
    for index in (0..PROCESSES).filter(|&i| i != KILLED) {
        assert!(queries(index) > 0, "child {index} made no progress");
    }
    // The killed child's share is picked up.
    let picked_up = samples
        .iter()
        .find(|s| s.at > KILL_AT && s.by_child[KILLED] == 0 && s.total() == i64::from(BUDGET))
        .map(|s| s.at - KILL_AT);
    let picked_up = picked_up.expect("the others never took the killed child's share");
    assert!(
        picked_up <= Duration::from_millis(2_500),
        "the killed child's share took {picked_up:?} to be picked up"
    );
    // The idle child gives its share to the busy ones.
    let regrown = samples
        .iter()
        .find(|s| s.at > IDLE_AT && s.by_child[IDLER] == 0 && s.total() == i64::from(BUDGET))
        .map(|s| s.at - IDLE_AT);
    let regrown = regrown.expect("the busy children never took the idle child's share");
    assert!(
        regrown <= Duration::from_secs(3),
        "the idle child's share took {regrown:?} to move"
    );
    eprintln!(
        "fleet budget: {} samples, peak {peak} of {BUDGET}; killed share picked up in \
         {picked_up:?}, idle share moved in {regrown:?}; queries {:?}",
        samples.len(),
        (0..PROCESSES)
            .filter(|&i| i != KILLED)
            .map(|i| (i, queries(i)))
            .collect::<Vec<_>>()
    );
}

/// Samples the budget's locks every 10 ms until the children are done,
/// killing one at `KILL_AT`.
async fn sample(
    url: &str,
    budget: &FleetBudget,
    started: Instant,
    children: &mut [Child],
) -> Vec<Sample> {
    let (admin, connection) = url
        .parse::<tokio_postgres::Config>()
        .expect("DATABASE_URL")
        .connect(NoTls)
        .await
        .expect("sampler connection");
    tokio::spawn(connection);
    // pg_locks shows the first key in `classid`, an oid (unsigned).
    let classid = i64::from(u32::from_ne_bytes(budget.key().to_ne_bytes()));
    let statement = admin
        .prepare(
            "SELECT a.application_name, count(*) FROM pg_locks l \
             JOIN pg_stat_activity a ON a.pid = l.pid \
             WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted \
               AND l.classid::int8 = $1 GROUP BY 1",
        )
        .await
        .expect("prepare the sampler");
    let mut samples = Vec::new();
    let mut killed = false;
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while started.elapsed() < RUN + Duration::from_millis(300) {
        tick.tick().await;
        if !killed && started.elapsed() >= KILL_AT {
            children[KILLED].kill().expect("kill -9 a child");
            killed = true;
        }
        let at = started.elapsed();
        let rows = admin.query(&statement, &[&classid]).await.expect("sample");
        let mut by_child = [0; PROCESSES];
        for row in rows {
            let app: String = row.get(0);
            let index = (0..PROCESSES).find(|&i| app == app_name(budget.name(), i));
            let index = index.unwrap_or_else(|| panic!("a ticket held by {app}"));
            by_child[index] = row.get(1);
        }
        samples.push(Sample { at, by_child });
    }
    samples
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn a_connect_without_a_free_ticket_fails_naming_the_budget() {
    let url = crate::support::db::url("DATABASE_URL");
    let name = format!("pc_fleet_small_{}", std::process::id());
    let manager =
        PostgresManager::new(url.parse().expect("DATABASE_URL"), NoTls).fleet_budget(&name, 2);
    let a = manager.connect().await.expect("first ticket");
    let b = manager.connect().await.expect("second ticket");
    let mut tickets = [a.fleet_ticket(), b.fleet_ticket()];
    tickets.sort();
    assert_eq!(tickets, [Some(0), Some(1)]);

    let err = manager.connect().await.expect_err("no ticket left");
    assert!(matches!(err, PgError::FleetBudget(_)), "{err:?}");
    assert!(err.is_fleet_budget_exhausted());
    assert!(err.to_string().contains("fleet budget"), "{err}");

    // Closing a connection frees its ticket for the next connect.
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(5);
    let c = loop {
        match manager.connect().await {
            Ok(c) => break c,
            Err(e) if e.is_fleet_budget_exhausted() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("the freed ticket was not taken: {e}"),
        }
    };
    assert!(c.fleet_ticket().is_some());

    // Through a pool, a timeout names the budget.
    let config = crate::support::db::pool_config(4, 0, Duration::from_millis(300));
    let pool = Pool::new_lazy(manager, config);
    let err = pool.get().await.expect_err("no ticket for the pool");
    let text = format!("{err}");
    let chain = std::iter::successors(Some(&err as &dyn std::error::Error), |e| e.source())
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ");
    assert!(
        text.contains("fleet budget"),
        "the timeout names the budget: {chain}"
    );
    drop((b, c));
}
