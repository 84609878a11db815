//! A TCP proxy on 127.0.0.1 that can blackhole its traffic.
//!
//! Every accepted connection is forwarded to the upstream address. While
//! the proxy is blackholed, nothing is forwarded in either direction and
//! no socket is closed: bytes read are held and delivered on resume, like a
//! network partition that heals (TCP retransmits). New connections are
//! accepted but reach the upstream only after resume, as a SYN that is not
//! answered. Both ends stay open, so the client sees a half-open
//! connection: its writes succeed, no answer comes.
//!
//! The proxy counts the connections it accepted and the client sockets it
//! saw closed (EOF or error), also while blackholed.
//!
//! [`Proxy::with_connect_delay`] makes every new connection wait before it
//! reaches the upstream, as a connect over a network does (the handshake's
//! round trips), while the bytes of an open connection flow at once.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A running proxy; dropping it stops accepting and ends every pump.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    blackholed: watch::Sender<bool>,
    shared: Arc<Counts>,
    accept: JoinHandle<()>,
}

#[derive(Debug, Default)]
struct Counts {
    accepted: AtomicU64,
    client_closed: AtomicU64,
}

impl Proxy {
    /// Listens on a free 127.0.0.1 port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Proxy {
        Self::with_connect_delay(upstream, Duration::ZERO).await
    }

    /// [`start`](Self::start), each new connection held `delay` before it
    /// is forwarded (its first bytes wait; later ones do not).
    pub async fn with_connect_delay(upstream: SocketAddr, delay: Duration) -> Proxy {
        assert!(
            upstream.ip().is_loopback(),
            "the proxy targets 127.0.0.1 only"
        );
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (blackholed, state) = watch::channel(false);
        let shared = Arc::new(Counts::default());
        let counts = Arc::clone(&shared);
        let accept = tokio::spawn(async move {
            // Bounded by the proxy's life: the task is aborted on drop.
            while let Ok((client, _)) = listener.accept().await {
                counts.accepted.fetch_add(1, Ordering::Relaxed);
                let state = state.clone();
                let counts = Arc::clone(&counts);
                tokio::spawn(async move {
                    let mut wait = state.clone();
                    // A SYN that is not answered: hold until resume.
                    let _ = wait.wait_for(|b| !*b).await;
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        counts.client_closed.fetch_add(1, Ordering::Relaxed);
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    let up = tokio::spawn(pump(cr, sw, state.clone(), Some(Arc::clone(&counts))));
                    let down = tokio::spawn(pump(sr, cw, state, None));
                    let _ = up.await;
                    down.abort();
                });
            }
        });
        Proxy {
            addr,
            blackholed,
            shared,
            accept,
        }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops forwarding in both directions; sockets stay open.
    pub fn blackhole(&self) {
        self.blackholed.send_replace(true);
    }

    /// Forwards again, held bytes first.
    pub fn resume(&self) {
        self.blackholed.send_replace(false);
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::Relaxed)
    }

    /// Client sockets seen closed so far.
    pub fn client_closed(&self) -> u64 {
        self.shared.client_closed.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        // Pumps end when their peers close; resume so none waits forever.
        self.blackholed.send_replace(false);
    }
}

/// Copies `from` to `to`, holding what it reads while blackholed. Counts
/// the EOF of `from` in `closed` (the client side).
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut state: watch::Receiver<bool>,
    closed: Option<Arc<Counts>>,
) {
    let mut held: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let blackholed = *state.borrow_and_update();
        if !blackholed && !held.is_empty() {
            if to.write_all(&held).await.is_err() {
                break;
            }
            held.clear();
        }
        tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => {
                    if let Some(counts) = &closed {
                        counts.client_closed.fetch_add(1, Ordering::Relaxed);
                    }
                    // Deliver nothing more: the peer's socket closes with us.
                    break;
                }
                Ok(n) => {
                    if *state.borrow() {
                        held.extend_from_slice(&buf[..n]);
                    } else if to.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            },
            changed = state.changed() => {
                if changed.is_err() {
                    // The proxy is gone (it resumed first): plain copy
                    // until EOF.
                    if to.write_all(&held).await.is_ok() {
                        let _ = tokio::io::copy(&mut from, &mut to).await;
                    }
                    break;
                }
            }
        }
    }
    let _ = to.shutdown().await;
}
