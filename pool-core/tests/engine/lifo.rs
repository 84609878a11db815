//! The idle set hands out the most recently returned connection first.

use crate::support;
use crate::support::config;

#[tokio::test]
async fn sequential_load_reuses_one_hot_connection() {
    let (mock, pool) = support::pool(config(5).min_size(5)).await;
    assert_eq!(pool.metrics().idle, 5);
    let first = pool.get().await.unwrap().id;
    for _ in 0..200 {
        let conn = pool.get().await.unwrap();
        assert_eq!(
            conn.id, first,
            "a sequential load must keep using the same connection"
        );
    }
    assert_eq!(mock.script.connects(), 5);
}

#[tokio::test]
async fn last_returned_is_first_out() {
    let (_, pool) = support::pool(config(3).min_size(3)).await;
    let a = pool.get().await.unwrap();
    let b = pool.get().await.unwrap();
    let c = pool.get().await.unwrap();
    let (ia, ib, ic) = (a.id, b.id, c.id);
    drop(b);
    drop(a);
    drop(c);
    assert_eq!(pool.get().await.unwrap().id, ic);
    let x = pool.get().await.unwrap();
    let y = pool.get().await.unwrap();
    let z = pool.get().await.unwrap();
    assert_eq!([x.id, y.id, z.id], [ic, ia, ib]);
}

#[tokio::test]
async fn try_get_pops_idle_and_never_connects() {
    let (mock, pool) = support::lazy(config(2));
    assert!(pool.try_get().is_none());
    assert_eq!(mock.script.connects(), 0);
    let conn = pool.get().await.unwrap();
    let id = conn.id;
    assert!(pool.try_get().is_none(), "the only connection is in use");
    drop(conn);
    assert_eq!(pool.try_get().map(|c| c.id), Some(id));
}
