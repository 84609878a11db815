//! Where the relay reaches the pooler, and the socket it reaches it by.

use std::io;
use std::path::{Path, PathBuf};

use tokio::io::{AsyncRead, AsyncWrite};

/// Where the relay reaches the pooler.
#[derive(Debug, Clone)]
pub enum Upstream {
    /// A TCP host and port.
    Tcp(String, u16),
    /// A Unix domain socket file.
    #[cfg_attr(not(unix), allow(dead_code))]
    Unix(PathBuf),
}

/// The pooler's end of a relay: one socket, either kind.
pub(crate) enum ServerStream {
    /// Over TCP.
    Tcp(tokio::net::TcpStream),
    /// Over a Unix domain socket.
    #[cfg(unix)]
    Unix(tokio::net::UnixStream),
}

impl AsyncRead for ServerStream {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => std::pin::Pin::new(s).poll_read(cx, buf),
            #[cfg(unix)]
            Self::Unix(s) => std::pin::Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ServerStream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Tcp(s) => std::pin::Pin::new(s).poll_write(cx, buf),
            #[cfg(unix)]
            Self::Unix(s) => std::pin::Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => std::pin::Pin::new(s).poll_flush(cx),
            #[cfg(unix)]
            Self::Unix(s) => std::pin::Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => std::pin::Pin::new(s).poll_shutdown(cx),
            #[cfg(unix)]
            Self::Unix(s) => std::pin::Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// TCP keepalive for the relay's socket to the pooler: the first probe
/// after `idle`, then every `interval`, giving up after `retries`.
#[cfg(feature = "tokio-postgres")]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keepalive {
    pub(crate) idle: std::time::Duration,
    pub(crate) interval: Option<std::time::Duration>,
    pub(crate) retries: Option<u32>,
}

#[cfg(feature = "tokio-postgres")]
impl Keepalive {
    /// Turns keepalive on for `stream`.
    ///
    /// # Errors
    ///
    /// The socket option's error.
    pub(super) fn apply(&self, stream: &tokio::net::TcpStream) -> io::Result<()> {
        let mut keepalive = socket2::TcpKeepalive::new().with_time(self.idle);
        #[cfg(any(
            target_os = "linux",
            target_os = "android",
            target_os = "macos",
            target_os = "ios",
            target_os = "freebsd",
            target_os = "netbsd",
            windows
        ))]
        if let Some(interval) = self.interval {
            keepalive = keepalive.with_interval(interval);
        }
        #[cfg(any(
            target_os = "linux",
            target_os = "android",
            target_os = "macos",
            target_os = "ios",
            target_os = "freebsd",
            target_os = "netbsd"
        ))]
        if let Some(retries) = self.retries {
            keepalive = keepalive.with_retries(retries);
        }
        socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive)
    }
}

impl Upstream {
    /// Connects to the pooler.
    ///
    /// # Errors
    ///
    /// The I/O error of the connect (refused, unreachable, unknown host).
    pub(crate) async fn connect(&self) -> io::Result<ServerStream> {
        match self {
            Self::Tcp(host, port) => {
                let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                stream.set_nodelay(true)?;
                Ok(ServerStream::Tcp(stream))
            }
            #[cfg(unix)]
            Self::Unix(path) => Ok(ServerStream::Unix(
                tokio::net::UnixStream::connect(path).await?,
            )),
            #[cfg(not(unix))]
            Self::Unix(path) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "Unix domain sockets ({}) need a Unix platform",
                    path.display()
                ),
            )),
        }
    }
}

/// Where a driver's options point, for
/// [`Relay::start`](crate::relay::Relay::start): a socket directory (given,
/// or as the host) holds `.s.PGSQL.<port>`.
#[doc(hidden)]
pub fn upstream(socket_dir: Option<&Path>, host: &str, port: u16) -> Upstream {
    match socket_dir {
        Some(dir) => Upstream::Unix(dir.join(format!(".s.PGSQL.{port}"))),
        None if host.starts_with('/') => {
            Upstream::Unix(Path::new(host).join(format!(".s.PGSQL.{port}")))
        }
        None => Upstream::Tcp(host.to_owned(), port),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_directory_or_a_host_path_means_a_unix_socket() {
        let dir = Path::new("/run/pooler");
        let Upstream::Unix(file) = upstream(Some(dir), "db.example", 6432) else {
            panic!("a socket directory");
        };
        assert_eq!(file, dir.join(".s.PGSQL.6432"));
        let Upstream::Unix(file) = upstream(None, "/tmp", 5432) else {
            panic!("a host that is a path");
        };
        assert_eq!(file, Path::new("/tmp/.s.PGSQL.5432"));
        let Upstream::Tcp(host, port) = upstream(None, "db.example", 6432) else {
            panic!("a host name");
        };
        assert_eq!((host.as_str(), port), ("db.example", 6432));
    }
}
