//! A panic in user code while holding a connection loses no slot.

mod support;

use pool_core::Pool;
use support::{config, Mock};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panic_while_holding_returns_the_slot() {
    let pool = Pool::new(Mock::default(), config(2).build().unwrap())
        .await
        .unwrap();
    for _ in 0..10 {
        let p = pool.clone();
        let r = tokio::spawn(async move {
            let _a = p.get().await.unwrap();
            let _b = p.get().await.unwrap();
            panic!("user code failed");
        })
        .await;
        assert!(r.unwrap_err().is_panic());
        assert_eq!(pool.metrics().in_use, 0);
    }
    let a = pool.get().await.unwrap();
    let b = pool.get().await.unwrap();
    assert_ne!(a.id, b.id);
    assert_eq!(pool.metrics().total, 2);
}

#[test]
fn panic_on_a_plain_thread_returns_the_slot() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let pool = rt
        .block_on(Pool::new(Mock::default(), config(1).build().unwrap()))
        .unwrap();
    let conn = rt.block_on(pool.get()).unwrap();
    // Dropped by unwinding on another thread, outside the runtime.
    let r = std::thread::spawn(move || {
        let _conn = conn;
        panic!("boom");
    })
    .join();
    assert!(r.is_err());
    assert_eq!(pool.metrics().in_use, 0);
    assert_eq!(pool.metrics().idle, 1);
}
