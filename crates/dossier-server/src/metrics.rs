//! `GET /metrics` in the Prometheus text format. (Stub: counts nothing yet; filled in by
//! the protection work.)

use axum::routing::get;
use axum::Router;
use dossier_agent::AskResponse;

use crate::AppState;

pub struct Metrics {}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {}
    }

    /// One finished request: its route template (`/v1/search`), method and status.
    pub fn observe_request(&self, _route: &str, _method: &str, _status: u16, _secs: f64) {}

    /// What an ask did: tool calls by tool and status, degradation, dropped citations.
    pub fn observe_ask(&self, _resp: &AskResponse) {}

    /// A request answered in a degraded way (e.g. search past its deadline).
    pub fn degraded(&self, _route: &str) {}

    pub fn cache_hit(&self, _route: &str) {}

    pub fn cache_miss(&self, _route: &str) {}

    /// The exposition text.
    pub fn render(&self) -> String {
        String::new()
    }
}

pub fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics(axum::extract::State(state): axum::extract::State<AppState>) -> String {
    state.metrics.render()
}

/// Middleware: times every request and counts it under its route template.
pub async fn track(
    axum::extract::State(_state): axum::extract::State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    next.run(req).await
}
