//! The handlers. Each authenticates through [`Caller`], parses its input into
//! [`Failure`]s, and runs the engine off the async runtime via [`blocking`].

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::Json;
use chrono::NaiveDate;
use dossier_agent::{Agent, AskRequest, AskResponse, EngineTools};
use dossier_core::Scope;
use dossier_engine::{Engine, Mode, SearchRequest, SearchResponse};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, Failure};
use crate::openapi::{AskResult, EntityResult, SearchResult};
use crate::request_id::RequestId;
use crate::AppState;

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
    /// Only `global` (ask the community reports); absent: the agent picks its tools.
    #[serde(default)]
    pub mode: Option<String>,
}

/// Query parameters of the graph routes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct GraphQuery {
    /// The business date (default: the server's today).
    #[serde(default)]
    pub now: Option<NaiveDate>,
    /// Judge versions in force on this date.
    #[serde(default)]
    pub as_of: Option<NaiveDate>,
}

/// `GET /healthz`, `GET /readyz`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Health {
    pub status: String,
    /// `readyz` only: the catalog generation the store serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_generation: Option<u64>,
}

fn today() -> NaiveDate {
    chrono::Local::now().date_naive()
}

/// Runs blocking engine work on the blocking pool and binds its failure to the request.
async fn blocking<T, F>(rid: &RequestId, f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, Failure> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(failure)) => Err(ApiError::new(rid, failure)),
        Err(join) => Err(ApiError::new(rid, Failure::Internal(join.to_string()))),
    }
}

/// The caller's scope; a key whose principal the store does not know is refused.
fn scope_of(
    engine: &Engine,
    principal: &str,
    now: Option<NaiveDate>,
    as_of: Option<NaiveDate>,
) -> Result<Scope, Failure> {
    let p = known_principal(engine, principal)?;
    Ok(Scope::new(&p, as_of.or(now).unwrap_or_else(today)))
}

fn known_principal(engine: &Engine, principal: &str) -> Result<dossier_core::Principal, Failure> {
    engine.principal(principal).map_err(|e| match e {
        dossier_engine::Error::NotFound(_) => Failure::UnknownPrincipal,
        other => other.into(),
    })
}

fn body<T>(rid: &RequestId, b: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    b.map(|Json(v)| v)
        .map_err(|e| ApiError::new(rid, Failure::BadBody(e.body_text())))
}

#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "The process is up", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        catalog_generation: None,
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
    let generation = blocking(&rid, move || {
        engine
            .store()
            .catalog()
            .generation()
            .map_err(|e| Failure::from(dossier_engine::Error::from(e)))
    })
    .await?;
    Ok(Json(Health {
        status: "ready".into(),
        catalog_generation: Some(generation),
    }))
}

#[utoipa::path(post, path = "/v1/search", tag = "search",
    request_body = SearchBody,
    security(("api_key" = [])),
    responses(
        (status = 200, description = "What `dossier search --json` prints", body = SearchResult),
        (status = 400, description = "Bad body, mode or k", body = ErrorBody),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key's principal is unknown to the store", body = ErrorBody)))]
pub async fn search(
    State(state): State<AppState>,
    caller: Caller,
    b: Result<Json<SearchBody>, JsonRejection>,
) -> Result<Json<SearchResponse>, ApiError> {
    let rid = caller.request_id.clone();
    let b = body(&rid, b)?;
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
    let engine = state.engine.clone();
    let resp = blocking(&rid, move || {
        known_principal(&engine, &caller.principal)?;
        let req = SearchRequest {
            principal: caller.principal,
            query: b.query,
            mode,
            k,
            now: b.now.unwrap_or_else(today),
            as_of: b.as_of,
        };
        engine.search(&req).map_err(Failure::from)
    })
    .await?;
    Ok(Json(resp))
}

#[utoipa::path(post, path = "/v1/ask", tag = "ask",
    request_body = AskBody,
    security(("api_key" = [])),
    responses(
        (status = 200, description = "What `dossier ask --json` prints (no model: deterministic planner, extractive writer)", body = AskResult),
        (status = 400, description = "Bad body or mode", body = ErrorBody),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key's principal is unknown to the store", body = ErrorBody)))]
pub async fn ask(
    State(state): State<AppState>,
    caller: Caller,
    b: Result<Json<AskBody>, JsonRejection>,
) -> Result<Json<AskResponse>, ApiError> {
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
    let engine = state.engine.clone();
    let resp = blocking(&rid, move || {
        known_principal(&engine, &caller.principal)?;
        let tools = EngineTools::new(&engine);
        let agent = Agent {
            engine: &engine,
            tools: &tools,
            model: None,
        };
        let mut req = AskRequest::new(&caller.principal, &b.question, b.now.unwrap_or_else(today));
        req.as_of = b.as_of;
        req.mode = mode;
        agent.ask(&req).map_err(Failure::from)
    })
    .await?;
    Ok(Json(resp))
}

#[utoipa::path(get, path = "/v1/graph/entity/{name}", tag = "graph",
    params(("name" = String, Path, description = "Entity name, alias or id"), GraphQuery),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "What `dossier graph entity --json` prints", body = EntityResult),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 404, description = "No such entity in the caller's view (unknown and invisible read the same)", body = ErrorBody)))]
pub async fn graph_entity(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    q: Result<Query<GraphQuery>, QueryRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let rid = caller.request_id.clone();
    let Query(q) = q.map_err(|e| ApiError::new(&rid, Failure::Invalid(e.body_text())))?;
    let engine = state.engine.clone();
    let v = blocking(&rid, move || {
        let scope = scope_of(&engine, &caller.principal, q.now, q.as_of)?;
        let e = engine.graph_entity(&scope, &name).map_err(Failure::from)?;
        serde_json::to_value(&e).map_err(|e| Failure::Internal(e.to_string()))
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
