//! The pool's metrics in Prometheus' text format, through the `metrics`
//! facade and `metrics-exporter-prometheus`: no code of the pool's own.
//!
//! ```text
//! cargo run -p pool-examples --features prometheus --example metrics_prometheus
//! cargo run -p pool-examples --features prometheus --example metrics_prometheus -- --otel
//! cargo run -p pool-examples --features prometheus --example metrics_prometheus -- --serve 127.0.0.1:9187
//! ```
//!
//! The first prints the scrape text once, under HikariCP's names; `--otel`
//! uses the OpenTelemetry names instead (`MetricNames::OpenTelemetry`);
//! `--serve` serves it instead from the exporter's own HTTP listener on
//! `http://127.0.0.1:9187/` (any path) until Ctrl-C. The pool describes
//! every series (the `# HELP` lines), and the timings are rendered as
//! Prometheus histograms with the buckets set below.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use pool_core::{async_trait, ManageConnection, MetricNames, Pool, PoolConfig};

/// Bucket bounds, in seconds, for the pool's timing histograms (acquire
/// wait, hold time, connect time): from half a millisecond to 30 seconds.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0,
];

/// A manager whose "connections" are numbers; opening one takes 2 ms.
#[derive(Debug)]
struct Numbers;

#[async_trait]
impl ManageConnection for Numbers {
    type Connection = u64;
    type Error = std::io::Error;

    async fn connect(&self) -> Result<u64, std::io::Error> {
        tokio::time::sleep(Duration::from_millis(2)).await;
        Ok(next_id())
    }

    async fn is_valid(&self, _conn: &mut u64) -> Result<(), std::io::Error> {
        Ok(())
    }
}

fn next_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// What the command line asked for.
struct Args {
    serve: Option<SocketAddr>,
    names: MetricNames,
}

fn args() -> anyhow::Result<Args> {
    let usage = "usage: metrics_prometheus [--otel] [--serve 127.0.0.1:PORT]";
    let mut args = Args {
        serve: None,
        names: MetricNames::Hikari,
    };
    let mut words = std::env::args().skip(1);
    while let Some(word) = words.next() {
        match word.as_str() {
            "--otel" => args.names = MetricNames::OpenTelemetry,
            "--serve" => {
                let addr = words.next().context(usage)?;
                args.serve = Some(addr.parse().with_context(|| format!("{addr}: {usage}"))?);
            }
            _ => anyhow::bail!(usage),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = args()?;

    // Histograms (with buckets) rather than summaries for the pool's
    // timings, under either naming scheme.
    let builder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Prefix("pool_connections_".into()), &BUCKETS)?
        .set_buckets_for_metric(Matcher::Prefix("db.client.connection.".into()), &BUCKETS)?;
    // Install the recorder first: the pool registers and describes its
    // series when built.
    let prometheus = match args.serve {
        // The exporter's own HTTP listener: bound here, served by a task
        // the exporter spawns, which also runs the recorder's upkeep.
        Some(addr) => {
            builder
                .with_http_listener(addr)
                .install()
                .with_context(|| format!("serving the metrics on {addr}"))?;
            None
        }
        None => Some(
            builder
                .install_recorder()
                .context("installing the Prometheus recorder")?,
        ),
    };
    let config = PoolConfig::builder()
        .name("example")
        .metric_names(args.names)
        .min_size(1)
        .max_size(4)
        .build()?;
    let pool = Pool::new(Numbers, config).await?;

    // Some load: 16 tasks share 4 connections, so some of them wait.
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                for _ in 0..50 {
                    let conn = pool.get().await?;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    drop(conn);
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    // Gauges and the batched checkout count are refreshed by the pool's
    // housekeeper, at most a second apart.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let Some(addr) = args.serve else {
        let prometheus = prometheus.context("the recorder is installed")?;
        prometheus.run_upkeep();
        print!("{}", prometheus.render());
        return Ok(());
    };
    eprintln!("serving the metrics on http://{addr}/ (Ctrl-C to stop)");
    tokio::signal::ctrl_c().await?;
    pool.close().await;
    Ok(())
}
