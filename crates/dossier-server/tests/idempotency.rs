//! `Idempotency-Key` on the write routes, against a real server on loopback (and, with
//! `DOSSIER_TEST_POSTGRES`, a shared store): every write route runs once per key and
//! replays its response; a key reused for another write is refused; concurrent retries
//! run the write once; failures give the key back; a key is its principal's own (the
//! whole response to another principal reads as if the key were new); keys outlive the
//! server; malformed keys are refused; reads ignore the header; the OpenAPI document
//! and the metrics say so.

mod common;

use std::collections::BTreeSet;

use common::masks::masked;
use common::{fresh_engine, Key, Reply, Server};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

/// (key, principal, admin)
const KEYS: [Key; 4] = [
    ("key-u7", "u7", false),
    ("key-zhang", "zhang", true),
    ("key-acme", "acme-admin", true),
    ("key-oncall", "oncall", false),
];

fn doc(id: &str, version: &str, body: &str) -> String {
    format!(
        "---\nid: {id}\nversion: \"{version}\"\ntitle: Note {id} {version}\ntenant: shop\nkb: support\n---\n# Note\n\n## Body\n{body}\n"
    )
}

fn upload(files: &[(&str, String)]) -> Value {
    json!({"files": files.iter().map(|(n, c)| json!({"name": n, "content": c})).collect::<Vec<_>>()})
}

impl Server {
    /// `method path` with `body` (JSON, or none) and an `Idempotency-Key`.
    async fn keyed(
        &self,
        method: reqwest::Method,
        path: &str,
        key: &str,
        idem: &str,
        body: Option<&Value>,
    ) -> Reply {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("Idempotency-Key", idem);
        if let Some(b) = body {
            req = req.json(b);
        }
        self.send(req, key).await
    }
}

fn replayed(r: &Reply) -> bool {
    r.header("idempotent-replayed") == Some("true")
}

async fn jobs(s: &Server, key: &str) -> usize {
    s.get("/v1/jobs", key).await.body.as_array().unwrap().len()
}

/// Each write route, sent twice with one key: the second is the first's response again
/// (status, type and body byte for byte), marked replayed, and the write ran once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_route_runs_once_per_key_and_replays_its_response() {
    let (_store, engine) = fresh_engine();
    let s = Server::start(engine, &KEYS).await;
    common::add_admin_key(&s.keys_path, "key-ops", "zhang", true);
    use reqwest::Method as M;
    let v1 = upload(&[("n.md", doc("note-a", "1", "Wombats nap at noon."))]);
    let v2 = upload(&[("n2.md", doc("note-a", "2", "Wombats nap at dusk."))]);
    let bulk = upload(&[("b.md", doc("note-b", "1", "Quolls hunt at night."))]);
    let steps: Vec<(M, &str, &str, Option<Value>)> = vec![
        (M::POST, "/v1/documents", "key-zhang", Some(v1)),
        (
            M::POST,
            "/v1/documents/note-a/versions",
            "key-zhang",
            Some(v2),
        ),
        (
            M::PUT,
            "/v1/principals/u9",
            "key-zhang",
            Some(json!({"groups": ["customer"]})),
        ),
        (M::POST, "/v1/jobs/ingest", "key-zhang", Some(bulk)),
        (M::POST, "/v1/jobs/reindex?force=true", "key-ops", None),
        (
            M::DELETE,
            "/v1/documents/note-a/versions/2",
            "key-zhang",
            None,
        ),
        (M::DELETE, "/v1/documents/note-a", "key-zhang", None),
    ];
    for (i, (method, path, key, body)) in steps.iter().enumerate() {
        let idem = format!("step-{i}-{}", rand::random::<u64>());
        let jobs_before = jobs(&s, "key-zhang").await;
        let first = s
            .keyed(method.clone(), path, key, &idem, body.as_ref())
            .await;
        assert!(
            (200..300).contains(&first.status),
            "{method} {path}: {}",
            first.body
        );
        assert!(!replayed(&first));
        let again = s
            .keyed(method.clone(), path, key, &idem, body.as_ref())
            .await;
        assert_eq!(
            again.status, first.status,
            "{method} {path}: {}",
            again.body
        );
        assert!(replayed(&again), "{method} {path}");
        assert_eq!(again.text, first.text, "{method} {path}");
        assert_eq!(again.content_type, first.content_type);
        assert_ne!(
            again.request_id, first.request_id,
            "each response has its own id"
        );
        if path.starts_with("/v1/jobs") {
            assert_eq!(
                jobs(&s, "key-zhang").await,
                jobs_before + 1,
                "{path}: one job"
            );
            // Let it end before the next write.
            let id = first.body["id"].as_str().unwrap();
            for _ in 0..2400 {
                let j = s.get(&format!("/v1/jobs/{id}"), "key-zhang").await;
                if j.body["status"] == "succeeded" || j.body["status"] == "failed" {
                    assert_eq!(j.body["status"], "succeeded", "{}", j.body);
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
        if *method == M::DELETE {
            // Without the key the same delete is a new request: nothing left to delete.
            let plain = s.delete(path, *key).await;
            assert_eq!(plain.status, 404, "{path}: {}", plain.body);
        }
    }
    // The same key for another write (another body, route or method) is refused, and
    // the refusal runs nothing.
    let idem = "reused-key";
    let a = upload(&[("c.md", doc("note-c", "1", "Numbats eat termites."))]);
    let b = upload(&[("d.md", doc("note-d", "1", "Bilbies dig burrows."))]);
    let r = s
        .keyed(M::POST, "/v1/documents", "key-zhang", idem, Some(&a))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    for (method, path, body) in [
        (M::POST, "/v1/documents", Some(&b)),
        (M::POST, "/v1/documents/note-c/versions", Some(&a)),
        (M::DELETE, "/v1/documents/note-c", None),
    ] {
        let r = s.keyed(method.clone(), path, "key-zhang", idem, body).await;
        assert_eq!(
            (r.status, r.body["code"].as_str()),
            (422, Some("idempotency_key_reused")),
            "{method} {path}: {}",
            r.body
        );
        assert!(!replayed(&r));
    }
    let listed = s.get("/v1/documents", "key-zhang").await;
    let ids: BTreeSet<&str> = listed.body["documents"]
        .as_array()
        .or(listed.body.as_array())
        .unwrap()
        .iter()
        .filter_map(|d| d["doc_id"].as_str().or(d["id"].as_str()))
        .collect();
    assert!(ids.contains("note-c") && !ids.contains("note-d"), "{ids:?}");

    // Counted by outcome.
    let m = s.get("/metrics", None).await.text;
    for outcome in ["fresh", "replayed", "reused"] {
        assert!(
            m.contains(&format!(
                "dossier_idempotency_keys_total{{outcome=\"{outcome}\"}}"
            )),
            "{outcome} missing from the metrics"
        );
    }
    s.stop().await;
}

/// Retries racing each other: the write runs once; each racer is told it ran, that it
/// is running (409 with Retry-After) or the first response again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_retries_run_the_write_once() {
    let (_store, engine) = fresh_engine();
    let s = std::sync::Arc::new(Server::start(engine, &KEYS).await);
    let files: Vec<(String, String)> = (0..30)
        .map(|i| {
            (
                format!("r{i}.md"),
                doc(&format!("race-{i}"), "1", &format!("Echidna {i}.")),
            )
        })
        .collect();
    let refs: Vec<(&str, String)> = files.iter().map(|(n, c)| (n.as_str(), c.clone())).collect();
    let body = upload(&refs);
    for round in 0..3 {
        let idem = format!("race-{round}");
        let before = jobs(&s, "key-zhang").await;
        let racers: Vec<_> = (0..6)
            .map(|_| {
                let (s, body, idem) = (s.clone(), body.clone(), idem.clone());
                tokio::spawn(async move {
                    s.keyed(
                        reqwest::Method::POST,
                        "/v1/jobs/ingest",
                        "key-zhang",
                        &idem,
                        Some(&body),
                    )
                    .await
                })
            })
            .collect();
        let mut ran = Vec::new();
        for r in racers {
            let r = r.await.unwrap();
            match r.status {
                202 => ran.push(r),
                409 => {
                    assert_eq!(r.body["code"], "idempotency_in_flight", "{}", r.body);
                    assert_eq!(r.header("retry-after"), Some("1"));
                }
                other => panic!("unexpected {other}: {}", r.body),
            }
        }
        assert_eq!(
            ran.iter().filter(|r| !replayed(r)).count(),
            1,
            "exactly one ran"
        );
        assert!(
            ran.iter().all(|r| r.text == ran[0].text),
            "replays are the first response"
        );
        assert_eq!(jobs(&s, "key-zhang").await, before + 1);
    }
}

/// A failed write leaves its key free; a refused caller's key is never looked at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_give_the_key_back() {
    let (_store, engine) = fresh_engine();
    let s = Server::start(engine, &KEYS).await;
    use reqwest::Method as M;
    let bad = upload(&[("x.md", "---\nid: [unclosed\n---\n".into())]);
    let good = upload(&[("g.md", doc("note-g", "1", "Dingoes howl."))]);
    let r = s
        .keyed(M::POST, "/v1/documents", "key-zhang", "k1", Some(&bad))
        .await;
    assert!((400..500).contains(&r.status), "{}", r.body);
    let r = s
        .keyed(M::POST, "/v1/documents", "key-zhang", "k1", Some(&good))
        .await;
    assert_eq!(
        r.status, 200,
        "the failed write gave its key back: {}",
        r.body
    );
    assert!(!replayed(&r));
    // Deleting what is not there (or not the caller's): 404, and the key stays free.
    let r = s
        .keyed(M::DELETE, "/v1/documents/nope", "key-zhang", "k2", None)
        .await;
    assert_eq!(r.status, 404);
    let r = s
        .keyed(M::POST, "/v1/documents", "key-zhang", "k2", Some(&good))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // Not an admin: refused as always, whatever the key.
    let r = s
        .keyed(M::POST, "/v1/documents", "key-u7", "k3", Some(&good))
        .await;
    assert_eq!(
        (r.status, r.body["code"].as_str()),
        (403, Some("admin_required"))
    );
    let r = s
        .keyed(M::POST, "/v1/documents", "key-u7", "k3", Some(&good))
        .await;
    assert_eq!(r.status, 403);
    assert!(!replayed(&r));
    // No key at all.
    let r = s
        .keyed(M::POST, "/v1/documents", "no-such-key", "k4", Some(&good))
        .await;
    assert_eq!(r.status, 401);
    s.stop().await;
}

/// Keys are the principal's own: another principal sending the same key (randomised
/// keys, bodies and routes) gets exactly what it gets with a key nobody ever used —
/// whole responses, masked only for per-request fields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principals_key_reads_like_a_new_one() {
    let seed: u64 = std::env::var("DOSSIER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    use reqwest::Method as M;
    for round in 0..4 {
        // Two fresh stores, so that both of acme's writes start from the same state.
        let (_a, ea) = fresh_engine();
        let (_b, eb) = fresh_engine();
        let (sa, sb) = (
            Server::start(ea, &KEYS).await,
            Server::start(eb, &KEYS).await,
        );
        let idem: String = (0..rng.gen_range(1..40))
            .map(|_| char::from(rng.gen_range(0x21u8..=0x7e)))
            .collect();
        let fresh: String = format!("never-used-{}", rng.gen::<u64>());
        let id = format!("n{}", rng.gen::<u32>());
        let zhang_body = upload(&[("z.md", doc(&id, "1", "Shop side text."))]);
        // zhang uses the key on `sa` only.
        let r = sa
            .keyed(
                M::POST,
                "/v1/documents",
                "key-zhang",
                &idem,
                Some(&zhang_body),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        let acme_doc = format!(
            "---\nid: {id}\nversion: \"1\"\ntitle: Acme {id}\ntenant: acme\n---\n# A\n\nAcme text {round}.\n"
        );
        let (method, path, body) = match round % 3 {
            0 => (
                M::POST,
                "/v1/documents".to_string(),
                Some(upload(&[("a.md", acme_doc)])),
            ),
            1 => (M::DELETE, format!("/v1/documents/{id}"), None),
            _ => (
                M::PUT,
                "/v1/principals/acme-x".to_string(),
                Some(json!({"groups": ["sre"]})),
            ),
        };
        for again in 0..2 {
            let with_theirs = sa
                .keyed(method.clone(), &path, "key-acme", &idem, body.as_ref())
                .await;
            let with_new = sb
                .keyed(
                    method.clone(),
                    &path,
                    "key-acme",
                    &format!("{fresh}-{again}"),
                    body.as_ref(),
                )
                .await;
            if again == 1 {
                // acme's own retry with its own key replays acme's own response.
                assert_eq!(
                    replayed(&with_theirs),
                    (200..300).contains(&with_theirs.status)
                );
                continue;
            }
            assert_eq!(
                masked(&with_theirs, &id),
                masked(&with_new, &id),
                "seed {seed} round {round}: {method} {path}"
            );
        }
        sa.stop().await;
        sb.stop().await;
    }
}

/// Keys live in the store: a new server on it (a restart, another replica) replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_outlive_the_server() {
    let (_store, engine) = fresh_engine();
    let body = upload(&[("k.md", doc("note-k", "1", "Bandicoots forage."))]);
    let s = Server::start(engine.clone(), &KEYS).await;
    let first = s
        .keyed(
            reqwest::Method::POST,
            "/v1/documents",
            "key-zhang",
            "durable",
            Some(&body),
        )
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    s.stop().await;
    let s = Server::start(engine, &KEYS).await;
    let again = s
        .keyed(
            reqwest::Method::POST,
            "/v1/documents",
            "key-zhang",
            "durable",
            Some(&body),
        )
        .await;
    assert!(replayed(&again));
    assert_eq!(again.text, first.text);
    s.stop().await;
}

/// Malformed keys are refused on writes; reads ignore the header; the OpenAPI document
/// declares it on every write and on no read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_keys_reads_and_the_documented_contract() {
    let (_store, engine) = fresh_engine();
    let s = Server::start(engine, &KEYS).await;
    let body = upload(&[("m.md", doc("note-m", "1", "Possums climb."))]);
    let long = "x".repeat(256);
    for bad in ["", " ", "a b", long.as_str()] {
        let r = s
            .send(
                s.client
                    .post(format!("{}/v1/documents", s.base))
                    .header("Idempotency-Key", bad)
                    .json(&body),
                "key-zhang",
            )
            .await;
        assert_eq!(
            (r.status, r.body["code"].as_str()),
            (400, Some("invalid_request")),
            "{bad:?}: {}",
            r.body
        );
    }
    let r = s
        .send(
            s.client
                .post(format!("{}/v1/documents", s.base))
                .header("Idempotency-Key", b"caf\xc3\xa9".as_slice())
                .json(&body),
            "key-zhang",
        )
        .await;
    assert_eq!(r.status, 400);
    // A read with a key: answered as a read, twice, never replayed.
    for _ in 0..2 {
        let r = s
            .keyed(
                reqwest::Method::POST,
                "/v1/search",
                "key-u7",
                "read-key",
                Some(&json!({"query": "退货", "mode": "bm25"})),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(!replayed(&r));
    }
    let doc = s.get("/openapi.json", None).await.body;
    let mut writes = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let m: reqwest::Method = method.to_uppercase().parse().unwrap();
            let has = op["parameters"].as_array().is_some_and(|ps| {
                ps.iter()
                    .any(|p| p["name"] == "Idempotency-Key" && p["in"] == "header")
            });
            let write = dossier_server::idempotency::is_write(&m, path);
            assert_eq!(has, write, "{method} {path}");
            if write {
                writes += 1;
                for status in ["409", "422"] {
                    assert!(
                        op["responses"][status].is_object(),
                        "{method} {path} {status}"
                    );
                }
            }
        }
    }
    assert!(writes >= 9, "{writes} write operations documented");
    s.stop().await;
}
