//! A fair queue in front of an embedder: queries in their own lane, tenants in turn.
//!
//! Whoever calls the embedder first would otherwise decide everyone's latency.
//! [`EmbedQueue`] makes that a policy instead of a race:
//!
//! - **Two lanes, each with its own workers.** Queries ([`EmbedQueue::query`]) and
//!   passages ([`EmbedQueue::passages`], i.e. ingest) wait in separate lanes, served by
//!   separate threads ([`QueueConfig::query_workers`] and [`QueueConfig::workers`]), so a
//!   query embedding never waits behind an ingest batch: it starts as soon as a query
//!   worker is free, even while passage sub-batches are being embedded. The inner
//!   embedder is `Send + Sync` and is called from both lanes at once. A passages job is
//!   cut into sub-batches of [`QueueConfig::sub_batch`] texts, so that tenants take turns
//!   and a cancellation takes effect between them.
//! - **Round-robin across tenants** within a lane, one item (a query, or one passage
//!   sub-batch) per turn: a tenant with a hundred queued queries delays another tenant's
//!   single query by at most one item.
//! - **Bounded.** Each tenant may have [`QueueConfig::max_per_tenant`] jobs queued or
//!   running per lane; beyond that a submission is refused at once (see
//!   [`QueueRefusal::Busy`]: a server answers 429 or 503).
//! - **Cancellable.** Every job carries a [`Cancel`] token. A job whose token is
//!   cancelled or past its deadline is taken off the queue without ever reaching the
//!   embedder; a passages job is checked between sub-batches; and the caller gets its
//!   error back promptly (within [`CANCEL_POLL`]) instead of waiting for the worker.
//! - **No starvation between lanes.** The lanes share no worker, so neither can hold
//!   the other up: a stream of queries competes with ingest for the cores, never for a
//!   turn. (Within a lane, round-robin keeps tenants from starving each other.)
//!
//! The worker threads own every call into the inner embedder; callers block on their
//! own job. A panic in the embedder fails that job, not the worker. [`EmbedQueue`] is
//! also an [`Embedder`] (tenant `""`, no cancellation), and [`EmbedQueue::as_embedder`]
//! gives one per tenant, so code written against `dyn Embedder` goes through the queue
//! unchanged.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use dossier_core::cancel::{Cancel, Cancelled};
use dossier_core::{Embedder, Error, Result};
use parking_lot::{Condvar, Mutex, MutexGuard};

/// How often a waiting caller looks at its [`Cancel`] token (sooner at its deadline).
pub const CANCEL_POLL: Duration = Duration::from_millis(10);

const BUSY: &str = "embed queue full";
const CANCELLED: &str = "embed queue: cancelled";
const DEADLINE: &str = "embed queue: deadline exceeded";
const SHUT_DOWN: &str = "embed queue shut down";

/// Settings of an [`EmbedQueue`]. Zeros are read as 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    /// Threads embedding passages, the ingest lane (default 1: an in-process model
    /// already uses every core per call; more mainly helps remote providers).
    pub workers: usize,
    /// Threads embedding queries, the query lane (default 1). They never take passage
    /// work, so a query never waits behind an ingest sub-batch; more than one lets
    /// several queries be embedded at once.
    pub query_workers: usize,
    /// Passages per call into the inner embedder (default 8): the unit of a tenant's
    /// turn in the ingest lane, and how often a passages job looks at its [`Cancel`].
    pub sub_batch: usize,
    /// Jobs one tenant may have queued or running in one lane (default 64); a further
    /// submission is refused with [`QueueRefusal::Busy`].
    pub max_per_tenant: usize,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            workers: 1,
            query_workers: 1,
            sub_batch: 8,
            max_per_tenant: 64,
        }
    }
}

/// Why the queue, rather than the embedder, failed a call; see [`queue_refusal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueRefusal {
    /// The tenant already has [`QueueConfig::max_per_tenant`] jobs in that lane: retry
    /// later (HTTP 429, or 503 with `Retry-After`).
    Busy,
    /// The caller's token was cancelled.
    Cancelled,
    /// The caller's token passed its deadline (HTTP 503 or 504).
    DeadlineExceeded,
    /// The queue is shutting down.
    ShutDown,
}

/// Tells a queue refusal from an embedder failure.
///
/// `dossier_core::Error` has no variant for "busy" or "cancelled" yet, so the queue
/// reports them as [`Error::Embedding`] with fixed message prefixes, and this function
/// recognises them. `None` for every other error.
pub fn queue_refusal(err: &Error) -> Option<QueueRefusal> {
    let Error::Embedding(m) = err else {
        return None;
    };
    [
        (BUSY, QueueRefusal::Busy),
        (CANCELLED, QueueRefusal::Cancelled),
        (DEADLINE, QueueRefusal::DeadlineExceeded),
        (SHUT_DOWN, QueueRefusal::ShutDown),
    ]
    .into_iter()
    .find_map(|(prefix, r)| m.starts_with(prefix).then_some(r))
}

fn cancelled_error(c: Cancelled) -> Error {
    Error::Embedding(match c {
        Cancelled::Cancelled => CANCELLED.to_string(),
        Cancelled::DeadlineExceeded => DEADLINE.to_string(),
    })
}

/// What the queue holds right now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Queries waiting for a query worker.
    pub queued_queries: usize,
    /// Passage sub-batches waiting for a passage worker.
    pub queued_passage_batches: usize,
    /// Calls into the inner embedder in progress, both lanes.
    pub running: usize,
    /// Of those, query calls.
    pub running_queries: usize,
    /// Jobs submitted and not yet answered.
    pub open_jobs: usize,
}

/// A fair, bounded, cancellable queue in front of an [`Embedder`]; see the module
/// documentation. Clones share one queue; the workers stop when the last clone (or
/// [`TenantEmbedder`]) is dropped, after the call in progress.
#[derive(Clone)]
pub struct EmbedQueue {
    handle: Arc<Handle>,
}

/// Owns the worker threads; dropping it stops them.
struct Handle {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

struct Shared {
    inner: Arc<dyn Embedder>,
    config: QueueConfig,
    state: Mutex<State>,
    /// Each lane's workers wait here for its units (indexed by [`Lane`]).
    work: [Condvar; 2],
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Lane {
    Query = 0,
    Passage = 1,
}

#[derive(Default)]
struct State {
    lanes: [LaneQueue; 2],
    jobs: HashMap<u64, Job>,
    next_id: u64,
    /// Calls into the inner embedder in progress, by lane.
    running: [usize; 2],
    shutdown: bool,
}

#[derive(Default)]
struct LaneQueue {
    tenants: HashMap<String, TenantQueue>,
    /// Tenants with queued units, in the order they are served next.
    ring: VecDeque<String>,
}

#[derive(Default)]
struct TenantQueue {
    units: VecDeque<Unit>,
    /// Jobs of this tenant in this lane submitted and not yet answered.
    open: usize,
}

/// One call into the inner embedder.
struct Unit {
    job: u64,
    work: Work,
}

enum Work {
    Query(Arc<str>),
    Passages(Arc<[String]>, Range<usize>),
}

struct Job {
    lane: Lane,
    tenant: String,
    cancel: Cancel,
    /// Units not yet computed.
    remaining: usize,
    out: Vec<Option<Vec<f32>>>,
    /// Set once: the answer the caller picks up.
    result: Option<Result<Vec<Vec<f32>>>>,
    done: Arc<Condvar>,
}

impl LaneQueue {
    /// The next unit, round-robin across tenants.
    fn pop(&mut self) -> Option<Unit> {
        loop {
            let tenant = self.ring.pop_front()?;
            let Some(tq) = self.tenants.get_mut(&tenant) else {
                continue;
            };
            let Some(unit) = tq.units.pop_front() else {
                continue;
            };
            if !tq.units.is_empty() {
                self.ring.push_back(tenant);
            }
            return Some(unit);
        }
    }

    fn queued(&self) -> usize {
        self.tenants.values().map(|t| t.units.len()).sum()
    }
}

impl State {
    /// The next unit of `lane` to run, skipping (and answering) jobs whose token is
    /// cancelled.
    fn pick(&mut self, lane: Lane) -> Option<Unit> {
        loop {
            let unit = self.lanes[lane as usize].pop()?;
            let Some(job) = self.jobs.get(&unit.job) else {
                continue; // answered already (defensive: answered jobs are purged)
            };
            if job.result.is_some() {
                continue;
            }
            if let Err(c) = job.cancel.check() {
                self.finish(unit.job, Err(cancelled_error(c)));
                continue;
            }
            self.running[lane as usize] += 1;
            return Some(unit);
        }
    }

    /// Answers a job: frees its place in the bound, drops its queued units, wakes its
    /// caller. Later answers for it are ignored.
    fn finish(&mut self, id: u64, result: Result<Vec<Vec<f32>>>) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        if job.result.is_some() {
            return;
        }
        job.result = Some(result);
        job.out = Vec::new();
        job.done.notify_all();
        let (lane, tenant) = (job.lane, job.tenant.clone());
        let lq = &mut self.lanes[lane as usize];
        if let Some(tq) = lq.tenants.get_mut(&tenant) {
            tq.open = tq.open.saturating_sub(1);
            tq.units.retain(|u| u.job != id);
            if tq.units.is_empty() {
                lq.ring.retain(|t| *t != tenant);
                if tq.open == 0 {
                    lq.tenants.remove(&tenant);
                }
            }
        }
    }

    /// Records what a worker computed for one unit of job `id`.
    fn complete(&mut self, lane: Lane, id: u64, start: usize, res: Result<Vec<Vec<f32>>>) {
        self.running[lane as usize] -= 1;
        let Some(job) = self.jobs.get_mut(&id) else {
            return; // the caller gave up on it meanwhile
        };
        if job.result.is_some() {
            return;
        }
        let vectors = match res {
            Ok(v) => v,
            Err(e) => return self.finish(id, Err(e)),
        };
        let end = start + vectors.len();
        if end > job.out.len() {
            let n = job.out.len();
            return self.finish(
                id,
                Err(Error::Embedding(format!(
                    "embedder returned {} vectors past the {n} asked for",
                    end - n
                ))),
            );
        }
        for (slot, v) in job.out[start..end].iter_mut().zip(vectors) {
            *slot = Some(v);
        }
        job.remaining -= 1;
        if job.remaining == 0 {
            let out: Option<Vec<Vec<f32>>> = std::mem::take(&mut job.out).into_iter().collect();
            let result = out.ok_or_else(|| {
                Error::Embedding("embedder returned fewer vectors than texts".into())
            });
            self.finish(id, result);
        }
    }
}

impl EmbedQueue {
    /// A queue in front of `inner`, with `config.query_workers` threads serving the
    /// query lane and `config.workers` threads serving the passage lane.
    pub fn new(inner: Arc<dyn Embedder>, config: QueueConfig) -> EmbedQueue {
        let shared = Arc::new(Shared {
            inner,
            config,
            state: Mutex::new(State::default()),
            work: [Condvar::new(), Condvar::new()],
        });
        let lanes = [
            (Lane::Query, "q", shared.config.query_workers.max(1)),
            (Lane::Passage, "p", shared.config.workers.max(1)),
        ];
        let workers = lanes
            .into_iter()
            .flat_map(|(lane, tag, n)| (0..n).map(move |i| (lane, tag, i)))
            .map(|(lane, tag, i)| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("dossier-embed-{tag}{i}"))
                    .spawn(move || work(&shared, lane))
                    .expect("spawning an embed queue worker")
            })
            .collect();
        EmbedQueue {
            handle: Arc::new(Handle { shared, workers }),
        }
    }

    /// Embeds one query in the query lane, in `tenant`'s turn; it never waits behind
    /// passage work.
    pub fn query(&self, tenant: &str, text: &str, cancel: &Cancel) -> Result<Vec<f32>> {
        let units = vec![Work::Query(Arc::from(text))];
        let mut out = self.run(Lane::Query, tenant, units, 1, cancel)?;
        out.pop()
            .ok_or_else(|| Error::Embedding("embedder returned no vector for a query".into()))
    }

    /// Embeds passages in the ingest lane, [`QueueConfig::sub_batch`] at a time, in
    /// `tenant`'s turns. The vectors come back in the order of `texts`.
    pub fn passages(&self, tenant: &str, texts: &[&str], cancel: &Cancel) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            cancel.check().map_err(cancelled_error)?;
            return Ok(Vec::new());
        }
        let owned: Arc<[String]> = texts.iter().map(|t| t.to_string()).collect();
        let step = self.handle.shared.config.sub_batch.max(1);
        let units = (0..texts.len())
            .step_by(step)
            .map(|s| Work::Passages(Arc::clone(&owned), s..(s + step).min(texts.len())))
            .collect();
        self.run(Lane::Passage, tenant, units, texts.len(), cancel)
    }

    /// An [`Embedder`] that submits as `tenant` (with no cancellation; see
    /// [`TenantEmbedder::with_cancel`]).
    pub fn as_embedder(&self, tenant: &str) -> TenantEmbedder {
        TenantEmbedder {
            queue: self.clone(),
            tenant: tenant.to_string(),
            cancel: Cancel::new(),
        }
    }

    /// The embedder behind the queue.
    pub fn inner(&self) -> &Arc<dyn Embedder> {
        &self.handle.shared.inner
    }

    /// The settings the queue runs with.
    pub fn config(&self) -> &QueueConfig {
        &self.handle.shared.config
    }

    /// A snapshot of what is queued and running.
    pub fn stats(&self) -> QueueStats {
        let st = self.handle.shared.state.lock();
        QueueStats {
            queued_queries: st.lanes[Lane::Query as usize].queued(),
            queued_passage_batches: st.lanes[Lane::Passage as usize].queued(),
            running: st.running.iter().sum(),
            running_queries: st.running[Lane::Query as usize],
            open_jobs: st.jobs.len(),
        }
    }

    /// Queues `units` as one job and waits for its answer or for `cancel`.
    fn run(
        &self,
        lane: Lane,
        tenant: &str,
        units: Vec<Work>,
        n_out: usize,
        cancel: &Cancel,
    ) -> Result<Vec<Vec<f32>>> {
        cancel.check().map_err(cancelled_error)?;
        let shared = &self.handle.shared;
        let mut st = shared.state.lock();
        if st.shutdown {
            return Err(Error::Embedding(SHUT_DOWN.into()));
        }
        let max = shared.config.max_per_tenant.max(1);
        let id = st.next_id;
        let lq = &mut st.lanes[lane as usize];
        let tq = lq.tenants.entry(tenant.to_string()).or_default();
        if tq.open >= max {
            let what = match lane {
                Lane::Query => "queries",
                Lane::Passage => "passage jobs",
            };
            return Err(Error::Embedding(format!(
                "{BUSY}: tenant {tenant:?} already has {} {what} waiting (limit {max}); retry later",
                tq.open
            )));
        }
        let was_idle = tq.units.is_empty();
        tq.open += 1;
        let n_units = units.len();
        tq.units
            .extend(units.into_iter().map(|work| Unit { job: id, work }));
        if was_idle {
            lq.ring.push_back(tenant.to_string());
        }
        let done = Arc::new(Condvar::new());
        st.next_id += 1;
        st.jobs.insert(
            id,
            Job {
                lane,
                tenant: tenant.to_string(),
                cancel: cancel.clone(),
                remaining: n_units,
                out: vec![None; n_out],
                result: None,
                done: Arc::clone(&done),
            },
        );
        if n_units == 1 {
            shared.work[lane as usize].notify_one();
        } else {
            shared.work[lane as usize].notify_all();
        }
        wait(&mut st, id, &done, cancel)
    }
}

/// Blocks until job `id` is answered or `cancel` fires; either way the job is gone
/// from the state afterwards.
fn wait(
    st: &mut MutexGuard<'_, State>,
    id: u64,
    done: &Condvar,
    cancel: &Cancel,
) -> Result<Vec<Vec<f32>>> {
    loop {
        let job = st
            .jobs
            .get_mut(&id)
            .expect("a job stays until its caller takes it");
        if let Some(result) = job.result.take() {
            st.jobs.remove(&id);
            return result;
        }
        if let Err(c) = cancel.check() {
            // Frees the job's place and its queued units now; a unit already running
            // finishes on the worker and its result is dropped.
            st.finish(id, Err(cancelled_error(c)));
            let result = st.jobs.remove(&id).and_then(|j| j.result);
            return result.unwrap_or_else(|| Err(cancelled_error(c)));
        }
        let timeout = cancel
            .remaining()
            .map_or(CANCEL_POLL, |r| r.min(CANCEL_POLL));
        done.wait_for(st, timeout);
    }
}

/// A worker of `lane`: takes that lane's units in the queue's order and calls the
/// inner embedder.
fn work(shared: &Shared, lane: Lane) {
    loop {
        let unit = {
            let mut st = shared.state.lock();
            loop {
                if st.shutdown {
                    return;
                }
                match st.pick(lane) {
                    Some(unit) => break unit,
                    None => shared.work[lane as usize].wait(&mut st),
                }
            }
        };
        let inner = &*shared.inner;
        let (start, res) = match &unit.work {
            Work::Query(text) => (0, call(|| inner.embed_query(text).map(|v| vec![v]))),
            Work::Passages(texts, range) => {
                let batch: Vec<&str> = texts[range.clone()].iter().map(String::as_str).collect();
                let res = call(|| inner.embed_passages(&batch));
                let res = res.and_then(|vs| {
                    if vs.len() == batch.len() {
                        Ok(vs)
                    } else {
                        Err(Error::Embedding(format!(
                            "embedder returned {} vectors for {} passages",
                            vs.len(),
                            batch.len()
                        )))
                    }
                });
                (range.start, res)
            }
        };
        shared.state.lock().complete(lane, unit.job, start, res);
    }
}

/// Runs one embedder call, turning a panic into an error so the worker survives.
fn call(f: impl FnOnce() -> Result<Vec<Vec<f32>>>) -> Result<Vec<Vec<f32>>> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let msg = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        Err(Error::Embedding(format!("embedder panicked: {msg}")))
    })
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.state.lock().shutdown = true;
        for lane in &self.shared.work {
            lane.notify_all();
        }
        let me = std::thread::current().id();
        for worker in self.workers.drain(..) {
            // A worker cannot join itself (the inner embedder dropping the last handle).
            if worker.thread().id() != me {
                let _ = worker.join();
            }
        }
    }
}

/// Routes through the queue as tenant `""`, without cancellation: queries in the
/// query lane, passages in the ingest lane.
impl Embedder for EmbedQueue {
    fn name(&self) -> &str {
        self.handle.shared.inner.name()
    }

    fn dim(&self) -> usize {
        self.handle.shared.inner.dim()
    }

    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.passages("", texts, &Cancel::new())
    }

    fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        self.query("", text, &Cancel::new())
    }
}

/// An [`EmbedQueue`] seen as an [`Embedder`] for one tenant ([`EmbedQueue::as_embedder`]).
#[derive(Clone)]
pub struct TenantEmbedder {
    queue: EmbedQueue,
    tenant: String,
    cancel: Cancel,
}

impl TenantEmbedder {
    /// The same, with every call made under `cancel`.
    pub fn with_cancel(mut self, cancel: Cancel) -> Self {
        self.cancel = cancel;
        self
    }

    /// The tenant calls are made as.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }
}

impl Embedder for TenantEmbedder {
    fn name(&self) -> &str {
        self.queue.name()
    }

    fn dim(&self) -> usize {
        self.queue.dim()
    }

    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.queue.passages(&self.tenant, texts, &self.cancel)
    }

    fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        self.queue.query(&self.tenant, text, &self.cancel)
    }
}
