//! The HTTP API against a real server on a loopback port, over the shared scenario
//! corpus (shop + acme) ingested with the hash embedder.

mod common;

use std::collections::BTreeSet;

use common::{scenarios, shared_engine, write_keys, Key, Reply, Server};
use dossier_engine::SearchRequest;
use dossier_server::hash_key;
use serde_json::{json, Value};

const MODES: [&str; 7] = [
    "bm25", "vector", "hybrid", "local", "graph", "global", "drift",
];
const NOTICE: &str = "supplier-notice-S-8";
const E1_QUESTION: &str = "哪些产品受到供应商事件 E-1 影响？";

/// (key, principal, admin) of every test server.
const KEYS: [Key; 5] = [
    ("key-u7", "u7", false),
    ("key-u8", "u8", false),
    ("key-zhang", "zhang", false),
    ("key-acme", "acme-admin", false),
    ("key-ghost", "ghost", false),
];

/// Document ids of the shop tenant, read from the front matter of its files.
fn shop_doc_ids() -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for entry in std::fs::read_dir(scenarios().join("shop/docs")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        if let Some(id) = text.lines().find_map(|l| l.strip_prefix("id:")) {
            ids.insert(id.trim().to_string());
        }
    }
    assert!(ids.contains(NOTICE));
    ids
}

/// An error body: the four fields, and the request id of the header.
fn assert_error(r: &Reply, status: u16, code: &str) {
    assert_eq!(r.status, status, "{}", r.text);
    assert_eq!(r.body["code"], code, "{}", r.text);
    assert!(r.body["message"].is_string(), "{}", r.text);
    assert!(r.body["type"].is_string(), "{}", r.text);
    assert_eq!(r.body["request_id"], r.request_id.as_str(), "{}", r.text);
}

fn search_body(query: &str, mode: &str) -> Value {
    json!({"query": query, "mode": mode, "k": 10, "now": "2026-11-30"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_is_required_and_identity_comes_only_from_it() {
    let s = Server::start(shared_engine(), &KEYS).await;
    let body = search_body("耳机退货", "hybrid");

    let none = s.post("/v1/search", None, body.clone()).await;
    assert_error(&none, 401, "unauthorized");
    assert_eq!(none.body["type"], "authentication_error");
    let bad = s.post("/v1/search", Some("not-a-key"), body.clone()).await;
    assert_error(&bad, 401, "unauthorized");
    assert_ne!(none.request_id, bad.request_id);
    let basic = s
        .send(
            s.client
                .post(format!("{}/v1/search", s.base))
                .header("authorization", "Basic a2V5LXU3")
                .json(&body),
            None,
        )
        .await;
    assert_error(&basic, 401, "unauthorized");
    // The key's hash, presented as the key, is not the key.
    let hashed = s
        .post(
            "/v1/search",
            Some(hash_key("key-u7").as_str()),
            body.clone(),
        )
        .await;
    assert_error(&hashed, 401, "unauthorized");
    assert_error(
        &s.get("/v1/graph/entity/S-8", None).await,
        401,
        "unauthorized",
    );
    assert_error(
        &s.post("/v1/ask", Some("nope"), json!({"question": E1_QUESTION}))
            .await,
        401,
        "unauthorized",
    );

    // A body cannot name a principal, and no other header can either.
    let mut named = body.clone();
    named["principal"] = json!("zhang");
    assert_error(
        &s.post("/v1/search", Some("key-u7"), named).await,
        400,
        "invalid_body",
    );
    let headered = s
        .send(
            s.client
                .post(format!("{}/v1/search", s.base))
                .header("x-principal", "zhang")
                .header("x-dossier-principal", "zhang")
                .json(&search_body("供应商 S-8 电池", "hybrid")),
            Some("key-u7"),
        )
        .await;
    assert_eq!(headered.status, 200);
    assert!(!headered.text.contains(NOTICE), "{}", headered.text);

    // A key bound to a principal the store does not know.
    assert_error(
        &s.post("/v1/search", Some("key-ghost"), body.clone()).await,
        403,
        "unknown_principal",
    );
    // Bad input maps to 400 with the same body shape.
    assert_error(
        &s.post("/v1/search", Some("key-u7"), search_body("x", "sideways"))
            .await,
        400,
        "invalid_request",
    );
    assert_error(
        &s.post("/v1/search", Some("key-u7"), json!({"query": "x", "k": 0}))
            .await,
        400,
        "invalid_request",
    );
    assert_error(&s.get("/v1/nothing-here", None).await, 404, "no_route");
    assert_error(
        &s.get("/v1/search", Some("key-u7")).await,
        405,
        "method_not_allowed",
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_request_ids() {
    let s = Server::start(shared_engine(), &KEYS).await;
    let a = s.get("/healthz", None).await;
    let b = s.get("/healthz", None).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body["status"], "ok");
    assert_ne!(a.request_id, b.request_id);
    let r = s.get("/readyz", None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["status"], "ready");
    assert!(r.body["catalog_generation"].is_u64());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_is_the_engines_answer_for_the_keys_principal() {
    let s = Server::start(shared_engine(), &KEYS).await;
    let r = s
        .post(
            "/v1/search",
            Some("key-u7"),
            json!({"query": "耳机无理由退货的签收期限和拆封条件", "mode": "hybrid", "k": 3, "now": "2026-09-20"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let got = r.body;
    let engine = shared_engine();
    let want = tokio::task::spawn_blocking(move || {
        engine
            .search(&SearchRequest {
                principal: "u7".into(),
                query: "耳机无理由退货的签收期限和拆封条件".into(),
                mode: "hybrid".parse().unwrap(),
                k: 3,
                now: "2026-09-20".parse().unwrap(),
                as_of: None,
                kbs: vec![],
            })
            .unwrap()
    })
    .await
    .unwrap();
    assert!(!want.hits.is_empty());
    assert_eq!(got, serde_json::to_value(&want).unwrap());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn u7_never_sees_the_supplier_notice() {
    let s = Server::start(shared_engine(), &KEYS).await;
    let query = "供应商 S-8 电池鼓包事件 E-1 影响哪些产品";
    // The notice is there: zhang (supply-chain) finds it.
    let z = s
        .post(
            "/v1/search",
            Some("key-zhang"),
            search_body(query, "hybrid"),
        )
        .await;
    assert_eq!(z.status, 200, "{}", z.text);
    assert!(z.text.contains(NOTICE), "{}", z.text);

    for mode in MODES {
        let r = s
            .post("/v1/search", Some("key-u7"), search_body(query, mode))
            .await;
        assert_eq!(r.status, 200, "{mode}: {}", r.text);
        for leak in [NOTICE, "深圳八号", "鼓包"] {
            assert!(!r.text.contains(leak), "{mode} leaks {leak}: {}", r.text);
        }
    }

    let ask = s
        .post(
            "/v1/ask",
            Some("key-u7"),
            json!({"question": E1_QUESTION, "now": "2026-11-30"}),
        )
        .await;
    assert_eq!(ask.status, 200, "{}", ask.text);
    assert_eq!(ask.body["status"], "insufficient_evidence", "{}", ask.text);
    for leak in [NOTICE, "深圳八号", "鼓包"] {
        assert!(!ask.text.contains(leak), "ask leaks {leak}: {}", ask.text);
    }

    // E-1 is known only from the notice: for u7 it reads exactly like a name that
    // does not exist (only the request id differs).
    let seen = s
        .get("/v1/graph/entity/E-1?now=2026-11-30", Some("key-zhang"))
        .await;
    assert_eq!(seen.status, 200, "{}", seen.text);
    let hidden = s
        .get("/v1/graph/entity/E-1?now=2026-11-30", Some("key-u7"))
        .await;
    let unknown = s
        .get(
            "/v1/graph/entity/E-404-nowhere?now=2026-11-30",
            Some("key-u7"),
        )
        .await;
    assert_error(&hidden, 404, "not_found");
    assert_error(&unknown, 404, "not_found");
    let strip = |mut v: Value| {
        v.as_object_mut().unwrap().remove("request_id");
        v
    };
    assert_eq!(strip(hidden.body.clone()), strip(unknown.body.clone()));
    assert!(!hidden.text.contains("E-1"));

    // Every other route that can show text or structure: neighbourhoods, the evidence
    // subgraph of the notice's own chunks, the notice's section, the document list, and
    // the trace of u7's ask.
    let leaks = |r: &Reply| {
        [NOTICE, "深圳八号", "鼓包", "E-1"]
            .into_iter()
            .find(|l| r.text.contains(l))
    };
    let hidden = s
        .get(
            "/v1/graph/neighbors/S-8?hops=2&now=2026-11-30",
            Some("key-u7"),
        )
        .await;
    assert!(
        hidden.status == 404 || leaks(&hidden).is_none(),
        "{}",
        hidden.text
    );
    let z = s
        .post("/v1/graph/evidence", Some("key-zhang"), json!({"cites": [format!("{NOTICE}@v1#0"), format!("{NOTICE}@v1#1")], "now": "2026-11-30"}))
        .await;
    assert!(
        z.text.contains("E-1"),
        "zhang sees the notice's relations: {}",
        z.text
    );
    let hidden = s
        .post("/v1/graph/evidence", Some("key-u7"), json!({"cites": [format!("{NOTICE}@v1#0"), format!("{NOTICE}@v1#1")], "now": "2026-11-30"}))
        .await;
    assert_eq!(hidden.status, 200, "{}", hidden.text);
    assert_eq!(hidden.body, json!({"nodes": [], "edges": []}));
    let hidden = s
        .get(&format!("/v1/sections/{NOTICE}%40v1%230"), Some("key-u7"))
        .await;
    let unknown = s.get("/v1/sections/nothing%40v1%230", Some("key-u7")).await;
    assert_error(&hidden, 404, "not_found");
    assert_eq!(strip(hidden.body.clone()), strip(unknown.body.clone()));
    let docs = s.get("/v1/documents", Some("key-u7")).await;
    assert_eq!(docs.status, 200);
    assert!(leaks(&docs).is_none(), "{}", docs.text);
    let trace = s
        .get(&format!("/v1/traces/{}", ask.request_id), Some("key-u7"))
        .await;
    assert_eq!(trace.status, 200, "{}", trace.text);
    // (u7's own question names E-1; the notice's words must not appear.)
    for leak in [NOTICE, "深圳八号", "鼓包"] {
        assert!(
            !trace.text.contains(leak),
            "the trace leaks {leak}: {}",
            trace.text
        );
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_admin_never_gets_a_shop_document() {
    let s = Server::start(shared_engine(), &KEYS).await;
    let shop = shop_doc_ids();
    let control = s
        .post(
            "/v1/search",
            Some("key-acme"),
            search_body("payment gateway 支付网关", "hybrid"),
        )
        .await;
    assert_eq!(control.status, 200, "{}", control.text);
    assert!(
        !control.body["hits"].as_array().unwrap().is_empty(),
        "{}",
        control.text
    );
    for query in [
        "耳机 无理由退货 签收",
        "供应商 S-8 电池鼓包事件 E-1",
        "API 认证方式",
        "payment gateway",
    ] {
        for mode in MODES {
            let r = s
                .post("/v1/search", Some("key-acme"), search_body(query, mode))
                .await;
            assert_eq!(r.status, 200, "{mode}: {}", r.text);
            for hit in r.body["hits"].as_array().unwrap() {
                let doc = hit["doc_id"].as_str().unwrap();
                assert!(!shop.contains(doc), "{mode} {query}: shop doc {doc}");
            }
            for id in &shop {
                assert!(
                    !r.text.contains(id.as_str()),
                    "{mode} {query}: mentions {id}"
                );
            }
        }
    }
    let ask = s
        .post(
            "/v1/ask",
            Some("key-acme"),
            json!({"question": E1_QUESTION, "now": "2026-11-30"}),
        )
        .await;
    assert_eq!(ask.status, 200, "{}", ask.text);
    for id in &shop {
        assert!(
            !ask.text.contains(id.as_str()),
            "ask mentions {id}: {}",
            ask.text
        );
    }
    assert_error(
        &s.get("/v1/graph/entity/S-8?now=2026-11-30", Some("key-acme"))
            .await,
        404,
        "not_found",
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_yours_and_does_not_exist_answer_alike() {
    let s = Server::start(shared_engine(), &KEYS).await;
    let ask = |order: &str| json!({"question": format!("订单 {order} 的耳机已拆封，签收 10 天后有杂音，能退吗？"), "now": "2026-09-20"});
    let a = s.post("/v1/ask", Some("key-u8"), ask("A123")).await;
    let z = s.post("/v1/ask", Some("key-u8"), ask("Z999")).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.status, z.status);
    assert_eq!(a.body["status"], "unavailable", "{}", a.text);
    assert_eq!(a.body["status"], z.body["status"]);
    assert_eq!(a.body["answer"], z.body["answer"]);
    assert!(
        a.body["citations"].as_array().unwrap().is_empty(),
        "{}",
        a.text
    );
    // The owner gets an answer.
    let owner = s.post("/v1/ask", Some("key-u7"), ask("A123")).await;
    assert_eq!(owner.status, 200, "{}", owner.text);
    assert_ne!(owner.body["answer"], a.body["answer"]);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_rotate_without_a_restart() {
    let s = Server::start(shared_engine(), &KEYS).await;
    let body = search_body("耳机退货", "bm25");
    assert_eq!(
        s.post("/v1/search", Some("key-u7"), body.clone())
            .await
            .status,
        200
    );
    assert_error(
        &s.post("/v1/search", Some("key-u7-next"), body.clone())
            .await,
        401,
        "unauthorized",
    );
    write_keys(&s.keys_path, &[("key-u7-next", "u7", false)]);
    assert_error(
        &s.post("/v1/search", Some("key-u7"), body.clone()).await,
        401,
        "unauthorized",
    );
    assert_eq!(
        s.post("/v1/search", Some("key-u7-next"), body.clone())
            .await
            .status,
        200
    );
    // A broken file leaves the keys in force as they were.
    std::fs::write(&s.keys_path, "- {key_sha256: nothex, principal: u7}\n").unwrap();
    assert_eq!(
        s.post("/v1/search", Some("key-u7-next"), body.clone())
            .await
            .status,
        200
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_lists_the_routes() {
    let s = Server::start(shared_engine(), &KEYS).await;
    let r = s.get("/openapi.json", None).await;
    assert_eq!(r.status, 200);
    assert!(r.body["openapi"].as_str().unwrap().starts_with("3."));
    let paths = r.body["paths"].as_object().unwrap();
    for p in [
        "/healthz",
        "/readyz",
        "/v1/search",
        "/v1/ask",
        "/v1/graph/entity/{name}",
    ] {
        assert!(paths.contains_key(p), "{p} missing: {:?}", paths.keys());
    }
    assert!(paths["/v1/search"]["post"].is_object());
    let schemas = r.body["components"]["schemas"].as_object().unwrap();
    for name in [
        "SearchBody",
        "AskBody",
        "ErrorBody",
        "SearchResult",
        "AskResult",
    ] {
        assert!(schemas.contains_key(name), "{name} missing");
    }
    assert!(r.body["components"]["securitySchemes"]["api_key"].is_object());
    s.stop().await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_rereads_the_keys_even_when_the_file_looks_unchanged() {
    let s = Server::start(shared_engine(), &KEYS).await;
    let body = search_body("耳机退货", "bm25");
    // A first answered request: the server task runs, so its SIGHUP handler is in
    // place before the signal is sent.
    assert_eq!(
        s.post("/v1/search", Some("key-u7"), body.clone())
            .await
            .status,
        200
    );
    // Rewrite in place with a key of the same length and put the old mtime back:
    // size, inode and mtime all match, so only SIGHUP can reveal the change.
    let before = std::fs::metadata(&s.keys_path).unwrap().modified().unwrap();
    let text = std::fs::read_to_string(&s.keys_path)
        .unwrap()
        .replace(&hash_key("key-u7"), &hash_key("key-u9"));
    std::fs::write(&s.keys_path, text).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&s.keys_path)
        .unwrap()
        .set_modified(before)
        .unwrap();
    assert_eq!(
        s.post("/v1/search", Some("key-u7"), body.clone())
            .await
            .status,
        200
    );
    let status = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut rotated = false;
    for _ in 0..100 {
        if s.post("/v1/search", Some("key-u9"), body.clone())
            .await
            .status
            == 200
        {
            rotated = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(rotated, "SIGHUP did not reload the keys");
    assert_error(
        &s.post("/v1/search", Some("key-u7"), body.clone()).await,
        401,
        "unauthorized",
    );
    s.stop().await;
}
