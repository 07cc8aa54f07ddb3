//! Records served live: the scenario store with `orders` read from a real PostgreSQL
//! (a SQL source binding the key and the caller) and `customers` from a local HTTP
//! stub service (the identity in headers; the service decides) instead of snapshots.
//! Every scenario case holds; u7 cannot tell another customer's order from a missing
//! one; a source that hangs, refuses or is gone yields an honest partial answer naming
//! the missing record, with the tool's `timeout` / `error` status.
//!
//! Needs `DOSSIER_TEST_POSTGRES` (scripts/test runs it in the PostgreSQL pass).

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dossier_agent::{AnswerStatus, ToolStatus};
use dossier_engine::{Engine, RecordLookup};
use dossier_sources::{ConnectionSpec, Sources, SourcesSpec};

/// The customers service: rows by key, readable by `sre` and `support` (as the
/// snapshot's schema says); a mode to make it answer, hang or fail.
struct Crm {
    url: String,
    mode: Arc<AtomicU8>,
    calls: Arc<AtomicUsize>,
}

const ANSWER: u8 = 0;
const HANG: u8 = 1;
const FAIL: u8 = 2;

fn crm(rows: BTreeMap<String, serde_json::Value>) -> Crm {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let mode = Arc::new(AtomicU8::new(ANSWER));
    let calls = Arc::new(AtomicUsize::new(0));
    let (m, c) = (mode.clone(), calls.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (m, c, rows) = (m.clone(), c.clone(), rows.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                reader.read_line(&mut line).unwrap_or_default();
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let mut groups = String::new();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':') {
                        if k.eq_ignore_ascii_case("x-dossier-groups") {
                            groups = v.trim().to_string();
                        }
                    }
                }
                c.fetch_add(1, Ordering::SeqCst);
                let (status, body) = match m.load(Ordering::SeqCst) {
                    HANG => {
                        std::thread::sleep(Duration::from_secs(5));
                        ("200 OK", "{}".to_string())
                    }
                    FAIL => ("503 Service Unavailable", "{}".to_string()),
                    _ => {
                        let key = path.rsplit('/').next().unwrap_or("");
                        let may = groups.split(',').any(|g| g == "sre" || g == "support");
                        match rows.get(key) {
                            Some(row) if may => ("200 OK", row.to_string()),
                            _ => ("404 Not Found", "{}".to_string()),
                        }
                    }
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    Crm { url, mode, calls }
}

fn jsonl(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A database of its own on the test server, holding the scenario's orders.
fn orders_database(tag: &str) -> String {
    let url = std::env::var("DOSSIER_TEST_POSTGRES")
        .expect("DOSSIER_TEST_POSTGRES names a PostgreSQL server (scripts/test starts one)");
    let name = format!("dossier_live_{tag}_{}", std::process::id());
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
        .unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap();
    let db = dossier_engine::dossier_store::testing::with_database(&url, &name);
    let mut c = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    c.batch_execute(
        "CREATE TABLE orders (order_id text PRIMARY KEY, owner text NOT NULL, product text,
             signed_at date, opened boolean, quality_verified boolean)",
    )
    .unwrap();
    for o in jsonl(&common::shared().join("shop/records/orders.jsonl")) {
        let date: chrono::NaiveDate = o["signed_at"].as_str().unwrap().parse().unwrap();
        c.execute(
            "INSERT INTO orders VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &o["order_id"].as_str().unwrap(),
                &o["owner"].as_str().unwrap(),
                &o["product"].as_str().unwrap(),
                &date,
                &o["opened"].as_bool().unwrap(),
                &o["quality_verified"].as_bool().unwrap(),
            ],
        )
        .unwrap();
    }
    db
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// The scenario corpus with orders and customers turned into live tables.
fn live_corpus(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("scenarios");
    copy_dir(&common::shared().join("shop"), &root.join("shop"));
    copy_dir(&common::shared().join("acme"), &root.join("acme"));
    let records = root.join("shop/records");
    let orders = std::fs::read_to_string(records.join("orders.schema.yaml")).unwrap();
    std::fs::write(
        records.join("orders.schema.yaml"),
        format!(
            "{orders}\nkey_shapes: [A999, Z999]\nsource:\n  kind: sql\n  connection: orders_db\n  \
             query: \"SELECT order_id, owner, product, signed_at, opened, quality_verified FROM orders \
             WHERE order_id = :key AND (owner = :principal OR :reads_all)\"\n  timeout_ms: 2000\n"
        ),
    )
    .unwrap();
    std::fs::write(records.join("orders.jsonl"), "").unwrap();
    let customers = std::fs::read_to_string(records.join("customers.schema.yaml")).unwrap();
    std::fs::write(
        records.join("customers.schema.yaml"),
        format!(
            "{customers}\nkey_shapes: [C-9999]\nsource:\n  kind: http\n  connection: crm\n  \
             path: \"/customers/{{key}}\"\n  timeout_ms: 800\n"
        ),
    )
    .unwrap();
    std::fs::write(records.join("customers.jsonl"), "").unwrap();
    root
}

/// The breaker's rest in these tests (the default is 20 s).
const COOLDOWN: Duration = Duration::from_secs(2);

fn sources(orders_db: &str, crm_url: &str) -> Arc<Sources> {
    let conn = |url: &str| ConnectionSpec {
        breaker_cooldown_ms: Some(COOLDOWN.as_millis() as u64),
        ..ConnectionSpec::to(url)
    };
    let spec = SourcesSpec {
        connections: [
            ("orders_db".to_string(), conn(orders_db)),
            ("crm".to_string(), conn(crm_url)),
        ]
        .into(),
    };
    Arc::new(Sources::new(&spec, []).unwrap())
}

fn live_engine(dir: &Path, orders_db: &str, crm: &Crm) -> Engine {
    let corpus = live_corpus(dir);
    let engine = Engine::open(
        dossier_engine::dossier_store::testing::location(&dir.join("store")),
        "e5",
    )
    .expect("e5 model (run scripts/setup-models)");
    let r = engine
        .ingest(&[corpus.join("shop"), corpus.join("acme")], &mut ())
        .unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    engine.set_record_sources(sources(orders_db, &crm.url));
    engine
}

fn customer_rows() -> BTreeMap<String, serde_json::Value> {
    jsonl(&common::shared().join("shop/records/customers.jsonl"))
        .into_iter()
        .map(|r| (r["customer_id"].as_str().unwrap().to_string(), r))
        .collect()
}

#[test]
fn every_scenario_case_holds_with_records_served_live() {
    let dir = tempfile::tempdir().unwrap();
    let db = orders_database("cases");
    let crm = crm(customer_rows());
    let engine = live_engine(dir.path(), &db, &crm);
    let mut failed = Vec::new();
    for case in &common::cases() {
        let own;
        let engine = if case.get("steps").is_some() {
            own = tempfile::tempdir().unwrap();
            &live_engine(own.path(), &db, &crm)
        } else {
            &engine
        };
        let o = common::run_case(engine, None, case);
        if !o.failures.is_empty() {
            failed.push((o.id, o.failures, o.response.answer));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
    assert!(
        crm.calls.load(Ordering::SeqCst) > 0,
        "the customers were read live"
    );
}

#[test]
fn another_customers_order_reads_as_a_missing_one_and_a_failing_source_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let db = orders_database("faults");
    let crm = crm(customer_rows());
    let engine = live_engine(dir.path(), &db, &crm);
    let day = chrono::NaiveDate::from_ymd_opt(2026, 9, 20).unwrap();
    let u7 = engine.scope("u7", day).unwrap();
    // The filter is in the query: A100 (user-1's) and Z999 (none) are both no row.
    assert!(matches!(
        engine.record(&u7, "orders", "A123").unwrap(),
        RecordLookup::Found { .. }
    ));
    for key in ["A100", "Z999"] {
        assert!(
            matches!(
                engine.record(&u7, "orders", key).unwrap(),
                RecordLookup::Missing
            ),
            "{key}"
        );
    }
    let clock = common::Clock {
        now: day,
        as_of: None,
        mode: None,
    };
    let theirs = common::ask(
        &engine,
        None,
        "u7",
        "订单 A100 的耳机还没拆封，能无理由退货吗？",
        clock,
        None,
    );
    let missing = common::ask(
        &engine,
        None,
        "u7",
        "订单 Z999 的耳机还没拆封，能无理由退货吗？",
        clock,
        None,
    );
    assert_eq!(theirs.status, missing.status);
    assert_eq!(
        theirs.answer.replace("A100", "Z999"),
        missing.answer,
        "another customer's order reads like a missing one"
    );
    let seen = |r: &dossier_agent::AskResponse| {
        r.trace
            .steps
            .iter()
            .map(|s| (s.action.clone(), s.status))
            .collect::<Vec<_>>()
    };
    assert_eq!(seen(&theirs), seen(&missing));

    // The customers service hangs: the read times out, the answer is partial and names
    // what is missing.
    let oncall = common::Clock {
        now: chrono::NaiveDate::from_ymd_opt(2026, 11, 30).unwrap(),
        as_of: None,
        mode: None,
    };
    let q = "上周支付网关超时事故影响了哪些高价值客户？这些客户是否也命中过风控异常？负责人和修复动作是什么？";
    for (mode, status) in [(HANG, ToolStatus::Timeout), (FAIL, ToolStatus::Error)] {
        crm.mode.store(mode, Ordering::SeqCst);
        let r = common::ask(&engine, None, "oncall", q, oncall, None);
        let record_steps: Vec<_> = r
            .trace
            .steps
            .iter()
            .filter(|s| s.action == "record")
            .collect();
        assert!(!record_steps.is_empty(), "{:#?}", r.trace.steps);
        // The first reads end as the source did; once its breaker opens, the rest are
        // refused at once (`error`) rather than waited for.
        assert_eq!(record_steps[0].status, status, "{:#?}", record_steps);
        assert!(
            record_steps
                .iter()
                .all(|s| matches!(s.status, ToolStatus::Timeout | ToolStatus::Error)),
            "{:#?}",
            record_steps
        );
        assert_eq!(r.status, AnswerStatus::Partial, "{}", r.answer);
        assert!(
            r.answer.contains("C-1001") || r.gaps.iter().any(|g| g.contains("customers")),
            "{}\n{:?}",
            r.answer,
            r.gaps
        );
        crm.mode.store(ANSWER, Ordering::SeqCst);
        // The breaker may be open after the failures; let it rest.
        std::thread::sleep(COOLDOWN + Duration::from_millis(200));
    }

    // The orders database is gone: u7's question about its own order is not answered
    // as if the order did not exist.
    let gone = sources("postgres://nobody@127.0.0.1:1/none", &crm.url);
    engine.set_record_sources(gone);
    let r = common::ask(
        &engine,
        None,
        "u7",
        "订单 A123 的耳机已拆封，签收 10 天后有杂音，能退吗？",
        clock,
        None,
    );
    let record = r
        .trace
        .steps
        .iter()
        .find(|s| s.action == "record")
        .expect("the order is read first");
    assert!(
        matches!(record.status, ToolStatus::Error | ToolStatus::Timeout),
        "{record:?}"
    );
    assert_ne!(r.status, AnswerStatus::Unavailable, "{}", r.answer);
    assert!(r.answer.contains("A123"), "{}", r.answer);
}
