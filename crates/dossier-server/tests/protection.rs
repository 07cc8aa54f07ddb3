//! Protection under load against a real server on a loopback port, over the shared
//! scenario corpus (shop + acme) ingested with the hash embedder: per-tenant rate
//! limits, per-tenant concurrency of expensive work, the answer cache, deadlines and
//! `/metrics`.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{fresh_engine, shared_engine, Key, Reply, Server};
use dossier_engine::{Engine, SearchRequest, SearchResponse};
use dossier_server::{LimitConfig, ServerConfig};
use serde_json::{json, Value};

const NOTICE: &str = "supplier-notice-S-8";
const NOTICE_QUERY: &str = "供应商 S-8 电池鼓包事件 E-1 影响哪些产品";
const E1_QUESTION: &str = "哪些产品受到供应商事件 E-1 影响？";
const MULTI_HOP: &str = "上周支付网关超时事故影响了哪些高价值客户？这些客户是否也命中过风控异常？负责人和修复动作是什么？";

/// (key, principal, admin) of every test server.
const KEYS: [Key; 5] = [
    ("key-u7", "u7", false),
    ("key-u8", "u8", false),
    ("key-zhang", "zhang", false),
    ("key-oncall", "oncall", false),
    ("key-acme", "acme-admin", false),
];

/// What only this file's tests read of a reply.
impl Reply {
    fn cache(&self) -> &str {
        self.header("x-dossier-cache").unwrap_or("")
    }
}

/// What only this file's tests ask of the server.
impl Server {
    async fn search(&self, key: &str, query: &str, mode: &str) -> Reply {
        self.post("/v1/search", key, search_body(query, mode)).await
    }

    async fn ask(&self, key: &str, question: &str) -> Reply {
        self.post(
            "/v1/ask",
            key,
            json!({"question": question, "now": "2026-11-30"}),
        )
        .await
    }
}

fn search_body(query: &str, mode: &str) -> Value {
    json!({"query": query, "mode": mode, "k": 10, "now": "2026-11-30"})
}

fn config(limits: LimitConfig) -> ServerConfig {
    ServerConfig {
        limits,
        ..ServerConfig::default()
    }
}

/// A 429 with `Retry-After` (whole seconds, at least 1) and the error body's code.
fn assert_429(r: &Reply, code: &str) -> u64 {
    assert_eq!(r.status, 429, "{}", r.text);
    assert_eq!(r.body["code"], code, "{}", r.text);
    assert_eq!(r.body["type"], "rate_limit_error", "{}", r.text);
    let secs: u64 = r
        .header("retry-after")
        .expect("a 429 carries Retry-After")
        .parse()
        .expect("Retry-After in whole seconds");
    assert!(secs >= 1);
    secs
}

fn doc_ids(body: &Value) -> Vec<String> {
    body["hits"]
        .as_array()
        .unwrap_or_else(|| panic!("no hits in {body}"))
        .iter()
        .map(|h| h["doc_id"].as_str().unwrap().to_string())
        .collect()
}

async fn engine_search(
    engine: Arc<Engine>,
    principal: &str,
    query: &str,
    mode: &str,
) -> SearchResponse {
    let req = SearchRequest {
        principal: principal.into(),
        query: query.into(),
        mode: mode.parse().unwrap(),
        k: 10,
        now: "2026-11-30".parse().unwrap(),
        as_of: None,
        kbs: vec![],
    };
    tokio::task::spawn_blocking(move || engine.search(&req).unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_over_its_rate_gets_429_and_other_tenants_do_not() {
    // Two requests at once, then one token every 1000 s.
    let s = Server::start_with(
        shared_engine(),
        &KEYS,
        config(LimitConfig {
            rate_per_sec: 0.001,
            burst: 2,
            ..LimitConfig::default()
        }),
        None,
    )
    .await;
    for _ in 0..2 {
        let r = s.search("key-u7", "耳机退货", "bm25").await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let limited = s.search("key-u7", "耳机退货", "bm25").await;
    let secs = assert_429(&limited, "rate_limited");
    // Honest: the time until one token is back (1000 s less what has passed).
    assert!((900..=1000).contains(&secs), "Retry-After {secs}");
    assert!(limited.body["request_id"].is_string(), "{}", limited.text);
    // The bucket is the tenant's: another shop principal is limited too, and every
    // authenticated route counts.
    assert_429(
        &s.search("key-u8", "耳机退货", "bm25").await,
        "rate_limited",
    );
    assert_429(&s.ask("key-zhang", E1_QUESTION).await, "rate_limited");
    // Another tenant is not affected.
    for _ in 0..2 {
        let r = s.search("key-acme", "payment-gateway", "bm25").await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    // Unauthenticated routes are not limited.
    assert_eq!(s.get("/healthz", None).await.status, 200);
    assert_eq!(s.state.limits.rejections().rate, 3);
    let m = metrics(&s).await;
    assert_eq!(m[r#"dossier_rate_limited_total{reason="rate"}"#], 3.0);
    assert_eq!(
        m[r#"dossier_rate_limited_total{reason="concurrency"}"#],
        0.0
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expensive_work_beyond_the_tenants_slots_gets_429_until_one_is_free() {
    let s = Server::start_with(
        shared_engine(),
        &KEYS,
        config(LimitConfig {
            expensive_concurrency: 1,
            ..LimitConfig::default()
        }),
        None,
    )
    .await;
    // Something else of shop holds its only slot.
    let held = s
        .state
        .limits
        .expensive("shop", "another-shop-key")
        .unwrap();
    assert_eq!(s.state.limits.running("shop"), 1);

    let graph = s.search("key-u7", "耳机退货", "graph").await;
    assert_429(&graph, "too_many_concurrent");
    assert_429(
        &s.ask("key-zhang", E1_QUESTION).await,
        "too_many_concurrent",
    );
    // Cheap work is not limited by the slots.
    let bm25 = s.search("key-u7", "耳机退货", "bm25").await;
    assert_eq!(bm25.status, 200, "{}", bm25.text);
    // Another tenant has its own slots.
    let acme = s.search("key-acme", "payment-gateway", "graph").await;
    assert_eq!(acme.status, 200, "{}", acme.text);
    assert_eq!(s.state.limits.running("acme"), 0, "acme's slot was freed");

    drop(held);
    assert_eq!(s.state.limits.running("shop"), 0);
    let graph = s.search("key-u7", "耳机退货", "graph").await;
    assert_eq!(graph.status, 200, "{}", graph.text);
    let ask = s.ask("key-zhang", E1_QUESTION).await;
    assert_eq!(ask.status, 200, "{}", ask.text);
    // The permits of the finished requests went back.
    assert_eq!(s.state.limits.running_total(), 0);
    assert_eq!(s.state.limits.rejections().concurrency, 2);
    s.stop().await;
}

/// One key cannot use up its tenant's share: a principal has its own slots (and rate)
/// inside the tenant's, and the refusal says whose limit it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_over_its_own_quota_is_refused_while_its_tenant_goes_on() {
    let s = Server::start_with(
        shared_engine(),
        &KEYS,
        config(LimitConfig {
            expensive_concurrency: 8,
            principal_concurrency: 1,
            principal_rate_per_sec: 0.001,
            principal_burst: 3,
            ..LimitConfig::default()
        }),
        None,
    )
    .await;
    // u7 holds its one slot: its graph search is refused, zhang's (same tenant) is not.
    let held = s.state.limits.expensive("shop", "u7").unwrap();
    let refused = s.search("key-u7", "耳机退货", "graph").await;
    assert_429(&refused, "too_many_concurrent");
    assert!(
        refused.body["message"]
            .as_str()
            .unwrap()
            .contains("principal"),
        "{}",
        refused.text
    );
    let other = s.search("key-zhang", "耳机退货", "graph").await;
    assert_eq!(other.status, 200, "{}", other.text);
    drop(held);
    // u7's own rate: its burst of 3 went (one above), one more request is refused, and
    // zhang still gets through.
    let _ = s.search("key-u7", "耳机退货", "bm25").await;
    let _ = s.search("key-u7", "耳机退货", "bm25").await;
    let r = s.search("key-u7", "耳机退货", "bm25").await;
    assert_429(&r, "rate_limited");
    assert!(
        r.body["message"].as_str().unwrap().contains("principal"),
        "{}",
        r.text
    );
    let z = s.search("key-zhang", "耳机退货", "bm25").await;
    assert_eq!(z.status, 200, "{}", z.text);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_answers_repeats_per_scope_and_forgets_after_a_commit() {
    // This test commits: its own store.
    let (_dir, engine) = fresh_engine();
    let s = Server::start(engine.clone(), &KEYS).await;

    let first = s.search("key-zhang", NOTICE_QUERY, "hybrid").await;
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(first.cache(), "miss");
    assert!(doc_ids(&first.body).contains(&NOTICE.to_string()));
    let again = s.search("key-zhang", NOTICE_QUERY, "hybrid").await;
    assert_eq!(again.cache(), "hit");
    assert_eq!(again.body, first.body);
    // Another mode is another request.
    assert_eq!(
        s.search("key-zhang", NOTICE_QUERY, "bm25").await.cache(),
        "miss"
    );

    // The same query by another principal: its own answer, not zhang's.
    let u7 = s.search("key-u7", NOTICE_QUERY, "hybrid").await;
    assert_eq!(u7.status, 200, "{}", u7.text);
    assert_eq!(u7.cache(), "miss");
    assert!(!u7.text.contains(NOTICE), "{}", u7.text);
    // Responses are compared as JSON: a SearchResponse is only ever built by the
    // engine (its hits carry the engine's check), never deserialised.
    assert_eq!(
        u7.body,
        serde_json::to_value(engine_search(engine.clone(), "u7", NOTICE_QUERY, "hybrid").await)
            .unwrap()
    );
    // Same tenant and groups, another principal: still its own entry.
    let u8 = s.search("key-u8", NOTICE_QUERY, "hybrid").await;
    assert_eq!(u8.cache(), "miss");
    assert_eq!(
        s.search("key-u7", NOTICE_QUERY, "hybrid").await.cache(),
        "hit"
    );

    // Asks are cached the same way.
    let ask = s.ask("key-zhang", E1_QUESTION).await;
    assert_eq!(ask.status, 200, "{}", ask.text);
    assert_eq!(ask.cache(), "miss");
    assert!(ask.text.contains(NOTICE), "{}", ask.text);
    let ask_again = s.ask("key-zhang", E1_QUESTION).await;
    assert_eq!(ask_again.cache(), "hit");
    assert_eq!(ask_again.body, ask.body);

    // A commit through the engine (not through the server): the catalog generation
    // moves on, so the next answers are computed afresh and show the change.
    let e = engine.clone();
    let deleted = tokio::task::spawn_blocking(move || e.delete(NOTICE, None).unwrap())
        .await
        .unwrap();
    assert!(!deleted.is_empty());
    let after = s.search("key-zhang", NOTICE_QUERY, "hybrid").await;
    assert_eq!(after.status, 200, "{}", after.text);
    assert_eq!(after.cache(), "miss");
    assert!(
        !doc_ids(&after.body).contains(&NOTICE.to_string()),
        "{}",
        after.text
    );
    assert_eq!(
        after.body,
        serde_json::to_value(engine_search(engine.clone(), "zhang", NOTICE_QUERY, "hybrid").await)
            .unwrap()
    );
    let ask_after = s.ask("key-zhang", E1_QUESTION).await;
    assert_eq!(ask_after.cache(), "miss");
    assert!(!ask_after.text.contains(NOTICE), "{}", ask_after.text);
    // Older answers were dropped, not just bypassed.
    assert!(s.state.cache.len() <= 2, "{} entries", s.state.cache.len());
    assert_eq!(
        s.search("key-zhang", NOTICE_QUERY, "hybrid").await.cache(),
        "hit"
    );

    // invalidate_all (what the server's own commits call) empties it.
    s.state.cache.invalidate_all();
    assert_eq!(
        s.search("key-zhang", NOTICE_QUERY, "hybrid").await.cache(),
        "miss"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_of_zero_entries_never_hits() {
    let s = Server::start_with(
        shared_engine(),
        &KEYS,
        ServerConfig {
            cache_entries: 0,
            ..ServerConfig::default()
        },
        None,
    )
    .await;
    for _ in 0..2 {
        let r = s.search("key-u7", "耳机退货", "hybrid").await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.cache(), "miss");
    }
    assert!(s.state.cache.is_empty());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_past_its_deadline_says_so() {
    // Its own store, so the tenant graph is cold: graph mode cannot finish in 1 ms.
    let (_dir, engine) = fresh_engine();
    let s = Server::start_with(
        engine,
        &KEYS,
        config(LimitConfig {
            search_deadline: Duration::from_millis(1),
            ..LimitConfig::default()
        }),
        None,
    )
    .await;
    let r = s.search("key-zhang", NOTICE_QUERY, "graph").await;
    match r.status {
        // BM25 answered within the deadline: the answer says what it is.
        200 => {
            let d = &r.body["degraded"];
            assert_eq!(d["from"], "graph", "{}", r.text);
            assert_eq!(d["to"], "bm25", "{}", r.text);
            assert!(d["reason"].as_str().unwrap().contains("1 ms"), "{}", r.text);
            assert!(!doc_ids(&r.body).is_empty(), "{}", r.text);
            let m = metrics(&s).await;
            assert_eq!(m[r#"dossier_http_degraded_total{route="/v1/search"}"#], 1.0);
        }
        // Not even BM25 made it.
        504 => assert_eq!(r.body["code"], "deadline_exceeded", "{}", r.text),
        other => panic!("unexpected {other}: {}", r.text),
    }
    // A degraded answer is never kept: the repeat is computed again.
    let again = s.search("key-zhang", NOTICE_QUERY, "graph").await;
    assert_ne!(again.cache(), "hit", "{}", again.text);
    // BM25 itself has no fallback: within the deadline or 504, never mislabelled.
    let bm25 = s.search("key-zhang", NOTICE_QUERY, "bm25").await;
    match bm25.status {
        200 => assert!(bm25.body.get("degraded").is_none(), "{}", bm25.text),
        504 => assert_eq!(bm25.body["code"], "deadline_exceeded"),
        other => panic!("unexpected {other}: {}", bm25.text),
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_past_its_deadline_answers_honestly_and_is_not_cached() {
    let s = Server::start_with(
        shared_engine(),
        &KEYS,
        config(LimitConfig {
            ask_deadline: Duration::from_millis(1),
            ..LimitConfig::default()
        }),
        None,
    )
    .await;
    let r = s.ask("key-oncall", MULTI_HOP).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let trace = &r.body["trace"];
    // The deadline became the agent's wall budget.
    assert_eq!(
        trace["budget"]["limits"]["max_wall"],
        json!({"secs": 0, "nanos": 1_000_000}),
        "{}",
        r.text
    );
    // A multi-hop question cannot be worked through in 1 ms: the trace says the time
    // ran out, and the answer does not claim more than it has.
    let said = |field: &Value| {
        field
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v.as_str().unwrap().contains("wall time"))
    };
    assert!(
        said(&trace["budget"]["limits_reached"]) || said(&trace["degraded"]),
        "{}",
        r.text
    );
    assert!(
        !trace["degraded"].as_array().unwrap().is_empty(),
        "{}",
        r.text
    );
    let status = r.body["status"].as_str().unwrap();
    if status == "answered" {
        assert!(
            !r.body["citations"].as_array().unwrap().is_empty(),
            "{}",
            r.text
        );
    } else {
        assert!(
            ["partial", "insufficient_evidence"].contains(&status),
            "{}",
            r.text
        );
    }
    // An answer cut short by the deadline is not served again from the cache.
    let again = s.ask("key-oncall", MULTI_HOP).await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.cache(), "miss");
    let m = metrics(&s).await;
    assert_eq!(m["dossier_agent_degraded_total"], 2.0);
    s.stop().await;
}

/// `GET /metrics` (no key), checked line by line: every sample is `name{labels} value`
/// of a family declared by `# TYPE` before it. Returns series → value.
async fn metrics(s: &Server) -> BTreeMap<String, f64> {
    let r = s.get("/metrics", None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("text/plain; version=0.0.4"),
        "{:?}",
        r.header("content-type")
    );
    parse_exposition(&r.text)
}

fn parse_exposition(text: &str) -> BTreeMap<String, f64> {
    let mut typed: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(
                typed.insert(name.into(), kind.into()).is_none(),
                "declared twice: {line}"
            );
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        assert!(
            !line.is_empty() && !line.starts_with('#'),
            "stray line {line:?}"
        );
        let (series, value) = line.rsplit_once(' ').expect("name{labels} value");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => {
                let l = l
                    .strip_suffix('}')
                    .unwrap_or_else(|| panic!("labels: {line}"));
                (n, l)
            }
            None => (series, ""),
        };
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad name: {line}"
        );
        // label="value" pairs, separated by commas (values here hold no quotes).
        if !labels.is_empty() {
            for pair in labels.split("\",") {
                let (k, v) = pair
                    .split_once("=\"")
                    .unwrap_or_else(|| panic!("label: {line}"));
                assert!(
                    k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "label name: {line}"
                );
                assert!(!v.contains('"') || v.ends_with('"'), "label value: {line}");
            }
            assert!(labels.ends_with('"'), "labels: {line}");
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix)
                    .filter(|f| typed.get(*f).is_some_and(|k| k == "histogram"))
            })
            .unwrap_or(name);
        assert!(typed.contains_key(family), "no # TYPE before: {line}");
        assert!(
            samples.insert(series.to_string(), value).is_none(),
            "series twice: {line}"
        );
    }
    samples
}

fn sum_of(m: &BTreeMap<String, f64>, prefix: &str) -> f64 {
    m.iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(_, v)| v)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_asks_and_the_cache_without_a_key() {
    let s = Server::start(shared_engine(), &KEYS).await;
    for _ in 0..3 {
        let r = s.search("key-u7", "耳机退货", "hybrid").await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let ask = s.ask("key-zhang", E1_QUESTION).await;
    assert_eq!(ask.status, 200, "{}", ask.text);
    assert_eq!(s.ask("key-zhang", E1_QUESTION).await.cache(), "hit");
    assert_eq!(s.get("/v1/nothing-here", None).await.status, 404);
    assert_eq!(s.get("/v1/graph/entity/S-8", None).await.status, 401);

    let m = metrics(&s).await;
    let search_200 =
        r#"dossier_http_requests_total{route="/v1/search",method="POST",status="200"}"#;
    assert_eq!(m[search_200], 3.0);
    assert_eq!(
        m[r#"dossier_http_request_duration_seconds_count{route="/v1/search"}"#],
        3.0
    );
    assert_eq!(
        m[r#"dossier_http_request_duration_seconds_bucket{route="/v1/search",le="+Inf"}"#],
        3.0
    );
    assert!(m[r#"dossier_http_request_duration_seconds_sum{route="/v1/search"}"#] > 0.0);
    assert_eq!(
        m[r#"dossier_http_requests_total{route="/v1/ask",method="POST",status="200"}"#],
        2.0
    );
    assert_eq!(
        m[r#"dossier_http_requests_total{route="unmatched",method="GET",status="404"}"#],
        1.0
    );
    // The route template, not the path asked for.
    assert_eq!(
        m[r#"dossier_http_requests_total{route="/v1/graph/entity/{name}",method="GET",status="401"}"#],
        1.0
    );
    assert_eq!(m[r#"dossier_cache_hits_total{route="/v1/search"}"#], 2.0);
    assert_eq!(m[r#"dossier_cache_misses_total{route="/v1/search"}"#], 1.0);
    assert_eq!(m[r#"dossier_cache_hits_total{route="/v1/ask"}"#], 1.0);
    assert_eq!(m[r#"dossier_cache_misses_total{route="/v1/ask"}"#], 1.0);
    assert_eq!(m["dossier_cache_entries"], 2.0);
    // One ask ran (the hit did not run the agent again); its tool calls, by tool and
    // status, are the steps of its trace.
    let status = ask.body["status"].as_str().unwrap();
    assert_eq!(
        m[&format!(r#"dossier_agent_asks_total{{status="{status}"}}"#)],
        1.0
    );
    assert_eq!(sum_of(&m, "dossier_agent_asks_total"), 1.0);
    let steps = ask.body["trace"]["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    assert_eq!(
        sum_of(&m, "dossier_agent_tool_calls_total"),
        steps.len() as f64
    );
    for step in steps {
        let series = format!(
            r#"dossier_agent_tool_calls_total{{tool="{}",status="{}"}}"#,
            step["action"].as_str().unwrap(),
            step["status"].as_str().unwrap()
        );
        assert!(m.contains_key(&series), "{series} missing");
    }
    let degraded = !ask.body["trace"]["degraded"].as_array().unwrap().is_empty();
    assert_eq!(
        m["dossier_agent_degraded_total"],
        f64::from(u8::from(degraded))
    );
    assert_eq!(m["dossier_agent_citations_dropped_total"], 0.0);
    assert_eq!(m["dossier_expensive_running"], 0.0);
    assert_eq!(m["dossier_jobs_running"], 0.0);

    // Nothing about who asked or what: no principal, tenant, query or document text.
    let text = s.get("/metrics", None).await.text;
    for secret in ["u7", "zhang", "shop", "耳机", "E-1", NOTICE] {
        assert!(!text.contains(secret), "{secret} in /metrics");
    }
    s.stop().await;
}

/// Defect: a 1.4 MB search body answered 200 after 10.8 s of embedding. Now the body
/// limit and the query and question caps answer 413 before any work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_and_queries_are_refused_before_any_work() {
    let s = Server::start(shared_engine(), &KEYS).await;
    let huge = "退货 ".repeat(1_400_000 / 7);
    // Sent over a raw socket: an HTTP client that is still writing a body when the
    // server answers and closes may report the connection closed instead of the
    // answer (hyper's `IncompleteMessage`, seen here under load); the socket reads
    // exactly what the server sent.
    let body = serde_json::json!({"query": huge, "mode": "hybrid"}).to_string();
    let (read, text) = raw_post(&s.base, "/v1/search", "key-u7", body.into_bytes(), None).await;
    assert!(read.is_ok(), "the response was lost: {read:?}");
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("payload_too_large"), "{text}");
    let long = "a".repeat(dossier_server::MAX_QUERY_CHARS + 1);
    let r = s
        .post(
            "/v1/search",
            "key-u7",
            serde_json::json!({"query": long, "mode": "vector"}),
        )
        .await;
    assert_eq!(r.status, 413, "{}", r.text);
    assert!(
        r.body["message"].as_str().unwrap().contains("query"),
        "{}",
        r.text
    );
    let just = "退".repeat(dossier_server::MAX_QUERY_CHARS);
    let r = s
        .post(
            "/v1/search",
            "key-u7",
            serde_json::json!({"query": just, "mode": "bm25"}),
        )
        .await;
    assert_eq!(r.status, 200, "a query at the cap is served: {}", r.text);
    let q = "为什么".repeat(dossier_server::MAX_QUESTION_CHARS / 3 + 1);
    for route in ["/v1/ask", "/v1/chat/completions"] {
        let body = if route == "/v1/ask" {
            serde_json::json!({"question": q})
        } else {
            serde_json::json!({"model": "dossier", "messages": [{"role": "user", "content": q}]})
        };
        let r = s.post(route, "key-u7", body).await;
        assert_eq!(r.status, 413, "{route}: {}", r.text);
    }
    s.stop().await;
}

/// A client still sending a body the server has already refused gets the 413, not a
/// connection reset. The client here sends the headers of a 64 MiB body and 1 MiB of
/// it, pauses until the server has answered, and only then reads. Closing a socket with
/// unread data sends a reset, which throws away the response on the client's side;
/// the server drains a closing connection (`linger.rs`) so that it does not. Whether a
/// reset happens depends on timing: this test also passed with the drain switched off
/// on the development machine, so it holds the contract rather than proving the fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_body_still_being_sent_gets_its_413_not_a_reset() {
    let s = Server::start(shared_engine(), &KEYS).await;
    let (read, text) = raw_post(
        &s.base,
        "/v1/search",
        "key-u7",
        [b"{\"query\": \"".as_slice(), &vec![b'x'; 1 << 20]].concat(),
        Some((64 << 20, Duration::from_millis(300))),
    )
    .await;
    assert!(read.is_ok(), "the response was lost: {read:?}");
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("payload_too_large"), "{text}");
    s.stop().await;
}

/// POSTs `body` over a raw socket and reads everything the server sends back. With
/// `declared: Some((length, pause))` the request declares `length` bytes but sends only
/// `body`, then pauses before reading. Write errors are ignored: the server may stop
/// reading once it has refused; what matters is what it answered.
async fn raw_post(
    base: &str,
    path: &str,
    key: &str,
    body: Vec<u8>,
    declared: Option<(usize, Duration)>,
) -> (Result<usize, String>, String) {
    let addr = base.trim_start_matches("http://").to_string();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        declared.map_or(body.len(), |(n, _)| n)
    );
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        let _ = c
            .write_all(head.as_bytes())
            .and_then(|_| c.write_all(&body));
        if let Some((_, pause)) = declared {
            std::thread::sleep(pause);
        }
        let mut got = Vec::new();
        let read = c.read_to_end(&mut got).map_err(|e| e.to_string());
        (read, String::from_utf8_lossy(&got).into_owned())
    })
    .await
    .unwrap()
}

/// An embedder that takes `delay` per query, counting them (the counter is shared with
/// the test, which keeps a clone).
struct SlowEmbedder {
    inner: dossier_embed::HashEmbedder,
    delay: Duration,
    calls: Arc<std::sync::atomic::AtomicUsize>,
}

impl dossier_core::Embedder for SlowEmbedder {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed_passages(&self, texts: &[&str]) -> dossier_core::Result<Vec<Vec<f32>>> {
        self.inner.embed_passages(texts)
    }
    fn embed_query(&self, text: &str) -> dossier_core::Result<Vec<f32>> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::thread::sleep(self.delay);
        self.inner.embed_query(text)
    }
}

/// Defect: timed-out work kept running and holding its slot. With one slot and an
/// embedder far slower than the deadline, searches one after another each get the
/// slot (the abandoned one was cancelled and let it go) and each answers, degraded,
/// within about its deadline; the queued embeddings of abandoned searches never run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_work_frees_its_slot() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let slow = SlowEmbedder {
        inner: dossier_embed::HashEmbedder::new(64),
        delay: Duration::from_millis(1500),
        calls: calls.clone(),
    };
    let engine =
        Engine::with_embedder(dir.path().join("store"), "hash:64", Box::new(slow)).unwrap();
    let report = engine
        .ingest(&[common::scenarios().join("shop")], &mut ())
        .unwrap();
    assert!(report.problems.is_empty());
    let s = Server::start_with(
        Arc::new(engine),
        &KEYS,
        config(LimitConfig {
            expensive_concurrency: 1,
            search_deadline: Duration::from_millis(200),
            ..LimitConfig::default()
        }),
        None,
    )
    .await;
    let t = std::time::Instant::now();
    for i in 0..4 {
        let r = s
            .search("key-zhang", &format!("耳机 退货 {i}"), "vector")
            .await;
        assert_eq!(r.status, 200, "search {i} was turned away: {}", r.text);
        assert_eq!(r.body["degraded"]["from"], "vector", "{}", r.text);
    }
    // Four searches with a 1.5 s embedding each: the first embedding runs on, those
    // queued behind it were dropped unrun once their searches were abandoned.
    eprintln!("four abandoned searches answered in {:?}", t.elapsed());
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let ran = calls.load(std::sync::atomic::Ordering::SeqCst);
    assert!(ran <= 2, "abandoned embeddings ran: {ran}");
    s.stop().await;
}
