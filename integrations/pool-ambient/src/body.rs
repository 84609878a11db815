//! Running a scope's body: catching its panic ([`caught`]), marking its
//! transaction rollback-only if it is dropped midway ([`MarkOnDrop`]), and
//! the result it ends with ([`outcome`]). Shared by the scopes of
//! `scope.rs` and `nested.rs`.

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;

use super::error::TxError;
use super::frame::{Level, TxCommon};

/// Polls `fut`, catching a panic from it.
pub(crate) async fn caught<F: Future>(fut: F) -> Result<F::Output, Box<dyn Any + Send>> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(
        move |cx| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(panic)),
        },
    )
    .await
}

/// Marks a transaction rollback-only when dropped armed: a joining or
/// nested scope that did not finish well (including one cancelled).
pub(crate) struct MarkOnDrop(pub(crate) Option<Arc<TxCommon>>);

impl MarkOnDrop {
    pub(crate) fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for MarkOnDrop {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            // Release: pairs with the Acquire load where the owning scope
            // decides to commit.
            tx.rollback_only.store(true, Ordering::Release);
        }
    }
}

/// What a body (with its subtasks) came to, as the scope returns it: `Ok`
/// stays `Ok` unless a subtask failed.
pub(crate) fn outcome<T, E, B>(
    ended: Result<Result<T, E>, Box<dyn Any + Send>>,
    level: &Level,
    otherwise: TxError<B>,
) -> Result<T, E>
where
    E: From<TxError<B>>,
{
    match ended {
        Err(panic) => resume_unwind(panic),
        Ok(Err(e)) => Err(e),
        Ok(Ok(_)) if level.failed() => Err(TxError::ChildFailed.into()),
        Ok(Ok(_)) => Err(otherwise.into()),
    }
}
