//! The task-local chain of scope frames, and handing it to a spawned task.
//!
//! Each scope pushes one [`Frame`] for the future it runs: a persistent
//! list (`parent` pointers), so a scope's frames are shared, never copied,
//! by the futures polled inside it and by tasks it hands them to. A look-up
//! walks the list for the first frame whose key is the pool's address;
//! chains are as deep as scopes nest, a handful at most.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use pool_core::PoolId;
use tokio::sync::Notify;

tokio::task_local! {
    /// The innermost frame of the scopes the current future runs in.
    static FRAMES: Option<Arc<Frame>>;
}

/// A callback to run after a commit.
pub(crate) type Callback = Box<dyn FnOnce() + Send>;

/// What every frame on one physical transaction shares, whatever its
/// manager type.
#[derive(Default)]
pub(crate) struct TxCommon {
    /// Set by a joining scope that failed or was cancelled: the scope that
    /// began the transaction rolls back instead of committing.
    pub(crate) rollback_only: AtomicBool,
    /// Spawned tasks holding a frame on this transaction now.
    pub(crate) sharers: AtomicUsize,
    /// After-commit callbacks, each with the savepoint depth it was
    /// registered at (0: the transaction itself).
    pub(crate) callbacks: Mutex<Vec<(u32, Callback)>>,
    /// The savepoints open on the transaction, innermost last.
    savepoints: Mutex<Savepoints>,
    /// Woken when a savepoint ends.
    savepoint_ended: Notify,
}

/// What [`TxCommon::turn`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// The code's savepoint is the innermost open.
    Go,
    /// A savepoint the code does not run in is open inside its own.
    Wait,
    /// The code's savepoint has ended.
    Ended,
}

/// The savepoints of one transaction that are open, by id.
///
/// A savepoint ends every savepoint opened after it (`RELEASE` keeps their
/// work, `ROLLBACK TO` drops it), so two savepoints of one transaction are
/// only right when one lies inside the other: statements, and new
/// savepoints, are taken only from code running in the innermost one
/// (see [`TxCommon::turn`]); the others wait until it ends.
#[derive(Default)]
struct Savepoints {
    /// Ids of the open savepoints, outermost first.
    open: Vec<u64>,
    /// The last id given out (ids start at 1; 0 is the transaction itself).
    last: u64,
}

impl TxCommon {
    fn savepoints(&self) -> std::sync::MutexGuard<'_, Savepoints> {
        // Only plain integers change under the lock, never half-way.
        self.savepoints
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether code running in savepoint `inside` (0: in none) may use
    /// the connection now, must wait for a savepoint inside which it does
    /// not run, or runs in one that has ended: one look under the lock.
    /// Asked with the connection's lock held, a `Go` holds for as long as
    /// that lock is, since a new savepoint is only recorded under it.
    pub(crate) fn turn(&self, inside: u64) -> Turn {
        let savepoints = self.savepoints();
        match savepoints.open.last() {
            None if inside == 0 => Turn::Go,
            Some(&innermost) if innermost == inside => Turn::Go,
            _ if inside == 0 || savepoints.open.contains(&inside) => Turn::Wait,
            _ => Turn::Ended,
        }
    }

    /// Records a new savepoint inside `inside`, if that is the innermost
    /// one now, and returns its id; `None` while another is open there.
    /// Call with the connection's lock held, and send the `SAVEPOINT`
    /// before letting it go.
    pub(crate) fn open_savepoint(&self, inside: u64) -> Option<u64> {
        let mut savepoints = self.savepoints();
        if savepoints.open.last().copied().unwrap_or(0) != inside {
            return None;
        }
        savepoints.last += 1;
        let id = savepoints.last;
        savepoints.open.push(id);
        Some(id)
    }

    /// Forgets savepoint `id` (and any left open inside it, which the
    /// server ends with it), and wakes whoever waits for its turn.
    pub(crate) fn close_savepoint(&self, id: u64) {
        {
            let mut savepoints = self.savepoints();
            if let Some(at) = savepoints.open.iter().position(|open| *open == id) {
                savepoints.open.truncate(at);
            }
        }
        self.savepoint_ended.notify_waiters();
    }

    /// Waits until a savepoint of this transaction ends. Create it, and
    /// `enable` it, before asking for the [`turn`](Self::turn),
    /// so an end in between is not missed.
    pub(crate) fn savepoint_ended(&self) -> tokio::sync::futures::Notified<'_> {
        self.savepoint_ended.notified()
    }

    pub(crate) fn callbacks(&self) -> std::sync::MutexGuard<'_, Vec<(u32, Callback)>> {
        // A callback is only moved in and out under the lock, never run
        // there, so a poisoned lock holds a consistent list.
        self.callbacks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The subtasks one scope handed its transactions to, and whether one of
/// them failed.
#[derive(Default)]
pub(crate) struct Level {
    children: AtomicUsize,
    failed: AtomicBool,
    idle: Notify,
}

impl Level {
    /// Waits until every subtask handed this scope's frames has ended.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe; the subtasks run on.
    pub(crate) async fn wait_children(&self) {
        loop {
            let notified = self.idle.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            // Acquire: pairs with the AcqRel decrement in `Child::drop`, so
            // the child's writes (its `failed` flag) are seen.
            if self.children.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Whether a subtask failed, panicked or was aborted.
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }
}

/// One scope's entry in the chain.
pub(crate) struct Frame {
    /// The pool's address (`Arc::as_ptr` of its shared state), kept alive
    /// by `conn`, which holds a checkout of that pool.
    pub(crate) key: PoolId,
    /// The transaction's connection cell, an `Arc<Cell<M>>` for the pool's
    /// manager `M`.
    pub(crate) conn: Arc<dyn Any + Send + Sync>,
    pub(crate) tx: Arc<TxCommon>,
    /// Whether this scope began the transaction (holds a connection).
    pub(crate) owns: bool,
    /// Savepoint depth: 0 in the transaction itself, n inside n savepoints.
    pub(crate) depth: u32,
    /// The id of the innermost savepoint this frame runs in (0: none).
    pub(crate) savepoint: u64,
    pub(crate) level: Arc<Level>,
    pub(crate) parent: Option<Arc<Frame>>,
}

/// The chain of the current task, if it runs in any scope.
pub(crate) fn current() -> Option<Arc<Frame>> {
    FRAMES.try_with(|frames| frames.clone()).ok().flatten()
}

/// The innermost frame for pool `key` in `chain`.
pub(crate) fn find(chain: &Option<Arc<Frame>>, key: PoolId) -> Option<&Arc<Frame>> {
    let mut next = chain.as_ref();
    while let Some(frame) = next {
        if frame.key == key {
            return Some(frame);
        }
        next = frame.parent.as_ref();
    }
    None
}

/// How many frames for pool `key` in `chain` hold a connection.
pub(crate) fn held(chain: &Option<Arc<Frame>>, key: PoolId) -> u32 {
    let mut count = 0;
    let mut next = chain.as_ref();
    while let Some(frame) = next {
        if frame.key == key && frame.owns {
            count += 1;
        }
        next = frame.parent.as_ref();
    }
    count
}

/// Runs `fut` with `frame` as the innermost frame.
pub(crate) fn run_in<F: Future>(
    frame: Arc<Frame>,
    fut: F,
) -> tokio::task::futures::TaskLocalFuture<Option<Arc<Frame>>, F> {
    FRAMES.scope(Some(frame), fut)
}

/// A spawned task's hold on the frames it was handed: counted in its
/// scope's [`Level`] and in every transaction of the chain, until dropped.
struct Child {
    level: Arc<Level>,
    txs: Vec<Arc<TxCommon>>,
    ok: bool,
}

impl Child {
    fn enter(chain: &Arc<Frame>) -> Self {
        let mut txs: Vec<Arc<TxCommon>> = Vec::new();
        let mut next = Some(chain);
        while let Some(frame) = next {
            if !txs.iter().any(|tx| Arc::ptr_eq(tx, &frame.tx)) {
                // AcqRel: pairs with the Acquire load in the savepoint
                // check (`scope::savepoint`), which must see this task.
                frame.tx.sharers.fetch_add(1, Ordering::AcqRel);
                txs.push(frame.tx.clone());
            }
            next = frame.parent.as_ref();
        }
        // AcqRel: pairs with the Acquire load in `Level::wait_children`.
        chain.level.children.fetch_add(1, Ordering::AcqRel);
        Self {
            level: chain.level.clone(),
            txs,
            ok: false,
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        for tx in &self.txs {
            // AcqRel: pairs with the Acquire load in the savepoint check.
            tx.sharers.fetch_sub(1, Ordering::AcqRel);
        }
        if !self.ok {
            // Release: pairs with the Acquire load in `Level::failed`.
            self.level.failed.store(true, Ordering::Release);
        }
        // AcqRel: pairs with the Acquire load in `wait_children`.
        if self.level.children.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.level.idle.notify_waiters();
        }
    }
}

/// Spawns `task` on tokio, handing it the transactions current in this
/// task, for every pool: inside, [`Pool::current`](crate::AmbientExt::current)
/// finds them as it does here. (A plain `tokio::spawn` hands nothing over:
/// tokio's task-locals are not inherited, so code in such a task sees no
/// transaction.)
///
/// The innermost scope of the calling task waits, when its body is done,
/// until the task ends, and commits nothing if it did not finish with
/// `Ok`: an `Err`, a panic or an abort makes the scope roll back its work
/// and fail with [`TxError::ChildFailed`](super::TxError::ChildFailed).
/// Queries from the task and from the scope share the one connection:
/// serialised on sqlx, pipelined on tokio-postgres. While the task runs, a
/// [`Nested`](super::Propagation::Nested) scope on a shared transaction
/// fails with [`TxError::Shared`](super::TxError::Shared).
///
/// Outside any scope this is `tokio::spawn`.
///
/// # Panics
///
/// As `tokio::spawn`: outside a tokio runtime.
pub fn spawn<F, T, E>(task: F) -> tokio::task::JoinHandle<Result<T, E>>
where
    F: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    match current() {
        None => tokio::spawn(task),
        Some(chain) => {
            let child = Child::enter(&chain);
            tokio::spawn(Handed {
                task: Box::pin(FRAMES.scope(Some(chain), task)),
                child,
            })
        }
    }
}

/// A task handed the frames: its future, then its [`Child`] count, dropped
/// in that order (fields drop as declared), so that whatever the future
/// holds (a guard on the connection) is gone before the scope is told the
/// task ended.
struct Handed<F: Future> {
    task: Pin<Box<tokio::task::futures::TaskLocalFuture<Option<Arc<Frame>>, F>>>,
    child: Child,
}

impl<F, T, E> Future for Handed<F>
where
    F: Future<Output = Result<T, E>>,
{
    type Output = Result<T, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let out = std::task::ready!(self.task.as_mut().poll(cx));
        self.child.ok = out.is_ok();
        Poll::Ready(out)
    }
}

#[cfg(test)]
mod tests {
    use super::{Turn, TxCommon};

    #[test]
    fn a_savepoint_opens_only_inside_the_innermost_and_ends_those_inside_it() {
        let tx = TxCommon::default();
        assert_eq!(tx.turn(0), Turn::Go);
        let a = tx.open_savepoint(0).expect("the first opens");
        assert_eq!(tx.open_savepoint(0), None, "a sibling waits for it");
        assert_eq!(tx.turn(0), Turn::Wait, "code outside it waits too");
        assert_eq!(tx.turn(a), Turn::Go);
        let b = tx.open_savepoint(a).expect("one inside it opens");
        assert_eq!((tx.turn(a), tx.turn(b)), (Turn::Wait, Turn::Go));
        tx.close_savepoint(a);
        assert_eq!((tx.turn(a), tx.turn(b)), (Turn::Ended, Turn::Ended));
        assert_eq!(tx.turn(0), Turn::Go);
        let c = tx.open_savepoint(0).expect("the sibling's turn");
        assert!(c != a && c != b, "ids are never reused");
    }
}
