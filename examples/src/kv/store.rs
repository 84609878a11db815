//! [`KvStore`]: the store's operations, the same code over every backend.

use std::sync::Arc;
use std::time::Duration;

use pool_core::{PoolConfig, PoolMetrics};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::backend::Backend;
use super::cache::{CacheStats, Clock, ReadCache, SystemClock};
use super::sql::{check_key, BackendKind, Sql};
use super::KvError;

/// How a [`KvStore`] is set up. Every setter takes and returns `self`.
#[derive(Debug, Clone)]
#[must_use]
pub struct KvOptions {
    pub(crate) table: String,
    pub(crate) pool: Option<PoolConfig>,
    pub(crate) cache_ttl: Duration,
    pub(crate) cache_capacity: usize,
    pub(crate) clock: Arc<dyn Clock>,
}

impl Default for KvOptions {
    fn default() -> Self {
        Self {
            table: "kv".to_owned(),
            pool: None,
            cache_ttl: Duration::from_secs(5),
            cache_capacity: 10_000,
            clock: Arc::new(SystemClock),
        }
    }
}

impl KvOptions {
    /// The defaults: table `kv`, a pool of up to 4 connections named `kv`,
    /// a 5 s cache TTL, up to 10 000 cached entries, the system clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// The table to use (created if missing): lowercase ASCII letters,
    /// digits and `_`, at most 63 characters. Defaults to `kv`.
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    /// The pool's settings. Defaults to a pool named `kv` of at most 4
    /// connections, the pool's defaults otherwise.
    pub fn pool(mut self, config: PoolConfig) -> Self {
        self.pool = Some(config);
        self
    }

    /// How long a read value is served from the cache. `ZERO` turns the
    /// cache off. Defaults to 5 s.
    pub fn cache_ttl(mut self, ttl: Duration) -> Self {
        self.cache_ttl = ttl;
        self
    }

    /// How many values the cache holds at most. `0` turns it off. Defaults
    /// to 10 000.
    pub fn cache_capacity(mut self, entries: usize) -> Self {
        self.cache_capacity = entries;
        self
    }

    /// Where the cache reads the time. Defaults to [`SystemClock`].
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }
}

/// A key-value store in one table of SQLite, PostgreSQL or MariaDB, picked
/// by the URL, with a read cache in front.
///
/// Keys are non-empty strings of at most 255 characters without NUL; values
/// are anything serde can write as JSON, stored as JSON text. `KvStore` is
/// `Send + Sync`: share it (in an `Arc`) between tasks; its pool bounds how
/// many connections they use.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), pool_examples::kv::KvError> {
/// use pool_examples::kv::{KvOptions, KvStore};
///
/// let store = KvStore::open("sqlite::memory:", KvOptions::new()).await?;
/// store.put("greeting", &"hello").await?;
/// assert_eq!(store.get::<String>("greeting").await?.as_deref(), Some("hello"));
/// assert!(store.delete("greeting").await?);
/// assert_eq!(store.get::<String>("greeting").await?, None);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct KvStore {
    pub(crate) backend: Backend,
    pub(crate) sql: Sql,
    pub(crate) cache: ReadCache,
    table: String,
}

impl KvStore {
    /// Connects to the database the URL names (`sqlite:`, `postgres://`,
    /// `mysql://`) and creates the table if it is missing.
    ///
    /// A SQLite file is created if missing and put in WAL mode. With
    /// `sqlite::memory:` the data lives only while the pool keeps a
    /// connection open.
    ///
    /// # Errors
    ///
    /// [`KvError::UnsupportedUrl`], [`KvError::InvalidUrl`],
    /// [`KvError::InvalidTable`]; [`KvError::Pool`]
    /// when the database cannot be reached; [`KvError::Query`] when the
    /// table cannot be created.
    pub async fn open(url: &str, options: KvOptions) -> Result<Self, KvError> {
        let kind = BackendKind::from_url(url)?;
        let sql = Sql::new(kind, &options.table)?;
        let config = match options.pool {
            Some(config) => config,
            // These settings are valid; the fallback is never taken.
            None => PoolConfig::builder()
                .name("kv")
                .max_size(4)
                .build()
                .unwrap_or_default(),
        };
        let backend = Backend::open(url, config).await?;
        let store = Self {
            cache: ReadCache::new(options.cache_ttl, options.cache_capacity, options.clock),
            backend,
            sql,
            table: options.table,
        };
        let mut conn = store.backend.get().await?;
        conn.exec().execute(&store.sql.create, &[]).await?;
        Ok(store)
    }

    /// Stores `value` under `key`, replacing what was there (one upsert
    /// statement, atomic on every backend).
    ///
    /// # Errors
    ///
    /// [`KvError::InvalidKey`], [`KvError::Encode`], [`KvError::Pool`],
    /// [`KvError::Query`].
    pub async fn put<T: Serialize + ?Sized>(&self, key: &str, value: &T) -> Result<(), KvError> {
        check_key(key)?;
        let json = serde_json::to_string(value).map_err(|source| KvError::Encode {
            key: key.to_owned(),
            source,
        })?;
        let mut conn = self.backend.get().await?;
        let written = conn.exec().execute(&self.sql.upsert, &[key, &json]).await;
        // Forget the key after the write, success or not (a failed write
        // may still have landed): see the cache's module docs.
        self.cache.remove(key);
        written?;
        Ok(())
    }

    /// The value under `key`, from the cache if it was read less than the
    /// TTL ago, else from the database.
    ///
    /// # Errors
    ///
    /// [`KvError::InvalidKey`], [`KvError::Decode`] when the stored JSON does
    /// not fit `T`, [`KvError::Pool`], [`KvError::Query`].
    pub async fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, KvError> {
        match self.get_json(key).await? {
            None => Ok(None),
            Some(json) => serde_json::from_str(&json)
                .map(Some)
                .map_err(|source| KvError::Decode {
                    key: key.to_owned(),
                    source,
                }),
        }
    }

    /// The JSON text stored under `key`, through the cache.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get), less `Decode`.
    pub async fn get_json(&self, key: &str) -> Result<Option<Arc<str>>, KvError> {
        check_key(key)?;
        let ticket = match self.cache.get(key) {
            Ok(json) => return Ok(Some(json)),
            Err(ticket) => ticket,
        };
        let mut conn = self.backend.get().await?;
        let found = conn.exec().fetch_text(&self.sql.select, &[key]).await?;
        drop(conn);
        Ok(found.map(|json| {
            let json: Arc<str> = json.into();
            self.cache.insert(ticket, key, json.clone());
            json
        }))
    }

    /// Removes `key`; whether it was there.
    ///
    /// # Errors
    ///
    /// [`KvError::InvalidKey`], [`KvError::Pool`], [`KvError::Query`].
    pub async fn delete(&self, key: &str) -> Result<bool, KvError> {
        check_key(key)?;
        let mut conn = self.backend.get().await?;
        let deleted = conn.exec().execute(&self.sql.delete, &[key]).await;
        self.cache.remove(key);
        Ok(deleted? > 0)
    }

    /// Every key, in byte order (the same on every backend).
    ///
    /// # Errors
    ///
    /// [`KvError::Pool`], [`KvError::Query`].
    pub async fn keys(&self) -> Result<Vec<String>, KvError> {
        let mut conn = self.backend.get().await?;
        Ok(conn.exec().fetch_texts(&self.sql.keys).await?)
    }

    /// How many keys are stored.
    ///
    /// # Errors
    ///
    /// [`KvError::Pool`], [`KvError::Query`].
    pub async fn len(&self) -> Result<u64, KvError> {
        let mut conn = self.backend.get().await?;
        let n = conn.exec().fetch_count(&self.sql.count).await?;
        // COUNT(*) is never negative.
        Ok(u64::try_from(n).unwrap_or_default())
    }

    /// Whether the store holds no key.
    ///
    /// # Errors
    ///
    /// As [`len`](Self::len).
    pub async fn is_empty(&self) -> Result<bool, KvError> {
        Ok(self.len().await? == 0)
    }

    /// Drops the table and empties the cache (for tests and demos).
    ///
    /// # Errors
    ///
    /// [`KvError::Pool`], [`KvError::Query`].
    pub async fn drop_table(&self) -> Result<(), KvError> {
        let mut conn = self.backend.get().await?;
        conn.exec().execute(&self.sql.drop, &[]).await?;
        self.cache.clear();
        Ok(())
    }

    /// Closes the pool; waits for connections in use to come back.
    pub async fn close(&self) {
        self.backend.close().await;
    }

    /// The backend the URL chose.
    pub fn backend(&self) -> BackendKind {
        self.backend.kind()
    }

    /// The table in use.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The pool's metrics.
    pub fn metrics(&self) -> PoolMetrics {
        self.backend.metrics()
    }

    /// The read cache's counters.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }
}
