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
use dossier_engine::dossier_store::principals::PrincipalWriter;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{OpenApi, ToSchema};

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, Failure};
use crate::jobs::JobInfo;
use crate::routes::{blocking, body};
use crate::AppState;

#[derive(OpenApi)]
#[openapi(
    paths(
        list_principals,
        put_principal,
        list_jobs,
        get_job,
        start_reindex_job,
        list_generations,
        rollback_generation
    ),
    components(schemas(PrincipalBody, PrincipalOut, JobInfo, GenerationOut))
)]
pub struct AdminApi;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/principals", get(list_principals))
        .route("/v1/principals/{id}", axum::routing::put(put_principal))
        .route("/v1/jobs", get(list_jobs))
        .route("/v1/jobs/reindex", post(start_reindex_job))
        .route("/v1/index/generations", get(list_generations))
        .route("/v1/index/rollback", post(rollback_generation))
        .route("/v1/jobs/{id}", get(get_job))
}

/// A principal of the key's tenant.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PrincipalOut {
    pub id: String,
    pub tenant: String,
    pub groups: Vec<String>,
    /// The knowledge bases it reads documents from; absent: all of the tenant's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kbs: Option<Vec<String>>,
}

impl From<Principal> for PrincipalOut {
    fn from(p: Principal) -> PrincipalOut {
        PrincipalOut {
            id: p.id,
            tenant: p.tenant,
            groups: p.groups,
            kbs: p.kbs,
        }
    }
}

/// `PUT /v1/principals/{id}`: the principal's groups (its tenant is the key's).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PrincipalBody {
    #[serde(default)]
    pub groups: Vec<String>,
    /// The knowledge bases its documents are read from; absent: all of the tenant's.
    #[serde(default)]
    pub kbs: Option<Vec<String>>,
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
    match &b.kbs {
        Some(kbs) if kbs.is_empty() => {
            return Err(ApiError::new(
                &rid,
                Failure::Invalid(
                    "`kbs` names no knowledge base; leave it out to read all of them".into(),
                ),
            ))
        }
        Some(kbs) if kbs.len() > crate::routes::MAX_KBS || !kbs.iter().all(|k| valid(k)) => {
            return Err(ApiError::new(
                &rid,
                Failure::Invalid(format!(
                    "`kbs` takes at most {} ids of 1–128 characters without spaces",
                    crate::routes::MAX_KBS
                )),
            ))
        }
        _ => {}
    }
    // What an admin may do to principals is the one rule every path that writes them
    // goes through (`dossier_store::principals`): the tenant's *other* principals, not
    // its own, not an id another tenant holds or a key names.
    let engine = state.engine.clone();
    let keys = state.keys.clone();
    let (tenant, me, operator) = (
        caller.tenant.clone(),
        caller.principal.clone(),
        caller.operator,
    );
    let out = blocking(&rid, move || {
        let key_names = |id: &str| keys.names_principal(id);
        let writer = PrincipalWriter::TenantAdmin {
            tenant: &tenant,
            principal: &me,
            operator,
            key_names: &key_names,
        };
        let p = Principal {
            id,
            tenant: tenant.clone(),
            groups: b.groups,
            kbs: b.kbs,
        };
        let store = engine.store();
        let granted = store
            .grant_principals(writer, vec![p])
            .map_err(|e| Failure::from(dossier_engine::Error::from(e)))?
            .map_err(|refusal| Failure::Invalid(refusal.to_string()))?;
        let out = PrincipalOut::from(granted[0].principal().clone());
        store
            .commit(dossier_engine::dossier_store::catalog::CommitBatch {
                principals: granted,
                ..Default::default()
            })
            .map_err(|e| Failure::from(dossier_engine::Error::from(e)))?;
        Ok(out)
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

/// `POST /v1/jobs/reindex` options.
#[derive(Debug, Clone, Default, Deserialize, utoipa::IntoParams)]
pub struct ReindexQuery {
    /// Promote the draft even when its shadow run misses its thresholds, or when the
    /// server has served no queries yet to shadow it with.
    #[serde(default)]
    pub force: bool,
}

#[utoipa::path(post, path = "/v1/jobs/reindex", tag = "jobs",
    params(ReindexQuery),
    security(("api_key" = [])),
    responses(
        (status = 202, description = "A rebuild of the indexes from the catalog into a draft generation; the draft is shadowed with the queries this server served recently (each under its own principal) and promoted only if it passes (overlap@k, errors, latency), unless `force`; the previous generation is kept for rollback. The job's result is the promoted generation with its `shadow` report; a draft that fails stays a draft and the job fails with the verdict.", body = JobInfo),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no operator scope (a reindex reaches every tenant)", body = ErrorBody),
        (status = 429, description = "The tenant runs as many expensive operations as it may", body = ErrorBody),
        (status = 503, description = "The server is shutting down", body = ErrorBody)))]
pub async fn start_reindex_job(
    State(state): State<AppState>,
    caller: Caller,
    q: Result<axum::extract::Query<ReindexQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<(StatusCode, Json<JobInfo>), ApiError> {
    let rid = caller.request_id.clone();
    // A reindex rebuilds every tenant's indexes: the operator's, not a tenant admin's.
    caller.require_operator()?;
    let force = crate::routes::query(&rid, q)?.force;
    let permit = state.begin_expensive_write(&caller)?;
    let job = state.jobs.start(&caller.tenant, "reindex", &rid.0);
    state.record_jobs(&rid).await?;
    let info = state
        .jobs
        .get(None, &caller.tenant, job.id())
        .ok_or_else(|| ApiError::new(&rid, Failure::Internal("job vanished".into())))?;
    let engine = state.engine.clone();
    let cache = state.cache.clone();
    let recent = state.recent_queries.snapshot();
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let store = engine.store();
        let outcome = (|| -> Result<Value, String> {
            let total = store.catalog().chunk_count().map_err(|e| e.to_string())?;
            job.stage("indexing", total);
            let draft = store
                .build_draft(|n| job.advance(n))
                .map_err(|e| e.to_string())?;
            job.stage("shadowing", recent.len() as u64);
            let shadow = if recent.is_empty() {
                None
            } else {
                Some(
                    engine
                        .shadow(
                            Some(&draft.name),
                            &recent,
                            10,
                            dossier_engine::shadow::Thresholds::default(),
                        )
                        .map_err(|e| e.to_string())?,
                )
            };
            match &shadow {
                Some(r) if !r.passed && !force => {
                    return Err(format!(
                        "draft {} kept, not promoted: its shadow run failed ({}); inspect it, or reindex with ?force=true",
                        draft.name, r.verdict
                    ))
                }
                None if !force => {
                    return Err(format!(
                        "draft {} kept, not promoted: this server has served no queries to shadow it with; reindex with ?force=true",
                        draft.name
                    ))
                }
                _ => {}
            }
            job.stage("promoting", 1);
            let promoted = store
                .promote(Some(&draft.name), true)
                .map_err(|e| e.to_string())?;
            let mut out = serde_json::to_value(promoted).map_err(|e| e.to_string())?;
            out["shadow"] = serde_json::to_value(&shadow).map_err(|e| e.to_string())?;
            Ok(out)
        })();
        cache.invalidate_all();
        job.finish(outcome);
    });
    Ok((StatusCode::ACCEPTED, Json(info)))
}

/// An index generation as `GET /v1/index/generations` lists it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GenerationOut {
    pub name: String,
    /// `active`, `previous` (a rollback target), `retired` or `draft`.
    pub status: String,
    pub catalog_generation: u64,
    pub chunks: u64,
    pub vectors: usize,
    pub built_at: String,
    /// The kept verdict of the generation's shadow run, if it had one.
    #[schema(value_type = Option<Object>)]
    pub shadow: Option<Value>,
}

impl GenerationOut {
    fn of(
        store: &dossier_engine::dossier_store::Store,
        g: dossier_engine::dossier_store::GenerationInfo,
    ) -> GenerationOut {
        GenerationOut {
            shadow: store.shadow_report(&g.name).ok().flatten(),
            name: g.name,
            status: g.status,
            catalog_generation: g.catalog_generation,
            chunks: g.chunks,
            vectors: g.vectors,
            built_at: g.built_at,
        }
    }
}

#[utoipa::path(get, path = "/v1/index/generations", tag = "jobs",
    security(("api_key" = [])),
    responses(
        (status = 200, description = "This replica's index generations with their status and shadow verdicts", body = Vec<GenerationOut>),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no operator scope", body = ErrorBody)))]
pub async fn list_generations(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<GenerationOut>>, ApiError> {
    caller.require_operator()?;
    let engine = state.engine.clone();
    blocking(&caller.request_id, move || {
        let store = engine.store();
        let list = store
            .list_generations()
            .map_err(|e| Failure::from(dossier_engine::Error::from(e)))?;
        Ok(list
            .into_iter()
            .map(|g| GenerationOut::of(store, g))
            .collect())
    })
    .await
    .map(Json)
}

#[utoipa::path(post, path = "/v1/index/rollback", tag = "jobs",
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The previous generation is active again (instant: it is kept built and caught up from the change log)", body = GenerationOut),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no operator scope", body = ErrorBody),
        (status = 404, description = "No earlier generation to roll back to", body = ErrorBody)))]
pub async fn rollback_generation(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<GenerationOut>, ApiError> {
    caller.require_operator()?;
    state.begin_write(&caller)?;
    let (engine, cache) = (state.engine.clone(), state.cache.clone());
    let out = blocking(&caller.request_id, move || {
        let g = engine
            .store()
            .rollback()
            .map_err(|e| Failure::from(dossier_engine::Error::from(e)))?;
        Ok(GenerationOut::of(engine.store(), g))
    })
    .await;
    // Answers computed on the other generation are not served again.
    cache.invalidate_all();
    out.map(Json)
}
