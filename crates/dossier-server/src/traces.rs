//! `GET /v1/traces/{request_id}`: the agent's trajectory of an earlier ask (or chat
//! completion). Every trace is kept in the store's audit log (under the request id and
//! the principal that made the request, so it outlives a restart and is readable from
//! every replica of a shared store, until the audit retention deletes it); the most
//! recent are kept in memory too, in front of it.
//!
//! **Invariant:** a trace is returned only to the principal whose request made it; to
//! anyone else it reads exactly like a request id that never existed — in memory (the
//! entry is filtered by principal) and in the store (the lookup is by request id *and*
//! the caller's principal, so another's trace and none are the same miss).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, Failure};
use crate::routes::blocking;
use crate::AppState;

/// A stored trajectory.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TraceRecord {
    pub request_id: String,
    /// The route that ran the agent: `/v1/ask` or `/v1/chat/completions`.
    pub route: String,
    pub question: String,
    /// The answer's status (`answered`, `partial`, `insufficient_evidence`, …).
    pub status: String,
    /// When the request finished (RFC 3339).
    pub finished_at: String,
    /// The agent's trace, exactly as in the ask response.
    #[schema(value_type = dossier_agent::Trace)]
    pub trace: Value,
    #[serde(skip)]
    #[schema(ignore)]
    pub principal: String,
}

/// Traces by request id, and the ids in the order they came.
type Kept = (HashMap<String, Arc<TraceRecord>>, VecDeque<String>);

/// The most recent traces, oldest dropped first.
pub struct TraceLog {
    capacity: usize,
    inner: Mutex<Kept>,
}

impl TraceLog {
    pub fn new(capacity: usize) -> TraceLog {
        TraceLog {
            capacity,
            inner: Mutex::new((HashMap::new(), VecDeque::new())),
        }
    }

    pub fn record(&self, rec: impl Into<Arc<TraceRecord>>) {
        if self.capacity == 0 {
            return;
        }
        let rec = rec.into();
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *g;
        let id = rec.request_id.clone();
        if map.insert(id.clone(), rec).is_none() {
            order.push_back(id);
        }
        while order.len() > self.capacity {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
            }
        }
    }

    /// The trace of `request_id` if `principal` made it.
    pub fn get(&self, request_id: &str, principal: &str) -> Option<Arc<TraceRecord>> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.0.get(request_id)
            .filter(|r| r.principal == principal)
            .cloned()
    }
}

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/traces/{request_id}", get(trace))
}

#[utoipa::path(get, path = "/v1/traces/{request_id}", tag = "ask",
    params(("request_id" = String, Path, description = "The x-request-id of an earlier ask or chat completion")),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The agent's trajectory of that request", body = TraceRecord),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 404, description = "No such trace for this caller (another principal's reads the same)", body = ErrorBody)))]
pub async fn trace(
    State(state): State<AppState>,
    caller: Caller,
    Path(request_id): Path<String>,
) -> Result<Json<TraceRecord>, ApiError> {
    if let Some(r) = state.traces.get(&request_id, &caller.principal) {
        return Ok(Json((*r).clone()));
    }
    let engine = state.engine.clone();
    let principal = caller.principal.clone();
    let stored = blocking(&caller.request_id, move || {
        let bytes = engine
            .store()
            .catalog()
            .audit_trace(&request_id, &principal)
            .map_err(|e| Failure::from(dossier_engine::Error::from(e)))?
            .ok_or(Failure::NotFound)?;
        let mut r: TraceRecord = serde_json::from_slice(&bytes)
            .map_err(|e| Failure::Internal(format!("stored trace: {e}")))?;
        r.principal = principal;
        Ok(r)
    })
    .await?;
    Ok(Json(stored))
}
