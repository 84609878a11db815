//! The relay task for drivers that cannot take a stream: a private Unix
//! socket the driver connects to, and the loop that relays its one
//! connection to the pooler through a [`Rewriter`].

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::rewriter::Rewriter;
#[cfg(feature = "tokio-postgres")]
use super::stream::Rewriting;
#[cfg(feature = "tokio-postgres")]
use super::upstream::Keepalive;
use super::upstream::{ServerStream, Upstream};
use super::wire::{Broken, CANCEL_REQUEST, GSSENC_REQUEST, MAX_STARTUP, SSL_REQUEST};
use super::OpenRelay;

/// Bytes read at a time from either side.
const READ_CHUNK: usize = 16 * 1024;

/// A started relay: where the driver connects, and what stops the relay
/// if the driver never does.
#[doc(hidden)]
#[derive(Debug)]
pub struct Relay {
    /// The directory holding the relay's socket file, for the driver's
    /// `socket` option.
    pub dir: PathBuf,
    /// The port the socket file is named after (`.s.PGSQL.<port>`).
    pub port: u16,
    /// Dropped once the driver's connect is over: a relay still waiting for
    /// its driver then ends.
    _armed: tokio::sync::oneshot::Sender<()>,
}

/// The port the relay's socket file is named after.
#[doc(hidden)]
const RELAY_PORT: u16 = 5432;

/// Counts relays for unique directory names.
#[doc(hidden)]
static NEXT_RELAY: AtomicU64 = AtomicU64::new(0);

/// Removes the relay's socket file and directory when dropped.
#[doc(hidden)]
struct SocketDir {
    dir: PathBuf,
    file: PathBuf,
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

impl Relay {
    #[doc(hidden)]
    /// Connects to the pooler, then listens on a Unix socket in a new
    /// directory only this user can enter, and spawns the task that accepts
    /// the driver's one connection and relays it, rewriting statements with
    /// a `Rewriter`.
    ///
    /// The task ends when either side closes, or, if the driver never
    /// connected, when the returned value is dropped. The socket file and
    /// its directory are removed as soon as the driver is connected.
    ///
    /// # Errors
    ///
    /// The I/O error of the connect to the pooler or of the listener.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (the drivers need one anyway).
    #[cfg(unix)]
    pub async fn start(upstream: &Upstream) -> io::Result<Relay> {
        use std::os::unix::fs::DirBuilderExt;

        let server = upstream.connect().await?;
        let dir = std::env::temp_dir().join(format!(
            "pool-core-relay-{}-{}-{:016x}",
            std::process::id(),
            NEXT_RELAY.fetch_add(1, Ordering::Relaxed),
            fastrand::u64(..),
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let file = dir.join(format!(".s.PGSQL.{RELAY_PORT}"));
        let socket = SocketDir {
            dir: dir.clone(),
            file,
        };
        let listener = tokio::net::UnixListener::bind(&socket.file)?;
        let (armed, disarmed) = tokio::sync::oneshot::channel::<()>();
        let open = OpenRelay::new();
        tokio::spawn(async move {
            let _open = open;
            let accepted = {
                let accept = std::pin::pin!(listener.accept());
                match futures_util::future::select(accept, disarmed).await {
                    futures_util::future::Either::Left((accepted, _)) => accepted,
                    futures_util::future::Either::Right(_) => return,
                }
            };
            drop(listener);
            drop(socket);
            match accepted {
                Ok((client, _)) => {
                    log_end(relay(client, server, Rewriter::default()).await);
                }
                Err(error) => tracing::debug!(%error, "statement relay could not accept"),
            }
        });
        Ok(Relay {
            dir,
            port: RELAY_PORT,
            _armed: armed,
        })
    }

    /// Connects to the pooler (with TCP `keepalive`, if given) and returns
    /// the driver's stream to it with the relay's rewriting inside, for
    /// drivers that take a stream (`tokio_postgres::Config::connect_raw`):
    /// see [`Rewriting`].
    ///
    /// # Errors
    ///
    /// The I/O error of the connect to the pooler or of the keepalive
    /// option.
    #[cfg(feature = "tokio-postgres")]
    pub(crate) async fn rewriting(
        upstream: &Upstream,
        keepalive: Option<Keepalive>,
    ) -> io::Result<Rewriting<ServerStream>> {
        let server = upstream.connect().await?;
        if let (ServerStream::Tcp(tcp), Some(keepalive)) = (&server, keepalive) {
            keepalive.apply(tcp)?;
        }
        Ok(Rewriting::new(server))
    }

    /// On platforms without Unix domain sockets there is no private place
    /// for the relay to listen.
    ///
    /// # Errors
    ///
    /// Always `Unsupported`: see [`Upstream`].
    #[cfg(not(unix))]
    pub(crate) async fn start(_upstream: &Upstream) -> io::Result<Relay> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the transaction pooler mode's relay needs Unix domain sockets",
        ))
    }
}

/// Logs how a relay ended: at `WARN` when it closed the connection itself
/// (see [`Broken`](super::wire::Broken)), at `DEBUG` for an I/O error of
/// either side.
fn log_end(ended: io::Result<()>) {
    match ended {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::InvalidData => {
            tracing::warn!(%error, "statement relay to the pooler ended");
        }
        Err(error) => tracing::debug!(%error, "statement relay to the pooler ended"),
    }
}

/// Relays one connection: the startup packet as it is (an `SSLRequest` or
/// `GSSENCRequest` answered "no" here, the driver being told to speak
/// plaintext to the relay), then every message through `rewriter`, until
/// either side closes.
async fn relay<C>(client: C, server: ServerStream, rewriter: Rewriter) -> io::Result<()>
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    match server {
        ServerStream::Tcp(server) => relay_with(client, server, rewriter).await,
        #[cfg(unix)]
        ServerStream::Unix(server) => relay_with(client, server, rewriter).await,
    }
}

async fn relay_with<C, S>(mut client: C, mut server: S, rewriter: Rewriter) -> io::Result<()>
where
    C: AsyncRead + AsyncWrite + Unpin,
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        let mut len = [0_u8; 4];
        client.read_exact(&mut len).await?;
        let len = usize::try_from(i32::from_be_bytes(len)).unwrap_or(0);
        if !(8..=MAX_STARTUP).contains(&len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a startup packet of a bad length",
            ));
        }
        let mut packet = vec![0_u8; len];
        packet[..4].copy_from_slice(&(len as u32).to_be_bytes());
        client.read_exact(&mut packet[4..]).await?;
        let code = i32::from_be_bytes([packet[4], packet[5], packet[6], packet[7]]);
        match code {
            SSL_REQUEST | GSSENC_REQUEST => client.write_all(b"N").await?,
            CANCEL_REQUEST => {
                server.write_all(&packet).await?;
                tokio::io::copy_bidirectional(&mut client, &mut server).await?;
                return Ok(());
            }
            _ => {
                server.write_all(&packet).await?;
                break;
            }
        }
    }
    let rewriter = Mutex::new(rewriter);
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut server_read, mut server_write) = tokio::io::split(server);
    let upstream = pump(&mut client_read, &mut server_write, |input, out| {
        rewriter
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .client_bytes(input, out)
    });
    let downstream = pump(&mut server_read, &mut client_write, |input, out| {
        rewriter
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .server_bytes(input, out)
    });
    // Either side closing ends the relay; the other side's socket closes as
    // its half is dropped here.
    let done =
        match futures_util::future::select(std::pin::pin!(upstream), std::pin::pin!(downstream))
            .await
        {
            futures_util::future::Either::Left((done, _))
            | futures_util::future::Either::Right((done, _)) => done,
        };
    done
}

/// Relays one direction until `from` ends (then shuts `to` down), each
/// read passed through `rewrite` and what it leaves written on.
async fn pump<R, W>(
    from: &mut R,
    to: &mut W,
    mut rewrite: impl FnMut(&[u8], &mut Vec<u8>) -> Result<(), Broken>,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0_u8; READ_CHUNK];
    let mut out = Vec::with_capacity(READ_CHUNK);
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return to.shutdown().await;
        }
        out.clear();
        rewrite(&buf[..n], &mut out)?;
        if !out.is_empty() {
            to.write_all(&out).await?;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::relay::testing::{messages, msg, parse, parse_complete, ready, sync};

    /// A startup packet for user `u`.
    fn startup() -> Vec<u8> {
        let body: &[u8] = b"\0\x03\0\0user\0u\0\0";
        let len = u32::try_from(4 + body.len()).expect("fits");
        [&len.to_be_bytes()[..], body].concat()
    }

    /// Runs a test's I/O within a bound: a wait that never ends fails.
    async fn within<F: std::future::Future>(test: F) -> F::Output {
        tokio::time::timeout(Duration::from_secs(10), test)
            .await
            .expect("the test's I/O finished in time")
    }

    #[tokio::test]
    async fn the_relay_loop_refuses_tls_passes_the_login_and_rewrites_after_it() {
        within(async {
            let (mut driver, client) = tokio::io::duplex(64 * 1024);
            let (server, mut pooler) = tokio::io::duplex(64 * 1024);
            let relay = tokio::spawn(relay_with(client, server, Rewriter::default()));
            driver
                .write_all(&[0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f])
                .await
                .expect("ssl request");
            let mut no = [0; 1];
            driver.read_exact(&mut no).await.expect("answer");
            assert_eq!(&no, b"N");
            driver.write_all(&startup()).await.expect("startup");
            let mut got = vec![0; startup().len()];
            pooler.read_exact(&mut got).await.expect("startup read");
            assert_eq!(got, startup(), "the SSLRequest never reached the pooler");
            pooler.write_all(&ready(b'I')).await.expect("login");
            let mut back = [0; 6];
            driver.read_exact(&mut back).await.expect("login read");
            assert_eq!(back[..], ready(b'I'));

            driver
                .write_all(&[parse("s1", "SELECT 1"), sync()].concat())
                .await
                .expect("parse");
            let want = [msg(b'P', &[b"\0SELECT 1\0", &[0, 0]]), sync()].concat();
            let mut got = vec![0; want.len()];
            pooler.read_exact(&mut got).await.expect("parse read");
            assert_eq!(got, want);
            pooler
                .write_all(&[parse_complete(), ready(b'I')].concat())
                .await
                .expect("reply");
            let mut back = vec![0; 11];
            driver.read_exact(&mut back).await.expect("reply read");
            assert_eq!(messages(&back).len(), 2);

            // The driver closing ends the relay, and the pooler's side with it.
            drop(driver);
            relay.await.expect("relay task").expect("a clean end");
            let mut rest = Vec::new();
            pooler.read_to_end(&mut rest).await.expect("closed");
            assert!(rest.is_empty(), "{rest:?}");
        })
        .await;
    }

    #[tokio::test]
    async fn the_relay_loop_fails_on_a_reply_it_cannot_place() {
        within(async {
            let (mut driver, client) = tokio::io::duplex(1024);
            let (server, mut pooler) = tokio::io::duplex(1024);
            let relay = tokio::spawn(relay_with(client, server, Rewriter::default()));
            driver.write_all(&startup()).await.expect("startup");
            let mut got = vec![0; startup().len()];
            pooler.read_exact(&mut got).await.expect("startup read");
            pooler
                .write_all(&[ready(b'I'), parse_complete()].concat())
                .await
                .expect("stray reply");
            let error = relay.await.expect("relay task").expect_err("broken");
            assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        })
        .await;
    }

    #[tokio::test]
    async fn a_startup_packet_of_a_bad_length_ends_the_relay() {
        within(async {
            let (mut driver, client) = tokio::io::duplex(1024);
            let (server, _pooler) = tokio::io::duplex(1024);
            let relay = tokio::spawn(relay_with(client, server, Rewriter::default()));
            driver.write_all(&[0, 0, 0, 4]).await.expect("bad length");
            let error = relay.await.expect("relay task").expect_err("refused");
            assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        })
        .await;
    }

    #[tokio::test]
    async fn a_cancel_request_passes_unread() {
        within(async {
            let (mut driver, client) = tokio::io::duplex(1024);
            let (server, mut pooler) = tokio::io::duplex(1024);
            let relay = tokio::spawn(relay_with(client, server, Rewriter::default()));
            let cancel = [0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e, 0, 0, 0, 7, 0, 0, 0, 9];
            driver.write_all(&cancel).await.expect("cancel");
            let mut got = [0; 16];
            pooler.read_exact(&mut got).await.expect("cancel read");
            assert_eq!(got, cancel);
            // Whatever follows is not framed: bytes that would break the
            // rewriter pass as they are.
            driver.write_all(&[b'1', 0, 0, 0, 1]).await.expect("raw");
            let mut raw = [0; 5];
            pooler.read_exact(&mut raw).await.expect("raw read");
            assert_eq!(raw, [b'1', 0, 0, 0, 1]);
            drop(driver);
            drop(pooler);
            relay.await.expect("relay task").expect("a clean end");
        })
        .await;
    }
}
