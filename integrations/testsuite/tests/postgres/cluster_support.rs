//! The own-cluster test helper (`cluster/mod.rs`) does what later fault
//! tests rely on: a killed server drops its sessions, a restarted one
//! accepts new ones on the same port, and passwords are checked over TCP.
#![cfg(feature = "tokio-postgres")]

use crate::support::cluster;
use std::time::{Duration, Instant};

use tokio_postgres::NoTls;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs initdb: install the PostgreSQL server or set PG_BIN_DIR, and run with --ignored"]
async fn kill_9_then_restart_on_the_same_port() {
    let cluster = cluster::Cluster::spawn().await;
    let _admin = cluster.admin_with_login("app", "pw").await;

    // TCP needs the password.
    let mut no_password = cluster.tcp_config("app", "postgres");
    no_password.connect_timeout(Duration::from_secs(5));
    assert!(
        no_password.connect(NoTls).await.is_err(),
        "TCP without a password"
    );
    let mut tcp = no_password.clone();
    tcp.password("pw");
    let (client, connection) = tcp.connect(NoTls).await.expect("TCP with the password");
    tokio::spawn(connection);
    client.simple_query("SELECT 1").await.expect("query");

    let pid = cluster.postmaster_pid().expect("postmaster.pid");
    tokio::task::block_in_place(|| cluster.kill9());
    assert!(!alive(pid), "the postmaster is gone after kill -9");

    // The session is gone: queries fail within a bounded time.
    let deadline = Instant::now() + Duration::from_secs(10);
    while client.simple_query("SELECT 1").await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "the backend outlived the kill -9"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    tokio::task::block_in_place(|| cluster.restart());
    let (client, connection) = tcp.connect(NoTls).await.expect("connect after restart");
    tokio::spawn(connection);
    client
        .simple_query("SELECT 1")
        .await
        .expect("query after restart");
}

fn alive(pid: u32) -> bool {
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
