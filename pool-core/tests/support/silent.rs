//! The two servers a bounded start-up is tested against, on 127.0.0.1: a
//! listener that accepts every connection and never answers
//! ([`Silent`]), and a port that refuses ([`refused_port`]).

use std::net::SocketAddr;

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
