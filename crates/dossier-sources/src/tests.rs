//! The bounded-read rules against a local HTTP stub: identity sent, the row checked
//! again, "not yours" read as "missing", one retry, the breaker and its rest.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// A one-thread HTTP/1.1 stub: answers `GET /orders/<key>` from `answer(key)` and
/// remembers every request line and its `X-Dossier-Principal`.
struct Stub {
    url: String,
    requests: Arc<Mutex<Vec<(String, String)>>>,
    hits: Arc<AtomicUsize>,
}

fn stub(answer: fn(&str) -> (u16, String)) -> Stub {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let hits = Arc::new(AtomicUsize::new(0));
    let (seen, count) = (requests.clone(), hits.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            count.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            let mut principal = String::new();
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("x-dossier-principal:") {
                    principal = v.trim().to_string();
                }
            }
            let key = path.rsplit('/').next().unwrap_or("").to_string();
            seen.lock().push((path, principal));
            let (status, body) = answer(&key);
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Stub {
        url,
        requests,
        hits,
    }
}

fn orders(owner_field: Option<&str>) -> RecordSchema {
    RecordSchema {
        table: "orders".into(),
        tenant: "shop".into(),
        key: "order_id".into(),
        owner_field: owner_field.map(str::to_string),
        read_groups: vec!["support".into()],
        date_fields: vec![],
        links: vec![],
        sensitive: vec![],
        source: Some(RecordSource::Http {
            connection: "shop".into(),
            path: "/orders/{key}".into(),
            timeout_ms: Some(2_000),
        }),
        key_shapes: vec![],
    }
}

fn sources(url: &str, cooldown_ms: u64) -> Sources {
    let spec = SourcesSpec {
        connections: [(
            "shop".to_string(),
            ConnectionSpec {
                breaker_cooldown_ms: Some(cooldown_ms),
                ..ConnectionSpec::to(url)
            },
        )]
        .into(),
    };
    Sources::new(&spec, []).unwrap()
}

const U7: Reader = Reader {
    principal: "u7",
    tenant: "shop",
    groups: &[],
};

fn rows(key: &str) -> (u16, String) {
    match key {
        "A1" => (
            200,
            r#"{"order_id":"A1","owner":"u7","state":"signed"}"#.into(),
        ),
        // The service forgot its own filter: the program's second check holds.
        "B2" => (200, r#"{"order_id":"B2","owner":"u8"}"#.into()),
        // A row for another key than the one asked.
        "C3" => (200, r#"{"order_id":"Z9","owner":"u7"}"#.into()),
        "D4" => (403, "{}".into()),
        "E5" => (200, "[1,2]".into()),
        "F6" => (400, "{}".into()),
        _ => (404, "{}".into()),
    }
}

#[test]
fn identity_is_sent_and_the_row_is_checked_again() {
    let s = stub(rows);
    let src = sources(&s.url, 1_000);
    let schema = orders(Some("owner"));
    match src.fetch(&schema, "A1", &U7).unwrap() {
        Fetched::Row(r) => assert_eq!(r["state"], "signed"),
        other => panic!("{other:?}"),
    }
    for key in ["B2", "C3", "D4", "nope"] {
        assert_eq!(
            src.fetch(&schema, key, &U7).unwrap(),
            Fetched::Missing,
            "{key}"
        );
    }
    // A support agent reads every row.
    let support = ["support".to_string()];
    let agent = Reader {
        principal: "s1",
        tenant: "shop",
        groups: &support,
    };
    assert!(matches!(
        src.fetch(&schema, "B2", &agent).unwrap(),
        Fetched::Row(_)
    ));
    let seen = s.requests.lock().clone();
    assert!(seen.iter().take(5).all(|(_, p)| p == "u7"), "{seen:?}");
    assert_eq!(seen.last().unwrap().1, "s1");
    // A non-object or a 4xx other than "not there" is a failure, not a missing row.
    assert!(matches!(
        src.fetch(&schema, "E5", &U7),
        Err(Unavailable::Failed(_))
    ));
    assert!(matches!(
        src.fetch(&schema, "F6", &U7),
        Err(Unavailable::Failed(_))
    ));
}

#[test]
fn a_key_cannot_leave_its_path_segment() {
    let s = stub(rows);
    let src = sources(&s.url, 1_000);
    let _ = src.fetch(&orders(Some("owner")), "../admin?all=1#x", &U7);
    let seen = s.requests.lock().clone();
    assert_eq!(seen[0].0, "/orders/..%2Fadmin%3Fall%3D1%23x", "{seen:?}");
}

#[test]
fn a_failing_source_is_retried_once_then_rests_behind_its_breaker() {
    let s = stub(|_| (503, "{}".into()));
    let src = sources(&s.url, 300);
    let schema = orders(Some("owner"));
    for n in 1..=BREAKER_THRESHOLD as usize {
        assert!(matches!(
            src.fetch(&schema, "A1", &U7),
            Err(Unavailable::Failed(_))
        ));
        // One retry of a transient failure per read.
        assert_eq!(s.hits.load(Ordering::SeqCst), 2 * n);
    }
    // Open: refused without a call.
    let refused = src.fetch(&schema, "A1", &U7).unwrap_err();
    assert!(refused.message().contains("in a row"), "{refused:?}");
    assert_eq!(
        s.hits.load(Ordering::SeqCst),
        2 * BREAKER_THRESHOLD as usize
    );
    // Rested: one read is let through, and its failure opens the breaker again at once.
    std::thread::sleep(Duration::from_millis(350));
    assert!(src.fetch(&schema, "A1", &U7).is_err());
    assert_eq!(
        s.hits.load(Ordering::SeqCst),
        2 * BREAKER_THRESHOLD as usize + 2
    );
    let again = src.fetch(&schema, "A1", &U7).unwrap_err();
    assert!(again.message().contains("in a row"), "{again:?}");
}

#[test]
fn a_success_closes_the_breaker() {
    let s = stub(rows);
    let src = sources(&s.url, 60_000);
    let schema = orders(Some("owner"));
    // Two failures (a bad answer each), then a success: the count starts again.
    for _ in 0..2 {
        assert!(src.fetch(&schema, "E5", &U7).is_err());
    }
    assert!(src.fetch(&schema, "A1", &U7).is_ok());
    for _ in 0..2 {
        assert!(src.fetch(&schema, "E5", &U7).is_err());
    }
    assert!(src.fetch(&schema, "A1", &U7).is_ok());
}

#[test]
fn a_hanging_source_times_out() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().take(4).collect();
        std::thread::sleep(Duration::from_secs(5));
        drop(held);
    });
    let src = sources(&url, 1_000);
    let mut schema = orders(Some("owner"));
    schema.source = Some(RecordSource::Http {
        connection: "shop".into(),
        path: "/orders/{key}".into(),
        timeout_ms: Some(200),
    });
    let started = Instant::now();
    assert!(matches!(
        src.fetch(&schema, "A1", &U7),
        Err(Unavailable::Timeout(_))
    ));
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[test]
fn connections_come_from_the_file_and_the_environment() {
    let spec: SourcesSpec = serde_norway::from_str(
        "connections:\n  crm: {url: \"http://127.0.0.1:9/api\", timeout_ms: 500}\n",
    )
    .unwrap();
    let env = [
        (
            "DOSSIER_SOURCE_CRM".to_string(),
            "http://127.0.0.1:10/v2".to_string(),
        ),
        (
            "DOSSIER_SOURCE_ORDERS_DB".to_string(),
            "postgres://r@127.0.0.1:1/shop".to_string(),
        ),
        ("UNRELATED".to_string(), "x".to_string()),
    ];
    let src = Sources::new(&spec, env).unwrap();
    assert_eq!(src.names(), ["crm", "orders_db"]);
    assert_eq!(src.connections["crm"].spec.url, "http://127.0.0.1:10/v2");
    // The file's other settings stay.
    assert_eq!(src.connections["crm"].spec.timeout_ms, Some(500));

    let bad = |url: &str, cooldown: Option<u64>| {
        let spec = SourcesSpec {
            connections: [(
                "x".to_string(),
                ConnectionSpec {
                    breaker_cooldown_ms: cooldown,
                    ..ConnectionSpec::to(url)
                },
            )]
            .into(),
        };
        Sources::new(&spec, []).err()
    };
    assert!(bad("ftp://h/x", None).unwrap().contains("must start with"));
    assert!(bad("http://h", Some(0))
        .unwrap()
        .contains("breaker_cooldown_ms"));
    assert!(bad("http://h", Some(3_600_000)).is_some());
    assert!(bad("http://h", Some(5_000)).is_none());
    // An unknown setting is refused, not ignored.
    assert!(serde_norway::from_str::<SourcesSpec>(
        "connections:\n  x: {url: \"http://h\", pasword: y}\n"
    )
    .is_err());
}

#[test]
fn an_unconfigured_or_mismatched_connection_is_unavailable() {
    let src = Sources::none();
    let err = src.fetch(&orders(None), "A1", &U7).unwrap_err();
    assert!(err.message().contains("not configured"), "{err:?}");
    let sql = sources("postgres://r@127.0.0.1:1/shop", 1_000);
    let err = sql.fetch(&orders(None), "A1", &U7).unwrap_err();
    assert!(
        err.message().contains("not a HTTP connection") || err.message().contains("HTTP"),
        "{err:?}"
    );
}
