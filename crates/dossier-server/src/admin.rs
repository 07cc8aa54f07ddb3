//! Administration within the key's tenant: principals, jobs (progress of long work),
//! and index rebuilds.
//!
//! **Invariants:** every route here needs an admin key and acts only on the key's
//! tenant; another tenant's principals and jobs read like ones that do not exist.
//! A principal id is global, so an id another tenant holds cannot be taken over.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use dossier_core::Principal;
use serde::{Deserialize, Serialize};
use utoipa::{OpenApi, ToSchema};

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, Failure};
use crate::jobs::JobInfo;
use crate::routes::{blocking, body};
use crate::AppState;

#[derive(OpenApi)]
#[openapi(
    paths(list_principals, put_principal, list_jobs, get_job, start_reindex_job),
    components(schemas(PrincipalBody, PrincipalOut, JobInfo))
)]
pub struct AdminApi;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/principals", get(list_principals))
        .route("/v1/principals/{id}", axum::routing::put(put_principal))
        .route("/v1/jobs", get(list_jobs))
        .route("/v1/jobs/reindex", post(start_reindex_job))
        .route("/v1/jobs/{id}", get(get_job))
}

/// A principal of the key's tenant.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PrincipalOut {
    pub id: String,
    pub tenant: String,
    pub groups: Vec<String>,
}

impl From<Principal> for PrincipalOut {
    fn from(p: Principal) -> PrincipalOut {
        PrincipalOut {
            id: p.id,
            tenant: p.tenant,
            groups: p.groups,
        }
    }
}

/// `PUT /v1/principals/{id}`: the principal's groups (its tenant is the key's).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PrincipalBody {
    #[serde(default)]
    pub groups: Vec<String>,
}

#[utoipa::path(get, path = "/v1/principals", tag = "admin",
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The principals of the key's tenant", body = Vec<PrincipalOut>),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no admin scope", body = ErrorBody)))]
pub async fn list_principals(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<PrincipalOut>>, ApiError> {
    caller.require_admin()?;
    let engine = state.engine.clone();
    let tenant = caller.tenant.clone();
    let out = blocking(&caller.request_id, move || {
        let all = engine
            .store()
            .catalog()
            .principals()
            .map_err(|e| Failure::from(dossier_engine::Error::from(e)))?;
        Ok(all
            .into_iter()
            .filter(|p| p.tenant == tenant)
            .map(PrincipalOut::from)
            .collect())
    })
    .await?;
    Ok(Json(out))
}

#[utoipa::path(put, path = "/v1/principals/{id}", tag = "admin",
    params(("id" = String, Path, description = "Principal id")),
    request_body = PrincipalBody,
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The principal as stored (created or its groups replaced)", body = PrincipalOut),
        (status = 400, description = "Bad id or body, or an id that cannot be used", body = ErrorBody),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no admin scope", body = ErrorBody)))]
pub async fn put_principal(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    b: Result<Json<PrincipalBody>, JsonRejection>,
) -> Result<Json<PrincipalOut>, ApiError> {
    let rid = caller.request_id.clone();
    let b = body(&rid, b)?;
    state.begin_write(&caller)?;
    // The ids every reader checks (no control or invisible characters, the catalog's
    // separators included), and no spaces at all for principals and groups.
    let valid = |s: &str| {
        dossier_core::ids::check_id("principal", s).is_ok()
            && !s.trim().is_empty()
            && s.len() <= 128
            && !s.chars().any(|c| c.is_control() || c.is_whitespace())
    };
    if !valid(&id) || !b.groups.iter().all(|g| valid(g)) {
        return Err(ApiError::new(
            &rid,
            Failure::Invalid("ids and groups are 1–128 characters without spaces".into()),
        ));
    }
    // What an admin may do to principals: manage the tenant's *other* principals (any
    // groups). It cannot change its own — an admin key never widens its own reach — and
    // since keys are the operator's (the keys file), it cannot act as the principals it
    // manages. An operator may change any.
    if id == caller.principal && !caller.operator {
        return Err(ApiError::new(
            &rid,
            Failure::Invalid("an admin cannot change their own principal".into()),
        ));
    }
    let engine = state.engine.clone();
    let keys = state.keys.clone();
    let tenant = caller.tenant.clone();
    let out = blocking(&rid, move || {
        let unusable = || Failure::Invalid("this principal id cannot be used".into());
        match engine.principal(&id) {
            // Principal ids are global; the message does not say whose it is.
            Ok(p) if p.tenant != tenant => return Err(unusable()),
            Ok(_) => {}
            // A new principal whose id a key already names would hand that key the
            // groups chosen here: creating it is refused the same way.
            Err(dossier_engine::Error::NotFound(_)) if keys.names_principal(&id) => {
                return Err(unusable())
            }
            Err(dossier_engine::Error::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
        let mut groups = b.groups;
        groups.sort();
        groups.dedup();
        let p = Principal { id, tenant, groups };
        engine
            .store()
            .commit(dossier_engine::dossier_store::catalog::CommitBatch {
                principals: vec![p.clone()],
                ..Default::default()
            })
            .map_err(|e| Failure::from(dossier_engine::Error::from(e)))?;
        Ok(PrincipalOut::from(p))
    })
    .await;
    state.cache.invalidate_tenant(&caller.tenant);
    Ok(Json(out?))
}

#[utoipa::path(get, path = "/v1/jobs", tag = "jobs",
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The tenant's jobs, newest first", body = Vec<JobInfo>),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no admin scope", body = ErrorBody)))]
pub async fn list_jobs(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<JobInfo>>, ApiError> {
    caller.require_admin()?;
    let (jobs, engine, tenant) = (
        state.jobs.clone(),
        state.engine.clone(),
        caller.tenant.clone(),
    );
    let list = blocking(&caller.request_id, move || {
        Ok(jobs.list(engine.store().shared(), &tenant))
    })
    .await?;
    Ok(Json(list))
}

#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The job with its stage and progress", body = JobInfo),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no admin scope", body = ErrorBody),
        (status = 404, description = "No such job in the key's tenant", body = ErrorBody)))]
pub async fn get_job(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<JobInfo>, ApiError> {
    caller.require_admin()?;
    let (jobs, engine, tenant) = (
        state.jobs.clone(),
        state.engine.clone(),
        caller.tenant.clone(),
    );
    blocking(&caller.request_id, move || {
        jobs.get(engine.store().shared(), &tenant, &id)
            .ok_or(Failure::NotFound)
    })
    .await
    .map(Json)
}

#[utoipa::path(post, path = "/v1/jobs/reindex", tag = "jobs",
    security(("api_key" = [])),
    responses(
        (status = 202, description = "A rebuild of the indexes from the catalog into a draft generation, promoted when complete (the previous one is kept for rollback)", body = JobInfo),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no operator scope (a reindex reaches every tenant)", body = ErrorBody),
        (status = 429, description = "The tenant runs as many expensive operations as it may", body = ErrorBody),
        (status = 503, description = "The server is shutting down", body = ErrorBody)))]
pub async fn start_reindex_job(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<(StatusCode, Json<JobInfo>), ApiError> {
    let rid = caller.request_id.clone();
    // A reindex rebuilds every tenant's indexes: the operator's, not a tenant admin's.
    caller.require_operator()?;
    let permit = state.begin_expensive_write(&caller)?;
    let job = state.jobs.start(&caller.tenant, "reindex", &rid.0);
    let info = state
        .jobs
        .get(None, &caller.tenant, job.id())
        .ok_or_else(|| ApiError::new(&rid, Failure::Internal("job vanished".into())))?;
    let engine = state.engine.clone();
    let cache = state.cache.clone();
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let store = engine.store();
        let outcome = (|| {
            let total = store.catalog().chunk_count()?;
            job.stage("indexing", total);
            let draft = store.build_draft(|n| job.advance(n))?;
            job.stage("promoting", 1);
            let promoted = store.promote(Some(&draft.name))?;
            Ok::<_, dossier_engine::dossier_store::Error>(promoted)
        })();
        cache.invalidate_all();
        job.finish(match outcome {
            Ok(g) => serde_json::to_value(g).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        });
    });
    Ok((StatusCode::ACCEPTED, Json(info)))
}
