//! The existence oracle: for every route (and CLI command) that takes a document id, a
//! chunk id, an entity name, a record key, a trace id, a review candidate or a job id,
//! a caller must not be able to tell "exists but is not yours" from "does not exist".
//!
//! Over randomised two-tenant corpora (see `common::world`), each identifier the caller
//! may not see is paired with a fresh identifier of the same shape and length that
//! names nothing; both requests are sent, and the **whole** responses — status, every
//! header but `date`, and the body — must be equal once the identifier itself, the
//! request id and timing fields are masked.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::masks::{mask_value, masked};
use common::world::{seeds, World};
use common::{urlencode, Reply, Server};
use dossier_server::{hash_key, KeyStore};
use serde_json::{json, Value};

/// Reader (tenant ta, not in `secret`), the admin of tb, and the admin of ta.
const READER: &str = "key-reader";
const ADMIN_B: &str = "key-admin-b";
const ADMIN_A: &str = "key-admin-a";

struct Fixture {
    world: World,
    server: Server,
    _dir: tempfile::TempDir,
}

async fn fixture(seed: u64) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    let world = World::write(&corpus, seed);
    let engine = common::hash_engine(&dir.path().join("store"), &[corpus]);
    Fixture {
        world,
        server: fixture_server(Arc::new(engine)).await,
        _dir: dir,
    }
}

/// The fixture's server on `engine`, with its three keys.
async fn fixture_server(engine: Arc<dossier_engine::Engine>) -> Server {
    // Hundreds of pairs per seed (an MCP call counts twice: its message and its tool's
    // request): a rate that never refuses one, so every pair compares real answers.
    let config = common::unthrottled();
    let server = Server::start_with(engine, &[], config, None).await;
    let keys = format!(
        "- {{key_sha256: {}, principal: reader}}\n\
         - {{key_sha256: {}, principal: admin-b, admin: true}}\n\
         - {{key_sha256: {}, principal: admin-a, admin: true}}\n",
        hash_key(READER),
        hash_key(ADMIN_B),
        hash_key(ADMIN_A)
    );
    std::fs::write(&server.keys_path, keys).unwrap();
    server.state.keys.reload().unwrap();
    let _ = KeyStore::load(&server.keys_path).unwrap();
    server
}

/// One request shape, with the identifier spliced in.
#[derive(Clone, Copy)]
enum Call {
    Get(&'static str),
    Post(&'static str, fn(&str) -> Value),
    Delete(&'static str),
}

async fn send(s: &Server, key: &str, call: Call, id: &str) -> Reply {
    let enc = |p: &str| p.replace("{}", &urlencode(id));
    match call {
        Call::Get(p) => s.get(&enc(p), key).await,
        Call::Post(p, body) => s.post(&enc(p), key, body(id)).await,
        Call::Delete(p) => s.delete(&enc(p), key).await,
    }
}

/// Sends `call` with `hidden` and with a missing identifier of its shape; the two
/// masked responses must be equal. Returns the status both had.
async fn same(f: &mut Fixture, key: &str, what: &str, call: Call, hidden: &str) -> u16 {
    let missing = f.world.missing_like(hidden);
    let a = send(&f.server, key, call, hidden).await;
    let b = send(&f.server, key, call, &missing).await;
    let (ma, mb) = (masked(&a, hidden), masked(&b, &missing));
    assert_eq!(
        ma, mb,
        "seed {}: {what} tells {hidden:?} (exists, not the caller's) from {missing:?} (does not exist)",
        f.world.seed
    );
    a.status
}

/// Every way an upload or a job could rewrite an admin's own principal; each must
/// leave the principals as they were.
async fn widen_through_uploads(s: &Server) {
    let before_a = s.get("/v1/principals", ADMIN_A).await.body;
    let before_b = s.get("/v1/principals", ADMIN_B).await.body;
    let files = [
        (
            ADMIN_B,
            "- {id: admin-b, tenant: tb, groups: [staff, secret]}",
        ),
        (
            ADMIN_B,
            "- {id: admin-b, tenant: ta, groups: [staff, secret]}",
        ),
        (ADMIN_B, "- {id: reader, tenant: tb, groups: [staff]}"),
        (
            ADMIN_A,
            "- {id: admin-a, tenant: ta, groups: [staff, secret, more]}",
        ),
        (ADMIN_A, "- {id: admin-b, tenant: ta, groups: [staff]}"),
    ];
    for (key, line) in files {
        let body = json!({"files": [{"name": "principals.yaml",
                                     "content": format!("principals:\n{line}\n")}]});
        let r = s.post("/v1/documents", key, body.clone()).await;
        assert_eq!(r.status, 400, "{line}: {}", r.text);
        let job = s.post("/v1/jobs/ingest", key, body).await;
        assert_eq!(job.status, 202, "{line}: {}", job.text);
        let id = job.body["id"].as_str().unwrap().to_string();
        let t0 = std::time::Instant::now();
        loop {
            let j = s.get(&format!("/v1/jobs/{id}"), key).await.body;
            if j["status"] == "succeeded" || j["status"] == "failed" {
                assert_eq!(j["result"]["principals"], 0, "{line}: {j}");
                break;
            }
            assert!(t0.elapsed().as_secs() < 60, "{j}");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    assert_eq!(s.get("/v1/principals", ADMIN_A).await.body, before_a);
    assert_eq!(s.get("/v1/principals", ADMIN_B).await.body, before_b);
}

/// An MCP `tools/call` message (the MCP route answers for the same key as the others).
fn mcp_call(tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
}

fn ask(q: &str) -> Value {
    json!({"question": q, "now": "2026-11-30"})
}

fn chat(q: &str) -> Value {
    json!({"model": "dossier", "messages": [{"role": "user", "content": q}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_tells_not_yours_from_does_not_exist() {
    for seed in seeds(3) {
        let mut f = fixture(seed).await;
        let w = f.world.clone();
        let chunk_of = |d: &str| format!("{d}@1#0");
        // The keys work and the reader sees their own document: the pairs below are
        // compared on real answers, not on two refusals.
        let own = f
            .server
            .get(&format!("/v1/documents/{}", w.visible_docs[0]), READER)
            .await;
        assert_eq!(own.status, 200, "{}", own.text);
        // Issue 39: the admins try to widen themselves through the routes that write
        // principals from files (an upload, an ingest job) — into the other tenant, into
        // its groups. Every pair below then runs with whatever they hold afterwards.
        widen_through_uploads(&f.server).await;
        // Documents, sections, evidence: every hidden document and its first chunk.
        for d in &w.hidden_docs {
            same(
                &mut f,
                READER,
                "GET /v1/documents/{id}",
                Call::Get("/v1/documents/{}"),
                d,
            )
            .await;
            let c = chunk_of(d);
            same(
                &mut f,
                READER,
                "GET /v1/sections/{id}",
                Call::Get("/v1/sections/{}"),
                &c,
            )
            .await;
            same(
                &mut f,
                READER,
                "MCP document_section",
                Call::Post("/mcp", |id| {
                    mcp_call("document_section", json!({"chunk_id": id}))
                }),
                &c,
            )
            .await;
            same(
                &mut f,
                READER,
                "POST /v1/graph/evidence",
                Call::Post("/v1/graph/evidence", |id| json!({"cites": [id]})),
                &c,
            )
            .await;
            same(
                &mut f,
                ADMIN_B,
                "POST /v1/documents/{id}/versions with no file",
                Call::Post("/v1/documents/{}/versions", |_| json!({"files": []})),
                d,
            )
            .await;
        }
        // Admin routes from another tenant's admin: ta's documents are not theirs.
        for d in &w.hidden_docs[..1] {
            same(
                &mut f,
                ADMIN_B,
                "GET /v1/documents/{id} (admin)",
                Call::Get("/v1/documents/{}"),
                d,
            )
            .await;
            same(
                &mut f,
                ADMIN_B,
                "DELETE /v1/documents/{id}",
                Call::Delete("/v1/documents/{}"),
                d,
            )
            .await;
        }
        // Entities known only from hidden text.
        for e in &w.hidden_entities {
            same(
                &mut f,
                READER,
                "GET /v1/graph/entity",
                Call::Get("/v1/graph/entity/{}"),
                e,
            )
            .await;
            same(
                &mut f,
                READER,
                "GET /v1/graph/neighbors",
                Call::Get("/v1/graph/neighbors/{}"),
                e,
            )
            .await;
            same(
                &mut f,
                READER,
                "MCP graph_neighbors",
                Call::Post("/mcp", |id| {
                    mcp_call("graph_neighbors", json!({"name": id}))
                }),
                e,
            )
            .await;
            same(
                &mut f,
                READER,
                "MCP ask about a hidden entity",
                Call::Post("/mcp", |id| {
                    // Not the question asked below: each pair starts with a cold cache.
                    mcp_call("ask", ask(&format!("Which services does {id} need?")))
                }),
                e,
            )
            .await;
            let to = w.visible_entities[0].clone();
            let path: &'static str =
                Box::leak(format!("/v1/graph/path?from={{}}&to={to}").into_boxed_str());
            same(&mut f, READER, "GET /v1/graph/path", Call::Get(path), e).await;
            same(
                &mut f,
                READER,
                "POST /v1/search (bm25) for a hidden entity",
                Call::Post(
                    "/v1/search",
                    |id| json!({"query": id, "mode": "bm25", "now": "2026-11-30"}),
                ),
                e,
            )
            .await;
            same(
                &mut f,
                READER,
                "POST /v1/ask about a hidden entity",
                Call::Post("/v1/ask", |id| ask(&format!("What does {id} depend on?"))),
                e,
            )
            .await;
        }
        for word in &w.hidden_words {
            same(
                &mut f,
                READER,
                "POST /v1/search (bm25) for a word of hidden text",
                Call::Post("/v1/search", |id| json!({"query": format!("{id} runbook"), "mode": "bm25", "now": "2026-11-30"})),
                word,
            )
            .await;
        }
        // Records: another owner's order in ta, and tb's order.
        for k in &w.hidden_keys {
            let status = same(
                &mut f,
                READER,
                "POST /v1/ask about an order",
                Call::Post("/v1/ask", |id| {
                    ask(&format!("What is the status of order {id}?"))
                }),
                k,
            )
            .await;
            assert_eq!(status, 200);
            same(
                &mut f,
                READER,
                "GET /v1/records/orders/{key}",
                Call::Get("/v1/records/orders/{}"),
                k,
            )
            .await;
            same(
                &mut f,
                READER,
                "MCP record_lookup",
                Call::Post("/mcp", |id| {
                    mcp_call("record_lookup", json!({"table": "orders", "key": id}))
                }),
                k,
            )
            .await;
            same(
                &mut f,
                READER,
                "POST /v1/chat/completions about an order",
                Call::Post("/v1/chat/completions", |id| {
                    chat(&format!("What is the status of order {id}?"))
                }),
                k,
            )
            .await;
        }
        // Traces: another principal's request id.
        let theirs = f
            .server
            .post(
                "/v1/ask",
                ADMIN_A,
                ask(&format!(
                    "What is the status of order {}?",
                    w.hidden_keys[0]
                )),
            )
            .await;
        assert_eq!(theirs.status, 200);
        same(
            &mut f,
            READER,
            "GET /v1/traces/{id}",
            Call::Get("/v1/traces/{}"),
            &theirs.request_id,
        )
        .await;
        same(
            &mut f,
            ADMIN_B,
            "GET /v1/traces/{id} (admin)",
            Call::Get("/v1/traces/{}"),
            &theirs.request_id,
        )
        .await;
        // Stored traces: a second server on the same store has none in memory and reads
        // them from the audit log, as after a restart — still its owner's only.
        let audit = f.server.state.audit.clone();
        let flushed =
            tokio::task::spawn_blocking(move || audit.flush(std::time::Duration::from_secs(20)))
                .await
                .unwrap();
        assert!(flushed);
        let second = fixture_server(f.server.state.engine.clone()).await;
        let first = std::mem::replace(&mut f.server, second);
        let url = format!("/v1/traces/{}", theirs.request_id);
        let own = f.server.get(&url, ADMIN_A).await;
        assert_eq!(
            own.status, 200,
            "the owner reads the stored trace: {}",
            own.text
        );
        for key in [READER, ADMIN_B] {
            same(
                &mut f,
                key,
                "GET /v1/traces/{id} (stored)",
                Call::Get("/v1/traces/{}"),
                &theirs.request_id,
            )
            .await;
        }
        let second = std::mem::replace(&mut f.server, first);
        second.stop().await;
        // The audit log is the operator's: a filter on someone's request id reads like
        // one on an id that never existed (both refused alike).
        for key in [READER, ADMIN_A, ADMIN_B] {
            let status = same(
                &mut f,
                key,
                "GET /v1/audit?request_id={id}",
                Call::Get("/v1/audit?request_id={}"),
                &theirs.request_id,
            )
            .await;
            assert_eq!(status, 403);
        }
        // Jobs: ta's job, seen by tb's admin.
        let job = f
            .server
            .post("/v1/jobs/ingest", ADMIN_A, json!({"files": []}))
            .await;
        if let Some(id) = job.body["id"].as_str() {
            same(
                &mut f,
                ADMIN_B,
                "GET /v1/jobs/{id}",
                Call::Get("/v1/jobs/{}"),
                id,
            )
            .await;
        }
        // Review candidates of ta, seen by tb's admin.
        let items = f.server.get("/v1/review?status=all", ADMIN_A).await;
        for item in items.body.as_array().into_iter().flatten().take(2) {
            let id = item["id"].as_str().unwrap().to_string();
            same(
                &mut f,
                ADMIN_B,
                "GET /v1/review/{id}",
                Call::Get("/v1/review/{}"),
                &id,
            )
            .await;
            same(
                &mut f,
                ADMIN_B,
                "POST /v1/review/{id}/approve",
                Call::Post("/v1/review/{}/approve", |_| json!({})),
                &id,
            )
            .await;
        }
        f.server.stop().await;
    }
}

/// The `dossier` binary built beside this test binary (`target/<profile>/dossier`).
fn dossier_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap();
    let bin = dir.join("dossier");
    // Built (and kept fresh) by `cargo nextest run --workspace`; a run of this package
    // alone may find an older binary.
    assert!(
        bin.is_file(),
        "{} not built: run the workspace's tests (cargo nextest run --workspace)",
        bin.display()
    );
    bin
}

/// `dossier ARGS` on the store: (exit code, stdout as JSON or text, stderr).
fn cli(store: &Path, args: &[&str]) -> (Option<i32>, Value, String) {
    let out = std::process::Command::new(dossier_bin())
        .arg("--store")
        .arg(store)
        .args(["--embedder", "hash:64"])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let body = serde_json::from_str(&stdout).unwrap_or(Value::String(stdout));
    (
        out.status.code(),
        body,
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// The CLI's commands that take an identifier, the same way: exit code, stdout and
/// stderr compared whole (the store is ingested through the CLI itself).
#[test]
fn the_cli_tells_nothing_either() {
    for seed in seeds(2) {
        let dir = tempfile::tempdir().unwrap();
        let corpus = dir.path().join("corpus");
        let mut w = World::write(&corpus, seed);
        let store = dir.path().join("store");
        let (code, _, err) = cli(&store, &["ingest", corpus.to_str().unwrap()]);
        assert_eq!(code, Some(0), "ingest failed: {err}");
        let mut cases: Vec<(Vec<String>, String)> = Vec::new();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        for k in w.hidden_keys.clone() {
            let q = format!("What is the status of order {k}?");
            cases.push((
                s(&["ask", &q, "--as", "reader", "--now", "2026-11-30", "--json"]),
                k,
            ));
        }
        for e in w.hidden_entities.clone() {
            cases.push((
                s(&["graph", "entity", &e, "--as", "reader", "--json"]),
                e.clone(),
            ));
            cases.push((
                s(&["graph", "neighbors", &e, "--as", "reader", "--json"]),
                e.clone(),
            ));
            cases.push((
                s(&["search", &e, "--as", "reader", "--mode", "bm25", "--json"]),
                e,
            ));
        }
        for (args, hidden) in cases {
            let missing = w.missing_like(&hidden);
            let run = |id: &str| {
                let a: Vec<String> = args.iter().map(|x| x.replace(&hidden, id)).collect();
                let refs: Vec<&str> = a.iter().map(String::as_str).collect();
                let (code, mut out, err) = cli(&store, &refs);
                mask_value(&mut out, &[(id, "<ID>")]);
                (code, out, err.replace(id, "<ID>"))
            };
            assert_eq!(
                run(&hidden),
                run(&missing),
                "seed {seed}: dossier {args:?} tells {hidden:?} (exists, not the caller's) from {missing:?}"
            );
        }
    }
}

/// A server over a world written by `write` (the whole world, or reader's part of it),
/// with reader's key.
async fn world_server(
    write: fn(&Path, u64) -> World,
    seed: u64,
) -> (World, Server, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    let world = write(&corpus, seed);
    let engine = common::hash_engine(&dir.path().join("store"), std::slice::from_ref(&corpus));
    let server = Server::start(Arc::new(engine), &[]).await;
    std::fs::write(
        &server.keys_path,
        format!(
            "- {{key_sha256: {}, principal: reader}}\n",
            hash_key(READER)
        ),
    )
    .unwrap();
    server.state.keys.reload().unwrap();
    (world, server, corpus, dir)
}

/// Nothing outside the caller's scope in any field, count or score: every answer the
/// reader gets from the whole world equals, byte for byte after masking request ids,
/// timings and the corpus directory, the answer from a world that holds only what the
/// reader may read. Hidden documents, rows, entities and words change nothing a reader
/// sees — not a hit, a score, a count, a community, an id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_reader_is_told_depends_only_on_what_they_may_read() {
    for seed in seeds(2) {
        let (w, full, full_dir, _a) = world_server(World::write, seed).await;
        let (_, part, part_dir, _b) = world_server(World::write_visible_only, seed).await;
        let full_dir = full_dir.display().to_string();
        let part_dir = part_dir.display().to_string();
        let mut queries: Vec<String> = Vec::new();
        queries.extend(w.visible_entities.iter().cloned());
        queries.extend(w.hidden_entities.iter().cloned());
        queries.extend(w.hidden_words.iter().map(|x| format!("{x} runbook")));
        queries.push("depends on maintenance".into());
        let mut calls: Vec<(String, Option<Value>)> = Vec::new();
        for q in &queries {
            for mode in [
                "bm25", "vector", "hybrid", "local", "graph", "global", "drift",
            ] {
                calls.push((
                    "/v1/search".into(),
                    Some(json!({"query": q, "mode": mode, "k": 8, "now": "2026-11-30"})),
                ));
            }
        }
        let mut questions = vec![
            format!("What is the status of order {}?", w.own_key),
            format!("What is the status of order {}?", w.hidden_keys[0]),
            "Which runbook applies during maintenance windows?".to_string(),
        ];
        questions.extend(
            w.visible_entities
                .iter()
                .map(|e| format!("What does {e} depend on?")),
        );
        questions.extend(
            w.hidden_entities
                .iter()
                .take(2)
                .map(|e| format!("What does {e} depend on?")),
        );
        // Questions that give a name (capitalised words): the trace says which names
        // the evidence lacks, and that must not depend on text the reader may not read.
        let capitalised = |x: &str| {
            let mut c = x.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        };
        questions.extend(
            w.hidden_words
                .iter()
                .map(|x| format!("Which team owns the {} Runbook?", capitalised(x))),
        );
        questions.push(format!(
            "What does the {} Service depend on?",
            capitalised(&w.visible_entities[0])
        ));
        for q in &questions {
            calls.push(("/v1/ask".into(), Some(ask(q))));
            calls.push(("/v1/chat/completions".into(), Some(chat(q))));
        }
        let mut unnamed = 0;
        let (v0, v1) = (&w.visible_entities[0], &w.visible_entities[1]);
        for path in [
            format!("/v1/graph/entity/{v0}"),
            format!("/v1/graph/neighbors/{v0}"),
            format!("/v1/graph/path?from={v0}&to={v1}"),
            "/v1/documents".to_string(),
            format!("/v1/documents/{}", w.visible_docs[0]),
            format!("/v1/sections/{}@1%230", w.visible_docs[0]),
        ] {
            calls.push((path, None));
        }
        for (path, body) in calls {
            let (a, b) = match &body {
                Some(x) => (
                    full.post(&path, READER, x.clone()).await,
                    part.post(&path, READER, x.clone()).await,
                ),
                None => (full.get(&path, READER).await, part.get(&path, READER).await),
            };
            let mut ma = masked(&a, &full_dir);
            let mut mb = masked(&b, &part_dir);
            // `id`-named fields are masked as clocks; chat ids are random per answer.
            mask_value(&mut ma.2, &[]);
            mask_value(&mut mb.2, &[]);
            assert_eq!(
                ma, mb,
                "seed {seed}: {path} {body:?} differs when text the reader may not read exists"
            );
            if path == "/v1/ask" && ma.2.to_string().contains("the evidence does not name") {
                unnamed += 1;
            }
        }
        assert!(
            unnamed > 0,
            "seed {seed}: no question exercised the name rule"
        );
        full.stop().await;
        part.stop().await;
    }
}
