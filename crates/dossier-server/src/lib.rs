//! Dossier's HTTP API (`dossier serve`): one [`dossier_engine::Engine`] behind axum.
//!
//! This crate owns the wire: routing, authentication by API key, request ids, the JSON
//! error body and the OpenAPI description. It holds no retrieval logic; every answer is
//! the engine's (or the agent's) answer for the caller's principal.
//!
//! **Invariants:**
//! - **Identity comes only from the API key.** `Authorization: Bearer KEY` is hashed
//!   (SHA-256) and looked up in the keys file; the principal id bound to that hash is the
//!   caller. Request bodies reject unknown fields, so a body cannot even name a
//!   principal, and no other header is consulted. Tenant and groups then come from the
//!   store's principals, as everywhere else.
//! - **Errors are mapped to HTTP in one place** ([`error`]): each failure has one
//!   status, one stable `code` and one `type`, and every error body carries the request
//!   id. "Not found" never echoes what was asked for, so an invisible entity and an
//!   unknown one read the same.
//! - **Blocking calls never run on the async runtime**: every engine or agent call,
//!   and every key lookup (which may re-read the keys file), goes through
//!   `tokio::task::spawn_blocking`.
//! - Keys are read at start and re-read when the keys file changes (checked on every
//!   authenticated request) or on SIGHUP, so keys rotate without a restart. A keys file
//!   that fails to parse on reload leaves the previous keys in force (and is logged).

mod admin;
pub mod audit;
mod auth;
pub mod cache;
mod chat;
pub mod conn_limits;
mod documents;
pub mod error;
pub mod idempotency;
mod jobs;
pub mod limits;
mod linger;
mod maintain;
mod masking;
pub mod mcp;
pub mod metrics;
mod openapi;
mod recent;
mod request_id;
mod review;
mod routes;
pub mod telemetry;
mod traces;
mod ui;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::Router;
use dossier_engine::Engine;

pub use audit::{AuditQuestions, Auditor};
pub use auth::{hash_key, Caller, KeyEntry, KeyStore, KeysError};
pub use cache::{Cache, CacheKey};
pub use conn_limits::ConnectionLimits;
pub use error::{ApiError, ErrorBody, Failure};
pub use jobs::{JobInfo, Jobs};
pub use limits::{LimitConfig, Limits};
pub use metrics::Metrics;
pub use openapi::{document, ApiDoc};
pub use request_id::RequestId;
pub use routes::{
    AskBody, DateQuery, Health, SearchBody, MAX_JSON_BODY, MAX_QUERY_CHARS, MAX_QUESTION_CHARS,
};
pub use traces::{TraceLog, TraceRecord};

/// How the server is set up; [`ServerConfig::default`] is what `dossier serve` uses
/// unless told otherwise.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub limits: LimitConfig,
    /// Answers kept by the search/ask cache (0: no cache).
    pub cache_entries: usize,
    /// Agent trajectories kept for `GET /v1/traces/{request_id}`.
    pub trace_entries: usize,
    /// Where uploaded documents are kept (`<store>/uploads` when unset); an uploaded
    /// file is kept so that its `source_uri` keeps pointing at the text that was cited.
    pub uploads_dir: Option<PathBuf>,
    /// One line per request on stderr (time, request id, method, path, status, time taken).
    pub access_log: bool,
    /// After a shutdown signal, how long requests and jobs in flight may run on before
    /// the server stops regardless (a commit is one transaction, so nothing half-done
    /// is kept: an unfinished job is reported failed on the next start's job list).
    pub drain_timeout: std::time::Duration,
    /// With a shared store: how often this replica looks for commits made elsewhere
    /// (another replica, the CLI). A commit is served within about this long plus the
    /// time to replay it.
    pub follow_interval: std::time::Duration,
    /// What the audit log keeps of each question or query: its digest (default) or
    /// its text too.
    pub audit_questions: AuditQuestions,
    /// Audit entries (and the traces kept with them) older than this many days are
    /// exported, then deleted (see [`audit::Retention`]); 0: no age limit.
    pub audit_retention_days: u32,
    /// At most this many audit entries are kept (default
    /// [`DEFAULT_AUDIT_MAX_ENTRIES`]); older ones are exported, then deleted. 0: no cap.
    pub audit_max_entries: usize,
    /// Where audit entries are exported before deletion (`<store>/audit-export` when
    /// unset): one JSONL file per retention pass that deletes anything.
    pub audit_export_dir: Option<PathBuf>,
    /// How often the audit log's retention is applied (default 60 s; the first pass
    /// runs shortly after start).
    pub audit_retention_every: std::time::Duration,
    /// Timeouts and caps of client connections (see [`conn_limits`]).
    pub connections: ConnectionLimits,
    /// How long an idempotency key replays its write, when an abandoned claim may be
    /// taken over, and how many keys a principal keeps.
    pub idempotency: dossier_engine::dossier_store::idempotency::Limits,
}

/// Days audit entries are kept unless the server is told otherwise.
pub const DEFAULT_AUDIT_RETENTION_DAYS: u32 = 90;

/// Audit entries kept at most unless the server is told otherwise (about 450 MB of
/// store at the 2.2 KB an entry measured under load).
pub const DEFAULT_AUDIT_MAX_ENTRIES: usize = 200_000;

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            limits: LimitConfig::default(),
            cache_entries: 1024,
            trace_entries: 1000,
            uploads_dir: None,
            access_log: false,
            drain_timeout: std::time::Duration::from_secs(20),
            follow_interval: std::time::Duration::from_millis(200),
            audit_questions: AuditQuestions::Digest,
            audit_retention_days: DEFAULT_AUDIT_RETENTION_DAYS,
            audit_max_entries: DEFAULT_AUDIT_MAX_ENTRIES,
            audit_export_dir: None,
            audit_retention_every: std::time::Duration::from_secs(60),
            connections: ConnectionLimits::default(),
            idempotency: dossier_engine::dossier_store::idempotency::Limits::default(),
        }
    }
}

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub engine: Arc<Engine>,
    pub keys: Arc<KeyStore>,
    pub limits: Arc<Limits>,
    pub cache: Arc<Cache>,
    pub metrics: Arc<Metrics>,
    pub traces: Arc<TraceLog>,
    /// The durable audit log's writer (`audit.rs`).
    pub audit: Arc<Auditor>,
    pub jobs: Arc<Jobs>,
    /// Queries answered lately, for shadowing a draft index (`recent.rs`).
    pub recent_queries: Arc<recent::RecentQueries>,
    pub config: Arc<ServerConfig>,
    /// Set when shutdown begins: new writes and jobs are refused from then on.
    pub stopping: Arc<AtomicBool>,
    /// The chat model the agent may use (it only proposes; the program checks every
    /// step). None: deterministic planner and extractive writer.
    pub model: Option<Arc<dyn dossier_llm::ChatModel>>,
}

impl AppState {
    pub fn new(engine: Arc<Engine>, keys: Arc<KeyStore>) -> AppState {
        AppState::with_config(engine, keys, ServerConfig::default())
    }

    pub fn with_config(engine: Arc<Engine>, keys: Arc<KeyStore>, config: ServerConfig) -> AppState {
        let jobs = Jobs::default();
        if engine.store().location().is_shared() {
            jobs.share(replica_name());
        }
        let metrics = Arc::new(Metrics::new());
        AppState {
            limits: Arc::new(Limits::new(config.limits.clone())),
            cache: Arc::new(Cache::new(config.cache_entries)),
            audit: Arc::new(Auditor::new(
                engine.clone(),
                metrics.clone(),
                config.audit_questions,
            )),
            metrics,
            traces: Arc::new(TraceLog::new(config.trace_entries)),
            jobs: Arc::new(jobs),
            recent_queries: Arc::new(recent::RecentQueries::default()),
            config: Arc::new(config),
            stopping: Arc::new(AtomicBool::new(false)),
            model: None,
            engine,
            keys,
        }
    }

    /// Lets the agent use `model` for planning and writing.
    pub fn with_model(mut self, model: Arc<dyn dossier_llm::ChatModel>) -> AppState {
        self.model = Some(model);
        self
    }

    /// Whether shutdown has begun.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// The checks every write makes before it starts: an admin key, and a server that
    /// is not shutting down.
    /// With a shared store, writes the jobs table now (a job just accepted must be
    /// there before its id is answered: a replica killed right after the answer would
    /// otherwise leave an id no replica knows).
    pub(crate) async fn record_jobs(&self, rid: &RequestId) -> Result<(), ApiError> {
        if !self.engine.store().location().is_shared() {
            return Ok(());
        }
        let (engine, jobs) = (self.engine.clone(), self.jobs.clone());
        routes::blocking(rid, move || match engine.store().shared() {
            Some(pg) => jobs
                .sync(pg)
                .map_err(|e| Failure::from(dossier_engine::Error::from(e))),
            None => Ok(()),
        })
        .await
    }

    pub(crate) fn begin_write(&self, caller: &Caller) -> Result<(), ApiError> {
        caller.require_admin()?;
        if self.is_stopping() {
            return Err(ApiError::new(&caller.request_id, Failure::ShuttingDown));
        }
        Ok(())
    }

    /// [`AppState::begin_write`] for expensive writes (uploads, jobs), which also take
    /// one of the tenant's slots for as long as the returned permit lives.
    pub(crate) fn begin_expensive_write(
        &self,
        caller: &Caller,
    ) -> Result<limits::ExpensivePermit, ApiError> {
        self.begin_write(caller)?;
        self.limits
            .expensive(&caller.tenant, &caller.principal)
            .map_err(|f| ApiError::new(&caller.request_id, f))
    }

    /// Where uploaded files go.
    pub fn uploads_dir(&self) -> PathBuf {
        self.config
            .uploads_dir
            .clone()
            .unwrap_or_else(|| self.engine.store().dir().join("uploads"))
    }
}

/// Every route of the API and the UI, with request ids and metrics on every response.
pub fn router(state: AppState) -> Router {
    api_router(state.clone())
        .merge(mcp::router().with_state(state.clone()))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            conn_limits::limit_body_time,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::track,
        ))
        .layer(axum::middleware::from_fn(request_id::assign))
}

/// The routes themselves, without request ids and metrics: what an MCP tool call is
/// sent through (as part of the MCP request, which has both).
pub(crate) fn api_router(state: AppState) -> Router {
    Router::new()
        .merge(routes::router())
        .merge(documents::router())
        .merge(admin::router())
        .merge(review::router())
        .merge(traces::router())
        .merge(audit::router())
        .merge(chat::router())
        .merge(metrics::router())
        .merge(ui::router())
        .merge(openapi::router())
        // Innermost: responses are masked before an idempotent write keeps one.
        .layer(axum::middleware::from_fn(masking::guard))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            idempotency::guard,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(routes::MAX_JSON_BODY))
        .fallback(routes::no_route)
        .method_not_allowed_fallback(routes::wrong_method)
        .with_state(state)
}

/// Binds `addr` and serves until `shutdown` resolves (in-flight requests finish).
pub async fn serve(
    addr: SocketAddr,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    serve_on(listener, state, shutdown).await
}

/// Serves on an already bound listener (tests bind port 0 and read the address first).
/// Re-reads the keys file on SIGHUP while it runs.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    request_id::set_access_log(state.config.access_log);
    let hup = reload_on_hangup(state.keys.clone());
    let follower = follow_commits(&state);
    // Audit retention runs here (export, then delete), not in the maintenance loop.
    let maintenance = maintain::spawn(state.engine.clone(), MAINTAIN_EVERY);
    let retention = retain_audit(&state);
    let (state_engine, state_jobs) = (state.engine.clone(), state.jobs.clone());
    let auditor = state.audit.clone();
    let stopping = state.stopping.clone();
    let jobs = state.jobs.clone();
    let drain = state.config.drain_timeout;
    let connections = state.config.connections.clone();
    let (signalled, on_signal) = tokio::sync::oneshot::channel::<()>();
    let server = conn_limits::serve(listener, router(state), connections, async move {
        shutdown.await;
        // From here on writes and new jobs are refused; requests in flight finish.
        stopping.store(true, Ordering::SeqCst);
        let _ = signalled.send(());
    });
    // Shutdown ends in bounded time: requests and jobs in flight get `drain` after the
    // signal, then the server stops regardless (every commit is one catalog
    // transaction, so whatever did not finish is simply not there).
    let deadline = async move {
        if on_signal.await.is_err() {
            // The server ended without a signal (an accept error): nothing to bound.
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(drain).await;
    };
    tokio::pin!(deadline);
    let result = tokio::select! {
        r = server => {
            // Jobs run past the requests that started them: wait for each to reach
            // its end, within what is left of the drain time.
            tokio::select! {
                _ = jobs.wait_idle() => {}
                _ = &mut deadline => {
                    eprintln!("dossier-server: drain time over; jobs still running are abandoned");
                }
            }
            r
        }
        _ = &mut deadline => {
            eprintln!("dossier-server: drain time over; requests still running are abandoned");
            Ok(())
        }
    };
    if let Some(h) = hup {
        h.abort();
    }
    if let Some(f) = follower {
        f.abort();
    }
    maintenance.abort();
    if let Some(r) = retention {
        r.abort();
    }
    // The jobs' last states reach the shared store before the replica goes.
    let (engine, jobs) = (state_engine, state_jobs);
    let _ = tokio::task::spawn_blocking(move || match engine.store().shared() {
        Some(pg) => jobs.sync(pg),
        None => Ok(()),
    })
    .await;
    // The audit entries of the requests answered reach the store before the server
    // goes (a flush is milliseconds; one bounded wait if the store is stuck, after
    // which what is still queued is lost).
    let flush_for = drain.min(AUDIT_FLUSH_AT_EXIT);
    let _ = tokio::task::spawn_blocking(move || {
        if !auditor.flush(flush_for) {
            eprintln!("dossier-server: audit entries still queued at exit are lost");
        }
    })
    .await;
    result
}

/// The longest a stopping server waits for its audit entries to be written.
const AUDIT_FLUSH_AT_EXIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How often the maintenance loop looks for committed vectors to link.
const MAINTAIN_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Applies the audit log's retention (export, then delete; `audit::retain`) shortly
/// after start and then every `audit_retention_every`; None when nothing limits it.
fn retain_audit(state: &AppState) -> Option<tokio::task::JoinHandle<()>> {
    let config = &state.config;
    if config.audit_retention_days == 0 && config.audit_max_entries == 0 {
        return None;
    }
    let policy = audit::Retention {
        days: config.audit_retention_days,
        max_entries: config.audit_max_entries,
        export_dir: Some(
            config
                .audit_export_dir
                .clone()
                .unwrap_or_else(|| state.engine.store().dir().join("audit-export")),
        ),
    };
    let every = config.audit_retention_every;
    let (engine, metrics) = (state.engine.clone(), state.metrics.clone());
    Some(tokio::spawn(async move {
        tokio::time::sleep(MAINTAIN_EVERY).await;
        loop {
            let (e, p) = (engine.clone(), policy.clone());
            let pass = move || audit::retain(e.store().catalog(), &p, chrono::Utc::now());
            match tokio::task::spawn_blocking(pass).await {
                Ok(Ok(done)) => metrics.audit_pruned(done.pruned.entries),
                Ok(Err(err)) => eprintln!("dossier-server: audit retention failed: {err}"),
                Err(_) => {}
            }
            tokio::time::sleep(every).await;
        }
    }))
}

/// A name for this replica in the shared jobs table: random per process (std's
/// per-process random hash keys), with the process id for people reading the table.
fn replica_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!("{:016x}-pid{}", h.finish(), std::process::id())
}

/// With a shared store, replays commits made elsewhere every `follow_interval`, so this
/// replica's indexes, view and tenant generations (which key the graph and answer
/// caches) follow the database. Nothing to do for an embedded store: only this process
/// writes it.
fn follow_commits(state: &AppState) -> Option<tokio::task::JoinHandle<()>> {
    if !state.engine.store().location().is_shared() {
        return None;
    }
    let engine = state.engine.clone();
    let jobs = state.jobs.clone();
    let every = state.config.follow_interval;
    Some(tokio::spawn(async move {
        let mut failing = false;
        loop {
            tokio::time::sleep(every).await;
            let (e, j) = (engine.clone(), jobs.clone());
            let step = move || {
                e.store().refresh()?;
                match e.store().shared() {
                    Some(pg) => j.sync(pg),
                    None => Ok(()),
                }
            };
            match tokio::task::spawn_blocking(step).await {
                Ok(Ok(_)) => failing = false,
                Ok(Err(err)) if !failing => {
                    failing = true;
                    eprintln!("dossier-server: cannot follow the shared store: {err}");
                }
                _ => {}
            }
        }
    }))
}

#[cfg(unix)]
fn reload_on_hangup(keys: Arc<KeyStore>) -> Option<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "dossier-server: SIGHUP not available ({e}); keys reload on file change only"
            );
            return None;
        }
    };
    Some(tokio::spawn(async move {
        while hup.recv().await.is_some() {
            let keys = keys.clone();
            let outcome = tokio::task::spawn_blocking(move || keys.reload()).await;
            match outcome {
                Ok(Ok(n)) => eprintln!("dossier-server: SIGHUP: {n} keys loaded"),
                Ok(Err(e)) => eprintln!("dossier-server: SIGHUP: keys not reloaded: {e}"),
                Err(e) => eprintln!("dossier-server: SIGHUP: reload failed: {e}"),
            }
        }
    }))
}

#[cfg(not(unix))]
fn reload_on_hangup(_keys: Arc<KeyStore>) -> Option<tokio::task::JoinHandle<()>> {
    None
}

/// Runs the server on its own multi-threaded runtime until Ctrl-C or SIGTERM (for the
/// CLI, which has no runtime of its own).
pub fn serve_blocking(addr: SocketAddr, state: AppState) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        eprintln!(
            "dossier: serving on http://{} ({} keys)",
            listener.local_addr()?,
            state.keys.len()
        );
        serve_on(listener, state, stop_signal()).await
    });
    // Blocking work still running (an abandoned request) must not hold the process:
    // dropping a runtime waits for its blocking threads, forever if need be.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    result
}

/// Serves MCP over stdio for the holder of `key` until stdin ends (`dossier mcp`); with a
/// shared store it follows other processes' commits meanwhile, as a replica does.
pub fn mcp_stdio_blocking(state: AppState, key: String) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(async move {
        let follower = follow_commits(&state);
        let r = mcp::serve_stdio(state, key).await;
        if let Some(f) = follower {
            f.abort();
        }
        r
    });
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    result
}

async fn stop_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use dossier_core::Embedder;
    use dossier_embed::{OpenAiConfig, OpenAiEmbedder};
    use dossier_llm::{ChatModel, ChatRequest, LlmError, Message, OpenAiChat};

    /// Makes, uses and drops both provider clients against a closed port.
    fn use_providers(url: &str) {
        let chat = OpenAiChat::new(url, "m", Duration::from_secs(2)).unwrap();
        let e = chat
            .chat(&ChatRequest::new(vec![Message::user("x")]))
            .unwrap_err();
        assert!(matches!(e, LlmError::Transport { .. }), "{e:?}");
        let embedder = OpenAiEmbedder::from_config(OpenAiConfig {
            dim: Some(4),
            max_retries: 0,
            ..OpenAiConfig::new(url, "m")
        })
        .unwrap();
        let e = embedder.embed_query("x").unwrap_err().to_string();
        assert!(e.contains("transient:"), "{e}");
    }

    /// The chat and embedding clients are made, called and dropped where the server
    /// does so: on its blocking pool, and here even on a runtime thread. They start no
    /// runtime of their own (reqwest's blocking client did, and panics when dropped in
    /// an async context).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn provider_clients_start_no_runtime_of_their_own() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let on_pool = url.clone();
        tokio::task::spawn_blocking(move || use_providers(&on_pool))
            .await
            .unwrap();
        use_providers(&url);
    }
}
