//! The no-op contestants that are not peers: ours over [`FakeManager`],
//! validation off, a 30 s acquire timeout, and the floor. The peers over the
//! same manager are in `pools::peers` (feature `peers`).

use crate::contestant::Contestant;
use crate::fake::{FakeConn, FakeManager, FakeSpec};
use crate::pools::floor::{FloorGuard, FloorPool};

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
