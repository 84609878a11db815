//! The key-value store's behaviour suite, run over SQLite always, over
//! PostgreSQL when `DATABASE_URL` is set and over MariaDB when `MYSQL_URL`
//! is set. Outside CI an unset URL skips that backend with a printed reason;
//! with `CI` set it fails the test.
//!
//! Every test works in its own table (random suffix) and drops it at the
//! end, so tests run in parallel on one database.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use crate::kv::{BackendKind, KvError, KvOptions, KvStore, ManualClock};
use anyhow::{bail, ensure, Context};
use pool_core::PoolConfig;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Where one backend's tests run; removes a SQLite file when dropped.
struct Target {
    url: String,
    file: Option<std::path::PathBuf>,
}

impl Drop for Target {
    fn drop(&mut self) {
        let Some(path) = &self.file else { return };
        for suffix in ["", "-wal", "-shm"] {
            let mut name = path.clone().into_os_string();
            name.push(suffix);
            if let Err(e) = std::fs::remove_file(&name) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    eprintln!("could not remove {name:?}: {e}");
                }
            }
        }
    }
}

fn sqlite() -> Target {
    let path = std::env::temp_dir().join(format!(
        "pool-kv-test-{}-{:016x}.db",
        std::process::id(),
        fastrand::u64(..)
    ));
    Target {
        url: format!("sqlite://{}", path.display()),
        file: Some(path),
    }
}

/// The server's URL from `var`; `None` (after saying why) when unset
/// outside CI; an error when unset in CI.
fn server(var: &str) -> anyhow::Result<Option<Target>> {
    match std::env::var(var) {
        Ok(url) if !url.trim().is_empty() => Ok(Some(Target { url, file: None })),
        _ if std::env::var_os("CI").is_some() => {
            bail!("{var} is not set, but CI is: in CI this backend's tests must run, not skip")
        }
        _ => {
            eprintln!("skipped: {var} is not set (set it to run this test against that server)");
            Ok(None)
        }
    }
}

fn target(kind: BackendKind) -> anyhow::Result<Option<Target>> {
    match kind {
        BackendKind::Sqlite => Ok(Some(sqlite())),
        BackendKind::Postgres => server("DATABASE_URL"),
        _ => server("MYSQL_URL"),
    }
}

fn table(tag: &str) -> String {
    format!("kv_test_{tag}_{:012x}", fastrand::u64(..) >> 16)
}

fn small_pool(max: u32) -> PoolConfig {
    PoolConfig::builder()
        .name("kv-test")
        .max_size(max)
        .acquire_timeout(Duration::from_secs(20))
        .build()
        .expect("valid pool settings")
}

async fn open(url: &str, table: &str, options: KvOptions) -> anyhow::Result<KvStore> {
    KvStore::open(url, options.table(table))
        .await
        .with_context(|| format!("opening a store on table {table}"))
}

/// Drops the store's table whatever `result` is, then returns `result`.
async fn finish(store: &KvStore, result: anyhow::Result<()>) -> anyhow::Result<()> {
    let dropped = store.drop_table().await;
    store.close().await;
    result?;
    Ok(dropped?)
}

/// Generates one `#[tokio::test]` per backend for each behaviour below.
macro_rules! on_every_backend {
    ($($behaviour:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $behaviour() -> anyhow::Result<()> {
                super::run(crate::kv::BackendKind::Sqlite, super::$behaviour).await
            })*
        }
        mod postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $behaviour() -> anyhow::Result<()> {
                super::run(crate::kv::BackendKind::Postgres, super::$behaviour).await
            })*
        }
        mod mariadb {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $behaviour() -> anyhow::Result<()> {
                super::run(crate::kv::BackendKind::MariaDb, super::$behaviour).await
            })*
        }
    };
}

on_every_backend!(
    write_read_overwrite_delete,
    keys_are_exact_and_in_byte_order,
    cache_serves_until_the_ttl_then_rereads,
    concurrent_writers_share_a_small_pool,
    copy_there_and_back_keeps_everything,
);

async fn run<F>(kind: BackendKind, behaviour: fn(String) -> F) -> anyhow::Result<()>
where
    F: std::future::Future<Output = anyhow::Result<()>>,
{
    let Some(target) = target(kind)? else {
        return Ok(());
    };
    behaviour(target.url.clone()).await
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct User {
    name: String,
    tags: Vec<String>,
    visits: u32,
}

async fn write_read_overwrite_delete(url: String) -> anyhow::Result<()> {
    let store = open(&url, &table("crud"), KvOptions::new()).await?;
    let result = async {
        ensure!(
            store.get::<User>("u1").await?.is_none(),
            "a missing key read as present"
        );
        let user = User {
            name: "Ada".into(),
            tags: vec!["math".into(), "engines".into()],
            visits: 1,
        };
        store.put("u1", &user).await?;
        ensure!(
            store.get::<User>("u1").await?.as_ref() == Some(&user),
            "read != written"
        );

        let user = User { visits: 2, ..user };
        store.put("u1", &user).await?;
        ensure!(
            store.get::<User>("u1").await?.as_ref() == Some(&user),
            "overwrite lost"
        );
        ensure!(store.len().await? == 1, "an overwrite added a row");

        match store.get::<Vec<u8>>("u1").await {
            Err(KvError::Decode { key, .. }) => ensure!(key == "u1", "decode error names {key}"),
            other => bail!("reading a User as bytes gave {other:?}"),
        }
        let bad: HashMap<(u8, u8), u8> = [((1, 2), 3)].into();
        match store.put("bad", &bad).await {
            Err(KvError::Encode { key, .. }) => ensure!(key == "bad", "encode error names {key}"),
            other => bail!("a map with tuple keys was stored: {other:?}"),
        }
        for key in ["", "nul\0inside", &"k".repeat(256)] {
            match store.put(key, &1).await {
                Err(KvError::InvalidKey { .. }) => {}
                other => bail!("key of {} bytes accepted: {other:?}", key.len()),
            }
        }
        let longest = "🦀".repeat(255);
        store.put(&longest, &"fits").await?;
        ensure!(
            store.get::<String>(&longest).await?.as_deref() == Some("fits"),
            "255 chars"
        );

        ensure!(
            store.delete("u1").await?,
            "delete of a present key said absent"
        );
        ensure!(!store.delete("u1").await?, "second delete said present");
        ensure!(
            store.get::<User>("u1").await?.is_none(),
            "deleted key still read"
        );
        ensure!(store.delete(&longest).await?, "delete of the long key");
        ensure!(store.is_empty().await?, "rows left");
        Ok(())
    }
    .await;
    finish(&store, result).await
}

async fn keys_are_exact_and_in_byte_order(url: String) -> anyhow::Result<()> {
    let store = open(&url, &table("keys"), KvOptions::new()).await?;
    let result = async {
        // Keys a case-, accent- or space-insensitive collation would merge.
        let keys = [
            "a",
            "A",
            "a ",
            " a",
            "é",
            "e\u{301}",
            "E",
            "ß",
            "ss",
            "z",
            "Ω",
            "日本",
            "🦀",
            "'; DROP TABLE x; --",
            "100%_\\",
        ];
        for (i, key) in keys.iter().enumerate() {
            store.put(key, &i).await?;
        }
        for (i, key) in keys.iter().enumerate() {
            let got: Option<usize> = store.get(key).await?;
            ensure!(got == Some(i), "key {key:?} read {got:?}, wrote {i}");
        }
        let mut want: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        want.sort();
        let got = store.keys().await?;
        ensure!(got == want, "keys {got:?}, want {want:?}");
        Ok(())
    }
    .await;
    finish(&store, result).await
}

async fn cache_serves_until_the_ttl_then_rereads(url: String) -> anyhow::Result<()> {
    let name = table("ttl");
    let clock = ManualClock::new();
    let ttl = Duration::from_secs(10);
    let cached = open(
        &url,
        &name,
        KvOptions::new().cache_ttl(ttl).clock(clock.clone()),
    )
    .await?;
    // A second store on the same table, uncached: a writer the first store
    // does not hear about.
    let other = open(&url, &name, KvOptions::new().cache_ttl(Duration::ZERO)).await?;
    let result = async {
        cached.put("k", &1).await?;
        ensure!(cached.get::<i32>("k").await? == Some(1), "first read");
        let before = cached.cache_stats();
        ensure!(
            before.misses == 1 && before.hits == 0,
            "first read was {before:?}"
        );

        other.put("k", &2).await?;
        ensure!(
            cached.get::<i32>("k").await? == Some(1),
            "not served from the cache"
        );
        clock.advance(ttl - Duration::from_millis(1));
        ensure!(
            cached.get::<i32>("k").await? == Some(1),
            "expired before the TTL"
        );
        let during = cached.cache_stats();
        ensure!(
            during.hits == 2 && during.misses == 1,
            "within the TTL: {during:?}"
        );

        clock.advance(Duration::from_millis(1));
        ensure!(
            cached.get::<i32>("k").await? == Some(2),
            "stale after the TTL"
        );
        ensure!(cached.cache_stats().misses == 2, "expiry did not reread");

        // A write or delete through the cached store is seen at once.
        cached.put("k", &3).await?;
        ensure!(
            cached.get::<i32>("k").await? == Some(3),
            "own write not seen"
        );
        ensure!(cached.delete("k").await?, "delete");
        ensure!(
            cached.get::<i32>("k").await?.is_none(),
            "own delete not seen"
        );
        Ok(())
    }
    .await;
    other.close().await;
    finish(&cached, result).await
}

const WRITERS: usize = 16;
const WRITES: usize = 12;
const POOL_MAX: u32 = 3;

async fn concurrent_writers_share_a_small_pool(url: String) -> anyhow::Result<()> {
    let options = KvOptions::new().pool(small_pool(POOL_MAX));
    let store = Arc::new(open(&url, &table("conc"), options).await?);
    let result = async {
        let mut tasks = tokio::task::JoinSet::new();
        for writer in 0..WRITERS {
            let store = Arc::clone(&store);
            tasks.spawn(async move {
                for i in 0..WRITES {
                    let value = writer * 1000 + i;
                    store.put(&format!("w{writer}:{i}"), &value).await?;
                    store.put("hot", &value).await?;
                    let m = store.metrics();
                    ensure!(m.total <= POOL_MAX, "{} connections open", m.total);
                    let back: Option<usize> = store.get(&format!("w{writer}:{i}")).await?;
                    ensure!(back == Some(value), "writer {writer} read {back:?}");
                }
                anyhow::Ok(())
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.context("a writer panicked")??;
        }
        ensure!(
            store.len().await? == (WRITERS * WRITES + 1) as u64,
            "rows lost"
        );
        for writer in 0..WRITERS {
            for i in 0..WRITES {
                let got: Option<usize> = store.get(&format!("w{writer}:{i}")).await?;
                ensure!(got == Some(writer * 1000 + i), "w{writer}:{i} is {got:?}");
            }
        }
        let hot: usize = store.get("hot").await?.context("hot key missing")?;
        ensure!(
            hot % 1000 < WRITES && hot / 1000 < WRITERS,
            "hot key holds {hot}"
        );
        let m = store.metrics();
        ensure!(
            m.creation_count <= u64::from(POOL_MAX),
            "opened {}",
            m.creation_count
        );
        Ok(())
    }
    .await;
    finish(&store, result).await
}

/// Unicode keys and values, values of several MiB, JSON numbers at their
/// limits, and enough rows to span several pages of a copy.
fn dataset() -> BTreeMap<String, serde_json::Value> {
    let mut data = BTreeMap::new();
    for i in 0..600 {
        data.insert(format!("row:{i:04}"), json!({ "i": i, "even": i % 2 == 0 }));
    }
    let big: String = "ü€😀a\"\\\n".repeat(300_000); // ~3.3 MiB of JSON text
    data.insert("big:text".into(), json!(big));
    data.insert("big:array".into(), json!((0..50_000).collect::<Vec<u32>>()));
    data.insert("Ключ 🔑".into(), json!("значение — 値 — قيمة"));
    data.insert("e\u{301}".into(), json!("decomposed"));
    data.insert("é".into(), json!("precomposed"));
    data.insert("nul".into(), json!("a\u{0}b"));
    data.insert(
        "numbers".into(),
        json!([u64::MAX, i64::MIN, 1.5e308, -0.0, 0.1, 1e-300]),
    );
    data.insert("nothing".into(), json!(null));
    data
}

async fn fill(store: &KvStore, data: &BTreeMap<String, serde_json::Value>) -> anyhow::Result<()> {
    for (key, value) in data {
        store.put(key, value).await?;
    }
    Ok(())
}

/// `to` holds exactly what `from` holds, text for text.
async fn same_contents(from: &KvStore, to: &KvStore) -> anyhow::Result<()> {
    let keys = from.keys().await?;
    let theirs = to.keys().await?;
    let longest = keys.len().max(theirs.len());
    if let Some(i) = (0..longest).find(|&i| keys.get(i) != theirs.get(i)) {
        bail!(
            "key #{i} is {:?} in {} but {:?} in {}",
            keys.get(i),
            from.backend(),
            theirs.get(i),
            to.backend()
        );
    }
    for key in &keys {
        let (a, b) = (from.get_json(key).await?, to.get_json(key).await?);
        ensure!(
            a == b,
            "{key:?} differs between {} and {}",
            from.backend(),
            to.backend()
        );
    }
    Ok(())
}

async fn copy_there_and_back_keeps_everything(url: String) -> anyhow::Result<()> {
    let home = sqlite();
    let source = open(&home.url, &table("src"), KvOptions::new()).await?;
    let there = open(&url, &table("there"), KvOptions::new()).await?;
    let back = open(&home.url, &table("back"), KvOptions::new()).await?;
    let result = async {
        let data = dataset();
        fill(&source, &data).await?;
        // The target's own keys: one is kept, one is replaced.
        there.put("only-there", &"kept").await?;
        there.put("row:0000", &"replaced").await?;

        let report = source.copy_to(&there).await?;
        ensure!(report.rows == data.len() as u64, "copied {}", report.rows);
        ensure!(
            report.batches > 3,
            "one page per batch at least: {report:?}"
        );
        ensure!(there.len().await? == data.len() as u64 + 1, "target count");
        ensure!(
            there.get::<String>("only-there").await?.as_deref() == Some("kept"),
            "kept"
        );
        there.delete("only-there").await?;
        same_contents(&source, &there).await?;

        there.copy_to(&back).await?;
        same_contents(&source, &back).await?;
        for (key, value) in &data {
            let got: Option<serde_json::Value> = back.get(key).await?;
            ensure!(
                got.as_ref() == Some(value),
                "{key:?} came back as another value"
            );
        }
        Ok(())
    }
    .await;
    let result = finish(&there, result).await;
    let result = finish(&back, result).await;
    finish(&source, result).await
}

/// SQLite → PostgreSQL → MariaDB → SQLite, checked at every hop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_across_all_three_backends() -> anyhow::Result<()> {
    let (Some(pg), Some(maria)) = (server("DATABASE_URL")?, server("MYSQL_URL")?) else {
        return Ok(());
    };
    let home = sqlite();
    let first = open(&home.url, &table("chain1"), KvOptions::new()).await?;
    let pg = open(&pg.url, &table("chain2"), KvOptions::new()).await?;
    let maria = open(&maria.url, &table("chain3"), KvOptions::new()).await?;
    let last = open(&home.url, &table("chain4"), KvOptions::new()).await?;
    let result = async {
        let data = dataset();
        fill(&first, &data).await?;
        let hops = [(&first, &pg), (&pg, &maria), (&maria, &last)];
        for (from, to) in hops {
            let report = from.copy_to(to).await?;
            ensure!(
                report.rows == data.len() as u64,
                "{}: {report:?}",
                to.backend()
            );
            same_contents(&first, to).await?;
        }
        for (key, value) in &data {
            let got: Option<serde_json::Value> = last.get(key).await?;
            ensure!(got.as_ref() == Some(value), "{key:?} changed on the way");
        }
        Ok(())
    }
    .await;
    let result = finish(&last, result).await;
    let result = finish(&maria, result).await;
    let result = finish(&pg, result).await;
    finish(&first, result).await
}

/// A target that changes what it is given fails the copy's check, and the
/// copy leaves it as it was.
#[tokio::test]
async fn a_copy_that_reads_back_other_data_is_rolled_back() -> anyhow::Result<()> {
    use sqlx::Connection;

    let home = sqlite();
    let source = open(&home.url, &table("honest"), KvOptions::new()).await?;
    let name = table("tamper");
    let target = open(&home.url, &name, KvOptions::new()).await?;
    let result = async {
        source.put("a", &1).await?;
        source.put("b", &2).await?;
        let mut raw = sqlx::SqliteConnection::connect(&home.url).await?;
        // `name` is the test's own table name.
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "CREATE TRIGGER {name}_tamper AFTER INSERT ON {name} WHEN NEW.item_key = 'b'
             BEGIN UPDATE {name} SET item_json = '3' WHERE item_key = 'b'; END"
        )))
        .execute(&mut raw)
        .await?;
        raw.close().await?;
        match source.copy_to(&target).await {
            Err(KvError::CopyMismatch { key, detail }) => {
                ensure!(key.as_deref() == Some("b"), "mismatch at {key:?}: {detail}");
            }
            other => bail!("a tampered copy gave {other:?}"),
        }
        ensure!(target.is_empty().await?, "the failed copy left rows behind");
        Ok(())
    }
    .await;
    let result = finish(&target, result).await;
    finish(&source, result).await
}

#[tokio::test]
async fn bad_urls_and_tables_are_typed_errors_without_secrets() -> anyhow::Result<()> {
    for (url, scheme) in [
        ("redis://user:secret@127.0.0.1/0", Some("redis")),
        ("http://user:secret@example.invalid/", Some("http")),
        ("no scheme at all", None),
        ("", None),
        ("://secret@host", None),
    ] {
        match KvStore::open(url, KvOptions::new()).await {
            Err(e @ KvError::UnsupportedUrl { .. }) => {
                let KvError::UnsupportedUrl { scheme: got } = &e else {
                    unreachable!()
                };
                ensure!(got.as_deref() == scheme, "{url:?}: scheme {got:?}");
                ensure!(!e.to_string().contains("secret"), "{url:?}: {e}");
            }
            other => bail!("{url:?} gave {other:?}"),
        }
    }
    match KvStore::open("sqlite:x.db?mode=bogus", KvOptions::new()).await {
        Err(KvError::InvalidUrl(_)) => {}
        other => bail!("a bad sqlite parameter gave {other:?}"),
    }
    for name in ["", "Kv", "kv-1", "1kv", "kv; DROP TABLE x", &"k".repeat(64)] {
        match KvStore::open("sqlite::memory:", KvOptions::new().table(name)).await {
            Err(KvError::InvalidTable { .. }) => {}
            other => bail!("table {name:?} gave {other:?}"),
        }
    }
    let unreachable = "postgres://app:secret@127.0.0.1:1/app";
    let pool = PoolConfig::builder()
        .acquire_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(400))
        .build()?;
    match KvStore::open(unreachable, KvOptions::new().pool(pool)).await {
        Err(e @ KvError::Pool(_)) => {
            let mut chain = String::new();
            let mut cause: Option<&dyn std::error::Error> = Some(&e);
            for _ in 0..8 {
                let Some(c) = cause else { break };
                chain.push_str(&format!("{c} / {c:?} / "));
                cause = c.source();
            }
            ensure!(!chain.contains("secret"), "the password leaked: {chain}");
        }
        other => bail!("an unreachable server gave {other:?}"),
    }
    Ok(())
}

/// A statement the database refuses is a `Query` error, not a panic.
#[tokio::test]
async fn a_statement_the_database_refuses_is_a_query_error() -> anyhow::Result<()> {
    let home = sqlite();
    let store = open(&home.url, &table("gone"), KvOptions::new()).await?;
    store.drop_table().await?;
    let result = async {
        match store.put("k", &1).await {
            Err(KvError::Query(e)) => ensure!(e.to_string().contains("no such table"), "{e}"),
            other => bail!("writing to a dropped table gave {other:?}"),
        }
        match store.keys().await {
            Err(KvError::Query(_)) => Ok(()),
            other => bail!("listing a dropped table gave {other:?}"),
        }
    }
    .await;
    finish(&store, result).await
}
