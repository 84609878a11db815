//! The no-op contestants: each pool over the same [`FakeManager`], with
//! validation off and a 30 s acquire timeout (native where the pool has one,
//! `tokio::time::timeout` around `get` where it has none: qp, fastpool).
//!
//! fastpool 1.1.2 marks its whole API deprecated (unmaintained); it is still
//! measured, hence the `allow(deprecated)` on its wrapper.

use std::time::Duration;

use crate::contestant::Contestant;
use crate::fake::{FakeConn, FakeManager, FakeSpec};
use crate::pools::floor::{FloorGuard, FloorPool};

async fn with_timeout<T, E: std::fmt::Display>(
    limit: Duration,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("timed out after {limit:?}")),
    }
}

/// `pool_core::Pool`.
#[derive(Debug, Clone)]
pub struct Ours(pub pool_core::Pool<FakeManager>);

impl Ours {
    /// The config every no-op scenario uses.
    pub fn config(spec: &FakeSpec) -> pool_core::PoolConfigBuilder {
        pool_core::PoolConfig::builder()
            .name("bench")
            .max_size(spec.max_size)
            .min_size(spec.min_size)
            .acquire_timeout(spec.acquire_timeout)
            .validation_mode(pool_core::ValidationMode::None)
    }

    /// Builds it with `Pool::new` (opens `max(min_size, 1)` first).
    pub async fn build(spec: &FakeSpec) -> Self {
        let config = Self::config(spec).build().expect("valid config");
        Self(
            pool_core::Pool::new(spec.manager(), config)
                .await
                .expect("fake connects cannot fail"),
        )
    }
}

/// A hook that only sets up new connections (the common `SET
/// search_path`), and says so: checkouts and returns keep the fast path.
#[derive(Debug, Clone, Copy)]
pub struct AfterConnectOnly;

#[async_trait::async_trait]
impl pool_core::Hooks<FakeManager> for AfterConnectOnly {
    async fn after_connect(
        &self,
        conn: &mut FakeConn,
    ) -> Result<(), <FakeManager as pool_core::ManageConnection>::Error> {
        std::hint::black_box(conn);
        Ok(())
    }

    fn uses_before_acquire(&self) -> bool {
        false
    }

    fn uses_after_release(&self) -> bool {
        false
    }
}

impl Ours {
    /// Builds it with `Pool::new_with_hooks` and [`AfterConnectOnly`].
    pub async fn build_after_connect(spec: &FakeSpec) -> Self {
        let config = Self::config(spec).build().expect("valid config");
        Self(
            pool_core::Pool::new_with_hooks(spec.manager(), config, AfterConnectOnly)
                .await
                .expect("fake connects cannot fail"),
        )
    }
}

impl Contestant for Ours {
    type Conn = FakeConn;
    type Guard<'a> = pool_core::PooledConnection<FakeManager>;

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| e.to_string())
    }

    fn conn<'g>(guard: &'g mut Self::Guard<'_>) -> &'g mut FakeConn {
        guard
    }

    async fn shutdown(self) {
        self.0.close().await;
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

/// The floor (see [`FloorPool`]).
#[derive(Debug, Clone)]
pub struct Floor(pub FloorPool);

impl Floor {
    /// `max_size` connections, all idle from the start.
    pub async fn build(spec: &FakeSpec) -> Self {
        Self(FloorPool::new(spec.max_size as usize))
    }
}

impl Contestant for Floor {
    type Conn = FakeConn;
    type Guard<'a> = FloorGuard<'a>;

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await
    }

    fn conn<'g>(guard: &'g mut Self::Guard<'_>) -> &'g mut FakeConn {
        guard.conn()
    }
}
