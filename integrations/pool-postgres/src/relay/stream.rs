//! The driver's own stream to the pooler with the [`Rewriter`] inside it,
//! for drivers that take any stream: no socket and no task in between.

use std::io;

use tokio::io::{AsyncRead, AsyncWrite};

use super::rewriter::Rewriter;
use super::wire::{header_len, Broken, CANCEL_REQUEST, GSSENC_REQUEST, MAX_STARTUP, SSL_REQUEST};
use super::OpenRelay;

/// Where the driver's untyped startup packets stand in a [`Rewriting`]
/// stream.
#[derive(Debug)]
enum Startup {
    /// A startup packet (or `SSLRequest`, `GSSENCRequest`,
    /// `CancelRequest`), as far as it came.
    Packet(Vec<u8>),
    /// The startup packet went on: typed messages follow, rewritten.
    Done,
    /// A cancel request went on: the rest passes unread.
    Raw,
}

/// The driver's stream to the pooler with the relay's rewriting inside it,
/// for drivers that take any stream (`tokio_postgres::Config::connect_raw`):
/// what the driver writes is rewritten into a buffer and written on to the
/// pooler, and what the pooler answers is rewritten in the driver's own
/// read buffer. No socket and no task sit in between; the rules are the
/// `Rewriter`'s, as in the relay task.
///
/// An `SSLRequest` or `GSSENCRequest` is answered "no" here, as the relay
/// does. Once the rewriter gives up ([`Broken`]), every read and write
/// fails with an `InvalidData` error, so the driver's connection ends and
/// the pooler's socket is closed with it.
pub(crate) struct Rewriting<S> {
    inner: S,
    rewriter: Rewriter,
    startup: Startup,
    /// Rewritten driver bytes not yet written to the pooler, from `sent`.
    pending: Vec<u8>,
    sent: usize,
    /// An answer "no" owed to the driver for its `SSLRequest`.
    refuse_tls: bool,
    broken: Option<Broken>,
    _open: OpenRelay,
}

impl<S> Rewriting<S> {
    /// Rewrites the driver's connection over `inner`, the pooler's socket.
    pub(crate) fn new(inner: S) -> Self {
        Self::with_rewriter(inner, Rewriter::default())
    }

    fn with_rewriter(inner: S, rewriter: Rewriter) -> Self {
        Self {
            inner,
            rewriter,
            startup: Startup::Packet(Vec::new()),
            pending: Vec::new(),
            sent: 0,
            refuse_tls: false,
            broken: None,
            _open: OpenRelay::new(),
        }
    }

    /// The error of a rewriter that gave up, logged once.
    fn fail(&mut self, broken: Broken) -> io::Error {
        if self.broken.is_none() {
            tracing::warn!(error = %broken, "statement relay to the pooler ended");
        }
        let error = io::Error::from(broken.clone());
        self.broken = Some(broken);
        error
    }

    /// Takes the startup packets from the front of `input`: a packet goes
    /// to `pending` once whole, an `SSLRequest` or `GSSENCRequest` is
    /// answered here.
    fn take_startup(&mut self, input: &mut &[u8]) -> io::Result<()> {
        while let Startup::Packet(packet) = &mut self.startup {
            if input.is_empty() {
                return Ok(());
            }
            let want = match header_len(packet) {
                None => 4,
                Some(len) if (8..=MAX_STARTUP).contains(&len) => len,
                Some(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "a startup packet of a bad length",
                    ))
                }
            };
            let n = (want - packet.len()).min(input.len());
            packet.extend_from_slice(&input[..n]);
            *input = &input[n..];
            if packet.len() < 8 || packet.len() < want {
                continue;
            }
            let code = i32::from_be_bytes([packet[4], packet[5], packet[6], packet[7]]);
            match code {
                SSL_REQUEST | GSSENC_REQUEST => {
                    packet.clear();
                    self.refuse_tls = true;
                }
                CANCEL_REQUEST => {
                    self.pending.extend_from_slice(packet);
                    self.startup = Startup::Raw;
                }
                _ => {
                    self.pending.extend_from_slice(packet);
                    self.startup = Startup::Done;
                }
            }
        }
        Ok(())
    }
}

impl<S: AsyncWrite + Unpin> Rewriting<S> {
    /// Writes what is pending to the pooler.
    fn poll_drain(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        while self.sent < self.pending.len() {
            let n = std::task::ready!(
                std::pin::Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.sent..])
            )?;
            if n == 0 {
                return std::task::Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.pending.clear();
        self.sent = 0;
        std::task::Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewriting<S> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(broken) = &this.broken {
            return std::task::Poll::Ready(Err(broken.clone().into()));
        }
        // What was rewritten before goes first: the buffer holds at most
        // one write's worth.
        std::task::ready!(this.poll_drain(cx))?;
        let mut input = buf;
        this.take_startup(&mut input)?;
        match this.startup {
            Startup::Done => {
                if let Err(broken) = this.rewriter.client_bytes(input, &mut this.pending) {
                    return std::task::Poll::Ready(Err(this.fail(broken)));
                }
            }
            Startup::Raw => this.pending.extend_from_slice(input),
            Startup::Packet(_) => {}
        }
        // `buf` is taken whole; what the pooler does not take now is
        // written by the next write or flush.
        if let std::task::Poll::Ready(Err(error)) = this.poll_drain(cx) {
            return std::task::Poll::Ready(Err(error));
        }
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_drain(cx))?;
        std::pin::Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_drain(cx))?;
        std::pin::Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewriting<S> {
    /// Reads from the pooler into `buf` and rewrites there: only what the
    /// driver is to see stays. Replies wholly the relay's own (the
    /// `ParseComplete` of a `Parse` it added) are read past, so an empty
    /// read still means the pooler closed.
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(broken) = &this.broken {
            return std::task::Poll::Ready(Err(broken.clone().into()));
        }
        if this.refuse_tls && buf.remaining() > 0 {
            this.refuse_tls = false;
            buf.put_slice(b"N");
            return std::task::Poll::Ready(Ok(()));
        }
        if this.put_owed(buf) {
            return std::task::Poll::Ready(Ok(()));
        }
        let start = buf.filled().len();
        loop {
            std::task::ready!(std::pin::Pin::new(&mut this.inner).poll_read(cx, buf))?;
            let end = buf.filled().len();
            if end == start || matches!(this.startup, Startup::Raw) {
                return std::task::Poll::Ready(Ok(()));
            }
            match this
                .rewriter
                .server_in_place(&mut buf.filled_mut()[start..])
            {
                Ok(kept) => buf.set_filled(start + kept),
                Err(broken) => {
                    buf.set_filled(start);
                    return std::task::Poll::Ready(Err(this.fail(broken)));
                }
            }
            if buf.filled().len() > start || this.put_owed(buf) {
                return std::task::Poll::Ready(Ok(()));
            }
        }
    }
}

impl<S> Rewriting<S> {
    /// Puts what the rewriter owes the driver into `buf`, as much as fits;
    /// whether anything was put.
    fn put_owed(&mut self, buf: &mut tokio::io::ReadBuf<'_>) -> bool {
        let owed = self.rewriter.take_owed();
        let n = owed.len().min(buf.remaining());
        if n == 0 {
            return false;
        }
        buf.put_slice(&owed[..n]);
        owed.drain(..n);
        true
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::pooler::SessionStatement;
    use crate::relay::testing::*;

    /// Runs a test's I/O within a bound: a wait that never ends fails.
    async fn within<F: std::future::Future>(test: F) -> F::Output {
        tokio::time::timeout(std::time::Duration::from_secs(10), test)
            .await
            .expect("the test's I/O finished in time")
    }

    /// A startup packet for user `u`.
    fn startup() -> Vec<u8> {
        let body: &[u8] = b"\0\x03\0\0user\0u\0\0";
        let len = u32::try_from(4 + body.len()).expect("fits");
        [&len.to_be_bytes()[..], body].concat()
    }

    /// A driver's stream through [`Rewriting`], the pooler's end, and the
    /// login done.
    async fn rewriting_pair() -> (Rewriting<tokio::io::DuplexStream>, tokio::io::DuplexStream) {
        let (ours, mut server) = tokio::io::duplex(64 * 1024);
        let mut driver = Rewriting::new(ours);
        driver.write_all(&startup()).await.expect("startup");
        driver.flush().await.expect("flush");
        let mut got = vec![0; startup().len()];
        server.read_exact(&mut got).await.expect("startup read");
        assert_eq!(got, startup());
        server.write_all(&ready(b'I')).await.expect("login");
        let mut back = [0; 6];
        driver.read_exact(&mut back).await.expect("login read");
        assert_eq!(back[..], ready(b'I'));
        (driver, server)
    }

    #[tokio::test]
    async fn the_rewriting_stream_answers_a_refusal_in_a_small_read_buffer() {
        within(async {
            let (mut driver, mut server) = rewriting_pair().await;
            driver.write_all(&query("LISTEN c")).await.expect("write");
            driver.flush().await.expect("flush");
            let mut got = vec![0; query("").len()];
            server.read_exact(&mut got).await.expect("read");
            assert_eq!(got, query(""));
            server
                .write_all(&[msg(b'I', &[]), ready(b'I')].concat())
                .await
                .expect("reply");
            // Read a few bytes at a time: the refusal and the ReadyForQuery
            // after it come out whole and in order.
            let want = [refusal(SessionStatement::Listen), ready(b'I')].concat();
            let mut back = Vec::new();
            while back.len() < want.len() {
                let mut small = [0; 7];
                let n = driver.read(&mut small).await.expect("read");
                assert!(n > 0, "the stream ended");
                back.extend_from_slice(&small[..n]);
            }
            assert_eq!(back, want);
        })
        .await;
    }

    #[tokio::test]
    async fn the_rewriting_stream_sends_statements_unnamed_and_hides_its_own_replies() {
        within(async {
            let (mut driver, mut server) = rewriting_pair().await;
            driver
                .write_all(&[parse("s1", "SELECT 1"), sync()].concat())
                .await
                .expect("write");
            driver.flush().await.expect("flush");
            let want = [msg(b'P', &[b"\0SELECT 1\0", &[0, 0]]), sync()].concat();
            let mut got = vec![0; want.len()];
            server.read_exact(&mut got).await.expect("read");
            assert_eq!(got, want);
            server
                .write_all(&[parse_complete(), ready(b'I')].concat())
                .await
                .expect("reply");
            let mut back = vec![0; 11];
            driver.read_exact(&mut back).await.expect("reply read");
            assert_eq!(tags(&back), b"1Z".to_vec());
            // After an idle ReadyForQuery the bind is preceded by the Parse.
            driver
                .write_all(&[bind("s1"), execute(), sync()].concat())
                .await
                .expect("write");
            driver.flush().await.expect("flush");
            let want = [
                msg(b'P', &[b"\0SELECT 1\0", &[0, 0]]),
                bind(""),
                execute(),
                sync(),
            ]
            .concat();
            let mut got = vec![0; want.len()];
            server.read_exact(&mut got).await.expect("read");
            assert_eq!(got, want);
            // The added Parse's reply alone: the driver's read goes past it
            // rather than end as if the pooler had closed.
            server.write_all(&parse_complete()).await.expect("reply");
            let reader = tokio::spawn(async move {
                let rest = [bind_complete(), command_complete("SELECT 1"), ready(b'I')].concat();
                let mut back = vec![0; rest.len()];
                driver.read_exact(&mut back).await.expect("rest");
                assert_eq!(back, rest);
            });
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            server
                .write_all(&[bind_complete(), command_complete("SELECT 1"), ready(b'I')].concat())
                .await
                .expect("rest");
            tokio::time::timeout(std::time::Duration::from_secs(5), reader)
                .await
                .expect("in time")
                .expect("reader");
        })
        .await;
    }

    #[tokio::test]
    async fn the_rewriting_stream_refuses_tls_itself() {
        within(async {
            let (ours, mut server) = tokio::io::duplex(1024);
            let mut driver = Rewriting::new(ours);
            let ssl_request = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
            driver.write_all(&ssl_request).await.expect("ssl request");
            let mut no = [0; 1];
            driver.read_exact(&mut no).await.expect("answer");
            assert_eq!(&no, b"N");
            driver.write_all(&startup()).await.expect("startup");
            driver.flush().await.expect("flush");
            let mut got = vec![0; startup().len()];
            server.read_exact(&mut got).await.expect("startup read");
            assert_eq!(got, startup(), "the SSLRequest never reached the pooler");
        })
        .await;
    }

    #[tokio::test]
    async fn the_rewriting_stream_fails_on_a_reply_it_cannot_place() {
        within(async {
            let (mut driver, mut server) = rewriting_pair().await;
            server.write_all(&parse_complete()).await.expect("stray");
            let mut back = [0; 5];
            let error = driver.read_exact(&mut back).await.expect_err("broken");
            assert_eq!(error.kind(), io::ErrorKind::InvalidData);
            // It stays broken both ways.
            let error = driver.write_all(&sync()).await.expect_err("broken");
            assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        })
        .await;
    }

    #[tokio::test]
    async fn the_rewriting_stream_passes_a_large_row_as_it_comes() {
        within(async {
            let (mut driver, mut server) = rewriting_pair().await;
            driver
                .write_all(&msg(b'Q', &[b"SELECT big\0"]))
                .await
                .expect("query");
            driver.flush().await.expect("flush");
            let row = msg(b'D', &[&[0, 1, 0, 0x60, 0, 0], &vec![b'x'; 6 << 20]]);
            let first = 1 << 20;
            let head = row[..first].to_vec();
            // The first MiB reaches the driver while the rest of the row is
            // not even written (the pipe holds 64 KiB: the writer waits for
            // the reader).
            let writer = tokio::spawn(async move {
                server.write_all(&head).await.expect("first MiB");
                server
            });
            let mut got = vec![0; first];
            tokio::time::timeout(
                std::time::Duration::from_secs(5),
                driver.read_exact(&mut got),
            )
            .await
            .expect("streamed")
            .expect("read");
            assert_eq!(got, row[..first]);
            drop(writer.await.expect("writer"));
        })
        .await;
    }
}
