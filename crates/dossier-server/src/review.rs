//! The review queue over HTTP: candidates (look-alike supersessions, name merges,
//! model-proposed relations) with the source text that supports them, and the
//! approve / reject decisions that turn them into facts or keep them out.
//!
//! **Invariants:** admin keys only, and only the key's tenant: another tenant's
//! candidate reads like one that does not exist. The reviewer recorded in a decision is
//! the key's principal, never a name from the body. What an admin may read: a
//! candidate only when every source it was built from is one the admin's own principal
//! may read (`Engine::review_readable`) — otherwise it reads like one that does not
//! exist — and supporting text only from versions that principal may read.
//! Every decision commits and empties the answer cache.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use dossier_core::review::{Decision, Verdict};
use dossier_engine::review::ReviewItem;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi, ToSchema};

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, Failure};
use crate::routes::{blocking, body, query, scope_of};
use crate::AppState;

#[derive(OpenApi)]
#[openapi(
    paths(list, show, approve, reject),
    components(schemas(ReviewQuery, DecisionBody))
)]
pub struct ReviewApi;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/review", get(list))
        .route("/v1/review/{id}", get(show))
        .route("/v1/review/{id}/approve", post(approve))
        .route("/v1/review/{id}/reject", post(reject))
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ReviewQuery {
    /// `open` (default) or `all` (decided ones too).
    #[serde(default)]
    pub status: Option<String>,
    /// Include each candidate's supporting text (default true).
    #[serde(default)]
    pub evidence: Option<bool>,
}

/// `POST /v1/review/{id}/approve|reject`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    /// Why (kept with the decision).
    #[serde(default)]
    pub note: Option<String>,
}

/// Drops supporting text from versions the reviewer may not read.
fn visible_evidence(engine: &dossier_engine::Engine, caller: &Caller, item: &mut ReviewItem) {
    let scope = scope_of(caller, None, None, &[]);
    item.evidence
        .retain(|e| engine.may_read_version(&scope, &e.doc_id, &e.version));
}

#[utoipa::path(get, path = "/v1/review", tag = "review",
    params(ReviewQuery),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The tenant's candidates, each with its supporting text", body = Vec<dossier_engine::review::ReviewItem>),
        (status = 400, description = "Bad status", body = ErrorBody),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no admin scope", body = ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    q: Result<Query<ReviewQuery>, QueryRejection>,
) -> Result<Json<Vec<ReviewItem>>, ApiError> {
    let rid = caller.request_id.clone();
    let q = query(&rid, q)?;
    caller.require_admin()?;
    let all = match q.status.as_deref() {
        None | Some("open") => false,
        Some("all") => true,
        Some(other) => {
            return Err(ApiError::new(
                &rid,
                Failure::Invalid(format!("status must be open or all, not {other}")),
            ))
        }
    };
    let engine = state.engine.clone();
    let items = blocking(&rid, move || {
        let scope = scope_of(&caller, None, None, &[]);
        let items = engine
            .review_list(Some(&caller.tenant), all)
            .map_err(Failure::from)?;
        // What an admin may read: candidates built only from sources their own
        // principal may read (see Engine::review_readable).
        let mut readable = Vec::with_capacity(items.len());
        for item in items {
            if engine
                .review_readable(&scope, &item)
                .map_err(Failure::from)?
            {
                readable.push(item);
            }
        }
        let mut items = readable;
        if q.evidence.unwrap_or(true) {
            engine
                .review_with_evidence(&mut items)
                .map_err(Failure::from)?;
            for item in &mut items {
                visible_evidence(&engine, &caller, item);
            }
        }
        Ok(items)
    })
    .await?;
    Ok(Json(items))
}

async fn find(state: &AppState, caller: &Caller, id: String) -> Result<ReviewItem, ApiError> {
    let engine = state.engine.clone();
    let caller2 = caller.clone();
    blocking(&caller.request_id, move || {
        // Only the key's tenant is looked at (its graph alone is built); another
        // tenant's candidate, and one built from text the admin may not read, read
        // like one that does not exist.
        let mut item = engine
            .review_show_in(Some(&caller2.tenant), &id)
            .map_err(Failure::from)?;
        let scope = scope_of(&caller2, None, None, &[]);
        if !engine
            .review_readable(&scope, &item)
            .map_err(Failure::from)?
        {
            return Err(Failure::NotFound);
        }
        visible_evidence(&engine, &caller2, &mut item);
        Ok(item)
    })
    .await
}

#[utoipa::path(get, path = "/v1/review/{id}", tag = "review",
    params(("id" = String, Path, description = "Candidate id")),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The candidate with its supporting text and any decision", body = dossier_engine::review::ReviewItem),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no admin scope", body = ErrorBody),
        (status = 404, description = "No such candidate in the key's tenant", body = ErrorBody)))]
pub async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<ReviewItem>, ApiError> {
    caller.require_admin()?;
    Ok(Json(find(&state, &caller, id).await?))
}

async fn decide(
    state: AppState,
    caller: Caller,
    id: String,
    b: Result<Json<DecisionBody>, JsonRejection>,
    verdict: Verdict,
) -> Result<Json<Decision>, ApiError> {
    let rid = caller.request_id.clone();
    let b = body(&rid, b)?;
    state.begin_write(&caller)?;
    // The candidate must be the key's tenant's (and exist) before anything is written.
    find(&state, &caller, id.clone()).await?;
    let engine = state.engine.clone();
    let by = caller.principal.clone();
    let tenant = caller.tenant.clone();
    let note = b.note.unwrap_or_default();
    let d = blocking(&rid, move || {
        engine
            .review_decide_in(Some(&tenant), &id, verdict, &by, &note)
            .map_err(Failure::from)
    })
    .await;
    state.cache.invalidate_tenant(&caller.tenant);
    Ok(Json(d?))
}

#[utoipa::path(post, path = "/v1/review/{id}/approve", tag = "review",
    params(("id" = String, Path, description = "Candidate id")),
    request_body = DecisionBody,
    security(("api_key" = [])),
    responses(
        (status = 400, description = "Bad body (not JSON, or unknown fields)", body = ErrorBody),
        (status = 200, description = "The recorded decision (reviewer = the key's principal)", body = dossier_core::review::Decision),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no admin scope", body = ErrorBody),
        (status = 404, description = "No such candidate in the key's tenant", body = ErrorBody)))]
pub async fn approve(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    b: Result<Json<DecisionBody>, JsonRejection>,
) -> Result<Json<Decision>, ApiError> {
    decide(state, caller, id, b, Verdict::Approved).await
}

#[utoipa::path(post, path = "/v1/review/{id}/reject", tag = "review",
    params(("id" = String, Path, description = "Candidate id")),
    request_body = DecisionBody,
    security(("api_key" = [])),
    responses(
        (status = 400, description = "Bad body (not JSON, or unknown fields)", body = ErrorBody),
        (status = 200, description = "The recorded decision (reviewer = the key's principal)", body = dossier_core::review::Decision),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no admin scope", body = ErrorBody),
        (status = 404, description = "No such candidate in the key's tenant", body = ErrorBody)))]
pub async fn reject(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    b: Result<Json<DecisionBody>, JsonRejection>,
) -> Result<Json<Decision>, ApiError> {
    decide(state, caller, id, b, Verdict::Rejected).await
}
