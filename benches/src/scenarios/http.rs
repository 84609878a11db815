//! S7: a small axum service whose one handler runs `SELECT 1` through the
//! pool, built once per pool and loaded by `wrk` on 127.0.0.1 for a bounded
//! time at a few connection counts; requests per second and p99.
//!
//! The server runs on a 2-worker runtime; `wrk` (one thread) shares the
//! same two cores, as a load generator on the same box does, unless
//! [`HttpSettings::wrk_cpus`] gives it cores of its own (`taskset`), with
//! the service and the database kept off them by their own launchers
//! (`scripts/s7_wrk_own_core.sh`).

use std::process::Stdio;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use serde::Serialize;

use crate::contestant::Contestant;
use crate::placement;
use crate::pools::pg::{DbSpec, Select1};
use crate::runner::multi_thread;
use crate::scenarios::db::DbKind;
use crate::scenarios::spike::prewarm;
use crate::stats::median;
use crate::with_db_pool;

/// Counts and bounds of S7.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// `postgres://…`.
    pub url: String,
    /// Pool size.
    pub pool_size: u32,
    /// `wrk -c` values.
    pub connections: Vec<u32>,
    /// `wrk -d`, whole seconds.
    pub seconds: u32,
    /// Rounds over all pools (medians reported).
    pub repeats: usize,
    /// The cores `wrk` runs on (a `taskset -c` list such as `1`), or
    /// `None` to leave it wherever the OS puts it.
    pub wrk_cpus: Option<String>,
}

/// One pool's service at one connection count.
#[derive(Debug, Clone, Serialize)]
pub struct HttpRow {
    /// Driver family.
    pub family: String,
    /// Contestant.
    pub pool: String,
    /// wrk connections.
    pub connections: u32,
    /// Requests per second (wrk's figure).
    pub rps: f64,
    /// p50 / p99 latency in µs (wrk's `--latency` figures).
    pub latency_us: [f64; 2],
    /// Non-2xx responses and socket errors wrk counted.
    pub errors: u64,
    /// What went wrong, if anything.
    pub note: Option<String>,
    /// Served with no errors.
    pub valid: bool,
    /// Median requests per second of the rounds that stayed on the near
    /// placement of the cores throughout (see `placement.rs`).
    pub near: Option<f64>,
    /// The same for the far placement.
    pub far: Option<f64>,
    /// Requests per second of every round that finished, in round order
    /// (the median above is over these).
    pub rounds: Vec<f64>,
}

async fn handle<P>(State(pool): State<P>) -> (StatusCode, &'static str)
where
    P: Contestant,
    P::Conn: Select1,
{
    let Ok(mut guard) = pool.get().await else {
        return (StatusCode::SERVICE_UNAVAILABLE, "no connection");
    };
    match P::conn(&mut guard).select1().await {
        Ok(()) => (StatusCode::OK, "1"),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "query failed"),
    }
}

/// The service: `GET /` runs `SELECT 1` through `pool` and answers `1`
/// (503 when no connection came, 500 when the query failed).
fn router<P>(pool: P) -> Router
where
    P: Contestant,
    P::Conn: Select1,
{
    Router::new().route("/", get(handle::<P>)).with_state(pool)
}

/// The `router` served on a port of 127.0.0.1 of its own, until
/// [`stop`](Self::stop).
#[derive(Debug)]
pub struct Service {
    /// Where it listens.
    pub port: u16,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Service {
    /// Binds a free port and starts serving `pool`'s service on the
    /// current runtime.
    ///
    /// # Errors
    ///
    /// The port could not be bound.
    pub async fn start<P>(pool: P) -> Result<Self, String>
    where
        P: Contestant,
        P::Conn: Select1,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("bind: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("bind: {e}"))?
            .port();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            axum::serve(listener, router(pool))
                .with_graceful_shutdown(async {
                    let _ = stop_rx.await;
                })
                .await
        });
        Ok(Self { port, stop, server })
    }

    /// Stops serving: lets the requests in flight finish, waiting up to
    /// 5 s (and saying so on stderr when that was not enough).
    pub async fn stop(self) {
        let _ = self.stop.send(());
        if tokio::time::timeout(Duration::from_secs(5), self.server)
            .await
            .is_err()
        {
            eprintln!("S7: the service did not stop within 5 s");
        }
    }
}

/// Whether `wrk` is on the PATH.
pub fn wrk_available() -> bool {
    std::process::Command::new("wrk")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// A load of exactly `n` requests (`GET /`) over `conns` keep-alive
/// connections to `127.0.0.1:port`, each connection waiting for its
/// answer before it sends the next; for counts per request, where wrk's
/// load by time cannot say how many were served (`s7_cycles`).
///
/// # Errors
///
/// The first failure: a connection refused or closed, an answer that is
/// not a 200 or cannot be read, or fewer requests than connections.
///
/// # Cancel safety
///
/// Dropping the future closes the connections; the requests sent so far
/// may or may not have been answered.
pub async fn fixed_requests(port: u16, n: u64, conns: u64) -> Result<(), String> {
    if conns == 0 || n < conns {
        return Err(format!(
            "{n} requests cannot be split over {conns} connections"
        ));
    }
    let mut set = tokio::task::JoinSet::new();
    for i in 0..conns {
        // The first `n % conns` connections send one more.
        let count = n / conns + u64::from(i < n % conns);
        set.spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .map_err(|e| format!("connect: {e}"))?;
            stream.set_nodelay(true).map_err(|e| e.to_string())?;
            requests(&mut stream, count).await
        });
    }
    let mut first_error = None;
    while let Some(done) = set.join_next().await {
        if let Err(e) = done.map_err(|e| e.to_string()).and_then(|r| r) {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// `count` requests in turn over one connection.
async fn requests<S>(stream: &mut S, count: u64) -> Result<(), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::AsyncWriteExt;
    const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n";
    let mut buf = Vec::with_capacity(512);
    for _ in 0..count {
        stream
            .write_all(REQUEST)
            .await
            .map_err(|e| format!("write: {e}"))?;
        read_response(stream, &mut buf).await?;
    }
    Ok(())
}

/// Reads one response whole (head, then `content-length` bytes of body)
/// and checks it is a 200; bytes after it stay in `buf`.
async fn read_response<S>(stream: &mut S, buf: &mut Vec<u8>) -> Result<(), String>
where
    S: tokio::io::AsyncRead + Unpin,
{
    use tokio::io::AsyncReadExt;
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buf[..end]).map_err(|e| format!("head: {e}"))?;
            let status = head.lines().next().unwrap_or("");
            if !status.starts_with("HTTP/1.1 200") {
                return Err(format!("answer: {status}"));
            }
            let length = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .ok_or("answer without a content-length")?;
            let whole = end + 4 + length;
            if buf.len() >= whole {
                buf.drain(..whole);
                return Ok(());
            }
        }
        let mut chunk = [0u8; 512];
        let read = stream
            .read(&mut chunk)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if read == 0 {
            return Err("the service closed the connection".to_owned());
        }
        buf.extend_from_slice(&chunk[..read]);
    }
}

/// What wrk reports for one load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WrkFigures {
    /// Requests per second.
    pub rps: f64,
    /// Latency p50, µs.
    pub p50_us: f64,
    /// Latency p99, µs.
    pub p99_us: f64,
    /// Non-2xx responses plus socket errors.
    pub errors: u64,
    /// The cores' placement before and after the load, round trip in ns
    /// (see `placement.rs`); NaN when not probed.
    pub placement_ns: [f64; 2],
}

/// Parses wrk's `--latency` output.
pub fn parse_wrk(out: &str) -> Option<WrkFigures> {
    let mut rps = None;
    let (mut p50, mut p99, mut errors) = (None, None, 0u64);
    for line in out.lines().map(str::trim) {
        if let Some(v) = line.strip_prefix("Requests/sec:") {
            rps = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("50%") {
            p50 = parse_duration_us(v.trim());
        } else if let Some(v) = line.strip_prefix("99%") {
            p99 = parse_duration_us(v.trim());
        } else if let Some(v) = line.strip_prefix("Non-2xx or 3xx responses:") {
            errors += v.trim().parse::<u64>().unwrap_or(1);
        } else if let Some(v) = line.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 0"
            errors += v
                .split(',')
                .filter_map(|part| part.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
        }
    }
    Some(WrkFigures {
        rps: rps?,
        p50_us: p50?,
        p99_us: p99?,
        errors,
        placement_ns: [f64::NAN; 2],
    })
}

/// "1.23ms" / "850.00us" / "2.01s" → µs.
fn parse_duration_us(v: &str) -> Option<f64> {
    let split = v.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = v.split_at(split);
    let n: f64 = num.parse().ok()?;
    Some(match unit {
        "us" => n,
        "ms" => n * 1e3,
        "s" => n * 1e6,
        "m" => n * 60e6,
        _ => return None,
    })
}

async fn load(
    port: u16,
    connections: u32,
    seconds: u32,
    cpus: Option<&str>,
) -> Result<WrkFigures, String> {
    let url = format!("http://127.0.0.1:{port}/");
    let mut command = match cpus {
        Some(list) => {
            let mut c = tokio::process::Command::new("taskset");
            c.args(["-c", list, "wrk"]);
            c
        }
        None => tokio::process::Command::new("wrk"),
    };
    let child = command
        .args(["-t1", "--latency", "--timeout", "5s"])
        .arg(format!("-c{connections}"))
        .arg(format!("-d{seconds}s"))
        .arg(&url)
        .kill_on_drop(true)
        .output();
    let limit = Duration::from_secs(u64::from(seconds) + 15);
    let out = tokio::time::timeout(limit, child)
        .await
        .map_err(|_| "wrk did not finish in time".to_owned())?
        .map_err(|e| format!("wrk: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "wrk failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    parse_wrk(&text).ok_or_else(|| format!("unreadable wrk output: {text}"))
}

/// The cores' placement, probed off the runtime's workers.
async fn probe() -> f64 {
    tokio::task::spawn_blocking(placement::probe)
        .await
        .unwrap_or(f64::NAN)
}

async fn serve_and_load<P>(pool: P, s: &HttpSettings) -> Loaded
where
    P: Contestant,
    P::Conn: Select1,
{
    if let Err(e) = prewarm(&pool, s.pool_size).await {
        return vec![(0, Err(format!("warm-up: {e}")))];
    }
    let service = match Service::start(pool.clone()).await {
        Ok(s) => s,
        Err(e) => return vec![(0, Err(e))],
    };
    let port = service.port;
    let mut results = Vec::new();
    for &c in &s.connections {
        let before = probe().await;
        let loaded = load(port, c, s.seconds, s.wrk_cpus.as_deref()).await;
        let after = probe().await;
        results.push((
            c,
            loaded.map(|f| WrkFigures {
                placement_ns: [before, after],
                ..f
            }),
        ));
    }
    service.stop().await;
    pool.shutdown().await;
    results
}

/// Per connection count, wrk's figures or what went wrong; connection count
/// 0 stands for every count (the service could not start).
type Loaded = Vec<(u32, Result<WrkFigures, String>)>;

/// One service per pool: build, serve, load at every connection count.
fn run_once(kind: DbKind, s: &HttpSettings) -> Loaded {
    let spec = DbSpec {
        url: s.url.clone(),
        max_size: s.pool_size,
        validate: false,
        acquire_timeout: Duration::from_secs(30),
    };
    let rt = multi_thread(2);
    let got =
        rt.block_on(async { with_db_pool!(kind, &spec, |pool| serve_and_load(pool, s).await) });
    rt.shutdown_timeout(Duration::from_secs(2));
    got.unwrap_or_else(|e| s.connections.iter().map(|&c| (c, Err(e.clone()))).collect())
}

/// S7 for every contestant in `kinds`: `repeats` rounds, interleaved across
/// pools; medians of rps and latency, errors summed.
pub fn run(kinds: &[DbKind], s: &HttpSettings) -> Vec<HttpRow> {
    let mut runs: Vec<Vec<Loaded>> = vec![Vec::new(); kinds.len()];
    for _ in 0..s.repeats.max(1) {
        for (i, &kind) in kinds.iter().enumerate() {
            runs[i].push(run_once(kind, s));
        }
    }
    let mut rows = Vec::new();
    for (&kind, rounds) in kinds.iter().zip(runs) {
        for &connections in &s.connections {
            let got: Vec<&Result<WrkFigures, String>> = rounds
                .iter()
                .flat_map(|round| round.iter().filter(|(c, _)| *c == connections || *c == 0))
                .map(|(_, r)| r)
                .collect();
            let ok: Vec<&WrkFigures> = got.iter().filter_map(|r| r.as_ref().ok()).collect();
            let note = got.iter().find_map(|r| r.as_ref().err().cloned());
            let pick =
                |f: fn(&WrkFigures) -> f64| median(&ok.iter().map(|x| f(x)).collect::<Vec<_>>());
            let errors = ok.iter().map(|x| x.errors).sum::<u64>() + (got.len() - ok.len()) as u64;
            let on = |far: bool| {
                let rps: Vec<f64> = ok
                    .iter()
                    .filter(|x| placement::stayed_far(x.placement_ns) == Some(far))
                    .map(|x| x.rps)
                    .collect();
                (!rps.is_empty()).then(|| median(&rps))
            };
            rows.push(HttpRow {
                family: kind.family().to_owned(),
                pool: kind.label().to_owned(),
                connections,
                rps: if ok.is_empty() { 0.0 } else { pick(|x| x.rps) },
                latency_us: if ok.is_empty() {
                    [0.0; 2]
                } else {
                    [pick(|x| x.p50_us), pick(|x| x.p99_us)]
                },
                errors,
                valid: errors == 0 && !ok.is_empty(),
                note,
                near: on(false),
                far: on(true),
                rounds: ok.iter().map(|x| x.rps).collect(),
            });
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two answers in one write, then one in three pieces, are read one
    /// by one; a 503 is an error naming its status line, and a closed
    /// connection one saying so.
    #[tokio::test]
    async fn fixed_requests_read_whole_answers() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        const OK: &str =
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nContent-Length: 1\r\n\r\n1";
        let (mut client, mut server) = tokio::io::duplex(4096);
        let serve = tokio::spawn(async move {
            let (mut seen, mut answered) = (Vec::new(), 0);
            let mut got = [0u8; 256];
            while answered < 4 {
                let n = server.read(&mut got).await.expect("read");
                if n == 0 {
                    return;
                }
                seen.extend_from_slice(&got[..n]);
                let asked = seen.windows(4).filter(|w| w == b"\r\n\r\n").count();
                while answered < asked {
                    answered += 1;
                    match answered {
                        // The first request gets the first two answers.
                        1 => server.write_all(format!("{OK}{OK}").as_bytes()).await,
                        2 => Ok(()),
                        3 => {
                            for part in [&OK[..10], &OK[10..40], &OK[40..]] {
                                server.write_all(part.as_bytes()).await.expect("write");
                                tokio::task::yield_now().await;
                            }
                            Ok(())
                        }
                        _ => server
                            .write_all(
                                b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n",
                            )
                            .await,
                    }
                    .expect("write");
                }
            }
        });
        // An answer lost from the buffer would leave the client waiting.
        tokio::time::timeout(Duration::from_secs(5), requests(&mut client, 3))
            .await
            .expect("three answers in time")
            .expect("three whole answers");
        let err = requests(&mut client, 1).await.expect_err("a 503");
        assert!(err.contains("503"), "{err}");
        serve.await.expect("server");
        let err = requests(&mut client, 1).await.expect_err("closed");
        assert!(err.contains("closed") || err.contains("write"), "{err}");
    }

    #[tokio::test]
    async fn fixed_requests_refuse_fewer_requests_than_connections() {
        let err = fixed_requests(1, 3, 4).await.expect_err("3 over 4");
        assert!(err.contains("cannot be split"), "{err}");
    }

    #[test]
    fn reads_wrk_output() {
        let out = "Running 1s test @ http://127.0.0.1:1/\n  Latency Distribution\n     50%  410.00us\n     75%  1.00ms\n     90%    1.20ms\n     99%    2.50ms\n  1000 requests in 1.00s, 100KB read\n  Socket errors: connect 0, read 2, write 0, timeout 1\nRequests/sec:   9876.54\n";
        let w = parse_wrk(out).expect("parses");
        assert_eq!(w.rps, 9876.54);
        assert_eq!(w.p50_us, 410.0);
        assert_eq!(w.p99_us, 2500.0);
        assert_eq!(w.errors, 3);
    }
}
