//! `discard` closes the connection; `detach` takes it out of the pool and
//! frees its slot.

mod support;

use pool_core::Pool;
use support::{config, Mock};

#[tokio::test]
async fn discard_closes_and_frees_the_slot() {
    let mock = Mock::default();
    let pool = Pool::new(mock.clone(), config(1).build().unwrap())
        .await
        .unwrap();
    let conn = pool.get().await.unwrap();
    let id = conn.id;
    conn.discard();
    assert_eq!(mock.script.alive(), 0);
    let m = pool.metrics();
    assert_eq!((m.total, m.in_use, m.evictions.closed), (0, 0, 1));
    assert_ne!(
        pool.get().await.unwrap().id,
        id,
        "a new connection is opened"
    );
}

#[tokio::test]
async fn detach_takes_the_connection_and_frees_the_slot() {
    let mock = Mock::default();
    let pool = Pool::new(mock.clone(), config(1).build().unwrap())
        .await
        .unwrap();
    let conn = pool.get().await.unwrap();
    let raw = conn.detach();
    assert_eq!(mock.script.alive(), 1, "the detached connection stays open");
    assert_eq!(pool.metrics().total, 0);
    // The slot is free: another connection can be had at max_size 1.
    let other = pool.get().await.unwrap();
    assert_ne!(other.id, raw.id);
    drop(raw);
    assert_eq!(mock.script.alive(), 1);
}

#[tokio::test]
async fn discard_serves_a_waiter_with_a_new_connection() {
    let pool = Pool::new(Mock::default(), config(1).build().unwrap())
        .await
        .unwrap();
    let conn = pool.get().await.unwrap();
    let old = conn.id;
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.get().await.unwrap().id })
    };
    support::until(|| pool.metrics().waiting > 0).await;
    conn.discard();
    assert_ne!(waiter.await.unwrap(), old);
}
