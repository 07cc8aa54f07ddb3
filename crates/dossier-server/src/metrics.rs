//! `GET /metrics` in the Prometheus text format (version 0.0.4), written by hand.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `dossier_http_requests_total` | counter | `route`, `method`, `status` |
//! | `dossier_http_request_duration_seconds` | histogram | `route` |
//! | `dossier_http_degraded_total` | counter | `route` |
//! | `dossier_cache_hits_total`, `dossier_cache_misses_total` | counter | `route` |
//! | `dossier_cache_entries` | gauge | |
//! | `dossier_agent_asks_total` | counter | `status` |
//! | `dossier_agent_tool_calls_total` | counter | `tool`, `status` |
//! | `dossier_agent_degraded_total` | counter | |
//! | `dossier_agent_citations_dropped_total` | counter | |
//! | `dossier_agent_model_claims_dropped_total` | counter | |
//! | `dossier_rate_limited_total` | counter | `reason` (`rate`, `concurrency`) |
//! | `dossier_expensive_running` | gauge | |
//! | `dossier_jobs_running` | gauge | |
//! | `dossier_query_vector_hits_total`, `dossier_query_vector_misses_total` | counter | |
//! | `dossier_query_vector_entries` | gauge | |
//! | `dossier_audit_entries_total` | counter | `outcome` (`written`, `failed`, `dropped`) |
//! | `dossier_audit_pruned_total` | counter | |
//! | `dossier_idempotency_keys_total` | counter | `outcome` (`fresh`, `replayed`, `in_flight`, `reused`, `unstored`) |
//!
//! `route` is the route template the request matched (`/v1/search`,
//! `/v1/documents/{id}`), `unmatched` when none did; `method` is one of the standard
//! methods or `other`. A request is timed from routing until its response head is
//! ready (a streamed body is not included).
//!
//! **`/metrics` takes no API key**, as Prometheus scrapers usually run inside the
//! network without credentials. It exposes no document text, question, principal id
//! or tenant name: the only labels are route templates, methods, statuses, tool names
//! and fixed reasons, so every label set is bounded. Deployments that expose the port
//! beyond their network should block `/metrics` at the proxy.
//!
//! Asks answered from the cache are counted once, when they were computed: the tool
//! calls and drops of a cached answer did not happen again.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use dossier_agent::AskResponse;

use crate::AppState;

/// Upper bounds of the request-duration buckets, in seconds.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Distinct tool labels kept; more (which the validated tool set never produces) are
/// counted as `other`, so a label set cannot grow without bound.
const MAX_TOOL_LABELS: usize = 64;

#[derive(Debug, Clone, Default)]
struct Histogram {
    /// Observations at or under each bound of [`DURATION_BUCKETS`] (not cumulative).
    buckets: [u64; DURATION_BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, v: f64) {
        if let Some(i) = DURATION_BUCKETS.iter().position(|b| v <= *b) {
            self.buckets[i] += 1;
        }
        self.sum += v;
        self.count += 1;
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// (route, method, status) → requests.
    requests: BTreeMap<(String, &'static str, u16), u64>,
    durations: BTreeMap<String, Histogram>,
    degraded: BTreeMap<String, u64>,
    cache_hits: BTreeMap<String, u64>,
    cache_misses: BTreeMap<String, u64>,
    /// Answer status → asks.
    asks: BTreeMap<String, u64>,
    /// Router class → asks.
    routes: BTreeMap<String, u64>,
    /// Answer claims the verifier dropped, by writer (`extractive`, `model`).
    claims_dropped: BTreeMap<String, u64>,
    /// (tool, status) → calls.
    tool_calls: BTreeMap<(String, String), u64>,
    /// Tool labels in use (at most [`MAX_TOOL_LABELS`]).
    tools: BTreeSet<String>,
    agent_degraded: u64,
    citations_dropped: u64,
    model_claims_dropped: u64,
    /// Audit entries by outcome (`written`, `failed`, `dropped`).
    audit: BTreeMap<String, u64>,
    audit_pruned: u64,
    /// Writes sent with an idempotency key, by what the key did.
    idempotency: BTreeMap<String, u64>,
}

/// The server's counters since start.
pub struct Metrics {
    inner: Mutex<Inner>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

fn bump<K: Ord>(map: &mut BTreeMap<K, u64>, key: K) {
    *map.entry(key).or_insert(0) += 1;
}

/// The label of a method: the standard ones by name, anything else `other`.
fn method_label(m: &str) -> &'static str {
    match m {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "PATCH" => "PATCH",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    }
}

/// A label value as the text format wants it: `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// `{a="x",b="y"}`, or nothing without labels.
fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// Writes the `# HELP` and `# TYPE` lines of one metric family.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, pairs: &[(&str, &str)], value: impl std::fmt::Display) {
    let _ = writeln!(out, "{name}{} {value}", labels(pairs));
}

/// A counter family with one label.
fn by_one(out: &mut String, name: &str, help: &str, label: &str, map: &BTreeMap<String, u64>) {
    family(out, name, "counter", help);
    for (v, n) in map {
        sample(out, name, &[(label, v)], n);
    }
}

/// Whether a verifier note records a dropped citation (see
/// `dossier_agent::answer::verify_citations`).
fn is_dropped_citation(note: &str) -> bool {
    note.starts_with("citation [") && note.contains("] dropped")
}

/// Whether a verifier note records a dropped model claim (see
/// `dossier_agent::verify::check_claims`).
fn is_dropped_model_claim(note: &str) -> bool {
    note.starts_with("model claim") && note.contains("dropped")
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Counters only: a panic elsewhere leaves nothing inconsistent worth refusing.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One finished request: its route template (`/v1/search`), method and status.
    pub fn observe_request(&self, route: &str, method: &str, status: u16, secs: f64) {
        let method = method_label(method);
        let mut inner = self.lock();
        bump(&mut inner.requests, (route.to_string(), method, status));
        match inner.durations.get_mut(route) {
            Some(h) => h.observe(secs),
            None => {
                let mut h = Histogram::default();
                h.observe(secs);
                inner.durations.insert(route.to_string(), h);
            }
        }
    }

    /// What an ask did: tool calls by tool and status, degradation, dropped citations.
    pub fn observe_ask(&self, resp: &AskResponse) {
        let status = serde_json::to_value(resp.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "unknown".into());
        let mut inner = self.lock();
        bump(&mut inner.asks, status);
        bump(
            &mut inner.routes,
            resp.trace.route.class.as_str().to_string(),
        );
        for c in resp.trace.claims.iter().filter(|c| !c.kept) {
            // A bounded label set: the writers' names.
            let by = if c.by == "model" {
                "model"
            } else {
                "extractive"
            };
            bump(&mut inner.claims_dropped, by.to_string());
        }
        for step in &resp.trace.steps {
            let tool_status = serde_json::to_value(step.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| "unknown".into());
            let tool = if inner.tools.contains(&step.action) {
                step.action.clone()
            } else if inner.tools.len() < MAX_TOOL_LABELS {
                inner.tools.insert(step.action.clone());
                step.action.clone()
            } else {
                "other".to_string()
            };
            bump(&mut inner.tool_calls, (tool, tool_status));
        }
        if !resp.trace.degraded.is_empty() {
            inner.agent_degraded += 1;
        }
        for note in &resp.trace.verifier {
            if is_dropped_citation(note) {
                inner.citations_dropped += 1;
            } else if is_dropped_model_claim(note) {
                inner.model_claims_dropped += 1;
            }
        }
    }

    /// A request answered in a degraded way (e.g. search past its deadline).
    pub fn degraded(&self, route: &str) {
        bump(&mut self.lock().degraded, route.to_string());
    }

    pub fn cache_hit(&self, route: &str) {
        bump(&mut self.lock().cache_hits, route.to_string());
    }

    pub fn cache_miss(&self, route: &str) {
        bump(&mut self.lock().cache_misses, route.to_string());
    }

    /// `n` audit entries written to the store, failed to be, or dropped unwritten.
    pub fn audit_entries(&self, outcome: &'static str, n: u64) {
        *self.lock().audit.entry(outcome.to_string()).or_insert(0) += n;
    }

    /// A write sent with an idempotency key: `fresh` (it ran), `replayed`, `in_flight`,
    /// `reused` (refused: another write's key) or `unstored` (it ran, and its response
    /// was too large to keep).
    pub fn idempotency(&self, outcome: &'static str) {
        bump(&mut self.lock().idempotency, outcome.to_string());
    }

    /// `n` audit entries deleted past their retention.
    pub fn audit_pruned(&self, n: u64) {
        self.lock().audit_pruned += n;
    }

    /// The exposition text of the counters kept here (what [`render_state`] adds to
    /// it are the gauges and counters other parts of the server keep).
    pub fn render(&self) -> String {
        let inner = self.lock();
        let mut out = String::new();

        let name = "dossier_http_requests_total";
        family(
            &mut out,
            name,
            "counter",
            "HTTP requests by route template, method and status.",
        );
        for ((route, method, status), n) in &inner.requests {
            let status = status.to_string();
            sample(
                &mut out,
                name,
                &[("route", route), ("method", method), ("status", &status)],
                n,
            );
        }

        let name = "dossier_http_request_duration_seconds";
        family(
            &mut out,
            name,
            "histogram",
            "Time from routing to the response head, by route template.",
        );
        for (route, h) in &inner.durations {
            let mut cumulative = 0;
            for (bound, n) in DURATION_BUCKETS.iter().zip(h.buckets) {
                cumulative += n;
                let le = bound.to_string();
                sample(
                    &mut out,
                    &format!("{name}_bucket"),
                    &[("route", route), ("le", &le)],
                    cumulative,
                );
            }
            sample(
                &mut out,
                &format!("{name}_bucket"),
                &[("route", route), ("le", "+Inf")],
                h.count,
            );
            sample(&mut out, &format!("{name}_sum"), &[("route", route)], h.sum);
            sample(
                &mut out,
                &format!("{name}_count"),
                &[("route", route)],
                h.count,
            );
        }

        by_one(
            &mut out,
            "dossier_http_degraded_total",
            "Requests answered in a degraded way (e.g. a search past its deadline answered by BM25).",
            "route",
            &inner.degraded,
        );
        by_one(
            &mut out,
            "dossier_cache_hits_total",
            "Answers served from the cache.",
            "route",
            &inner.cache_hits,
        );
        by_one(
            &mut out,
            "dossier_cache_misses_total",
            "Answers the cache did not hold.",
            "route",
            &inner.cache_misses,
        );
        by_one(
            &mut out,
            "dossier_agent_asks_total",
            "Asks the agent ran (cache hits excluded), by answer status.",
            "status",
            &inner.asks,
        );
        by_one(
            &mut out,
            "dossier_agent_route_total",
            "Asks the agent ran (cache hits excluded), by router class.",
            "class",
            &inner.routes,
        );
        by_one(
            &mut out,
            "dossier_agent_claims_dropped_total",
            "Answer claims the verifier dropped as unsupported, by writer.",
            "writer",
            &inner.claims_dropped,
        );

        by_one(
            &mut out,
            "dossier_audit_entries_total",
            "Audit entries by outcome: written to the store, failed (the store refused the batch) or dropped (the queue was full); the requests were answered either way.",
            "outcome",
            &inner.audit,
        );
        by_one(
            &mut out,
            "dossier_idempotency_keys_total",
            "Writes sent with an Idempotency-Key, by outcome: fresh (ran), replayed, in_flight (refused: the same write is running), reused (refused: the key was another write's), unstored (ran; its response was too large to keep).",
            "outcome",
            &inner.idempotency,
        );

        let name = "dossier_agent_tool_calls_total";
        family(
            &mut out,
            name,
            "counter",
            "Tool calls the agent made, by tool and status.",
        );
        for ((tool, status), n) in &inner.tool_calls {
            sample(&mut out, name, &[("tool", tool), ("status", status)], n);
        }

        for (name, help, n) in [
            (
                "dossier_agent_degraded_total",
                "Asks that took a fallback (a part failed or a budget ran out).",
                inner.agent_degraded,
            ),
            (
                "dossier_agent_citations_dropped_total",
                "Citations the verifier dropped (not evidence of the run, or quote not in it).",
                inner.citations_dropped,
            ),
            (
                "dossier_agent_model_claims_dropped_total",
                "Model-written claims the verifier dropped.",
                inner.model_claims_dropped,
            ),
            (
                "dossier_audit_pruned_total",
                "Audit entries deleted past their retention by this server.",
                inner.audit_pruned,
            ),
        ] {
            family(&mut out, name, "counter", help);
            sample(&mut out, name, &[], n);
        }
        out
    }
}

/// The whole exposition: [`Metrics::render`] plus what the limits, the cache and the
/// jobs keep.
pub fn render_state(state: &AppState) -> String {
    let mut out = state.metrics.render();
    let r = state.limits.rejections();
    let name = "dossier_rate_limited_total";
    family(
        &mut out,
        name,
        "counter",
        "Requests turned away with 429, by reason.",
    );
    sample(&mut out, name, &[("reason", "rate")], r.rate);
    sample(&mut out, name, &[("reason", "concurrency")], r.concurrency);
    let qv = state.engine.query_cache_stats();
    for (name, help, v) in [
        (
            "dossier_query_vector_hits_total",
            "Query embeddings answered from the engine's query-vector cache.",
            qv.hits,
        ),
        (
            "dossier_query_vector_misses_total",
            "Query embeddings computed (the cache had no vector for that scope and text).",
            qv.misses,
        ),
    ] {
        family(&mut out, name, "counter", help);
        sample(&mut out, name, &[], v);
    }
    for (name, help, v) in [
        (
            "dossier_query_vector_entries",
            "Query vectors the engine's cache holds now.",
            qv.entries as u64,
        ),
        (
            "dossier_expensive_running",
            "Expensive operations (ask, chat, graph-mode search, jobs) running now.",
            state.limits.running_total() as u64,
        ),
        (
            "dossier_cache_entries",
            "Answers the cache holds now.",
            state.cache.len() as u64,
        ),
        (
            "dossier_jobs_running",
            "Jobs that have not finished.",
            state.jobs.running(),
        ),
    ] {
        family(&mut out, name, "gauge", help);
        sample(&mut out, name, &[], v);
    }
    out
}

pub fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

/// `GET /metrics`: no API key (see the module documentation).
async fn metrics(State(state): State<AppState>) -> Response {
    let mut resp = render_state(&state).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    resp
}

/// Middleware: times every request and counts it under its route template.
pub async fn track(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |m| m.as_str().to_string());
    let method = method_label(req.method().as_str());
    let started = Instant::now();
    let resp = next.run(req).await;
    state.metrics.observe_request(
        &route,
        method,
        resp.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks the text format line by line: every sample is `name{labels} value` of a
    /// family declared by `# TYPE` before it. Returns (name with labels → value).
    pub(crate) fn parse(text: &str) -> BTreeMap<String, f64> {
        let mut typed = BTreeMap::new();
        let mut samples = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
                assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
                assert!(
                    typed.insert(name.to_string(), kind.to_string()).is_none(),
                    "twice: {line}"
                );
                continue;
            }
            if line.starts_with("# HELP ") {
                continue;
            }
            assert!(
                !line.starts_with('#') && !line.is_empty(),
                "stray line: {line:?}"
            );
            let (series, value) = line.rsplit_once(' ').expect("sample has a value");
            let value: f64 = value
                .parse()
                .unwrap_or_else(|_| panic!("bad value: {line}"));
            let name = series.split('{').next().unwrap();
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "bad name: {line}"
            );
            if let Some(l) = series.strip_prefix(name) {
                if !l.is_empty() {
                    assert!(l.starts_with('{') && l.ends_with('}'), "bad labels: {line}");
                }
            }
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    name.strip_suffix(s)
                        .filter(|f| typed.get(*f).map(String::as_str) == Some("histogram"))
                })
                .unwrap_or(name);
            assert!(typed.contains_key(family), "no # TYPE before: {line}");
            assert!(
                samples.insert(series.to_string(), value).is_none(),
                "twice: {line}"
            );
        }
        samples
    }

    #[test]
    fn requests_are_counted_and_timed_by_route() {
        let m = Metrics::new();
        m.observe_request("/v1/search", "POST", 200, 0.003);
        m.observe_request("/v1/search", "POST", 200, 0.2);
        m.observe_request("/v1/search", "POST", 429, 0.0001);
        m.observe_request("unmatched", "BREW", 404, 50.0);
        m.cache_hit("/v1/search");
        m.cache_miss("/v1/ask");
        m.degraded("/v1/search");
        let s = parse(&m.render());
        let k = |s: &str| s.to_string();
        assert_eq!(
            s[&k(r#"dossier_http_requests_total{route="/v1/search",method="POST",status="200"}"#)],
            2.0
        );
        assert_eq!(
            s[&k(r#"dossier_http_requests_total{route="/v1/search",method="POST",status="429"}"#)],
            1.0
        );
        assert_eq!(
            s[&k(r#"dossier_http_requests_total{route="unmatched",method="other",status="404"}"#)],
            1.0
        );
        let d = "dossier_http_request_duration_seconds";
        assert_eq!(
            s[&format!(r#"{d}_bucket{{route="/v1/search",le="0.001"}}"#)],
            1.0
        );
        assert_eq!(
            s[&format!(r#"{d}_bucket{{route="/v1/search",le="0.005"}}"#)],
            2.0
        );
        assert_eq!(
            s[&format!(r#"{d}_bucket{{route="/v1/search",le="0.25"}}"#)],
            3.0
        );
        assert_eq!(
            s[&format!(r#"{d}_bucket{{route="/v1/search",le="+Inf"}}"#)],
            3.0
        );
        assert_eq!(s[&format!(r#"{d}_count{{route="/v1/search"}}"#)], 3.0);
        assert!((s[&format!(r#"{d}_sum{{route="/v1/search"}}"#)] - 0.2031).abs() < 1e-9);
        // Past the last bound: only in +Inf.
        assert_eq!(
            s[&format!(r#"{d}_bucket{{route="unmatched",le="30"}}"#)],
            0.0
        );
        assert_eq!(
            s[&format!(r#"{d}_bucket{{route="unmatched",le="+Inf"}}"#)],
            1.0
        );
        assert_eq!(
            s[&k(r#"dossier_cache_hits_total{route="/v1/search"}"#)],
            1.0
        );
        assert_eq!(s[&k(r#"dossier_cache_misses_total{route="/v1/ask"}"#)], 1.0);
        assert_eq!(
            s[&k(r#"dossier_http_degraded_total{route="/v1/search"}"#)],
            1.0
        );
        assert_eq!(s[&k("dossier_agent_degraded_total")], 0.0);
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(labels(&[("a", "x\"y\\z\nw")]), r#"{a="x\"y\\z\nw"}"#);
        assert_eq!(labels(&[]), "");
        let m = Metrics::new();
        m.observe_request("/v1/documents/{id}", "GET", 200, 0.01);
        parse(&m.render());
    }

    #[test]
    fn verifier_notes_are_classified() {
        assert!(is_dropped_citation(
            "citation [3] dropped: d@1#0 is not evidence of this run or does not contain the quote"
        ));
        assert!(!is_dropped_citation(
            "model claim without a citation dropped: x"
        ));
        assert!(!is_dropped_model_claim("citation [3] dropped: x"));
        // What the agent's verifier writes for a claim without a citation.
        let ctx = dossier_agent::verify::ClaimContext {
            citations: &[],
            known: String::new(),
            facts: String::new(),
            conclusions: &[],
            structural: &[],
            dense: None,
        };
        let check = dossier_agent::verify::check_claims("耳机可以退。", "model", &ctx);
        assert_eq!(check.notes.len(), 1, "{:?}", check.notes);
        assert!(is_dropped_model_claim(&check.notes[0]), "{:?}", check.notes);
        assert!(!is_dropped_citation(&check.notes[0]));
    }
}
