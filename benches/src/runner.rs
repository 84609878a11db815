//! The task loop shared by the contended scenarios, with its watchdog.
//!
//! `tasks` tasks each loop: get, do the [`Work`] while holding, drop, count.
//! The loop stops when the run's time is up (or a task reaches its cycle
//! cap); the tasks then get `grace` to finish their last cycle. Tasks still
//! running after that are stuck: they are aborted and the run is marked
//! invalid. Each task publishes its count as it goes, so a stuck run still
//! reports what completed.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::contestant::Contestant;
use crate::stats;

/// What a task does while it holds a connection.
pub trait Work<C>: Clone + Send + Sync + 'static {
    /// Uses the connection once.
    fn run<'c>(&'c self, conn: &'c mut C) -> impl Future<Output = Result<(), String>> + Send + 'c;
}

/// One `yield_now().await` while holding (S2, S3).
#[derive(Debug, Clone, Copy)]
pub struct YieldOnce;

impl<C: Send> Work<C> for YieldOnce {
    async fn run<'c>(&'c self, _conn: &'c mut C) -> Result<(), String> {
        tokio::task::yield_now().await;
        Ok(())
    }
}

/// A timed "query": sleep while holding (S4).
#[derive(Debug, Clone, Copy)]
pub struct SleepFor(pub Duration);

impl<C: Send> Work<C> for SleepFor {
    async fn run<'c>(&'c self, _conn: &'c mut C) -> Result<(), String> {
        tokio::time::sleep(self.0).await;
        Ok(())
    }
}

/// `SELECT 1` on a real connection (S5).
#[derive(Debug, Clone, Copy)]
pub struct Query;

impl<C: crate::pools::pg::Select1> Work<C> for Query {
    async fn run<'c>(&'c self, conn: &'c mut C) -> Result<(), String> {
        conn.select1().await
    }
}

/// Shape of one run.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// Concurrent tasks.
    pub tasks: usize,
    /// How long the loop runs.
    pub duration: Duration,
    /// Cap on cycles per task (the count bound).
    pub max_cycles_per_task: u64,
    /// Time allowed after the stop for every task to finish.
    pub grace: Duration,
    /// Record each acquire wait and each whole cycle (get + work)?
    pub record: bool,
    /// Each task starts a cycle at most once per `pace` (its starts are
    /// due at fixed steps from its first, the tasks' first ones spread
    /// over one pace; one that falls behind starts the next cycle at once,
    /// so the rate stays the target), or `None` for back to back. tokio's
    /// timer has millisecond steps, so the starts come in groups at each
    /// millisecond tick (every task at once when the pace is 1 ms or
    /// under), whatever the pool.
    pub pace: Option<Duration>,
}

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct LoadOutcome {
    /// Completed cycles per task.
    pub per_task: Vec<u64>,
    /// Acquire waits, ns (when recorded).
    pub waits_ns: Vec<u64>,
    /// Whole cycles (get + work + drop), ns (when recorded).
    pub cycles_ns: Vec<u64>,
    /// From the start until the last task finished (or the watchdog fired).
    pub elapsed: Duration,
    /// Tasks did not finish within `grace` after the stop.
    pub stuck: bool,
    /// `get` or work errors (a task stops at its first).
    pub errors: u64,
    /// The first error's text.
    pub first_error: Option<String>,
    /// Cache-line round trip between two threads just before the run and
    /// just after it, ns (see `placement.rs`); NaN when not probed.
    pub placement_ns: [f64; 2],
}

impl LoadOutcome {
    /// All completed cycles.
    pub fn total(&self) -> u64 {
        self.per_task.iter().sum()
    }

    /// Cycles per second.
    pub fn rate(&self) -> f64 {
        self.total() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// On the far placement (`Some(true)`), the near one (`Some(false)`),
    /// or neither: not probed, or the placement changed during the run.
    pub fn far(&self) -> Option<bool> {
        crate::placement::stayed_far(self.placement_ns)
    }

    /// Jain's index of [`per_task`](Self::per_task).
    pub fn jain(&self) -> f64 {
        stats::jain(&self.per_task)
    }
}

struct TaskResult {
    waits: Vec<u64>,
    cycles: Vec<u64>,
    error: Option<String>,
}

/// Most samples a task records, so memory stays bounded.
const MAX_SAMPLES_PER_TASK: usize = 200_000;

/// Runs the loop on the current runtime.
pub async fn run_load<P, W>(pool: &P, work: W, spec: &LoadSpec) -> LoadOutcome
where
    P: Contestant,
    W: Work<P::Conn>,
{
    let stop = Arc::new(AtomicBool::new(false));
    let counts: Arc<Vec<AtomicU64>> =
        Arc::new((0..spec.tasks).map(|_| AtomicU64::new(0)).collect());
    let start_gate = Arc::new(tokio::sync::Barrier::new(spec.tasks + 1));
    let mut set = tokio::task::JoinSet::new();
    for i in 0..spec.tasks {
        let (pool, work, stop, counts, gate) = (
            pool.clone(),
            work.clone(),
            stop.clone(),
            counts.clone(),
            start_gate.clone(),
        );
        let (cap, record, pace, tasks) =
            (spec.max_cycles_per_task, spec.record, spec.pace, spec.tasks);
        set.spawn(async move {
            gate.wait().await;
            // Task `i` of `tasks` is due first at `i / tasks` of a pace, so the
            // tasks' starts are spread over it rather than all at once.
            let mut due = tokio::time::Instant::now()
                + pace.map_or(Duration::ZERO, |p| p.mul_f64(i as f64 / tasks as f64));
            let mut r = TaskResult {
                waits: Vec::new(),
                cycles: Vec::new(),
                error: None,
            };
            let mut done = 0u64;
            while done < cap && !stop.load(Ordering::Relaxed) {
                if let Some(pace) = pace {
                    tokio::time::sleep_until(due).await;
                    due += pace;
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
                // A paced cycle is timed from when it starts, not from
                // when it was due.
                let t0 = record.then(Instant::now);
                let mut guard = match pool.get().await {
                    Ok(g) => g,
                    Err(e) => {
                        r.error = Some(e);
                        break;
                    }
                };
                if let Some(t0) = t0 {
                    if r.waits.len() < MAX_SAMPLES_PER_TASK {
                        r.waits.push(t0.elapsed().as_nanos() as u64);
                    }
                }
                let res = work.run(P::conn(&mut guard)).await;
                drop(guard);
                if let Err(e) = res {
                    r.error = Some(e);
                    break;
                }
                if let Some(t0) = t0 {
                    if r.cycles.len() < MAX_SAMPLES_PER_TASK {
                        r.cycles.push(t0.elapsed().as_nanos() as u64);
                    }
                }
                done += 1;
                if done & 31 == 0 {
                    counts[i].store(done, Ordering::Relaxed);
                }
            }
            counts[i].store(done, Ordering::Relaxed);
            r
        });
    }
    start_gate.wait().await;
    let started = Instant::now();
    tokio::time::sleep(spec.duration).await;
    stop.store(true, Ordering::Relaxed);

    let mut out = LoadOutcome {
        placement_ns: [f64::NAN; 2],
        ..LoadOutcome::default()
    };
    let drained = tokio::time::timeout(spec.grace, async {
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok(r) => {
                    out.waits_ns.extend(r.waits);
                    out.cycles_ns.extend(r.cycles);
                    if let Some(e) = r.error {
                        out.errors += 1;
                        out.first_error.get_or_insert(e);
                    }
                }
                Err(e) => {
                    out.errors += 1;
                    out.first_error.get_or_insert(e.to_string());
                }
            }
        }
    })
    .await;
    out.elapsed = started.elapsed();
    if drained.is_err() {
        out.stuck = true;
        set.abort_all();
    }
    out.per_task = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    out
}

/// A fresh runtime: tokio's current-thread scheduler for `None`, else the
/// multi-thread one with that many worker threads.
pub fn runtime(workers: Option<usize>) -> tokio::runtime::Runtime {
    match workers {
        None => current_thread(),
        Some(n) => multi_thread(n),
    }
}

/// Runs `fut` to completion on a fresh [`runtime`] of `workers` and shuts
/// the runtime down (waiting at most 1 s for what is left on it).
///
/// On the current-thread runtime `fut` is the runtime's main future, as
/// S1 has always measured it. On a multi-thread runtime it is spawned, so
/// it runs on a worker thread: `block_on` would poll it on the calling
/// thread, which is not one of the runtime's workers, and a pool that
/// keeps anything per worker would see none.
pub fn run_on<F>(workers: Option<usize>, fut: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let rt = runtime(workers);
    let out = match workers {
        None => rt.block_on(fut),
        Some(_) => rt
            .block_on(rt.spawn(fut))
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic())),
    };
    rt.shutdown_timeout(Duration::from_secs(1));
    out
}

/// "current-thread" or "N worker(s)": how reports name a runtime.
pub fn runtime_label(workers: Option<usize>) -> String {
    match workers {
        None => "current-thread".to_owned(),
        Some(1) => "1 worker".to_owned(),
        Some(n) => format!("{n} workers"),
    }
}

/// Parses a list of worker counts such as `1,2,4,8,16` (each 1..=1024).
pub fn parse_workers(list: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let n: usize = item
            .parse()
            .map_err(|_| format!("worker count {item:?} is not a number"))?;
        if !(1..=1024).contains(&n) {
            return Err(format!("worker count {n} is outside 1..=1024"));
        }
        if !out.contains(&n) {
            out.push(n);
        }
    }
    if out.is_empty() {
        return Err("--workers needs a list such as 1,2,4,8,16".to_owned());
    }
    Ok(out)
}

/// Checks a `taskset -c` core list such as `1`, `0,2` or `2-3` (the
/// harness's `--wrk-cpus` and `--server-cpus`): digits, commas and dashes
/// only, so that nothing else reaches the command line. Whether the cores
/// exist is `taskset`'s to say.
pub fn check_core_list(flag: &str, list: &str) -> Result<(), String> {
    if list.is_empty()
        || !list
            .chars()
            .all(|c| c.is_ascii_digit() || c == ',' || c == '-')
    {
        return Err(format!(
            "{flag} {list:?}: a core list such as 1, 0,2 or 2-3"
        ));
    }
    Ok(())
}

/// A fresh multi-thread runtime with `workers` worker threads.
pub fn multi_thread(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A fresh current-thread runtime.
pub fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_lists_are_digits_commas_and_dashes() {
        for ok in ["1", "0,2", "2-3", "0-1,3"] {
            assert_eq!(check_core_list("--wrk-cpus", ok), Ok(()), "{ok}");
        }
        for bad in ["", "one", "1;rm", "1 2", "-c"] {
            let err = check_core_list("--wrk-cpus", bad).expect_err(bad);
            assert!(err.starts_with("--wrk-cpus"), "{err}");
        }
    }

    #[test]
    fn worker_lists_parse() {
        assert_eq!(parse_workers("1,2, 4,8,16"), Ok(vec![1, 2, 4, 8, 16]));
        assert_eq!(parse_workers("2,2,1"), Ok(vec![2, 1]));
        assert!(parse_workers("0").is_err());
        assert!(parse_workers("two").is_err());
        assert!(parse_workers("").is_err());
    }

    /// On the paused clock every sleep ends exactly when due, so a paced
    /// run's counts are exact: each task starts once at its first due
    /// time and once per pace after it, up to the stop.
    #[tokio::test(start_paused = true)]
    async fn a_paced_run_starts_each_task_once_per_pace() {
        let pool = crate::pools::noop::Floor::build(&crate::fake::FakeSpec::noop(2)).await;
        let spec = |pace| LoadSpec {
            tasks: 4,
            duration: Duration::from_millis(99),
            max_cycles_per_task: 1_000,
            grace: Duration::from_secs(1),
            record: true,
            pace,
        };
        let paced = run_load(&pool, YieldOnce, &spec(Some(Duration::from_millis(10)))).await;
        assert!(!paced.stuck);
        // Task i is due at i * 2.5 ms, then every 10 ms: ten starts each
        // before the stop at 99 ms (the last at 90-97.5 ms).
        assert_eq!(paced.per_task, vec![10; 4], "{:?}", paced.per_task);
        assert_eq!(paced.cycles_ns.len(), 40);
        // Unpaced, the tasks run until the cap.
        let free = run_load(&pool, YieldOnce, &spec(None)).await;
        assert_eq!(free.per_task, vec![1_000; 4]);
    }

    #[test]
    fn run_on_uses_a_worker_thread() {
        let here = std::thread::current().id();
        let on = |workers| run_on(workers, async { std::thread::current().id() });
        assert_ne!(on(Some(2)), here, "spawned onto a worker");
        assert_eq!(on(None), here, "the current-thread runtime's main future");
    }
}
