//! A TCP proxy on 127.0.0.1 in front of one server, that a test freezes
//! and thaws: the host that stops answering without closing anything (a
//! partition, a hung server, a port that accepts and never answers).
//!
//! * Forwarding (at the start, and after [`Proxy::thaw`]): every new
//!   connection is forwarded to the server, both ways.
//! * [`Proxy::freeze`]: every connection open now stops forwarding for good
//!   (what the client sends is read and dropped, nothing comes back, and
//!   neither socket is closed), and every connection accepted while frozen
//!   is never answered, not even after a thaw. The client's writes succeed;
//!   no answer ever comes.
//! * [`Proxy::thaw`]: new connections are forwarded again; the frozen ones
//!   stay frozen, as connections a recovered server has lost.
//!
//! Dropping the proxy closes everything.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

#[derive(Debug, Clone, Copy, Default)]
struct State {
    /// Bumped by each freeze: a connection forwards only while the epoch
    /// it was opened in lasts.
    epoch: u64,
    frozen: bool,
    /// The proxy was dropped: every task ends.
    stopped: bool,
}

/// A running proxy.
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    state: watch::Sender<State>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free 127.0.0.1 port and forwards to the server on
    /// `127.0.0.1:upstream`.
    pub async fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let state = watch::Sender::new(State::default());
        let rx = state.subscribe();
        let accept = tokio::spawn(async move {
            // Bounded by the proxy's life: aborted on drop.
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(serve(client, upstream, rx.clone()));
            }
        });
        Proxy {
            port,
            state,
            accept,
        }
    }

    /// The port clients connect to, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Freezes every open connection for good, and answers no new one
    /// until [`thaw`](Self::thaw).
    pub fn freeze(&self) {
        self.state.send_modify(|s| {
            s.epoch += 1;
            s.frozen = true;
        });
    }

    /// Forwards new connections again.
    pub fn thaw(&self) {
        self.state.send_modify(|s| s.frozen = false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.state.send_modify(|s| s.stopped = true);
    }
}

/// One accepted connection: forwarded while its epoch lasts, then held.
async fn serve(mut client: TcpStream, upstream: u16, mut state: watch::Receiver<State>) {
    let at_accept = *state.borrow_and_update();
    if at_accept.frozen {
        hold(client, None, state).await;
        return;
    }
    let connect = TcpStream::connect(("127.0.0.1", upstream));
    let Ok(Ok(mut server)) = tokio::time::timeout(Duration::from_secs(5), connect).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let mut up = vec![0u8; 16 * 1024];
    let mut down = vec![0u8; 16 * 1024];
    loop {
        let now = *state.borrow_and_update();
        if now.stopped {
            return;
        }
        if now.epoch != at_accept.epoch {
            break;
        }
        tokio::select! {
            read = client.read(&mut up) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if server.write_all(&up[..n]).await.is_err() {
                        return;
                    }
                }
            },
            read = server.read(&mut down) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if client.write_all(&down[..n]).await.is_err() {
                        return;
                    }
                }
            },
            changed = state.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
    hold(client, Some(server), state).await;
}

/// Keeps `client` (and `server`) open, reading and dropping what the client
/// sends, until the client closes or the proxy is dropped.
async fn hold(mut client: TcpStream, server: Option<TcpStream>, mut state: watch::Receiver<State>) {
    let _server = server;
    let mut sink = vec![0u8; 16 * 1024];
    loop {
        if state.borrow_and_update().stopped {
            return;
        }
        tokio::select! {
            read = client.read(&mut sink) => {
                if matches!(read, Ok(0) | Err(_)) {
                    return;
                }
            }
            changed = state.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}
