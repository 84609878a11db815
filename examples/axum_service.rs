//! An axum service on the pool, as a `PgPool` app would be written: see
//! `pool_examples::axum_service` for the routes.
//!
//! ```text
//! cargo run -p pool-examples --features axum --example axum_service
//! curl localhost:3000/health
//! curl -d 'hello' localhost:3000/notes
//! curl localhost:9000/metrics
//! ```
//!
//! Reads `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`),
//! `APP_ADDR` (default `127.0.0.1:3000`; port 0 picks a free one) and
//! `METRICS_ADDR` (default `127.0.0.1:9000`). Prints the address it
//! listens on, and stops on Ctrl-C or SIGTERM, dropping its notes table
//! (`axum_notes_` and its process id) on the way out (it is an example run
//! against a shared database).

use std::net::SocketAddr;

use anyhow::Context;
use pool_examples::axum_service;

fn addr(var: &str, default: &str) -> anyhow::Result<SocketAddr> {
    let text = std::env::var(var).unwrap_or_else(|_| default.to_owned());
    text.parse()
        .with_context(|| format!("{var}={text} is not an address"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let app_addr = addr("APP_ADDR", "127.0.0.1:3000")?;
    let metrics_addr = addr("METRICS_ADDR", "127.0.0.1:9000")?;
    let stop = axum_service::stop_signal().context("listening for signals")?;
    axum_service::run(&url, app_addr, metrics_addr, stop).await
}
