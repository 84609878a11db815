//! A key-value store over the pool whose backend is chosen by the URL alone.
//!
//! ```text
//! cargo run -p pool-examples --features kv --example kv_store                      # SQLite, no server
//! cargo run -p pool-examples --features kv --example kv_store -- postgres://postgres@127.0.0.1:5432/test
//! cargo run -p pool-examples --features kv --example kv_store -- sqlite:kv.db mysql://root@127.0.0.1:3306/test
//! ```
//!
//! The first URL (default: a SQLite file in a temporary directory) holds the
//! store; with a second URL, everything is then copied into that backend and
//! checked. Both tables (`kv_example_` and the process id, so two runs never
//! share one) are dropped at the end. The store
//! itself is `pool_examples::kv` (`examples/src/kv/`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{ensure, Context};
use pool_core::PoolConfig;
use pool_examples::kv::{KvOptions, KvStore};
use serde::{Deserialize, Serialize};

/// The store's table, this run's own.
fn table() -> String {
    format!("kv_example_{}", std::process::id())
}
const WRITERS: usize = 8;
const KEYS_PER_WRITER: usize = 25;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct User {
    name: String,
    languages: Vec<String>,
    visits: u32,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let temp = TempDir::new()?;
    let url = match args.next() {
        Some(url) => url,
        None => format!("sqlite://{}", temp.path.join("kv.db").display()),
    };
    let copy_url = args.next();

    let store = Arc::new(open(&url).await?);
    println!(
        "store: {} table `{}`, pool of up to {} connections, cache TTL 2 s",
        store.backend(),
        store.table(),
        store.metrics().max_size,
    );
    let result = demo(&store, copy_url.as_deref()).await;
    store.drop_table().await?;
    store.close().await;
    println!("dropped `{}`; done", table());
    result
}

async fn open(url: &str) -> anyhow::Result<KvStore> {
    let options = KvOptions::new()
        .table(table())
        .cache_ttl(Duration::from_secs(2))
        .pool(
            PoolConfig::builder()
                .name("kv_example")
                .max_size(4)
                .acquire_timeout(Duration::from_secs(10))
                .build()?,
        );
    // The error names the backend's failure, never the URL (which may hold
    // a password).
    KvStore::open(url, options)
        .await
        .context("opening the store")
}

async fn demo(store: &Arc<KvStore>, copy_url: Option<&str>) -> anyhow::Result<()> {
    let ada = User {
        name: "Ada".into(),
        languages: vec!["en".into(), "fr".into()],
        visits: 1,
    };
    store.put("user:ada", &ada).await?;
    println!("put    user:ada = {}", serde_json::to_string(&ada)?);

    let read: Option<User> = store.get("user:ada").await?;
    println!("get    user:ada -> {read:?}");
    let again: Option<User> = store.get("user:ada").await?;
    ensure!(again == read, "a cached read differs from the stored value");
    println!(
        "get    user:ada again -> served by the cache ({:?})",
        store.cache_stats()
    );

    let ada = User { visits: 2, ..ada };
    store.put("user:ada", &ada).await?;
    let read: Option<User> = store.get("user:ada").await?;
    ensure!(
        read.as_ref() == Some(&ada),
        "the overwrite was not read back"
    );
    println!(
        "put    user:ada visits=2 (upsert), get -> visits={}",
        ada.visits
    );

    store.put("greeting:ja", "こんにちは 🌸").await?;
    store
        .put("config", &serde_json::json!({"retries": 3, "ratio": 0.25}))
        .await?;
    let greeting: Option<String> = store.get("greeting:ja").await?;
    println!("get    greeting:ja -> {greeting:?}");

    match store.get::<User>("config").await {
        Err(e) => println!("get    config as User -> error: {e}"),
        Ok(v) => anyhow::bail!("config read as a User: {v:?}"),
    }
    match store.put("", &1).await {
        Err(e) => println!("put    \"\" -> error: {e}"),
        Ok(()) => anyhow::bail!("an empty key was accepted"),
    }

    let mut writers = tokio::task::JoinSet::new();
    for writer in 0..WRITERS {
        let store = Arc::clone(store);
        writers.spawn(async move {
            for i in 0..KEYS_PER_WRITER {
                store
                    .put(&format!("load:{writer}:{i:02}"), &(writer * 100 + i))
                    .await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = writers.join_next().await {
        done.context("a writer panicked")??;
    }
    let m = store.metrics();
    println!(
        "{WRITERS} tasks wrote {} keys through {} connections (max {}), {} checkouts",
        WRITERS * KEYS_PER_WRITER,
        m.creation_count,
        m.max_size,
        m.acquire_count
    );

    let removed = store.delete("greeting:ja").await?;
    let gone: Option<String> = store.get("greeting:ja").await?;
    ensure!(removed && gone.is_none(), "the delete did not take");
    let keys = store.keys().await?;
    println!(
        "delete greeting:ja -> {removed}; {} keys left, first: {:?}",
        keys.len(),
        &keys[..keys.len().min(3)]
    );

    if let Some(copy_url) = copy_url {
        let target = open(copy_url).await?;
        let copied = store.copy_to(&target).await;
        let checked = match &copied {
            Ok(_) => Some((target.len().await?, target.get::<User>("user:ada").await?)),
            Err(_) => None,
        };
        target.drop_table().await?;
        target.close().await;
        let report = copied.context("copying")?;
        let (rows, user) = checked.unwrap_or_default();
        println!(
            "copy   {} -> {}: {} rows, {} upserts, {} bytes, each batch read back identical",
            store.backend(),
            target.backend(),
            report.rows,
            report.batches,
            report.bytes
        );
        ensure!(rows == report.rows, "the target holds {rows} rows");
        ensure!(
            user.as_ref() == Some(&ada),
            "user:ada differs in the target"
        );
        println!(
            "target holds {rows} keys; user:ada there -> visits={}",
            ada.visits
        );
    }
    Ok(())
}

/// A directory in the system temp dir, removed with its files at the end.
struct TempDir {
    path: PathBuf,
}

impl TempDir {
    fn new() -> anyhow::Result<Self> {
        let path = std::env::temp_dir().join(format!("pool-kv-store-{}", std::process::id()));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Self { path })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            eprintln!("could not remove {}: {e}", self.path.display());
        }
    }
}
