//! The durable audit log, server side: every search and ask (chat completions and MCP
//! tool calls run as these routes) becomes one entry in the store's audit log, with the
//! agent's trace of an ask beside it; `GET /v1/audit` lists entries to operators.
//!
//! **Writes never slow or fail a request.** A finished request hands its entry to
//! `Auditor::submit`, which only puts it on a bounded queue (`try_send`: never
//! waits). One thread per server drains the queue, builds the entries (walking the
//! answer's JSON, serialising the trace) and appends them in batches, one store
//! transaction per batch — off the async runtime and off every request, because an
//! embedded append shares redb's one writer with commits and may wait for an ingest. A
//! full queue drops the entry, a failed append drops its batch: both are counted
//! (`dossier_audit_entries_total{outcome="dropped"|"failed"}`) and logged once per
//! streak; the request has long been answered. Shutdown flushes the queue within the
//! drain time.
//!
//! **Operators only.** The entries hold what callers are not told (a tool's
//! `forbidden`, the record that exists but is someone else's); `GET /v1/audit` needs an
//! operator key and answers every other key the 403 of every operator route. A stored
//! trace is served only through `GET /v1/traces/{id}` to the principal who made the
//! request (`crate::traces`).
//!
//! **Questions are kept as digests by default** (`--audit-questions digest`): the entry
//! keeps the BLAKE3 of the question or query, and its text only with `text`. The trace
//! of an ask (kept so that its owner can read it after a restart) holds the question,
//! its sub-questions and the tools' arguments whatever the setting: it is read only by
//! its owner through the API, never listed.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, NaiveDate, Utc};
use dossier_engine::dossier_store::audit::{
    digest, AuditEntry, AuditPage, AuditQuery, AuditReason, AuditRecord, AuditTool, Cursor, Pruned,
    MAX_PAGE,
};
use dossier_engine::dossier_store::CatalogBackend;
use dossier_engine::dossier_store::Scope;
use dossier_engine::Engine;
use serde::Deserialize;
use serde_json::Value;
use utoipa::{IntoParams, OpenApi};

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, Failure};
use crate::metrics::Metrics;
use crate::routes::blocking;
use crate::traces::TraceRecord;
use crate::AppState;

/// Entries waiting for the writer; past this, new entries are dropped (and counted).
const QUEUE: usize = 4096;
/// Entries appended in one store transaction at most.
const BATCH: usize = 256;
/// How long dropping the auditor waits for the writer to finish the queue.
const DROP_WAIT: Duration = Duration::from_secs(2);
/// How long `GET /v1/audit` waits for this server's queued entries to be written
/// before it reads (so an operator sees what was just answered here).
const READ_FLUSH: Duration = Duration::from_secs(1);

/// What an entry keeps of the question or query.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AuditQuestions {
    /// Only its BLAKE3 digest (the default).
    #[default]
    Digest,
    /// The text and its digest.
    Text,
}

impl FromStr for AuditQuestions {
    type Err = String;
    fn from_str(s: &str) -> Result<AuditQuestions, String> {
        match s {
            "digest" => Ok(AuditQuestions::Digest),
            "text" => Ok(AuditQuestions::Text),
            other => Err(format!(
                "audit questions: `{other}` (expected digest or text)"
            )),
        }
    }
}

/// A finished request as the route saw it; the writer thread turns it into an entry.
pub(crate) struct Pending {
    pub request_id: String,
    pub finished_at: DateTime<Utc>,
    pub principal: String,
    pub tenant: String,
    pub groups: Vec<String>,
    /// The knowledge bases read: the principal's, narrowed by the request's `kb`.
    pub kbs: Option<Vec<String>>,
    pub route: &'static str,
    pub now: Option<NaiveDate>,
    pub as_of: Option<NaiveDate>,
    pub mode: Option<String>,
    pub question: String,
    pub outcome: Outcome,
    /// The caller's masker: what is kept of the question, reasons and trace is what the
    /// caller could be shown.
    pub masker: Option<Arc<dossier_core::pii::Masker>>,
}

impl Pending {
    /// A request of `caller` on `route` about `question`, finished now.
    pub fn of(caller: &Caller, route: &'static str, question: &str, outcome: Outcome) -> Pending {
        let mut groups = caller.scope.groups().to_vec();
        groups.sort();
        Pending {
            request_id: caller.request_id.0.clone(),
            finished_at: Utc::now(),
            principal: caller.principal.clone(),
            tenant: caller.tenant.clone(),
            kbs: caller.scope.kbs().map(<[String]>::to_vec),
            groups,
            route,
            now: None,
            as_of: None,
            mode: None,
            question: question.to_string(),
            outcome,
            masker: caller.scope.masker_shared().filter(|m| m.masks_text()),
        }
    }

    pub fn dated(mut self, now: Option<NaiveDate>, as_of: Option<NaiveDate>) -> Pending {
        self.now = now;
        self.as_of = as_of;
        self
    }

    /// The knowledge bases the request read: those of its scope (the caller's, narrowed
    /// by the request's `kb` through [`Scope::within_kbs`], as the route narrowed it).
    pub fn read_in(mut self, scope: &Scope) -> Pending {
        self.kbs = scope.kbs().map(<[String]>::to_vec);
        self
    }

    pub fn mode(mut self, mode: Option<&str>) -> Pending {
        self.mode = mode.map(str::to_owned);
        self
    }
}

/// How the request ended.
pub(crate) enum Outcome {
    /// An ask or chat completion answered: the ask response, the unfiltered audit
    /// reasons of the run that computed it (JSON array of `dossier_agent::AuditEntry`),
    /// and its trace.
    Ask {
        value: Arc<Value>,
        reasons: Option<Arc<Value>>,
        cached: bool,
        trace: Arc<TraceRecord>,
    },
    /// A search answered.
    Search { value: Arc<Value>, cached: bool },
    /// Refused or failed after the question was read.
    Failed {
        code: &'static str,
        http_status: u16,
    },
}

impl Outcome {
    pub fn failed(e: &ApiError) -> Outcome {
        let (status, code, _, _) = e.failure.describe();
        Outcome::Failed {
            code,
            http_status: status.as_u16(),
        }
    }
}

enum Msg {
    Entry(Box<Pending>),
    Flush(mpsc::Sender<()>),
}

/// Appends a batch to the store.
pub(crate) type Sink = Box<dyn FnMut(&[AuditRecord]) -> Result<(), String> + Send>;

/// The audit writer: a bounded queue and the thread that drains it into the store.
pub struct Auditor {
    tx: Option<SyncSender<Msg>>,
    /// Says when the writer has ended (a `Mutex` only to make the auditor `Sync`; it is
    /// read once, in `drop`).
    done: Mutex<Option<Receiver<()>>>,
    metrics: Arc<Metrics>,
    /// Set while entries are being dropped for a full queue (one log line per streak).
    dropping: AtomicBool,
}

impl Auditor {
    /// A writer appending to `engine`'s store.
    pub fn new(engine: Arc<Engine>, metrics: Arc<Metrics>, questions: AuditQuestions) -> Auditor {
        let sink: Sink = Box::new(move |records| {
            engine
                .store()
                .catalog()
                .audit_append(records)
                .map_err(|e| e.to_string())
        });
        Auditor::with_sink(sink, metrics, questions, QUEUE)
    }

    pub(crate) fn with_sink(
        mut sink: Sink,
        metrics: Arc<Metrics>,
        questions: AuditQuestions,
        capacity: usize,
    ) -> Auditor {
        let (tx, rx) = mpsc::sync_channel::<Msg>(capacity);
        let (done_tx, done) = mpsc::channel::<()>();
        let m = metrics.clone();
        let spawned = std::thread::Builder::new()
            .name("dossier-audit".into())
            .spawn(move || {
                write_loop(&rx, &mut sink, &m, questions);
                // The sink (and the engine it holds) is dropped before this says so.
                drop(sink);
                let _ = done_tx.send(());
            });
        match spawned {
            Ok(_) => Auditor {
                tx: Some(tx),
                done: Mutex::new(Some(done)),
                metrics,
                dropping: AtomicBool::new(false),
            },
            Err(e) => {
                eprintln!("dossier-server: audit log off: cannot start its writer: {e}");
                Auditor {
                    tx: None,
                    done: Mutex::new(None),
                    metrics,
                    dropping: AtomicBool::new(false),
                }
            }
        }
    }

    /// Queues `p` for the log; never waits.
    pub(crate) fn submit(&self, p: Pending) {
        let Some(tx) = &self.tx else {
            self.metrics.audit_entries("dropped", 1);
            return;
        };
        match tx.try_send(Msg::Entry(Box::new(p))) {
            Ok(()) => {
                if self.dropping.swap(false, Ordering::Relaxed) {
                    eprintln!("dossier-server: audit queue accepts entries again");
                }
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.metrics.audit_entries("dropped", 1);
                if !self.dropping.swap(true, Ordering::Relaxed) {
                    eprintln!(
                        "dossier-server: audit queue full ({QUEUE} entries): entries are dropped until the store keeps up"
                    );
                }
            }
        }
    }

    /// Waits (up to `timeout`) until every entry queued before this call is written or
    /// given up on. Blocks: call it off the async runtime. True when that happened in
    /// time.
    pub fn flush(&self, timeout: Duration) -> bool {
        let Some(tx) = &self.tx else { return true };
        let deadline = Instant::now() + timeout;
        let (ack_tx, ack) = mpsc::channel();
        let mut msg = Msg::Flush(ack_tx);
        loop {
            match tx.try_send(msg) {
                Ok(()) => break,
                Err(TrySendError::Full(m)) if Instant::now() < deadline => {
                    msg = m;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return false,
            }
        }
        ack.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .is_ok()
    }
}

/// Closing the queue lets the writer finish what is queued and end, releasing the
/// store; this waits for that (bounded), so that a store dropped with its last server
/// can be opened again at once.
impl Drop for Auditor {
    fn drop(&mut self) {
        drop(self.tx.take());
        let done = self
            .done
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(done) = done {
            if done.recv_timeout(DROP_WAIT).is_err() {
                eprintln!(
                    "dossier-server: audit writer still busy after {DROP_WAIT:?}; not waiting"
                );
            }
        }
    }
}

fn write_loop(rx: &Receiver<Msg>, sink: &mut Sink, metrics: &Metrics, questions: AuditQuestions) {
    let mut failing = false;
    while let Ok(first) = rx.recv() {
        let mut records = Vec::new();
        let mut acks = Vec::new();
        let mut next = Some(first);
        while let Some(m) = next.take() {
            match m {
                Msg::Entry(p) => records.push(record_of(*p, questions)),
                Msg::Flush(ack) => acks.push(ack),
            }
            if records.len() < BATCH {
                next = rx.try_recv().ok();
            }
        }
        if !records.is_empty() {
            let n = records.len() as u64;
            match sink(&records) {
                Ok(()) => {
                    metrics.audit_entries("written", n);
                    if failing {
                        eprintln!("dossier-server: audit log written again");
                    }
                    failing = false;
                }
                Err(e) => {
                    metrics.audit_entries("failed", n);
                    if !failing {
                        eprintln!("dossier-server: audit log: {n} entries not written: {e}");
                    }
                    failing = true;
                }
            }
        }
        for a in acks {
            let _ = a.send(());
        }
    }
}

fn strings_at(v: &Value, path: &str, field: &str) -> Vec<String> {
    v.pointer(path)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x[field].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The store's entry for a finished request (on the writer thread).
fn record_of(mut p: Pending, questions: AuditQuestions) -> AuditRecord {
    let masker = p.masker.take();
    if let Some(m) = &masker {
        p.question = m.mask(&p.question).into_owned();
    }
    let mut entry = AuditEntry {
        request_id: p.request_id,
        finished_at: p.finished_at,
        principal: p.principal,
        tenant: p.tenant,
        groups: p.groups,
        kbs: p.kbs,
        route: p.route.to_string(),
        now: p.now,
        as_of: p.as_of,
        mode: p.mode,
        status: String::new(),
        http_status: 200,
        question_blake3: digest(&p.question),
        question: (questions == AuditQuestions::Text).then_some(p.question),
        cached: false,
        tools: vec![],
        evidence: vec![],
        citations: vec![],
        reasons: vec![],
        has_trace: false,
    };
    let mut trace = None;
    match p.outcome {
        Outcome::Ask {
            value,
            reasons,
            cached,
            trace: t,
        } => {
            entry.cached = cached;
            entry.status = value["status"].as_str().unwrap_or("unknown").to_string();
            entry.reasons = reasons
                .and_then(|r| serde_json::from_value::<Vec<AuditReason>>((*r).clone()).ok())
                .unwrap_or_default();
            let steps = value
                .pointer("/trace/steps")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            for (i, s) in steps.iter().enumerate() {
                // The tool's own status where the caller was told another.
                let status = entry
                    .reasons
                    .iter()
                    .find(|r| r.step == i)
                    .map(|r| r.status.clone())
                    .unwrap_or_else(|| s["status"].as_str().unwrap_or("unknown").to_string());
                entry.tools.push(AuditTool {
                    name: s["action"].as_str().unwrap_or("unknown").to_string(),
                    status,
                });
                for id in s["evidence"].as_array().into_iter().flatten() {
                    if let Some(id) = id.as_str() {
                        if !entry.evidence.iter().any(|e| e == id) {
                            entry.evidence.push(id.to_string());
                        }
                    }
                }
            }
            for c in strings_at(&value, "/citations", "chunk_id") {
                if !entry.citations.contains(&c) {
                    entry.citations.push(c);
                }
            }
            trace = serde_json::to_vec(&*t).ok();
        }
        Outcome::Search { value, cached } => {
            entry.cached = cached;
            let degraded = value.get("degraded").is_some_and(|d| !d.is_null());
            entry.status = if degraded { "degraded" } else { "ok" }.to_string();
            entry.evidence = strings_at(&value, "/hits", "chunk_id");
        }
        Outcome::Failed { code, http_status } => {
            entry.status = code.to_string();
            entry.http_status = http_status;
        }
    }
    if let Some(m) = &masker {
        for r in &mut entry.reasons {
            r.note = m.mask(&r.note).into_owned();
        }
        trace = trace.and_then(|bytes| {
            let mut v: Value = serde_json::from_slice(&bytes).ok()?;
            m.mask_json(&mut v);
            serde_json::to_vec(&v).ok()
        });
    }
    AuditRecord { entry, trace }
}

/// The reasons of an agent run as the audit log keeps them (JSON, for the cache note).
pub(crate) fn reasons_of(audit: &[dossier_agent::AuditEntry]) -> Arc<Value> {
    let reasons: Vec<AuditReason> = audit
        .iter()
        .map(|a| AuditReason {
            step: a.step,
            action: a.action.clone(),
            status: serde_json::to_value(a.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| "unknown".into()),
            note: a.note.clone(),
        })
        .collect();
    Arc::new(serde_json::to_value(reasons).unwrap_or(Value::Null))
}

// ---------------------------------------------------------------------------------------
// GET /v1/audit

#[derive(OpenApi)]
#[openapi(
    paths(list_audit),
    components(schemas(AuditPage, AuditEntry, AuditTool, AuditReason))
)]
pub struct AuditApi;

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/audit", get(list_audit))
}

/// Filters of `GET /v1/audit`; every one given must match.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditParams {
    /// The principal who made the request.
    #[serde(default)]
    pub principal: Option<String>,
    /// The principal's tenant.
    #[serde(default)]
    pub tenant: Option<String>,
    /// `/v1/search`, `/v1/ask` or `/v1/chat/completions`.
    #[serde(default)]
    pub route: Option<String>,
    /// An answer status, `ok` / `degraded` (search), or an error code.
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub request_id: Option<String>,
    /// Finished at or after this instant (RFC 3339).
    #[serde(default)]
    pub since: Option<String>,
    /// Finished before this instant (RFC 3339).
    #[serde(default)]
    pub until: Option<String>,
    /// Entries per page (default 100, at most 1000).
    #[serde(default)]
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// The store's query for `p`, or what is wrong with it.
pub fn query_of(p: AuditParams) -> Result<AuditQuery, String> {
    let instant = |name: &str, v: Option<String>| -> Result<Option<DateTime<Utc>>, String> {
        v.map(|s| {
            DateTime::parse_from_rfc3339(&s)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|e| format!("{name}: not an RFC 3339 instant ({e})"))
        })
        .transpose()
    };
    let limit = p.limit.unwrap_or(0);
    if p.limit == Some(0) || limit > MAX_PAGE {
        return Err(format!("limit must be between 1 and {MAX_PAGE}"));
    }
    let cursor = match p.cursor {
        Some(c) => Some(Cursor::parse(&c).ok_or("cursor: not a cursor this log returned")?),
        None => None,
    };
    Ok(AuditQuery {
        principal: p.principal,
        tenant: p.tenant,
        route: p.route,
        status: p.status,
        request_id: p.request_id,
        since: instant("since", p.since)?,
        until: instant("until", p.until)?,
        limit,
        cursor,
    })
}

#[utoipa::path(get, path = "/v1/audit", tag = "audit",
    params(AuditParams),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "Audit entries of every tenant, newest first, with the unfiltered reasons callers were not told; `next_cursor` continues with older ones", body = AuditPage),
        (status = 400, description = "Bad filter, limit or cursor", body = ErrorBody),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no operator scope (the audit log reaches every tenant)", body = ErrorBody)))]
pub async fn list_audit(
    State(state): State<AppState>,
    caller: Caller,
    q: Result<Query<AuditParams>, QueryRejection>,
) -> Result<Json<AuditPage>, ApiError> {
    // The scope first: a non-operator learns nothing, not even what a bad filter is.
    caller.require_operator()?;
    let rid = caller.request_id.clone();
    let query = query_of(crate::routes::query(&rid, q)?)
        .map_err(|m| ApiError::new(&rid, Failure::Invalid(m)))?;
    let (engine, auditor) = (state.engine.clone(), state.audit.clone());
    blocking(&rid, move || {
        auditor.flush(READ_FLUSH);
        engine
            .store()
            .catalog()
            .audit_list(&query)
            .map_err(|e| Failure::from(dossier_engine::Error::from(e)))
    })
    .await
    .map(Json)
}

/// Deletes the entries older than `days` days (the maintenance loop's and `dossier
/// audit prune`'s work).
pub fn prune(
    catalog: &dyn CatalogBackend,
    days: u32,
) -> dossier_engine::dossier_store::Result<Pruned> {
    let before = Utc::now() - chrono::Duration::days(i64::from(days));
    catalog.audit_prune(before)
}

/// How long the audit log keeps entries, and where it puts them before deleting them.
///
/// An entry is deleted when it is older than `days` (0: no age limit) or when
/// `max_entries` newer entries are kept (0: no count limit). Every entry is first
/// written to a JSONL file under `export_dir` (one entry a line, with its trace under
/// `"trace"` when it has one), which is synced and renamed into place before the
/// deletion; the files are the operator's to archive or delete.
#[derive(Debug, Clone, PartialEq)]
pub struct Retention {
    pub days: u32,
    pub max_entries: usize,
    pub export_dir: Option<std::path::PathBuf>,
}

/// What one [`retain`] pass did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Retained {
    /// Entries written to `file` before the deletion.
    pub exported: u64,
    pub file: Option<std::path::PathBuf>,
    pub pruned: Pruned,
}

/// Exports, then deletes, the entries `policy` no longer keeps (see [`Retention`]).
/// The cutoff is found first (the older of nothing, the age limit and the finishing
/// time of the newest entry past `max_entries`); entries finishing before it are
/// written out page by page (bounded memory) and the file synced before the same
/// cutoff is pruned. Entries appended meanwhile finish after the cutoff.
pub fn retain(
    catalog: &dyn CatalogBackend,
    policy: &Retention,
    now: DateTime<Utc>,
) -> Result<Retained, String> {
    let err = |e: dossier_engine::dossier_store::Error| e.to_string();
    let mut cutoff =
        (policy.days > 0).then(|| now - chrono::Duration::days(i64::from(policy.days)));
    if policy.max_entries > 0 {
        if let Some(t) = past_the_count(catalog, policy.max_entries).map_err(err)? {
            // Strictly after the first entry not kept, so the prune takes it too.
            let t = t + chrono::Duration::microseconds(1);
            cutoff = Some(cutoff.map_or(t, |c| c.max(t)));
        }
    }
    let Some(cutoff) = cutoff else {
        return Ok(Retained::default());
    };
    let mut done = Retained::default();
    if let Some(dir) = &policy.export_dir {
        let (n, file) = export_before(catalog, cutoff, dir, now)?;
        done.exported = n;
        done.file = file;
        if n == 0 {
            return Ok(done);
        }
    }
    done.pruned = catalog.audit_prune(cutoff).map_err(err)?;
    Ok(done)
}

/// The finishing time of the newest entry past the `keep` newest, if there is one.
fn past_the_count(
    catalog: &dyn CatalogBackend,
    keep: usize,
) -> dossier_engine::dossier_store::Result<Option<DateTime<Utc>>> {
    let mut seen = 0usize;
    let mut query = AuditQuery {
        limit: dossier_engine::dossier_store::audit::MAX_PAGE,
        ..AuditQuery::default()
    };
    loop {
        let page = catalog.audit_list(&query)?;
        if seen + page.entries.len() > keep {
            return Ok(Some(page.entries[keep - seen].finished_at));
        }
        seen += page.entries.len();
        match page.next_cursor.as_deref().and_then(Cursor::parse) {
            Some(c) => query.cursor = Some(c),
            None => return Ok(None),
        }
    }
}

/// Writes every entry finishing before `cutoff` to a new JSONL file in `dir`.
fn export_before(
    catalog: &dyn CatalogBackend,
    cutoff: DateTime<Utc>,
    dir: &std::path::Path,
    now: DateTime<Utc>,
) -> Result<(u64, Option<std::path::PathBuf>), String> {
    use std::io::Write as _;
    let io = |e: std::io::Error| format!("exporting the audit log to {}: {e}", dir.display());
    let mut query = AuditQuery {
        until: Some(cutoff),
        limit: dossier_engine::dossier_store::audit::MAX_PAGE,
        ..AuditQuery::default()
    };
    let mut page = catalog.audit_list(&query).map_err(|e| e.to_string())?;
    if page.entries.is_empty() {
        return Ok((0, None));
    }
    std::fs::create_dir_all(dir).map_err(io)?;
    let stamp = now.format("%Y%m%dT%H%M%S%.6fZ");
    let file = dir.join(format!("audit-{stamp}.jsonl"));
    let partial = dir.join(format!("audit-{stamp}.jsonl.partial"));
    let mut out = std::io::BufWriter::new(std::fs::File::create(&partial).map_err(io)?);
    let mut n = 0u64;
    loop {
        for e in &page.entries {
            let mut line = serde_json::to_value(e).map_err(|e| e.to_string())?;
            if e.has_trace {
                let trace = catalog
                    .audit_trace(&e.request_id, &e.principal)
                    .map_err(|e| e.to_string())?;
                if let (Some(t), Some(obj)) = (trace, line.as_object_mut()) {
                    let v = serde_json::from_slice(&t).unwrap_or_else(|_| {
                        serde_json::Value::String(String::from_utf8_lossy(&t).into_owned())
                    });
                    obj.insert("trace".into(), v);
                }
            }
            serde_json::to_writer(&mut out, &line).map_err(|e| e.to_string())?;
            out.write_all(b"\n").map_err(io)?;
            n += 1;
        }
        match page.next_cursor.as_deref().and_then(Cursor::parse) {
            Some(c) => query.cursor = Some(c),
            None => break,
        }
        page = catalog.audit_list(&query).map_err(|e| e.to_string())?;
    }
    let out = out.into_inner().map_err(|e| io(e.into_error()))?;
    out.sync_all().map_err(io)?;
    drop(out);
    std::fs::rename(&partial, &file).map_err(io)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok((n, Some(file)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(n: usize) -> Pending {
        Pending {
            request_id: format!("r{n}"),
            finished_at: Utc::now(),
            principal: "u7".into(),
            tenant: "shop".into(),
            groups: vec![],
            kbs: None,
            route: "/v1/search",
            now: None,
            as_of: None,
            mode: None,
            question: "耳机 退货".into(),
            outcome: Outcome::Search {
                value: Arc::new(serde_json::json!({"hits": [{"chunk_id": "a@1#0"}]})),
                cached: false,
            },
            masker: None,
        }
    }

    fn count(m: &Metrics, outcome: &str) -> u64 {
        let text = m.render();
        let line = format!("dossier_audit_entries_total{{outcome=\"{outcome}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&line))
            .map_or(0, |n| n.parse().unwrap())
    }

    /// A store that fails every append: submitting never fails or waits, and every
    /// entry is counted as failed.
    #[test]
    fn a_failing_store_fails_no_request() {
        let metrics = Arc::new(Metrics::new());
        let sink: Sink = Box::new(|_| Err("disk full".into()));
        let a = Auditor::with_sink(sink, metrics.clone(), AuditQuestions::Digest, 16);
        for n in 0..10 {
            a.submit(pending(n));
        }
        assert!(a.flush(Duration::from_secs(5)));
        assert_eq!(count(&metrics, "failed"), 10);
        assert_eq!(count(&metrics, "written"), 0);
    }

    /// A store that does not answer: submitting still returns at once; past the queue
    /// entries are dropped and counted, and dropping the auditor does not hang.
    #[test]
    fn a_stuck_store_slows_no_request() {
        let metrics = Arc::new(Metrics::new());
        let (entered_tx, entered) = mpsc::channel::<()>();
        let (release, wait) = mpsc::channel::<()>();
        let sink: Sink = Box::new(move |_| {
            let _ = entered_tx.send(());
            let _ = wait.recv();
            Ok(())
        });
        let a = Auditor::with_sink(sink, metrics.clone(), AuditQuestions::Digest, 4);
        a.submit(pending(0));
        entered.recv_timeout(Duration::from_secs(5)).unwrap();
        // The writer is stuck in the store with the first entry.
        let started = Instant::now();
        for n in 1..=100 {
            a.submit(pending(n));
        }
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "{:?}",
            started.elapsed()
        );
        // Four wait in the queue; the rest are dropped.
        assert_eq!(count(&metrics, "dropped"), 96, "{}", metrics.render());
        drop(release);
        drop(a);
        assert_eq!(count(&metrics, "written"), 5);
    }

    /// What an entry keeps of the question, by setting.
    #[test]
    fn the_question_is_a_digest_unless_texts_are_kept() {
        let d = record_of(pending(1), AuditQuestions::Digest).entry;
        assert_eq!(d.question, None);
        assert_eq!(d.question_blake3, digest("耳机 退货"));
        assert_eq!(d.evidence, vec!["a@1#0".to_string()]);
        assert_eq!(d.status, "ok");
        let t = record_of(pending(1), AuditQuestions::Text).entry;
        assert_eq!(t.question.as_deref(), Some("耳机 退货"));
    }

    #[test]
    fn filters_parse_or_say_what_is_wrong() {
        let ok = query_of(AuditParams {
            since: Some("2026-01-01T00:00:00+08:00".into()),
            limit: Some(10),
            cursor: Some("5.7".into()),
            ..AuditParams::default()
        })
        .unwrap();
        assert_eq!(ok.since.unwrap().to_rfc3339(), "2025-12-31T16:00:00+00:00");
        assert_eq!(ok.cursor, Some(Cursor { micros: 5, seq: 7 }));
        for bad in [
            AuditParams {
                since: Some("yesterday".into()),
                ..AuditParams::default()
            },
            AuditParams {
                limit: Some(MAX_PAGE + 1),
                ..AuditParams::default()
            },
            AuditParams {
                limit: Some(0),
                ..AuditParams::default()
            },
            AuditParams {
                cursor: Some("x".into()),
                ..AuditParams::default()
            },
        ] {
            assert!(query_of(bad).is_err());
        }
    }
}
