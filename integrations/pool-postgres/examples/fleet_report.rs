//! Measures the fleet budget (`PostgresManager::fleet_budget`) and prints
//! Markdown tables:
//!
//! 1. **cost**: one connect's time with and without a budget (N each);
//! 2. **fleet**: four processes (this binary re-run as children) with
//!    uneven load, two busy (64 tasks) and two light (4 tasks), first
//!    sharing a budget of 20 (pools of 16), then with fixed pools of 5
//!    (the same 20, split evenly): server connections over time and queries
//!    per second per process;
//! 3. **fair share**: a rolling deploy in this process: four instances
//!    (pools of 20, a manager each) under load fill a budget of 20, a fifth
//!    starts under the same load; the time until it holds its share
//!    (`floor(20 / 5) = 4` tickets, read from `pg_locks`) is measured
//!    `--runs` times (5 by default), with the default share interval (1 s).
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
//!   cargo run --release -p pool-postgres --example fleet_report -- \
//!   --connects 500 --seconds 10 --runs 5 --out fleet_report.md
//! ```
//!
//! Server connections are counted without the fair share's control
//! sessions. Numbers mean something only on an otherwise idle machine.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pool_core::{ManageConnection, Pool, PoolConfig};
use pool_postgres::fleet::{fair_share, FleetBudget};
use pool_postgres::PostgresManager;
use tokio_postgres::NoTls;

const CHILD_ENV: &str = "POOL_CORE_FLEET_REPORT_CHILD";
const PROCESSES: usize = 4;
const BUDGET: u32 = 20;
const BUDGET_POOL: u32 = 16;
const FIXED_POOL: u32 = BUDGET / PROCESSES as u32;
/// Tasks per process: two busy processes, two light ones.
const TASKS: [usize; PROCESSES] = [64, 64, 4, 4];

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn url() -> Result<String, BoxError> {
    std::env::var("DATABASE_URL")
        .map_err(|_| "set DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/test)".into())
}

fn arg(name: &str, default: u64) -> Result<u64, BoxError> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        Some(i) => Ok(args
            .get(i + 1)
            .ok_or_else(|| format!("{name} needs a value"))?
            .parse()?),
        None => Ok(default),
    }
}

fn main() -> Result<(), BoxError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        return runtime.block_on(child(&spec));
    }
    let connects = arg("--connects", 200)?;
    let seconds = arg("--seconds", 6)?;
    let mut report = String::new();
    runtime.block_on(cost(&mut report, connects))?;
    for budget in [true, false] {
        runtime.block_on(fleet(&mut report, budget, Duration::from_secs(seconds)))?;
    }
    let runs = arg("--runs", 5)?;
    runtime.block_on(rolling(&mut report, runs))?;
    print!("{report}");
    if let Ok(out) = std::env::args()
        .skip_while(|a| a != "--out")
        .nth(1)
        .ok_or(())
    {
        std::fs::write(&out, &report)?;
        eprintln!("written to {out}");
    }
    Ok(())
}

/// Sequential connects with and without a budget.
async fn cost(report: &mut String, n: u64) -> Result<(), BoxError> {
    let pg: tokio_postgres::Config = url()?.parse()?;
    let name = format!("fleet_report_cost_{}", std::process::id());
    let plain = PostgresManager::new(pg.clone(), NoTls);
    let budgeted = PostgresManager::new(pg, NoTls).fleet_budget(&name, 1_000);
    let mut rows = Vec::new();
    // Alternate the two so that drift on the machine hits both alike.
    let mut times: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..n {
        for (i, m) in [&plain, &budgeted].into_iter().enumerate() {
            let t = Instant::now();
            let conn = m.connect().await?;
            times[i].push(t.elapsed());
            drop(conn);
        }
    }
    for (label, mut t) in ["without budget", "with budget"].into_iter().zip(times) {
        t.sort();
        let mean = t.iter().sum::<Duration>() / u32::try_from(t.len()).unwrap_or(1).max(1);
        let pct = |p: usize| t[(t.len() * p / 100).min(t.len() - 1)];
        rows.push((label, mean, pct(50), pct(99)));
    }
    writeln!(report, "## Cost per connect ({n} connects each)\n")?;
    writeln!(report, "| | mean | p50 | p99 |\n|---|---|---|---|")?;
    for (label, mean, p50, p99) in &rows {
        writeln!(report, "| {label} | {mean:.2?} | {p50:.2?} | {p99:.2?} |")?;
    }
    let extra = rows[1].2.saturating_sub(rows[0].2);
    writeln!(
        report,
        "\nThe budget adds {extra:.2?} at the median (one round trip).\n"
    )?;
    Ok(())
}

/// Four processes, with a shared budget or fixed pools.
async fn fleet(report: &mut String, budget: bool, run: Duration) -> Result<(), BoxError> {
    let url = url()?;
    let tag = format!(
        "fleet_report_{}_{}",
        std::process::id(),
        if budget { "b" } else { "f" }
    );
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for index in 0..PROCESSES {
        children.push(
            Command::new(&exe)
                .env(
                    CHILD_ENV,
                    format!("{index},{tag},{budget},{}", run.as_millis()),
                )
                .env("DATABASE_URL", &url)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()?,
        );
    }
    let (admin, connection) = url
        .parse::<tokio_postgres::Config>()?
        .connect(NoTls)
        .await?;
    tokio::spawn(connection);
    let control_oid = oid(FleetBudget::new(&tag, BUDGET)?.control_key());
    let started = Instant::now();
    let mut timeline: BTreeMap<u64, [i64; PROCESSES]> = BTreeMap::new();
    while started.elapsed() < run + Duration::from_millis(500) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let rows = admin
            .query(
                "SELECT application_name, count(*) FROM pg_stat_activity \
                 WHERE application_name LIKE $1 AND pid NOT IN (SELECT pid FROM pg_locks \
                   WHERE locktype = 'advisory' AND objsubid = 2 AND classid::int8 = $2) \
                 GROUP BY 1",
                &[&format!("{tag}-%"), &control_oid],
            )
            .await?;
        let mut counts = [0; PROCESSES];
        for row in rows {
            let app: String = row.get(0);
            if let Some(i) = app.rsplit('-').next().and_then(|i| i.parse::<usize>().ok()) {
                counts[i.min(PROCESSES - 1)] = row.get(1);
            }
        }
        // Keep the peak per half second.
        let slot = u64::try_from(started.elapsed().as_millis() / 500).unwrap_or(0);
        let entry = timeline.entry(slot).or_insert([0; PROCESSES]);
        let total: i64 = counts.iter().sum();
        if total > entry.iter().sum() {
            *entry = counts;
        }
    }
    let mut qps = Vec::new();
    for child in children {
        let out = child.wait_with_output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let n: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("queries="))
            .ok_or_else(|| format!("a child printed no count: {text}"))?
            .trim()
            .parse()?;
        qps.push(n / run.as_secs_f64());
    }
    let title = if budget {
        format!("one budget of {BUDGET}, pools of {BUDGET_POOL}")
    } else {
        format!("fixed pools of {FIXED_POOL}")
    };
    writeln!(report, "## Four processes, {title}\n")?;
    writeln!(
        report,
        "Tasks per process: {TASKS:?}. Peak server connections per half second (per process, total):\n"
    )?;
    writeln!(
        report,
        "| t (s) | p0 | p1 | p2 | p3 | total |\n|---|---|---|---|---|---|"
    )?;
    for (slot, c) in &timeline {
        let at = *slot as f64 / 2.0;
        let total: i64 = c.iter().sum();
        writeln!(
            report,
            "| {at:.1} | {} | {} | {} | {} | {total} |",
            c[0], c[1], c[2], c[3]
        )?;
    }
    writeln!(report, "\n| process | tasks | queries/s |\n|---|---|---|")?;
    for (i, q) in qps.iter().enumerate() {
        writeln!(report, "| p{i} | {} | {q:.0} |", TASKS[i])?;
    }
    writeln!(report, "| all | | {:.0} |\n", qps.iter().sum::<f64>())?;
    Ok(())
}

/// One process: its tasks query through the pool for `run`.
async fn child(spec: &str) -> Result<(), BoxError> {
    let fields: Vec<&str> = spec.split(',').collect();
    let [index, tag, budget, run_ms] = fields[..] else {
        return Err(format!("bad {CHILD_ENV}: {spec}").into());
    };
    let index: usize = index.parse()?;
    let run = Duration::from_millis(run_ms.parse()?);
    let mut pg: tokio_postgres::Config = url()?.parse()?;
    pg.application_name(format!("{tag}-{index}"));
    let (manager, max) = if budget == "true" {
        (
            PostgresManager::new(pg, NoTls).fleet_budget(tag, BUDGET),
            BUDGET_POOL,
        )
    } else {
        (PostgresManager::new(pg, NoTls), FIXED_POOL)
    };
    let config = PoolConfig::builder()
        .max_size(max)
        .min_size(0)
        .idle_timeout(Duration::from_millis(500))
        .housekeeping_period(Duration::from_millis(100))
        .acquire_timeout(Duration::from_secs(5))
        .build()?;
    let pool = Pool::new_lazy(manager, config);
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..TASKS[index.min(PROCESSES - 1)] {
        let (pool, done) = (pool.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            while started.elapsed() < run {
                if let Ok(conn) = pool.get().await {
                    if conn.batch_execute("SELECT pg_sleep(0.002)").await.is_ok() {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    println!("queries={}", done.load(Ordering::Relaxed));
    pool.close().await;
    Ok(())
}

/// An `int4` lock key as `pg_locks` shows it (an oid).
fn oid(key: i32) -> i64 {
    i64::from(u32::from_ne_bytes(key.to_ne_bytes()))
}

/// One instance of the rolling deploy: a pool of its own, under load.
struct Instance {
    pool: Pool<PostgresManager<NoTls>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

const ROLL_BUDGET: u32 = 20;
const ROLL_TASKS: usize = 24;

impl Instance {
    fn start(url: &str, budget: &str, index: usize) -> Result<Self, BoxError> {
        let mut pg: tokio_postgres::Config = url.parse()?;
        pg.application_name(format!("{budget}-{index}"));
        let manager = PostgresManager::new(pg, NoTls).fleet_budget(budget, ROLL_BUDGET);
        let config = PoolConfig::builder()
            .max_size(ROLL_BUDGET)
            .min_size(0)
            .acquire_timeout(Duration::from_secs(1))
            .build()?;
        let pool = Pool::new_lazy(manager, config);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let tasks = (0..ROLL_TASKS)
            .map(|_| {
                let (pool, stop) = (pool.clone(), stop.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        if let Ok(conn) = pool.get().await {
                            let _ = conn.batch_execute("SELECT pg_sleep(0.002)").await;
                        }
                    }
                })
            })
            .collect();
        Ok(Self { pool, stop, tasks })
    }

    async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            let _ = task.await;
        }
        self.pool.close().await;
    }
}

/// Polls every 10 ms, for at most 30 s, until `app` holds `want` tickets
/// of `budget` (all of the budget's when `app` is `None`); the time taken.
async fn until_held(
    admin: &tokio_postgres::Client,
    budget: &FleetBudget,
    app: Option<&str>,
    want: i64,
) -> Result<Duration, BoxError> {
    let from = Instant::now();
    while from.elapsed() < Duration::from_secs(30) {
        let held: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
                 WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted \
                   AND l.classid::int8 = $1 AND ($2::text IS NULL OR a.application_name = $2)",
                &[&oid(budget.key()), &app],
            )
            .await?
            .get(0);
        if held >= want {
            return Ok(from.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(format!("{app:?} did not reach {want} tickets within 30 s").into())
}

/// The rolling deploy, `runs` times.
async fn rolling(report: &mut String, runs: u64) -> Result<(), BoxError> {
    let url = url()?;
    let (admin, connection) = url
        .parse::<tokio_postgres::Config>()?
        .connect(NoTls)
        .await?;
    tokio::spawn(connection);
    let share = fair_share(ROLL_BUDGET, 5);
    let mut times = Vec::new();
    for run in 0..runs {
        let name = format!("fleet_report_roll_{}_{run}", std::process::id());
        let budget = FleetBudget::new(&name, ROLL_BUDGET)?;
        let old = (0..4)
            .map(|i| Instance::start(&url, &name, i))
            .collect::<Result<Vec<_>, _>>()?;
        until_held(&admin, &budget, None, i64::from(ROLL_BUDGET)).await?;
        // Full load for a moment before the deploy.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let late = Instance::start(&url, &name, 4)?;
        let app = format!("{name}-4");
        times.push(until_held(&admin, &budget, Some(&app), i64::from(share)).await?);
        late.stop().await;
        for instance in old {
            instance.stop().await;
        }
    }
    let mut sorted = times.clone();
    sorted.sort();
    writeln!(
        report,
        "## Fair share: a late instance under full load\n\n\
         Four instances (pools of {ROLL_BUDGET}, {ROLL_TASKS} tasks each, in this process) \
         hold a budget of {ROLL_BUDGET}; a fifth starts with the same load. Time until it \
         holds its share of {share} (share interval 1 s), {runs} runs:\n"
    )?;
    writeln!(report, "| min | median | max | runs |\n|---|---|---|---|")?;
    if let (Some(min), Some(max)) = (sorted.first(), sorted.last()) {
        let median = sorted[sorted.len() / 2];
        writeln!(
            report,
            "| {min:.2?} | {median:.2?} | {max:.2?} | {times:.2?} |\n"
        )?;
    }
    Ok(())
}
