//! The peers: the pools this one is compared against, each wrapped as a
//! [`Contestant`], and the fake manager's implementations of their manager
//! traits. Built with the `peers` feature only, so the test command compiles
//! none of these crates.
//!
//! The no-op peers run over the same [`FakeManager`] as ours, with
//! validation off and a 30 s acquire timeout (native where the pool has one,
//! `tokio::time::timeout` around `get` where it has none: qp, fastpool).
//! fastpool 1.1.2 marks its whole API deprecated (unmaintained); it is still
//! a pool users pick, so it stays a contestant, hence the
//! `allow(deprecated)` on its wrapper. The PostgreSQL peers are
//! deadpool-postgres and bb8-postgres over tokio-postgres, `NoTls` on
//! loopback.

use std::convert::Infallible;
use std::time::Duration;

use tokio_postgres::{Client, NoTls};

use crate::contestant::Contestant;
use crate::fake::{FakeConn, FakeManager, FakeSpec};
use crate::pools::pg::DbSpec;

async fn with_timeout<T, E: std::fmt::Display>(
    limit: Duration,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("timed out after {limit:?}")),
    }
}

impl deadpool::managed::Manager for FakeManager {
    type Type = FakeConn;
    type Error = Infallible;

    async fn create(&self) -> Result<FakeConn, Infallible> {
        Ok(self.open().await)
    }

    async fn recycle(
        &self,
        _conn: &mut FakeConn,
        _metrics: &deadpool::managed::Metrics,
    ) -> deadpool::managed::RecycleResult<Infallible> {
        Ok(())
    }
}

impl bb8::ManageConnection for FakeManager {
    type Connection = FakeConn;
    type Error = Infallible;

    async fn connect(&self) -> Result<FakeConn, Infallible> {
        Ok(self.open().await)
    }

    async fn is_valid(&self, _conn: &mut FakeConn) -> Result<(), Infallible> {
        Ok(())
    }

    fn has_broken(&self, _conn: &mut FakeConn) -> bool {
        false
    }
}

#[async_trait::async_trait]
impl qp::resource::Manage for FakeManager {
    type Output = FakeConn;
    type Error = Infallible;

    async fn try_create(&self) -> Result<FakeConn, Infallible> {
        Ok(self.open().await)
    }
}

#[async_trait::async_trait]
impl mobc::Manager for FakeManager {
    type Connection = FakeConn;
    type Error = Infallible;

    async fn connect(&self) -> Result<FakeConn, Infallible> {
        Ok(self.open().await)
    }

    async fn check(&self, conn: FakeConn) -> Result<FakeConn, Infallible> {
        Ok(conn)
    }
}

// fastpool 1.1.2 deprecates its whole API (unmaintained, pointing to a
// successor crate); it is still a pool users pick, so it stays a contestant.
#[allow(deprecated)]
impl fastpool::ManageObject for FakeManager {
    type Object = FakeConn;
    type Error = Infallible;

    async fn create(&self) -> Result<FakeConn, Infallible> {
        Ok(self.open().await)
    }

    async fn is_recyclable(
        &self,
        _conn: &mut FakeConn,
        _status: &fastpool::ObjectStatus,
    ) -> Result<(), Infallible> {
        Ok(())
    }
}

/// deadpool's managed pool (no pre-fill: it has no `min_size`).
#[derive(Debug, Clone)]
pub struct Deadpool(pub deadpool::managed::Pool<FakeManager>);

impl Deadpool {
    /// Same max size, `wait_timeout` as the acquire timeout.
    pub async fn build(spec: &FakeSpec) -> Self {
        let pool = deadpool::managed::Pool::builder(spec.manager())
            .max_size(spec.max_size as usize)
            .wait_timeout(Some(spec.acquire_timeout))
            .runtime(deadpool::Runtime::Tokio1)
            .build()
            .expect("valid deadpool config");
        Self(pool)
    }
}

impl Contestant for Deadpool {
    type Conn = FakeConn;
    type Guard<'a> = deadpool::managed::Object<FakeManager>;

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| e.to_string())
    }

    fn conn<'g>(guard: &'g mut Self::Guard<'_>) -> &'g mut FakeConn {
        guard
    }

    async fn shutdown(self) {
        self.0.close();
    }
}

/// bb8.
#[derive(Debug, Clone)]
pub struct Bb8(pub bb8::Pool<FakeManager>);

impl Bb8 {
    /// Same max size, `min_idle` as min size, no test on checkout.
    pub async fn build(spec: &FakeSpec) -> Self {
        let min = (spec.min_size > 0).then_some(spec.min_size);
        let pool = bb8::Pool::builder()
            .max_size(spec.max_size)
            .min_idle(min)
            .connection_timeout(spec.acquire_timeout)
            .test_on_check_out(false)
            .build(spec.manager())
            .await
            .expect("fake connects cannot fail");
        Self(pool)
    }
}

impl Contestant for Bb8 {
    type Conn = FakeConn;
    type Guard<'a> = bb8::PooledConnection<'a, FakeManager>;

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| format!("{e:?}"))
    }

    fn conn<'g>(guard: &'g mut Self::Guard<'_>) -> &'g mut FakeConn {
        guard
    }
}

/// qp (checkout with `acquire_unchecked`: validation off).
#[derive(Clone)]
pub struct Qp(pub qp::Pool<FakeManager>, Duration);

impl std::fmt::Debug for Qp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qp")
            .field("max_size", &self.0.max_size())
            .finish()
    }
}

impl Qp {
    /// Same max size; `reserve(min_size)` as min size.
    pub async fn build(spec: &FakeSpec) -> Self {
        let pool = qp::Pool::new(spec.manager(), spec.max_size as usize);
        if spec.min_size > 0 {
            pool.reserve(spec.min_size as usize)
                .await
                .expect("fake connects cannot fail");
        }
        Self(pool, spec.acquire_timeout)
    }
}

impl Contestant for Qp {
    type Conn = FakeConn;
    type Guard<'a> = qp::Pooled<'a, FakeManager>;

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        with_timeout(self.1, self.0.acquire_unchecked()).await
    }

    fn conn<'g>(guard: &'g mut Self::Guard<'_>) -> &'g mut FakeConn {
        guard
    }
}

/// mobc (no pre-fill: it has no `min_size`).
#[derive(Clone)]
pub struct Mobc(pub mobc::Pool<FakeManager>);

impl std::fmt::Debug for Mobc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mobc")
    }
}

impl Mobc {
    /// Same max open and max idle (so returns are kept), no test on
    /// checkout, `get_timeout` as the acquire timeout.
    pub async fn build(spec: &FakeSpec) -> Self {
        let pool = mobc::Pool::builder()
            .max_open(u64::from(spec.max_size))
            .max_idle(u64::from(spec.max_size))
            .test_on_check_out(false)
            .get_timeout(Some(spec.acquire_timeout))
            .build(spec.manager());
        Self(pool)
    }
}

impl Contestant for Mobc {
    type Conn = FakeConn;
    type Guard<'a> = mobc::Connection<FakeManager>;

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| e.to_string())
    }

    fn conn<'g>(guard: &'g mut Self::Guard<'_>) -> &'g mut FakeConn {
        guard
    }
}

/// fastpool's bounded pool (FIFO queue, its default).
#[allow(deprecated)]
#[derive(Debug, Clone)]
pub struct Fastpool(
    pub std::sync::Arc<fastpool::bounded::Pool<FakeManager>>,
    Duration,
);

#[allow(deprecated)]
impl Fastpool {
    /// Same max size; `replenish(min_size)` as min size.
    pub async fn build(spec: &FakeSpec) -> Self {
        let config = fastpool::bounded::PoolConfig::new(spec.max_size as usize);
        let pool = fastpool::bounded::Pool::new(config, spec.manager());
        if spec.min_size > 0 {
            pool.replenish(spec.min_size as usize).await;
        }
        Self(pool, spec.acquire_timeout)
    }
}

#[allow(deprecated)]
impl Contestant for Fastpool {
    type Conn = FakeConn;
    type Guard<'a> = fastpool::bounded::Object<FakeManager>;

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        with_timeout(self.1, self.0.get()).await
    }

    fn conn<'g>(guard: &'g mut Self::Guard<'_>) -> &'g mut FakeConn {
        guard
    }
}

/// deadpool-postgres: `RecyclingMethod::Fast` (an `is_closed` check) with
/// validation off, `Verified` (an empty query at every checkout) with it on.
#[derive(Debug, Clone)]
pub struct DeadpoolPg(pub deadpool_postgres::Pool);

impl DeadpoolPg {
    /// Builds the pool and checks one connection out, so a dead server is
    /// reported here.
    pub async fn build(spec: &DbSpec) -> Result<Self, String> {
        let config: tokio_postgres::Config = spec.url.parse().map_err(|e| format!("{e}"))?;
        let recycling_method = if spec.validate {
            deadpool_postgres::RecyclingMethod::Verified
        } else {
            deadpool_postgres::RecyclingMethod::Fast
        };
        let manager = deadpool_postgres::Manager::from_config(
            config,
            NoTls,
            deadpool_postgres::ManagerConfig { recycling_method },
        );
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(spec.max_size as usize)
            .wait_timeout(Some(spec.acquire_timeout))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| e.to_string())?;
        drop(pool.get().await.map_err(|e| e.to_string())?);
        Ok(Self(pool))
    }
}

impl Contestant for DeadpoolPg {
    type Conn = Client;
    type Guard<'a> = deadpool_postgres::Object;

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| e.to_string())
    }

    fn conn<'g>(guard: &'g mut Self::Guard<'_>) -> &'g mut Client {
        guard
    }

    async fn shutdown(self) {
        self.0.close();
    }
}

type Bb8Manager = bb8_postgres::PostgresConnectionManager<NoTls>;

/// bb8-postgres, `test_on_check_out` as its validation switch.
#[derive(Debug, Clone)]
pub struct Bb8Pg(pub bb8::Pool<Bb8Manager>);

impl Bb8Pg {
    /// `build` opens one connection (its default `min_idle` is none).
    pub async fn build(spec: &DbSpec) -> Result<Self, String> {
        let config: tokio_postgres::Config = spec.url.parse().map_err(|e| format!("{e}"))?;
        let pool = bb8::Pool::builder()
            .max_size(spec.max_size)
            .connection_timeout(spec.acquire_timeout)
            .test_on_check_out(spec.validate)
            .build(bb8_postgres::PostgresConnectionManager::new(config, NoTls))
            .await
            .map_err(|e| e.to_string())?;
        drop(pool.get().await.map_err(|e| format!("{e:?}"))?);
        Ok(Self(pool))
    }
}

impl Contestant for Bb8Pg {
    type Conn = Client;
    type Guard<'a> = bb8::PooledConnection<'a, Bb8Manager>;

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| format!("{e:?}"))
    }

    fn conn<'g>(guard: &'g mut Self::Guard<'_>) -> &'g mut Client {
        guard
    }
}
