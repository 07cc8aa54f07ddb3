//! Write and administration routes against a real server on loopback: documents
//! (upload, new version, sections, delete), principals, jobs, the review queue,
//! traces, and shutdown. Every test that writes has its own store.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{fresh_engine, Key, Server};
use dossier_server::ServerConfig;
use serde_json::{json, Value};
use tempfile::TempDir;

/// (key, principal, admin)
const KEYS: [Key; 5] = [
    ("key-u7", "u7", false),
    ("key-u8", "u8", false),
    ("key-zhang", "zhang", true),
    ("key-oncall", "oncall", false),
    ("key-acme", "acme-admin", true),
];
const NOTICE: &str = "supplier-notice-S-8";

/// Every test here writes: a fresh store (kept while the returned directory lives) and
/// a server on it.
async fn start() -> (TempDir, Server) {
    let (store, engine) = fresh_engine();
    (store, Server::start(engine, &KEYS).await)
}

/// What only this file's tests ask of the server.
impl Server {
    async fn search_docs(&self, key: &str, query: &str) -> (Vec<String>, Value) {
        let r = self
            .post(
                "/v1/search",
                key,
                json!({"query": query, "mode": "bm25", "k": 20, "now": "2026-11-30"}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        let docs = r.body["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                format!(
                    "{}@{}",
                    h["doc_id"].as_str().unwrap(),
                    h["version"].as_str().unwrap()
                )
            })
            .collect();
        (docs, r.body)
    }
}

fn doc(id: &str, version: &str, extra: &str, body: &str) -> String {
    format!(
        "---\nid: {id}\nversion: \"{version}\"\ntitle: Returns FAQ {version}\ntenant: shop\nkb: support\neffective_from: 2026-0{}-01\n{extra}---\n# Returns FAQ\n\n## Window\n{body}\n",
        if version == "1.0" { 1 } else { 6 }
    )
}

fn upload(files: &[(&str, String)]) -> Value {
    json!({"files": files.iter().map(|(n, c)| json!({"name": n, "content": c})).collect::<Vec<_>>()})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_upload_new_version_sections_and_delete() {
    let (_store, s) = start().await;
    let v1 = doc(
        "returns-faq",
        "1.0",
        "",
        "Parcels may be returned within 14 days of the zebrafish delivery.",
    );
    let v2 = doc(
        "returns-faq",
        "2.0",
        "supersedes: returns-faq@1.0\nsupersedes_evidence: release note RN-7\n",
        "Parcels may be returned within 30 days of the zebrafish delivery.",
    );

    // Writing needs an admin key.
    let r = s
        .post("/v1/documents", "key-u7", upload(&[("faq.md", v1.clone())]))
        .await;
    assert_eq!(
        (r.status, r.body["code"].as_str()),
        (403, Some("admin_required"))
    );

    // Before: nothing about zebrafish.
    let (docs, _) = s.search_docs("key-u7", "zebrafish delivery returned").await;
    assert!(
        !docs.iter().any(|d| d.starts_with("returns-faq")),
        "{docs:?}"
    );

    let r = s
        .post("/v1/documents", "key-zhang", upload(&[("faq.md", v1)]))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["documents_added"], 1);
    // The commit is seen by the next search (no stale cached answer).
    let (docs, _) = s.search_docs("key-u7", "zebrafish delivery returned").await;
    assert_eq!(
        docs.first().map(String::as_str),
        Some("returns-faq@1.0"),
        "{docs:?}"
    );

    // A new version of the same document through its own route.
    let r = s
        .post(
            "/v1/documents/returns-faq/versions",
            "key-zhang",
            upload(&[("faq-v2.md", v2.clone())]),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["documents_added"], 1);
    let (docs, _) = s.search_docs("key-u7", "zebrafish delivery returned").await;
    assert!(docs.contains(&"returns-faq@2.0".to_string()), "{docs:?}");
    assert!(
        !docs.contains(&"returns-faq@1.0".to_string()),
        "superseded text stays out of current answers: {docs:?}"
    );
    let r = s
        .get("/v1/documents/returns-faq?now=2026-11-30", "key-u7")
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let status: Vec<(String, String)> = r
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["version"].as_str().unwrap().to_string(),
                d["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        status,
        vec![
            ("1.0".into(), "deprecated".into()),
            ("2.0".into(), "active".into())
        ]
    );

    // A "new version" of another document is refused, and nothing lands.
    let other = doc("shipping-faq", "1.0", "", "Shipping takes two days.");
    let r = s
        .post(
            "/v1/documents/returns-faq/versions",
            "key-zhang",
            upload(&[("ship.md", other)]),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        s.get("/v1/documents/shipping-faq", "key-zhang")
            .await
            .status,
        404
    );

    // An admin writes only its own tenant; a bad file is reported by name and line.
    let foreign = doc("returns-faq", "3.0", "", "x").replace("tenant: shop", "tenant: acme");
    let r = s
        .post(
            "/v1/documents",
            "key-zhang",
            upload(&[("acme.md", foreign)]),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("names tenant acme"),
        "{}",
        r.body
    );
    let r = s
        .post(
            "/v1/documents",
            "key-zhang",
            upload(&[
                ("ok.md", doc("ok-doc", "1.0", "", "fine")),
                ("bad.md", "---\nid: [unclosed\n---\nx".into()),
            ]),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["documents_added"], 1);
    let problems = r.body["problems"].as_array().unwrap();
    assert!(
        problems
            .iter()
            .any(|p| p.as_str().unwrap().starts_with("bad.md:")),
        "{problems:?}"
    );
    for name in ["../x.md", ".hidden.md", "noext", "a/b.md"] {
        let r = s
            .post("/v1/documents", "key-zhang", upload(&[(name, "x".into())]))
            .await;
        assert_eq!(r.status, 400, "{name}: {}", r.body);
    }

    // Sections open the exact cited version, also a deprecated one.
    let r = s
        .get(
            "/v1/sections/returns-faq%401.0%230?now=2026-11-30",
            "key-u7",
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["version"], "1.0");
    assert_eq!(r.body["status"], "deprecated");
    assert!(r.body["chunks"].to_string().contains("14 days"));
    // Another tenant's admin: the document and its sections do not exist for it.
    let theirs = s.get("/v1/documents/returns-faq", "key-acme").await;
    let nothing = s.get("/v1/documents/no-such-doc", "key-acme").await;
    assert_eq!((theirs.status, nothing.status), (404, 404));
    assert_eq!(theirs.sans_id(), nothing.sans_id());
    let theirs = s
        .get("/v1/sections/returns-faq%401.0%230", "key-acme")
        .await;
    let nothing = s.get("/v1/sections/nope%401.0%230", "key-acme").await;
    assert_eq!((theirs.status, nothing.status), (404, 404));
    assert_eq!(theirs.sans_id(), nothing.sans_id());
    // u7 may not read the supplier notice: its section reads like nothing.
    let hidden = s
        .get(&format!("/v1/sections/{NOTICE}%401.0%230"), "key-u7")
        .await;
    let listed = s.get("/v1/documents", "key-u7").await;
    assert_eq!(hidden.sans_id(), nothing.sans_id());
    assert!(!listed.body.to_string().contains(NOTICE));
    let zhang = s.get("/v1/documents", "key-zhang").await;
    assert!(
        zhang.body.to_string().contains(NOTICE),
        "zhang is in supply-chain"
    );

    // Deletes: admin only, own tenant only, then gone.
    assert_eq!(
        s.delete("/v1/documents/returns-faq", "key-u7").await.status,
        403
    );
    let theirs = s.delete("/v1/documents/returns-faq", "key-acme").await;
    assert_eq!(theirs.status, 404);
    let r = s
        .delete("/v1/documents/returns-faq/versions/2.0", "key-zhang")
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["removed"], json!(["returns-faq@2.0"]));
    let r = s.delete("/v1/documents/returns-faq", "key-zhang").await;
    assert_eq!(r.body["removed"], json!(["returns-faq@1.0"]));
    assert_eq!(
        s.get("/v1/documents/returns-faq", "key-zhang").await.status,
        404
    );
    let (docs, _) = s.search_docs("key-u7", "zebrafish delivery returned").await;
    assert!(
        !docs.iter().any(|d| d.starts_with("returns-faq")),
        "{docs:?}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn principals_stay_within_the_admins_tenant() {
    let (_store, s) = start().await;
    assert_eq!(s.get("/v1/principals", "key-u7").await.status, 403);
    let r = s
        .put(
            "/v1/principals/u9",
            "key-zhang",
            json!({"groups": ["customer"]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body,
        json!({"id": "u9", "tenant": "shop", "groups": ["customer"]})
    );
    let r = s.get("/v1/principals", "key-zhang").await;
    let ids: Vec<&str> = r
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"u9") && ids.contains(&"u7") && !ids.contains(&"acme-admin"),
        "{ids:?}"
    );
    // Another tenant's admin cannot take over u7 (that would move u7 into acme), and
    // the refusal does not say whose the id is.
    let r = s
        .put("/v1/principals/u7", "key-acme", json!({"groups": ["sre"]}))
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(!r.body["message"].as_str().unwrap().contains("shop"));
    // Nor by uploading a principals file.
    let r = s
        .post(
            "/v1/documents",
            "key-acme",
            upload(&[(
                "principals.yaml",
                "principals:\n  - id: u7\n    tenant: acme\n    groups: [sre]\n".into(),
            )]),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let (docs, _) = s.search_docs("key-u7", "耳机 退货").await;
    assert!(
        docs.iter().any(|d| d.starts_with("headphone-policy")),
        "u7 is still a shop customer: {docs:?}"
    );
    // The body cannot name a tenant.
    let r = s
        .put(
            "/v1/principals/u10",
            "key-zhang",
            json!({"groups": [], "tenant": "acme"}),
        )
        .await;
    assert_eq!(r.status, 400);
    s.stop().await;
}

async fn wait_job(s: &Server, key: &str, id: &str) -> Value {
    let t0 = Instant::now();
    loop {
        let r = s.get(&format!("/v1/jobs/{id}"), key).await;
        assert_eq!(r.status, 200, "{}", r.body);
        if r.body["status"] == "succeeded" || r.body["status"] == "failed" {
            return r.body;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "job did not end: {}",
            r.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_after_the_answer_and_report_progress() {
    let (_store, s) = start().await;
    let files: Vec<(String, String)> = (0..40)
        .map(|i| {
            (
                format!("bulk-{i}.md"),
                doc(
                    &format!("bulk-{i}"),
                    "1.0",
                    "",
                    &format!("Bulk note number {i} about quokkas."),
                ),
            )
        })
        .collect();
    let refs: Vec<(&str, String)> = files.iter().map(|(n, c)| (n.as_str(), c.clone())).collect();
    assert_eq!(
        s.post("/v1/jobs/ingest", "key-u7", upload(&refs))
            .await
            .status,
        403
    );
    let r = s.post("/v1/jobs/ingest", "key-zhang", upload(&refs)).await;
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.body["id"].as_str().unwrap().to_string();
    assert_eq!(r.body["request_id"], r.request_id);
    // Another tenant's admin: no such job.
    let theirs = s.get(&format!("/v1/jobs/{id}"), "key-acme").await;
    let nothing = s.get("/v1/jobs/job-999", "key-acme").await;
    assert_eq!(theirs.status, 404);
    assert_eq!(theirs.sans_id(), nothing.sans_id());
    let done = wait_job(&s, "key-zhang", &id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["result"]["documents_added"], 40, "{done}");
    assert_eq!(
        done["done"], done["total"],
        "progress reached its total: {done}"
    );
    let (docs, _) = s.search_docs("key-u7", "quokkas bulk note").await;
    assert!(
        docs.iter().filter(|d| d.starts_with("bulk-")).count() >= 10,
        "{docs:?}"
    );

    // A reindex rebuilds every tenant's indexes: a tenant admin may not start one.
    let r = s.post("/v1/jobs/reindex", "key-zhang", json!(null)).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.body["code"], "operator_required");
    common::add_admin_key(&s.keys_path, "key-ops", "zhang", true);
    let r = s.post("/v1/jobs/reindex", "key-ops", json!(null)).await;
    assert_eq!(r.status, 202, "{}", r.body);
    let done = wait_job(&s, "key-zhang", r.body["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["result"]["status"], "active", "{done}");
    let list = s.get("/v1/jobs", "key-zhang").await;
    assert_eq!(list.body.as_array().unwrap().len(), 2);
    assert_eq!(s.get("/v1/jobs", "key-acme").await.body, json!([]));
    // The rebuilt index answers as before.
    let (docs, _) = s.search_docs("key-u7", "quokkas bulk note").await;
    assert!(
        docs.iter().filter(|d| d.starts_with("bulk-")).count() >= 10,
        "{docs:?}"
    );
    s.stop().await;
}

const AUTH: &str = "API 认证方式 双向 TLS OAuth";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_review_queue_over_http() {
    let (_store, s) = start().await;
    assert_eq!(s.get("/v1/review", "key-u7").await.status, 403);
    let r = s.get("/v1/review", "key-zhang").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let items = r.body.as_array().unwrap();
    assert!(items.iter().all(|i| i["tenant"] == "shop"));
    let sup = items
        .iter()
        .find(|i| i["subject"].to_string().contains("api-auth-mtls-draft"))
        .unwrap_or_else(|| panic!("{}", r.body));
    let id = sup["id"].as_str().unwrap().to_string();
    assert!(
        sup["evidence"].to_string().contains("OAuth"),
        "shown with its source text: {sup}"
    );
    // The other tenant's admin: the candidate does not exist, and cannot be decided.
    let theirs = s.get(&format!("/v1/review/{id}"), "key-acme").await;
    let nothing = s.get("/v1/review/sup-0000", "key-acme").await;
    assert_eq!((theirs.status, nothing.status), (404, 404));
    assert_eq!(theirs.sans_id(), nothing.sans_id());
    assert_eq!(
        s.post(&format!("/v1/review/{id}/approve"), "key-acme", json!({}))
            .await
            .status,
        404
    );
    assert_eq!(
        s.post(&format!("/v1/review/{id}/approve"), "key-u7", json!({}))
            .await
            .status,
        403
    );
    // The reviewer is the key's principal; a body cannot name one.
    let r = s
        .post(
            &format!("/v1/review/{id}/approve"),
            "key-zhang",
            json!({"by": "alice"}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);

    let before = s
        .post(
            "/v1/search",
            "key-u7",
            json!({"query": AUTH, "mode": "bm25", "k": 20, "now": "2026-11-30"}),
        )
        .await;
    assert!(
        !before.body["conflicts"].as_array().unwrap().is_empty(),
        "{}",
        before.body
    );
    let r = s
        .post(
            &format!("/v1/review/{id}/approve"),
            "key-zhang",
            json!({"note": "release note R-9"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["by"], "zhang");
    assert_eq!(r.body["note"], "release note R-9");
    let (docs, after) = s.search_docs("key-u7", AUTH).await;
    assert!(after["conflicts"].as_array().unwrap().is_empty(), "{after}");
    assert!(!docs.contains(&"api-auth@2.0".to_string()), "{docs:?}");
    let r = s.get(&format!("/v1/review/{id}"), "key-zhang").await;
    assert_eq!(r.body["status"], "approved");
    assert!(!s
        .get("/v1/review", "key-zhang")
        .await
        .body
        .to_string()
        .contains(&id));
    assert!(s
        .get("/v1/review?status=all", "key-zhang")
        .await
        .body
        .to_string()
        .contains(&id));
    assert_eq!(
        s.get("/v1/review?status=maybe", "key-zhang").await.status,
        400
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_are_read_back_by_their_request_id_only_by_the_asker() {
    let (_store, s) = start().await;
    let r = s
        .post(
            "/v1/ask",
            "key-u7",
            json!({"question": "订单 A123 的退货政策是什么？", "now": "2026-11-30"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let t = s
        .get(&format!("/v1/traces/{}", r.request_id), "key-u7")
        .await;
    assert_eq!(t.status, 200, "{}", t.body);
    assert_eq!(t.body["request_id"], r.request_id);
    assert_eq!(t.body["route"], "/v1/ask");
    assert_eq!(t.body["trace"], r.body["trace"]);
    assert_eq!(t.body["status"], r.body["status"]);
    assert!(!t.body["trace"]["steps"].as_array().unwrap().is_empty());
    let theirs = s
        .get(&format!("/v1/traces/{}", r.request_id), "key-u8")
        .await;
    let nothing = s.get("/v1/traces/no-such-request", "key-u8").await;
    assert_eq!((theirs.status, nothing.status), (404, 404));
    assert_eq!(theirs.sans_id(), nothing.sans_id());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_refuses_new_writes_and_waits_for_running_jobs() {
    let (_store, s) = start().await;
    let files: Vec<(String, String)> = (0..300)
        .map(|i| {
            (
                format!("late-{i}.md"),
                doc(
                    &format!("late-{i}"),
                    "1.0",
                    "",
                    &format!("Late note {i} on wombats."),
                ),
            )
        })
        .collect();
    let refs: Vec<(&str, String)> = files.iter().map(|(n, c)| (n.as_str(), c.clone())).collect();
    let r = s.post("/v1/jobs/ingest", "key-zhang", upload(&refs)).await;
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.body["id"].as_str().unwrap().to_string();
    let state = s.state.clone();
    // Shutdown while the job runs: serve returns only after the job has ended.
    s.stop().await;
    assert_eq!(state.jobs.running(), 0);
    let job = state.jobs.get(None, "shop", &id).unwrap();
    assert_eq!(job.status, "succeeded", "{job:?}");
    // The engine blocks: read it off the async runtime, as the server does.
    let engine = state.engine.clone();
    let landed = tokio::task::spawn_blocking(move || {
        let scope = engine
            .scope(
                "zhang",
                chrono::NaiveDate::from_ymd_opt(2026, 11, 30).unwrap(),
            )
            .unwrap();
        engine
            .documents_visible(&scope, None)
            .unwrap()
            .iter()
            .filter(|d| d.doc_id.starts_with("late-"))
            .count()
    })
    .await
    .unwrap();
    assert_eq!(landed, 300);

    // Once stopping, writes are refused with 503 and a Retry-After.
    let (_store, s) = start().await;
    s.state
        .stopping
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let resp = s
        .client
        .post(format!("{}/v1/documents", s.base))
        .bearer_auth("key-zhang")
        .json(&upload(&[("x.md", doc("x", "1.0", "", "x"))]))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 503);
    assert!(resp.headers().get("retry-after").is_some());
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["code"], "shutting_down");
    // Reads still answer while in-flight work drains.
    assert_eq!(s.get("/v1/documents", "key-u7").await.status, 200);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_model_gets_only_what_the_caller_may_read() {
    // A model that fails every call: the agent must degrade honestly, and every request
    // it made is recorded, so we can see what text reached the model.
    let model = Arc::new(dossier_llm::ScriptedChat::new([]).named("scripted"));
    let (_store, engine) = fresh_engine();
    let s = Server::start_with(engine, &KEYS, ServerConfig::default(), Some(model.clone())).await;

    let r = s
        .post("/v1/ask", "key-u7", json!({"question": "供应商 S-8 的电池问题影响哪些批次？E-1 事件怎么处理？", "now": "2026-11-30"}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!r.body.to_string().contains(NOTICE), "{}", r.body);
    let requests = model.requests();
    assert!(!requests.is_empty(), "the configured model was consulted");
    let sent = format!("{requests:?}");
    assert!(
        !sent.contains(NOTICE) && !sent.contains("深圳八号电池"),
        "the notice's text reached the model for u7"
    );
    assert!(
        !r.body["trace"]["degraded"].as_array().unwrap().is_empty(),
        "a failing model is a recorded degradation: {}",
        r.body["trace"]
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graph_paths_follow_only_visible_edges() {
    let (_store, s) = start().await;
    let r = s
        .get(
            "/v1/graph/path?from=P-204&to=E-1&now=2026-11-30",
            "key-zhang",
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["found"], true, "{}", r.body);
    let edges = r.body["edges"].as_array().unwrap();
    assert!(
        !edges.is_empty()
            && edges
                .iter()
                .all(|e| !e["provenance"].as_array().unwrap().is_empty()),
        "{}",
        r.body
    );
    // For u7, E-1 (known only from the notice) is not an entity at all.
    let hidden = s
        .get("/v1/graph/path?from=P-204&to=E-1&now=2026-11-30", "key-u7")
        .await;
    let unknown = s
        .get(
            "/v1/graph/path?from=P-204&to=E-404&now=2026-11-30",
            "key-u7",
        )
        .await;
    assert_eq!((hidden.status, unknown.status), (404, 404));
    assert_eq!(hidden.sans_id(), unknown.sans_id());
    assert_eq!(
        s.get("/v1/graph/path?from=P-204&to=E-1&max_hops=9", "key-zhang")
            .await
            .status,
        400
    );
    assert_eq!(
        s.get("/v1/graph/path?from=P-204", "key-zhang").await.status,
        400
    );
    s.stop().await;
}

/// Defect: `PUT /v1/principals/{id}` could grant any group to anyone, the caller
/// included, and create a principal id that a key already names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_cannot_widen_itself_or_take_a_keys_principal() {
    let (_store, s) = start().await;
    // Its own principal: refused, whatever the groups.
    let r = s
        .put(
            "/v1/principals/zhang",
            "key-zhang",
            json!({"groups": ["support", "finance"]}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        r.body["message"],
        "an admin cannot change their own principal"
    );
    // A principal the store does not hold but a key names: creating it would hand that
    // key the groups chosen here.
    common::add_admin_key(&s.keys_path, "key-later", "newcomer", false);
    let r = s
        .put(
            "/v1/principals/newcomer",
            "key-zhang",
            json!({"groups": ["support"]}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["message"], "this principal id cannot be used");
    // The same refusal as for another tenant's principal: nothing says which it was.
    let other = s
        .put(
            "/v1/principals/acme-admin",
            "key-zhang",
            json!({"groups": []}),
        )
        .await;
    assert_eq!(other.sans_id(), r.sans_id());
    // Managing another principal of the tenant is what an admin is for.
    let r = s
        .put(
            "/v1/principals/u8",
            "key-zhang",
            json!({"groups": ["customer", "vip"]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    s.stop().await;
}

/// Defect: review candidates built from restricted text were shown to every admin of
/// the tenant. A look-alike pair whose newer side only `finance` may read: zhang
/// (support, supply-chain) does not see the candidate at all, an admin in `finance`
/// does, and the id reads like an unknown one to zhang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_shows_an_admin_only_candidates_built_from_text_they_may_read() {
    let (_store, s) = start().await;
    let doc = |id: &str, title: &str, acl: &str| {
        format!(
            "---\nid: {id}\nversion: \"1\"\ntitle: {title}\ntenant: shop\nkb: finance\n{acl}effective_from: 2026-03-01\n---\n# {title}\n\nSettlement runs nightly at 02:00.\n"
        )
    };
    let r = s
        .post(
            "/v1/documents",
            "key-zhang",
            upload(&[
                ("settle-a.md", doc("settle-a", "Settlement window", "")),
                (
                    "settle-b.md",
                    doc(
                        "settle-b",
                        "Settlement window (revised)",
                        "acl: [finance]\n",
                    ),
                ),
            ]),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // An admin who may read both sides: u8 becomes one, with finance.
    let r = s
        .put(
            "/v1/principals/u8",
            "key-zhang",
            json!({"groups": ["finance"]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    common::add_admin_key(&s.keys_path, "key-fin", "u8", false);
    let names_pair = |body: &Value| {
        body.as_array()
            .unwrap()
            .iter()
            .filter(|i| i["subject"].to_string().contains("settle-b"))
            .map(|i| i["id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let fin = s.get("/v1/review", "key-fin").await;
    assert_eq!(fin.status, 200, "{}", fin.body);
    let ids = names_pair(&fin.body);
    assert_eq!(ids.len(), 1, "{}", fin.body);
    let zhang = s.get("/v1/review", "key-zhang").await;
    assert!(names_pair(&zhang.body).is_empty(), "{}", zhang.body);
    assert!(!zhang.text.contains("settle-b"), "{}", zhang.text);
    let hidden = s.get(&format!("/v1/review/{}", ids[0]), "key-zhang").await;
    let unknown = s.get("/v1/review/sup-000000000000", "key-zhang").await;
    assert_eq!(hidden.status, 404);
    assert_eq!(hidden.sans_id(), unknown.sans_id());
    let approve = s
        .post(
            &format!("/v1/review/{}/approve", ids[0]),
            "key-zhang",
            json!({}),
        )
        .await;
    assert_eq!(approve.status, 404, "{}", approve.body);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdf_uploads_as_base64_with_its_metadata_and_its_sections_name_the_page() {
    use base64::Engine as _;
    let (_store, s) = start().await;
    let pdf = dossier_ingest::pdf::simple_pdf(&[
        vec![
            (22, "Courier Policy"),
            (11, "Parcels are collected on weekdays."),
        ],
        vec![
            (16, "Clause 2 Lost parcels"),
            (
                11,
                "A lost quokka parcel is refunded after ten working days.",
            ),
        ],
    ]);
    let b64 = base64::engine::general_purpose::STANDARD.encode(&pdf);
    let file = |meta: Value| json!({"files": [{"name": "courier.pdf", "content": b64, "encoding": "base64", "meta": meta}]});
    let meta =
        json!({"id": "courier-policy", "version": "2", "tenant": "shop", "acl": ["support"]});
    let r = s
        .post("/v1/documents", "key-zhang", file(meta.clone()))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["documents_added"], 1, "{}", r.body);

    // zhang is in support; u7 is not, so the acl from the metadata hides it from u7.
    let (docs, body) = s
        .search_docs("key-zhang", "lost quokka parcel refunded")
        .await;
    assert_eq!(
        docs.first().map(String::as_str),
        Some("courier-policy@2"),
        "{body}"
    );
    let hit = &body["hits"][0];
    assert_eq!(hit["section"], "p. 2 › Clause 2 Lost parcels", "{hit}");
    let (docs, _) = s.search_docs("key-u7", "lost quokka parcel refunded").await;
    assert!(
        !docs.iter().any(|d| d.starts_with("courier-policy")),
        "{docs:?}"
    );

    let chunk = hit["chunk_id"]
        .as_str()
        .unwrap()
        .replace('@', "%40")
        .replace('#', "%23");
    let r = s.get(&format!("/v1/sections/{chunk}"), "key-zhang").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["page"], 2, "{}", r.body);
    assert_eq!(r.body["section_path"][0], "p. 2", "{}", r.body);

    // Bad base64, a sidecar without its file, a meta beside an uploaded sidecar: 400,
    // and nothing lands.
    let bad = json!({"files": [{"name": "x.pdf", "content": "%%%", "encoding": "base64"}]});
    let r = s.post("/v1/documents", "key-zhang", bad).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body["message"].as_str().unwrap().contains("not base64"),
        "{}",
        r.body
    );
    let orphan = json!({"files": [{"name": "y.pdf.meta.yaml", "content": "id: y"}]});
    let r = s.post("/v1/documents", "key-zhang", orphan).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let twice = json!({"files": [
        {"name": "courier.pdf", "content": b64, "encoding": "base64", "meta": meta},
        {"name": "courier.pdf.meta.yaml", "content": "id: other"}]});
    let r = s.post("/v1/documents", "key-zhang", twice).await;
    assert_eq!(r.status, 400, "{}", r.body);
    // A scan (no text layer) is refused by name, with the reason.
    let scan = base64::engine::general_purpose::STANDARD
        .encode(dossier_ingest::pdf::simple_pdf(&[vec![]]));
    let r = s
        .post(
            "/v1/documents",
            "key-zhang",
            json!({"files": [{"name": "scan.pdf", "content": scan, "encoding": "base64"}]}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("scan.pdf: no text layer"),
        "{}",
        r.body
    );
}

/// Issue 39: `POST /v1/documents` (and `POST /v1/jobs/ingest`) with a `principals.yaml`
/// rewrote the uploading admin's own principal — `PUT` refuses that — and created a
/// principal whose id a key already names. Both go through the one principal rule now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_cannot_widen_itself_through_an_upload_or_a_job() {
    let (store, engine) = fresh_engine();
    // `ghost` has a key but no principal yet.
    let keys: [Key; 3] = [
        ("key-zhang", "zhang", true),
        ("key-u7", "u7", false),
        ("key-ghost", "ghost", false),
    ];
    let s = Server::start(engine, &keys).await;
    let sre_doc = "risk-alerts-2026-11";
    let widen =
        "principals:\n  - id: zhang\n    tenant: shop\n    groups: [sre, support, supply-chain]\n";
    let ghost = "principals:\n  - id: ghost\n    tenant: shop\n    groups: [sre]\n";
    let groups_of = |body: &Value, id: &str| -> Option<Value> {
        body.as_array()?
            .iter()
            .find(|p| p["id"] == id)
            .map(|p| p["groups"].clone())
    };
    let before = s.get("/v1/principals", "key-zhang").await;
    assert_eq!(before.status, 200, "{}", before.body);
    for file in [widen, ghost] {
        let r = s
            .post(
                "/v1/documents",
                "key-zhang",
                upload(&[("principals.yaml", file.into())]),
            )
            .await;
        assert_eq!(r.status, 400, "{}", r.body);
        let job = s
            .post(
                "/v1/jobs/ingest",
                "key-zhang",
                upload(&[("principals.yaml", file.into())]),
            )
            .await;
        assert_eq!(job.status, 202, "{}", job.body);
        let done = wait_job(&s, "key-zhang", job.body["id"].as_str().unwrap()).await;
        assert_eq!(done["result"]["principals"], 0, "{done}");
        let problems = done["result"]["problems"].to_string();
        assert!(problems.contains("principal"), "{done}");
        assert!(
            !problems.contains(&*store.path().to_string_lossy()),
            "{done}"
        );
    }
    let after = s.get("/v1/principals", "key-zhang").await;
    assert_eq!(
        groups_of(&after.body, "zhang"),
        groups_of(&before.body, "zhang")
    );
    assert_eq!(groups_of(&after.body, "ghost"), None, "{}", after.body);
    // Whole responses: the admin's searches still miss the sre document.
    for key in ["key-zhang", "key-ghost"] {
        let r = s
            .post(
                "/v1/search",
                key,
                json!({"query": "风控异常周报 C-1002 RA-77", "mode": "bm25", "k": 20}),
            )
            .await;
        assert!(!r.body.to_string().contains(sre_doc), "{key}: {}", r.body);
    }
    // What an admin may still do: another principal of its tenant, by upload.
    let r = s
        .post(
            "/v1/documents",
            "key-zhang",
            upload(&[(
                "principals.yaml",
                "principals:\n  - id: new-hire\n    tenant: shop\n    groups: [customer]\n".into(),
            )]),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["principals"], 1, "{}", r.body);
    s.stop().await;
}

/// Issue 39: an uploaded document's `source_uri` showed readers the server's path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uploaded_document_is_cited_without_the_servers_path() {
    let (store, s) = start().await;
    let v1 = doc(
        "returns-faq",
        "1.0",
        "",
        "Parcels may be returned within 14 days of the okapi delivery.",
    );
    let r = s
        .post("/v1/documents", "key-zhang", upload(&[("returns.md", v1)]))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let (docs, body) = s.search_docs("key-u7", "okapi delivery returned").await;
    assert!(docs.iter().any(|d| d == "returns-faq@1.0"), "{docs:?}");
    let text = body.to_string();
    assert!(text.contains("upload://shop/"), "{text}");
    assert!(!text.contains("file://"), "{text}");
    assert!(!text.contains(&*store.path().to_string_lossy()), "{text}");
    s.stop().await;
}
