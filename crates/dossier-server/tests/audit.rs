//! The durable audit log: every search and ask recorded in the store with who, when,
//! scope, the question's digest (its text only when told), tools, evidence, citations,
//! status and the unfiltered reasons; read by operators only; kept for the retention;
//! and traces served from the store after a restart, to their owner only.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use common::{add_admin_key, fresh_engine, hash_engine, scenarios, Reply, Server};
use dossier_engine::dossier_store::audit::digest;
use dossier_engine::dossier_store::{testing, AuditEntry, AuditRecord};
use dossier_engine::Engine;
use dossier_server::{AuditQuestions, ServerConfig};
use serde_json::{json, Value};

const KEYS: [common::Key; 5] = [
    ("key-u7", "u7", false),
    ("key-u8", "u8", false),
    ("key-zhang", "zhang", false),
    ("key-zhang-admin", "zhang", true),
    ("key-acme", "acme-admin", false),
];
/// Added with the operator scope.
const OPS: &str = "key-ops";

const ASK: &str = "订单 A123 的耳机已拆封，签收 10 天后有杂音，能退吗？";
const SEARCH: &str = "耳机无理由退货的签收期限和拆封条件";

async fn server(engine: Arc<Engine>, config: ServerConfig) -> Server {
    let s = Server::start_with(engine, &KEYS, config, None).await;
    add_admin_key(&s.keys_path, OPS, "acme-admin", true);
    s
}

/// Waits until the entries this server queued are in the store.
async fn flush(s: &Server) {
    let a = s.state.audit.clone();
    let done = tokio::task::spawn_blocking(move || a.flush(Duration::from_secs(20)))
        .await
        .unwrap();
    assert!(done, "the audit queue did not drain");
}

/// Every entry the operator can list, following the cursors, newest first.
async fn all_entries(s: &Server, filter: &str, limit: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("/v1/audit?limit={limit}{filter}");
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let r = s.get(&url, OPS).await;
        assert_eq!(r.status, 200, "{url}: {}", r.text);
        out.extend(r.body["entries"].as_array().unwrap().iter().cloned());
        match r.body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
}

fn by_rid<'a>(entries: &'a [Value], rid: &str) -> &'a Value {
    let found: Vec<&Value> = entries.iter().filter(|e| e["request_id"] == rid).collect();
    assert_eq!(found.len(), 1, "one entry for {rid}: {entries:#?}");
    found[0]
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

fn ask_body(q: &str) -> Value {
    json!({"question": q, "now": "2026-09-20"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_read_every_ask_and_search_with_its_fields() {
    let (_dir, engine) = fresh_engine();
    let s = server(engine, ServerConfig::default()).await;

    let ask_u7 = s.post("/v1/ask", "key-u7", ask_body(ASK)).await;
    assert_eq!(ask_u7.status, 200, "{}", ask_u7.text);
    // u8 asks about u7's order: the record tool is refused (`forbidden`), which u8's
    // trace reads as `no_hit`.
    let ask_u8 = s.post("/v1/ask", "key-u8", ask_body(ASK)).await;
    assert_eq!(ask_u8.status, 200, "{}", ask_u8.text);
    let told: Vec<&str> = ask_u8.body["trace"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| st["status"].as_str().unwrap())
        .collect();
    assert!(!told.contains(&"forbidden"), "{told:?}");
    let again_u8 = s.post("/v1/ask", "key-u8", ask_body(ASK)).await;
    assert_eq!(again_u8.header("x-dossier-cache"), Some("hit"));
    let search = s
        .post(
            "/v1/search",
            "key-zhang",
            json!({"query": SEARCH, "mode": "bm25", "k": 3, "now": "2026-09-20"}),
        )
        .await;
    assert_eq!(search.status, 200, "{}", search.text);
    let chat = s
        .post(
            "/v1/chat/completions",
            "key-acme",
            json!({"messages": [{"role": "user", "content": "What does the payment API depend on?"}]}),
        )
        .await;
    assert_eq!(chat.status, 200, "{}", chat.text);
    let empty = s.post("/v1/ask", "key-u7", ask_body("   ")).await;
    assert_eq!(empty.status, 400);
    flush(&s).await;

    // Paged two by two, the operator reads all six, newest first, once each.
    let entries = all_entries(&s, "", 2).await;
    let rids: Vec<&str> = entries
        .iter()
        .map(|e| e["request_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        rids,
        [
            &empty.request_id,
            &chat.request_id,
            &search.request_id,
            &again_u8.request_id,
            &ask_u8.request_id,
            &ask_u7.request_id
        ]
    );
    let whole = serde_json::to_string(&entries).unwrap();
    assert!(
        !whole.contains(ASK) && !whole.contains(SEARCH),
        "texts are not kept by default"
    );

    let e = by_rid(&entries, &ask_u7.request_id);
    assert_eq!(e["principal"], "u7");
    assert_eq!(e["tenant"], "shop");
    assert_eq!(e["groups"], json!(["customer"]));
    assert_eq!(e["route"], "/v1/ask");
    assert_eq!(e["now"], "2026-09-20");
    assert_eq!(e["status"], ask_u7.body["status"]);
    assert_eq!(e["http_status"], 200);
    assert_eq!(e["cached"], false);
    assert_eq!(e["question_blake3"], digest(ASK));
    assert!(e.get("question").is_none());
    assert_eq!(e["has_trace"], true);
    let steps = ask_u7.body["trace"]["steps"].as_array().unwrap();
    let tools: Vec<(String, String)> = e["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().into(),
                t["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    let told_u7: Vec<(String, String)> = steps
        .iter()
        .map(|st| {
            (
                st["action"].as_str().unwrap().into(),
                st["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(tools, told_u7, "u7 was told every status as it was");
    let evidence = strs(&e["evidence"]);
    assert!(
        evidence.contains(&"orders/A123".to_string()),
        "{evidence:?}"
    );
    for st in steps {
        for id in strs(&st["evidence"]) {
            assert!(evidence.contains(&id), "{id} missing from {evidence:?}");
        }
    }
    let mut cited: Vec<String> = Vec::new();
    for c in ask_u7.body["citations"].as_array().unwrap() {
        let id = c["chunk_id"].as_str().unwrap().to_string();
        if !cited.contains(&id) {
            cited.push(id);
        }
    }
    assert!(!cited.is_empty());
    assert_eq!(strs(&e["citations"]), cited);

    // u8's entry says what u8 was not told, and so does the cached repeat's.
    for rid in [&ask_u8.request_id, &again_u8.request_id] {
        let e = by_rid(&entries, rid);
        assert_eq!(e["principal"], "u8");
        let forbidden: Vec<&Value> = e["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["status"] == "forbidden")
            .collect();
        assert!(!forbidden.is_empty(), "{e:#}");
        assert!(forbidden.iter().all(|t| t["name"] == "record"), "{e:#}");
        let reasons = e["reasons"].as_array().unwrap();
        assert!(
            reasons
                .iter()
                .any(|r| r["status"] == "forbidden" && r["action"] == "record"),
            "{e:#}"
        );
    }
    assert_eq!(by_rid(&entries, &again_u8.request_id)["cached"], true);
    assert_eq!(by_rid(&entries, &ask_u8.request_id)["cached"], false);

    let e = by_rid(&entries, &search.request_id);
    assert_eq!(e["route"], "/v1/search");
    assert_eq!(e["mode"], "bm25");
    assert_eq!(e["status"], "ok");
    assert_eq!(e["question_blake3"], digest(SEARCH));
    let hits: Vec<String> = search.body["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["chunk_id"].as_str().unwrap().to_string())
        .collect();
    assert!(!hits.is_empty());
    assert_eq!(strs(&e["evidence"]), hits);
    assert_eq!(e["has_trace"], false);

    let e = by_rid(&entries, &chat.request_id);
    assert_eq!(
        (&e["route"], &e["tenant"]),
        (&json!("/v1/chat/completions"), &json!("acme"))
    );
    let e = by_rid(&entries, &empty.request_id);
    assert_eq!(
        (&e["status"], &e["http_status"]),
        (&json!("invalid_request"), &json!(400))
    );

    // Filters.
    let only = |v: Vec<Value>| -> Vec<String> {
        v.iter()
            .map(|e| e["request_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        only(all_entries(&s, "&principal=u8", 100).await),
        [again_u8.request_id.as_str(), ask_u8.request_id.as_str()]
    );
    assert_eq!(
        only(all_entries(&s, "&route=/v1/search", 100).await),
        [search.request_id.as_str()]
    );
    assert_eq!(
        only(all_entries(&s, &format!("&request_id={}", ask_u7.request_id), 100).await),
        [ask_u7.request_id.as_str()]
    );
    assert_eq!(
        only(all_entries(&s, "&status=invalid_request", 100).await),
        [empty.request_id.as_str()]
    );
    let future = (Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let enc = future.replace('+', "%2B");
    assert!(all_entries(&s, &format!("&since={enc}"), 100)
        .await
        .is_empty());
    assert_eq!(
        all_entries(&s, &format!("&until={enc}"), 100).await.len(),
        6
    );
    for bad in [
        "since=yesterday",
        "limit=0",
        "limit=1001",
        "cursor=x",
        "principals=u7",
    ] {
        let r = s.get(&format!("/v1/audit?{bad}"), OPS).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.text);
    }

    // Only operators: every other key gets the 403 of every operator route.
    let reference = s.get("/v1/index/generations", "key-zhang-admin").await;
    assert_eq!(reference.status, 403);
    for key in ["key-u7", "key-u8", "key-zhang-admin", "key-acme"] {
        for url in [
            "/v1/audit",
            "/v1/audit?principal=u7",
            "/v1/audit?since=garbage",
        ] {
            let r = s.get(url, key).await;
            assert_eq!(r.status, 403, "{key} {url}: {}", r.text);
            assert_eq!(r.body["code"], "operator_required");
            assert_eq!(r.sans_id(), reference.sans_id());
        }
    }
    assert_eq!(s.get("/v1/audit", None).await.status, 401);

    // Written, none failed or dropped.
    let metrics = s.get("/metrics", None).await.text;
    assert!(
        metrics.contains("dossier_audit_entries_total{outcome=\"written\"} 6"),
        "{metrics}"
    );
    assert!(!metrics.contains("outcome=\"failed\"") && !metrics.contains("outcome=\"dropped\""));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn question_texts_are_kept_only_when_the_server_is_told_to() {
    let (_dir, engine) = fresh_engine();
    let config = ServerConfig {
        audit_questions: AuditQuestions::Text,
        ..ServerConfig::default()
    };
    let s = server(engine, config).await;
    let a = s.post("/v1/ask", "key-u7", ask_body(ASK)).await;
    let q = s
        .post(
            "/v1/search",
            "key-u7",
            json!({"query": SEARCH, "mode": "bm25"}),
        )
        .await;
    assert_eq!((a.status, q.status), (200, 200));
    flush(&s).await;
    let entries = all_entries(&s, "", 100).await;
    let e = by_rid(&entries, &a.request_id);
    assert_eq!(e["question"], ASK);
    assert_eq!(e["question_blake3"], digest(ASK));
    assert_eq!(by_rid(&entries, &q.request_id)["question"], SEARCH);
    s.stop().await;
}

/// Status, headers but `date`, `x-request-id` and `content-length`, and the body
/// without its request id.
fn comparable(r: &Reply) -> (u16, Vec<(String, String)>, Value) {
    let mut headers: Vec<(String, String)> = r
        .headers
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "date" | "x-request-id" | "content-length"))
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
        .collect();
    headers.sort();
    (r.status, headers, r.sans_id())
}

/// Waits until `engine` is held here only, then drops it (the store is released).
async fn release(engine: Arc<Engine>) {
    let started = Instant::now();
    while Arc::strong_count(&engine) > 1 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the stopped server still holds the engine ({} owners)",
            Arc::strong_count(&engine)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::task::spawn_blocking(move || drop(engine))
        .await
        .unwrap();
}

/// The store at `path` opened again, as a restarted server opens it.
fn reopen(path: &Path) -> Arc<Engine> {
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        Arc::new(
            Engine::with_embedder(
                testing::location(&path),
                "hash:64",
                Box::new(dossier_embed::HashEmbedder::new(64)),
            )
            .unwrap(),
        )
    })
    .join()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_outlive_a_restart_for_their_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let engine = Arc::new(hash_engine(
        &store,
        &[scenarios().join("shop"), scenarios().join("acme")],
    ));
    let first = server(engine.clone(), ServerConfig::default()).await;
    let asked = first.post("/v1/ask", "key-u7", ask_body(ASK)).await;
    assert_eq!(asked.status, 200, "{}", asked.text);
    let rid = asked.request_id.clone();
    let before = first.get(&format!("/v1/traces/{rid}"), "key-u7").await;
    assert_eq!(before.status, 200, "{}", before.text);
    first.stop().await;
    release(engine).await;

    let engine = reopen(&store);
    let second = server(engine.clone(), ServerConfig::default()).await;
    let url = format!("/v1/traces/{rid}");
    let after = second.get(&url, "key-u7").await;
    assert_eq!(after.status, 200, "{}", after.text);
    assert_eq!(after.body, before.body, "the same trace, from the store");
    assert_eq!(after.body["question"], ASK);
    assert_eq!(after.body["trace"], asked.body["trace"]);

    // Another principal, and an id that never existed (same shape): one answer.
    let mut missing = rid.clone();
    let last = missing.pop().unwrap();
    missing.push(if last == '0' { '1' } else { '0' });
    let theirs = second.get(&url, "key-u8").await;
    let never = second.get(&format!("/v1/traces/{missing}"), "key-u8").await;
    let never_own = second.get(&format!("/v1/traces/{missing}"), "key-u7").await;
    assert_eq!(theirs.status, 404, "{}", theirs.text);
    assert!(!theirs.text.contains(&rid));
    assert_eq!(comparable(&theirs), comparable(&never));
    assert_eq!(comparable(&theirs), comparable(&never_own));
    // An admin of the same tenant is no owner either.
    let admin = second.get(&url, "key-zhang-admin").await;
    assert_eq!(comparable(&admin), comparable(&never));

    // The entry is there too.
    let entries = all_entries(&second, &format!("&request_id={rid}"), 10).await;
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["has_trace"], true);
    second.stop().await;
    release(engine).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maintenance_loop_prunes_entries_past_the_retention() {
    let (_dir, engine) = fresh_engine();
    let now = Utc::now();
    let old = move |rid: &str, days: i64| AuditRecord {
        entry: AuditEntry {
            request_id: rid.into(),
            finished_at: now - chrono::Duration::days(days),
            principal: "u7".into(),
            tenant: "shop".into(),
            groups: vec!["customer".into()],
            kbs: None,
            route: "/v1/search".into(),
            now: None,
            as_of: None,
            mode: Some("bm25".into()),
            status: "ok".into(),
            http_status: 200,
            question_blake3: digest(rid),
            question: None,
            cached: false,
            tools: vec![],
            evidence: vec![],
            citations: vec![],
            reasons: vec![],
            has_trace: false,
        },
        trace: Some(b"{}".to_vec()),
    };
    let e = engine.clone();
    tokio::task::spawn_blocking(move || {
        e.store()
            .catalog()
            .audit_append(&[old("past", 31), old("within", 29)])
            .unwrap()
    })
    .await
    .unwrap();
    let config = ServerConfig {
        audit_retention_days: 30,
        ..ServerConfig::default()
    };
    let s = server(engine.clone(), config).await;
    let started = Instant::now();
    loop {
        let left: Vec<String> = all_entries(&s, "", 100)
            .await
            .iter()
            .map(|e| e["request_id"].as_str().unwrap().to_string())
            .collect();
        if left == ["within"] {
            break;
        }
        assert!(left.contains(&"within".to_string()), "{left:?}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "not pruned: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let e = engine.clone();
    let traces = tokio::task::spawn_blocking(move || {
        let c = e.store().catalog();
        (
            c.audit_trace("past", "u7").unwrap(),
            c.audit_trace("within", "u7").unwrap(),
        )
    })
    .await
    .unwrap();
    assert_eq!(traces, (None, Some(b"{}".to_vec())));
    let metrics = s.get("/metrics", None).await.text;
    assert!(
        metrics.contains("dossier_audit_pruned_total 1"),
        "{metrics}"
    );
    s.stop().await;
}
