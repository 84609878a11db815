//! Moving from bb8 to this pool, keeping the bb8 manager.
//!
//! The same `bb8_postgres` manager and the same query code run first in a
//! bb8 pool, then in ours through `Bb8Manager`. The settings map one to one
//! (see MIGRATION.md for the full table).
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run -p pool-examples --features bb8 --example migrate_from_bb8
//! ```

use std::time::Duration;

use bb8_postgres::PostgresConnectionManager;
use pool_core::compat::bb8::Bb8Manager;
use pool_core::{Pool, PoolConfig, ValidationMode};
use tokio_postgres::NoTls;

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Application code: unchanged by the move, it only sees a `Client`.
async fn server_version(client: &tokio_postgres::Client) -> anyhow::Result<String> {
    Ok(client.query_one("SHOW server_version", &[]).await?.get(0))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned());

    // Before: bb8.
    let manager = PostgresConnectionManager::new_from_stringlike(&url, NoTls)?;
    let bb8_pool = bb8::Pool::builder()
        .max_size(8)
        .min_idle(Some(1))
        .connection_timeout(Duration::from_secs(5))
        .idle_timeout(Some(Duration::from_secs(300)))
        .max_lifetime(Some(Duration::from_secs(1800)))
        .test_on_check_out(true)
        .build(manager)
        .await?;
    {
        let conn = bb8_pool.get().await?;
        println!("bb8:  server {}", server_version(&conn).await?);
    }

    // After: the same manager in this pool.
    let manager = PostgresConnectionManager::new_from_stringlike(&url, NoTls)?;
    let config = PoolConfig::builder()
        .max_size(8) //                                 bb8 max_size
        .min_size(1) //                                 bb8 min_idle (kept open, not kept idle)
        .acquire_timeout(Duration::from_secs(5)) //     bb8 connection_timeout
        .idle_timeout(Duration::from_secs(300)) //      bb8 idle_timeout
        .max_lifetime(Duration::from_secs(1800)) //     bb8 max_lifetime
        .validation_mode(ValidationMode::IsValid) //    bb8 test_on_check_out(true) ...
        .validation_bypass(Duration::ZERO) //           ... on every checkout
        .build()?;
    let pool = Pool::new(Bb8Manager::new(manager), config).await?;
    {
        let conn = pool.get().await?; // PooledConnection derefs to the Client
        println!("pool: server {}", server_version(&conn).await?);
    }

    // bb8's `state()` becomes a metrics snapshot.
    let state = bb8_pool.state();
    let m = pool.metrics();
    println!(
        "bb8 state: {} connections, {} idle | pool metrics: {} open, {} idle, {} checkouts",
        state.connections, state.idle_connections, m.total, m.idle, m.acquire_count
    );
    pool.close().await;
    Ok(())
}
