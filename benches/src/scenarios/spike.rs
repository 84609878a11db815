//! S4, spike demand (HikariCP's scenario): connects take 150 ms, a query
//! 2 ms; max 50, min 5; 50 requests arrive at once. How many connections
//! does the pool open to serve them, and how long until all are served?

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::contestant::{Contestant, Kind};
use crate::fake::FakeSpec;
use crate::runner::multi_thread;
use crate::stats::median;
use crate::with_noop_pool;

/// Shape of the spike.
#[derive(Debug, Clone)]
pub struct SpikeSettings {
    /// One connect.
    pub connect: Duration,
    /// One query (held while sleeping).
    pub query: Duration,
    /// Max size.
    pub max_size: u32,
    /// Min size (pre-opened before the spike).
    pub min_size: u32,
    /// Simultaneous requests.
    pub requests: usize,
    /// Watchdog for one spike.
    pub watchdog: Duration,
    /// Repeats; medians are reported.
    pub repeats: usize,
}

/// One contestant's spike figures.
#[derive(Debug, Clone, Serialize)]
pub struct SpikeRow {
    /// Contestant.
    pub pool: String,
    /// Median connections opened during the spike (beyond the warm ones).
    pub opened: f64,
    /// Median ms until every request was served.
    pub serve_all_ms: f64,
    /// Every repeat's (opened, ms).
    pub runs: Vec<(u64, f64)>,
    /// Every request served without error within the watchdog.
    pub valid: bool,
}

/// Opens `n` connections by holding `n` at once, then returns them.
pub async fn prewarm<P: Contestant>(pool: &P, n: u32) -> Result<(), String> {
    let mut set = tokio::task::JoinSet::new();
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(n as usize));
    for _ in 0..n {
        let (pool, barrier) = (pool.clone(), barrier.clone());
        set.spawn(async move {
            let guard = pool.get().await?;
            barrier.wait().await;
            drop(guard);
            Ok::<(), String>(())
        });
    }
    while let Some(r) = set.join_next().await {
        r.map_err(|e| e.to_string())??;
    }
    Ok(())
}

/// One spike on a warm pool: (opened, ms), or `None` on error or timeout.
async fn spike<P: Contestant>(pool: &P, s: &SpikeSettings, fake: &FakeSpec) -> Option<(u64, f64)> {
    prewarm(pool, s.min_size).await.ok()?;
    // Let background fills (min_size refills, replenishers) settle.
    tokio::time::sleep(s.connect * 2).await;
    let before = fake.opened();
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..s.requests {
        let pool = pool.clone();
        let query = s.query;
        set.spawn(async move {
            let guard = pool.get().await?;
            tokio::time::sleep(query).await;
            drop(guard);
            Ok::<(), String>(())
        });
    }
    let all = tokio::time::timeout(s.watchdog, async {
        let mut ok = true;
        while let Some(r) = set.join_next().await {
            ok &= matches!(r, Ok(Ok(())));
        }
        ok
    })
    .await;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    // Connects already started count too: wait for them to land.
    tokio::time::sleep(s.connect + Duration::from_millis(50)).await;
    let opened = fake.opened() - before;
    matches!(all, Ok(true)).then_some((opened, ms))
}

/// S4 for one contestant (the floor has no creation and is skipped).
pub fn run(kind: Kind, s: &SpikeSettings) -> SpikeRow {
    let mut runs = Vec::new();
    let mut valid = true;
    for _ in 0..s.repeats {
        let rt = multi_thread(2);
        let fake = FakeSpec {
            max_size: s.max_size,
            min_size: s.min_size,
            connect_delay: s.connect,
            ..FakeSpec::noop(s.max_size)
        };
        let got = rt.block_on(async {
            with_noop_pool!(kind, &fake, |pool| {
                let got = spike(&pool, s, &fake).await;
                pool.shutdown().await;
                got
            })
        });
        rt.shutdown_timeout(Duration::from_secs(1));
        match got {
            Some(r) => runs.push(r),
            None => valid = false,
        }
    }
    let opened: Vec<f64> = runs.iter().map(|r| r.0 as f64).collect();
    let ms: Vec<f64> = runs.iter().map(|r| r.1).collect();
    SpikeRow {
        pool: kind.label().to_owned(),
        opened: median(&opened),
        serve_all_ms: median(&ms),
        runs,
        valid,
    }
}
