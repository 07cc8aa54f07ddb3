//! Live record sources over HTTP, through every route that reads a record: the
//! randomised two-tenant world (see `common::world`) with each tenant's `orders` table
//! served by a local HTTP service instead of a snapshot. For a reader, another owner's
//! order and another tenant's order answer exactly as an order that does not exist —
//! whole responses, masked as in the oracle test — whether the service filters by the
//! caller it is told about or forgets to (the program checks the row again). When the
//! service fails, every key fails alike (`502 source_unavailable`), and a question about
//! the reader's own order is answered partially, naming the order it could not read.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use common::masks::masked;
use common::world::{seeds, World};
use common::{urlencode, Reply, Server};
use dossier_sources::{ConnectionSpec, Sources, SourcesSpec};
use serde_json::{json, Value};

const READER: &str = "key-reader";

/// How the orders service behaves.
const FILTERS: u8 = 0;
/// Answers every key it has, whoever asks: the program's own check must hold.
const LEAKS: u8 = 1;
const FAILS: u8 = 2;

/// The orders service: `GET /{tenant}/orders/{key}`, rows from the world's snapshot.
fn orders_service(rows: BTreeMap<(String, String), Value>, mode: Arc<AtomicU8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap_or_default();
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            let (mut principal, mut groups) = (String::new(), String::new());
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = h.split_once(':') {
                    match k.to_ascii_lowercase().as_str() {
                        "x-dossier-principal" => principal = v.trim().to_string(),
                        "x-dossier-groups" => groups = v.trim().to_string(),
                        _ => {}
                    }
                }
            }
            let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
            let row = match parts.as_slice() {
                [tenant, "orders", key] => rows.get(&(tenant.to_string(), key.to_string())),
                _ => None,
            };
            let (status, body) = match (mode.load(Ordering::SeqCst), row) {
                (FAILS, _) => (500, "{\"error\":\"down\"}".to_string()),
                (_, None) => (404, "{}".to_string()),
                (FILTERS, Some(r))
                    if r["owner"] != principal.as_str()
                        && !groups.split(',').any(|g| g == "secret") =>
                {
                    (404, "{}".to_string())
                }
                (_, Some(r)) => (200, r.to_string()),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// Turns each tenant's `orders` snapshot into a live table and returns its rows.
fn make_live(corpus: &Path) -> BTreeMap<(String, String), Value> {
    let mut rows = BTreeMap::new();
    for tenant in ["ta", "tb"] {
        let dir = corpus.join("records").join(tenant);
        let text = std::fs::read_to_string(dir.join("orders.jsonl")).unwrap();
        for line in text.lines() {
            let row: Value = serde_json::from_str(line).unwrap();
            let key = row["order_id"].as_str().unwrap().to_string();
            rows.insert((tenant.to_string(), key), row);
        }
        // A live table's schema stands alone: its rows are the service's.
        std::fs::remove_file(dir.join("orders.jsonl")).unwrap();
        let schema = std::fs::read_to_string(dir.join("orders.schema.yaml")).unwrap();
        std::fs::write(
            dir.join("orders.schema.yaml"),
            format!(
                "{schema}key_shapes: [O-9999]\nsource: {{kind: http, connection: orders_{tenant}, path: \"/orders/{{key}}\", timeout_ms: 2000}}\n"
            ),
        )
        .unwrap();
    }
    rows
}

struct Fixture {
    world: World,
    server: Server,
    mode: Arc<AtomicU8>,
    _dir: tempfile::TempDir,
}

async fn fixture(seed: u64) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    let world = World::write(&corpus, seed);
    let rows = make_live(&corpus);
    let mode = Arc::new(AtomicU8::new(FILTERS));
    let url = orders_service(rows, mode.clone());
    let engine = common::hash_engine(&dir.path().join("store"), &[corpus]);
    let conn = |tenant: &str| ConnectionSpec {
        // The breaker rests briefly: the failing phase below is followed by a good one.
        breaker_cooldown_ms: Some(200),
        ..ConnectionSpec::to(format!("{url}/{tenant}"))
    };
    let spec = SourcesSpec {
        connections: [
            ("orders_ta".to_string(), conn("ta")),
            ("orders_tb".to_string(), conn("tb")),
        ]
        .into(),
    };
    engine.set_record_sources(Arc::new(Sources::new(&spec, []).unwrap()));
    let server = Server::start_with(
        Arc::new(engine),
        &[(READER, "reader", false)],
        common::unthrottled(),
        None,
    )
    .await;
    Fixture {
        world,
        server,
        mode,
        _dir: dir,
    }
}

/// Every request that reads order `key`.
async fn reads(s: &Server, key: &str) -> Vec<(&'static str, Reply)> {
    let question =
        json!({"question": format!("What is the status of order {key}?"), "now": "2026-11-30"});
    let mcp = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "record_lookup", "arguments": {"table": "orders", "key": key}}});
    let chat = json!({"model": "dossier", "messages": [{"role": "user",
        "content": format!("What is the status of order {key}?")}]});
    vec![
        (
            "GET /v1/records/orders/{key}",
            s.get(&format!("/v1/records/orders/{}", urlencode(key)), READER)
                .await,
        ),
        ("POST /v1/ask", s.post("/v1/ask", READER, question).await),
        ("POST /mcp record_lookup", s.post("/mcp", READER, mcp).await),
        (
            "POST /v1/chat/completions",
            s.post("/v1/chat/completions", READER, chat).await,
        ),
    ]
}

/// `hidden` and a missing key of its shape read the same through every route.
async fn same(f: &mut Fixture, hidden: &str, phase: &str) -> Vec<u16> {
    let missing = f.world.missing_like(hidden);
    let a = reads(&f.server, hidden).await;
    let b = reads(&f.server, &missing).await;
    let mut statuses = Vec::new();
    for ((what, ra), (_, rb)) in a.iter().zip(&b) {
        assert_eq!(
            masked(ra, hidden),
            masked(rb, &missing),
            "seed {} ({phase}): {what} tells {hidden:?} (exists, not the reader's) from {missing:?} (does not exist)",
            f.world.seed
        );
        statuses.push(ra.status);
    }
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_order_not_yours_reads_as_one_that_does_not_exist() {
    for seed in seeds(2) {
        let mut f = fixture(seed).await;
        let w = f.world.clone();
        // The reader's own order is read live: the pairs below compare real reads.
        let own = f
            .server
            .get(&format!("/v1/records/orders/{}", w.own_key), READER)
            .await;
        assert_eq!(own.status, 200, "seed {seed}: {}", own.text);
        assert_eq!(own.body["fields"]["status"], "shipped", "{}", own.text);
        let own_question = json!({"question": format!("What is the status of order {}?", w.own_key), "now": "2026-11-30"});
        let first = f.server.post("/v1/ask", READER, own_question.clone()).await;
        assert_ne!(first.body["status"], "unavailable", "{}", first.text);
        assert!(first.text.contains("shipped"), "{}", first.text);

        for (mode, phase) in [
            (FILTERS, "the service filters"),
            (LEAKS, "the service leaks"),
        ] {
            f.mode.store(mode, Ordering::SeqCst);
            for k in &w.hidden_keys {
                let statuses = same(&mut f, k, phase).await;
                assert_eq!(statuses[0], 404, "seed {seed} ({phase})");
            }
        }

        // The service fails: every key fails the same way, none reads as missing.
        f.mode.store(FAILS, Ordering::SeqCst);
        for k in &w.hidden_keys {
            let statuses = same(&mut f, k, "the service fails").await;
            assert_eq!(statuses[0], 502, "seed {seed}");
        }
        let r = f
            .server
            .get(&format!("/v1/records/orders/{}", w.own_key), READER)
            .await;
        assert_eq!(r.status, 502, "{}", r.text);
        assert_eq!(r.body["code"], "source_unavailable", "{}", r.text);
        // The same question as before: a live answer is never served from the cache.
        let asked = f.server.post("/v1/ask", READER, own_question).await;
        assert_eq!(asked.header("x-dossier-cache"), Some("miss"));
        assert_eq!(asked.status, 200, "{}", asked.text);
        assert!(
            matches!(
                asked.body["status"].as_str(),
                Some("partial" | "insufficient_evidence")
            ),
            "{}",
            asked.text
        );
        assert!(!asked.text.contains("shipped"), "{}", asked.text);
        assert!(
            asked.text.contains(&w.own_key) && asked.text.contains("could not be read"),
            "the answer names the order it could not read: {}",
            asked.text
        );
        let steps = asked.body["trace"]["steps"].as_array().unwrap();
        let record = steps.iter().find(|s| s["action"] == "record").unwrap();
        assert!(
            matches!(record["status"].as_str(), Some("error" | "timeout")),
            "{record}"
        );

        // Back up, after the breaker's rest: read live again.
        f.mode.store(FILTERS, Ordering::SeqCst);
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let again = f
            .server
            .get(&format!("/v1/records/orders/{}", w.own_key), READER)
            .await;
        assert_eq!(again.status, 200, "{}", again.text);
        f.server.stop().await;
    }
}
