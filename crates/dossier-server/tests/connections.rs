//! Connections, slow clients and shutdown (issue 39): every defect the security probe
//! found has a test named after it. Timeouts are set short in each test's
//! configuration; the only timing asserted is "closed within a generous bound".

mod common;

use std::time::{Duration, Instant};

use common::{shared_engine, Key, Server};
use dossier_engine::dossier_store::audit::{digest, AuditQuery};
use dossier_engine::dossier_store::{AuditEntry, AuditRecord};
use dossier_server::{audit, ConnectionLimits, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const KEYS: [Key; 1] = [("key-u7", "u7", false)];

/// Far longer than any timeout these tests set: a connection still open after it
/// was never going to be closed.
const BOUND: Duration = Duration::from_secs(15);

fn config(limits: ConnectionLimits) -> ServerConfig {
    ServerConfig {
        connections: limits,
        ..common::unthrottled()
    }
}

fn addr(s: &Server) -> String {
    s.base.trim_start_matches("http://").to_string()
}

/// Reads until the server closes the connection (EOF or reset), within [`BOUND`].
/// Returns what was read, or None if the connection was still open at the bound.
async fn read_until_closed(c: &mut TcpStream) -> Option<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let done = tokio::time::timeout(BOUND, async {
        loop {
            match c.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    done.ok()
        .map(|_| String::from_utf8_lossy(&got).into_owned())
}

/// A connection from `source` (an address on the loopback) to the server.
async fn connect_from(source: &str, to: &str) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(format!("{source}:0").parse().unwrap())?;
    socket.connect(to.parse().unwrap()).await
}

const HEALTH: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";

/// Defect: connections never timed out. A connection that sends nothing, and a
/// keep-alive connection after its response, are both closed after the idle timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_after_the_idle_timeout() {
    let s = Server::start_with(
        shared_engine(),
        &KEYS,
        config(ConnectionLimits {
            idle_timeout: Duration::from_secs(1),
            ..ConnectionLimits::default()
        }),
        None,
    )
    .await;
    let mut silent = TcpStream::connect(addr(&s)).await.unwrap();
    let mut kept = TcpStream::connect(addr(&s)).await.unwrap();
    kept.write_all(HEALTH).await.unwrap();
    // A request that takes a while: hyper waits to read the next request while this
    // one still runs (no deadline then); its end must arm the idle deadline (the
    // release build kept such connections open).
    let mut searched = TcpStream::connect(addr(&s)).await.unwrap();
    let body = serde_json::to_vec(&serde_json::json!({"query": "退货 政策"})).unwrap();
    let head = format!(
        "POST /v1/search HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-u7\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    searched.write_all(head.as_bytes()).await.unwrap();
    searched.write_all(&body).await.unwrap();
    let started = Instant::now();
    let silent = read_until_closed(&mut silent).await;
    assert_eq!(
        silent.as_deref(),
        Some(""),
        "a silent connection stayed open"
    );
    let kept = read_until_closed(&mut kept).await;
    let kept = kept.expect("an idle keep-alive connection stayed open");
    assert!(kept.starts_with("HTTP/1.1 200"), "{kept}");
    let searched = read_until_closed(&mut searched).await;
    let searched = searched.expect("a keep-alive connection after a search stayed open");
    assert!(searched.starts_with("HTTP/1.1 200"), "{searched}");
    assert!(started.elapsed() < BOUND);
    s.stop().await;
}

/// Defect: a partial request header held its connection forever. A client that sends
/// part of a head and then trickles a byte at a time is closed after the header
/// timeout, although it is never idle (the idle timeout is far longer here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_request_head_is_closed_after_the_header_timeout() {
    let s = Server::start_with(
        shared_engine(),
        &KEYS,
        config(ConnectionLimits {
            header_read_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(120),
            ..ConnectionLimits::default()
        }),
        None,
    )
    .await;
    let c = TcpStream::connect(addr(&s)).await.unwrap();
    let (mut r, mut w) = c.into_split();
    w.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let trickle = tokio::spawn(async move {
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if w.write_all(b"X-Slow: y\r\n").await.is_err() {
                break;
            }
        }
    });
    let got = tokio::time::timeout(BOUND, async {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf).await;
        buf
    })
    .await;
    trickle.abort();
    let got = got.expect("a partial head kept its connection open");
    assert!(
        !String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"),
        "the head was never finished, yet answered"
    );
    s.stop().await;
}

/// Defect: a partial body held its connection forever. A body that does not arrive
/// within the body timeout gets `408 request_timeout` and the connection is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_body_gets_408_and_its_connection_closed() {
    let s = Server::start_with(
        shared_engine(),
        &KEYS,
        config(ConnectionLimits {
            body_read_timeout: Duration::from_secs(1),
            ..ConnectionLimits::default()
        }),
        None,
    )
    .await;
    let mut c = TcpStream::connect(addr(&s)).await.unwrap();
    c.write_all(
        b"POST /v1/search HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-u7\r\n\
          Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"query\": \"",
    )
    .await
    .unwrap();
    let got = read_until_closed(&mut c)
        .await
        .expect("a slow body kept its connection open");
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(got.contains("request_timeout"), "{got}");
    assert!(
        got.to_ascii_lowercase().contains("connection: close"),
        "{got}"
    );
    assert!(got.contains("x-request-id"), "{got}");
    s.stop().await;
}

/// Defect: one client could open connections until the process ran out of
/// descriptors. Past the per-address cap a connection is refused at once (a 503, or
/// closed), while a client from another address is still served, and the address is
/// served again once its connections close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_address_cap_refuses_excess_connections_while_another_address_is_served() {
    let s = Server::start_with(
        shared_engine(),
        &KEYS,
        config(ConnectionLimits {
            max_connections_per_address: 4,
            ..ConnectionLimits::default()
        }),
        None,
    )
    .await;
    let to = addr(&s);
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut c = connect_from("127.0.0.1", &to).await.unwrap();
        // A full exchange makes sure the server has accepted and counted it.
        c.write_all(HEALTH).await.unwrap();
        let mut buf = [0u8; 1024];
        let n = c.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
        held.push(c);
    }
    let mut over = connect_from("127.0.0.1", &to).await.unwrap();
    let _ = over.write_all(HEALTH).await;
    let refused = read_until_closed(&mut over)
        .await
        .expect("a connection over the cap was left open");
    assert!(
        refused.is_empty() || refused.starts_with("HTTP/1.1 503"),
        "{refused}"
    );
    assert!(!refused.contains("200 OK"), "{refused}");

    let mut other = connect_from("127.0.0.2", &to).await.unwrap();
    other.write_all(HEALTH).await.unwrap();
    let mut buf = [0u8; 1024];
    let n = other.read(&mut buf).await.unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );

    drop(held);
    let deadline = Instant::now() + BOUND;
    loop {
        let mut c = connect_from("127.0.0.1", &to).await.unwrap();
        let _ = c.write_all(HEALTH).await;
        let mut buf = [0u8; 1024];
        let n = c.read(&mut buf).await.unwrap_or(0);
        if buf[..n].starts_with(b"HTTP/1.1 200") {
            break;
        }
        assert!(Instant::now() < deadline, "the address stayed refused");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.stop().await;
}

/// Splits a raw HTTP/1.1 response into its head (lower-cased) and body.
fn split_response(text: &str) -> (String, &str) {
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text, ""));
    (head.to_ascii_lowercase(), body)
}

/// Defect: SIGTERM under load left clients with EOF and no response. Requests in
/// flight when shutdown begins (here: their bodies still arriving) are answered in
/// full, with `Connection: close`; a request sent on a keep-alive connection just as
/// shutdown begins is answered too; an idle keep-alive connection is closed; and
/// serving returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_in_flight_at_shutdown_gets_its_full_response() {
    let mut config = common::unthrottled();
    config.limits.expensive_concurrency = 64;
    let s = Server::start_with(shared_engine(), &KEYS, config, None).await;
    let to = addr(&s);
    let body = serde_json::to_vec(&serde_json::json!({"query": "退货 政策"})).unwrap();
    let head = format!(
        "POST /v1/search HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-u7\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let half = body.len() / 2;
    let mut in_flight = Vec::new();
    for _ in 0..16 {
        let mut c = TcpStream::connect(&to).await.unwrap();
        c.write_all(head.as_bytes()).await.unwrap();
        c.write_all(&body[..half]).await.unwrap();
        in_flight.push(c);
    }
    // Keep-alive connections that have had one answer each: one stays idle, the other
    // sends its next request right after the signal.
    let mut idle = TcpStream::connect(&to).await.unwrap();
    let mut next = TcpStream::connect(&to).await.unwrap();
    for c in [&mut idle, &mut next] {
        c.write_all(HEALTH).await.unwrap();
        let mut buf = [0u8; 1024];
        let n = c.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    let stopped = tokio::spawn(s.shutdown());
    tokio::time::sleep(Duration::from_millis(50)).await;
    next.write_all(HEALTH).await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    for c in &mut in_flight {
        c.write_all(&body[half..]).await.unwrap();
    }
    for (i, c) in in_flight.iter_mut().enumerate() {
        let got = read_until_closed(c)
            .await
            .unwrap_or_else(|| panic!("request {i} was left open"));
        let (head, body) = split_response(&got);
        assert!(head.starts_with("http/1.1 200"), "request {i}: {got}");
        assert!(head.contains("connection: close"), "request {i}: {head}");
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("request {i}: no content-length: {head}"));
        assert_eq!(body.len(), length, "request {i}: a cut response");
        assert!(serde_json::from_str::<serde_json::Value>(body).is_ok());
    }
    let got = read_until_closed(&mut next)
        .await
        .expect("the request sent at shutdown was left open");
    assert!(
        got.starts_with("HTTP/1.1 200"),
        "the request sent at shutdown: {got:?}"
    );
    let got = read_until_closed(&mut idle)
        .await
        .expect("an idle connection kept shutdown waiting");
    assert_eq!(got, "");
    let served = tokio::time::timeout(BOUND, stopped)
        .await
        .expect("serving did not return");
    served.unwrap().unwrap().unwrap();
}

fn audit_record(rid: &str, finished_at: chrono::DateTime<chrono::Utc>) -> AuditRecord {
    AuditRecord {
        entry: AuditEntry {
            request_id: rid.into(),
            finished_at,
            principal: "u7".into(),
            tenant: "shop".into(),
            groups: vec!["customer".into()],
            kbs: None,
            route: "/v1/search".into(),
            now: None,
            as_of: None,
            mode: Some("bm25".into()),
            status: "ok".into(),
            http_status: 200,
            question_blake3: digest(rid),
            question: None,
            cached: false,
            tools: vec![],
            evidence: vec![],
            citations: vec![],
            reasons: vec![],
            has_trace: true,
        },
        trace: Some(format!("{{\"of\": \"{rid}\"}}").into_bytes()),
    }
}

/// The request ids of every entry the store keeps, newest first.
fn kept_ids(catalog: &dyn dossier_engine::dossier_store::CatalogBackend) -> Vec<String> {
    let q = AuditQuery {
        limit: 1000,
        ..AuditQuery::default()
    };
    let page = catalog.audit_list(&q).unwrap();
    page.entries.into_iter().map(|e| e.request_id).collect()
}

/// The request ids in every export file under `dir`, and the traces they carry.
fn exported(dir: &std::path::Path) -> (Vec<String>, usize) {
    let (mut ids, mut traces) = (Vec::new(), 0);
    let Ok(files) = std::fs::read_dir(dir) else {
        return (ids, traces);
    };
    for f in files {
        let path = f.unwrap().path();
        assert_eq!(path.extension().unwrap(), "jsonl", "{path:?}");
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            ids.push(v["request_id"].as_str().unwrap().to_string());
            if v["trace"]["of"] == v["request_id"] {
                traces += 1;
            }
        }
    }
    ids.sort();
    (ids, traces)
}

/// Defect: the embedded audit log grew without bound under load (807 MB, 365,729
/// entries in two minutes), because retention was by age only. Entries past the age
/// limit or past the newest `max_entries` are written to a JSONL file (with their
/// traces) and only then deleted; the newest stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_retention_exports_then_deletes() {
    let (_dir, engine) = common::fresh_engine();
    let export = tempfile::tempdir().unwrap();
    let export_dir = export.path().join("audit-export");
    let now = chrono::Utc::now();
    let mut records: Vec<AuditRecord> = (0..10)
        .map(|i| audit_record(&format!("recent-{i}"), now - chrono::Duration::minutes(i)))
        .collect();
    records.push(audit_record("old-a", now - chrono::Duration::days(100)));
    records.push(audit_record("old-b", now - chrono::Duration::days(91)));
    let (e, dir) = (engine.clone(), export_dir.clone());
    let (done, kept) = tokio::task::spawn_blocking(move || {
        let catalog = e.store().catalog();
        catalog.audit_append(&records).unwrap();
        let policy = audit::Retention {
            days: 90,
            max_entries: 5,
            export_dir: Some(dir),
        };
        let done = audit::retain(catalog, &policy, now).unwrap();
        (done, kept_ids(catalog))
    })
    .await
    .unwrap();
    assert_eq!(
        kept,
        ["recent-0", "recent-1", "recent-2", "recent-3", "recent-4"]
    );
    assert_eq!(done.exported, 7);
    assert_eq!(done.pruned.entries, 7);
    let (ids, traces) = exported(&export_dir);
    let mut want: Vec<String> = ["old-a", "old-b"]
        .iter()
        .map(|s| s.to_string())
        .chain((5..10).map(|i| format!("recent-{i}")))
        .collect();
    want.sort();
    assert_eq!(ids, want);
    assert_eq!(traces, 7, "each exported entry carries its trace");
    // Nothing left to delete: no empty file is written.
    let e = engine.clone();
    let dir = export_dir.clone();
    let again = tokio::task::spawn_blocking(move || {
        let policy = audit::Retention {
            days: 90,
            max_entries: 5,
            export_dir: Some(dir),
        };
        audit::retain(e.store().catalog(), &policy, now).unwrap()
    })
    .await
    .unwrap();
    assert_eq!((again.exported, again.pruned.entries), (0, 0));
    assert_eq!(std::fs::read_dir(&export_dir).unwrap().count(), 1);
}

/// The server applies the cap itself: under a stream of searches the audit log stays
/// at most `audit_max_entries` (plus what arrived since the last pass) and what it
/// deleted is in the export directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_caps_its_audit_log_and_exports_what_it_deletes() {
    let (_dir, engine) = common::fresh_engine();
    let export = tempfile::tempdir().unwrap();
    let s = Server::start_with(
        engine.clone(),
        &KEYS,
        ServerConfig {
            audit_max_entries: 3,
            audit_export_dir: Some(export.path().to_path_buf()),
            audit_retention_every: Duration::from_millis(100),
            ..common::unthrottled()
        },
        None,
    )
    .await;
    for i in 0..8 {
        let r = s
            .post(
                "/v1/search",
                "key-u7",
                serde_json::json!({"query": format!("退货 {i}")}),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    let started = Instant::now();
    loop {
        let e = engine.clone();
        let kept = tokio::task::spawn_blocking(move || kept_ids(e.store().catalog()))
            .await
            .unwrap();
        let (ids, _) = exported(export.path());
        if kept.len() <= 3 && ids.len() + kept.len() == 8 {
            break;
        }
        assert!(started.elapsed() < BOUND, "kept {kept:?}, exported {ids:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.stop().await;
}
