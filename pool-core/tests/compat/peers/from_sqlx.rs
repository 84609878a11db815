//! sqlx's pool tests (`tests/any/pool.rs`, the pool tests of
//! `tests/postgres/postgres.rs`, and `sqlx-core/src/pool`), named as there.
//! The two hook scenarios run twice: on the mock and the paused clock,
//! where every step is exact, and (in pool-sqlx's tests) with
//! `SqlxManager<PgConnection>` against PostgreSQL, as sqlx runs them. A sqlx pool built with
//! `connect_lazy_with` is `Pool::new_lazy` here.

use std::time::Duration;

use pool_core::{async_trait, ConnectionInfo, Hooks, Pool};
use tokio::time::sleep;

use crate::peers::peer::{checked, Peer};
use crate::support::sqlx_rules::{maintained, renewed, Seen, CALLBACK_PATTERN};
use crate::support::{eventually, Conn, MockError};

/// sqlx's `test_pool_callbacks` rules on the mock: each connection counts
/// its `before_acquire` and `after_release` calls (in `uses`, as 1s and
/// 2s); an even connection is turned down at its third `before_acquire`,
/// an odd one at its fourth `after_release`.
#[derive(Debug, Default)]
struct Counting;

fn calls(conn: &Conn, kind: u64) -> usize {
    conn.uses.iter().filter(|&&u| u == kind).count()
}

#[async_trait]
impl Hooks<Peer> for Counting {
    async fn before_acquire(&self, conn: &mut Conn, _: ConnectionInfo) -> Result<bool, MockError> {
        conn.uses.push(1);
        Ok(conn.id % 2 == 1 || calls(conn, 1) < 3)
    }
    async fn after_release(&self, conn: &mut Conn, _: ConnectionInfo) -> Result<bool, MockError> {
        conn.uses.push(2);
        Ok(conn.id.is_multiple_of(2) || calls(conn, 2) < 4)
    }
}

#[tokio::test(start_paused = true)]
async fn test_pool_callbacks() {
    let pool = Pool::new_lazy_with_hooks(Peer::default(), checked(1).build().unwrap(), Counting);
    for (i, expected) in CALLBACK_PATTERN.into_iter().enumerate() {
        let conn = pool.get().await.unwrap();
        let seen = (conn.id, calls(&conn, 1), calls(&conn, 2));
        assert_eq!(seen, expected, "checkout {i}");
    }
}

/// Records what `before_acquire` saw.
#[derive(Debug, Default, Clone)]
struct Recording(Seen);

#[async_trait]
impl Hooks<Peer> for Recording {
    async fn before_acquire(&self, _: &mut Conn, info: ConnectionInfo) -> Result<bool, MockError> {
        *self.0.lock().unwrap() = Some(info);
        Ok(true)
    }
    fn uses_after_release(&self) -> bool {
        false
    }
}

/// Connections past `max_lifetime` are replaced in the background up to
/// `min_size`, and a connection taken from idle goes through
/// `before_acquire` even when the pool opened it moments ago.
#[tokio::test(start_paused = true)]
async fn test_connection_maintenance() {
    let seen = Recording::default();
    let peer = Peer::default();
    let pool = Pool::new_lazy_with_hooks(
        peer.clone(),
        maintained(checked(10)).build().unwrap(),
        seen.clone(),
    );
    let mut five = Vec::new();
    for _ in 0..5 {
        five.push(pool.get().await.unwrap());
    }
    assert_eq!((pool.state().total, pool.state().idle), (5, 0));
    drop(five);
    assert_eq!((pool.state().total, pool.state().idle), (5, 5));

    sleep(Duration::from_millis(2_500)).await;
    eventually("a renewed idle set", || renewed(&pool)).await;
    assert!(peer.closed() >= 5, "the first five were retired");
    let total = pool.state().total;
    assert!((2..=3).contains(&total), "{:?}", pool.state());
    for _ in 0..2 {
        drop(pool.get().await.unwrap());
        let info = seen
            .0
            .lock()
            .unwrap()
            .take()
            .expect("before_acquire ran on the connection taken from idle");
        assert!(info.age < Duration::from_secs(2), "a new one: {info:?}");
    }
}

/// `Pool` is `Send + Sync + Clone` (sqlx's `assert_pool_traits`).
#[test]
fn assert_pool_traits() {
    fn send_sync_clone<T: Send + Sync + Clone>() {}
    send_sync_clone::<Pool<Peer>>();
}
