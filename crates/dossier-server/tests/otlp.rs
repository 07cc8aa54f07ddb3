//! The span tree of one ask, exported over OTLP/HTTP JSON to a collector on loopback
//! (a listener here that keeps what it is sent): request → ask → route, plan → tool →
//! search → rank, write, verify; the access log as an event of the request span; a
//! refused record read shows as `no_hit`, as the caller sees it; no text of the question
//! or the corpus in any attribute. Its own test binary: the subscriber is process-wide.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{shared_engine, Key, Server};
use serde_json::{json, Value};

const KEYS: [Key; 2] = [("key-u7", "u7", false), ("key-u8", "u8", false)];
const QUESTION: &str = "订单 A123 的耳机已拆封，签收 10 天后有杂音，能退吗？";

/// A collector: answers every POST with 200 and keeps the JSON bodies.
fn collector() -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = got.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let (mut line, mut len, mut path) = (String::new(), 0usize, String::new());
            reader.read_line(&mut line).unwrap();
            if let Some(p) = line.split_whitespace().nth(1) {
                path = p.to_string();
            }
            loop {
                line.clear();
                reader.read_line(&mut line).unwrap();
                if line.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    if k.eq_ignore_ascii_case("content-length") {
                        len = v.trim().parse().unwrap();
                    }
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            assert_eq!(path, "/v1/traces");
            keep.lock()
                .unwrap()
                .push(serde_json::from_slice(&body).unwrap());
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{}");
        }
    });
    (url, got)
}

fn attr<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| &a["value"])
}

fn text(span: &Value, key: &str) -> String {
    attr(span, key)
        .and_then(|v| v["stringValue"].as_str().or(v["intValue"].as_str()))
        .unwrap_or_default()
        .to_string()
}

/// Every span of the trace whose request span carries `request_id`, once they arrive.
fn trace_of(got: &Mutex<Vec<Value>>, request_id: &str) -> Vec<Value> {
    let t = Instant::now();
    loop {
        let spans: Vec<Value> = got
            .lock()
            .unwrap()
            .iter()
            .flat_map(|b| {
                b["resourceSpans"][0]["scopeSpans"][0]["spans"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .collect();
        let root = spans
            .iter()
            .find(|s| s["name"] == "request" && text(s, "request_id") == request_id);
        if let Some(root) = root {
            let trace: Vec<Value> = spans
                .iter()
                .filter(|s| s["traceId"] == root["traceId"])
                .cloned()
                .collect();
            // The request span closes last, after every span inside it: they were
            // handed to the exporter before it.
            return trace;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no spans for {request_id}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn is_cjk(c: char) -> bool {
    ('\u{3400}'..='\u{9fff}').contains(&c) || ('\u{ff00}'..='\u{ffef}').contains(&c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_ask_exports_its_span_tree_without_a_word_of_text() {
    let (url, got) = collector();
    dossier_server::telemetry::install(&url).unwrap();
    let s = Server::start(shared_engine(), &KEYS).await;
    let r = s
        .post(
            "/v1/ask",
            "key-u7",
            json!({"question": QUESTION, "now": "2026-09-20"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let got2 = got.clone();
    let rid = r.request_id.clone();
    let trace = tokio::task::spawn_blocking(move || trace_of(&got2, &rid))
        .await
        .unwrap();
    let r = r; // the answer, compared with its spans below

    let by_id: HashMap<String, &Value> = trace
        .iter()
        .map(|s| (s["spanId"].as_str().unwrap().to_string(), s))
        .collect();
    let parent = |s: &Value| -> Option<String> {
        let p = s["parentSpanId"].as_str()?;
        by_id
            .get(p)
            .map(|p| p["name"].as_str().unwrap().to_string())
    };
    let named = |n: &str| {
        trace
            .iter()
            .filter(move |s| s["name"] == n)
            .collect::<Vec<_>>()
    };
    let names: Vec<_> = trace.iter().map(|s| s["name"].as_str().unwrap()).collect();

    // The request span: the root, with the route, the status and the access event.
    let roots: Vec<_> = trace
        .iter()
        .filter(|s| s.get("parentSpanId").is_none())
        .collect();
    assert_eq!(roots.len(), 1, "{names:?}");
    let root = roots[0];
    assert_eq!(root["name"], "request");
    assert_eq!(text(root, "url.path"), "/v1/ask");
    assert_eq!(text(root, "http.response.status_code"), "200");
    assert_eq!(root["kind"], 2);
    assert!(
        root["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "access"),
        "{root}"
    );
    // The stages, each under the one that ran it.
    let ask = named("ask");
    assert_eq!(ask.len(), 1, "{names:?}");
    assert_eq!(parent(ask[0]).as_deref(), Some("request"));
    assert_eq!(text(ask[0], "status"), "answered");
    // The router's class, as the answer's own trace gives it.
    let class = r.body["trace"]["route"]["class"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(text(ask[0], "route.class"), class);
    for stage in ["route", "plan", "write", "verify"] {
        let spans = named(stage);
        assert!(!spans.is_empty(), "no {stage} span: {names:?}");
        assert!(
            spans.iter().all(|s| parent(s).as_deref() == Some("ask")),
            "{stage}"
        );
    }
    let tools = named("tool");
    assert!(tools
        .iter()
        .all(|s| parent(s).as_deref() == Some("plan") || parent(s).as_deref() == Some("ask")));
    let record = tools
        .iter()
        .find(|s| text(s, "tool") == "record")
        .expect("a record read");
    assert_eq!(text(record, "status"), "ok");
    assert!(
        tools.iter().any(|s| text(s, "tool") == "document_search"),
        "{names:?}"
    );
    // A search runs under the tool that asked for it (or the rerank stage, which ranks
    // the pool against the question): `rank` (BM25 and vector candidates) directly
    // under it, or under `search` where the engine's whole search ran.
    let tree: Vec<(String, Option<String>)> = trace
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_string(), parent(s)))
        .collect();
    assert!(
        named("search")
            .iter()
            .all(|s| matches!(parent(s).as_deref(), Some("tool" | "rerank"))),
        "{tree:?}"
    );
    let ranks = named("rank");
    assert!(!ranks.is_empty(), "{tree:?}");
    assert!(
        ranks
            .iter()
            .all(|s| matches!(parent(s).as_deref(), Some("tool" | "search" | "rerank"))),
        "{tree:?}"
    );
    assert!(ranks.iter().any(
        |s| !text(s, "bm25_candidates").is_empty() && !text(s, "vector_candidates").is_empty()
    ));
    for s in &trace {
        let start: u64 = s["startTimeUnixNano"].as_str().unwrap().parse().unwrap();
        let end: u64 = s["endTimeUnixNano"].as_str().unwrap().parse().unwrap();
        assert!(end >= start && s["traceId"].as_str().unwrap().len() == 32);
    }
    // Nothing of the question or the corpus (all Chinese here) in any attribute.
    let all = serde_json::to_string(&trace).unwrap();
    assert!(!all.chars().any(is_cjk), "text in a span: {all}");
    assert!(!all.contains("A123"), "the question's order key in a span");

    // Another customer's order: the tool is refused, and the span says no_hit.
    let r = s
        .post(
            "/v1/ask",
            "key-u8",
            json!({"question": QUESTION, "now": "2026-09-20"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let got3 = got.clone();
    let rid = r.request_id.clone();
    let trace = tokio::task::spawn_blocking(move || trace_of(&got3, &rid))
        .await
        .unwrap();
    let statuses: Vec<String> = trace
        .iter()
        .filter(|s| s["name"] == "tool")
        .map(|s| text(s, "status"))
        .collect();
    assert!(statuses.contains(&"no_hit".to_string()), "{statuses:?}");
    assert!(!serde_json::to_string(&trace).unwrap().contains("forbidden"));
}
