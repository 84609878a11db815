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
use super::wire::{CANCEL_REQUEST, GSSENC_REQUEST, MAX_STARTUP, SSL_REQUEST};
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
/// (see [`Broken`](super::wire::Broken)), at `DEBUG` for an I/O error of either side.
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
    let upstream = async {
        let mut buf = vec![0_u8; READ_CHUNK];
        let mut out = Vec::with_capacity(READ_CHUNK);
        loop {
            let n = client_read.read(&mut buf).await?;
            if n == 0 {
                server_write.shutdown().await?;
                return Ok::<_, io::Error>(());
            }
            out.clear();
            rewriter
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .client_bytes(&buf[..n], &mut out)?;
            if !out.is_empty() {
                server_write.write_all(&out).await?;
            }
        }
    };
    let downstream = async {
        let mut buf = vec![0_u8; READ_CHUNK];
        let mut out = Vec::with_capacity(READ_CHUNK);
        loop {
            let n = server_read.read(&mut buf).await?;
            if n == 0 {
                client_write.shutdown().await?;
                return Ok::<_, io::Error>(());
            }
            out.clear();
            rewriter
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .server_bytes(&buf[..n], &mut out)?;
            if !out.is_empty() {
                client_write.write_all(&out).await?;
            }
        }
    };
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
