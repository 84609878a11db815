//! The fleet budget across real processes: four processes (this test
//! binary, re-run as children), each with a pool of 16, share one budget
//! of 20 connections on `DATABASE_URL`'s server. A sampler reads the
//! budget's advisory locks every 10 ms and checks that the budget's
//! connections never exceed 20, that every process gets connections and
//! makes progress, that a killed process's share is picked up by the others
//! before the idle phase starts, and that a process gone idle
//! (`idle_timeout`) lets the busy ones grow before the run ends. How long
//! each took is printed (about 2 s for the first here), not asserted: a
//! loaded machine stretches both, and the sampler's window bounds them.
#![cfg(feature = "tokio-postgres")]

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pool_core::{ManageConnection, Pool, PoolConfig, PooledConnection};
use pool_postgres::fleet::FleetBudget;
use pool_postgres::{PgError, PostgresManager};
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
        picked_up <= IDLE_AT - KILL_AT,
        "the killed child's share took {picked_up:?}: not before the idle phase"
    );
    // The idle child gives its share to the busy ones: it keeps only its
    // fair share control session's ticket.
    let regrown = samples
        .iter()
        .find(|s| s.at > IDLE_AT && s.by_child[IDLER] <= 1 && s.total() == i64::from(BUDGET))
        .map(|s| s.at - IDLE_AT);
    // Found within the sampler's window, so before the run ended.
    let regrown = regrown.expect("the busy children never took the idle child's share");
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
    // Fair share off: no control session takes one of the two tickets.
    let manager = PostgresManager::new(url.parse().expect("DATABASE_URL"), NoTls)
        .fleet_budget(&name, 2)
        .fleet_share_interval(None);
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

/// The fair share tests' budget, and how many queries each instance's
/// tasks keep in flight (more than the share, so every instance wants more
/// than it is guaranteed).
const SHARE_BUDGET: u32 = 20;
const SHARE_TASKS: usize = 24;
/// The late instance's time to its share is polled for this long at most.
const SHARE_WITHIN: Duration = Duration::from_secs(10);

/// An instance of the fair share tests: its own manager and pool, named by
/// application_name, and a count of the queries it ran.
struct Instance {
    pool: Pool<PostgresManager<NoTls>>,
    done: Arc<AtomicU64>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Instance {
    fn new(url: &str, budget: &str, index: usize) -> Self {
        let mut pg: tokio_postgres::Config = url.parse().expect("DATABASE_URL");
        pg.application_name(app_name(budget, index));
        let manager = PostgresManager::new(pg, NoTls).fleet_budget(budget, SHARE_BUDGET);
        // No idle_timeout and no max_lifetime: only the fair share moves
        // tickets between instances.
        let config = PoolConfig::builder()
            .max_size(SHARE_BUDGET)
            .min_size(0)
            .acquire_timeout(Duration::from_secs(1))
            .build()
            .expect("config");
        Self {
            pool: Pool::new_lazy(manager, config),
            done: Arc::new(AtomicU64::new(0)),
            stop: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            tasks: Vec::new(),
        }
    }

    /// Starts `tasks` tasks running short queries until `stop` (a timeout
    /// while the budget is full is tried again), for at most `RUN_AT_MOST`.
    fn load(&mut self, tasks: usize) {
        const RUN_AT_MOST: Duration = Duration::from_secs(40);
        let started = Instant::now();
        for _ in 0..tasks {
            let (pool, done, stop) = (self.pool.clone(), self.done.clone(), self.stop.clone());
            self.tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) && started.elapsed() < RUN_AT_MOST {
                    if let Ok(conn) = pool.get().await {
                        conn.batch_execute("SELECT pg_sleep(0.002)")
                            .await
                            .expect("query");
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
    }

    async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            task.await.expect("load task");
        }
        self.pool.close().await;
    }
}

/// Tickets of `budget` held, by application_name.
async fn tickets_by_app(
    admin: &tokio_postgres::Client,
    budget: &FleetBudget,
) -> BTreeMap<String, i64> {
    let classid = i64::from(u32::from_ne_bytes(budget.key().to_ne_bytes()));
    admin
        .query(
            "SELECT a.application_name, count(*) FROM pg_locks l \
             JOIN pg_stat_activity a ON a.pid = l.pid \
             WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted \
               AND l.classid::int8 = $1 GROUP BY 1",
            &[&classid],
        )
        .await
        .expect("read pg_locks")
        .into_iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

async fn connect_admin(url: &str) -> tokio_postgres::Client {
    let (client, connection) = url
        .parse::<tokio_postgres::Config>()
        .expect("DATABASE_URL")
        .connect(NoTls)
        .await
        .expect("admin connection");
    tokio::spawn(connection);
    client
}

/// Polls `admin` every 20 ms until `done` says yes of the tickets by
/// application_name, for at most `within`; the time it took, or `None`.
async fn poll_tickets(
    admin: &tokio_postgres::Client,
    budget: &FleetBudget,
    within: Duration,
    done: impl Fn(&BTreeMap<String, i64>) -> bool,
) -> Option<Duration> {
    let from = Instant::now();
    while from.elapsed() < within {
        if done(&tickets_by_app(admin, budget).await) {
            return Some(from.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

fn unique_budget(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("pc_{test}_{}_{nanos}", std::process::id())
}

/// A rolling deploy under load: four instances fill a budget of 20, a
/// fifth starts, and within a bounded time it holds its share,
/// `floor(20 / 5) = 4` tickets, while the budget is never exceeded and the
/// four older instances keep being served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn a_late_instance_gets_its_fair_share_under_load() {
    tokio::time::timeout(Duration::from_secs(90), async {
        let url = crate::support::db::url("DATABASE_URL");
        let name = unique_budget("fleet_roll");
        let budget = FleetBudget::new(&name, SHARE_BUDGET).expect("budget");
        let admin = connect_admin(&url).await;
        let share = pool_postgres::fleet::fair_share(SHARE_BUDGET, 5);
        assert_eq!(share, 4);

        let mut old: Vec<Instance> = (0..4).map(|i| Instance::new(&url, &name, i)).collect();
        for instance in &mut old {
            instance.load(SHARE_TASKS);
        }
        let full = |held: &BTreeMap<String, i64>| held.values().sum::<i64>() == i64::from(SHARE_BUDGET);
        poll_tickets(&admin, &budget, SHARE_WITHIN, full)
            .await
            .expect("the four instances never filled the budget");

        // The sampler: the peak of the budget's tickets, every 10 ms.
        let peak = Arc::new(AtomicU64::new(0));
        let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let sampler = tokio::spawn({
            let (peak, sampling, url, budget) = (peak.clone(), sampling.clone(), url.clone(), budget.clone());
            async move {
                let admin = connect_admin(&url).await;
                let mut samples = 0_u32;
                while sampling.load(Ordering::Relaxed) && samples < 10_000 {
                    let held: i64 = tickets_by_app(&admin, &budget).await.values().sum();
                    peak.fetch_max(u64::try_from(held).unwrap_or(0), Ordering::Relaxed);
                    samples += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                samples
            }
        });

        let mut late = Instance::new(&url, &name, 4);
        late.load(SHARE_TASKS);
        let late_app = app_name(&name, 4);
        let took = poll_tickets(&admin, &budget, SHARE_WITHIN, |held| {
            held.get(&late_app).copied().unwrap_or(0) >= i64::from(share)
        })
        .await;
        let took = took.unwrap_or_else(|| panic!("the late instance did not reach its share of {share} within {SHARE_WITHIN:?}"));
        let view = late.pool.manager().fleet_share().expect("fair share on");
        assert_eq!((view.members, view.share), (5, share), "{view:?}");

        // The older instances keep being served, each holding its share.
        let before: Vec<u64> = old.iter().map(|i| i.done.load(Ordering::Relaxed)).collect();
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        for (index, instance) in old.iter().enumerate() {
            let now = instance.done.load(Ordering::Relaxed);
            assert!(now > before[index], "instance {index} ran no query after the late one joined");
        }
        let held = tickets_by_app(&admin, &budget).await;
        for index in 0..5 {
            let n = held.get(&app_name(&name, index)).copied().unwrap_or(0);
            assert!(n >= i64::from(share), "instance {index} holds {n} tickets: {held:?}");
        }

        sampling.store(false, Ordering::Relaxed);
        let samples = sampler.await.expect("sampler");
        let peak = peak.load(Ordering::Relaxed);
        assert!(samples > 10, "only {samples} samples");
        assert!(peak <= u64::from(SHARE_BUDGET), "the budget's tickets reached {peak}");
        eprintln!("fleet fair share: the late instance reached its share of {share} in {took:?}; peak {peak} of {SHARE_BUDGET} over {samples} samples");

        late.stop().await;
        for instance in old {
            instance.stop().await;
        }
    })
    .await
    .expect("the test did not finish within its bound");
}

/// Shares left unused are borrowed: with five live instances, one busy and
/// four idle (holding no connection), the busy one holds the whole budget;
/// when one of the idle ones gets busy, it gets its share back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn an_instance_alone_borrows_the_whole_budget() {
    tokio::time::timeout(Duration::from_secs(90), async {
        let url = crate::support::db::url("DATABASE_URL");
        let name = unique_budget("fleet_borrow");
        let budget = FleetBudget::new(&name, SHARE_BUDGET).expect("budget");
        let admin = connect_admin(&url).await;
        let mut instances: Vec<Instance> = (0..5).map(|i| Instance::new(&url, &name, i)).collect();
        // Each instance connects once (its control session joins, holding
        // one ticket) and then holds no connection.
        for instance in &instances {
            let conn = instance.pool.get().await.expect("a first connection");
            PooledConnection::discard(conn);
        }
        let controls =
            |held: &BTreeMap<String, i64>| held.len() == 5 && held.values().all(|&n| n == 1);
        poll_tickets(&admin, &budget, SHARE_WITHIN, controls)
            .await
            .expect("the control sessions never joined, or the first connections never closed");

        // Every instance has counted the five (one recheck each).
        let from = Instant::now();
        while !instances.iter().all(|i| {
            i.pool
                .manager()
                .fleet_share()
                .is_some_and(|v| v.members == 5)
        }) {
            assert!(
                from.elapsed() < SHARE_WITHIN,
                "the instances never counted five"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        // The busy one takes all but the four others' control sessions.
        instances[0].load(SHARE_TASKS + 6);
        let busy = app_name(&name, 0);
        poll_tickets(&admin, &budget, SHARE_WITHIN, |held| {
            held.get(&busy).copied() == Some(i64::from(SHARE_BUDGET) - 4)
        })
        .await
        .expect("the busy instance never borrowed the whole budget");
        let view = instances[0]
            .pool
            .manager()
            .fleet_share()
            .expect("fair share on");
        assert_eq!((view.members, view.share), (5, 4), "{view:?}");

        // A lender wants its share back.
        instances[1].load(SHARE_TASKS);
        let lender = app_name(&name, 1);
        poll_tickets(&admin, &budget, SHARE_WITHIN, |held| {
            held.get(&lender).copied().unwrap_or(0) >= 4
        })
        .await
        .expect("the lender never got its share back");
        let held = tickets_by_app(&admin, &budget).await;
        assert!(
            held.values().sum::<i64>() <= i64::from(SHARE_BUDGET),
            "{held:?}"
        );

        for instance in instances {
            instance.stop().await;
        }
    })
    .await
    .expect("the test did not finish within its bound");
}

#[test]
fn bad_fair_share_settings_fail_validate() {
    use pool_postgres::fleet::FleetBudgetConfigError;
    use pool_postgres::PgConfigError;
    let manager = || PostgresManager::new(tokio_postgres::Config::new(), NoTls);
    let zero = manager()
        .fleet_budget("api", 3)
        .fleet_share_interval(Some(Duration::ZERO));
    assert!(matches!(
        zero.validate(),
        Err(PgConfigError::FleetBudget(
            FleetBudgetConfigError::ZeroShareInterval
        ))
    ));
    let early = manager().fleet_share_interval(None).fleet_budget("api", 3);
    assert!(matches!(
        early.validate(),
        Err(PgConfigError::FleetBudget(
            FleetBudgetConfigError::ShareIntervalWithoutBudget
        ))
    ));
    let off = manager().fleet_budget("api", 3).fleet_share_interval(None);
    assert!(off.validate().is_ok() && off.fleet_share().is_none());
    let view = manager()
        .fleet_budget("api", 3)
        .fleet_share()
        .expect("on by default");
    assert_eq!(
        (view.members, view.share, view.held, view.wanting),
        (0, 3, 0, false)
    );
}

/// How many sessions `application_name` has open on the server, and how
/// many of them hold a ticket of `budget`.
async fn sessions_and_tickets(
    admin: &tokio_postgres::Client,
    app: &str,
    budget: &FleetBudget,
) -> (i64, i64) {
    let classid = i64::from(u32::from_ne_bytes(budget.key().to_ne_bytes()));
    let row = admin
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE EXISTS (SELECT 1 FROM pg_locks l \
               WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.objsubid = 2 \
               AND l.granted AND l.classid::int8 = $2)) \
             FROM pg_stat_activity a WHERE a.application_name = $1",
            &[&app, &classid],
        )
        .await
        .expect("read pg_stat_activity");
    (row.get(0), row.get(1))
}

/// Whether the session behind `conn` holds a ticket of `budget`, and how
/// many other advisory locks it holds.
async fn own_locks(conn: &tokio_postgres::Client, budget: &FleetBudget) -> (bool, i64) {
    let classid = i64::from(u32::from_ne_bytes(budget.key().to_ne_bytes()));
    let row = conn
        .query_one(
            "SELECT count(*) FILTER (WHERE l.classid::int8 = $1 AND l.objsubid = 2) = 1, \
                    count(*) FILTER (WHERE NOT (l.classid::int8 = $1 AND l.objsubid = 2)) \
             FROM pg_locks l WHERE l.pid = pg_backend_pid() AND l.locktype = 'advisory' \
               AND l.granted",
            &[&classid],
        )
        .await
        .expect("read own locks");
    (row.get(0), row.get(1))
}

/// `ResetMode::Clean` releases the session's advisory locks on every
/// return, but not its fleet ticket: a budget of 1, one return, and a
/// second caller finds no ticket while the first connection is open (and
/// the server shows one session, holding the ticket). The user's own
/// advisory locks are still released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn the_clean_reset_keeps_the_ticket() {
    use pool_postgres::ResetMode;
    tokio::time::timeout(Duration::from_secs(30), async {
        let url = crate::support::db::url("DATABASE_URL");
        let name = unique_budget("fleet_clean");
        let budget = FleetBudget::new(&name, 1).expect("budget");
        let admin = connect_admin(&url).await;
        let mut pg: tokio_postgres::Config = url.parse().expect("DATABASE_URL");
        pg.application_name(&name);
        let manager = PostgresManager::new(pg, NoTls)
            .reset_mode(ResetMode::Clean)
            .fleet_budget(&name, 1)
            .fleet_share_interval(None);
        let pool = Pool::new_lazy(
            manager,
            crate::support::db::pool_config(2, 0, Duration::from_millis(400)),
        );
        for round in 0..3 {
            let conn = pool.get().await.expect("the budget's one connection");
            assert_eq!(own_locks(&conn, &budget).await, (true, 0), "round {round}");
            conn.batch_execute("SELECT pg_advisory_lock(1, 2); SELECT pg_advisory_lock(3)")
                .await
                .expect("the user's own locks");
            drop(conn);
            // The return's reset has run once the connection is idle again.
            let from = Instant::now();
            while pool.state().idle != 1 {
                assert!(from.elapsed() < Duration::from_secs(5), "never idle again");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let a = pool.get().await.expect("the idle connection");
            assert_eq!(
                own_locks(&a, &budget).await,
                (true, 0),
                "round {round}: the ticket is kept and the user's locks are gone"
            );
            let err = pool.get().await.expect_err("no second ticket");
            assert!(err.to_string().contains("fleet budget"), "{err}");
            // A refused connect's session may still be closing on the
            // server; an open connection without a ticket would stay.
            let from = Instant::now();
            loop {
                let seen = sessions_and_tickets(&admin, &name, &budget).await;
                if seen == (1, 1) {
                    break;
                }
                assert!(
                    from.elapsed() < Duration::from_secs(2),
                    "round {round}: (sessions, tickets) = {seen:?}"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }

        // A user who released the ticket by hand, and another session took
        // it: the reset finds it held and the pool closes the connection,
        // which holds no ticket any more. (First the last return settles,
        // and no connect of the pool is under way to take the ticket.)
        let from = Instant::now();
        loop {
            let state = pool.state();
            if (state.idle, state.opening, state.waiting) == (1, 0, 0) {
                break;
            }
            assert!(
                from.elapsed() < Duration::from_secs(5),
                "never settled: {state:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let conn = pool.get().await.expect("the budget's one connection");
        conn.batch_execute("SELECT pg_advisory_unlock_all()")
            .await
            .expect("unlock by hand");
        let thief = pool.manager().connect().await.expect("the freed ticket");
        drop(conn);
        let from = Instant::now();
        while pool.state().total != 0 {
            assert!(
                from.elapsed() < Duration::from_secs(5),
                "never closed: {:?}",
                pool.state()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let from = Instant::now();
        while sessions_and_tickets(&admin, &name, &budget).await != (1, 1) {
            assert!(
                from.elapsed() < Duration::from_secs(5),
                "the ticketless session stayed open"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(thief);
        pool.close().await;
    })
    .await
    .expect("the test did not finish within its bound");
}

/// The sessions of every application_name that starts with `prefix`, as
/// the server shows them: (open, holding a ticket of `budget`, open for a
/// second or more without one). A connect that finds no ticket free is
/// open without one for a moment (it asks, then closes); a session the
/// pool keeps open must hold one.
async fn budget_sessions(
    admin: &tokio_postgres::Client,
    prefix: &str,
    budget: &FleetBudget,
) -> (i64, i64, i64) {
    let classid = i64::from(u32::from_ne_bytes(budget.key().to_ne_bytes()));
    let row = admin
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE t.held), \
               count(*) FILTER (WHERE NOT t.held AND a.backend_start < now() - interval '1 second') \
             FROM pg_stat_activity a, LATERAL (SELECT EXISTS (SELECT 1 FROM pg_locks l \
               WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.objsubid = 2 \
               AND l.granted AND l.classid::int8 = $2)) AS t(held) \
             WHERE starts_with(a.application_name, $1)",
            &[&prefix, &classid],
        )
        .await
        .expect("read pg_stat_activity");
    (row.get(0), row.get(1), row.get(2))
}

/// Samples [`budget_sessions`] every 20 ms until `stop`, at most 2 000
/// times; the samples.
fn budget_sampler(
    url: &str,
    prefix: &str,
    budget: &FleetBudget,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<Vec<(i64, i64, i64)>> {
    let (url, prefix, budget) = (url.to_owned(), prefix.to_owned(), budget.clone());
    tokio::spawn(async move {
        let admin = connect_admin(&url).await;
        let mut samples = Vec::new();
        while !stop.load(Ordering::Relaxed) && samples.len() < 2_000 {
            samples.push(budget_sessions(&admin, &prefix, &budget).await);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        samples
    })
}

/// Every session the pool opens for a budget counts against it, the fair
/// share's control sessions included: two instances in one process under
/// load fill a budget of 20, and the server never shows a session of
/// theirs open for a second without a ticket, nor more than 20 sessions
/// that old.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn the_fair_share_opens_no_session_outside_the_budget() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let url = crate::support::db::url("DATABASE_URL");
        let name = unique_budget("fleet_sessions");
        let budget = FleetBudget::new(&name, SHARE_BUDGET).expect("budget");
        let admin = connect_admin(&url).await;
        let mut instances: Vec<Instance> = (0..2).map(|i| Instance::new(&url, &name, i)).collect();
        for instance in &mut instances {
            instance.load(SHARE_TASKS);
        }
        let full =
            |held: &BTreeMap<String, i64>| held.values().sum::<i64>() == i64::from(SHARE_BUDGET);
        poll_tickets(&admin, &budget, SHARE_WITHIN, full)
            .await
            .expect("the two instances never filled the budget");
        // Both instances have joined (each counts two).
        let from = Instant::now();
        while !instances.iter().all(|i| {
            i.pool
                .manager()
                .fleet_share()
                .is_some_and(|v| v.members == 2)
        }) {
            assert!(
                from.elapsed() < SHARE_WITHIN,
                "the instances never counted two"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sampler = budget_sampler(&url, &name, &budget, stop.clone());
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        stop.store(true, Ordering::Relaxed);
        let samples = sampler.await.expect("sampler");
        assert!(samples.len() > 10, "only {} samples", samples.len());
        for &(open, ticketed, stale) in &samples {
            assert!(
                ticketed <= i64::from(SHARE_BUDGET),
                "{ticketed} tickets held"
            );
            assert_eq!(
                stale, 0,
                "{stale} sessions open for a second without a ticket ({open} open)"
            );
        }
        let peak = samples.iter().map(|s| s.0).max().unwrap_or(0);
        eprintln!(
            "fleet sessions: peak {peak} open (connects in flight included) of {SHARE_BUDGET}"
        );
        for instance in instances {
            instance.stop().await;
        }
    })
    .await
    .expect("the test did not finish within its bound");
}

/// Hooks that check, on the server, that every connection the pool opens,
/// hands out or takes back holds its ticket, and turn some connections
/// down (closed by the pool) so that tickets move.
struct TicketHooks {
    budget: FleetBudget,
    missing: Arc<AtomicU64>,
    turns: AtomicU64,
}

impl TicketHooks {
    async fn check(&self, conn: &pool_postgres::PgClient) {
        if !own_locks(conn, &self.budget).await.0 {
            self.missing.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every `n`th call says no.
    fn turn_down(&self, n: u64) -> bool {
        self.turns.fetch_add(1, Ordering::Relaxed) % n == n - 1
    }
}

#[pool_core::async_trait]
impl pool_core::Hooks<PostgresManager<NoTls>> for TicketHooks {
    async fn after_connect(&self, conn: &mut pool_postgres::PgClient) -> Result<(), PgError> {
        self.check(conn).await;
        // A session setting and a lock of the user's own, which the Clean
        // reset undoes and the others keep.
        conn.batch_execute("SET search_path TO public; SELECT pg_try_advisory_lock(77, 1)")
            .await?;
        Ok(())
    }

    async fn before_acquire(
        &self,
        conn: &mut pool_postgres::PgClient,
        _info: pool_core::ConnectionInfo,
    ) -> Result<bool, PgError> {
        self.check(conn).await;
        Ok(!self.turn_down(7))
    }

    async fn after_release(
        &self,
        conn: &mut pool_postgres::PgClient,
        _info: pool_core::ConnectionInfo,
    ) -> Result<bool, PgError> {
        self.check(conn).await;
        Ok(!self.turn_down(5))
    }
}

/// The fleet budget's property under a mixed load: four pools share one
/// budget of 8, each with its own reset mode (Clean, RollbackAlways,
/// Rollback, None), with and without fair share and hooks, their
/// callers leaving transactions open, taking advisory locks, discarding
/// connections, while one pool is resized up and down. Sampled every
/// 20 ms: the tickets held never pass 8 and no session stays open without
/// one; every connection handed out holds its ticket on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn a_shared_budget_holds_under_mixed_resets_hooks_discards_and_resize() {
    use pool_postgres::ResetMode;
    const TOTAL: u32 = 8;
    const RUN: Duration = Duration::from_millis(4_000);
    tokio::time::timeout(Duration::from_secs(60), async {
        let url = crate::support::db::url("DATABASE_URL");
        let name = unique_budget("fleet_mixed");
        let budget = FleetBudget::new(&name, TOTAL).expect("budget");
        let missing = Arc::new(AtomicU64::new(0));
        let modes = [
            (ResetMode::Clean, true, true),
            (ResetMode::RollbackAlways, true, false),
            (ResetMode::Rollback, false, true),
            (ResetMode::None, true, true),
        ];
        let mut pools = Vec::new();
        for (index, &(mode, share, hooks)) in modes.iter().enumerate() {
            let mut pg: tokio_postgres::Config = url.parse().expect("DATABASE_URL");
            pg.application_name(app_name(&name, index));
            let mut manager = PostgresManager::new(pg, NoTls)
                .reset_mode(mode)
                .fleet_budget(&name, TOTAL);
            if !share {
                manager = manager.fleet_share_interval(None);
            }
            let config = PoolConfig::builder()
                .max_size(4)
                .min_size(0)
                .acquire_timeout(Duration::from_millis(500))
                .build()
                .expect("config");
            pools.push(if hooks {
                Pool::new_lazy_with_hooks(
                    manager,
                    config,
                    TicketHooks {
                        budget: budget.clone(),
                        missing: missing.clone(),
                        turns: AtomicU64::new(0),
                    },
                )
            } else {
                Pool::new_lazy(manager, config)
            });
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sampler = budget_sampler(&url, &name, &budget, stop.clone());
        let started = Instant::now();
        let done = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for (index, pool) in pools.iter().enumerate() {
            for task in 0..3_u64 {
                let (pool, done, budget, missing) =
                    (pool.clone(), done.clone(), budget.clone(), missing.clone());
                tasks.push(tokio::spawn(async move {
                    let mut round = task;
                    while started.elapsed() < RUN {
                        round += 1;
                        let Ok(conn) = pool.get().await else {
                            continue;
                        };
                        if !own_locks(&conn, &budget).await.0 {
                            missing.fetch_add(1, Ordering::Relaxed);
                        }
                        let sql = match round % 4 {
                            0 => "BEGIN; SELECT pg_sleep(0.002)",
                            1 => "SELECT pg_try_advisory_lock(78, 2); SELECT pg_sleep(0.002)",
                            2 => "SET statement_timeout = '5s'; SELECT pg_sleep(0.002)",
                            _ => "SELECT pg_sleep(0.002)",
                        };
                        // A Rollback pool does not see a raw BEGIN: its
                        // callers leave none open.
                        let sql = if index == 2 && round % 4 == 0 { "SELECT pg_sleep(0.002)" } else { sql };
                        conn.batch_execute(sql).await.expect("query");
                        done.fetch_add(1, Ordering::Relaxed);
                        if round % 6 == 0 {
                            PooledConnection::discard(conn);
                        }
                    }
                }));
            }
        }
        let resizer = tokio::spawn({
            let pool = pools[1].clone();
            async move {
                let mut size = 4;
                while started.elapsed() < RUN {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    size = if size == 4 { 1 } else { 4 };
                    pool.resize(size).expect("resize");
                }
            }
        });
        crate::support::db::join_all(tasks).await;
        resizer.await.expect("resizer");
        // A last look after the load, once every return has settled.
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        stop.store(true, Ordering::Relaxed);
        let samples = sampler.await.expect("sampler");
        assert!(samples.len() > 50, "only {} samples", samples.len());
        for &(open, ticketed, stale) in &samples {
            assert!(ticketed <= i64::from(TOTAL), "{ticketed} tickets held");
            assert_eq!(stale, 0, "{stale} sessions open for a second without a ticket ({open} open)");
        }
        assert_eq!(
            missing.load(Ordering::Relaxed),
            0,
            "connections handed out, opened or returned without their ticket"
        );
        let done = done.load(Ordering::Relaxed);
        assert!(done > 20, "only {done} queries ran");
        eprintln!(
            "fleet mixed load: {done} queries, {} samples, peak {} open (connects in flight included), {} with a ticket",
            samples.len(),
            samples.iter().map(|s| s.0).max().unwrap_or(0),
            samples.iter().map(|s| s.1).max().unwrap_or(0),
        );
        for pool in pools {
            pool.close().await;
        }
    })
    .await
    .expect("the test did not finish within its bound");
}
