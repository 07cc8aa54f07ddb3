//! A fresh id for every request, on the response header, in error bodies and in the
//! access log line every request writes (stderr; the path only, never the query string
//! or the body, which may hold a user's question).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

pub const HEADER: &str = "x-request-id";

/// The id of one request: a per-process prefix and a counter. Never taken from the
/// client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(pub String);

impl RequestId {
    pub fn generate() -> RequestId {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        static PREFIX: OnceLock<String> = OnceLock::new();
        let prefix = PREFIX.get_or_init(|| {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            format!(
                "{:012x}",
                (nanos ^ (u64::from(std::process::id()) << 40)) & 0xffff_ffff_ffff
            )
        });
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        RequestId(format!("{prefix}-{n:08x}"))
    }
}

static ACCESS_LOG: AtomicBool = AtomicBool::new(false);

/// Turns the per-request access log line on or off (process-wide).
pub fn set_access_log(on: bool) {
    ACCESS_LOG.store(on, Ordering::Relaxed);
}

/// Middleware: assigns the id before routing, stamps it on whatever comes back, and
/// writes the access log line.
pub async fn assign(mut req: Request, next: Next) -> Response {
    let id = RequestId::generate();
    req.extensions_mut().insert(id.clone());
    let started = std::time::Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    // The request's span: every stage below nests in it. The path only, as in the
    // access log: never the query string or the body.
    let span = tracing::info_span!(
        "request",
        http.request.method = %method,
        url.path = tracing::field::Empty,
        request_id = %id.0,
        http.response.status_code = tracing::field::Empty,
    );
    let mut resp = tracing::Instrument::instrument(next.run(req), span.clone()).await;
    // A path can carry a value the caller's masker hides (an entity name, a record key):
    // logged as the caller would be shown it.
    let path = match resp.extensions().get::<crate::masking::MaskedFor>() {
        Some(m) => m.path(&path),
        None => path,
    };
    span.record("url.path", path.as_str());
    if let Ok(v) = HeaderValue::from_str(&id.0) {
        resp.headers_mut().insert(HEADER, v);
    }
    let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    span.record("http.response.status_code", resp.status().as_u16());
    // The access log line, as an event of the request's span.
    tracing::info!(parent: &span, status = resp.status().as_u16(), elapsed_ms, "access");
    if ACCESS_LOG.load(Ordering::Relaxed) {
        eprintln!(
            "{} request_id={} {method} {path} {} {:.1}ms",
            chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ"),
            id.0,
            resp.status().as_u16(),
            elapsed_ms
        );
    }
    resp
}

impl<S: Send + Sync> FromRequestParts<S> for RequestId {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(of(parts))
    }
}

/// The id the middleware assigned (a fresh one if the router was built without it).
pub fn of(parts: &Parts) -> RequestId {
    parts
        .extensions
        .get::<RequestId>()
        .cloned()
        .unwrap_or_else(RequestId::generate)
}
