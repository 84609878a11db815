//! The pool's metrics in Prometheus' text format, through the `metrics`
//! facade and `metrics-exporter-prometheus`: no code of the pool's own.
//!
//! ```text
//! cargo run -p pool-examples --example metrics_prometheus
//! cargo run -p pool-examples --example metrics_prometheus -- --serve 127.0.0.1:9187
//! ```
//!
//! The first prints the scrape text once; the second also serves it on
//! `http://127.0.0.1:9187/` (any path) until Ctrl-C.

use std::time::Duration;

use anyhow::Context;
use metrics_exporter_prometheus::PrometheusBuilder;
use pool_core::{async_trait, ManageConnection, Pool, PoolConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let serve = match std::env::args().skip(1).collect::<Vec<_>>().as_slice() {
        [] => None,
        [flag, addr] if flag == "--serve" => Some(addr.clone()),
        _ => anyhow::bail!("usage: metrics_prometheus [--serve 127.0.0.1:PORT]"),
    };

    // Install the recorder first: the pool registers its series when built.
    let prometheus = PrometheusBuilder::new()
        .install_recorder()
        .context("installing the Prometheus recorder")?;
    let config = PoolConfig::builder()
        .name("example")
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
    prometheus.run_upkeep();
    print!("{}", prometheus.render());

    let Some(addr) = serve else { return Ok(()) };
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("serving the metrics on http://{addr}/ (Ctrl-C to stop)");
    loop {
        let (mut socket, _) = listener.accept().await?;
        prometheus.run_upkeep();
        let body = prometheus.render();
        // The request itself does not matter: every path gets the metrics.
        let mut request = [0u8; 1024];
        let answered = async {
            let _request_len = socket.read(&mut request).await?;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            socket.write_all(head.as_bytes()).await?;
            socket.write_all(body.as_bytes()).await
        };
        if let Err(e) = answered.await {
            eprintln!("scrape failed: {e}");
        }
    }
}
