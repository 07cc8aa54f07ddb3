//! Write and administration routes against a real server on loopback: documents
//! (upload, new version, sections, delete), principals, jobs, the review queue,
//! traces, and shutdown. Every test that writes has its own store.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dossier_engine::Engine;
use dossier_server::{hash_key, AppState, KeyStore};
use serde_json::{json, Value};
use tempfile::TempDir;

/// (key, principal, admin)
const KEYS: [(&str, &str, bool); 5] = [
    ("key-u7", "u7", false),
    ("key-u8", "u8", false),
    ("key-zhang", "zhang", true),
    ("key-oncall", "oncall", false),
    ("key-acme", "acme-admin", true),
];
const NOTICE: &str = "supplier-notice-S-8";

fn scenarios() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/scenarios")
}

struct Server {
    base: String,
    client: reqwest::Client,
    state: AppState,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    _dir: TempDir,
}

struct Reply {
    status: u16,
    request_id: String,
    body: Value,
}

impl Reply {
    /// The body without its request id: what two answers must share to read the same.
    fn sans_id(&self) -> Value {
        let mut b = self.body.clone();
        if let Some(o) = b.as_object_mut() {
            o.remove("request_id");
        }
        b
    }
}

impl Server {
    /// A fresh store with the scenario corpus (hash embedder) and a server on it.
    async fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::with_embedder(
            &dir.path().join("store"),
            "hash:64",
            Box::new(dossier_embed::HashEmbedder::new(64)),
        )
        .unwrap();
        let report = engine
            .ingest(
                &[scenarios().join("shop"), scenarios().join("acme")],
                &mut (),
            )
            .unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        let keys_path = dir.path().join("keys.yaml");
        let mut text = String::new();
        for (key, principal, admin) in KEYS {
            text.push_str(&format!(
                "- {{key_sha256: {}, principal: {principal}, admin: {admin}}}\n",
                hash_key(key)
            ));
        }
        std::fs::write(&keys_path, text).unwrap();
        let state = AppState::new(
            Arc::new(engine),
            Arc::new(KeyStore::load(&keys_path).unwrap()),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(dossier_server::serve_on(
            listener,
            state.clone(),
            async move {
                let _ = rx.await;
            },
        ));
        Server {
            base,
            client: reqwest::Client::new(),
            state,
            stop: Some(tx),
            handle: Some(handle),
            _dir: dir,
        }
    }

    async fn send(&self, req: reqwest::RequestBuilder, key: &str) -> Reply {
        let resp = req.bearer_auth(key).send().await.unwrap();
        let status = resp.status().as_u16();
        let request_id = resp
            .headers()
            .get("x-request-id")
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let text = resp.text().await.unwrap();
        Reply {
            status,
            request_id,
            body: serde_json::from_str(&text).unwrap_or(Value::Null),
        }
    }

    async fn get(&self, path: &str, key: &str) -> Reply {
        self.send(self.client.get(format!("{}{path}", self.base)), key)
            .await
    }

    async fn post(&self, path: &str, key: &str, body: Value) -> Reply {
        self.send(
            self.client.post(format!("{}{path}", self.base)).json(&body),
            key,
        )
        .await
    }

    async fn put(&self, path: &str, key: &str, body: Value) -> Reply {
        self.send(
            self.client.put(format!("{}{path}", self.base)).json(&body),
            key,
        )
        .await
    }

    async fn delete(&self, path: &str, key: &str) -> Reply {
        self.send(self.client.delete(format!("{}{path}", self.base)), key)
            .await
    }

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

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.handle.take().unwrap().await.unwrap().unwrap();
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
    let s = Server::start().await;
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
    let s = Server::start().await;
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
    let s = Server::start().await;
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

    let r = s.post("/v1/jobs/reindex", "key-zhang", json!(null)).await;
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
    let s = Server::start().await;
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
    let s = Server::start().await;
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
    let s = Server::start().await;
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
    let job = state.jobs.get("shop", &id).unwrap();
    assert_eq!(job.status, "succeeded", "{job:?}");
    let scope = dossier_core::Scope::new(
        &state.engine.principal("zhang").unwrap(),
        chrono::NaiveDate::from_ymd_opt(2026, 11, 30).unwrap(),
    );
    let landed = state
        .engine
        .documents_visible(&scope, None)
        .unwrap()
        .iter()
        .filter(|d| d.doc_id.starts_with("late-"))
        .count();
    assert_eq!(landed, 300);

    // Once stopping, writes are refused with 503 and a Retry-After.
    let s = Server::start().await;
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
    let mut s = Server::start().await;
    // Rebuild the server with the model (same store).
    let _ = s.stop.take().unwrap().send(());
    s.handle.take().unwrap().await.unwrap().unwrap();
    let state = s.state.clone().with_model(model.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    s.base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    s.handle = Some(tokio::spawn(dossier_server::serve_on(
        listener,
        state,
        async move {
            let _ = rx.await;
        },
    )));
    s.stop = Some(tx);

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
    let s = Server::start().await;
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
