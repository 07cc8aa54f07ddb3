//! A fresh id for every request, on the response header and in error bodies.

use std::sync::atomic::{AtomicU64, Ordering};
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

/// Middleware: assigns the id before routing and stamps it on whatever comes back.
pub async fn assign(mut req: Request, next: Next) -> Response {
    let id = RequestId::generate();
    req.extensions_mut().insert(id.clone());
    let mut resp = next.run(req).await;
    if let Ok(v) = HeaderValue::from_str(&id.0) {
        resp.headers_mut().insert(HEADER, v);
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
