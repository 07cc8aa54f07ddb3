//! Knowledge-base scope, as an oracle over whole responses: a principal limited to some
//! knowledge bases, or a request naming some, is told exactly what it would be told in a
//! store holding only those knowledge bases' documents — on every read route (search in
//! every mode, ask, chat, graph, documents, sections, MCP), with randomised corpora. A
//! kb the caller may not read and one that does not exist read the same.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::masks::{mask_value, masked, Masked};
use common::world::seeds;
use common::Server;
use dossier_server::hash_key;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

const READER: &str = "key-reader";
const HR_READER: &str = "key-hr-reader";

/// One document's names: id, two entities, and a word only it holds.
#[derive(Clone)]
struct Doc {
    id: String,
    kb: Option<&'static str>,
    a: String,
    b: String,
    word: String,
}

fn word(rng: &mut StdRng, len: usize) -> String {
    (0..len)
        .map(|_| (b'a' + rng.gen_range(0..26)) as char)
        .collect()
}

/// The documents of `seed`: one in kb `hr`, one in kb `it`, one in no kb (tenant `ta`).
fn docs(seed: u64) -> Vec<Doc> {
    let mut rng = StdRng::seed_from_u64(seed);
    [Some("hr"), Some("it"), None]
        .into_iter()
        .map(|kb| Doc {
            id: format!("d-{}", word(&mut rng, 8)),
            kb,
            a: format!("svc-{}", word(&mut rng, 6)),
            b: format!("svc-{}", word(&mut rng, 6)),
            word: word(&mut rng, 9),
        })
        .collect()
}

/// Writes `docs` and the principals under `dir`.
fn write(dir: &Path, docs: &[Doc]) {
    let d = dir.join("docs");
    std::fs::create_dir_all(&d).unwrap();
    for doc in docs {
        let kb = doc.kb.map_or(String::new(), |k| format!("kb: {k}\n"));
        std::fs::write(
            d.join(format!("{}.md", doc.id)),
            format!(
                "---\nid: {id}\nversion: \"1\"\ntitle: Service notes {id}\ntenant: ta\n{kb}effective_from: 2026-01-01\n---\n\
                 # Service notes\n\n## Dependencies\n{a} depends on {b}.\n\n\
                 ## Notes\nThe {w} runbook applies to {a} during maintenance windows.\n",
                id = doc.id,
                a = doc.a,
                b = doc.b,
                w = doc.word
            ),
        )
        .unwrap();
    }
    std::fs::write(
        dir.join("principals.yaml"),
        "principals:\n\
         - {id: reader, tenant: ta, groups: [staff]}\n\
         - {id: hr-reader, tenant: ta, groups: [staff], kbs: [hr]}\n",
    )
    .unwrap();
}

async fn server_over(docs: &[Doc]) -> (Server, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    write(&corpus, docs);
    let engine = common::hash_engine(&dir.path().join("store"), std::slice::from_ref(&corpus));
    // Hundreds of calls per server: a rate that never refuses one, so every pair
    // compares real answers.
    let config = common::unthrottled();
    let server = Server::start_with(Arc::new(engine), &[], config, None).await;
    std::fs::write(
        &server.keys_path,
        format!(
            "- {{key_sha256: {}, principal: reader}}\n- {{key_sha256: {}, principal: hr-reader}}\n",
            hash_key(READER),
            hash_key(HR_READER)
        ),
    )
    .unwrap();
    server.state.keys.reload().unwrap();
    (server, corpus, dir)
}

/// Every read call, each limited to `kb` when given (body field, query string, chat
/// option or MCP argument).
fn calls(all: &[Doc], kb: Option<&[&str]>) -> Vec<(String, Option<Value>)> {
    let with_kb = |mut v: Value| {
        if let Some(k) = kb {
            v["kb"] = json!(k);
        }
        v
    };
    let query_kb = kb.map_or(String::new(), |k| format!("kb={}", k.join(",")));
    let q = |path: String| {
        if query_kb.is_empty() {
            path
        } else if path.contains('?') {
            format!("{path}&{query_kb}")
        } else {
            format!("{path}?{query_kb}")
        }
    };
    let mut out = Vec::new();
    let mut queries: Vec<String> = all.iter().map(|d| format!("{} runbook", d.word)).collect();
    queries.extend(all.iter().map(|d| d.a.clone()));
    queries.push("depends on maintenance".into());
    for text in &queries {
        for mode in [
            "bm25", "vector", "hybrid", "local", "graph", "global", "drift",
        ] {
            out.push((
                "/v1/search".to_string(),
                Some(with_kb(
                    json!({"query": text, "mode": mode, "k": 8, "now": "2026-11-30"}),
                )),
            ));
        }
    }
    for d in all {
        let question = format!("What does {} depend on?", d.a);
        out.push((
            "/v1/ask".into(),
            Some(with_kb(json!({"question": question, "now": "2026-11-30"}))),
        ));
        let mut options = json!({"now": "2026-11-30"});
        if let Some(k) = kb {
            options["kb"] = json!(k);
        }
        out.push((
            "/v1/chat/completions".into(),
            Some(json!({"model": "dossier", "messages": [{"role": "user", "content": question}], "dossier": options})),
        ));
        out.push((
            "/mcp".into(),
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                        "params": {"name": "search", "arguments": with_kb(json!({"query": format!("{} runbook", d.word)}))}})),
        ));
        out.push((q(format!("/v1/graph/entity/{}", d.a)), None));
        out.push((q(format!("/v1/graph/neighbors/{}", d.a)), None));
        out.push((q(format!("/v1/graph/path?from={}&to={}", d.a, d.b)), None));
        out.push((q(format!("/v1/documents/{}", d.id)), None));
        out.push((q(format!("/v1/sections/{}@1%230", d.id)), None));
        out.push((
            "/v1/graph/evidence".into(),
            Some(with_kb(json!({"cites": [format!("{}@1#0", d.id)]}))),
        ));
    }
    out.push((q("/v1/documents".into()), None));
    out
}

/// The responses of `key` to `calls` on `s`, masked (request ids, timings, the corpus
/// directory).
async fn told(s: &Server, key: &str, calls: &[(String, Option<Value>)], dir: &Path) -> Vec<Masked> {
    let dir = dir.display().to_string();
    let mut out = Vec::new();
    for (path, body) in calls {
        let r = match body {
            Some(b) => s.post(path, key, b.clone()).await,
            None => s.get(path, key).await,
        };
        let mut m = masked(&r, &dir);
        mask_value(&mut m.2, &[]);
        out.push(m);
    }
    out
}

fn first_difference(
    a: &[Masked],
    b: &[Masked],
    calls: &[(String, Option<Value>)],
) -> Option<String> {
    a.iter()
        .zip(b)
        .zip(calls)
        .find(|((x, y), _)| x != y)
        .map(|((x, y), c)| format!("{c:?}\n  one: {x:?}\n  other: {y:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kb_limited_reader_is_told_only_what_a_store_of_that_kb_would_tell() {
    for seed in seeds(2) {
        let all = docs(seed);
        let hr_only: Vec<Doc> = all.iter().filter(|d| d.kb == Some("hr")).cloned().collect();
        let (full, full_dir, _a) = server_over(&all).await;
        let (part, part_dir, _b) = server_over(&hr_only).await;

        // The principal's own limit.
        let unnamed = calls(&all, None);
        let a = told(&full, HR_READER, &unnamed, &full_dir).await;
        let b = told(&part, HR_READER, &unnamed, &part_dir).await;
        if let Some(d) = first_difference(&a, &b, &unnamed) {
            panic!("seed {seed}: hr-reader is told about other knowledge bases: {d}");
        }
        // A request's limit, for a principal with none.
        let named = calls(&all, Some(&["hr"]));
        let a = told(&full, READER, &named, &full_dir).await;
        let b = told(&part, READER, &named, &part_dir).await;
        if let Some(d) = first_difference(&a, &b, &named) {
            panic!("seed {seed}: kb=[hr] lets other knowledge bases through: {d}");
        }

        // Not vacuous: the hr document is found, the others are not, and without a
        // limit the reader finds them all.
        let search = |word: &str, kb: Option<&str>| {
            let mut b = json!({"query": format!("{word} runbook"), "mode": "bm25", "k": 8});
            if let Some(k) = kb {
                b["kb"] = json!([k]);
            }
            b
        };
        let ids = |r: &common::Reply| -> Vec<String> {
            r.body["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["doc_id"].as_str().unwrap().to_string())
                .collect()
        };
        for d in &all {
            let mine = ids(&full
                .post("/v1/search", HR_READER, search(&d.word, None))
                .await);
            assert_eq!(
                mine.contains(&d.id),
                d.kb == Some("hr"),
                "seed {seed}: {mine:?}"
            );
            let anyone = ids(&full.post("/v1/search", READER, search(&d.word, None)).await);
            assert!(anyone.contains(&d.id), "seed {seed}: {anyone:?}");
            let it = ids(&full
                .post("/v1/search", READER, search(&d.word, Some("it")))
                .await);
            assert_eq!(
                it.contains(&d.id),
                d.kb == Some("it"),
                "seed {seed}: {it:?}"
            );
        }
        full.stop().await;
        part.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kb_the_caller_may_not_read_reads_like_one_that_does_not_exist() {
    for seed in seeds(2) {
        let all = docs(seed);
        let (full, full_dir, _a) = server_over(&all).await;
        let ghost = format!("kb{}", word(&mut StdRng::seed_from_u64(seed ^ 7), 6));
        // hr-reader may not read `it`; `ghost` names nothing. No response echoes the
        // names, so the whole responses must be equal.
        let it_calls = calls(&all, Some(&["it"]));
        let ghost_calls = calls(&all, Some(&[ghost.as_str()]));
        let a = told(&full, HR_READER, &it_calls, &full_dir).await;
        let b = told(&full, HR_READER, &ghost_calls, &full_dir).await;
        if let Some(d) = first_difference(&a, &b, &it_calls) {
            panic!("seed {seed}: kb `it` (not hr-reader's) reads differently from one that does not exist: {d}");
        }
        full.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kb_lists_are_bounded_and_checked() {
    let all = docs(1);
    let (s, _dir, _a) = server_over(&all).await;
    let many: Vec<String> = (0..17).map(|i| format!("kb{i}")).collect();
    let r = s
        .post(
            "/v1/search",
            READER,
            json!({"query": "runbook", "kb": many}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("at most 16"), "{}", r.text);
    let r = s
        .post(
            "/v1/ask",
            READER,
            json!({"question": "runbook?", "kb": ["a b"]}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    let r = s.get("/v1/documents?kb=a%20b", READER).await;
    assert_eq!(r.status, 400, "{}", r.text);
    s.stop().await;
}
