//! Smoke test of the axum example's service against `DATABASE_URL`: starts
//! it on an ephemeral port, hits every route (the request-scoped
//! transaction committing on 201 and rolling back on 422) and the metrics
//! listener, stops it and drops its table, all within a time bound.

use std::time::Duration;

use crate::axum_service;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Sends one HTTP/1.1 request with `Connection: close` and returns the
/// status code and the body.
async fn request(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await.unwrap();
    let status = reply
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP reply: {reply:?}"));
    let body = reply
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// A port nothing listens on now, for the exporter's listener (which binds
/// by itself and does not say which port it got).
async fn free_port() -> std::net::SocketAddr {
    let probe = TcpListener::bind("127.0.0.1:0").await.unwrap();
    probe.local_addr().unwrap()
}

/// Polls `addr` until the exporter's listener answers (bounded).
async fn metrics_text(addr: std::net::SocketAddr) -> String {
    for _ in 0..100 {
        if TcpStream::connect(addr).await.is_ok() {
            let (status, body) = request(addr, "GET", "/metrics", "").await;
            assert_eq!(status, 200);
            return body;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the metrics listener did not come up on {addr}");
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_answers_every_route_and_serves_metrics() {
    let url = match std::env::var("DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!("DATABASE_URL is not set: this test needs PostgreSQL (see scripts/test.sh)"),
    };
    let _cleanup = super::Cleanup::new(
        &url,
        format!("DROP TABLE IF EXISTS {}", axum_service::notes_table()),
    );
    tokio::time::timeout(Duration::from_secs(60), async {
        let metrics_addr = free_port().await;
        axum_service::install_metrics(metrics_addr).unwrap();
        let pool = axum_service::connect(&url).await.unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(axum_service::serve(listener, pool.clone(), async {
            let _ = stopped.await;
        }));

        assert_eq!(
            request(addr, "GET", "/health", "").await,
            (200, "ok".to_owned())
        );

        let (status, added) = request(addr, "POST", "/notes", "hello from the smoke test").await;
        assert_eq!(status, 200, "{added}");
        let added: serde_json::Value = serde_json::from_str(&added).unwrap();
        let id = added["id"].as_i64().expect("an id");
        assert!(added["notes"].as_i64().expect("a count") >= 1);

        let (status, body) = request(addr, "GET", &format!("/notes/{id}"), "").await;
        assert_eq!((status, body.as_str()), (200, "hello from the smoke test"));
        assert_eq!(request(addr, "GET", "/notes/-1", "").await.0, 404);

        // The request-scoped transaction: a 201 commits, a 422 rolls back.
        let (status, kept) = request(addr, "POST", "/scoped/notes", "kept by its commit").await;
        assert_eq!(status, 201, "{kept}");
        let kept: i64 = kept.trim().parse().expect("the new note's id");
        let (status, body) = request(addr, "GET", &format!("/notes/{kept}"), "").await;
        assert_eq!((status, body.as_str()), (200, "kept by its commit"));
        let (status, refused) = request(addr, "POST", "/scoped/notes", " ").await;
        assert_eq!(status, 422, "{refused}");
        let refused: i64 = refused
            .split(' ')
            .nth(1)
            .and_then(|id| id.parse().ok())
            .unwrap_or_else(|| panic!("the refused note's id in {refused:?}"));
        assert_eq!(
            request(addr, "GET", &format!("/notes/{refused}"), "")
                .await
                .0,
            404,
            "the refused request's insert was rolled back"
        );

        let (status, state) = request(addr, "GET", "/pool", "").await;
        assert_eq!(status, 200);
        assert!(state.contains("of 8 open"), "{state}");

        let metrics = metrics_text(metrics_addr).await;
        assert!(
            metrics.contains("axum-service"),
            "the pool's series carry its name: {metrics}"
        );

        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
        axum_service::drop_notes(&pool).await.unwrap();
        let left: Option<String> = sqlx::query_scalar("SELECT to_regclass($1)::text")
            .bind(axum_service::notes_table())
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(left, None, "the notes table is gone");
        pool.close().await;
    })
    .await
    .expect("the smoke test finished within its time bound");
}

/// Set in the child process of [`sigterm_stops_the_service_and_drops_its_table`].
const SIGTERM_CHILD: &str = "POOL_EXAMPLES_SIGTERM_CHILD";

/// The example stopped as a service manager, a container runtime or `kill`
/// stops it (SIGTERM): it shuts down as on Ctrl-C and drops its notes
/// table. The test runs itself again in a child process (this test binary,
/// this test alone), which runs [`axum_service::run`] as the example's
/// `main` does; the parent sends it SIGTERM once it listens, and checks
/// that it exited by itself and that its table is gone.
#[cfg(unix)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_service_and_drops_its_table() {
    let url = match std::env::var("DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!("DATABASE_URL is not set: this test needs PostgreSQL (see scripts/test.sh)"),
    };
    if std::env::var_os(SIGTERM_CHILD).is_some() {
        let stop = axum_service::stop_signal().unwrap();
        let any_port = "127.0.0.1:0".parse().unwrap();
        axum_service::run(&url, any_port, free_port().await, stop)
            .await
            .unwrap();
        return;
    }

    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "smoke::axum_service::sigterm_stops_the_service_and_drops_its_table",
            "--exact",
            "--include-ignored",
            "--nocapture",
        ])
        .env(SIGTERM_CHILD, "1")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().expect("the child runs");
    // Its table, dropped here too whatever happens to the child.
    let table = format!("axum_notes_{pid}");
    let _cleanup = super::Cleanup::new(&url, format!("DROP TABLE IF EXISTS {table}"));
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.starts_with("listening on http://") {
                return;
            }
        }
        panic!("the child ended before it listened");
    })
    .await
    .expect("the child listened within 60 s");

    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -TERM {pid}");
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the child stopped within 30 s of SIGTERM")
        .unwrap();
    assert!(
        status.success(),
        "the child shut down by itself on SIGTERM: {status:?}"
    );

    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    let left: Option<String> = sqlx::query_scalar("SELECT to_regclass($1)::text")
        .bind(&table)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, None, "the child dropped {table}");
}
