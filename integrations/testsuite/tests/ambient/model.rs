//! A property test of ambient transactions against real PostgreSQL, on
//! both managers: proptest draws small trees of scopes (every propagation
//! mode; bodies that end `Ok`, `Err` or panic; siblings under `join!` and
//! `select!`; tasks handed the transaction with `pool_ambient::spawn`; scopes
//! cut at their n-th suspension), runs them, and compares what the scopes
//! returned and the rows committed with what the documented semantics say.
//!
//! The model reads only what timing decides: whether a cut or a `select!`
//! stopped a scope before it finished, whether its body had finished by
//! then, and which inserts had been sent. Everything else (each scope's
//! result, each row's fate) it derives from the rules in the module docs
//! of `pool_ambient`:
//!
//! - a scope that begins a transaction commits it when its body returns
//!   `Ok`, no task it handed the transaction to failed and no joining or
//!   savepoint scope in it failed to finish (`RollbackOnly` then); it
//!   rolls back otherwise, and when cut (a cut during its `COMMIT` may go
//!   either way);
//! - a joining scope that returns `Err`, panics, has a failed task or is
//!   cut marks its transaction rollback-only;
//! - a savepoint scope keeps its work when it returns `Ok`, drops it (and
//!   only it) on `Err`, panic or a failed task, and marks the transaction
//!   rollback-only when cut;
//! - `Never` inside a transaction, `Mandatory` outside one and `Nested`
//!   while a handed task shares the transaction are refused;
//! - a statement belongs to the scope it is issued from, whatever sibling
//!   savepoints are open meanwhile.
//!
//! Each run uses one table of its own, dropped by a guard on every path.
//! A failure prints the seed, the tree and what was observed; with
//! `AMBIENT_MODEL_DEBUG` set, every case prints a line of what it did.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use futures::FutureExt;
use pool_ambient::AmbientExt;
use pool_ambient::{self, Propagation, TransactionalManager, TxError};
use pool_core::{Pool, PooledConnection};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::Fail;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Inserts a value into a table: in the current transaction, or in
/// autocommit outside any.
type InsertFn<M> = fn(Pool<M>, String, i64) -> BoxFuture<'static, Result<(), String>>;

/// Cases per manager: each is a few dozen statements.
const CASES: u32 = 32;
/// Scopes per tree at most (each may hold a connection).
const MAX_SCOPES: usize = 10;
/// Connections per pool: more than a tree's scopes can hold at once.
const POOL_SIZE: u32 = 12;
/// Upper bound on one case; a hang fails it with the tree.
const CASE_BOUND: Duration = Duration::from_secs(20);
/// The panic message of a body told to panic (kept out of the test log).
const PANIC: &str = "ambient model: the body panics";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Ok,
    Err,
    Panic,
}

#[derive(Clone, Debug)]
struct Spec {
    id: usize,
    mode: Propagation,
    end: End,
    /// Cut at this suspension, if it has not finished by then.
    cut: Option<usize>,
    body: Vec<Node>,
}

#[derive(Clone, Debug)]
enum Node {
    Insert(i64),
    Scope(Box<Spec>),
    Join(Vec<Node>, Vec<Node>),
    Select(Vec<Node>, Vec<Node>),
    /// A task handed the transaction, awaited at once; ends `Ok` or not.
    Spawn {
        id: usize,
        ok: bool,
        body: Vec<Node>,
    },
}

/// Draws a tree from `seed` (deterministic, so a failing seed replays).
fn tree(seed: u64) -> Vec<Node> {
    let mut gen = Gen {
        rng: fastrand::Rng::with_seed(seed),
        ids: 0,
        values: 0,
    };
    // Bounded: trees past the scope limit are drawn again.
    for _ in 0..1000 {
        // The tree begins a transaction first: most of what the rules say
        // happens inside one. Then, maybe, something outside it.
        let mut seq = vec![gen.scope(0, true, Some(Propagation::Required))];
        if gen.rng.bool() {
            seq.push(gen.node(0, true));
        }
        let scopes = count_scopes(&seq);
        if scopes <= MAX_SCOPES {
            return seq;
        }
    }
    unreachable!("a tree within the limits is drawn long before")
}

fn count_scopes(seq: &[Node]) -> usize {
    seq.iter()
        .map(|node| match node {
            Node::Insert(_) => 0,
            Node::Scope(spec) => 1 + count_scopes(&spec.body),
            Node::Join(a, b) | Node::Select(a, b) => count_scopes(a) + count_scopes(b),
            Node::Spawn { body, .. } => count_scopes(body),
        })
        .sum()
}

/// Draws trees: nodes up to depth 3, values and ids numbered as drawn.
///
/// `spawn_ok` is true where a handed task can neither be cut off from its
/// scope nor run beside a sibling (which would make a savepoint's refusal
/// depend on timing).
struct Gen {
    rng: fastrand::Rng,
    ids: usize,
    values: i64,
}

impl Gen {
    fn insert(&mut self) -> Node {
        self.values += 1;
        Node::Insert(self.values)
    }

    fn seq(&mut self, depth: u32, spawn_ok: bool, min: usize) -> Vec<Node> {
        let len = self.rng.usize(min..=3);
        (0..len).map(|_| self.node(depth, spawn_ok)).collect()
    }

    fn node(&mut self, depth: u32, spawn_ok: bool) -> Node {
        let pick = self.rng.u32(0..100);
        if depth >= 3 || pick < 30 {
            self.insert()
        } else if pick < 68 {
            self.scope(depth, spawn_ok, None)
        } else if pick < 88 {
            Node::Join(self.branch(depth), self.branch(depth))
        } else if pick < 94 || !spawn_ok {
            Node::Select(self.branch(depth), self.branch(depth))
        } else {
            self.ids += 1;
            Node::Spawn {
                id: self.ids,
                ok: self.rng.u32(0..4) != 0,
                body: self.seq(depth + 1, true, 1),
            }
        }
    }

    /// One side of a `join!` or `select!`: often a savepoint scope, so
    /// that sibling savepoints meet.
    fn branch(&mut self, depth: u32) -> Vec<Node> {
        if self.rng.bool() {
            vec![self.scope(depth + 1, false, Some(Propagation::Nested))]
        } else {
            self.seq(depth + 1, false, 0)
        }
    }

    fn scope(&mut self, depth: u32, spawn_ok: bool, mode: Option<Propagation>) -> Node {
        self.ids += 1;
        let id = self.ids;
        let mode = mode.unwrap_or_else(|| match self.rng.u32(0..20) {
            0..=4 => Propagation::Required,
            5..=12 => Propagation::Nested,
            13..=15 => Propagation::RequiresNew,
            16..=17 => Propagation::Mandatory,
            _ => Propagation::Never,
        });
        // The outermost scope mostly commits, so its rows can show.
        let end = match (depth, self.rng.u32(0..20)) {
            (0, 0..=17) | (1.., 0..=11) => End::Ok,
            (_, 0..=16) => End::Err,
            _ => End::Panic,
        };
        let cut = (depth > 0 && self.rng.u32(0..6) == 0).then(|| self.rng.usize(0..6));
        let body = self.seq(depth + 1, spawn_ok && cut.is_none(), 1);
        Node::Scope(Box::new(Spec {
            id,
            mode,
            end,
            cut,
            body,
        }))
    }
}

/// What a scope returned.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Ok,
    /// Its body's own error.
    App,
    Panic,
    /// A `TxError`, by its variant's name.
    Tx(String),
}

fn tx_name<E: std::fmt::Debug>(e: &TxError<E>) -> String {
    let text = format!("{e:?}");
    text.split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// What the run showed, as far as timing decided it.
#[derive(Default, Debug)]
struct Obs {
    scope_started: HashSet<usize>,
    body_done: HashSet<usize>,
    results: HashMap<usize, Outcome>,
    spawn_started: HashSet<usize>,
    insert_started: HashSet<i64>,
    insert_done: HashSet<i64>,
    insert_failed: Vec<String>,
}

/// How the test reaches one manager's database.
pub struct Db<M: TransactionalManager> {
    pub pool: Pool<M>,
    /// Inserts a value in the current transaction, or in autocommit.
    pub insert: InsertFn<M>,
    /// Runs a statement on a checkout of its own.
    pub exec: fn(Pool<M>, String) -> BoxFuture<'static, ()>,
    /// The committed values of a table.
    pub values: fn(Pool<M>, String) -> BoxFuture<'static, Vec<i64>>,
    /// Whether the connection's session is outside any transaction.
    pub outside: for<'a> fn(&'a mut PooledConnection<M>) -> BoxFuture<'a, bool>,
}

struct Run<M: TransactionalManager> {
    pool: Pool<M>,
    table: String,
    insert: InsertFn<M>,
    obs: Mutex<Obs>,
}

impl<M: TransactionalManager> Run<M> {
    fn obs(&self) -> std::sync::MutexGuard<'_, Obs> {
        self.obs.lock().unwrap()
    }
}

fn run_seq<M>(run: Arc<Run<M>>, seq: Vec<Node>) -> BoxFuture<'static, ()>
where
    M: TransactionalManager,
    M::Error: std::fmt::Debug + Send,
{
    Box::pin(async move {
        for node in seq {
            match node {
                Node::Insert(v) => {
                    run.obs().insert_started.insert(v);
                    match (run.insert)(run.pool.clone(), run.table.clone(), v).await {
                        Ok(()) => {
                            run.obs().insert_done.insert(v);
                        }
                        Err(e) => run.obs().insert_failed.push(format!("insert {v}: {e}")),
                    }
                }
                Node::Scope(spec) => run_scope(run.clone(), *spec).await,
                Node::Join(a, b) => {
                    tokio::join!(run_seq(run.clone(), a), run_seq(run.clone(), b));
                }
                Node::Select(a, b) => {
                    tokio::select! {
                        () = run_seq(run.clone(), a) => {}
                        () = run_seq(run.clone(), b) => {}
                    }
                }
                Node::Spawn { id, ok, body } => {
                    run.obs().spawn_started.insert(id);
                    let task_run = run.clone();
                    let task = pool_ambient::spawn(async move {
                        run_seq(task_run, body).await;
                        if ok {
                            Ok(())
                        } else {
                            Err(Fail::<M::Error>::App("the task fails"))
                        }
                    });
                    let _ = task.await;
                }
            }
        }
    })
}

fn run_scope<M>(run: Arc<Run<M>>, spec: Spec) -> BoxFuture<'static, ()>
where
    M: TransactionalManager,
    M::Error: std::fmt::Debug + Send,
{
    Box::pin(async move {
        let Spec {
            id,
            mode,
            end,
            cut,
            body,
        } = spec;
        run.obs().scope_started.insert(id);
        let inner = run.clone();
        let body = async move {
            run_seq(inner.clone(), body).await;
            inner.obs().body_done.insert(id);
            match end {
                End::Ok => Ok(()),
                End::Err => Err(Fail::App("the body fails")),
                End::Panic => std::panic::panic_any(PANIC),
            }
        };
        let scope =
            AssertUnwindSafe(run.pool.transaction().propagation(mode).run(body)).catch_unwind();
        let ended = match cut {
            None => Some(scope.await),
            Some(n) => crate::pg_common::cancel_at_pending(scope, n).await,
        };
        let outcome = match ended {
            None => return,
            Some(Err(_panic)) => Outcome::Panic,
            Some(Ok(Ok(()))) => Outcome::Ok,
            Some(Ok(Err(Fail::App(_)))) => Outcome::App,
            Some(Ok(Err(Fail::Tx(e)))) => Outcome::Tx(tx_name(&e)),
        };
        run.obs().results.insert(id, outcome);
    })
}

/// A row's fate by the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Kept,
    Lost,
    /// Cut while its fate was being sent (a `COMMIT` in flight, an insert
    /// in flight in a transaction that commits).
    Either,
}

struct TxModel {
    rollback_only: bool,
    fate: Fate,
}

struct Val {
    v: i64,
    tx: Option<usize>,
    savepoints: Vec<usize>,
    done: bool,
}

#[derive(Clone)]
struct Ctx {
    tx: Option<usize>,
    savepoints: Vec<usize>,
    /// In a handed task that shares `tx`.
    shared: bool,
    /// The scope whose subtasks a `spawn` here counts in (0: none).
    level: usize,
}

struct Model<'a> {
    obs: &'a Obs,
    txs: Vec<TxModel>,
    vals: Vec<Val>,
    rolled_back: HashSet<usize>,
    failed_levels: HashSet<usize>,
    mismatches: Vec<String>,
}

impl Model<'_> {
    fn walk(&mut self, seq: &[Node], ctx: &Ctx) {
        for node in seq {
            match node {
                Node::Insert(v) => {
                    if self.obs.insert_started.contains(v) {
                        self.vals.push(Val {
                            v: *v,
                            tx: ctx.tx,
                            savepoints: ctx.savepoints.clone(),
                            done: self.obs.insert_done.contains(v),
                        });
                    }
                }
                Node::Join(a, b) | Node::Select(a, b) => {
                    self.walk(a, ctx);
                    self.walk(b, ctx);
                }
                Node::Spawn { id, ok, body } => {
                    if self.obs.spawn_started.contains(id) {
                        let inside = Ctx {
                            shared: ctx.tx.is_some(),
                            ..ctx.clone()
                        };
                        self.walk(body, &inside);
                        if !ok {
                            self.failed_levels.insert(ctx.level);
                        }
                    }
                }
                Node::Scope(spec) => self.scope(spec, ctx),
            }
        }
    }

    fn expect(&mut self, id: usize, predicted: &Outcome) {
        if let Some(seen) = self.obs.results.get(&id) {
            if seen != predicted {
                self.mismatches.push(format!(
                    "scope {id} returned {seen:?}, the model says {predicted:?}"
                ));
            }
        }
    }

    /// A joining or savepoint scope's result, from its end and its tasks.
    fn inner_result(&self, id: usize, end: End) -> Outcome {
        match end {
            End::Err => Outcome::App,
            End::Panic => Outcome::Panic,
            End::Ok if self.failed_levels.contains(&id) => Outcome::Tx("ChildFailed".into()),
            End::Ok => Outcome::Ok,
        }
    }

    fn scope(&mut self, spec: &Spec, ctx: &Ctx) {
        let id = spec.id;
        if !self.obs.scope_started.contains(&id) {
            return;
        }
        let finished = self.obs.results.contains_key(&id);
        let refused = |name: &str| Outcome::Tx(name.to_owned());
        match (spec.mode, ctx.tx) {
            (Propagation::Never, Some(_)) => self.expect(id, &refused("AlreadyInTransaction")),
            (Propagation::Mandatory, None) => self.expect(id, &refused("NoTransaction")),
            (Propagation::Nested, Some(_)) if ctx.shared => self.expect(id, &refused("Shared")),
            (Propagation::Never, None) => {
                let inside = Ctx {
                    level: id,
                    ..ctx.clone()
                };
                self.walk(&spec.body, &inside);
                let predicted = match spec.end {
                    End::Ok => Outcome::Ok,
                    End::Err => Outcome::App,
                    End::Panic => Outcome::Panic,
                };
                self.expect(id, &predicted);
            }
            (Propagation::Required | Propagation::Mandatory, Some(tx)) => {
                let inside = Ctx {
                    level: id,
                    ..ctx.clone()
                };
                self.walk(&spec.body, &inside);
                let predicted = self.inner_result(id, spec.end);
                if !finished || predicted != Outcome::Ok {
                    self.txs[tx].rollback_only = true;
                }
                self.expect(id, &predicted);
            }
            (Propagation::Nested, Some(tx)) => {
                let mut savepoints = ctx.savepoints.clone();
                savepoints.push(id);
                let inside = Ctx {
                    savepoints,
                    level: id,
                    ..ctx.clone()
                };
                self.walk(&spec.body, &inside);
                let predicted = self.inner_result(id, spec.end);
                if !finished {
                    self.txs[tx].rollback_only = true;
                } else if predicted != Outcome::Ok {
                    self.rolled_back.insert(id);
                }
                self.expect(id, &predicted);
            }
            _ => {
                // Begins a transaction of its own.
                let tx = self.txs.len();
                self.txs.push(TxModel {
                    rollback_only: false,
                    fate: Fate::Lost,
                });
                let inside = Ctx {
                    tx: Some(tx),
                    savepoints: Vec::new(),
                    shared: false,
                    level: id,
                };
                self.walk(&spec.body, &inside);
                let predicted = match spec.end {
                    End::Err => Outcome::App,
                    End::Panic => Outcome::Panic,
                    End::Ok if self.failed_levels.contains(&id) => {
                        Outcome::Tx("ChildFailed".into())
                    }
                    End::Ok if self.txs[tx].rollback_only => Outcome::Tx("RollbackOnly".into()),
                    End::Ok => Outcome::Ok,
                };
                self.txs[tx].fate = match (finished, predicted == Outcome::Ok) {
                    (true, true) => Fate::Kept,
                    (false, true) if self.obs.body_done.contains(&id) => Fate::Either,
                    _ => Fate::Lost,
                };
                self.expect(id, &predicted);
            }
        }
    }

    fn fate(&self, val: &Val) -> Fate {
        let Some(tx) = val.tx else {
            return if val.done { Fate::Kept } else { Fate::Either };
        };
        if val
            .savepoints
            .iter()
            .any(|sp| self.rolled_back.contains(sp))
        {
            return Fate::Lost;
        }
        match self.txs[tx].fate {
            Fate::Lost => Fate::Lost,
            fate if val.done => fate,
            _ => Fate::Either,
        }
    }
}

/// Checks every idle connection of the pool: none is inside a transaction.
async fn all_outside<M: TransactionalManager>(db: &Db<M>) -> Result<(), String> {
    let settled = crate::support::db::eventually(Duration::from_secs(10), || async {
        db.pool.state().in_use == 0
    })
    .await;
    if !settled {
        return Err(format!("connections still in use: {:?}", db.pool.state()));
    }
    let idle = db.pool.state().idle;
    let mut held = Vec::new();
    for _ in 0..idle {
        held.push(db.pool.get().await.map_err(|e| format!("checkout: {e}"))?);
    }
    for conn in &mut held {
        if !(db.outside)(conn).await {
            return Err("a returned connection is inside a transaction".to_owned());
        }
    }
    Ok(())
}

async fn case<M>(db: &Db<M>, table: &str, seed: u64) -> Result<(), String>
where
    M: TransactionalManager,
    M::Error: std::fmt::Debug + Send,
{
    let tree = tree(seed);
    let run = Arc::new(Run {
        pool: db.pool.clone(),
        table: table.to_owned(),
        insert: db.insert,
        obs: Mutex::new(Obs::default()),
    });
    let ran = tokio::time::timeout(CASE_BOUND, run_seq(run.clone(), tree.clone())).await;
    if ran.is_err() {
        return Err(format!(
            "seed {seed}: did not finish within {CASE_BOUND:?}: {tree:#?}"
        ));
    }
    let obs = std::mem::take(&mut *run.obs());
    let mut model = Model {
        obs: &obs,
        txs: Vec::new(),
        vals: Vec::new(),
        rolled_back: HashSet::new(),
        failed_levels: HashSet::new(),
        mismatches: Vec::new(),
    };
    model.walk(
        &tree,
        &Ctx {
            tx: None,
            savepoints: Vec::new(),
            shared: false,
            level: 0,
        },
    );
    let mut wrong = std::mem::take(&mut model.mismatches);
    wrong.extend(obs.insert_failed.iter().cloned());
    let kept: HashSet<i64> = (db.values)(db.pool.clone(), table.to_owned())
        .await
        .into_iter()
        .collect();
    let mut known = HashSet::new();
    for val in &model.vals {
        known.insert(val.v);
        match (model.fate(val), kept.contains(&val.v)) {
            (Fate::Kept, false) => wrong.push(format!("row {} lost; the model keeps it", val.v)),
            (Fate::Lost, true) => wrong.push(format!("row {} kept; the model drops it", val.v)),
            _ => {}
        }
    }
    for v in kept.difference(&known) {
        wrong.push(format!("row {v} kept, but its insert never started"));
    }
    if let Err(e) = all_outside(db).await {
        wrong.push(e);
    }
    (db.exec)(db.pool.clone(), format!("DELETE FROM {table}")).await;
    if std::env::var_os("AMBIENT_MODEL_DEBUG").is_some() {
        eprintln!(
            "seed {seed}: {} scopes, {} finished, {} rows of {} inserts kept, results {:?}",
            count_scopes(&tree),
            obs.results.len(),
            kept.len(),
            obs.insert_started.len(),
            obs.results.values().collect::<Vec<_>>()
        );
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "seed {seed}: {wrong:#?}\ntree: {tree:#?}\nobserved: {obs:#?}"
        ))
    }
}

/// Keeps the bodies' deliberate panics out of the test output.
fn quiet_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&PANIC) {
                previous(info);
            }
        }));
    });
}

/// Runs the property on `db` (made on `rt`): [`CASES`] trees, no
/// shrinking (a seed names its tree, printed on failure).
pub fn check<M>(rt: &tokio::runtime::Runtime, db: &Db<M>, prefix: &str)
where
    M: TransactionalManager,
    M::Error: std::fmt::Debug + Send,
{
    quiet_panics();
    let table = crate::pg_common::TableGuard::new(prefix);
    rt.block_on((db.exec)(
        db.pool.clone(),
        format!("CREATE TABLE {} (v BIGINT)", table.name),
    ));
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        max_shrink_iters: 0,
        failure_persistence: None,
        ..Config::default()
    });
    let outcome = runner.run(&any::<u64>(), |seed| {
        rt.block_on(case(db, &table.name, seed))
            .map_err(TestCaseError::fail)
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

/// The pool every manager's run uses.
pub fn config(name: &str) -> pool_core::PoolConfig {
    crate::support::db::named_config(name, POOL_SIZE, Duration::from_secs(5))
}

#[cfg(feature = "tokio-postgres")]
mod tokio_pg {
    use super::*;
    use pool_postgres::PostgresManager;
    use tokio_postgres::NoTls;

    type M = PostgresManager<NoTls>;

    fn db(rt: &tokio::runtime::Runtime) -> Db<M> {
        let url = crate::support::db::url("DATABASE_URL");
        let manager = PostgresManager::new(url.parse().unwrap(), NoTls);
        let pool = rt
            .block_on(Pool::new(manager, config("ambient-model-tokio-postgres")))
            .unwrap();
        Db {
            pool,
            insert: |pool, t, v| {
                Box::pin(async move {
                    let conn = pool
                        .current_or_checkout()
                        .await
                        .map_err(|e| e.to_string())?;
                    conn.batch_execute(&format!("INSERT INTO {t} (v) VALUES ({v})"))
                        .await
                        .map_err(|e| e.to_string())
                })
            },
            exec: |pool, sql| {
                Box::pin(async move {
                    pool.get().await.unwrap().batch_execute(&sql).await.unwrap();
                })
            },
            values: |pool, t| {
                Box::pin(async move {
                    let conn = pool.get().await.unwrap();
                    let rows = conn
                        .query(format!("SELECT v FROM {t}").as_str(), &[])
                        .await
                        .unwrap();
                    rows.iter().map(|row| row.get(0)).collect()
                })
            },
            outside: |conn| {
                Box::pin(async move {
                    match conn.simple_query(crate::pg_common::OUTSIDE_A_TRANSACTION).await {
                        Ok(messages) => messages.iter().any(|m| {
                            matches!(m, tokio_postgres::SimpleQueryMessage::Row(row) if row.get(0) == Some("t"))
                        }),
                        Err(_) => false,
                    }
                })
            },
        }
    }

    #[test]
    #[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
    fn scope_trees_commit_what_the_model_says() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let db = db(&rt);
        check(&rt, &db, "ambient_model_tp");
    }
}

#[cfg(feature = "sqlx-postgres")]
mod sqlx_pg {
    use super::*;
    use pool_sqlx::{Pool as SqlxPool, SqlxManager};
    use sqlx::{AssertSqlSafe, PgConnection};

    type M = SqlxManager<PgConnection>;

    fn db(rt: &tokio::runtime::Runtime) -> Db<M> {
        let url = crate::support::db::url("DATABASE_URL");
        let manager = SqlxManager::<PgConnection>::from_url(&url).unwrap();
        let pool = rt
            .block_on(SqlxPool::new(manager, config("ambient-model-sqlx")))
            .unwrap()
            .into_inner();
        Db {
            pool,
            insert: |pool, t, v| {
                Box::pin(async move {
                    let mut conn = pool
                        .current_or_checkout()
                        .await
                        .map_err(|e| e.to_string())?;
                    sqlx::query(AssertSqlSafe(format!("INSERT INTO {t} (v) VALUES ({v})")))
                        .execute(&mut *conn)
                        .await
                        .map(drop)
                        .map_err(|e| e.to_string())
                })
            },
            exec: |pool, sql| {
                Box::pin(async move {
                    sqlx::query(AssertSqlSafe(sql))
                        .execute(&SqlxPool::from(pool))
                        .await
                        .unwrap();
                })
            },
            values: |pool, t| {
                Box::pin(async move {
                    sqlx::query_scalar(AssertSqlSafe(format!("SELECT v FROM {t}")))
                        .fetch_all(&SqlxPool::from(pool))
                        .await
                        .unwrap()
                })
            },
            outside: |conn| {
                Box::pin(async move {
                    use sqlx::Row;
                    match sqlx::raw_sql(crate::pg_common::OUTSIDE_A_TRANSACTION)
                        .fetch_one(&mut **conn)
                        .await
                    {
                        Ok(row) => row.get::<bool, _>(0),
                        Err(_) => false,
                    }
                })
            },
        }
    }

    #[test]
    #[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
    fn scope_trees_commit_what_the_model_says() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let db = db(&rt);
        check(&rt, &db, "ambient_model_sqlx");
    }
}
