//! Moving from deadpool to this pool: first keeping the deadpool manager,
//! then switching to the native tokio-postgres manager.
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run -p pool-examples --features deadpool --example migrate_from_deadpool
//! ```

use std::time::Duration;

use deadpool_postgres::{ManagerConfig, RecyclingMethod};
use pool_core::compat::deadpool::{DeadpoolManager, DeadpoolObject};
use pool_core::{Pool, PoolConfig, ValidationMode};
use pool_postgres::{PostgresManager, ResetMode};
use tokio_postgres::NoTls;

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Application code: it only needs a `Client`.
async fn answer(client: &tokio_postgres::Client) -> anyhow::Result<i32> {
    Ok(client.query_one("SELECT 6 * 7", &[]).await?.get(0))
}

fn deadpool_manager(pg: tokio_postgres::Config) -> deadpool_postgres::Manager {
    let config = ManagerConfig {
        recycling_method: RecyclingMethod::Clean,
    };
    deadpool_postgres::Manager::from_config(pg, NoTls, config)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned());
    let pg: tokio_postgres::Config = url.parse()?;

    // Before: deadpool.
    let deadpool = deadpool_postgres::Pool::builder(deadpool_manager(pg.clone()))
        .max_size(8)
        .build()?;
    {
        let client = deadpool.get().await?;
        println!("deadpool:            {}", answer(&client).await?);
    }

    // Step 1: the same deadpool manager in this pool. deadpool recycles on
    // every checkout; validation at every checkout keeps that.
    let config = PoolConfig::builder()
        .max_size(8) //                              deadpool max_size
        .acquire_timeout(Duration::from_secs(5)) //  deadpool timeouts.wait (+ create + recycle)
        .validation_mode(ValidationMode::IsValid)
        .validation_bypass(Duration::ZERO)
        .build()?;
    let pool = Pool::new(
        DeadpoolManager::new(deadpool_manager(pg.clone())),
        config.clone(),
    )
    .await?;
    {
        let client = pool.get().await?; // derefs to deadpool-postgres's ClientWrapper
        let stmt = client.prepare_cached("SELECT 6 * 7").await?;
        let n: i32 = client.query_one(&stmt, &[]).await?.get(0);
        println!(
            "pool + deadpool mgr: {} (prepared: {n})",
            answer(&client).await?
        );
        // deadpool's per-object metrics are kept by the adapter: instants,
        // shown here as the durations they mean.
        let metrics = DeadpoolObject::metrics(&client);
        println!(
            "deadpool metrics kept per object: age {:?}, last used {:?} ago, recycled {} times",
            to_micros(metrics.age()),
            to_micros(metrics.last_used()),
            metrics.recycle_count
        );
    }
    pool.close().await;

    // Step 2: the native manager. RecyclingMethod::Clean becomes
    // ResetMode::Clean, run when a connection comes back rather than when it
    // goes out; Verified becomes validation (an empty query) at checkout.
    let manager = PostgresManager::new(pg, NoTls).reset_mode(ResetMode::Clean);
    let pool = Pool::new(manager, config).await?;
    {
        let client = pool.get().await?; // derefs to PgClient, then Client
        let stmt = client.prepare_cached("SELECT 6 * 7").await?;
        let n: i32 = client.query_one(&stmt, &[]).await?.get(0);
        println!(
            "pool + native mgr:   {} (prepared: {n})",
            answer(&client).await?
        );
    }
    // deadpool's status() becomes a metrics snapshot. ResetMode::Clean
    // resets every connection that comes back (`DISCARD ALL`), in a task of
    // its own: the client dropped above is idle again once that is done,
    // so wait for it (bounded) rather than print "1 open, 0 idle".
    let status = deadpool.status();
    let m = idle_again(&pool).await;
    println!(
        "deadpool status: size {}, available {} | pool metrics: {} open, {} idle",
        status.size, status.available, m.total, m.idle
    );
    pool.close().await;
    Ok(())
}

/// The pool's metrics once every open connection is idle (the returned
/// ones' resets done), or after 2 s at most, whichever comes first.
async fn idle_again<M: pool_core::ManageConnection>(pool: &Pool<M>) -> pool_core::PoolMetrics {
    for _ in 0..200 {
        let m = pool.metrics();
        if m.idle == m.total {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    pool.metrics()
}

/// A duration as people read it: whole microseconds (`1.234ms`, not
/// `1.234567ms`).
fn to_micros(d: Duration) -> Duration {
    Duration::from_micros(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}
