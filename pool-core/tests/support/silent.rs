//! The two servers a bounded start-up is tested against, on 127.0.0.1: a
//! listener that accepts every connection and never answers
//! ([`Silent`]), and a port that refuses ([`refused_port`]).

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use pool_core::{PoolConfig, PoolError, TimeoutPhase};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// How many connections a [`Silent`] listener accepts and holds open; it
/// stops accepting after that (later connects wait in the backlog, still
/// unanswered).
const HELD: usize = 64;

/// A listener that accepts and holds connections without ever writing a
/// byte: a server that hangs after the TCP handshake. Stops when dropped.
pub struct Silent {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Silent {
    /// Starts listening on a free port of 127.0.0.1.
    ///
    /// # Panics
    ///
    /// When no port can be bound.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a free port on 127.0.0.1");
        let addr = listener.local_addr().expect("the bound address");
        let task = tokio::spawn(async move {
            let mut held = Vec::with_capacity(HELD);
            for _ in 0..HELD {
                match listener.accept().await {
                    Ok((socket, _)) => held.push(socket),
                    Err(_) => break,
                }
            }
            // Keeps the sockets (and the listener) open until aborted.
            std::future::pending::<()>().await;
            drop(held);
        });
        Self { addr, task }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A port on 127.0.0.1 that refuses connections: bound to take a free
/// number, then closed.
///
/// # Panics
///
/// When no port can be bound.
pub fn refused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("the bound address").port()
}

/// The limit each start-up test gives the pool (`acquire_timeout`).
pub const LIMIT: Duration = Duration::from_secs(1);
/// What a loaded machine may add to it (a bound, not a measurement).
pub const MARGIN: Duration = Duration::from_secs(2);

/// Two connections opened by `Pool::new`, within [`LIMIT`].
pub fn start_up_config() -> PoolConfig {
    PoolConfig::builder()
        .max_size(2)
        .min_size(2)
        .acquire_timeout(LIMIT)
        .build()
        .expect("config")
}

/// `Pool::new` against a [`Silent`] server, built by `build` from its
/// port: it fails within [`LIMIT`] (plus [`MARGIN`]) with a connect
/// timeout whose last error names `127.0.0.1:PORT` and the limit it hit,
/// with nothing counted as open.
pub async fn assert_start_up_is_bounded<P, E, F, Fut>(build: F)
where
    F: FnOnce(u16) -> Fut,
    Fut: Future<Output = Result<P, PoolError<E>>>,
    E: fmt::Debug + fmt::Display,
{
    let server = Silent::start().await;
    let started = Instant::now();
    let Err(err) = build(server.port()).await else {
        panic!("nothing answers, yet the pool was built");
    };
    let took = started.elapsed();
    assert!(took <= LIMIT + MARGIN, "took {took:?}: {err}");
    assert!(
        matches!(
            err,
            PoolError::Timeout {
                phase: TimeoutPhase::Connect,
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    let expected = format!(
        "opening a connection (0 of 2 open: 0 idle, 0 in use; 0 opening; 0 waiting); \
         last error: connect to 127.0.0.1:{} did not finish within ",
        server.port()
    );
    assert!(
        text.starts_with("timed out after ") && text.contains(&expected),
        "{text}"
    );
}
