//! What the pool tells you when it is exhausted: a timeout that names the
//! code holding the connections, and `pool.holders()` for a health
//! endpoint. In-memory connections; runs without a database:
//!
//! ```text
//! cargo run -p pool-examples --example exhausted
//! ```

use std::time::Duration;

use pool_core::{async_trait, ManageConnection, Pool, PoolConfig, PooledConnection};

/// "Connections" that are plain counters.
#[derive(Debug)]
struct InMemory;

#[async_trait]
impl ManageConnection for InMemory {
    type Connection = u64;
    type Error = std::io::Error;

    async fn connect(&self) -> Result<u64, std::io::Error> {
        Ok(0)
    }

    async fn is_valid(&self, _conn: &mut u64) -> Result<(), std::io::Error> {
        Ok(())
    }
}

/// A handler that holds its connection across a slow call.
async fn place_order(pool: &Pool<InMemory>) -> anyhow::Result<PooledConnection<InMemory>> {
    let conn = pool.get().await?;
    Ok(conn)
}

/// A report that runs long.
async fn monthly_report(pool: &Pool<InMemory>) -> anyhow::Result<PooledConnection<InMemory>> {
    let conn = pool.get().await?;
    Ok(conn)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let config = PoolConfig::builder()
        .name("orders")
        .max_size(4)
        .acquire_timeout(Duration::from_millis(200))
        .build()?;
    let pool = Pool::new(InMemory, config).await?;

    // Three orders and a report take every connection and keep them.
    let mut held = Vec::new();
    held.push(monthly_report(&pool).await?);
    tokio::time::sleep(Duration::from_millis(300)).await;
    for _ in 0..3 {
        held.push(place_order(&pool).await?);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;

    // The next caller times out, and the error says who holds them.
    match pool.get().await {
        Ok(_) => anyhow::bail!("the pool should be exhausted"),
        Err(e) => println!("get() failed: {e}\n"),
    }

    // The same, one entry per connection, for a health endpoint.
    println!("pool.holders():");
    let mut holders = pool.holders();
    holders.sort_by_key(|h| std::cmp::Reverse(h.held_for));
    for h in &holders {
        let ms = Duration::from_millis(h.held_for.as_millis() as u64);
        println!("  {} held for {ms:?}", h.location);
    }
    println!("\npool.metrics().holders_by_site:");
    for (site, count) in pool.metrics().holders_by_site {
        println!("  {count} at {site}");
    }

    drop(held);
    pool.close().await;
    Ok(())
}
