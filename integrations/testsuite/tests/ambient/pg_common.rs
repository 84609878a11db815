//! What the PostgreSQL tests of both managers share: a table dropped on
//! every path (panics included), cancelling a future at its n-th
//! suspension, and the server's word on whether a session is inside a
//! transaction.

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

/// The SQL whose one value is `t` outside a transaction block and `f`
/// inside one: in an explicit transaction `now()` is the time of its
/// `BEGIN`, while outside each simple query is its own transaction. (An
/// aborted transaction refuses it with an error, which callers count as
/// inside.) Sent as a simple query, where both clocks start at the query.
pub const OUTSIDE_A_TRANSACTION: &str = "SELECT now() = statement_timestamp()";

/// A table that is dropped when the guard goes, however the test ends:
/// the drop runs on a thread of its own with a fresh connection, so it
/// works in a panicking test and outside any runtime.
pub struct TableGuard {
    pub name: String,
}

impl TableGuard {
    /// A unique table name starting with `prefix`; the caller creates it.
    pub fn new(prefix: &str) -> Self {
        Self {
            name: crate::support::db::unique(prefix),
        }
    }
}

impl Drop for TableGuard {
    fn drop(&mut self) {
        let sql = format!("DROP TABLE IF EXISTS {}", self.name);
        let url = crate::support::db::url("DATABASE_URL");
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the drop");
            rt.block_on(async {
                let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .map_err(|e| e.to_string())?;
                let driver = tokio::spawn(conn);
                let done = tokio::time::timeout(
                    std::time::Duration::from_secs(10),
                    client.batch_execute(&sql),
                )
                .await;
                drop(client);
                let _ = driver.await;
                match done {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err("timed out".to_owned()),
                }
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) && !std::thread::panicking() {
            panic!("dropping table {} failed: {dropped:?}", self.name);
        }
    }
}

/// Polls `fut` until it finishes, or drops it at its `n`-th `Pending`
/// (counting from 0), right where it suspended: `None` then.
pub async fn cancel_at_pending<F: Future>(fut: F, n: usize) -> Option<F::Output> {
    cut_at_pending(fut, n, Duration::ZERO).await
}

/// As [`cancel_at_pending`], but the cut future lies unpolled for `linger`
/// before it is dropped: the reply it waited for has arrived by then and
/// sits unread, the window where a driver sees a transaction the caller
/// never learnt about.
pub async fn cut_at_pending<F: Future>(fut: F, n: usize, linger: Duration) -> Option<F::Output> {
    let mut fut = Box::pin(fut);
    let mut seen = 0;
    let out = std::future::poll_fn(|cx| match fut.as_mut().poll(cx) {
        Poll::Ready(out) => Poll::Ready(Some(out)),
        Poll::Pending if seen == n => Poll::Ready(None),
        Poll::Pending => {
            seen += 1;
            Poll::Pending
        }
    })
    .await;
    if out.is_none() && !linger.is_zero() {
        tokio::time::sleep(linger).await;
    }
    drop(fut);
    out
}

/// At most this many cancellation points per operation in a sweep.
pub const MAX_POINTS: usize = 80;

/// How long a cut operation lies unpolled in the second pass of a sweep.
pub const LINGER: Duration = Duration::from_millis(5);

/// Runs `op(n)` cut at its `n`-th suspension for n = 0, 1, ... until it
/// finishes first, twice per point (dropped at once, and dropped after
/// lying unpolled for [`LINGER`]), calling `check(n)` after each: every
/// point where the operation waits is cut at least once (timing moves
/// them a little from run to run).
///
/// # Panics
///
/// When the operation still had not finished after [`MAX_POINTS`] cuts.
pub async fn sweep<Op, Fut, Check, CFut>(what: &str, mut op: Op, mut check: Check)
where
    Op: FnMut(usize) -> Fut,
    Fut: Future,
    Check: FnMut(usize, bool) -> CFut,
    CFut: Future<Output = ()>,
{
    for n in 0..MAX_POINTS {
        let finished = cut_at_pending(op(n), n, Duration::ZERO).await.is_some();
        check(n, finished).await;
        if finished {
            return;
        }
        let finished = cut_at_pending(op(n), n, LINGER).await.is_some();
        check(n, finished).await;
    }
    panic!("{what}: still not finished after {MAX_POINTS} cancellation points");
}
