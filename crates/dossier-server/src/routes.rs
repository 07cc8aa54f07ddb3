//! The read handlers: health, search, ask and graph inspection. Each authenticates
//! through [`Caller`], parses its input into [`Failure`]s, and runs the engine off the
//! async runtime via [`blocking`]. Search and ask go through the cache, the tenant's
//! concurrency limit and a deadline.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::NaiveDate;
use dossier_agent::{Agent, AskRequest, EngineTools};
use dossier_core::cancel::Cancel;
use dossier_engine::Scope;
use dossier_engine::{Engine, Mode, SearchRequest};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::audit::{Outcome, Pending};
use crate::auth::Caller;
use crate::cache::CacheKey;
use crate::error::{ApiError, ErrorBody, Failure};
use crate::openapi::{AskResult, EntityResult, SearchResult, SubgraphResult};
use crate::request_id::RequestId;
use crate::traces::TraceRecord;
use crate::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/v1/search", post(search))
        .route("/v1/ask", post(ask))
        .route("/v1/graph/entity/{name}", get(graph_entity))
        .route("/v1/graph/neighbors/{name}", get(graph_neighbors))
        .route("/v1/graph/evidence", post(graph_evidence))
        .route("/v1/graph/path", get(graph_path))
        .route("/v1/records/{table}/{key}", get(record))
}

/// Results a search may ask for at most.
pub const MAX_K: usize = 100;

/// `POST /v1/search`. The caller is the key's principal; the body cannot name one.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchBody {
    pub query: String,
    /// bm25, vector, hybrid, local, graph (default), global or drift.
    #[serde(default)]
    pub mode: Option<String>,
    /// Results wanted (default 5, at most 100).
    #[serde(default)]
    pub k: Option<usize>,
    /// The business date (default: the server's today).
    #[serde(default)]
    pub now: Option<NaiveDate>,
    /// Search the versions in force on this date.
    #[serde(default)]
    pub as_of: Option<NaiveDate>,
    /// Only documents of these knowledge bases (within the key's own; at most 16);
    /// absent or empty: all the key may read.
    #[serde(default)]
    pub kb: Vec<String>,
}

/// `POST /v1/ask`. The caller is the key's principal; the body cannot name one.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AskBody {
    pub question: String,
    /// The business clock (default: the server's today).
    #[serde(default)]
    pub now: Option<NaiveDate>,
    /// Judge document versions in force on this date.
    #[serde(default)]
    pub as_of: Option<NaiveDate>,
    /// Only documents of these knowledge bases (within the key's own; at most 16);
    /// absent or empty: all the key may read.
    #[serde(default)]
    pub kb: Vec<String>,
    /// Only `global` (ask the community reports); absent: the agent picks its tools.
    #[serde(default)]
    pub mode: Option<String>,
    /// Limits for this ask (steps, evidence, tokens, wall time, planner rounds), each
    /// capped by the operator's maxima (`dossier serve --ask-max-*`).
    #[serde(default)]
    pub budget: Option<dossier_agent::BudgetRequest>,
}

/// The business date a read is judged at: the query of the graph, document and section
/// routes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DateQuery {
    /// The business date (default: the server's today); sets each version's status.
    #[serde(default)]
    pub now: Option<NaiveDate>,
    /// Judge versions in force on this date.
    #[serde(default)]
    pub as_of: Option<NaiveDate>,
    /// Only documents of these knowledge bases, comma-separated (within the key's own;
    /// at most 16); absent: all the key may read.
    #[serde(default)]
    pub kb: Option<String>,
}

/// `GET /healthz`, `GET /readyz`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Health {
    pub status: String,
    /// `readyz` only: the catalog generation the store holds (the database's, for a
    /// shared store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_generation: Option<u64>,
    /// `readyz` only: the generation this process serves (its indexes and view).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_generation: Option<u64>,
    /// `readyz` only: commits made elsewhere that this replica has not replayed yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind: Option<u64>,
    /// `readyz` only, shared store: how long the oldest commit this replica has not
    /// replayed has waited, in milliseconds (0 when it is caught up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_ms: Option<f64>,
    /// `readyz` only: `embedded`, or `postgres` with the server's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
}

fn today() -> NaiveDate {
    chrono::Local::now().date_naive()
}

/// Runs blocking engine work on the blocking pool and binds its failure to the request.
pub(crate) async fn blocking<T, F>(rid: &RequestId, f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, Failure> + Send + 'static,
{
    // The request's span goes with the work, so that the engine's and the agent's
    // spans nest under it on the blocking pool.
    let span = tracing::Span::current();
    match tokio::task::spawn_blocking(move || span.in_scope(f)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(failure)) => Err(ApiError::new(rid, failure)),
        Err(join) => Err(ApiError::new(rid, Failure::Internal(join.to_string()))),
    }
}

/// The caller's scope at a date (the as-of date, else the business date, else today),
/// reading only the knowledge bases the request names (checked by [`kbs_of`]).
pub(crate) fn scope_of(
    caller: &Caller,
    now: Option<NaiveDate>,
    as_of: Option<NaiveDate>,
    kbs: &[String],
) -> Scope {
    caller
        .scope
        .judged_at(as_of.or(now).unwrap_or_else(today))
        .within_kbs(kbs)
}

/// The most knowledge bases one request may name.
pub const MAX_KBS: usize = 16;

/// The knowledge bases a request names, checked: at most [`MAX_KBS`], each an id. A kb
/// the key may not read is not an error — it reads like one that does not exist.
pub(crate) fn kbs_of(rid: &RequestId, kbs: &[String]) -> Result<Vec<String>, ApiError> {
    let bad = |why: String| ApiError::new(rid, Failure::Invalid(why));
    if kbs.len() > MAX_KBS {
        return Err(bad(format!(
            "`kb` names {} knowledge bases; at most {MAX_KBS}",
            kbs.len()
        )));
    }
    for k in kbs {
        if dossier_core::ids::check_id("kb", k).is_err()
            || k.trim().is_empty()
            || k.len() > 128
            || k.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(bad("`kb` ids are 1–128 characters without spaces".into()));
        }
    }
    Ok(kbs.to_vec())
}

/// [`kbs_of`] for a query string's comma-separated `kb`.
pub(crate) fn kbs_in_query(rid: &RequestId, kb: &Option<String>) -> Result<Vec<String>, ApiError> {
    let list: Vec<String> = kb
        .iter()
        .flat_map(|k| k.split(','))
        .map(|k| k.trim().to_string())
        .collect();
    kbs_of(rid, &list)
}

fn generation(engine: &Engine) -> Result<u64, Failure> {
    engine
        .store()
        .catalog()
        .generation()
        .map_err(|e| Failure::from(dossier_engine::Error::from(e)))
}

/// The generation of `tenant` this process serves: what its cached answers are keyed
/// by. Read from the published snapshot (no I/O), so a commit another replica made
/// counts once this one has replayed it.
fn tenant_generation(engine: &Engine, tenant: &str) -> u64 {
    engine.store().snapshot().tenant_generation(tenant)
}

fn cache_key(
    caller: &Caller,
    route: &'static str,
    generation: u64,
    request: &impl Serialize,
) -> CacheKey {
    let mut groups = caller.scope.groups().to_vec();
    groups.sort();
    CacheKey {
        route,
        principal: caller.principal.clone(),
        tenant: caller.tenant.clone(),
        groups,
        generation,
        request: serde_json::to_string(request).unwrap_or_default(),
    }
}

/// A JSON answer, marked `x-dossier-cache: hit|miss`.
pub(crate) fn cached_json(v: Arc<Value>, hit: bool) -> Response {
    let mut resp = Json(&*v).into_response();
    resp.headers_mut().insert(
        "x-dossier-cache",
        HeaderValue::from_static(if hit { "hit" } else { "miss" }),
    );
    resp
}

pub(crate) fn body<T>(rid: &RequestId, b: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    b.map(|Json(v)| v).map_err(|e| {
        if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                rid,
                Failure::TooLarge {
                    what: "the request body",
                    limit: MAX_JSON_BODY,
                },
            )
        } else {
            ApiError::new(rid, Failure::BadBody(e.body_text()))
        }
    })
}

/// Bytes a JSON request body may have (uploads have their own, larger limit). Set on
/// the whole router, so the framework refuses a larger body before reading it.
pub const MAX_JSON_BODY: usize = 64 * 1024;
/// Characters a search query may have: a query is embedded and tokenised whole, so
/// its length is work the caller chooses.
pub const MAX_QUERY_CHARS: usize = 2_000;
/// Characters a question (ask, or a chat completion's last user message) may have.
pub const MAX_QUESTION_CHARS: usize = 4_000;

/// `TooLarge` when `text` is over `limit` characters.
pub(crate) fn within(
    rid: &RequestId,
    what: &'static str,
    text: &str,
    limit: usize,
) -> Result<(), ApiError> {
    // Bytes bound characters from above: most texts never need counting.
    if text.len() > limit && text.chars().count() > limit {
        return Err(ApiError::new(rid, Failure::TooLarge { what, limit }));
    }
    Ok(())
}

/// The query string's parameters, or the `invalid` error its rejection reads as.
pub(crate) fn query<T>(
    rid: &RequestId,
    q: Result<Query<T>, QueryRejection>,
) -> Result<T, ApiError> {
    q.map(|Query(v)| v)
        .map_err(|e| ApiError::new(rid, Failure::Invalid(e.body_text())))
}

#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "The process is up", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        catalog_generation: None,
        served_generation: None,
        behind: None,
        lag_ms: None,
        backend: None,
    })
}

#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "The store answers", body = Health),
        (status = 500, description = "The store does not answer", body = ErrorBody)))]
pub async fn readyz(
    State(state): State<AppState>,
    rid: RequestId,
) -> Result<Json<Health>, ApiError> {
    let engine = state.engine.clone();
    let (generation, served, lag_ms, backend) = blocking(&rid, move || {
        let failed = |e| Failure::from(dossier_engine::Error::from(e));
        let served = engine.store().snapshot().generation;
        let (backend, lag) = match engine.store().shared() {
            Some(pg) => (
                format!("postgres {}", pg.ping().map_err(failed)?),
                Some(pg.unreplayed_for_ms(served).map_err(failed)?.unwrap_or(0.0)),
            ),
            None => ("embedded".into(), None),
        };
        Ok((generation(&engine)?, served, lag, backend))
    })
    .await?;
    Ok(Json(Health {
        status: "ready".into(),
        catalog_generation: Some(generation),
        served_generation: Some(served),
        behind: Some(generation.saturating_sub(served)),
        lag_ms,
        backend: Some(backend),
    }))
}

#[utoipa::path(post, path = "/v1/search", tag = "search",
    request_body = SearchBody,
    security(("api_key" = [])),
    responses(
        (status = 413, description = "The body is over 64 KiB, or the query over 2,000 characters", body = ErrorBody),
        (status = 200, description = "What `dossier search --json` prints", body = SearchResult),
        (status = 400, description = "Bad body, mode or k", body = ErrorBody),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key's principal is unknown to the store", body = ErrorBody)))]
pub async fn search(
    State(state): State<AppState>,
    caller: Caller,
    b: Result<Json<SearchBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(&caller.request_id, b)?;
    let pending = |outcome| {
        Pending::of(&caller, "/v1/search", &b.query, outcome)
            .dated(b.now, b.as_of)
            .read_in(&caller.scope.within_kbs(&b.kb))
            .mode(Some(b.mode.as_deref().unwrap_or("graph")))
    };
    let out = run_search(&state, &caller, b.clone()).await;
    state.audit.submit(pending(match &out {
        Ok((v, hit)) => Outcome::Search {
            value: v.clone(),
            cached: *hit,
        },
        Err(e) => Outcome::failed(e),
    }));
    let (v, hit) = out?;
    Ok(cached_json(v, hit))
}

/// A search for `caller`: the answer and whether it came from the cache.
async fn run_search(
    state: &AppState,
    caller: &Caller,
    b: SearchBody,
) -> Result<(Arc<Value>, bool), ApiError> {
    let rid = caller.request_id.clone();
    let mode: Mode = match b.mode.as_deref() {
        None => Mode::Graph,
        Some(m) => m
            .parse()
            .map_err(|e| ApiError::new(&rid, Failure::from(e)))?,
    };
    let k = b.k.unwrap_or(5);
    if k == 0 || k > MAX_K {
        return Err(ApiError::new(
            &rid,
            Failure::Invalid(format!("k must be between 1 and {MAX_K}")),
        ));
    }
    if b.query.trim().is_empty() {
        return Err(ApiError::new(
            &rid,
            Failure::Invalid("query is empty".into()),
        ));
    }
    within(&rid, "query", &b.query, MAX_QUERY_CHARS)?;
    state.recent_queries.push(&caller.principal, &b.query);
    let req = SearchRequest {
        principal: caller.principal.clone(),
        query: b.query,
        mode,
        k,
        now: b.now.unwrap_or_else(today),
        as_of: b.as_of,
        kbs: kbs_of(&rid, &b.kb)?,
    };
    let generation = tenant_generation(&state.engine, &caller.tenant);
    let key = cache_key(
        caller,
        "search",
        generation,
        &(
            req.query.as_str(),
            mode.name(),
            k,
            req.now,
            req.as_of,
            &req.kbs,
        ),
    );
    if let Some(v) = state.cache.get(&key) {
        state.metrics.cache_hit("/v1/search");
        return Ok((v, true));
    }
    state.metrics.cache_miss("/v1/search");
    // Every mode but BM25 embeds the query (graph modes also build views and
    // propagate): they take one of the tenant's slots.
    let permit = if mode != Mode::Bm25 {
        Some(
            state
                .limits
                .expensive(&caller.tenant, &caller.principal)
                .map_err(|f| ApiError::new(&rid, f))?,
        )
    } else {
        None
    };
    let deadline = state.limits.config().search_deadline;
    let engine = state.engine.clone();
    let run = req.clone();
    // The work is abandoned at the deadline, not left running: its queued embedding is
    // dropped unrun and its stages stop, which frees the tenant's slot.
    let cancel = Cancel::with_timeout(deadline);
    let work_cancel = cancel.clone();
    let work = blocking(&rid, move || {
        let _permit = permit;
        engine
            .search_until(&run, &work_cancel)
            .map_err(Failure::from)
    });
    let outcome = tokio::time::timeout(deadline, work).await;
    cancel.cancel();
    let value = match outcome {
        // Cancelled by its own deadline inside the engine: the same as a timeout.
        Ok(Err(e)) if matches!(e.failure, Failure::DeadlineExceeded) && mode != Mode::Bm25 => {
            return degraded_search(state, &rid, req, mode, deadline).await;
        }
        Ok(resp) => {
            let v = Arc::new(
                serde_json::to_value(resp?)
                    .map_err(|e| ApiError::new(&rid, Failure::Internal(e.to_string())))?,
            );
            state.cache.put(key, v.clone());
            v
        }
        Err(_) if mode != Mode::Bm25 => {
            return degraded_search(state, &rid, req, mode, deadline).await;
        }
        Err(_) => return Err(ApiError::new(&rid, Failure::DeadlineExceeded)),
    };
    Ok((value, false))
}

/// Past the deadline: an honest, degraded answer from BM25 (which does not embed or
/// walk the graph), saying so; never cached. It has a deadline of its own.
async fn degraded_search(
    state: &AppState,
    rid: &RequestId,
    req: SearchRequest,
    mode: Mode,
    deadline: Duration,
) -> Result<(Arc<Value>, bool), ApiError> {
    let engine = state.engine.clone();
    let mut fallback = req;
    fallback.mode = Mode::Bm25;
    let cancel = Cancel::with_timeout(deadline);
    let work_cancel = cancel.clone();
    let resp = tokio::time::timeout(
        deadline,
        blocking(rid, move || {
            engine
                .search_until(&fallback, &work_cancel)
                .map_err(Failure::from)
        }),
    )
    .await;
    cancel.cancel();
    let resp = resp.map_err(|_| ApiError::new(rid, Failure::DeadlineExceeded))??;
    let mut v = serde_json::to_value(resp)
        .map_err(|e| ApiError::new(rid, Failure::Internal(e.to_string())))?;
    v["degraded"] = serde_json::json!({
        "from": mode.name(),
        "to": "bm25",
        "reason": format!("{} mode did not finish within the {} ms deadline", mode.name(), deadline.as_millis()),
    });
    state.metrics.degraded("/v1/search");
    Ok((Arc::new(v), false))
}

#[utoipa::path(post, path = "/v1/ask", tag = "ask",
    request_body = AskBody,
    security(("api_key" = [])),
    responses(
        (status = 413, description = "The body is over 64 KiB, or the question over 4,000 characters", body = ErrorBody),
        (status = 200, description = "What `dossier ask --json` prints (no model: deterministic planner, extractive writer)", body = AskResult),
        (status = 400, description = "Bad body or mode", body = ErrorBody),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key's principal is unknown to the store", body = ErrorBody)))]
pub async fn ask(
    State(state): State<AppState>,
    caller: Caller,
    b: Result<Json<AskBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let rid = caller.request_id.clone();
    let b = body(&rid, b)?;
    let mode = match b.mode.as_deref() {
        None => None,
        Some(m) => {
            let m: Mode = m
                .parse()
                .map_err(|e| ApiError::new(&rid, Failure::from(e)))?;
            if m != Mode::Global {
                return Err(ApiError::new(
                    &rid,
                    Failure::Invalid(
                        "ask mode takes only `global` (other questions pick their own tools)"
                            .into(),
                    ),
                ));
            }
            Some(m)
        }
    };
    state.recent_queries.push(&caller.principal, &b.question);
    let mut req = AskRequest::new(&caller.principal, &b.question, b.now.unwrap_or_else(today));
    req.as_of = b.as_of;
    req.kbs = kbs_of(&rid, &b.kb)?;
    req.mode = mode;
    req.budget = dossier_agent::Budget::within(
        &state.limits.config().ask_budget,
        &b.budget.unwrap_or_default(),
    );
    let (v, hit) = run_ask(&state, &caller, req, "/v1/ask").await?;
    Ok(cached_json(v, hit))
}

/// Runs the agent for `caller` (with the server's model if one is configured, else the
/// deterministic planner and extractive writer)
/// through the cache, the tenant's concurrency limit and the ask deadline, and keeps
/// the trajectory under the request id. `/v1/ask` and `/v1/chat/completions` both
/// answer through here. Returns the response as JSON and whether it came from the
/// cache.
pub(crate) async fn run_ask(
    state: &AppState,
    caller: &Caller,
    req: AskRequest,
    route: &'static str,
) -> Result<(Arc<Value>, bool), ApiError> {
    let (question, now, as_of, mode) = (req.question.clone(), req.now, req.as_of, req.mode);
    let kbs = req.kbs.clone();
    let out = answer_ask(state, caller, req, route).await;
    let outcome = match &out {
        Ok((value, hit, reasons)) => {
            let trace = Arc::new(TraceRecord {
                request_id: caller.request_id.0.clone(),
                route: route.into(),
                question: question.clone(),
                status: value["status"].as_str().unwrap_or_default().to_string(),
                finished_at: chrono::Utc::now().to_rfc3339(),
                trace: value["trace"].clone(),
                principal: caller.principal.clone(),
            });
            // One record, shared by the memory log and the audit entry.
            state.traces.record(trace.clone());
            Outcome::Ask {
                value: value.clone(),
                reasons: reasons.clone(),
                cached: *hit,
                trace,
            }
        }
        Err(e) => Outcome::failed(e),
    };
    state.audit.submit(
        Pending::of(caller, route, &question, outcome)
            .dated(Some(now), as_of)
            .read_in(&caller.scope.within_kbs(&kbs))
            .mode(mode.map(|m| m.name())),
    );
    out.map(|(v, hit, _)| (v, hit))
}

/// [`run_ask`]'s work: the answer, whether it came from the cache, and the unfiltered
/// audit reasons of the run that computed it.
async fn answer_ask(
    state: &AppState,
    caller: &Caller,
    mut req: AskRequest,
    route: &'static str,
) -> Result<(Arc<Value>, bool, Option<Arc<Value>>), ApiError> {
    let rid = caller.request_id.clone();
    if req.question.trim().is_empty() {
        return Err(ApiError::new(
            &rid,
            Failure::Invalid("question is empty".into()),
        ));
    }
    within(&rid, "question", &req.question, MAX_QUESTION_CHARS)?;
    req.principal = caller.principal.clone();
    let generation = tenant_generation(&state.engine, &caller.tenant);
    let key = cache_key(
        caller,
        "ask",
        generation,
        &(
            req.question.as_str(),
            req.now,
            req.as_of,
            &req.kbs,
            req.mode.map(|m| m.name()),
            serde_json::to_string(&req.budget).unwrap_or_default(),
        ),
    );
    let (value, hit, reasons) = match state.cache.get_noted(&key) {
        Some((v, reasons)) => {
            state.metrics.cache_hit(route);
            (v, true, reasons)
        }
        None => {
            state.metrics.cache_miss(route);
            let permit = state
                .limits
                .expensive(&caller.tenant, &caller.principal)
                .map_err(|f| ApiError::new(&rid, f))?;
            // The agent's own wall budget is the deadline, so a slow run ends with an
            // honest partial answer; the outer timeout only catches a stuck tool.
            let deadline = state.limits.config().ask_deadline;
            req.budget.max_wall = req.budget.max_wall.min(deadline);
            let engine = state.engine.clone();
            let metrics = state.metrics.clone();
            let model = state.model.clone();
            let audit_rid = rid.0.clone();
            let audit_masker = caller.scope.masker_shared();
            let tenant = caller.tenant.clone();
            // Abandoned at the outer deadline: the agent's searches stop and their
            // queued embeddings are dropped, so the slot is freed.
            let cancel = Cancel::with_timeout(deadline + Duration::from_secs(5));
            let work_cancel = cancel.clone();
            let work = blocking(&rid, move || {
                let _permit = permit;
                let mut tools = EngineTools::new(&engine);
                tools.cancel = work_cancel;
                let agent = Agent {
                    engine: &engine,
                    tools: &tools,
                    model: model.as_deref(),
                };
                let asked = agent.ask_audited(&req).map_err(Failure::from)?;
                // What the caller may not be told goes to the operator's logs only:
                // stderr (one JSON line per entry) here, and the durable audit log
                // (the reasons returned below).
                for a in &asked.audit {
                    // Masked as the caller's answer is: the log holds no value the
                    // caller's groups do not grant.
                    let note = match &audit_masker {
                        Some(m) => m.mask(&a.note),
                        None => std::borrow::Cow::Borrowed(a.note.as_str()),
                    };
                    eprintln!(
                        "dossier-server: audit {}",
                        serde_json::json!({
                            "request_id": audit_rid,
                            "principal": req.principal,
                            "step": a.step,
                            "action": a.action,
                            "status": a.status,
                            "note": note,
                        })
                    );
                }
                metrics.observe_ask(&asked.response);
                // An answer that read a live table is not kept: its source changes
                // without a commit, so no generation would retire the cached copy.
                let read_live = asked.response.trace.steps.iter().any(|s| {
                    s.action == "record"
                        && s.args
                            .get("table")
                            .and_then(|t| t.as_str())
                            .is_some_and(|t| engine.is_live_table(&tenant, t))
                });
                let v = serde_json::to_value(&asked.response)
                    .map_err(|e| Failure::Internal(e.to_string()))?;
                Ok((v, crate::audit::reasons_of(&asked.audit), read_live))
            });
            let outcome = tokio::time::timeout(deadline + Duration::from_secs(5), work).await;
            cancel.cancel();
            let (v, reasons, read_live) =
                outcome.map_err(|_| ApiError::new(&rid, Failure::DeadlineExceeded))??;
            let v = Arc::new(v);
            // The reasons stay beside the answer for the audit entries of cache hits.
            if !read_live {
                state.cache.put_noted(key, v.clone(), Some(reasons.clone()));
            }
            (v, false, Some(reasons))
        }
    };
    Ok((value, hit, reasons))
}

#[utoipa::path(get, path = "/v1/graph/entity/{name}", tag = "graph",
    params(("name" = String, Path, description = "Entity name, alias or id"), DateQuery),
    security(("api_key" = [])),
    responses(
        (status = 400, description = "Bad query string (an unknown or malformed parameter)", body = ErrorBody),
        (status = 200, description = "What `dossier graph entity --json` prints", body = EntityResult),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 404, description = "No such entity in the caller's view (unknown and invisible read the same)", body = ErrorBody)))]
pub async fn graph_entity(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    q: Result<Query<DateQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let rid = caller.request_id.clone();
    let q = query(&rid, q)?;
    let engine = state.engine.clone();
    let scope = scope_of(&caller, q.now, q.as_of, &kbs_in_query(&rid, &q.kb)?);
    let v = blocking(&rid, move || {
        let e = engine.graph_entity(&scope, &name).map_err(Failure::from)?;
        serde_json::to_value(&e).map_err(|e| Failure::Internal(e.to_string()))
    })
    .await?;
    Ok(Json(v))
}

/// Query parameters of `GET /v1/graph/neighbors/{name}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct NeighborsQuery {
    /// Edges away from the entity (default 1, at most 3).
    #[serde(default)]
    pub hops: Option<usize>,
    #[serde(default)]
    pub now: Option<NaiveDate>,
    #[serde(default)]
    pub as_of: Option<NaiveDate>,
    /// Only documents of these knowledge bases, comma-separated (within the key's own;
    /// at most 16); absent: all the key may read.
    #[serde(default)]
    pub kb: Option<String>,
}

#[utoipa::path(get, path = "/v1/graph/neighbors/{name}", tag = "graph",
    params(("name" = String, Path, description = "Entity name, alias or id"), NeighborsQuery),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The entity's neighbourhood in the caller's view (what `dossier graph neighbors --json` prints)", body = SubgraphResult),
        (status = 400, description = "Bad hops", body = ErrorBody),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 404, description = "No such entity in the caller's view", body = ErrorBody)))]
pub async fn graph_neighbors(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    q: Result<Query<NeighborsQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let rid = caller.request_id.clone();
    let q = query(&rid, q)?;
    let hops = q.hops.unwrap_or(1);
    if !(1..=3).contains(&hops) {
        return Err(ApiError::new(
            &rid,
            Failure::Invalid("hops must be between 1 and 3".into()),
        ));
    }
    let engine = state.engine.clone();
    let scope = scope_of(&caller, q.now, q.as_of, &kbs_in_query(&rid, &q.kb)?);
    let v = blocking(&rid, move || {
        let g = engine
            .graph_neighbors(&scope, &name, hops)
            .map_err(Failure::from)?;
        serde_json::to_value(&g).map_err(|e| Failure::Internal(e.to_string()))
    })
    .await?;
    Ok(Json(v))
}

/// Query parameters of `GET /v1/graph/path`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PathQuery {
    /// Entity name, alias or id the path starts at.
    pub from: String,
    /// Entity name, alias or id the path ends at.
    pub to: String,
    /// Longest path looked for (default 4, at most 6).
    #[serde(default)]
    pub max_hops: Option<usize>,
    #[serde(default)]
    pub now: Option<NaiveDate>,
    #[serde(default)]
    pub as_of: Option<NaiveDate>,
    /// Only documents of these knowledge bases, comma-separated (within the key's own;
    /// at most 16); absent: all the key may read.
    #[serde(default)]
    pub kb: Option<String>,
}

/// A shortest chain of visible edges, or none.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PathResult {
    /// `from → relation → to` edges in order, each with its provenance; empty when the
    /// caller's view holds no path within `max_hops`.
    pub edges: Vec<dossier_engine::GraphEdge>,
    pub found: bool,
}

#[utoipa::path(get, path = "/v1/graph/path", tag = "graph",
    params(PathQuery),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "A shortest path in the caller's view (what `dossier graph path --json` prints)", body = PathResult),
        (status = 400, description = "Bad parameters", body = ErrorBody),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 404, description = "An end is not an entity of the caller's view", body = ErrorBody)))]
pub async fn graph_path(
    State(state): State<AppState>,
    caller: Caller,
    q: Result<Query<PathQuery>, QueryRejection>,
) -> Result<Json<PathResult>, ApiError> {
    let rid = caller.request_id.clone();
    let q = query(&rid, q)?;
    let max_hops = q.max_hops.unwrap_or(4);
    if !(1..=6).contains(&max_hops) {
        return Err(ApiError::new(
            &rid,
            Failure::Invalid("max_hops must be between 1 and 6".into()),
        ));
    }
    let engine = state.engine.clone();
    let scope = scope_of(&caller, q.now, q.as_of, &kbs_in_query(&rid, &q.kb)?);
    let edges = blocking(&rid, move || {
        engine
            .graph_path(&scope, &q.from, &q.to, max_hops)
            .map_err(Failure::from)
    })
    .await?;
    Ok(Json(PathResult {
        found: edges.is_some(),
        edges: edges.unwrap_or_default(),
    }))
}

/// `POST /v1/graph/evidence`: the evidence subgraph of an answer's citations.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceBody {
    /// Cited chunk ids (`DOC@VERSION#N`) or `DOC@VERSION`, as in an answer's citations
    /// and edge provenance (at most 200).
    pub cites: Vec<String>,
    #[serde(default)]
    pub now: Option<NaiveDate>,
    #[serde(default)]
    pub as_of: Option<NaiveDate>,
    /// Only documents of these knowledge bases (within the key's own; at most 16);
    /// absent or empty: all the key may read.
    #[serde(default)]
    pub kb: Vec<String>,
}

#[utoipa::path(post, path = "/v1/graph/evidence", tag = "graph",
    request_body = EvidenceBody,
    security(("api_key" = [])),
    responses(
        (status = 200, description = "Edges of the caller's view whose provenance is among the cites, and the entities they join", body = SubgraphResult),
        (status = 400, description = "Bad body", body = ErrorBody),
        (status = 401, description = "No or unknown API key", body = ErrorBody)))]
pub async fn graph_evidence(
    State(state): State<AppState>,
    caller: Caller,
    b: Result<Json<EvidenceBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let rid = caller.request_id.clone();
    let b = body(&rid, b)?;
    if b.cites.len() > 200 {
        return Err(ApiError::new(
            &rid,
            Failure::Invalid("at most 200 cites".into()),
        ));
    }
    let engine = state.engine.clone();
    let scope = scope_of(&caller, b.now, b.as_of, &kbs_of(&rid, &b.kb)?);
    let v = blocking(&rid, move || {
        let g = engine
            .evidence_subgraph(&scope, &b.cites)
            .map_err(Failure::from)?;
        serde_json::to_value(&g).map_err(|e| Failure::Internal(e.to_string()))
    })
    .await?;
    Ok(Json(v))
}

/// Any other path.
pub async fn no_route(rid: RequestId) -> ApiError {
    ApiError::new(&rid, Failure::NoRoute)
}

/// A known path with a method it does not take.
pub async fn wrong_method(rid: RequestId) -> ApiError {
    ApiError::new(&rid, Failure::MethodNotAllowed)
}

/// `GET /v1/records/{table}/{key}`: one row of the caller's tenant.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RecordResult {
    pub table: String,
    pub key: String,
    /// The row's fields as stored.
    #[schema(value_type = Object)]
    pub fields: serde_json::Map<String, Value>,
}

#[utoipa::path(get, path = "/v1/records/{table}/{key}", tag = "records",
    params(("table" = String, Path, description = "Record table of the caller's tenant"),
           ("key" = String, Path, description = "The row's key")),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The row, which the caller's principal may read", body = RecordResult),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 404, description = "No such row the caller may read (a row of another owner, another tenant or no row at all: one answer)", body = ErrorBody),
        (status = 502, description = "The live table's source failed (`source_unavailable`)", body = ErrorBody),
        (status = 504, description = "The live table's source did not answer in time", body = ErrorBody)))]
pub async fn record(
    State(state): State<AppState>,
    caller: Caller,
    Path((table, key)): Path<(String, String)>,
) -> Result<Json<RecordResult>, ApiError> {
    let rid = caller.request_id.clone();
    let engine = state.engine.clone();
    let scope = caller.scope.clone();
    let found = blocking(&rid, move || {
        use dossier_engine::RecordLookup;
        match engine.record(&scope, &table, &key).map_err(Failure::from)? {
            RecordLookup::Found { row, .. } => Ok(RecordResult {
                table: row.table,
                key: row.key,
                fields: row.fields,
            }),
            // One answer for "not yours" and "not there".
            RecordLookup::Missing | RecordLookup::Forbidden => Err(Failure::NotFound),
            // A live table's source that did not answer: said, never "no such row".
            RecordLookup::Unavailable { timeout: true, .. } => Err(Failure::DeadlineExceeded),
            RecordLookup::Unavailable { message, .. } => Err(Failure::SourceUnavailable(message)),
        }
    })
    .await?;
    Ok(Json(found))
}
