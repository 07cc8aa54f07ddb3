//! `Idempotency-Key` on every write route: a write sent again with the same key by the
//! same principal gets the first one's response (with `Idempotent-Replayed: true`)
//! instead of running twice — after a timeout, a dropped connection, a restart, or on
//! another replica of a shared store (the keys live in the store, see
//! [`dossier_engine::dossier_store::idempotency`]).
//!
//! - The key is optional; without it a write runs as before. With it: 1 to 255 visible
//!   ASCII characters, else `400 invalid_request`.
//! - A key belongs to the principal of the API key; another principal's identical key is
//!   another key (nothing about one principal's writes reaches another).
//! - The same key with a different method, path, query or body: `422
//!   idempotency_key_reused`. The same write still running: `409
//!   idempotency_in_flight` with `Retry-After: 1`.
//! - Only a success (2xx) is kept and replayed. A failed write changed nothing (every
//!   write is one commit), so its key is given back and a retry runs it again.
//! - Once claimed, the write runs to its end even if the client goes away, so a retry
//!   finds its response rather than a second write.
//!
//! Keys without an admin API key are not looked at: only admins write, and the route
//! refuses the others as it always did.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_TYPE, LOCATION};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use dossier_engine::dossier_store::{IdempotencyClaim as Claim, StoredResponse};

use crate::error::{ApiError, Failure};
use crate::AppState;

/// The request header naming the key.
pub const HEADER: &str = "idempotency-key";
/// The response header marking a replayed response.
pub const REPLAYED: &str = "idempotent-replayed";
/// Longest key.
pub const MAX_KEY_LEN: usize = 255;
/// Largest response kept for replay; a larger one is sent once and its key given back
/// (write responses are small JSON; this bounds what a principal can make the store keep).
pub const MAX_STORED_RESPONSE: usize = 1 << 20;

/// Path prefixes of the write routes (their POST, PUT and DELETE are writes; the POSTs
/// of search, ask, evidence, chat and MCP are reads and take no key).
const WRITE_PREFIXES: &[&str] = &[
    "/v1/documents",
    "/v1/principals",
    "/v1/jobs",
    "/v1/index",
    "/v1/review",
];

/// Whether `method path` is a write route (also used to document the header).
pub fn is_write(method: &Method, path: &str) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::DELETE | Method::PATCH
    ) && WRITE_PREFIXES
        .iter()
        .any(|p| path == *p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/')))
}

/// Whether `key` is a key the server takes.
pub fn valid_key(key: &[u8]) -> bool {
    (1..=MAX_KEY_LEN).contains(&key.len()) && key.iter().all(|b| (0x21..=0x7e).contains(b))
}

/// The middleware (see the module documentation).
pub(crate) async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if !is_write(req.method(), req.uri().path()) || !req.headers().contains_key(HEADER) {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let rid = crate::request_id::of(&parts);
    let raw = parts
        .headers
        .get(HEADER)
        .map(HeaderValue::as_bytes)
        .unwrap_or_default();
    if !valid_key(raw) {
        return ApiError::new(
            &rid,
            Failure::Invalid(format!(
                "Idempotency-Key must be 1 to {MAX_KEY_LEN} visible ASCII characters"
            )),
        )
        .into_response();
    }
    let key = String::from_utf8_lossy(raw).into_owned();
    // Whose key: only an admin's (the route answers anyone else's request as before).
    let principal = match crate::auth::bearer_of(&parts.headers) {
        Some(api_key) => state.keys.lookup(api_key).filter(|e| e.admin),
        None => None,
    };
    let Some(principal) = principal.map(|e| e.principal) else {
        return next.run(Request::from_parts(parts, body)).await;
    };
    // The whole body, bounded by the largest any write route takes (each route's own
    // limit still applies to what is passed on).
    let bytes = match axum::body::to_bytes(body, crate::documents::MAX_UPLOAD_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            return ApiError::new(
                &rid,
                Failure::TooLarge {
                    what: "the request body",
                    limit: crate::documents::MAX_UPLOAD_BYTES,
                },
            )
            .into_response()
        }
    };
    let fingerprint = fingerprint(&parts.method, &parts.uri, &parts.headers, &bytes);
    let limits = state.config.idempotency;
    let now_us = chrono::Utc::now().timestamp_micros();
    let claimed = {
        let (engine, principal, key, fingerprint) = (
            state.engine.clone(),
            principal.clone(),
            key.clone(),
            fingerprint.clone(),
        );
        tokio::task::spawn_blocking(move || {
            engine
                .store()
                .catalog()
                .idem_claim(&principal, &key, &fingerprint, now_us, &limits)
        })
        .await
    };
    let claim = match claimed {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            return ApiError::new(&rid, Failure::Internal(format!("idempotency key: {e}")))
                .into_response()
        }
        Err(e) => return ApiError::new(&rid, Failure::Internal(e.to_string())).into_response(),
    };
    match claim {
        Claim::InFlight => {
            state.metrics.idempotency("in_flight");
            ApiError::new(&rid, Failure::IdempotencyInFlight).into_response()
        }
        Claim::Mismatch => {
            state.metrics.idempotency("reused");
            ApiError::new(&rid, Failure::IdempotencyKeyReused).into_response()
        }
        Claim::Replay(stored) => {
            state.metrics.idempotency("replayed");
            replay(stored)
        }
        Claim::Fresh => {
            state.metrics.idempotency("fresh");
            let req = Request::from_parts(parts, Body::from(bytes));
            let claim = Held {
                rid: rid.clone(),
                state: state.clone(),
                principal,
                key,
                fingerprint,
            };
            // Its own task: a client that goes away does not cancel a claimed write
            // halfway, so the retry finds the response.
            match tokio::spawn(run_and_record(claim, req, next)).await {
                Ok(resp) => resp,
                Err(e) => ApiError::new(&rid, Failure::Internal(format!("write task: {e}")))
                    .into_response(),
            }
        }
    }
}

/// A claim this request holds.
struct Held {
    rid: crate::request_id::RequestId,
    state: AppState,
    principal: String,
    key: String,
    fingerprint: String,
}

impl Held {
    /// Records `response` (`Some`) or gives the key back (`None`), off the runtime.
    async fn settle(self, response: Option<StoredResponse>) {
        let limits = self.state.config.idempotency;
        let engine = self.state.engine.clone();
        let now_us = chrono::Utc::now().timestamp_micros();
        let done = tokio::task::spawn_blocking(move || {
            let c = engine.store().catalog();
            match &response {
                Some(r) => c.idem_complete(
                    &self.principal,
                    &self.key,
                    &self.fingerprint,
                    r,
                    now_us,
                    &limits,
                ),
                None => c.idem_release(&self.principal, &self.key, &self.fingerprint),
            }
        })
        .await;
        // The write itself is done either way; a key that could not be settled
        // expires with its lease.
        match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("dossier-server: idempotency key: {e}"),
            Err(e) => eprintln!("dossier-server: idempotency key: {e}"),
        }
    }
}

async fn run_and_record(claim: Held, req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    if !resp.status().is_success() {
        claim.settle(None).await;
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let fits = axum::body::HttpBody::size_hint(&body)
        .upper()
        .is_some_and(|n| n <= MAX_STORED_RESPONSE as u64);
    if !fits {
        claim.state.metrics.idempotency("unstored");
        claim.settle(None).await;
        return Response::from_parts(parts, body);
    }
    let bytes: Bytes = match axum::body::to_bytes(body, MAX_STORED_RESPONSE).await {
        Ok(b) => b,
        Err(e) => {
            let rid = claim.rid.clone();
            claim.settle(None).await;
            return ApiError::new(&rid, Failure::Internal(format!("write response: {e}")))
                .into_response();
        }
    };
    let header = |name| {
        parts
            .headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .map(str::to_owned)
    };
    let stored = StoredResponse {
        status: parts.status.as_u16(),
        content_type: header(CONTENT_TYPE),
        location: header(LOCATION),
        body: bytes.to_vec(),
    };
    claim.settle(Some(stored)).await;
    Response::from_parts(parts, Body::from(bytes))
}

/// The response a replay sends: the first one's status, type, location and body.
fn replay(stored: StoredResponse) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    let mut resp = (status, stored.body).into_response();
    let headers = resp.headers_mut();
    for (name, value) in [
        (CONTENT_TYPE, stored.content_type),
        (LOCATION, stored.location),
    ] {
        if let Some(v) = value.and_then(|v: String| HeaderValue::from_str(&v).ok()) {
            headers.insert(name, v);
        }
    }
    headers.insert(REPLAYED, HeaderValue::from_static("true"));
    resp
}

/// What makes two writes the same write: method, path, query, content type and body.
fn fingerprint(
    method: &Method,
    uri: &axum::http::Uri,
    headers: &axum::http::HeaderMap,
    body: &[u8],
) -> String {
    let mut h = blake3::Hasher::new();
    for part in [
        method.as_str().as_bytes(),
        uri.path().as_bytes(),
        uri.query().unwrap_or("").as_bytes(),
        headers
            .get(CONTENT_TYPE)
            .map(HeaderValue::as_bytes)
            .unwrap_or_default(),
    ] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part);
    }
    h.update(body);
    h.finalize().to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_routes_are_told_from_reads() {
        for (m, p) in [
            (Method::POST, "/v1/documents"),
            (Method::DELETE, "/v1/documents/a/versions/1"),
            (Method::PUT, "/v1/principals/u1"),
            (Method::POST, "/v1/jobs/ingest"),
            (Method::POST, "/v1/index/rollback"),
            (Method::POST, "/v1/review/3/approve"),
        ] {
            assert!(is_write(&m, p), "{m} {p}");
        }
        for (m, p) in [
            (Method::GET, "/v1/documents"),
            (Method::POST, "/v1/search"),
            (Method::POST, "/v1/ask"),
            (Method::POST, "/v1/graph/evidence"),
            (Method::POST, "/v1/chat/completions"),
            (Method::POST, "/mcp"),
            (Method::POST, "/v1/documentsx"),
        ] {
            assert!(!is_write(&m, p), "{m} {p}");
        }
    }

    #[test]
    fn keys_are_visible_ascii_of_bounded_length() {
        assert!(valid_key(b"a"));
        assert!(valid_key(b"0b7c-9e1f_!~"));
        assert!(valid_key(&[b'x'; MAX_KEY_LEN]));
        for bad in [
            &b""[..],
            b"a b",
            b"\t",
            "é".as_bytes(),
            &[b'x'; MAX_KEY_LEN + 1],
        ] {
            assert!(!valid_key(bad), "{bad:?}");
        }
    }

    #[test]
    fn fingerprints_tell_routes_queries_types_and_bodies_apart() {
        let h = |ct: &str| {
            let mut m = axum::http::HeaderMap::new();
            m.insert(CONTENT_TYPE, HeaderValue::from_str(ct).unwrap());
            m
        };
        let json = h("application/json");
        let u = |s: &str| s.parse::<axum::http::Uri>().unwrap();
        let base = fingerprint(&Method::POST, &u("/v1/documents"), &json, b"{}");
        assert_eq!(
            base,
            fingerprint(&Method::POST, &u("/v1/documents"), &json, b"{}")
        );
        for other in [
            fingerprint(&Method::PUT, &u("/v1/documents"), &json, b"{}"),
            fingerprint(&Method::POST, &u("/v1/documents?x=1"), &json, b"{}"),
            fingerprint(&Method::POST, &u("/v1/documents"), &h("text/plain"), b"{}"),
            fingerprint(&Method::POST, &u("/v1/documents"), &json, b"{ }"),
            // Parts are length-prefixed: moving a byte between them changes the digest.
            fingerprint(&Method::POST, &u("/v1/document"), &json, b"s{}"),
        ] {
            assert_ne!(base, other);
        }
    }
}
