//! Writers and readers at once against one server: N admin tasks upload documents and
//! new versions of one shared document while M readers search. No response may hold a
//! chunk twice; once a reader has seen version N of the shared document in force it
//! never again sees an older one; at the end every upload is there (no lost write) and
//! only the newest shared version is in force.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use common::{fresh_engine, Server};
use serde_json::{json, Value};

const WRITERS: usize = 4;
const READERS: usize = 4;
const ROUNDS: usize = 8;

fn shared_version(n: usize) -> String {
    // Later versions start later and declare that they supersede the one before: the
    // newest is the one in force on 2026-11-30, whatever order the commits land in.
    let supersedes = if n > 1 {
        format!("supersedes: shared-notice@{}\n", n - 1)
    } else {
        String::new()
    };
    format!(
        "---\nid: shared-notice\nversion: \"{n}\"\ntitle: Shared notice\ntenant: shop\neffective_from: 2026-{:02}-{:02}\n{supersedes}---\n# Shared notice\n\nThe shared notice revision marker is rev{n:03} for zanzibar readers.\n",
        1 + n / 28,
        1 + n % 28
    )
}

fn own_doc(w: usize, i: usize) -> String {
    format!(
        "---\nid: w{w}-doc{i}\nversion: \"1\"\ntitle: Writer {w} note {i}\ntenant: shop\n---\n# Writer {w} note {i}\n\nThe zanzibar note of writer {w} number {i} is marked wr{w}x{i}.\n"
    )
}

fn upload(files: &[(String, String)]) -> Value {
    json!({"files": files.iter().map(|(n, c)| json!({"name": n, "content": c})).collect::<Vec<_>>()})
}

fn hits(body: &Value) -> Vec<(String, String, String)> {
    body["hits"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|h| {
                    (
                        h["chunk_id"].as_str().unwrap_or_default().to_string(),
                        h["doc_id"].as_str().unwrap_or_default().to_string(),
                        h["version"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writers_and_readers_at_once_lose_nothing_and_never_go_back() {
    let (_dir, engine) = fresh_engine();
    let s = Arc::new(
        Server::start_with(
            engine,
            &[("key-admin", "zhang", true), ("key-reader", "zhang", false)],
            dossier_server::ServerConfig {
                limits: dossier_server::LimitConfig {
                    rate_per_sec: 1e6,
                    burst: 1_000_000,
                    expensive_concurrency: 64,
                    ..Default::default()
                },
                cache_entries: 0,
                ..Default::default()
            },
            None,
        )
        .await,
    );
    // The shared document's versions are numbered and uploaded in order (a version
    // supersedes the one before, which must exist for the chain to hold); everything
    // else — the writers' own documents, the readers — runs at once.
    let next_version = Arc::new(tokio::sync::Mutex::new(1usize));
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let (s, next_version) = (s.clone(), next_version.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..ROUNDS {
                let own = vec![(format!("w{w}-doc{i}.md"), own_doc(w, i))];
                let r = s.post("/v1/documents", "key-admin", upload(&own)).await;
                assert_eq!(r.status, 200, "{}", r.text);
                let mut n = next_version.lock().await;
                let shared = vec![(format!("shared-{}.md", *n), shared_version(*n))];
                let r = s.post("/v1/documents", "key-admin", upload(&shared)).await;
                assert_eq!(r.status, 200, "{}", r.text);
                *n += 1;
            }
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..READERS {
        let s = s.clone();
        readers.push(tokio::spawn(async move {
            let (mut newest, mut searches) = (0usize, 0usize);
            for _ in 0..(ROUNDS * 3) {
                for mode in ["bm25", "hybrid", "graph"] {
                    let r = s
                        .post(
                            "/v1/search",
                            "key-reader",
                            json!({"query": "zanzibar shared notice revision marker", "mode": mode, "k": 20, "now": "2026-11-30"}),
                        )
                        .await;
                    assert_eq!(r.status, 200, "{}", r.text);
                    searches += 1;
                    let h = hits(&r.body);
                    let ids: HashSet<&String> = h.iter().map(|(c, _, _)| c).collect();
                    assert_eq!(ids.len(), h.len(), "a chunk twice in one answer: {h:?}");
                    let shared: Vec<usize> = h
                        .iter()
                        .filter(|(_, d, _)| d == "shared-notice")
                        .map(|(_, _, v)| v.parse().unwrap())
                        .collect();
                    assert!(shared.len() <= 1, "two versions of one document in force: {shared:?}");
                    if let Some(&v) = shared.first() {
                        assert!(v >= newest, "version {v} shown as current after {newest} ({mode})");
                        newest = v;
                    }
                }
            }
            searches
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut searches = 0;
    for r in readers {
        searches += r.await.unwrap();
    }
    // No lost write: every writer's every note is found; only the newest shared version.
    let r = s.get("/v1/documents?now=2026-11-30", "key-reader").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let listed = r.text.clone();
    for w in 0..WRITERS {
        for i in 0..ROUNDS {
            assert!(
                listed.contains(&format!("w{w}-doc{i}")),
                "lost write w{w}-doc{i}"
            );
        }
    }
    let last = WRITERS * ROUNDS;
    let r = s
        .post(
            "/v1/search",
            "key-reader",
            json!({"query": "shared notice revision marker", "mode": "bm25", "k": 5, "now": "2026-11-30"}),
        )
        .await;
    let shared: Vec<String> = hits(&r.body)
        .into_iter()
        .filter(|(_, d, _)| d == "shared-notice")
        .map(|(_, _, v)| v)
        .collect();
    assert_eq!(shared, vec![last.to_string()], "{}", r.text);
    eprintln!("{WRITERS} writers x {ROUNDS} uploads, {READERS} readers, {searches} searches: no duplicate, no regression, no lost write");
    Arc::try_unwrap(s).ok().unwrap().stop().await;
}
