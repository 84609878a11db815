//! The task that drives one connection's socket.

use std::future::poll_fn;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::{AsyncMessage, Connection};

/// Runs the connection until the client is dropped or the socket fails.
///
/// `tokio_postgres` does its I/O in this future, separate from the
/// `Client`. Server notices are logged at `debug` (a `ROLLBACK` outside a
/// transaction in the reset modes sends one on every return, which is
/// expected), notifications at `trace`, and the error that ends a
/// connection at `warn`.
pub(super) async fn drive<S, T>(mut connection: Connection<S, T>)
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        match poll_fn(|cx| connection.poll_message(cx)).await {
            None => {
                tracing::trace!("postgres connection closed");
                return;
            }
            Some(Ok(AsyncMessage::Notice(notice))) => tracing::debug!(
                severity = notice.severity(),
                code = notice.code().code(),
                message = notice.message(),
                "postgres notice"
            ),
            Some(Ok(AsyncMessage::Notification(note))) => tracing::trace!(
                channel = note.channel(),
                "postgres notification dropped: pooled clients do not receive LISTEN/NOTIFY"
            ),
            Some(Ok(_)) => {}
            Some(Err(error)) => {
                tracing::warn!(%error, "postgres connection ended with an error");
                return;
            }
        }
    }
}
